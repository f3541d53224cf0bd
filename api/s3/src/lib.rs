//! The S3 API, on its own listener (`--s3-listen`): an adapter over the
//! file service, like REST and WebDAV. A bucket is a top-level folder of
//! its owner's tree and an object key the path under it, so
//! `s3://photos/2024/beach.jpg` is `/files/photos/2024/beach.jpg` and
//! `/dav/photos/2024/beach.jpg` of the same user: one namespace, three
//! protocols.
//!
//! `s3s` parses requests, verifies SigV4 (header, presigned URL, streaming
//! chunks and trailers) and writes S3's XML; this module answers each
//! operation from the file service.
//!
//! One file per family of operations, as a newcomer looks for them:
//!
//! - `buckets`: listing, creating, checking and deleting buckets.
//! - `get`: `GetObject` and `HeadObject`, through one answer builder.
//! - `put`: `PutObject`.
//! - `copy`: `CopyObject`, and the source an `UploadPartCopy` reads.
//! - `delete`: `DeleteObject` and `DeleteObjects`.
//! - `list`: `ListObjects` and `ListObjectsV2` over the flat key space.
//! - `multipart`: multipart uploads as upload sessions of the service.
//! - `versioning`: a bucket's versioning, and listing versions.
//! - `object_lock`: a bucket's object lock, a version's retention and
//!   legal hold.
//! - `lifecycle`: a bucket's lifecycle rules.
//! - `post_object`: browser form uploads with a signed policy.
//! - `cors`: a bucket's CORS rules, preflights and the headers of
//!   cross-origin answers.
//! - `policy`: bucket policies that make objects public, and the reads
//!   they let anyone make.
//! - `tagging`: an object version's tags and a bucket's.
//! - `defaults`: ACLs (the owner's alone) and S3's answers for the bucket
//!   configurations this store keeps none of.
//!
//! and what they share:
//!
//! - `answers`: request ids and the fixes every answer goes through.
//! - `keys`: access keys, their sealed secrets, and who a request acts for.
//! - `lookup`: an object (or a folder marker) found by its key.
//! - `conditions`: `If-Match` and its kin, on reads and copies.
//! - `if_range`: `GetObject`'s `If-Range`, against the ETag S3 sends.
//! - `info`: what S3 keeps of an object (ETag, metadata, headers).
//! - `checksum`: S3's checksums, and the one a request declares.
//! - `body`: the checks a body passes on its way in.
//! - `error`: the service's errors in S3's codes.
//! - `guard`: what a request must carry before `s3s` sees it (every
//!   `x-amz-*` header signed, presign limits, dates, a bounded XML body),
//!   and the headers every answer carries.

mod answers;
mod body;
mod buckets;
mod checksum;
mod conditions;
mod copy;
mod cors;
mod defaults;
mod delete;
mod error;
mod get;
mod guard;
mod if_range;
mod info;
pub mod keys;
mod lifecycle;
mod list;
mod lookup;
mod multipart;
mod object_lock;
mod paging;
mod policy;
mod post_object;
mod put;
mod tagging;
mod versioning;

use std::sync::Arc;

use axum::Router;
use axum::error_handling::HandleError;
use axum::http::StatusCode;
use s3s::dto::Timestamp;
use s3s::service::S3ServiceBuilder;
use s3s::{S3, S3Error, S3ErrorCode, S3Request, S3Response, S3Result, s3_error};
use volume::{FilePath, PathError, Prefix};

use auth::{Authenticator, Caller};
use file_service::FileService;

pub use keys::MasterKey;

/// The S3 API's HTTP interface, for `server::serve`; `domain` also
/// accepts virtual-hosted-style requests (`BUCKET.DOMAIN`).
pub fn router(
    files: FileService,
    auth: Arc<Authenticator>,
    master: MasterKey,
    domain: Option<&str>,
    loopback: bool,
) -> anyhow::Result<Router> {
    let keys = keys::KeyRing::new(auth, files.clone(), master, loopback);
    let cors_state = cors::CorsState {
        files: files.clone(),
        keys: keys.clone(),
        domain: domain.map(Arc::<str>::from),
    };
    let form_state = post_object::FormState {
        files: files.clone(),
        keys: keys.clone(),
        domain: domain.map(Arc::<str>::from),
    };
    let mut builder = S3ServiceBuilder::new(S3Api::of(files));
    builder.set_auth(keys.clone());
    builder.set_access(keys);
    // What s3s reads whole, outside the memory budget, stays small: an XML
    // body (1000 keys to delete, 10000 parts to complete fit in 4 MiB, read
    // by `guard`), and no browser form uploads at all (refused there).
    let mut config = s3s::config::S3Config::default();
    config.xml_max_body_size = guard::MAX_XML_BODY;
    config.post_object_max_file_size = 0;
    builder.set_config(Arc::new(s3s::config::StaticConfigProvider::new(Arc::new(
        config,
    ))));
    if let Some(domain) = domain {
        builder.set_host(Portless {
            domain: domain.to_ascii_lowercase(),
            inner: s3s::host::SingleDomain::new(domain)?,
        });
    }
    let service = builder.build();
    Ok(Router::new()
        .fallback_service(HandleError::new(
            service,
            |error: s3s::HttpError| async move {
                tracing::error!(?error, "the S3 service failed");
                StatusCode::INTERNAL_SERVER_ERROR
            },
        ))
        .layer(axum::middleware::from_fn_with_state(
            domain.map(Arc::<str>::from),
            guard::guard,
        ))
        .layer(axum::middleware::from_fn_with_state(
            form_state,
            post_object::post_object,
        ))
        .layer(axum::middleware::from_fn_with_state(cors_state, cors::cors))
        .layer(axum::middleware::from_fn(answers::one_xml_declaration))
        .layer(axum::middleware::from_fn(answers::versions_in_order))
        .layer(axum::middleware::from_fn(answers::request_ids))
        .layer(api_common::trace_layer()))
}

/// Virtual-hosted-style addressing under one domain, whatever port the
/// `Host` names (`photos.s3.example.com:9000`); any other host (an
/// address, `localhost`) is path style.
struct Portless {
    domain: String,
    inner: s3s::host::SingleDomain,
}

impl s3s::host::S3Host for Portless {
    fn parse_host_header<'a>(&'a self, host: &'a str) -> S3Result<s3s::host::VirtualHost<'a>> {
        let name = match host.rsplit_once(':') {
            Some((name, port))
                if !name.contains(':')
                    && !port.is_empty()
                    && port.bytes().all(|b| b.is_ascii_digit()) =>
            {
                name
            }
            _ => host,
        };
        let lower = name.to_ascii_lowercase();
        let domain = self.domain.as_str();
        if lower == domain || lower.ends_with(&format!(".{domain}")) {
            self.inner.parse_host_header(name)
        } else {
            Ok(s3s::host::VirtualHost::new(host))
        }
    }
}

/// The S3 operations, answered by the file service.
#[derive(Debug, Clone)]
struct S3Api {
    files: FileService,
    /// Buckets' lifecycle rules, as last read (`x-amz-expiration`).
    lifecycles: lifecycle::RuleCache,
}

impl S3Api {
    /// The operations over `files`.
    fn of(files: FileService) -> Self {
        Self {
            files,
            lifecycles: lifecycle::RuleCache::default(),
        }
    }
}

/// The caller `s3s`'s access check found for `req` (see `keys`).
fn caller<T>(req: &S3Request<T>) -> S3Result<Caller> {
    req.extensions
        .get::<Caller>()
        .cloned()
        .ok_or_else(|| s3_error!(AccessDenied))
}

/// The folder of bucket `bucket`.
fn bucket_prefix(bucket: &str) -> S3Result<Prefix> {
    Prefix::parse(bucket).map_err(|_| s3_error!(InvalidBucketName))
}

/// The file of `key` in bucket `bucket`.
fn object_path(bucket: &str, key: &str) -> S3Result<FilePath> {
    if key.is_empty() {
        return Err(s3_error!(
            InvalidArgument,
            "An object key may not be empty."
        ));
    }
    FilePath::parse(&format!("{bucket}/{key}")).map_err(|error| match error {
        PathError::TooLong(_) | PathError::NameTooLong(_) => S3Error::with_message(
            S3ErrorCode::KeyTooLongError,
            format!("Your key is too long for this store: {error}"),
        ),
        error => S3Error::with_message(
            S3ErrorCode::InvalidArgument,
            format!("This store cannot keep the key {key:?}: {error}"),
        ),
    })
}

/// The owner S3 names in listings: the caller's tree.
fn owner_of(caller: &Caller) -> s3s::dto::Owner {
    let owner = caller.owner();
    s3s::dto::Owner {
        display_name: Some(
            caller
                .user()
                .map_or_else(|| "open".to_owned(), |user| user.name.clone()),
        ),
        id: Some(
            owner
                .user_id()
                .map_or_else(|| "open".to_owned(), |id| format!("user-{}", id.get())),
        ),
    }
}

/// Milliseconds since the epoch as S3's timestamp.
fn timestamp(ms: i64) -> Timestamp {
    let at = std::time::UNIX_EPOCH
        + std::time::Duration::from_millis(u64::try_from(ms).unwrap_or_default());
    Timestamp::from(at)
}

#[async_trait::async_trait]
impl S3 for S3Api {
    async fn list_buckets(
        &self,
        req: S3Request<s3s::dto::ListBucketsInput>,
    ) -> S3Result<S3Response<s3s::dto::ListBucketsOutput>> {
        self.list_buckets_(req).await
    }

    async fn create_bucket(
        &self,
        req: S3Request<s3s::dto::CreateBucketInput>,
    ) -> S3Result<S3Response<s3s::dto::CreateBucketOutput>> {
        self.create_bucket_(req).await
    }

    async fn head_bucket(
        &self,
        req: S3Request<s3s::dto::HeadBucketInput>,
    ) -> S3Result<S3Response<s3s::dto::HeadBucketOutput>> {
        self.head_bucket_(req).await
    }

    async fn delete_bucket(
        &self,
        req: S3Request<s3s::dto::DeleteBucketInput>,
    ) -> S3Result<S3Response<s3s::dto::DeleteBucketOutput>> {
        self.delete_bucket_(req).await
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<s3s::dto::GetBucketLocationInput>,
    ) -> S3Result<S3Response<s3s::dto::GetBucketLocationOutput>> {
        self.get_bucket_location_(req).await
    }

    async fn put_object(
        &self,
        req: S3Request<s3s::dto::PutObjectInput>,
    ) -> S3Result<S3Response<s3s::dto::PutObjectOutput>> {
        self.put_object_(req).await
    }

    async fn get_object(
        &self,
        req: S3Request<s3s::dto::GetObjectInput>,
    ) -> S3Result<S3Response<s3s::dto::GetObjectOutput>> {
        self.get_object_(req).await
    }

    async fn head_object(
        &self,
        req: S3Request<s3s::dto::HeadObjectInput>,
    ) -> S3Result<S3Response<s3s::dto::HeadObjectOutput>> {
        self.head_object_(req).await
    }

    async fn delete_object(
        &self,
        req: S3Request<s3s::dto::DeleteObjectInput>,
    ) -> S3Result<S3Response<s3s::dto::DeleteObjectOutput>> {
        self.delete_object_(req).await
    }

    async fn delete_objects(
        &self,
        req: S3Request<s3s::dto::DeleteObjectsInput>,
    ) -> S3Result<S3Response<s3s::dto::DeleteObjectsOutput>> {
        self.delete_objects_(req).await
    }

    async fn copy_object(
        &self,
        req: S3Request<s3s::dto::CopyObjectInput>,
    ) -> S3Result<S3Response<s3s::dto::CopyObjectOutput>> {
        self.copy_object_(req).await
    }

    async fn list_objects(
        &self,
        req: S3Request<s3s::dto::ListObjectsInput>,
    ) -> S3Result<S3Response<s3s::dto::ListObjectsOutput>> {
        self.list_objects_(req).await
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<s3s::dto::ListObjectsV2Input>,
    ) -> S3Result<S3Response<s3s::dto::ListObjectsV2Output>> {
        self.list_objects_v2_(req).await
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<s3s::dto::CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<s3s::dto::CreateMultipartUploadOutput>> {
        self.create_multipart_upload_(req).await
    }

    async fn upload_part(
        &self,
        req: S3Request<s3s::dto::UploadPartInput>,
    ) -> S3Result<S3Response<s3s::dto::UploadPartOutput>> {
        self.upload_part_(req).await
    }

    async fn upload_part_copy(
        &self,
        req: S3Request<s3s::dto::UploadPartCopyInput>,
    ) -> S3Result<S3Response<s3s::dto::UploadPartCopyOutput>> {
        self.upload_part_copy_(req).await
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<s3s::dto::CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<s3s::dto::CompleteMultipartUploadOutput>> {
        self.complete_multipart_upload_(req).await
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<s3s::dto::AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<s3s::dto::AbortMultipartUploadOutput>> {
        self.abort_multipart_upload_(req).await
    }

    async fn list_parts(
        &self,
        req: S3Request<s3s::dto::ListPartsInput>,
    ) -> S3Result<S3Response<s3s::dto::ListPartsOutput>> {
        self.list_parts_(req).await
    }

    async fn get_bucket_versioning(
        &self,
        req: S3Request<s3s::dto::GetBucketVersioningInput>,
    ) -> S3Result<S3Response<s3s::dto::GetBucketVersioningOutput>> {
        self.get_bucket_versioning_(req).await
    }

    async fn put_bucket_versioning(
        &self,
        req: S3Request<s3s::dto::PutBucketVersioningInput>,
    ) -> S3Result<S3Response<s3s::dto::PutBucketVersioningOutput>> {
        self.put_bucket_versioning_(req).await
    }

    async fn list_object_versions(
        &self,
        req: S3Request<s3s::dto::ListObjectVersionsInput>,
    ) -> S3Result<S3Response<s3s::dto::ListObjectVersionsOutput>> {
        self.list_object_versions_(req).await
    }

    async fn list_multipart_uploads(
        &self,
        req: S3Request<s3s::dto::ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<s3s::dto::ListMultipartUploadsOutput>> {
        self.list_multipart_uploads_(req).await
    }

    async fn put_object_lock_configuration(
        &self,
        req: S3Request<s3s::dto::PutObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<s3s::dto::PutObjectLockConfigurationOutput>> {
        self.put_object_lock_configuration_(req).await
    }

    async fn get_object_lock_configuration(
        &self,
        req: S3Request<s3s::dto::GetObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<s3s::dto::GetObjectLockConfigurationOutput>> {
        self.get_object_lock_configuration_(req).await
    }

    async fn put_object_retention(
        &self,
        req: S3Request<s3s::dto::PutObjectRetentionInput>,
    ) -> S3Result<S3Response<s3s::dto::PutObjectRetentionOutput>> {
        self.put_object_retention_(req).await
    }

    async fn get_object_retention(
        &self,
        req: S3Request<s3s::dto::GetObjectRetentionInput>,
    ) -> S3Result<S3Response<s3s::dto::GetObjectRetentionOutput>> {
        self.get_object_retention_(req).await
    }

    async fn put_object_legal_hold(
        &self,
        req: S3Request<s3s::dto::PutObjectLegalHoldInput>,
    ) -> S3Result<S3Response<s3s::dto::PutObjectLegalHoldOutput>> {
        self.put_object_legal_hold_(req).await
    }

    async fn get_object_legal_hold(
        &self,
        req: S3Request<s3s::dto::GetObjectLegalHoldInput>,
    ) -> S3Result<S3Response<s3s::dto::GetObjectLegalHoldOutput>> {
        self.get_object_legal_hold_(req).await
    }

    async fn put_bucket_lifecycle_configuration(
        &self,
        req: S3Request<s3s::dto::PutBucketLifecycleConfigurationInput>,
    ) -> S3Result<S3Response<s3s::dto::PutBucketLifecycleConfigurationOutput>> {
        self.put_bucket_lifecycle_configuration_(req).await
    }

    async fn get_bucket_lifecycle_configuration(
        &self,
        req: S3Request<s3s::dto::GetBucketLifecycleConfigurationInput>,
    ) -> S3Result<S3Response<s3s::dto::GetBucketLifecycleConfigurationOutput>> {
        self.get_bucket_lifecycle_configuration_(req).await
    }

    async fn delete_bucket_lifecycle(
        &self,
        req: S3Request<s3s::dto::DeleteBucketLifecycleInput>,
    ) -> S3Result<S3Response<s3s::dto::DeleteBucketLifecycleOutput>> {
        self.delete_bucket_lifecycle_(req).await
    }

    async fn get_bucket_acl(
        &self,
        req: S3Request<s3s::dto::GetBucketAclInput>,
    ) -> S3Result<S3Response<s3s::dto::GetBucketAclOutput>> {
        self.get_bucket_acl_(req).await
    }

    async fn put_bucket_acl(
        &self,
        req: S3Request<s3s::dto::PutBucketAclInput>,
    ) -> S3Result<S3Response<s3s::dto::PutBucketAclOutput>> {
        self.put_bucket_acl_(req).await
    }

    async fn get_object_acl(
        &self,
        req: S3Request<s3s::dto::GetObjectAclInput>,
    ) -> S3Result<S3Response<s3s::dto::GetObjectAclOutput>> {
        self.get_object_acl_(req).await
    }

    async fn put_object_acl(
        &self,
        req: S3Request<s3s::dto::PutObjectAclInput>,
    ) -> S3Result<S3Response<s3s::dto::PutObjectAclOutput>> {
        self.put_object_acl_(req).await
    }

    async fn get_bucket_encryption(
        &self,
        req: S3Request<s3s::dto::GetBucketEncryptionInput>,
    ) -> S3Result<S3Response<s3s::dto::GetBucketEncryptionOutput>> {
        self.get_bucket_encryption_(req).await
    }

    async fn get_bucket_website(
        &self,
        req: S3Request<s3s::dto::GetBucketWebsiteInput>,
    ) -> S3Result<S3Response<s3s::dto::GetBucketWebsiteOutput>> {
        self.get_bucket_website_(req).await
    }

    async fn get_bucket_replication(
        &self,
        req: S3Request<s3s::dto::GetBucketReplicationInput>,
    ) -> S3Result<S3Response<s3s::dto::GetBucketReplicationOutput>> {
        self.get_bucket_replication_(req).await
    }

    async fn get_public_access_block(
        &self,
        req: S3Request<s3s::dto::GetPublicAccessBlockInput>,
    ) -> S3Result<S3Response<s3s::dto::GetPublicAccessBlockOutput>> {
        self.get_public_access_block_(req).await
    }

    async fn get_bucket_ownership_controls(
        &self,
        req: S3Request<s3s::dto::GetBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<s3s::dto::GetBucketOwnershipControlsOutput>> {
        self.get_bucket_ownership_controls_(req).await
    }

    async fn get_bucket_logging(
        &self,
        req: S3Request<s3s::dto::GetBucketLoggingInput>,
    ) -> S3Result<S3Response<s3s::dto::GetBucketLoggingOutput>> {
        self.get_bucket_logging_(req).await
    }

    async fn get_bucket_notification_configuration(
        &self,
        req: S3Request<s3s::dto::GetBucketNotificationConfigurationInput>,
    ) -> S3Result<S3Response<s3s::dto::GetBucketNotificationConfigurationOutput>> {
        self.get_bucket_notification_configuration_(req).await
    }

    async fn get_bucket_request_payment(
        &self,
        req: S3Request<s3s::dto::GetBucketRequestPaymentInput>,
    ) -> S3Result<S3Response<s3s::dto::GetBucketRequestPaymentOutput>> {
        self.get_bucket_request_payment_(req).await
    }

    async fn get_bucket_accelerate_configuration(
        &self,
        req: S3Request<s3s::dto::GetBucketAccelerateConfigurationInput>,
    ) -> S3Result<S3Response<s3s::dto::GetBucketAccelerateConfigurationOutput>> {
        self.get_bucket_accelerate_configuration_(req).await
    }

    async fn put_object_tagging(
        &self,
        req: S3Request<s3s::dto::PutObjectTaggingInput>,
    ) -> S3Result<S3Response<s3s::dto::PutObjectTaggingOutput>> {
        self.put_object_tagging_(req).await
    }

    async fn get_object_tagging(
        &self,
        req: S3Request<s3s::dto::GetObjectTaggingInput>,
    ) -> S3Result<S3Response<s3s::dto::GetObjectTaggingOutput>> {
        self.get_object_tagging_(req).await
    }

    async fn delete_object_tagging(
        &self,
        req: S3Request<s3s::dto::DeleteObjectTaggingInput>,
    ) -> S3Result<S3Response<s3s::dto::DeleteObjectTaggingOutput>> {
        self.delete_object_tagging_(req).await
    }

    async fn put_bucket_tagging(
        &self,
        req: S3Request<s3s::dto::PutBucketTaggingInput>,
    ) -> S3Result<S3Response<s3s::dto::PutBucketTaggingOutput>> {
        self.put_bucket_tagging_(req).await
    }

    async fn get_bucket_tagging(
        &self,
        req: S3Request<s3s::dto::GetBucketTaggingInput>,
    ) -> S3Result<S3Response<s3s::dto::GetBucketTaggingOutput>> {
        self.get_bucket_tagging_(req).await
    }

    async fn delete_bucket_tagging(
        &self,
        req: S3Request<s3s::dto::DeleteBucketTaggingInput>,
    ) -> S3Result<S3Response<s3s::dto::DeleteBucketTaggingOutput>> {
        self.delete_bucket_tagging_(req).await
    }

    async fn put_bucket_policy(
        &self,
        req: S3Request<s3s::dto::PutBucketPolicyInput>,
    ) -> S3Result<S3Response<s3s::dto::PutBucketPolicyOutput>> {
        self.put_bucket_policy_(req).await
    }

    async fn get_bucket_policy(
        &self,
        req: S3Request<s3s::dto::GetBucketPolicyInput>,
    ) -> S3Result<S3Response<s3s::dto::GetBucketPolicyOutput>> {
        self.get_bucket_policy_(req).await
    }

    async fn delete_bucket_policy(
        &self,
        req: S3Request<s3s::dto::DeleteBucketPolicyInput>,
    ) -> S3Result<S3Response<s3s::dto::DeleteBucketPolicyOutput>> {
        self.delete_bucket_policy_(req).await
    }

    async fn get_bucket_policy_status(
        &self,
        req: S3Request<s3s::dto::GetBucketPolicyStatusInput>,
    ) -> S3Result<S3Response<s3s::dto::GetBucketPolicyStatusOutput>> {
        self.get_bucket_policy_status_(req).await
    }

    async fn put_bucket_cors(
        &self,
        req: S3Request<s3s::dto::PutBucketCorsInput>,
    ) -> S3Result<S3Response<s3s::dto::PutBucketCorsOutput>> {
        self.put_bucket_cors_(req).await
    }

    async fn get_bucket_cors(
        &self,
        req: S3Request<s3s::dto::GetBucketCorsInput>,
    ) -> S3Result<S3Response<s3s::dto::GetBucketCorsOutput>> {
        self.get_bucket_cors_(req).await
    }

    async fn delete_bucket_cors(
        &self,
        req: S3Request<s3s::dto::DeleteBucketCorsInput>,
    ) -> S3Result<S3Response<s3s::dto::DeleteBucketCorsOutput>> {
        self.delete_bucket_cors_(req).await
    }
}
