//! S3 Object Lock: a bucket's configuration
//! (`Put`/`GetObjectLockConfiguration`), a version's retention
//! (`Put`/`GetObjectRetention`) and legal hold (`Put`/`GetObjectLegalHold`),
//! the `x-amz-object-lock-*` headers a write asks with and a read answers,
//! and S3's error for each refusal. The rules themselves (what may be
//! extended, who may bypass governance, what a held version refuses) are
//! the volume's, so REST and WebDAV meet the same ones.

use axum::http::{HeaderMap, StatusCode};
use s3s::dto::{
    DefaultRetention, GetObjectLegalHoldInput, GetObjectLegalHoldOutput,
    GetObjectLockConfigurationInput, GetObjectLockConfigurationOutput, GetObjectRetentionInput,
    GetObjectRetentionOutput, ObjectLockConfiguration, ObjectLockEnabled, ObjectLockLegalHold,
    ObjectLockLegalHoldStatus, ObjectLockMode, ObjectLockRetention, ObjectLockRetentionMode,
    ObjectLockRule, PutObjectLegalHoldInput, PutObjectLegalHoldOutput,
    PutObjectLockConfigurationInput, PutObjectLockConfigurationOutput, PutObjectRetentionInput,
    PutObjectRetentionOutput, Timestamp,
};
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result, s3_error};
use volume::{BucketLock, LockMode, Retention, RetentionPeriod, VersionLock};

use crate::error::object_error;
use crate::versioning::checked_version;
use crate::{S3Api, caller, object_path, timestamp};

const MALFORMED: &str =
    "The XML you provided was not well-formed or did not validate against our published schema";

fn malformed() -> S3Error {
    s3_error!(MalformedXML, "{MALFORMED}")
}

/// Milliseconds since the epoch of `at`.
fn millis(at: &Timestamp) -> i64 {
    let at = time::OffsetDateTime::from(at.clone());
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

/// Whether a request carries an integrity check of its body: S3 requires
/// one of the object lock requests (`Content-MD5`, or since 2025 any
/// `x-amz-checksum-*` in its place).
pub(crate) fn has_body_check(headers: &HeaderMap) -> bool {
    headers.contains_key("content-md5")
        || headers.contains_key("x-amz-sdk-checksum-algorithm")
        || headers
            .keys()
            .any(|name| name.as_str().starts_with("x-amz-checksum-"))
        || headers
            .get("x-amz-trailer")
            .and_then(|value| value.to_str().ok())
            .is_some_and(|trailer| trailer.starts_with("x-amz-checksum-"))
}

pub(crate) fn require_body_check(headers: &HeaderMap, what: &str) -> S3Result<()> {
    if has_body_check(headers) {
        Ok(())
    } else {
        Err(S3Error::with_message(
            S3ErrorCode::InvalidRequest,
            format!("Content-MD5 OR x-amz-checksum- HTTP header is required for {what} requests"),
        ))
    }
}

/// The lock a write asks for with its `x-amz-object-lock-*` headers
/// (`None`: it asks for none), checked as S3 checks them.
pub(crate) fn asked_lock(
    mode: Option<&ObjectLockMode>,
    until: Option<&Timestamp>,
    hold: Option<&ObjectLockLegalHoldStatus>,
) -> S3Result<Option<VersionLock>> {
    if mode.is_none() && until.is_none() && hold.is_none() {
        return Ok(None);
    }
    let retention = match (mode, until) {
        (None, None) => None,
        (Some(mode), Some(until)) => {
            let mode = LockMode::parse(mode.as_str())
                .ok_or_else(|| s3_error!(InvalidArgument, "Unknown wormMode directive."))?;
            let until_ms = millis(until);
            if until_ms <= volume::now_ms() {
                return Err(s3_error!(
                    InvalidArgument,
                    "The retain until date must be in the future!"
                ));
            }
            Some(Retention { mode, until_ms })
        }
        _ => {
            return Err(s3_error!(
                InvalidArgument,
                "x-amz-object-lock-retain-until-date and x-amz-object-lock-mode must both be supplied"
            ));
        }
    };
    let legal_hold = match hold.map(ObjectLockLegalHoldStatus::as_str) {
        None => None,
        Some(ObjectLockLegalHoldStatus::OFF) => Some(false),
        Some(ObjectLockLegalHoldStatus::ON) => Some(true),
        Some(_) => {
            return Err(s3_error!(
                InvalidArgument,
                "Legal Hold must be either of 'ON' or 'OFF'"
            ));
        }
    };
    Ok(Some(VersionLock {
        retention,
        legal_hold,
    }))
}

/// A lock a multipart upload asked for at its creation, kept with the
/// upload until it completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct AskedLock {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    governance: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    until_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    legal_hold: Option<bool>,
}

impl From<VersionLock> for AskedLock {
    fn from(lock: VersionLock) -> Self {
        Self {
            governance: lock
                .retention
                .map(|retention| retention.mode == LockMode::Governance),
            until_ms: lock.retention.map(|retention| retention.until_ms),
            legal_hold: lock.legal_hold,
        }
    }
}

impl From<AskedLock> for VersionLock {
    fn from(asked: AskedLock) -> Self {
        Self {
            retention: asked
                .governance
                .zip(asked.until_ms)
                .map(|(governance, until_ms)| Retention {
                    mode: if governance {
                        LockMode::Governance
                    } else {
                        LockMode::Compliance
                    },
                    until_ms,
                }),
            legal_hold: asked.legal_hold,
        }
    }
}

/// A legal hold, on or off, as S3 spells it.
fn hold_status(on: bool) -> ObjectLockLegalHoldStatus {
    let status = if on {
        ObjectLockLegalHoldStatus::ON
    } else {
        ObjectLockLegalHoldStatus::OFF
    };
    ObjectLockLegalHoldStatus::from(status.to_owned())
}

/// The `x-amz-object-lock-*` a read of a version under `lock` answers.
#[derive(Debug, Default)]
pub(crate) struct LockFields {
    pub(crate) mode: Option<ObjectLockMode>,
    pub(crate) until: Option<Timestamp>,
    pub(crate) hold: Option<ObjectLockLegalHoldStatus>,
}

impl LockFields {
    pub(crate) fn of(lock: &VersionLock) -> Self {
        Self {
            mode: lock
                .retention
                .map(|retention| ObjectLockMode::from(retention.mode.as_str().to_owned())),
            until: lock
                .retention
                .map(|retention| timestamp(retention.until_ms)),
            hold: lock.legal_hold.map(hold_status),
        }
    }
}

/// A retention period of a bucket's default, as S3 checks it.
fn period(days: Option<i32>, years: Option<i32>) -> S3Result<RetentionPeriod> {
    let invalid = || {
        let mut error = S3Error::with_message(
            S3ErrorCode::Custom("InvalidRetentionPeriod".into()),
            "Default retention period must be a positive integer value",
        );
        error.set_status_code(StatusCode::BAD_REQUEST);
        error
    };
    let positive = |value: i32| u32::try_from(value).ok().filter(|value| *value > 0);
    match (days, years) {
        (Some(days), None) => positive(days)
            .map(RetentionPeriod::Days)
            .ok_or_else(invalid),
        (None, Some(years)) => positive(years)
            .map(RetentionPeriod::Years)
            .ok_or_else(invalid),
        _ => Err(malformed()),
    }
}

impl S3Api {
    /// The object (its path) and version (checked as S3 checks ids) a
    /// retention or legal hold request names, in a bucket that exists.
    async fn version_named(
        &self,
        owner: volume::Owner,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
    ) -> S3Result<(volume::FilePath, Option<String>)> {
        self.require_bucket(owner, bucket).await?;
        let path = object_path(bucket, key)?;
        let version = version_id.map(checked_version).transpose()?;
        Ok((path, version.map(str::to_owned)))
    }

    /// The lock of the version a retention or legal hold read names.
    async fn lock_named(
        &self,
        owner: volume::Owner,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
    ) -> S3Result<VersionLock> {
        let (path, version) = self.version_named(owner, bucket, key, version_id).await?;
        let (_, lock) = self
            .files
            .version_lock(owner, &path, version.as_deref())
            .await
            .map_err(object_error)?;
        Ok(lock)
    }

    pub(crate) async fn put_object_lock_configuration_(
        &self,
        req: S3Request<PutObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<PutObjectLockConfigurationOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        require_body_check(&req.headers, "Put Object Lock Configuration")?;
        let input = req.input;
        self.require_bucket(owner, &input.bucket).await?;
        let configuration = input.object_lock_configuration.ok_or_else(malformed)?;
        if configuration
            .object_lock_enabled
            .as_ref()
            .is_none_or(|enabled| enabled.as_str() != ObjectLockEnabled::ENABLED)
        {
            return Err(malformed());
        }
        let default = match configuration.rule {
            None => None,
            Some(ObjectLockRule {
                default_retention: None,
            }) => return Err(malformed()),
            Some(ObjectLockRule {
                default_retention: Some(retention),
            }) => {
                let mode = retention
                    .mode
                    .as_ref()
                    .and_then(|mode| LockMode::parse(mode.as_str()))
                    .ok_or_else(malformed)?;
                let period = period(retention.days, retention.years)?;
                Some(volume::DefaultRetention { mode, period })
            }
        };
        self.files
            .set_bucket_lock(owner, &input.bucket, BucketLock { default }, false)
            .await
            .map_err(object_error)?;
        Ok(S3Response::new(PutObjectLockConfigurationOutput::default()))
    }

    pub(crate) async fn get_object_lock_configuration_(
        &self,
        req: S3Request<GetObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<GetObjectLockConfigurationOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let bucket = &req.input.bucket;
        self.require_bucket(owner, bucket).await?;
        let lock = self
            .files
            .bucket_lock(owner, bucket)
            .await
            .map_err(object_error)?
            .ok_or_else(|| {
                s3_error!(
                    ObjectLockConfigurationNotFoundError,
                    "Object Lock configuration does not exist for this bucket"
                )
            })?;
        let rule = lock.default.map(|default| {
            let (days, years) = match default.period {
                RetentionPeriod::Days(days) => (i32::try_from(days).ok(), None),
                RetentionPeriod::Years(years) => (None, i32::try_from(years).ok()),
            };
            ObjectLockRule {
                default_retention: Some(DefaultRetention {
                    days,
                    years,
                    mode: Some(ObjectLockRetentionMode::from(
                        default.mode.as_str().to_owned(),
                    )),
                }),
            }
        });
        Ok(S3Response::new(GetObjectLockConfigurationOutput {
            object_lock_configuration: Some(ObjectLockConfiguration {
                object_lock_enabled: Some(ObjectLockEnabled::from(
                    ObjectLockEnabled::ENABLED.to_owned(),
                )),
                rule,
            }),
        }))
    }

    pub(crate) async fn put_object_retention_(
        &self,
        req: S3Request<PutObjectRetentionInput>,
    ) -> S3Result<S3Response<PutObjectRetentionOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        require_body_check(&req.headers, "Put Object Retention")?;
        let input = req.input;
        let (path, version) = self
            .version_named(
                owner,
                &input.bucket,
                &input.key,
                input.version_id.as_deref(),
            )
            .await?;
        let retention = match input.retention {
            None => return Err(malformed()),
            Some(ObjectLockRetention {
                mode: None,
                retain_until_date: None,
            }) => None,
            Some(ObjectLockRetention {
                mode: Some(mode),
                retain_until_date: Some(until),
            }) => {
                let mode = LockMode::parse(mode.as_str()).ok_or_else(malformed)?;
                let until_ms = millis(&until);
                if until_ms <= volume::now_ms() {
                    return Err(s3_error!(
                        InvalidArgument,
                        "The retain until date must be in the future!"
                    ));
                }
                Some(Retention { mode, until_ms })
            }
            Some(_) => return Err(malformed()),
        };
        let bypass = input.bypass_governance_retention == Some(true);
        self.files
            .set_retention(owner, &path, version.as_deref(), retention, bypass)
            .await
            .map_err(object_error)?;
        Ok(S3Response::new(PutObjectRetentionOutput::default()))
    }

    pub(crate) async fn get_object_retention_(
        &self,
        req: S3Request<GetObjectRetentionInput>,
    ) -> S3Result<S3Response<GetObjectRetentionOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let input = req.input;
        let lock = self
            .lock_named(
                owner,
                &input.bucket,
                &input.key,
                input.version_id.as_deref(),
            )
            .await?;
        let retention = lock.retention.ok_or_else(no_lock_of_object)?;
        Ok(S3Response::new(GetObjectRetentionOutput {
            retention: Some(ObjectLockRetention {
                mode: Some(ObjectLockRetentionMode::from(
                    retention.mode.as_str().to_owned(),
                )),
                retain_until_date: Some(timestamp(retention.until_ms)),
            }),
        }))
    }

    pub(crate) async fn put_object_legal_hold_(
        &self,
        req: S3Request<PutObjectLegalHoldInput>,
    ) -> S3Result<S3Response<PutObjectLegalHoldOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        require_body_check(&req.headers, "Put Object Legal Hold")?;
        let input = req.input;
        let (path, version) = self
            .version_named(
                owner,
                &input.bucket,
                &input.key,
                input.version_id.as_deref(),
            )
            .await?;
        let on = match input
            .legal_hold
            .and_then(|hold| hold.status)
            .as_ref()
            .map(ObjectLockLegalHoldStatus::as_str)
        {
            Some(ObjectLockLegalHoldStatus::ON) => true,
            Some(ObjectLockLegalHoldStatus::OFF) => false,
            _ => return Err(malformed()),
        };
        self.files
            .set_legal_hold(owner, &path, version.as_deref(), on)
            .await
            .map_err(object_error)?;
        Ok(S3Response::new(PutObjectLegalHoldOutput::default()))
    }

    pub(crate) async fn get_object_legal_hold_(
        &self,
        req: S3Request<GetObjectLegalHoldInput>,
    ) -> S3Result<S3Response<GetObjectLegalHoldOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let input = req.input;
        let lock = self
            .lock_named(
                owner,
                &input.bucket,
                &input.key,
                input.version_id.as_deref(),
            )
            .await?;
        let on = lock.legal_hold.ok_or_else(no_lock_of_object)?;
        Ok(S3Response::new(GetObjectLegalHoldOutput {
            legal_hold: Some(ObjectLockLegalHold {
                status: Some(hold_status(on)),
            }),
        }))
    }
}

/// S3's answer for a version without a retention.
fn no_lock_of_object() -> S3Error {
    s3_error!(
        NoSuchObjectLockConfiguration,
        "The specified object does not have a ObjectLock configuration"
    )
}

impl S3Api {
    /// Refuse a lock a write asks for (`asked`) of a bucket without object
    /// lock, as S3 does.
    pub(crate) async fn require_lock_for(
        &self,
        owner: volume::Owner,
        bucket: &str,
        asked: Option<&VersionLock>,
    ) -> S3Result<()> {
        if asked.is_none() {
            return Ok(());
        }
        match self.files.bucket_lock(owner, bucket).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(s3_error!(
                InvalidRequest,
                "Bucket is missing Object Lock Configuration"
            )),
            Err(error) => Err(object_error(error)),
        }
    }

    /// Whether a request asks to bypass governance retention (`asked`:
    /// its `x-amz-bypass-governance-retention`), which S3 refuses of a
    /// bucket without object lock. Whoever acts for the bucket's owner
    /// may bypass (see `file_service::object_lock`).
    pub(crate) async fn governance_bypass(
        &self,
        owner: volume::Owner,
        bucket: &str,
        asked: Option<bool>,
    ) -> S3Result<bool> {
        if asked.is_none() {
            return Ok(false);
        }
        let locked = self
            .files
            .bucket_lock(owner, bucket)
            .await
            .map_err(object_error)?
            .is_some();
        if locked {
            Ok(asked == Some(true))
        } else {
            Err(s3_error!(
                InvalidArgument,
                "x-amz-bypass-governance-retention is only applicable to Object Lock enabled buckets."
            ))
        }
    }

    /// The `x-amz-object-lock-*` of an answer about `meta`, a version of
    /// an object of `bucket` (none from a bucket without object lock).
    pub(crate) async fn lock_fields_for(
        &self,
        owner: volume::Owner,
        bucket: &str,
        meta: &volume::FileMeta,
    ) -> S3Result<LockFields> {
        let locked = self
            .files
            .bucket_lock(owner, bucket)
            .await
            .map_err(object_error)?
            .is_some();
        if !locked {
            return Ok(LockFields::of(&VersionLock::default()));
        }
        let path = volume::FilePath::parse(&meta.path)
            .map_err(|error| s3_error!(InvalidArgument, "{error}"))?;
        let (_, lock) = self
            .files
            .version_lock(owner, &path, Some(&meta.version_id))
            .await
            .map_err(object_error)?;
        Ok(LockFields::of(&lock))
    }
}
