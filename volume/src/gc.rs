//! Letting go of blobs: releasing one no file names any more, finishing
//! or taking over removals, and the garbage collection that finishes what
//! a crash or a stopped gateway left. Coordinates the ledger, the tree and
//! the blob store; owns no table.

use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::Volume;
use crate::db::WriteTx;
use crate::error::VolumeError;
use crate::ledger::{self, BlobState};
use crate::locks;
use crate::types::{Digest, SweepReport, now_ms};
use crate::uploads;
use crate::{history, trash};

/// What is left of letting go of blobs once the change that let go of them
/// commits (see [`Volume::let_go_in`]); dropped, the next collection
/// finishes it.
#[derive(Debug)]
#[must_use]
pub(crate) struct LetGo {
    /// Claimed for removal by the change: the blob goes, then its row.
    claimed: Vec<(Digest, i64)>,
    /// To release after it, each as a change of its own.
    later: Vec<Digest>,
}

/// How long a write waits for another gateway's removal of the same content
/// to finish before it gives up with [`VolumeError::Busy`].
const REMOVAL_WAIT: Duration = Duration::from_secs(30);

impl Volume {
    /// Sleep a little while another process removes blob `digest`; fails
    /// with `Busy` once [`REMOVAL_WAIT`] has passed. Returns the time slept.
    pub(crate) async fn wait_for_removal(
        &self,
        digest: &Digest,
        waited: Duration,
    ) -> Result<Duration, VolumeError> {
        if waited >= REMOVAL_WAIT {
            return Err(VolumeError::Busy(digest.to_string()));
        }
        let pause = (Duration::from_millis(5) + waited / 2).min(Duration::from_millis(500));
        tokio::time::sleep(pause).await;
        Ok(pause)
    }

    /// In `tx`, before it commits: let go of the blobs `released` that
    /// nothing names any more, as far as the transaction can. On SQLite it
    /// holds the store's one write lock, so nothing names a blob or takes
    /// its row until it commits: a packed blob's row goes at once (its
    /// record is dead space, for compaction) and a blob of its own is
    /// claimed for removal here, so that letting go takes one change after
    /// the commit, or none, instead of two ([`Volume::release`]). On
    /// PostgreSQL, locking a second ledger row could deadlock with a writer
    /// that took the two the other way round: each is released after the
    /// commit, as a change of its own.
    pub(crate) async fn let_go_in(
        &self,
        tx: &mut WriteTx,
        released: Vec<Digest>,
    ) -> Result<LetGo, VolumeError> {
        if !tx.holds_the_write_lock() {
            return Ok(LetGo {
                claimed: Vec::new(),
                later: released,
            });
        }
        let mut claimed = Vec::new();
        let claim_ms = now_ms();
        for digest in released {
            if ledger::lock(self.db(), tx, &digest).await? != Some(BlobState::Stored)
                || !trash::unnamed(tx, &digest).await?
                || ledger::forget_packed(tx, &digest).await?
            {
                continue;
            }
            ledger::mark_deleting(tx, &digest, &self.claimant.id, claim_ms).await?;
            claimed.push((digest, claim_ms));
        }
        Ok(LetGo {
            claimed,
            later: Vec::new(),
        })
    }

    /// Once the change that let go of blobs in [`Volume::let_go_in`] has
    /// committed: the rest of it (a failure is logged, and the next
    /// collection finishes the removal).
    pub(crate) async fn finish_letting_go(&self, let_go: LetGo) {
        for (digest, claim_ms) in let_go.claimed {
            if let Err(error) = self.finish_removal(&digest, claim_ms).await {
                tracing::warn!(%digest, %error, "could not remove an unreferenced blob; the next collection will");
            }
        }
        self.release_all(&let_go.later).await;
    }

    /// Let go of blobs that changes which committed may have left unnamed.
    pub(crate) async fn release_all(&self, released: &[Digest]) {
        for digest in released {
            self.release_logged(digest).await;
        }
    }

    /// [`Volume::release`], with a failure logged rather than returned: the
    /// change that dropped the reference has committed already, and the
    /// next collection finishes the removal.
    pub(crate) async fn release_logged(&self, digest: &Digest) {
        if let Err(error) = self.release(digest).await {
            tracing::warn!(%digest, %error, "could not remove an unreferenced blob; the next collection will");
        }
    }

    /// Remove blob `digest` if it is stored and no file names it; returns
    /// whether it did.
    async fn release(&self, digest: &Digest) -> Result<bool, VolumeError> {
        let mut tx = self.db().begin_write().await?;
        if ledger::lock(self.db(), &mut tx, digest).await? != Some(BlobState::Stored)
            || !trash::unnamed(&mut tx, digest).await?
        {
            return Ok(false);
        }
        let claim_ms = now_ms();
        ledger::mark_deleting(&mut tx, digest, &self.claimant.id, claim_ms).await?;
        tx.commit().await?;
        self.finish_removal(digest, claim_ms).await?;
        Ok(true)
    }

    /// Remove blob `digest`, whose removal this process claimed at
    /// `claim_ms`, and then its ledger row (if the claim still holds).
    async fn finish_removal(&self, digest: &Digest, claim_ms: i64) -> Result<(), VolumeError> {
        self.blobs.remove(digest).await?;
        ledger::forget(self.db(), digest, &self.claimant.id, claim_ms).await
    }

    /// Whether a removal stamped `since_ms` has outlived the lease.
    pub(crate) fn is_stale(&self, since_ms: i64) -> bool {
        let lease_ms = i64::try_from(self.removal_lease.as_millis()).unwrap_or(i64::MAX);
        now_ms().saturating_sub(since_ms) > lease_ms
    }

    /// Finish a removal stamped `seen_ms` whose remover stopped, unless
    /// another process took it over (or finished it) first; returns
    /// whether this call removed the blob. If a file names the blob after
    /// all, the removal is undone instead: the row is `stored` again and
    /// the blob stays.
    pub(crate) async fn take_over_removal(
        &self,
        digest: &Digest,
        seen_ms: i64,
    ) -> Result<bool, VolumeError> {
        // A new stamp, so that the stopped remover's claim no longer holds.
        let claim_ms = now_ms().max(seen_ms.saturating_add(1));
        let claimed = self
            .db()
            .write(async |tx: &mut WriteTx| {
                match ledger::lock(self.db(), tx, digest).await? {
                    Some(BlobState::Deleting { since_ms }) if since_ms == seen_ms => {}
                    // Taken over, finished or undone by another process.
                    _ => return Ok(false),
                }
                if !trash::unnamed(tx, digest).await? {
                    // Nothing may name a blob being removed; if something
                    // does, the file wins over the removal.
                    tracing::warn!(%digest, "a file names a blob marked for removal; keeping it");
                    ledger::mark_stored(tx, digest, claim_ms).await?;
                    return Ok(false);
                }
                ledger::mark_deleting(tx, digest, &self.claimant.id, claim_ms).await?;
                Ok(true)
            })
            .await?;
        if claimed {
            self.finish_removal(digest, claim_ms).await?;
        }
        Ok(claimed)
    }

    /// Remove a blob the ledger does not know, unless it is recorded
    /// meanwhile; returns whether it did.
    async fn remove_unrecorded(&self, digest: &Digest) -> Result<bool, VolumeError> {
        let mut tx = self.db().begin_write().await?;
        let claim_ms = now_ms();
        // No file can name a blob without a ledger row; checked anyway.
        if !ledger::insert_deleting(&mut tx, digest, &self.claimant.id, claim_ms).await?
            || !trash::unnamed(&mut tx, digest).await?
        {
            return Ok(false);
        }
        tx.commit().await?;
        self.finish_removal(digest, claim_ms).await?;
        Ok(true)
    }

    /// What a volume collects as it opens: first the removals its previous
    /// run on the same data directory claimed and did not finish (a crash
    /// or a kill came between a removal's mark and the end of its row),
    /// taken over at once however fresh: this process holds the data
    /// directory's id alone (a lock on its file; without it, nothing is
    /// taken over here), and none of this process's removals has begun. Then a collection as any.
    pub(crate) async fn collect_at_open(&self) -> Result<SweepReport, VolumeError> {
        let mut finished = 0;
        let own = if self.claimant.owns_directory() {
            ledger::claimed_by(self.db(), &self.claimant.id).await?
        } else {
            Vec::new()
        };
        for (digest, seen_ms) in own {
            match self.take_over_removal(&digest, seen_ms).await {
                Ok(done) => finished += usize::from(done),
                Err(error) => {
                    tracing::warn!(%digest, %error, "could not finish a removal; the next collection will")
                }
            }
        }
        let report = self.collect_garbage().await?;
        Ok(SweepReport {
            orphan_blobs_removed: report.orphan_blobs_removed + finished,
            ..report
        })
    }

    /// Collect garbage: take over removals that outlived the lease, remove
    /// stored blobs no file names, and blobs the ledger does not know that
    /// are older than the grace period; count (and log) files whose blob is
    /// missing; clear expired WebDAV locks. Safe to run on every gateway at once. A blob that cannot be
    /// removed is logged and left for the next collection.
    pub async fn collect_garbage(&self) -> Result<SweepReport, VolumeError> {
        let lease_ms = i64::try_from(self.removal_lease.as_millis()).unwrap_or(i64::MAX);
        let mut removed = 0;
        let mut count = |digest: &Digest, outcome: Result<bool, VolumeError>| match outcome {
            Ok(done) => removed += usize::from(done),
            Err(error) => {
                tracing::warn!(%digest, %error, "could not remove a blob; the next collection will")
            }
        };
        let stale_before = now_ms().saturating_sub(lease_ms);
        for (digest, seen_ms) in ledger::stale_deletions(self.db(), stale_before).await? {
            count(&digest, self.take_over_removal(&digest, seen_ms).await);
        }
        // Stored blobs no file names (a crash came between a delete's
        // commit and the blob's removal); `release` looks again under the
        // blob's ledger row.
        let named = self.referenced().await?;
        for digest in ledger::stored(self.db()).await? {
            if !named.contains(digest.as_str()) {
                count(&digest, self.release(&digest).await);
            }
        }
        let known: HashSet<String> = ledger::all(self.db()).await?.into_iter().collect();
        let listed = self.blobs.list().await?;
        let old_enough = SystemTime::now()
            .checked_sub(self.orphan_grace)
            .unwrap_or(UNIX_EPOCH);
        for blob in &listed {
            if !known.contains(blob.digest.as_str()) && blob.modified <= old_enough {
                count(&blob.digest, self.remove_unrecorded(&blob.digest).await);
            }
        }
        let packed = self.packed_present().await?;
        let present: HashSet<&str> = listed
            .iter()
            .map(|blob| blob.digest.as_str())
            .chain(packed.iter().map(String::as_str))
            .collect();
        let mut absent = Vec::new();
        for named in self.referenced().await? {
            if present.contains(named.as_str()) {
                continue;
            }
            // Perhaps written after the listing: look once more.
            let digest = Digest::parse(&named)?;
            if !self.blob_present(&digest).await? {
                absent.push(named);
            }
        }
        // Perhaps no longer named either (deleted, and its blob removed,
        // since the names were read): missing only if still named.
        let mut files_missing_blobs = 0;
        if !absent.is_empty() {
            let named = self.referenced().await?;
            for digest in absent.iter().filter(|digest| named.contains(*digest)) {
                tracing::error!(sha256 = %digest, "a file's blob is missing from the blob store");
                files_missing_blobs += 1;
            }
        }
        let expired_versions = self.expire_history().await?;
        if expired_versions > 0 {
            tracing::info!(
                expired_versions,
                "removed versions and trash past the retention"
            );
        }
        let released_locks = self
            .db()
            .write(async |tx: &mut crate::db::WriteTx| {
                crate::object_lock::sweep(tx, crate::types::now_ms()).await
            })
            .await?;
        if released_locks > 0 {
            tracing::debug!(released_locks, "forgot object locks of versions gone");
        }
        let expired_locks = locks::clear_expired(self.db()).await?;
        if expired_locks > 0 {
            tracing::debug!(expired_locks, "cleared expired WebDAV locks");
        }
        let uploads_removed = self.collect_uploads(old_enough).await?;
        let segments_compacted = self.compact_segments().await?;
        let report = SweepReport {
            temp_files_removed: 0,
            orphan_blobs_removed: removed,
            files_missing_blobs,
            uploads_removed,
            segments_compacted,
        };
        if report != SweepReport::default() {
            tracing::info!(?report, "collected garbage");
        }
        Ok(report)
    }

    /// Every digest a current file or a kept version names.
    async fn referenced(&self) -> Result<HashSet<String>, VolumeError> {
        let mut named = self.tree.referenced().await?;
        named.extend(history::referenced(self.db()).await?);
        Ok(named)
    }

    /// Remove expired resumable uploads and their parts, and parts no
    /// upload names that have not changed since `old_enough` (an upload
    /// whose parts outlived its row: a removal cut short). How many went.
    async fn collect_uploads(&self, old_enough: SystemTime) -> Result<usize, VolumeError> {
        let mut removed = 0;
        for id in uploads::expired(self.db()).await? {
            let gone = match uploads::delete(self.db(), None, &id, true).await {
                Ok(true) => self.blobs.remove_parts(&id).await.map(|()| true),
                other => other,
            };
            match gone {
                Ok(gone) => removed += usize::from(gone),
                Err(error) => tracing::warn!(%id, %error, "could not remove an expired upload"),
            }
        }
        let known = uploads::all(self.db()).await?;
        for (id, modified) in self.blobs.uploads_with_parts().await? {
            if !known.contains(&id) && modified <= old_enough {
                match self.blobs.remove_parts(&id).await {
                    Ok(()) => removed += 1,
                    Err(error) => tracing::warn!(%id, %error, "could not remove an upload's parts"),
                }
            }
        }
        Ok(removed)
    }
}
