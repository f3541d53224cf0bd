//! Browser form uploads (S3's POST Object): a `multipart/form-data` POST
//! to a bucket with a policy signed by SigV4 (`x-amz-algorithm`,
//! `-credential`, `-date`, `-signature`) or SigV2 (`AWSAccessKeyId`,
//! `signature`), whose conditions every field
//! must meet (`eq`, `starts-with`, `content-length-range`; every field
//! named by one). The form is parsed as it streams (`multer`), its fields
//! bounded; the file part streams through an instance like any upload,
//! never held whole, and is cut off past the policy's largest size.
//! Answers `204` (or `success_action_status` `200`/`201`, the latter with
//! S3's `PostResponse`), or `303` to `success_action_redirect`.

// The refusals here are answers, made once per form: boxing them would
// gain nothing.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt as _;
use md5::Digest as _;
use s3s::S3Error;

use file_service::{FileService, Inspect, LockTokens, Refusal, StoreOptions};

use crate::body::Received;
use crate::cors::bucket_of;
use crate::error::object_error;
use crate::info::{DEFAULT_CONTENT_TYPE, ObjectInfo, check_metadata_size};
use crate::keys::KeyRing;
use crate::tagging::tags_of_document;
use crate::{S3Api, object_path};

mod policy;

use policy::{authorize, check_policy};

/// Most bytes of the form's fields before the file, all together.
const MOST_FIELD_BYTES: u64 = 64 << 10;

/// What the form layer needs.
#[derive(Debug, Clone)]
pub(crate) struct FormState {
    pub(crate) files: FileService,
    pub(crate) keys: KeyRing,
    pub(crate) domain: Option<Arc<str>>,
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    let escape = |text: &str| {
        text.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>{}</Message></Error>",
        escape(message)
    );
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/xml"),
        )],
        body,
    )
        .into_response()
}

fn s3_error_response(error: &S3Error) -> Response {
    let status = error.status_code().unwrap_or(StatusCode::BAD_REQUEST);
    error_response(status, error.code().as_str(), error.message().unwrap_or(""))
}

fn error_response(status: StatusCode, code: &str, message: &str) -> Response {
    error(status, code, message)
}

fn denied(why: &str) -> Response {
    error(
        StatusCode::FORBIDDEN,
        "AccessDenied",
        &format!("Invalid according to Policy: {why}"),
    )
}

fn missing(field: &str) -> Response {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>InvalidArgument</Code>\
         <Message>Bucket POST must contain a field named '{field}'.  If it is specified, please \
         check the order of the fields.</Message><ArgumentName>{field}</ArgumentName>\
         <ArgumentValue></ArgumentValue></Error>"
    );
    (
        StatusCode::BAD_REQUEST,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/xml"),
        )],
        body,
    )
        .into_response()
}

/// What a POST to a bucket (no key, no query) is: a form upload with its
/// boundary, or not a form at all; `None`: some other request.
enum BucketPost {
    Form(String),
    NotAForm,
}

fn form_upload(request: &Request, domain: Option<&str>) -> Option<BucketPost> {
    if request.method() != Method::POST || request.uri().query().is_some() {
        return None;
    }
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let form = content_type
        .trim_start()
        .to_ascii_lowercase()
        .starts_with("multipart/form-data");
    let path = request.uri().path().trim_start_matches('/');
    let virtual_hosted = domain.is_some() && bucket_of(request, None).as_deref() != Some(path);
    let names_a_key = if virtual_hosted {
        !path.is_empty()
    } else {
        path.split_once('/').is_some_and(|(_, key)| !key.is_empty())
    };
    if names_a_key || path.is_empty() && !virtual_hosted {
        return None;
    }
    if !form {
        return Some(BucketPost::NotAForm);
    }
    Some(multer::parse_boundary(content_type).map_or(BucketPost::NotAForm, BucketPost::Form))
}

/// The form layer: form uploads answered here, everything else on.
pub(crate) async fn post_object(
    State(state): State<FormState>,
    request: Request,
    next: Next,
) -> Response {
    let boundary = match form_upload(&request, state.domain.as_deref()) {
        None => return next.run(request).await,
        Some(BucketPost::NotAForm) => {
            return error(
                StatusCode::PRECONDITION_FAILED,
                "PreconditionFailed",
                "At least one of the pre-conditions you specified did not hold: Bucket POST \
                 must be of the enclosure-type multipart/form-data",
            );
        }
        Some(BucketPost::Form(boundary)) => boundary,
    };
    let Some(bucket) = bucket_of(&request, state.domain.as_deref()) else {
        return next.run(request).await;
    };
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("localhost")
        .to_owned();
    let body = request.into_body().into_data_stream();
    match upload(&state, &bucket, &host, body, boundary).await {
        Ok(response) | Err(response) => response,
    }
}

/// A form field's name, as S3 compares them (case-insensitively).
fn name_of(name: &str) -> String {
    name.to_ascii_lowercase()
}

async fn upload(
    state: &FormState,
    bucket: &str,
    host: &str,
    body: axum::body::BodyDataStream,
    boundary: String,
) -> Result<Response, Response> {
    let constraints = multer::Constraints::new().size_limit(
        multer::SizeLimit::new()
            .per_field(MOST_FIELD_BYTES)
            .for_field("file", u64::MAX),
    );
    let mut form = multer::Multipart::with_constraints(body, boundary, constraints);
    let malformed = |why: &str| error(StatusCode::BAD_REQUEST, "MalformedPOSTRequest", why);
    let mut fields: BTreeMap<String, String> = BTreeMap::new();
    let mut total = 0u64;
    let file = loop {
        let field = form.next_field().await.map_err(|e| {
            malformed(&format!(
                "The body of your POST request is not well-formed multipart/form-data: {e}"
            ))
        })?;
        let Some(field) = field else {
            return Err(missing("file"));
        };
        let name = field.name().map(name_of).unwrap_or_default();
        if name == "file" {
            break field;
        }
        let value = field
            .text()
            .await
            .map_err(|e| malformed(&format!("A form field could not be read: {e}")))?;
        total += value.len() as u64;
        if total > MOST_FIELD_BYTES {
            return Err(malformed(
                "The form's fields are larger than this store accepts.",
            ));
        }
        fields.entry(name).or_insert(value);
    };
    let filename = file.file_name().unwrap_or_default().to_owned();
    let signed = [
        "x-amz-signature",
        "x-amz-credential",
        "x-amz-algorithm",
        "awsaccesskeyid",
        "signature",
    ]
    .iter()
    .any(|field| fields.contains_key(*field));
    if !signed {
        return Err(error(
            StatusCode::FORBIDDEN,
            "AccessDenied",
            "Access Denied: a form upload needs a signed policy",
        ));
    }
    let given = fields.get("key").ok_or_else(|| missing("key"))?;
    let key = if filename.is_empty() {
        given.clone()
    } else {
        given.replace("${filename}", &filename)
    };
    fields.insert("key".to_owned(), key.clone());
    fields.insert("bucket".to_owned(), bucket.to_owned());
    let (caller, policy) = authorize(state, &fields).await?;
    let range = check_policy(&policy, &fields)?;
    let path = object_path(bucket, &key).map_err(|e| s3_error_response(&e))?;
    let meta: BTreeMap<String, String> = fields
        .iter()
        .filter_map(|(name, value)| {
            Some((name.strip_prefix("x-amz-meta-")?.to_owned(), value.clone()))
        })
        .collect();
    check_metadata_size(&meta).map_err(|e| s3_error_response(&e))?;
    let tags = match fields.get("tagging") {
        Some(document) => tags_of_document(document).map_err(|e| s3_error_response(&e))?,
        None => Vec::new(),
    };
    let api = S3Api::of(state.files.clone());
    api.require_bucket(caller.owner(), bucket)
        .await
        .map_err(|e| s3_error_response(&e))?;
    let options = StoreOptions {
        declared: None,
        content_type: Some(
            fields
                .get("content-type")
                .cloned()
                .unwrap_or_else(|| DEFAULT_CONTENT_TYPE.to_owned()),
        ),
        create_only: false,
        lock: None,
    };
    let headers = ObjectInfo::stored_headers(
        fields.get("cache-control"),
        fields.get("content-disposition"),
        fields.get("content-encoding"),
        None,
        None,
    );
    let describe = move |received: Received| {
        let mut info = ObjectInfo::put(&received, meta, headers);
        info.tags = tags;
        (Some(info.to_json()), info)
    };
    let most = range.map_or(u64::MAX, |(_, most)| most);
    let mut sent = 0u64;
    let bytes = file.map(move |chunk| {
        let chunk = chunk.map_err(|e| e.to_string())?;
        sent += chunk.len() as u64;
        if sent > most {
            return Err(format!("{TOO_LARGE}: {sent}"));
        }
        Ok::<Bytes, String>(chunk)
    });
    let inspector = FormFile {
        md5: Some(md5::Md5::new()),
        size: 0,
        range,
    };
    let stored = match state
        .files
        .upload(&caller, &path, options, &LockTokens::default())
        .await
    {
        Ok(session) => {
            session
                .send_inspected(Box::pin(bytes), inspector, describe)
                .await
        }
        Err(error) => Err(Refusal::Failed(error)),
    };
    let (stored, info) = stored.map_err(|refusal| match refusal {
        Refusal::Refused(refused) => refused.into_response(),
        Refusal::Failed(failed) => s3_error_response(&object_error(failed)),
    })?;
    let location = format!("http://{host}/{bucket}/{}", encode_key(&key));
    let etag = format!("\"{}\"", info.etag);
    let mut response = answer(&fields, bucket, &key, &etag, &location);
    if stored.version_id != volume::NULL_VERSION
        && let Ok(value) = HeaderValue::from_str(&stored.version_id)
    {
        response.headers_mut().insert("x-amz-version-id", value);
    }
    Ok(response)
}

/// What a stream cut at the policy's largest size says.
const TOO_LARGE: &str = "the file is larger than the policy allows";

fn encode_key(key: &str) -> String {
    const KEEP: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'/')
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(key, KEEP).to_string()
}

/// The answer to a stored form upload, as its fields ask.
fn answer(
    fields: &BTreeMap<String, String>,
    bucket: &str,
    key: &str,
    etag: &str,
    location: &str,
) -> Response {
    if let Some(redirect) = fields
        .get("success_action_redirect")
        .or_else(|| fields.get("redirect"))
        .filter(|url| url.starts_with("http://") || url.starts_with("https://"))
    {
        let query = url_query(&[("bucket", bucket), ("key", key), ("etag", etag)]);
        let separator = if redirect.contains('?') { '&' } else { '?' };
        let target = format!("{redirect}{separator}{query}");
        if let Ok(value) = HeaderValue::from_str(&target) {
            let mut response = StatusCode::SEE_OTHER.into_response();
            response.headers_mut().insert(header::LOCATION, value);
            return response;
        }
    }
    let status = match fields.get("success_action_status").map(String::as_str) {
        Some("200") => StatusCode::OK,
        Some("201") => StatusCode::CREATED,
        _ => StatusCode::NO_CONTENT,
    };
    let escape = |text: &str| {
        text.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    let mut response = if status == StatusCode::CREATED {
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<PostResponse><Location>{}</Location><Bucket>{}</Bucket><Key>{}</Key><ETag>{}</ETag></PostResponse>",
            escape(location),
            escape(bucket),
            escape(key),
            escape(etag)
        );
        (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/xml"),
            )],
            body,
        )
            .into_response()
    } else {
        status.into_response()
    };
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(etag) {
        headers.insert(header::ETAG, value);
    }
    if let Ok(value) = HeaderValue::from_str(location) {
        headers.insert(header::LOCATION, value);
    }
    response
}

fn url_query(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(name, value)| {
            format!(
                "{name}={}",
                percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// The file's MD5 (its ETag) and size, and the policy's size range.
struct FormFile {
    md5: Option<md5::Md5>,
    size: u64,
    range: Option<(u64, u64)>,
}

/// Why a file was refused, as S3 writes it (with the sizes it names).
pub(crate) struct SizeRefusal {
    code: &'static str,
    message: String,
    extra: Vec<(&'static str, u64)>,
}

impl SizeRefusal {
    fn into_response(self) -> Response {
        let extra: String = self
            .extra
            .iter()
            .map(|(name, value)| format!("<{name}>{value}</{name}>"))
            .collect();
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{}</Code><Message>{}</Message>{extra}</Error>",
            self.code, self.message
        );
        (
            StatusCode::BAD_REQUEST,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/xml"),
            )],
            body,
        )
            .into_response()
    }
}

impl Inspect for FormFile {
    type Passed = Received;
    type Refused = SizeRefusal;

    fn chunk(&mut self, bytes: &[u8]) {
        self.size += bytes.len() as u64;
        if let Some(md5) = &mut self.md5 {
            md5.update(bytes);
        }
    }

    fn failed(&mut self, error: &str) -> Option<SizeRefusal> {
        let (_, sent) = error.split_once(&format!("{TOO_LARGE}: "))?;
        let sent = sent.trim().parse().unwrap_or(self.size);
        Some(too_large(sent, self.range))
    }

    fn ended(&mut self) -> Result<Received, SizeRefusal> {
        if let Some((least, most)) = self.range {
            if self.size > most {
                return Err(too_large(self.size, self.range));
            }
            if self.size < least {
                return Err(SizeRefusal {
                    code: "EntityTooSmall",
                    message: "Your proposed upload is smaller than the minimum allowed size"
                        .to_owned(),
                    extra: vec![("ProposedSize", self.size), ("MinSizeAllowed", least)],
                });
            }
        }
        let md5: [u8; 16] = self.md5.take().unwrap_or_default().finalize().into();
        Ok(Received {
            md5,
            checksum: None,
        })
    }
}

fn too_large(size: u64, range: Option<(u64, u64)>) -> SizeRefusal {
    let most = range.map_or(u64::MAX, |(_, most)| most);
    SizeRefusal {
        code: "EntityTooLarge",
        message: "Your proposed upload exceeds the maximum allowed size".to_owned(),
        extra: vec![("ProposedSize", size), ("MaxSizeAllowed", most)],
    }
}
