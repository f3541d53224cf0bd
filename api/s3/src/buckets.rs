//! Buckets: the top-level folders of the caller's tree.

use s3s::dto::{
    Bucket, CreateBucketInput, CreateBucketOutput, DeleteBucketInput, DeleteBucketOutput,
    GetBucketLocationInput, GetBucketLocationOutput, HeadBucketInput, HeadBucketOutput,
    ListBucketsInput, ListBucketsOutput,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};
use volume::webdav::Node;
use volume::{Entry, FilePath, Owner, Prefix};

use file_service::LockTokens;

use super::error::s3_error_of;
use super::{S3Api, bucket_prefix, caller, timestamp};

/// What a top-level name is in a tree.
enum Found {
    /// A folder: a bucket, made at this time if it was made on purpose.
    Bucket(Option<i64>),
    /// A file: no bucket, and none can be made with its name.
    File,
    Missing,
}

impl S3Api {
    /// What `bucket` is in `owner`'s tree.
    async fn find_bucket(&self, owner: Owner, bucket: &str) -> S3Result<Found> {
        let path = FilePath::parse(bucket).map_err(|_| s3_error!(InvalidBucketName))?;
        // A top-level folder is a bucket even beside a file of its name
        // (REST lets both be).
        if self.bucket_exists(owner, bucket).await? {
            let made = match self.files.node(owner, Some(&path)).await {
                Ok(Node::Folder(folder)) => folder.created_ms,
                _ => None,
            };
            return Ok(Found::Bucket(made));
        }
        let node = self
            .files
            .node(owner, Some(&path))
            .await
            .map_err(|error| s3_error_of(error, s3s::S3ErrorCode::NoSuchBucket))?;
        Ok(match node {
            Node::Folder(folder) => Found::Bucket(folder.created_ms),
            Node::File(_) => Found::File,
            Node::Missing => Found::Missing,
        })
    }

    /// Whether `owner` has the bucket `bucket`: a top-level folder (one
    /// query).
    async fn bucket_exists(&self, owner: Owner, bucket: &str) -> S3Result<bool> {
        self.files
            .folder_exists(owner, &bucket_prefix(bucket)?)
            .await
            .map_err(|error| s3_error_of(error, s3s::S3ErrorCode::NoSuchBucket))
    }

    /// `Ok` if `bucket` is one of `owner`'s buckets, else `NoSuchBucket`.
    pub(super) async fn require_bucket(&self, owner: Owner, bucket: &str) -> S3Result<()> {
        if self.bucket_exists(owner, bucket).await? {
            Ok(())
        } else {
            Err(s3_error!(
                NoSuchBucket,
                "The specified bucket does not exist"
            ))
        }
    }

    pub(super) async fn list_buckets_(
        &self,
        req: S3Request<ListBucketsInput>,
    ) -> S3Result<S3Response<ListBucketsOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let mut buckets = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = self
                .files
                .list_page(owner, &Prefix::root(), after.as_deref(), 1000)
                .await
                .map_err(|error| s3_error_of(error, s3s::S3ErrorCode::NoSuchBucket))?;
            for entry in &page.entries {
                if let Entry::Folder(prefix) = entry {
                    let name = prefix.trim_end_matches('/');
                    // A folder whose name S3 cannot carry is not a bucket.
                    if s3s::path::check_bucket_name(name) {
                        buckets.push(name.to_owned());
                    }
                }
            }
            match page.next_after {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        let mut listed = Vec::with_capacity(buckets.len());
        for name in buckets {
            let created = match self.find_bucket(owner, &name).await? {
                Found::Bucket(created) => created,
                Found::File | Found::Missing => continue,
            };
            listed.push(Bucket {
                name: Some(name),
                creation_date: Some(timestamp(created.unwrap_or_default())),
                bucket_region: None,
            });
        }
        Ok(S3Response::new(ListBucketsOutput {
            buckets: Some(listed),
            owner: Some(super::owner_of(&caller)),
            ..ListBucketsOutput::default()
        }))
    }

    pub(super) async fn create_bucket_(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        let caller = caller(&req)?;
        let bucket = &req.input.bucket;
        let locked = req.input.object_lock_enabled_for_bucket == Some(true);
        if !s3s::path::check_bucket_name(bucket) {
            return Err(s3_error!(InvalidBucketName));
        }
        match self.find_bucket(caller.owner(), bucket).await? {
            Found::Bucket(_) => {
                return Err(s3_error!(
                    BucketAlreadyOwnedByYou,
                    "Your previous request to create the named bucket succeeded and you already own it."
                ));
            }
            Found::File => {
                return Err(s3_error!(
                    BucketAlreadyExists,
                    "A file of that name is at the top of your tree."
                ));
            }
            Found::Missing => {}
        }
        let prefix = bucket_prefix(bucket)?;
        self.files
            .make_folder(caller.owner(), &prefix, &LockTokens::default())
            .await
            .map_err(|error| s3_error_of(error, s3s::S3ErrorCode::NoSuchBucket))?;
        // A bucket S3 makes is unversioned until `PutBucketVersioning`,
        // whatever the operator's default for people's folders; one made
        // with object lock is versioned for good.
        if locked {
            self.files
                .set_bucket_lock(caller.owner(), bucket, volume::BucketLock::default(), true)
                .await
        } else {
            self.files
                .set_bucket_versioning(caller.owner(), bucket, volume::Versioning::Unversioned)
                .await
        }
        .map_err(|error| s3_error_of(error, s3s::S3ErrorCode::NoSuchBucket))?;
        Ok(S3Response::new(CreateBucketOutput {
            location: Some(format!("/{bucket}")),
        }))
    }

    pub(super) async fn head_bucket_(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        let caller = caller(&req)?;
        self.require_bucket(caller.owner(), &req.input.bucket)
            .await?;
        Ok(S3Response::new(HeadBucketOutput::default()))
    }

    pub(super) async fn delete_bucket_(
        &self,
        req: S3Request<DeleteBucketInput>,
    ) -> S3Result<S3Response<DeleteBucketOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let bucket = &req.input.bucket;
        self.require_bucket(owner, bucket).await?;
        let prefix = bucket_prefix(bucket)?;
        // Anything in it (a file, a folder made on purpose, an earlier
        // version or a delete marker) keeps it; checked and deleted at
        // once, so nothing put meanwhile goes too.
        let deleted = self
            .files
            .delete_folder_if_empty(owner, &prefix, &LockTokens::default())
            .await
            .map_err(|error| s3_error_of(error, s3s::S3ErrorCode::NoSuchBucket))?;
        if !deleted {
            return Err(s3_error!(
                BucketNotEmpty,
                "The bucket you tried to delete is not empty"
            ));
        }
        self.files
            .forget_bucket_versioning(owner, bucket)
            .await
            .map_err(|error| s3_error_of(error, s3s::S3ErrorCode::NoSuchBucket))?;
        self.files
            .delete_bucket_config(owner, bucket, None)
            .await
            .map_err(|error| s3_error_of(error, s3s::S3ErrorCode::NoSuchBucket))?;
        Ok(S3Response::new(DeleteBucketOutput::default()))
    }

    pub(super) async fn get_bucket_location_(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        let caller = caller(&req)?;
        self.require_bucket(caller.owner(), &req.input.bucket)
            .await?;
        // us-east-1, which S3 writes as no constraint at all.
        Ok(S3Response::new(GetBucketLocationOutput::default()))
    }
}
