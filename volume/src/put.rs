//! Storing a file: its blob written (or found stored), then, in one
//! transaction holding the blob's ledger row, the blob recorded and the
//! file row committed, with what the write replaced retired and weighed
//! against the quota.

use std::sync::Arc;
use std::time::Duration;

use crate::Volume;
use crate::blobs::{self, StagedBlob};
use crate::error::VolumeError;
use crate::ledger::{self, BlobState};
use crate::path::FilePath;
use crate::types::{
    Digests, FileMeta, NULL_VERSION, Owner, Stored, Versioning, now_ms, upload_version_id,
};
use crate::{history, locking, quota, tree, versioning};

impl Volume {
    /// Store the `staged` bytes, whose digests are `digests`, at `path`.
    /// With `overwrite` false an existing path is refused with
    /// `AlreadyExists`.
    ///
    /// The blob is written unless the ledger has it stored; then, in one
    /// transaction holding the blob's ledger row (claimed by inserting it if
    /// there was none), the blob is recorded as stored (checked present if
    /// this call wrote it, since a removal may have run meanwhile) and the
    /// file row committed.
    pub async fn put(
        &self,
        owner: Owner,
        path: &FilePath,
        staged: StagedBlob,
        digests: &Digests,
        content_type: &str,
        overwrite: bool,
    ) -> Result<FileMeta, VolumeError> {
        let stored = Stored {
            s3_info: None,
            completes: None,
            lock: None,
        };
        self.put_with(
            owner,
            path,
            staged,
            digests,
            content_type,
            overwrite,
            stored,
        )
        .await
    }

    /// [`Volume::put`], with what `stored` says of the file: what the S3
    /// API keeps of it, the upload it completes.
    #[allow(clippy::too_many_arguments)]
    pub async fn put_with(
        &self,
        owner: Owner,
        path: &FilePath,
        mut staged: StagedBlob,
        digests: &Digests,
        content_type: &str,
        overwrite: bool,
        stored: Stored<'_>,
    ) -> Result<FileMeta, VolumeError> {
        let Stored {
            s3_info,
            completes,
            lock,
        } = stored;
        let digest = &digests.sha256;
        if !overwrite && self.tree.get(owner, path).await?.is_some() {
            return Err(VolumeError::AlreadyExists(path.to_string()));
        }
        let size = staged.content_len();
        let keeping = versioning::keeping_now(
            self.db(),
            &self.versioning,
            owner,
            path.as_str(),
            self.policy,
        )
        .await?;
        // Once written: where, if packed (see `packing`).
        let mut written: Option<Option<blobs::Packed>> = None;
        // A packed record, until the transaction naming it commits.
        let mut unsynced: Option<Arc<blobs::RecordSync>> = None;
        let mut waited = Duration::ZERO;
        loop {
            match ledger::peek(self.db(), digest).await? {
                Some(BlobState::Deleting { since_ms }) => {
                    if self.is_stale(since_ms) {
                        // Its remover stopped: finish it (or let whoever
                        // took it over first do so).
                        self.take_over_removal(digest, since_ms).await?;
                    }
                    waited += self.wait_for_removal(digest, waited).await?;
                    continue;
                }
                None if written.is_none() => {
                    let write = self.write_blob(digest, &mut staged).await?;
                    let (packed, sync) = write.unzip();
                    written = Some(packed);
                    unsynced = sync.map(Arc::new);
                }
                _ => {}
            }
            let mut tx = self.db().begin_write().await?;
            if let Some(sync) = &unsynced {
                tx.durable_first(sync.clone());
            }
            // A blob just written is claimed at once (a statement fewer per
            // new blob); what is there is looked at only if that fails.
            // Until this transaction ends no removal can start (a release
            // needs a committed `stored` row, an orphan removal this very
            // key), and one that finished before the claim finished
            // deleting first: so the blob found now stays.
            let claimed = match written {
                Some(packed) => ledger::insert_stored(&mut tx, digest, now_ms(), packed).await?,
                None => false,
            };
            if claimed {
                if written.flatten().is_none() && !self.blobs.exists(digest).await? {
                    tx.rollback().await?;
                    written = None;
                    continue;
                }
            } else {
                match ledger::lock(self.db(), &mut tx, digest).await? {
                    Some(BlobState::Stored) => {}
                    // A removal began, or finished and took the blob: look again.
                    Some(BlobState::Deleting { .. }) => {
                        tx.rollback().await?;
                        continue;
                    }
                    None if written.is_none() => {
                        tx.rollback().await?;
                        continue;
                    }
                    // No row, yet the claim failed: its segment retired (or a row came and went).
                    None => {
                        if self.packed_gone(&mut tx, written.flatten()).await? {
                            written = None;
                        }
                        tx.rollback().await?;
                        continue;
                    }
                }
            }
            // What this write takes off the path leaves the owner's usage
            // only where it is not kept.
            // (Or where the retention governs it: room is then taken from
            // the oldest kept versions, that one last, see `settle` below.)
            let leaves = keeping.retained()
                || match keeping.state {
                    Versioning::Unversioned => true,
                    Versioning::Enabled => false,
                    Versioning::Suspended => self
                        .tree
                        .get_locked(&mut tx, owner, path)
                        .await?
                        .is_some_and(|current| current.version_id == NULL_VERSION),
                };
            let leaving = quota::Leaving {
                file: leaves.then_some(path),
                upload: completes,
            };
            let version_id = match completes {
                Some(upload) if keeping.state == Versioning::Enabled => upload_version_id(upload),
                _ => Self::version_for(keeping),
            };
            let how = tree::Upsert {
                overwrite,
                now_ms: now_ms(),
                s3_info,
                version_id: &version_id,
            };
            // Weighed (see `quota`) in the transaction that stores the
            // file, holding the owner's row.
            let cost = quota::cost(size);
            let mut released = Vec::new();
            let upserted = match quota::weigh(self.db(), &mut tx, owner, leaving, cost).await {
                Ok(quota) => {
                    match self
                        .tree
                        .upsert(&mut tx, owner, path, (size, digests, content_type), how)
                        .await
                    {
                        Ok(replaced) => {
                            locking::stamp(
                                &mut tx,
                                owner,
                                path.as_str(),
                                &replaced.meta.version_id,
                                lock,
                                keeping,
                            )
                            .await?;
                            if let Some(previous) = replaced.previous {
                                self.retire(&mut tx, owner, previous, keeping, &mut released)
                                    .await?;
                                if keeping.keeps() && keeping.retained() {
                                    quota::settle(self.db(), &mut tx, owner, quota).await?;
                                }
                            } else if keeping.state == Versioning::Suspended {
                                released.extend(
                                    history::remove_null(&mut tx, owner, path.as_str()).await?,
                                );
                            }
                            Ok(replaced.meta)
                        }
                        Err(error) => Err(error),
                    }
                }
                Err(error) => Err(error),
            };
            return match upserted {
                Ok(meta) => {
                    released.retain(|previous| previous != digest);
                    let let_go = self.let_go_in(&mut tx, released).await?;
                    tx.commit().await?;
                    self.finish_letting_go(let_go).await;
                    Ok(meta)
                }
                Err(
                    error @ (VolumeError::AlreadyExists(_) | VolumeError::QuotaExceeded { .. }),
                ) => {
                    // Keep the blob recorded, then let it go: nothing names it.
                    tx.commit().await?;
                    self.release_logged(digest).await;
                    Err(error)
                }
                // Rolled back; a blob this call wrote is an orphan the next
                // collection removes.
                Err(error) => Err(error),
            };
        }
    }
}
