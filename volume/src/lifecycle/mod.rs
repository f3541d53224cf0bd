//! Lifecycle: a bucket's rules (S3's `LifecycleConfiguration`, kept in
//! `bucket_configs`) and the pass that carries them out: current versions
//! expired (a delete marker where versions are kept, else gone), noncurrent
//! versions removed after their days (the newest few kept if asked), delete
//! markers left alone removed, abandoned multipart uploads aborted. Object
//! lock is never overridden: a held version stays (counted). Each pass does
//! a bounded amount of work; what is left waits for the next. Every
//! removal re-checks what it read inside its own transaction, so two
//! gateways running passes at once do each thing once. Owns no table.

mod rules;

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

use rules::after_days;
pub use rules::{
    AndFilter, Candidate, DAY_MS, Expiration, Lifecycle, LifecycleRule, NoncurrentExpiration,
    RuleFilter, tags_in,
};

use crate::Volume;
use crate::bucket_config::{self, ConfigKind};
use crate::db::WriteTx;
use crate::error::VolumeError;
use crate::history::{self, Kept};
use crate::path::FilePath;
use crate::types::{Owner, now_ms};

/// `bucket_configs`' kind of a lifecycle configuration.
const KIND: ConfigKind = ConfigKind::Lifecycle;

/// The most removals and aborts one pass makes.
const PASS_BUDGET: u64 = 10_000;

/// Rows read at a time.
const PAGE: usize = 500;

/// What lifecycle passes did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LifecycleReport {
    /// Current versions expired.
    pub expired: u64,
    /// Noncurrent versions (and their delete markers) removed.
    pub noncurrent_removed: u64,
    /// Delete markers left alone removed.
    pub markers_removed: u64,
    /// Multipart uploads aborted.
    pub uploads_aborted: u64,
    /// Versions a rule would have removed that object lock held.
    pub held: u64,
}

impl LifecycleReport {
    fn actions(&self) -> u64 {
        self.expired + self.noncurrent_removed + self.markers_removed + self.uploads_aborted
    }
}

/// What every pass of this process did (`/metrics`).
static TOTALS: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];

/// What every lifecycle pass of this process did since it started.
pub fn lifecycle_totals() -> LifecycleReport {
    let read = |i: usize| TOTALS[i].load(Ordering::Relaxed);
    LifecycleReport {
        expired: read(0),
        noncurrent_removed: read(1),
        markers_removed: read(2),
        uploads_aborted: read(3),
        held: read(4),
    }
}

fn count(report: &LifecycleReport) {
    let done = [
        report.expired,
        report.noncurrent_removed,
        report.markers_removed,
        report.uploads_aborted,
        report.held,
    ];
    for (total, done) in TOTALS.iter().zip(done) {
        total.fetch_add(done, Ordering::Relaxed);
    }
}

/// The first string past every string that starts with `prefix`.
fn upper_of_text(prefix: &str) -> String {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        if let Some(next) = char::from_u32(u32::from(last) + 1) {
            chars.push(next);
            return chars.into_iter().collect();
        }
    }
    "\u{10FFFF}".to_owned()
}

impl Volume {
    /// `owner`'s bucket `bucket`'s lifecycle configuration, if it has one.
    pub async fn bucket_lifecycle(
        &self,
        owner: Owner,
        bucket: &str,
    ) -> Result<Option<Lifecycle>, VolumeError> {
        let body = bucket_config::get(self.db(), owner, bucket, KIND).await?;
        Ok(body.and_then(|body| serde_json::from_str(&body).ok()))
    }

    /// Set `owner`'s bucket `bucket`'s lifecycle configuration.
    pub async fn set_bucket_lifecycle(
        &self,
        owner: Owner,
        bucket: &str,
        lifecycle: &Lifecycle,
    ) -> Result<(), VolumeError> {
        let body = serde_json::to_string(lifecycle).unwrap_or_default();
        self.db()
            .write(async |tx: &mut WriteTx| {
                bucket_config::put(tx, owner, bucket, KIND, &body).await
            })
            .await
    }

    /// Delete `path`'s latest version, as a client's delete does, if its
    /// current file is still `version_id`; whether it was.
    async fn delete_if_current(
        &self,
        owner: Owner,
        path: &FilePath,
        version_id: &str,
    ) -> Result<bool, VolumeError> {
        let mut released = Vec::new();
        let deleted = self
            .db()
            .write(async |tx: &mut WriteTx| {
                let current = self.tree.get_locked(tx, owner, path).await?;
                if current.is_none_or(|current| current.version_id != version_id) {
                    return Ok(false);
                }
                self.delete_in(tx, owner, path, true, &mut released).await?;
                crate::properties::forget(tx, owner, path.as_str()).await?;
                crate::locks::forget_within(tx, owner, path.as_str(), "", "").await?;
                Ok(true)
            })
            .await?;
        self.release_all(&released).await;
        Ok(deleted)
    }

    /// How long a lifecycle day is: a day, or what the test clock says.
    pub fn lifecycle_day_ms(&self) -> i64 {
        self.lifecycle_day_ms
    }

    /// One lifecycle pass over every bucket that has rules, bounded (see
    /// the module's doc): what it did.
    pub async fn run_lifecycle(&self) -> Result<LifecycleReport, VolumeError> {
        let mut report = LifecycleReport::default();
        for (owner, bucket, body) in bucket_config::all_of(self.db(), KIND).await? {
            let Ok(lifecycle) = serde_json::from_str::<Lifecycle>(&body) else {
                continue;
            };
            for rule in lifecycle.rules.iter().filter(|rule| rule.enabled) {
                if report.actions() >= PASS_BUDGET {
                    break;
                }
                let pass = Pass {
                    volume: self,
                    owner,
                    bucket: &bucket,
                    rule,
                    now: now_ms(),
                    day: self.lifecycle_day_ms,
                };
                pass.run(&mut report).await?;
            }
        }
        count(&report);
        if report != LifecycleReport::default() {
            tracing::info!(?report, "lifecycle pass");
        }
        Ok(report)
    }
}

/// One rule of one bucket, in one pass.
struct Pass<'a> {
    volume: &'a Volume,
    owner: Owner,
    bucket: &'a str,
    rule: &'a LifecycleRule,
    now: i64,
    day: i64,
}

impl Pass<'_> {
    async fn run(&self, report: &mut LifecycleReport) -> Result<(), VolumeError> {
        let lower = format!("{}/{}", self.bucket, self.rule.key_prefix());
        let upper = upper_of_text(&lower);
        let expiration = self.rule.expiration.as_ref();
        if expiration.is_some_and(|e| e.days.is_some() || e.date_ms.is_some()) {
            self.expire_current(&lower, &upper, report).await?;
        }
        let markers = expiration.and_then(|e| e.expired_object_delete_marker) == Some(true);
        let noncurrent = self.rule.noncurrent.as_ref().and_then(|n| n.days);
        if markers || noncurrent.is_some() {
            self.thin_history(&lower, &upper, report).await?;
        }
        if let Some(days) = self.rule.abort_multipart_days {
            let uploads = crate::uploads::multipart_uploads(
                self.volume.db(),
                self.owner,
                &lower,
                &upper,
                1000,
            )
            .await?;
            for upload in uploads {
                if report.actions() >= PASS_BUDGET {
                    break;
                }
                let key = &upload.path[self.bucket.len() + 1..];
                // S3 refuses tag filters on this action: there are none.
                let covered = self.rule.covers(Candidate {
                    key,
                    size: 0,
                    tags: &[],
                });
                if covered
                    && after_days(upload.created_ms, days, self.day) <= self.now
                    && self
                        .volume
                        .remove_upload(Some(self.owner), &upload.id)
                        .await?
                {
                    report.uploads_aborted += 1;
                }
            }
        }
        Ok(())
    }

    /// The key in the bucket of `path`.
    fn key<'p>(&self, path: &'p str) -> &'p str {
        &path[self.bucket.len() + 1..]
    }

    /// Expire the current versions the rule's `Expiration` has reached.
    async fn expire_current(
        &self,
        lower: &str,
        upper: &str,
        report: &mut LifecycleReport,
    ) -> Result<(), VolumeError> {
        let mut cursor: Option<String> = None;
        loop {
            let from = cursor
                .as_deref()
                .map_or(Bound::Included(lower), Bound::Excluded);
            let page = self
                .volume
                .tree
                .scan(self.owner, from, Some(upper), PAGE)
                .await?;
            for meta in &page {
                if report.actions() >= PASS_BUDGET {
                    return Ok(());
                }
                let tags = tags_in(meta.s3_info.as_deref());
                let object = Candidate {
                    key: self.key(&meta.path),
                    size: meta.size,
                    tags: &tags,
                };
                let lifecycle = Lifecycle {
                    rules: vec![self.rule.clone()],
                };
                let due = lifecycle
                    .expiry(object, meta.modified_ms, self.day)
                    .is_some_and(|(at, _)| at <= self.now);
                if due && let Ok(path) = FilePath::parse(&meta.path) {
                    let expired = self
                        .volume
                        .delete_if_current(self.owner, &path, &meta.version_id)
                        .await?;
                    report.expired += u64::from(expired);
                }
            }
            match page.last() {
                Some(last) if page.len() == PAGE => cursor = Some(last.path.clone()),
                _ => return Ok(()),
            }
        }
    }

    /// Remove what the rule's noncurrent expiration and expired delete
    /// markers reach, a path's versions at a time.
    async fn thin_history(
        &self,
        lower: &str,
        upper: &str,
        report: &mut LifecycleReport,
    ) -> Result<(), VolumeError> {
        let mut from = lower.to_owned();
        let mut included = true;
        loop {
            let bound = if included {
                Bound::Included(from.as_str())
            } else {
                Bound::Excluded(from.as_str())
            };
            let rows =
                history::scan(self.volume.db(), self.owner, bound, Some(upper), PAGE).await?;
            let full = rows.len() == PAGE;
            let mut groups: Vec<Vec<Kept>> = Vec::new();
            for row in rows {
                match groups.last_mut() {
                    Some(group) if group[0].meta.path == row.meta.path => group.push(row),
                    _ => groups.push(vec![row]),
                }
            }
            // A full page may have cut the last path's versions short: it
            // is read again whole next time (unless it is the only one).
            let next = match groups.last() {
                Some(last) if full && groups.len() > 1 => {
                    let path = last[0].meta.path.clone();
                    groups.pop();
                    Some((path, true))
                }
                Some(last) if full => Some((last[0].meta.path.clone(), false)),
                _ => None,
            };
            for group in groups {
                if report.actions() >= PASS_BUDGET {
                    return Ok(());
                }
                self.thin_path(group, report).await?;
            }
            match next {
                Some((path, again)) => {
                    from = path;
                    included = again;
                }
                None => return Ok(()),
            }
        }
    }

    /// The rule on one path's kept versions (`kept`, newest first).
    async fn thin_path(
        &self,
        kept: Vec<Kept>,
        report: &mut LifecycleReport,
    ) -> Result<(), VolumeError> {
        let Ok(path) = FilePath::parse(&kept[0].meta.path) else {
            return Ok(());
        };
        let current = self.volume.tree.get(self.owner, &path).await?.is_some();
        let markers = self
            .rule
            .expiration
            .as_ref()
            .and_then(|e| e.expired_object_delete_marker)
            == Some(true);
        if !current && kept.len() == 1 && kept[0].marker && markers {
            let marker = &kept[0];
            let object = Candidate {
                key: self.key(&marker.meta.path),
                size: 0,
                tags: &[],
            };
            if self.rule.covers(object)
                && self.remove(&path, &marker.meta.version_id, report).await?
            {
                report.markers_removed += 1;
            }
            return Ok(());
        }
        let Some(noncurrent) = &self.rule.noncurrent else {
            return Ok(());
        };
        let Some(days) = noncurrent.days else {
            return Ok(());
        };
        let keep = usize::try_from(noncurrent.newer_versions.unwrap_or(0)).unwrap_or(usize::MAX);
        // Without a current file the newest kept row is the latest version.
        let skip = usize::from(!current);
        for (index, version) in kept.iter().skip(skip).enumerate() {
            if index < keep {
                continue;
            }
            let tags = tags_in(version.meta.s3_info.as_deref());
            let object = Candidate {
                key: self.key(&version.meta.path),
                size: version.meta.size,
                tags: &tags,
            };
            if self.rule.covers(object)
                && after_days(version.archived_ms, days, self.day) <= self.now
                && self.remove(&path, &version.meta.version_id, report).await?
            {
                report.noncurrent_removed += 1;
            }
        }
        Ok(())
    }

    /// Remove a version for good unless object lock holds it (counted).
    async fn remove(
        &self,
        path: &FilePath,
        version_id: &str,
        report: &mut LifecycleReport,
    ) -> Result<bool, VolumeError> {
        match self
            .volume
            .delete_version(self.owner, path, version_id, false)
            .await
        {
            Ok(removed) => Ok(removed.is_some()),
            Err(VolumeError::Locked { .. }) => {
                report.held += 1;
                Ok(false)
            }
            Err(error) => Err(error),
        }
    }
}
