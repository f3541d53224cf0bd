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
mod dispatch;
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
use s3s::{S3Error, S3ErrorCode, S3Request, S3Result, s3_error};
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
