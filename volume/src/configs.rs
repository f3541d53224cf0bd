//! A bucket's configurations kept as documents (`bucket_config`), as the
//! volume offers them: read, set, removed, and found by the bucket's name
//! alone for the kinds that claim it (CORS rules and a policy answer
//! requests that carry no credentials). Owns no table.

use crate::Volume;
use crate::bucket_config::{self, ConfigKind};
use crate::db::WriteTx;
use crate::error::VolumeError;
use crate::types::Owner;

impl Volume {
    /// `owner`'s bucket `bucket`'s document of `kind`, if it has one.
    pub async fn bucket_config(
        &self,
        owner: Owner,
        bucket: &str,
        kind: ConfigKind,
    ) -> Result<Option<String>, VolumeError> {
        bucket_config::get(self.db(), owner, bucket, kind).await
    }

    /// Set `owner`'s bucket `bucket`'s document of `kind`. One that claims
    /// the name is refused (`BucketNameClaimed`) while another owner's
    /// bucket of that name has one.
    pub async fn set_bucket_config(
        &self,
        owner: Owner,
        bucket: &str,
        kind: ConfigKind,
        body: &str,
    ) -> Result<(), VolumeError> {
        self.db()
            .write(async |tx: &mut WriteTx| {
                if kind.claims_the_name()
                    && let Some((holder, _)) = bucket_config::claimed(tx, bucket, kind).await?
                    && holder != owner
                {
                    return Err(VolumeError::BucketNameClaimed(bucket.to_owned()));
                }
                bucket_config::put(tx, owner, bucket, kind, body).await
            })
            .await
    }

    /// Remove `owner`'s bucket `bucket`'s document of `kind` (every kind:
    /// `None`, the bucket is gone); whether there was one.
    pub async fn delete_bucket_config(
        &self,
        owner: Owner,
        bucket: &str,
        kind: Option<ConfigKind>,
    ) -> Result<bool, VolumeError> {
        self.db()
            .write(async |tx: &mut WriteTx| bucket_config::delete(tx, owner, bucket, kind).await)
            .await
    }

    /// Whether any owner has a bucket (a top-level folder) named `bucket`.
    pub async fn bucket_named_anywhere(&self, bucket: &str) -> Result<bool, VolumeError> {
        let prefix = crate::Prefix::parse(&format!("{bucket}/"))?;
        self.tree.held_by_anyone(&prefix).await
    }

    /// The owner whose bucket `bucket` has a document of `kind` that claims
    /// the name, and the document: what a request without credentials
    /// naming the bucket is answered by.
    pub async fn claimed_bucket_config(
        &self,
        bucket: &str,
        kind: ConfigKind,
    ) -> Result<Option<(Owner, String)>, VolumeError> {
        let mut conn = self.db().connection().await?;
        bucket_config::claimed(&mut conn, bucket, kind).await
    }
}
