//! Versioning: `GetBucketVersioning`, `PutBucketVersioning` and
//! `ListObjectVersions` (every version and delete marker under a bucket, in
//! key order and each key's newest first, with S3's prefix, delimiter,
//! markers and pages), and what every operation that names a version
//! shares: a version id checked as S3 checks it, and the answer for a
//! delete marker.

use axum::http::{HeaderMap, HeaderValue};
use s3s::dto::{
    BucketVersioningStatus, CommonPrefix, DeleteMarkerEntry, ETag, GetBucketVersioningInput,
    GetBucketVersioningOutput, ListObjectVersionsInput, ListObjectVersionsOutput, ObjectVersion,
    ObjectVersionStorageClass, PutBucketVersioningInput, PutBucketVersioningOutput,
};
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result, s3_error};
use volume::{NULL_VERSION, Owner, Version, Versioning};

use super::error::object_error;
use super::info::EMPTY_MD5;
use super::info::{ObjectInfo, etag_of};
use super::paging::{encoded, max_keys, past_prefix, url_encoding};
use super::{S3Api, caller, owner_of, timestamp};

/// Rows read from the index at a time.
const SCAN_BATCH: usize = 1000;

/// The message S3 refuses a malformed version id with.
pub(super) const INVALID_VERSION: &str = "Invalid version id specified";

/// `version_id` as a request names it, if it is one this store could have
/// made (`null`, or 32 lowercase hex digits); S3 refuses anything else.
pub(super) fn checked_version(version_id: &str) -> S3Result<&str> {
    let ours = version_id.len() == 32
        && version_id
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if version_id == NULL_VERSION || ours {
        Ok(version_id)
    } else {
        Err(S3Error::with_message(
            S3ErrorCode::InvalidArgument,
            INVALID_VERSION,
        ))
    }
}

/// What S3 answers a read of the delete marker `version_id` made at
/// `made_ms` by its id: 405, and the marker's headers.
pub(super) fn delete_marker_read(version_id: &str, made_ms: i64) -> S3Error {
    let mut error = S3Error::with_message(
        S3ErrorCode::MethodNotAllowed,
        "The specified method is not allowed against this resource.",
    );
    let mut headers = marker_headers(version_id);
    headers.insert(
        axum::http::header::ALLOW,
        HeaderValue::from_static("DELETE"),
    );
    if let Ok(modified) = HeaderValue::from_str(&httpdate::fmt_http_date(
        std::time::UNIX_EPOCH
            + std::time::Duration::from_millis(u64::try_from(made_ms).unwrap_or_default()),
    )) {
        headers.insert(axum::http::header::LAST_MODIFIED, modified);
    }
    error.set_headers(headers);
    error
}

/// What S3 answers a read of a key whose latest version is the delete
/// marker `version_id`: 404 `NoSuchKey`, and the marker's headers.
pub(super) fn deleted_key(version_id: &str) -> S3Error {
    let mut error = s3_error!(NoSuchKey, "The specified key does not exist.");
    error.set_headers(marker_headers(version_id));
    error
}

/// `x-amz-delete-marker: true` and the marker's version id (and the XML
/// content type s3s would set on an error without headers of its own).
fn marker_headers(version_id: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("x-amz-delete-marker", HeaderValue::from_static("true"));
    if let Ok(id) = HeaderValue::from_str(version_id) {
        headers.insert("x-amz-version-id", id);
    }
    headers.insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/xml"),
    );
    headers
}

/// The `x-amz-version-id` an answer carries for `version_id` of a bucket
/// whose versioning is `state`: none from a bucket never versioned.
pub(super) fn version_header(version_id: &str, state: Option<Versioning>) -> Option<String> {
    (version_id != NULL_VERSION || state.is_some()).then(|| version_id.to_owned())
}

/// Most folder markers one listing merges in (folders made on purpose are
/// few; past this many, the rest are left out of the listing).
const MAX_FOLDER_MARKERS: usize = 10_000;

/// The folder marker `path` (`bucket/key/`) made at `made_ms`, as the
/// version S3 lists for such an object: its null version, empty.
fn folder_marker(path: &str, made_ms: i64) -> Version {
    Version::File {
        meta: volume::FileMeta {
            path: path.to_owned(),
            size: 0,
            sha256: String::new(),
            blake3: None,
            content_type: "application/x-directory".to_owned(),
            created_ms: made_ms,
            modified_ms: made_ms,
            s3_info: None,
            version_id: NULL_VERSION.to_owned(),
        },
        latest: true,
    }
}

/// One page of versions: each a version or a common prefix, in order.
struct Page {
    versions: Vec<Version>,
    prefixes: Vec<String>,
    truncated: bool,
    /// Where the next page starts: a key (a version's or a prefix), and the
    /// version of it (none after a prefix).
    next: Option<(String, Option<String>)>,
}

impl S3Api {
    pub(super) async fn get_bucket_versioning_(
        &self,
        req: S3Request<GetBucketVersioningInput>,
    ) -> S3Result<S3Response<GetBucketVersioningOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let bucket = &req.input.bucket;
        self.require_bucket(owner, bucket).await?;
        let state = self
            .files
            .bucket_versioning(owner, bucket)
            .await
            .map_err(object_error)?;
        Ok(S3Response::new(GetBucketVersioningOutput {
            status: state.and_then(|state| match state {
                Versioning::Enabled => Some(BucketVersioningStatus::from_static(
                    BucketVersioningStatus::ENABLED,
                )),
                Versioning::Suspended => Some(BucketVersioningStatus::from_static(
                    BucketVersioningStatus::SUSPENDED,
                )),
                Versioning::Unversioned => None,
            }),
            mfa_delete: None,
        }))
    }

    pub(super) async fn put_bucket_versioning_(
        &self,
        req: S3Request<PutBucketVersioningInput>,
    ) -> S3Result<S3Response<PutBucketVersioningOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let input = req.input;
        self.require_bucket(owner, &input.bucket).await?;
        let configuration = input.versioning_configuration;
        if configuration
            .mfa_delete
            .as_ref()
            .is_some_and(|mfa| mfa.as_str() == s3s::dto::MFADelete::ENABLED)
        {
            return Err(s3_error!(
                NotImplemented,
                "MFA Delete is not supported: there is no MFA device to check."
            ));
        }
        let state = match configuration
            .status
            .as_ref()
            .map(BucketVersioningStatus::as_str)
        {
            Some(BucketVersioningStatus::ENABLED) => Versioning::Enabled,
            Some(BucketVersioningStatus::SUSPENDED) => Versioning::Suspended,
            Some(_) => {
                return Err(s3_error!(
                    MalformedXML,
                    "The XML you provided was not well-formed or did not validate against our published schema"
                ));
            }
            None => {
                let mut error = S3Error::with_message(
                    S3ErrorCode::Custom("IllegalVersioningConfigurationException".into()),
                    "The Versioning element must be specified",
                );
                error.set_status_code(axum::http::StatusCode::BAD_REQUEST);
                return Err(error);
            }
        };
        self.files
            .set_bucket_versioning(owner, &input.bucket, state)
            .await
            .map_err(object_error)?;
        Ok(S3Response::new(PutBucketVersioningOutput::default()))
    }

    pub(super) async fn list_object_versions_(
        &self,
        req: S3Request<ListObjectVersionsInput>,
    ) -> S3Result<S3Response<ListObjectVersionsOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let input = req.input;
        let encode = url_encoding(input.encoding_type.as_ref())?;
        let max = max_keys(input.max_keys)?;
        if input
            .version_id_marker
            .as_deref()
            .is_some_and(|v| !v.is_empty())
            && input.key_marker.as_deref().is_none_or(str::is_empty)
        {
            return Err(s3_error!(
                InvalidArgument,
                "A version-id marker cannot be specified without a key marker."
            ));
        }
        if let Some(marker) = input.version_id_marker.as_deref().filter(|v| !v.is_empty()) {
            checked_version(marker)?;
        }
        self.require_bucket(owner, &input.bucket).await?;
        let prefix = input.prefix.clone().unwrap_or_default();
        let delimiter = input.delimiter.clone().filter(|d| !d.is_empty());
        let key_marker = input.key_marker.clone().filter(|k| !k.is_empty());
        let version_marker = input.version_id_marker.clone().filter(|v| !v.is_empty());
        let page = self
            .versions_page(
                owner,
                &input.bucket,
                (&prefix, delimiter.as_deref()),
                key_marker
                    .as_deref()
                    .map(|key| (key, version_marker.as_deref())),
                max,
            )
            .await?;
        let display = owner_of(&caller);
        let (mut versions, mut markers) = (Vec::new(), Vec::new());
        let root = input.bucket.len() + 1;
        for version in &page.versions {
            let key = encoded(&version.path()[root..], encode);
            match version {
                Version::File { meta, latest } => {
                    let info = ObjectInfo::of(meta);
                    let etag = if meta.path.ends_with('/') {
                        EMPTY_MD5.to_owned()
                    } else {
                        etag_of(meta, info.as_ref())
                    };
                    versions.push(ObjectVersion {
                        e_tag: Some(ETag::Strong(etag)),
                        is_latest: Some(*latest),
                        key: Some(key),
                        last_modified: Some(timestamp(meta.modified_ms)),
                        owner: Some(display.clone()),
                        size: Some(i64::try_from(meta.size).unwrap_or(i64::MAX)),
                        storage_class: Some(ObjectVersionStorageClass::from_static(
                            ObjectVersionStorageClass::STANDARD,
                        )),
                        version_id: Some(meta.version_id.clone()),
                        ..ObjectVersion::default()
                    });
                }
                Version::DeleteMarker {
                    version_id,
                    made_ms,
                    latest,
                    ..
                } => markers.push(DeleteMarkerEntry {
                    is_latest: Some(*latest),
                    key: Some(key),
                    last_modified: Some(timestamp(*made_ms)),
                    owner: Some(display.clone()),
                    version_id: Some(version_id.clone()),
                }),
            }
        }
        let (next_key, next_version) = match page.next.filter(|_| page.truncated) {
            Some((key, version)) => (Some(encoded(&key, encode)), version),
            None => (None, None),
        };
        Ok(S3Response::new(ListObjectVersionsOutput {
            name: Some(input.bucket),
            prefix: Some(encoded(&prefix, encode)),
            delimiter: delimiter.map(|d| encoded(&d, encode)),
            key_marker: Some(key_marker.map(|k| encoded(&k, encode)).unwrap_or_default()),
            version_id_marker: Some(version_marker.unwrap_or_default()),
            max_keys: Some(i32::try_from(max).unwrap_or(i32::MAX)),
            is_truncated: Some(page.truncated),
            next_key_marker: next_key,
            next_version_id_marker: next_version,
            encoding_type: input.encoding_type,
            versions: (!versions.is_empty()).then_some(versions),
            delete_markers: (!markers.is_empty()).then_some(markers),
            common_prefixes: (!page.prefixes.is_empty()).then(|| {
                page.prefixes
                    .iter()
                    .map(|prefix| CommonPrefix {
                        prefix: Some(encoded(prefix, encode)),
                    })
                    .collect()
            }),
            ..ListObjectVersionsOutput::default()
        }))
    }

    /// The folder markers under `base` (not the bucket `root` itself) and
    /// before `upper`, in key order, with when each was made.
    async fn folder_markers(
        &self,
        owner: Owner,
        root: &str,
        base: &str,
        upper: Option<&str>,
    ) -> S3Result<std::collections::VecDeque<(String, i64)>> {
        let folders = self
            .files
            .scan_folders(
                owner,
                std::ops::Bound::Included(base),
                upper,
                MAX_FOLDER_MARKERS,
            )
            .await
            .map_err(object_error)?;
        Ok(folders
            .into_iter()
            .filter(|(path, _)| path.as_str() != root)
            .collect())
    }

    /// One page of the versions under `prefix` of `bucket`, keys sharing
    /// what precedes `delimiter` after it rolled into one common prefix,
    /// from after `after` (a key, and a version of it).
    async fn versions_page(
        &self,
        owner: Owner,
        bucket: &str,
        (prefix, delimiter): (&str, Option<&str>),
        after: Option<(&str, Option<&str>)>,
        max: usize,
    ) -> S3Result<Page> {
        let root = format!("{bucket}/");
        let base = format!("{root}{prefix}");
        let upper = past_prefix(&base);
        let mut page = Page {
            versions: Vec::new(),
            prefixes: Vec::new(),
            truncated: false,
            next: None,
        };
        if max == 0 {
            return Ok(page);
        }
        // Where the next read starts: at `lower` (inclusive), or after a
        // key (and after a version of it, that key's older versions first;
        // a folder marker's key has none but its null version).
        let mut lower = base.clone();
        let mut after: Option<(String, Option<String>)> = after
            .map(|(key, version)| {
                let version = version.filter(|_| !key.ends_with('/'));
                (format!("{root}{key}"), version.map(str::to_owned))
            })
            .filter(|(key, _)| *key >= base);
        let marker_key = after.as_ref().map(|(key, _)| key[root.len()..].to_owned());
        // Folder markers (`key/`, folders made on purpose) are objects too,
        // each its null version, merged in by key.
        let mut folders = self
            .folder_markers(owner, &root, &base, upper.as_deref())
            .await?;
        if let Some(marker) = &after {
            folders.retain(|(path, _)| path.as_str() > marker.0.as_str());
        }
        'scan: loop {
            let batch = self
                .files
                .list_versions(
                    owner,
                    &lower,
                    after
                        .as_ref()
                        .map(|(key, version)| (key.as_str(), version.as_deref())),
                    upper.as_deref(),
                    SCAN_BATCH,
                )
                .await
                .map_err(object_error)?;
            let exhausted = !batch.truncated;
            let mut versions = batch.versions.into_iter().peekable();
            loop {
                let folder_first = match (folders.front(), versions.peek()) {
                    (Some((folder, _)), Some(version)) => folder.as_str() < version.path(),
                    (Some(_), None) => exhausted,
                    (None, _) => false,
                };
                let version = match folders.front() {
                    Some((path, made_ms)) if folder_first => {
                        let marker = folder_marker(path, *made_ms);
                        folders.pop_front();
                        marker
                    }
                    _ => match versions.next() {
                        Some(version) => version,
                        None => break,
                    },
                };
                let key = version.path()[root.len()..].to_owned();
                let rolled = delimiter.and_then(|delimiter| {
                    key[prefix.len()..]
                        .find(delimiter)
                        .map(|at| key[..prefix.len() + at + delimiter.len()].to_owned())
                });
                // A common prefix the key marker is in, or is, was listed.
                let seen = rolled.as_ref().is_some_and(|common| {
                    marker_key
                        .as_ref()
                        .is_some_and(|marker| marker.as_str() >= common.as_str())
                });
                if !seen {
                    if page.versions.len() + page.prefixes.len() == max {
                        page.truncated = true;
                        break 'scan;
                    }
                    match &rolled {
                        Some(common) => {
                            page.prefixes.push(common.clone());
                            page.next = Some((common.clone(), None));
                        }
                        None => {
                            page.next = Some((key.clone(), Some(version.version_id().to_owned())));
                            page.versions.push(version.clone());
                        }
                    }
                }
                if let Some(common) = rolled {
                    // Read on from the first key past every key of it.
                    match past_prefix(&format!("{root}{common}")) {
                        Some(past) => {
                            folders.retain(|(path, _)| *path >= past);
                            lower = past;
                            after = None;
                        }
                        None => break 'scan,
                    }
                    continue 'scan;
                }
                let version_id = (!key.ends_with('/')).then(|| version.version_id().to_owned());
                after = Some((version.path().to_owned(), version_id));
            }
            if exhausted {
                break;
            }
        }
        Ok(page)
    }
}
