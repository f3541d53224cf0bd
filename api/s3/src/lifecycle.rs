//! S3 lifecycle configuration: `PutBucketLifecycleConfiguration`, `Get`,
//! `DeleteBucketLifecycle`, checked as S3 checks them, and the
//! `x-amz-expiration` header of an object a rule will expire. The volume
//! keeps the rules and its collection carries them out (see
//! `volume::lifecycle`); transitions between storage classes are not there
//! (this store has one class).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use s3s::dto::{
    AbortIncompleteMultipartUpload, BucketLifecycleConfiguration, DeleteBucketLifecycleInput,
    DeleteBucketLifecycleOutput, ExpirationStatus, GetBucketLifecycleConfigurationInput,
    GetBucketLifecycleConfigurationOutput, LifecycleExpiration, LifecycleRuleAndOperator,
    LifecycleRuleFilter, NoncurrentVersionExpiration, PutBucketLifecycleConfigurationInput,
    PutBucketLifecycleConfigurationOutput, Tag,
};
use s3s::{S3Error, S3Request, S3Response, S3Result, s3_error};
use volume::{
    AndFilter, Candidate, Expiration, FileMeta, Lifecycle, LifecycleRule, NoncurrentExpiration,
    Owner, RuleFilter,
};

use crate::error::object_error;
use crate::object_lock::has_body_check;
use crate::{S3Api, caller, timestamp};

/// Most rules a configuration holds, as S3.
const MOST_RULES: usize = 1000;

/// How long a bucket's rules read here are trusted (another gateway's
/// change applies within it, as S3's own take a while to apply).
const TRUSTED_FOR: Duration = Duration::from_secs(1);

/// Most buckets' rules remembered (past it, all are forgotten).
const MOST_REMEMBERED: usize = 4096;

type Remembered = (Option<Arc<Lifecycle>>, Instant);

/// Buckets' lifecycle rules as this process last read them: every PUT and
/// HEAD of an object asks (for `x-amz-expiration`), and they rarely change.
#[derive(Debug, Clone, Default)]
pub(crate) struct RuleCache(Arc<Mutex<HashMap<(Owner, String), Remembered>>>);

impl RuleCache {
    fn get(&self, key: &(Owner, String)) -> Option<Option<Arc<Lifecycle>>> {
        let entries = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .get(key)
            .filter(|(_, read)| read.elapsed() < TRUSTED_FOR)
            .map(|(rules, _)| rules.clone())
    }

    fn remember(&self, key: (Owner, String), rules: Option<Arc<Lifecycle>>) {
        let mut entries = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= MOST_REMEMBERED {
            entries.clear();
        }
        entries.insert(key, (rules, Instant::now()));
    }
}

fn malformed() -> S3Error {
    s3_error!(
        MalformedXML,
        "The XML you provided was not well-formed or did not validate against our published schema"
    )
}

fn positive(value: Option<i32>, what: &str) -> S3Result<Option<u32>> {
    value
        .map(|value| {
            u32::try_from(value)
                .ok()
                .filter(|value| *value > 0)
                .ok_or_else(|| s3_error!(InvalidArgument, "'{what}' must be a positive integer"))
        })
        .transpose()
}

fn tag_of(tag: &Tag) -> S3Result<(String, String)> {
    match (&tag.key, &tag.value) {
        (Some(key), value) => Ok((key.clone(), value.clone().unwrap_or_default())),
        _ => Err(malformed()),
    }
}

/// A rule's filter, checked: one condition, or `And` alone.
fn filter_of(filter: LifecycleRuleFilter) -> S3Result<RuleFilter> {
    let conditions = usize::from(filter.prefix.is_some())
        + usize::from(filter.tag.is_some())
        + usize::from(filter.object_size_greater_than.is_some())
        + usize::from(filter.object_size_less_than.is_some());
    if conditions > 1 || filter.and.is_some() && conditions > 0 {
        return Err(malformed());
    }
    let and = filter
        .and
        .map(|and| {
            Ok::<_, S3Error>(AndFilter {
                prefix: and.prefix,
                tags: and
                    .tags
                    .unwrap_or_default()
                    .iter()
                    .map(tag_of)
                    .collect::<S3Result<_>>()?,
                size_greater_than: and.object_size_greater_than,
                size_less_than: and.object_size_less_than,
            })
        })
        .transpose()?;
    Ok(RuleFilter {
        prefix: filter.prefix,
        tag: filter.tag.as_ref().map(tag_of).transpose()?,
        size_greater_than: filter.object_size_greater_than,
        size_less_than: filter.object_size_less_than,
        and,
    })
}

/// One rule of a configuration, checked as S3 checks it.
fn rule_of(rule: s3s::dto::LifecycleRule) -> S3Result<LifecycleRule> {
    let enabled = match rule.status.as_str() {
        ExpirationStatus::ENABLED => true,
        ExpirationStatus::DISABLED => false,
        _ => return Err(malformed()),
    };
    if rule.transitions.is_some_and(|list| !list.is_empty())
        || rule
            .noncurrent_version_transitions
            .is_some_and(|list| !list.is_empty())
    {
        return Err(s3_error!(
            NotImplemented,
            "Transitions are not supported: this store has one storage class."
        ));
    }
    // Exactly one of the two (S3 reads a rule with neither as malformed).
    if rule.prefix.is_some() == rule.filter.is_some() {
        return Err(malformed());
    }
    let id = match rule.id {
        Some(id) if id.chars().count() > 255 => {
            return Err(s3_error!(
                InvalidArgument,
                "ID length should not exceed allowed limit of 255"
            ));
        }
        Some(id) if !id.is_empty() => id,
        _ => hex::encode(rand::random::<[u8; 12]>()),
    };
    let expiration = rule
        .expiration
        .map(|expiration| {
            let marker = expiration.expired_object_delete_marker;
            let days = positive(expiration.days, "Days' for Expiration action")?;
            let date_ms = expiration.date.as_ref().map(millis);
            let given = usize::from(days.is_some())
                + usize::from(date_ms.is_some())
                + usize::from(marker.is_some());
            if given != 1 {
                return Err(malformed());
            }
            if date_ms.is_some_and(|date| date % volume::DAY_MS != 0) {
                return Err(s3_error!(InvalidArgument, "'Date' must be at midnight GMT"));
            }
            Ok(Expiration {
                days,
                date_ms,
                expired_object_delete_marker: marker,
            })
        })
        .transpose()?;
    let noncurrent = rule
        .noncurrent_version_expiration
        .map(|noncurrent| {
            if noncurrent.noncurrent_days.is_none() {
                return Err(malformed());
            }
            Ok::<_, S3Error>(NoncurrentExpiration {
                days: positive(noncurrent.noncurrent_days, "NoncurrentDays")?,
                newer_versions: positive(
                    noncurrent.newer_noncurrent_versions,
                    "NewerNoncurrentVersions",
                )?,
            })
        })
        .transpose()?;
    let abort_multipart_days = rule
        .abort_incomplete_multipart_upload
        .map(|abort| {
            positive(abort.days_after_initiation, "DaysAfterInitiation")?.ok_or_else(malformed)
        })
        .transpose()?;
    if expiration.is_none() && noncurrent.is_none() && abort_multipart_days.is_none() {
        return Err(s3_error!(
            InvalidRequest,
            "At least one action needs to be specified in a rule"
        ));
    }
    Ok(LifecycleRule {
        id,
        enabled,
        prefix: rule.prefix,
        filter: rule.filter.map(filter_of).transpose()?,
        expiration,
        noncurrent,
        abort_multipart_days,
    })
}

fn millis(at: &s3s::dto::Timestamp) -> i64 {
    let at = time::OffsetDateTime::from(at.clone());
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

fn tag_dto((key, value): &(String, String)) -> Tag {
    Tag {
        key: Some(key.clone()),
        value: Some(value.clone()),
    }
}

/// A kept rule as S3 answers it: in the shape it was put.
fn rule_dto(rule: &LifecycleRule) -> s3s::dto::LifecycleRule {
    let status = if rule.enabled {
        ExpirationStatus::ENABLED
    } else {
        ExpirationStatus::DISABLED
    };
    s3s::dto::LifecycleRule {
        id: Some(rule.id.clone()),
        status: ExpirationStatus::from(status.to_owned()),
        prefix: rule.prefix.clone(),
        filter: rule.filter.as_ref().map(|filter| LifecycleRuleFilter {
            prefix: filter.prefix.clone(),
            tag: filter.tag.as_ref().map(tag_dto),
            object_size_greater_than: filter.size_greater_than,
            object_size_less_than: filter.size_less_than,
            and: filter.and.as_ref().map(|and| LifecycleRuleAndOperator {
                prefix: and.prefix.clone(),
                tags: (!and.tags.is_empty()).then(|| and.tags.iter().map(tag_dto).collect()),
                object_size_greater_than: and.size_greater_than,
                object_size_less_than: and.size_less_than,
            }),
        }),
        expiration: rule
            .expiration
            .as_ref()
            .map(|expiration| LifecycleExpiration {
                days: expiration.days.and_then(|days| i32::try_from(days).ok()),
                date: expiration.date_ms.map(timestamp),
                expired_object_delete_marker: expiration.expired_object_delete_marker,
            }),
        noncurrent_version_expiration: rule.noncurrent.as_ref().map(|noncurrent| {
            NoncurrentVersionExpiration {
                noncurrent_days: noncurrent.days.and_then(|days| i32::try_from(days).ok()),
                newer_noncurrent_versions: noncurrent
                    .newer_versions
                    .and_then(|count| i32::try_from(count).ok()),
            }
        }),
        abort_incomplete_multipart_upload: rule.abort_multipart_days.map(|days| {
            AbortIncompleteMultipartUpload {
                days_after_initiation: i32::try_from(days).ok(),
            }
        }),
        noncurrent_version_transitions: None,
        transitions: None,
    }
}

impl S3Api {
    pub(crate) async fn put_bucket_lifecycle_configuration_(
        &self,
        req: S3Request<PutBucketLifecycleConfigurationInput>,
    ) -> S3Result<S3Response<PutBucketLifecycleConfigurationOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        if !has_body_check(&req.headers) {
            return Err(s3_error!(
                InvalidRequest,
                "Missing required header for this request: Content-MD5"
            ));
        }
        let input = req.input;
        self.require_bucket(owner, &input.bucket).await?;
        let BucketLifecycleConfiguration { rules } =
            input.lifecycle_configuration.ok_or_else(malformed)?;
        if rules.is_empty() || rules.len() > MOST_RULES {
            return Err(malformed());
        }
        let rules: Vec<LifecycleRule> = rules.into_iter().map(rule_of).collect::<S3Result<_>>()?;
        let mut ids = HashSet::new();
        if !rules.iter().all(|rule| ids.insert(rule.id.as_str())) {
            return Err(s3_error!(
                InvalidArgument,
                "Rule ID must be unique. Found same ID for more than one rule"
            ));
        }
        let lifecycle = Lifecycle { rules };
        self.files
            .set_bucket_lifecycle(owner, &input.bucket, &lifecycle)
            .await
            .map_err(object_error)?;
        self.lifecycles
            .remember((owner, input.bucket.clone()), Some(Arc::new(lifecycle)));
        Ok(S3Response::new(
            PutBucketLifecycleConfigurationOutput::default(),
        ))
    }

    pub(crate) async fn get_bucket_lifecycle_configuration_(
        &self,
        req: S3Request<GetBucketLifecycleConfigurationInput>,
    ) -> S3Result<S3Response<GetBucketLifecycleConfigurationOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let bucket = &req.input.bucket;
        self.require_bucket(owner, bucket).await?;
        let lifecycle = self
            .files
            .bucket_lifecycle(owner, bucket)
            .await
            .map_err(object_error)?
            .ok_or_else(|| {
                s3_error!(
                    NoSuchLifecycleConfiguration,
                    "The lifecycle configuration does not exist"
                )
            })?;
        Ok(S3Response::new(GetBucketLifecycleConfigurationOutput {
            rules: Some(lifecycle.rules.iter().map(rule_dto).collect()),
            transition_default_minimum_object_size: None,
        }))
    }

    pub(crate) async fn delete_bucket_lifecycle_(
        &self,
        req: S3Request<DeleteBucketLifecycleInput>,
    ) -> S3Result<S3Response<DeleteBucketLifecycleOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let bucket = &req.input.bucket;
        self.require_bucket(owner, bucket).await?;
        self.files
            .delete_bucket_config(owner, bucket, Some(volume::ConfigKind::Lifecycle))
            .await
            .map_err(object_error)?;
        self.lifecycles.remember((owner, bucket.clone()), None);
        Ok(S3Response::new(DeleteBucketLifecycleOutput::default()))
    }

    /// The `x-amz-expiration` of an answer about `meta`, an object of
    /// `bucket`, if a rule will expire it.
    pub(crate) async fn expiration_for(
        &self,
        owner: Owner,
        bucket: &str,
        meta: &FileMeta,
    ) -> S3Result<Option<String>> {
        let key = (owner, bucket.to_owned());
        let rules = match self.lifecycles.get(&key) {
            Some(rules) => rules,
            None => {
                let rules = self
                    .files
                    .bucket_lifecycle(owner, bucket)
                    .await
                    .map_err(object_error)?
                    .map(Arc::new);
                self.lifecycles.remember(key, rules.clone());
                rules
            }
        };
        let Some(rules) = rules else {
            return Ok(None);
        };
        let tags = volume::tags_in(meta.s3_info.as_deref());
        let object = Candidate {
            key: meta.path.get(bucket.len() + 1..).unwrap_or_default(),
            size: meta.size,
            tags: &tags,
        };
        // In calendar days whatever the test clock says, as S3 says it.
        Ok(rules
            .expiry(object, meta.modified_ms, volume::DAY_MS)
            .map(|(at, id)| {
                let at = std::time::UNIX_EPOCH
                    + Duration::from_millis(u64::try_from(at).unwrap_or_default());
                format!(
                    "expiry-date=\"{}\", rule-id=\"{id}\"",
                    httpdate::fmt_http_date(at)
                )
            }))
    }
}
