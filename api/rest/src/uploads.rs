//! Resumable uploads over tus 1.0.0 (<https://tus.io/protocols/resumable-upload>)
//! at `/uploads/`: the core protocol and the extensions `creation`,
//! `creation-with-upload`, `creation-defer-length`, `termination`,
//! `expiration`, `checksum` (`sha1`, `sha256`) and `concatenation`
//! (partial uploads sent side by side, joined by a final one). An adapter over the
//! file service's resumable uploads ([`crate::service`]): the caller, their
//! tree, the quota and the size limit are the same as for `/files/`.
//!
//! Where the file goes travels in `Upload-Metadata`: `path` (in the
//! caller's tree), else `filename` in `folder` (or the root); `filetype` is
//! its content type. `If-None-Match: *` on the creation asks that an
//! existing file not be replaced.

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{options, patch};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use volume::FilePath;
use volume::uploads::{Upload, UploadKind};

use crate::RestState;
use api_common::ApiError;
use api_common::headers::http_date;
use auth::Caller;
use file_service::{AppendError, Appended, Checksum, Chunk, ServiceError, StoreOptions};

const TUS_VERSION: &str = "1.0.0";
const EXTENSIONS: &str = "creation,creation-with-upload,creation-defer-length,termination,\
                          expiration,checksum,concatenation";
const OFFSET_OCTET_STREAM: &str = "application/offset+octet-stream";

pub(crate) fn router() -> Router<RestState> {
    Router::new()
        .route("/uploads", options(discover).post(create))
        .route("/uploads/", options(discover).post(create))
        .route(
            "/uploads/{id}",
            patch(append)
                .head(status)
                .delete(terminate)
                .options(discover),
        )
        .route_layer(axum::middleware::from_fn(require_version))
}

/// Every request but `OPTIONS` names the protocol version it speaks.
async fn require_version(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if request.method() != axum::http::Method::OPTIONS
        && let Some(refused) = wrong_version(request.headers())
    {
        return refused;
    }
    next.run(request).await
}

/// An answer in tus's dialect: every one carries `Tus-Resumable`.
struct Tus {
    status: StatusCode,
    headers: HeaderMap,
    body: Body,
}

impl Tus {
    fn new(status: StatusCode) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert("tus-resumable", HeaderValue::from_static(TUS_VERSION));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        Self {
            status,
            headers,
            body: Body::empty(),
        }
    }

    fn header(mut self, name: &'static str, value: impl ToString) -> Self {
        if let Ok(value) = HeaderValue::from_str(&value.to_string()) {
            self.headers.insert(name, value);
        }
        self
    }

    /// The upload's offset, length and expiry (and that it is partial).
    fn upload(self, upload: &Upload) -> Self {
        let mut tus = self
            .header("upload-offset", upload.received)
            .header("upload-expires", http_date(upload.expires_ms));
        if upload.kind == UploadKind::TusPartial {
            tus = tus.header("upload-concat", "partial");
        }
        match upload.length {
            Some(length) => tus.header("upload-length", length),
            None => tus.header("upload-defer-length", 1),
        }
    }

    /// An error as tus clients read it: the status, and the reason as text.
    fn error(status: StatusCode, why: impl ToString) -> Self {
        let mut tus = Self::new(status);
        tus.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        tus.body = Body::from(why.to_string());
        tus
    }
}

impl IntoResponse for Tus {
    fn into_response(self) -> Response {
        (self.status, self.headers, self.body).into_response()
    }
}

/// An error of the service, with `Tus-Resumable` added. Over the quota is
/// `413` here, as tus has it for an upload too large to take (`/files/`
/// says `507`): clients retry a 5xx, and no retry makes room.
fn service_error(error: impl Into<ApiError>) -> Response {
    let error = error.into();
    let over_quota = matches!(error, ApiError::Service(ServiceError::QuotaExceeded(_)));
    let mut response = error.into_response();
    if over_quota {
        *response.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
    }
    response
        .headers_mut()
        .insert("tus-resumable", HeaderValue::from_static(TUS_VERSION));
    response
}

/// The refusal of a request that does not speak tus 1.0.0.
fn wrong_version(headers: &HeaderMap) -> Option<Response> {
    match headers.get("tus-resumable").and_then(|v| v.to_str().ok()) {
        Some(TUS_VERSION) => None,
        _ => Some(
            Tus::error(
                StatusCode::PRECONDITION_FAILED,
                "this server speaks tus 1.0.0: send Tus-Resumable: 1.0.0",
            )
            .header("tus-version", TUS_VERSION)
            .into_response(),
        ),
    }
}

async fn discover(State(state): State<RestState>) -> Tus {
    Tus::new(StatusCode::NO_CONTENT)
        .header("tus-version", TUS_VERSION)
        .header("tus-extension", EXTENSIONS)
        .header("tus-max-size", state.files.max_body())
        .header("tus-checksum-algorithm", "sha1,sha256")
}

/// `Upload-Metadata`: comma-separated `key base64-value` pairs (a key
/// alone has an empty value).
fn metadata(headers: &HeaderMap) -> Result<Vec<(String, String)>, ApiError> {
    let Some(raw) = headers.get("upload-metadata") else {
        return Ok(Vec::new());
    };
    let raw = raw
        .to_str()
        .map_err(|_| ApiError::BadRequest("Upload-Metadata is not text".into()))?;
    raw.split(',')
        .map(str::trim)
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once(' ').unwrap_or((pair, ""));
            let value = BASE64
                .decode(value.trim())
                .ok()
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .ok_or_else(|| {
                    ApiError::BadRequest(format!(
                        "Upload-Metadata: {key}'s value is not base64 text"
                    ))
                })?;
            Ok((key.to_owned(), value))
        })
        .collect()
}

/// Where the upload's file goes: `path`, else `filename` in `folder`.
fn target(pairs: &[(String, String)]) -> Result<FilePath, ApiError> {
    let get = |key: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.trim_matches('/'))
    };
    let path = match (get("path"), get("filename"), get("folder")) {
        (Some(path), _, _) => path.to_owned(),
        (None, Some(name), Some(folder)) if !folder.is_empty() => format!("{folder}/{name}"),
        (None, Some(name), _) => name.to_owned(),
        (None, None, _) => {
            return Err(ApiError::BadRequest(
                "Upload-Metadata names no `path` (or `filename`) for the file".into(),
            ));
        }
    };
    Ok(FilePath::parse(&path)?)
}

fn number(headers: &HeaderMap, name: &str) -> Result<Option<u64>, ApiError> {
    headers
        .get(name)
        .map(|value| {
            value
                .to_str()
                .ok()
                .and_then(|text| text.trim().parse().ok())
                .ok_or_else(|| ApiError::BadRequest(format!("{name} is not a number of bytes")))
        })
        .transpose()
}

fn is_offset_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|kind| kind.trim().eq_ignore_ascii_case(OFFSET_OCTET_STREAM))
}

/// What `Upload-Concat` asks of a creation.
enum Concat {
    /// A partial upload, joined later by a final one.
    Partial,
    /// The final upload: these partial uploads' ids, in order.
    Final(Vec<String>),
}

/// `Upload-Concat: partial`, or `final;URL URL …` (each the URL of a
/// partial upload, whole or its path).
fn concat(headers: &HeaderMap) -> Result<Option<Concat>, ApiError> {
    let Some(value) = headers.get("upload-concat") else {
        return Ok(None);
    };
    let value = value
        .to_str()
        .map_err(|_| ApiError::BadRequest("Upload-Concat is not text".into()))?
        .trim();
    if value == "partial" {
        return Ok(Some(Concat::Partial));
    }
    let Some(urls) = value.strip_prefix("final;") else {
        return Err(ApiError::BadRequest(
            "Upload-Concat is `partial` or `final;URL URL …`".into(),
        ));
    };
    let ids = urls
        .split_whitespace()
        .map(|url| {
            let path = url
                .split_once("://")
                .map_or(url, |(_, rest)| rest.find('/').map_or("", |at| &rest[at..]));
            path.strip_prefix("/uploads/")
                .filter(|id| !id.is_empty() && !id.contains('/'))
                .map(str::to_owned)
                .ok_or_else(|| ApiError::BadRequest(format!("{url} is not an upload's URL")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(Concat::Final(ids)))
}

/// `POST /uploads/` with `Upload-Concat: final;…`: the partial uploads
/// joined into the file, stored before the answer.
async fn create_final(
    state: &RestState,
    caller: &Caller,
    headers: &HeaderMap,
    parts: Vec<String>,
) -> Response {
    let joined = async {
        let pairs = metadata(headers)?;
        let path = target(&pairs)?;
        let options = StoreOptions {
            declared: None,
            content_type: pairs
                .iter()
                .find(|(k, _)| k == "filetype")
                .map(|(_, v)| v.clone())
                .filter(|v| !v.trim().is_empty()),
            create_only: headers
                .get(header::IF_NONE_MATCH)
                .is_some_and(|value| value.as_bytes() == b"*"),
            lock: None,
        };
        let raw = headers
            .get("upload-metadata")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        state
            .files
            .concatenate(caller, &path, &parts, &options, raw)
            .await
            .map_err(ApiError::from)
    }
    .await;
    match joined {
        Ok((upload, meta)) => Tus::new(StatusCode::CREATED)
            .header("location", format!("/uploads/{}", upload.id))
            .header("upload-offset", meta.size)
            .header("upload-length", meta.size)
            .header("etag", format!("\"{}\"", meta.sha256))
            .into_response(),
        Err(error) => service_error(error),
    }
}

/// `POST /uploads/`: start an upload (and, with a body, send its first bytes).
async fn create(
    State(state): State<RestState>,
    caller: Caller,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let concat = match concat(&headers) {
        Ok(concat) => concat,
        Err(error) => return service_error(error),
    };
    if let Some(Concat::Final(parts)) = concat {
        return create_final(&state, &caller, &headers, parts).await;
    }
    let partial = matches!(concat, Some(Concat::Partial));
    let created = async {
        let length = number(&headers, "upload-length")?;
        let deferred = headers
            .get("upload-defer-length")
            .is_some_and(|value| value.as_bytes() == b"1");
        if length.is_none() && !deferred {
            return Err(ApiError::BadRequest(
                "send Upload-Length, or Upload-Defer-Length: 1".into(),
            ));
        }
        let raw_metadata = headers
            .get("upload-metadata")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        if partial {
            return state
                .files
                .begin_partial_upload(&caller, length, raw_metadata)
                .await
                .map_err(ApiError::from);
        }
        let pairs = metadata(&headers)?;
        let path = target(&pairs)?;
        let content_type = pairs
            .iter()
            .find(|(k, _)| k == "filetype")
            .map(|(_, v)| v.clone())
            .filter(|v| !v.trim().is_empty());
        let options = StoreOptions {
            declared: length,
            content_type,
            create_only: headers
                .get(header::IF_NONE_MATCH)
                .is_some_and(|value| value.as_bytes() == b"*"),
            lock: None,
        };
        state
            .files
            .begin_upload(&caller, &path, length, &options, raw_metadata)
            .await
            .map_err(ApiError::from)
    }
    .await;
    let upload = match created {
        Ok(upload) => upload,
        Err(error) => return service_error(error),
    };
    let location = format!("/uploads/{}", upload.id);
    let has_body = is_offset_stream(&headers)
        && headers
            .get(header::CONTENT_LENGTH)
            .is_none_or(|length| length.as_bytes() != b"0");
    // An empty file is complete as soon as it is declared.
    let empty = upload.length == Some(0);
    if !has_body && !empty {
        return Tus::new(StatusCode::CREATED)
            .header("location", &location)
            .upload(&upload)
            .into_response();
    }
    // creation-with-upload: the body is the first bytes.
    let sent_checksum = match headers
        .get("upload-checksum")
        .map(|value| checksum(value.to_str().unwrap_or_default()))
        .transpose()
    {
        Ok(sent) => sent,
        Err(error) => return service_error(error),
    };
    let first = Chunk {
        offset: 0,
        length: None,
        body,
        checksum: sent_checksum,
    };
    match appended(&state, &caller, &upload.id, first).await {
        Ok(answer) => Tus {
            status: StatusCode::CREATED,
            ..answer
        }
        .header("location", &location)
        .into_response(),
        // The upload exists: the client may resume it from its offset.
        Err(refused) => {
            let mut refused = *refused;
            if let Ok(value) = HeaderValue::from_str(&location) {
                refused.headers_mut().insert(header::LOCATION, value);
            }
            refused
        }
    }
}

/// `HEAD /uploads/{id}`: where the upload is.
async fn status(
    State(state): State<RestState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Response {
    match state.files.find_upload(&caller, &id).await {
        Ok(upload) => Tus::new(StatusCode::OK)
            .upload(&upload)
            .header("upload-metadata", &upload.metadata)
            .into_response(),
        Err(error) => service_error(error),
    }
}

/// `PATCH /uploads/{id}`: the next bytes, at the upload's offset.
async fn append(
    State(state): State<RestState>,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if !is_offset_stream(&headers) {
        return Tus::error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("a PATCH sends Content-Type: {OFFSET_OCTET_STREAM}"),
        )
        .into_response();
    }
    let parsed = (|| {
        let offset = number(&headers, "upload-offset")?
            .ok_or_else(|| ApiError::BadRequest("send Upload-Offset".into()))?;
        let length = number(&headers, "upload-length")?;
        let checksum = headers
            .get("upload-checksum")
            .map(|value| checksum(value.to_str().unwrap_or_default()))
            .transpose()?;
        Ok::<_, ApiError>((offset, length, checksum))
    })();
    let (offset, length, checksum) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => return service_error(error),
    };
    let chunk = Chunk {
        offset,
        length,
        body,
        checksum,
    };
    match appended(&state, &caller, &id, chunk).await {
        Ok(answer) => answer.into_response(),
        Err(refused) => *refused,
    }
}

/// `Upload-Checksum: ALGORITHM BASE64`.
fn checksum(value: &str) -> Result<Checksum, ApiError> {
    let (algorithm, digest) = value
        .trim()
        .split_once(' ')
        .ok_or_else(|| ApiError::BadRequest("Upload-Checksum is `algorithm base64`".into()))?;
    let digest = BASE64
        .decode(digest.trim())
        .map_err(|_| ApiError::BadRequest("Upload-Checksum's digest is not base64".into()))?;
    match algorithm.to_ascii_lowercase().as_str() {
        "sha1" => Ok(Checksum::Sha1(digest)),
        "sha256" => Ok(Checksum::Sha256(digest)),
        other => Err(ApiError::BadRequest(format!(
            "checksum algorithm {other} is not supported: use sha1 or sha256"
        ))),
    }
}

/// Add `chunk` to the upload; the answer tus clients expect.
async fn appended(
    state: &RestState,
    caller: &Caller,
    id: &str,
    chunk: Chunk,
) -> Result<Tus, Box<Response>> {
    let offset = chunk.offset;
    let outcome = state.files.append_upload(caller, id, chunk).await;
    match outcome {
        Ok(Appended::Partial(upload)) => Ok(Tus::new(StatusCode::NO_CONTENT).upload(&upload)),
        Ok(Appended::Complete(meta)) => Ok(Tus::new(StatusCode::NO_CONTENT)
            .header("upload-offset", meta.size)
            .header("etag", format!("\"{}\"", meta.sha256))),
        Err(AppendError::OffsetMismatch(at)) => Err(Box::new(
            Tus::error(
                StatusCode::CONFLICT,
                format!("the upload is at byte {at}, not {offset}"),
            )
            .header("upload-offset", at)
            .into_response(),
        )),
        Err(AppendError::ChecksumMismatch) => Err(Box::new(
            Tus::error(
                StatusCode::from_u16(460).unwrap_or(StatusCode::BAD_REQUEST),
                "the bytes do not match the Upload-Checksum sent with them; nothing was kept",
            )
            .into_response(),
        )),
        Err(AppendError::App(error)) => Err(Box::new(service_error(error))),
    }
}

/// `DELETE /uploads/{id}`: cancel the upload and free its bytes.
async fn terminate(
    State(state): State<RestState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Response {
    match state.files.cancel_upload(&caller, &id).await {
        Ok(()) => Tus::new(StatusCode::NO_CONTENT).into_response(),
        Err(error) => service_error(error),
    }
}
