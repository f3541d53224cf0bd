//! A bucket's configurations kept as documents (CORS rules, a policy, tags,
//! lifecycle rules), for the S3 adapter: the service keeps them and finds
//! the one a request without credentials names by the bucket's name.

use volume::{ConfigKind, Owner};

use crate::FileService;
use crate::error::ServiceError;

impl FileService {
    /// A bucket's document of `kind`, if it has one.
    pub async fn bucket_config(
        &self,
        owner: Owner,
        bucket: &str,
        kind: ConfigKind,
    ) -> Result<Option<String>, ServiceError> {
        mapped(self.volume.bucket_config(owner, bucket, kind).await, bucket)
    }

    /// Set a bucket's document of `kind` (`InvalidBucketState` when
    /// another user's bucket of the name claims it).
    pub async fn set_bucket_config(
        &self,
        owner: Owner,
        bucket: &str,
        kind: ConfigKind,
        body: &str,
    ) -> Result<(), ServiceError> {
        mapped(
            self.volume
                .set_bucket_config(owner, bucket, kind, body)
                .await,
            bucket,
        )
    }

    /// Remove a bucket's document of `kind` (`None`: every one, the bucket
    /// is gone); whether there was one.
    pub async fn delete_bucket_config(
        &self,
        owner: Owner,
        bucket: &str,
        kind: Option<ConfigKind>,
    ) -> Result<bool, ServiceError> {
        mapped(
            self.volume.delete_bucket_config(owner, bucket, kind).await,
            bucket,
        )
    }

    /// Whether any user has a bucket named `bucket`.
    pub async fn bucket_named_anywhere(&self, bucket: &str) -> Result<bool, ServiceError> {
        mapped(self.volume.bucket_named_anywhere(bucket).await, bucket)
    }

    /// The owner of the bucket named `bucket` whose document of `kind`
    /// claims the name, and the document.
    pub async fn claimed_bucket_config(
        &self,
        bucket: &str,
        kind: ConfigKind,
    ) -> Result<Option<(Owner, String)>, ServiceError> {
        mapped(
            self.volume.claimed_bucket_config(bucket, kind).await,
            bucket,
        )
    }
}

fn mapped<T>(result: Result<T, volume::VolumeError>, what: &str) -> Result<T, ServiceError> {
    result.map_err(|error| ServiceError::from_volume(error, what))
}
