//! A bucket's lifecycle rules as S3's `LifecycleConfiguration` says them
//! (kept as JSON in `bucket_configs`, in the shape they were put so that
//! `GetBucketLifecycleConfiguration` answers the same), and what they say
//! of one object.

use serde::{Deserialize, Serialize};

/// A bucket's lifecycle configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lifecycle {
    pub rules: Vec<LifecycleRule>,
}

/// One rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LifecycleRule {
    pub id: String,
    pub enabled: bool,
    /// The rule's top-level `Prefix` (S3's older form), if it used it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The rule's `Filter`, if it had one (possibly empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<RuleFilter>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration: Option<Expiration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noncurrent: Option<NoncurrentExpiration>,
    /// `AbortIncompleteMultipartUpload`'s `DaysAfterInitiation`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_multipart_days: Option<u32>,
}

/// A rule's `Filter`: one condition, or `and` of several.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleFilter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<(String, String)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_greater_than: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_less_than: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub and: Option<AndFilter>,
}

/// A filter's `And`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AndFilter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<(String, String)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_greater_than: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_less_than: Option<i64>,
}

/// `Expiration`: of current versions after `days` or on `date_ms`; and/or
/// of delete markers left alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expiration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expired_object_delete_marker: Option<bool>,
}

/// `NoncurrentVersionExpiration`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoncurrentExpiration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days: Option<u32>,
    /// How many of the newest noncurrent versions stay whatever their age.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newer_versions: Option<u32>,
}

/// What a rule looks at of an object.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// Its key in the bucket.
    pub key: &'a str,
    pub size: u64,
    /// Its tags (S3's, see [`tags_in`]).
    pub tags: &'a [(String, String)],
}

/// The tags in what the S3 API keeps of a version (`FileMeta::s3_info`,
/// its JSON's `tags`: `[[key, value], …]`), which rules filter on.
pub fn tags_in(s3_info: Option<&str>) -> Vec<(String, String)> {
    #[derive(Deserialize)]
    struct Tagged {
        #[serde(default)]
        tags: Vec<(String, String)>,
    }
    s3_info
        .and_then(|json| serde_json::from_str::<Tagged>(json).ok())
        .map(|tagged| tagged.tags)
        .unwrap_or_default()
}

impl LifecycleRule {
    /// The key prefix the rule covers ("" for every key).
    pub fn key_prefix(&self) -> &str {
        let filter = self.filter.as_ref();
        self.prefix
            .as_deref()
            .or_else(|| filter.and_then(|filter| filter.prefix.as_deref()))
            .or_else(|| {
                filter
                    .and_then(|filter| filter.and.as_ref())
                    .and_then(|and| and.prefix.as_deref())
            })
            .unwrap_or("")
    }

    /// Whether the rule covers `object`: its prefix, its size bounds and
    /// every tag it names (key and value) held by the object.
    pub fn covers(&self, object: Candidate<'_>) -> bool {
        if !self.enabled || !object.key.starts_with(self.key_prefix()) {
            return false;
        }
        let Some(filter) = &self.filter else {
            return true;
        };
        let size = i64::try_from(object.size).unwrap_or(i64::MAX);
        let (greater, less, tags) = match &filter.and {
            Some(and) => (
                and.size_greater_than,
                and.size_less_than,
                and.tags.as_slice(),
            ),
            None => (
                filter.size_greater_than,
                filter.size_less_than,
                filter.tag.as_slice(),
            ),
        };
        tags.iter().all(|tag| object.tags.contains(tag))
            && greater.is_none_or(|than| size > than)
            && less.is_none_or(|than| size < than)
    }
}

impl Lifecycle {
    /// When the rules expire a current object made at `made_ms`, and by
    /// which rule (the earliest, as S3 says in `x-amz-expiration`): `days`
    /// count from its making rounded up to the next midnight UTC, as S3
    /// counts them (a "day" of `day_ms`, shorter under the test clock,
    /// is not rounded).
    pub fn expiry(&self, object: Candidate<'_>, made_ms: i64, day_ms: i64) -> Option<(i64, &str)> {
        self.rules
            .iter()
            .filter(|rule| rule.covers(object))
            .filter_map(|rule| {
                let expiration = rule.expiration.as_ref()?;
                let at = match (expiration.days, expiration.date_ms) {
                    (Some(days), _) => after_days(made_ms, days, day_ms),
                    (None, Some(date)) => date,
                    (None, None) => return None,
                };
                Some((at, rule.id.as_str()))
            })
            .min_by_key(|(at, _)| *at)
    }
}

/// One real day.
pub const DAY_MS: i64 = 24 * 3600 * 1000;

/// `days` after `from_ms`: on a real clock rounded up to midnight UTC.
pub(crate) fn after_days(from_ms: i64, days: u32, day_ms: i64) -> i64 {
    let at = from_ms.saturating_add(i64::from(days).saturating_mul(day_ms));
    if day_ms == DAY_MS {
        at.div_euclid(DAY_MS)
            .saturating_add(1)
            .saturating_mul(DAY_MS)
    } else {
        at
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn rule(prefix: &str, days: u32) -> LifecycleRule {
        LifecycleRule {
            id: format!("r-{prefix}"),
            enabled: true,
            filter: Some(RuleFilter {
                prefix: Some(prefix.to_owned()),
                ..RuleFilter::default()
            }),
            expiration: Some(Expiration {
                days: Some(days),
                ..Expiration::default()
            }),
            ..LifecycleRule::default()
        }
    }

    #[test]
    fn a_day_of_s3_ends_at_the_next_midnight_utc() {
        // 2026-11-27T11:00Z + 1 day → 2026-11-29T00:00Z.
        let made = 1_795_777_200_000;
        assert_eq!(after_days(made, 1, DAY_MS), 1_795_910_400_000);
        assert_eq!(after_days(made, 1, 10_000), made + 10_000);
    }

    #[test]
    fn the_earliest_covering_rule_says_when_an_object_expires() {
        let lifecycle = Lifecycle {
            rules: vec![rule("logs/", 30), rule("logs/tmp/", 1), rule("other/", 1)],
        };
        let object = Candidate {
            key: "logs/tmp/a",
            size: 3,
            tags: &[],
        };
        let (at, id) = lifecycle.expiry(object, 0, 1000).unwrap();
        assert_eq!((at, id), (1000, "r-logs/tmp/"));
        let elsewhere = Candidate {
            key: "photos/a",
            size: 3,
            tags: &[],
        };
        assert!(lifecycle.expiry(elsewhere, 0, 1000).is_none());
    }

    #[test]
    fn size_filters_bound_and_tag_filters_need_every_tag_named() {
        let mut sized = rule("", 1);
        sized.filter = Some(RuleFilter {
            and: Some(AndFilter {
                size_greater_than: Some(10),
                size_less_than: Some(100),
                ..AndFilter::default()
            }),
            ..RuleFilter::default()
        });
        let sized_at = |size| Candidate {
            key: "a",
            size,
            tags: &[],
        };
        assert!(sized.covers(sized_at(50)));
        assert!(!sized.covers(sized_at(10)));
        assert!(!sized.covers(sized_at(100)));
        let mut tagged = rule("", 1);
        tagged.filter = Some(RuleFilter {
            tag: Some(("k".into(), "v".into())),
            ..RuleFilter::default()
        });
        let held = [
            ("k".to_owned(), "v".to_owned()),
            ("o".to_owned(), "p".to_owned()),
        ];
        let other = [("k".to_owned(), "w".to_owned())];
        let with = |tags| Candidate {
            key: "a",
            size: 1,
            tags,
        };
        assert!(tagged.covers(with(&held)));
        assert!(!tagged.covers(with(&other)));
        assert!(!tagged.covers(with(&[])));
        assert_eq!(
            tags_in(Some(r#"{"etag":"x","tags":[["k","v"]]}"#)),
            vec![("k".to_owned(), "v".to_owned())]
        );
    }
}
