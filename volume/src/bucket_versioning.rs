//! A bucket's versioning as S3 sets and reports it, over the
//! `versioning` table (see `versioning`): read through the process's
//! cache, set (never off while object lock is on), forgotten with the
//! bucket. Owns no table.

use crate::Volume;
use crate::db::WriteTx;
use crate::error::VolumeError;
use crate::types::{Owner, Versioning};
use crate::versioning;

impl Volume {
    /// The versioning S3 reports for `owner`'s bucket `bucket`: what
    /// `PutBucketVersioning` set, else (a folder made by another protocol)
    /// the operator's default; `None`: never configured.
    pub async fn bucket_versioning(
        &self,
        owner: Owner,
        bucket: &str,
    ) -> Result<Option<Versioning>, VolumeError> {
        let set = self.versioning.get(self.db(), owner, bucket).await?;
        Ok(match set.map(|set| set.versioning) {
            Some(Versioning::Unversioned) => None,
            Some(state) => Some(state),
            None => self.policy.versions.then_some(Versioning::Enabled),
        })
    }

    /// Set `owner`'s bucket `bucket`'s versioning (S3's
    /// `PutBucketVersioning`, or `Unversioned` for a bucket S3 makes): its
    /// versions are then kept by S3's rules, never expired by the
    /// operator's retention. A bucket with object lock keeps versioning
    /// on (`InvalidBucketState`).
    pub async fn set_bucket_versioning(
        &self,
        owner: Owner,
        bucket: &str,
        state: Versioning,
    ) -> Result<(), VolumeError> {
        let set = self
            .db()
            .write(async |tx: &mut WriteTx| {
                let lock = versioning::set_state(tx, owner, &format!("{bucket}/"))
                    .await?
                    .and_then(|set| set.lock);
                if lock.is_some() && state != Versioning::Enabled {
                    return Err(VolumeError::InvalidBucketState(
                        "An Object Lock configuration is present on this bucket, so the \
                         versioning state cannot be changed."
                            .to_owned(),
                    ));
                }
                versioning::set(tx, owner, bucket, state).await?;
                Ok(versioning::BucketState {
                    versioning: state,
                    lock,
                })
            })
            .await?;
        self.versioning.remember(owner, bucket, Some(set));
        Ok(())
    }

    /// Forget `owner`'s bucket `bucket`'s versioning (the bucket was
    /// deleted).
    pub async fn forget_bucket_versioning(
        &self,
        owner: Owner,
        bucket: &str,
    ) -> Result<(), VolumeError> {
        self.db()
            .write(async |tx: &mut WriteTx| versioning::forget(tx, owner, bucket).await)
            .await?;
        self.versioning.remember(owner, bucket, None);
        Ok(())
    }
}
