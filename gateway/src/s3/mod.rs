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
//!
//! and what they share:
//!
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

mod body;
mod buckets;
mod checksum;
mod conditions;
mod copy;
mod delete;
mod error;
mod get;
mod guard;
mod if_range;
mod info;
pub mod keys;
mod list;
mod lookup;
mod multipart;
mod put;

use std::sync::Arc;

use axum::Router;
use axum::error_handling::HandleError;
use axum::http::StatusCode;
use s3s::dto::Timestamp;
use s3s::service::S3ServiceBuilder;
use s3s::{S3, S3Error, S3ErrorCode, S3Request, S3Response, S3Result, s3_error};
use volume::{FilePath, PathError, Prefix};

use crate::auth::{Authenticator, Caller};
use crate::service::FileService;

pub use keys::MasterKey;

/// The S3 API's HTTP interface, for `server::serve`; `domain` also
/// accepts virtual-hosted-style requests (`BUCKET.DOMAIN`).
pub(crate) fn router(
    files: FileService,
    auth: Arc<Authenticator>,
    master: MasterKey,
    domain: Option<&str>,
    loopback: bool,
) -> anyhow::Result<Router> {
    let keys = keys::KeyRing::new(auth, master, loopback);
    let mut builder = S3ServiceBuilder::new(S3Api { files });
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
        .layer(axum::middleware::from_fn(one_xml_declaration))
        .layer(axum::middleware::from_fn(request_ids))
        .layer(crate::trace_layer()))
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

/// Keep a `CompleteMultipartUpload` answer one XML document when its
/// completion fails. `s3s` 0.14 answers `200` with an XML declaration,
/// whitespace while the parts stream by, then the result; an error result
/// comes with a second declaration, which no XML parser accepts (botocore
/// then reports a bare `(500)` and loses the error's code). Fixed upstream
/// in `s3s` 0.15, which needs a newer Rust than this project's 1.95.
async fn one_xml_declaration(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use futures_util::StreamExt as _;
    let completion = request.method() == axum::http::Method::POST
        && request
            .uri()
            .query()
            .is_some_and(|query| query.split('&').any(|pair| pair.starts_with("uploadId=")));
    let response = next.run(request).await;
    if !completion || response.status() != StatusCode::OK {
        return response;
    }
    let (parts, body) = response.into_parts();
    let mut first = true;
    let body = body.into_data_stream().map(move |chunk| {
        chunk.map(|chunk| match std::mem::take(&mut first) {
            true => chunk,
            false => after_declaration(chunk),
        })
    });
    axum::response::Response::from_parts(parts, axum::body::Body::from_stream(body))
}

/// `chunk` without the XML declaration it starts with, if it does.
fn after_declaration(chunk: bytes::Bytes) -> bytes::Bytes {
    const OPEN: &[u8] = b"<?xml";
    if !chunk.starts_with(OPEN) {
        return chunk;
    }
    match chunk.windows(2).position(|pair| pair == b"?>") {
        Some(end) => chunk.slice(end + 2..),
        None => chunk,
    }
}

/// Largest error body given its request id.
const MAX_ERROR_BODY: usize = 64 << 10;

/// Give every answer S3's request ids (`x-amz-request-id`, `x-amz-id-2`),
/// and every error document its `RequestId` and `HostId`, as S3 does:
/// what a user quotes when something went wrong.
async fn request_ids(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::HeaderValue;
    let id = format!("{:016X}", rand::random::<u64>());
    let host = format!("{:032x}", rand::random::<u128>());
    let head = request.method() == axum::http::Method::HEAD;
    tracing::debug!(request_id = %id, method = %request.method(), uri = %request.uri(), "S3 request");
    let mut response = next.run(request).await;
    // s3s answers a ranged HEAD with 200; S3 with 206, as for a GET.
    if head
        && response.status() == StatusCode::OK
        && response
            .headers()
            .contains_key(axum::http::header::CONTENT_RANGE)
    {
        *response.status_mut() = StatusCode::PARTIAL_CONTENT;
    }
    let status = response.status();
    let failed = status.is_client_error() || status.is_server_error();
    // s3s writes an error document whole, with no Content-Length yet
    // (hyper adds it): its body knows its exact size.
    let small = {
        use hyper::body::Body as _;
        response
            .body()
            .size_hint()
            .exact()
            .is_some_and(|length| length <= MAX_ERROR_BODY as u64)
    };
    let mut response = if failed && small {
        let (mut parts, body) = response.into_parts();
        let body = match axum::body::to_bytes(body, MAX_ERROR_BODY).await {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                if text.ends_with("</Error>") && !text.contains("<RequestId>") {
                    log_failure(&id, status, &text);
                    let with_ids = format!(
                        "{}<RequestId>{id}</RequestId><HostId>{host}</HostId></Error>",
                        text.trim_end_matches("</Error>")
                    );
                    parts.headers.insert(
                        axum::http::header::CONTENT_LENGTH,
                        HeaderValue::from(with_ids.len()),
                    );
                    axum::body::Body::from(with_ids)
                } else {
                    axum::body::Body::from(bytes)
                }
            }
            Err(_) => axum::body::Body::empty(),
        };
        axum::response::Response::from_parts(parts, body)
    } else {
        response
    };
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&id) {
        headers.insert("x-amz-request-id", value);
    }
    if let Ok(value) = HeaderValue::from_str(&host) {
        headers.insert("x-amz-id-2", value);
    }
    response
}

/// Log an S3 failure answered with the error document `text`: a bounded
/// summary (its code and the start of its message), at DEBUG for what the
/// client got wrong or asked of a feature that is not there (4xx, 501) or
/// of a busy server (503); the server's own faults are logged where they
/// happen, with their detail (`error::s3_error_of`).
fn log_failure(id: &str, status: StatusCode, text: &str) {
    let element = |name: &str| {
        let open = format!("<{name}>");
        let start = text.find(&open)? + open.len();
        let end = text[start..].find("</")? + start;
        Some(&text[start..end])
    };
    let code = element("Code").unwrap_or_default();
    let message: String = element("Message")
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect();
    if status == StatusCode::INTERNAL_SERVER_ERROR {
        tracing::warn!(request_id = %id, %status, code, message, "an S3 request failed");
    } else {
        tracing::debug!(request_id = %id, %status, code, message, "an S3 request failed");
    }
}

/// The S3 operations, answered by the file service.
#[derive(Debug, Clone)]
struct S3Api {
    files: FileService,
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

    async fn list_multipart_uploads(
        &self,
        req: S3Request<s3s::dto::ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<s3s::dto::ListMultipartUploadsOutput>> {
        self.list_multipart_uploads_(req).await
    }
}
