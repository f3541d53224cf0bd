//! Objects: put (checked against `Content-MD5` and any checksum, its MD5
//! kept as the ETag), read whole or by range with S3's conditionals and
//! overrides, copied as a row (never bytes), deleted.

use std::collections::BTreeMap;

use s3s::dto::{
    CopyObjectInput, CopyObjectOutput, CopyObjectResult, CopySource, DeleteObjectInput,
    DeleteObjectOutput, DeleteObjectsInput, DeleteObjectsOutput, DeletedObject, ETag,
    ETagCondition, GetObjectInput, GetObjectOutput, HeadObjectInput, HeadObjectOutput,
    MetadataDirective, PutObjectInput, PutObjectOutput, Range, StreamingBlob, Timestamp,
    TimestampFormat,
};
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result, s3_error};
use volume::{FileMeta, FilePath, Owner, Prefix};

use crate::common::headers::parse_if_range;
use crate::error::AppError;
use crate::runtime::{ByteRange, Describe};
use crate::service::{LockTokens, ReadBody, StoreOptions, Want};

use super::error::object_error;
use super::info::{
    Algorithm, Checked, ChecksumFields, ObjectInfo, Verdict, answer_checksums, declared_checksum,
    etag_of, sent_checksums,
};
use super::{S3Api, caller, object_path, timestamp};

/// The hex MD5 of no bytes: the ETag of an empty object (a folder marker).
pub(super) const EMPTY_MD5: &str = "d41d8cd98f00b204e9800998ecf8427e";

/// An object as a read found it.
pub(super) struct Found {
    pub(super) meta: FileMeta,
    pub(super) info: Option<ObjectInfo>,
    pub(super) etag: String,
}

/// The conditional headers of a read.
#[derive(Clone, Copy)]
struct Conditions<'a> {
    if_match: Option<&'a ETagCondition>,
    if_none_match: Option<&'a ETagCondition>,
    if_modified_since: Option<&'a Timestamp>,
    if_unmodified_since: Option<&'a Timestamp>,
}

impl Conditions<'_> {
    /// RFC 9110's order: `If-Match`, else `If-Unmodified-Since`, fail with
    /// 412; then `If-None-Match`, else `If-Modified-Since`, answer 304.
    fn check(&self, etag: &str, modified_ms: i64) -> S3Result<()> {
        self.evaluate(etag, modified_ms).map_err(|mut error| {
            // A 304 carries the validators the client compares.
            if error.code() == &S3ErrorCode::NotModified {
                let mut headers = axum::http::HeaderMap::new();
                if let Ok(value) = format!("\"{etag}\"").parse() {
                    headers.insert(axum::http::header::ETAG, value);
                }
                if let Ok(value) = httpdate::fmt_http_date(
                    std::time::UNIX_EPOCH
                        + std::time::Duration::from_millis(u64::try_from(modified_ms).unwrap_or(0)),
                )
                .parse()
                {
                    headers.insert(axum::http::header::LAST_MODIFIED, value);
                }
                error.set_headers(headers);
            }
            error
        })
    }

    fn evaluate(&self, etag: &str, modified_ms: i64) -> S3Result<()> {
        let modified = modified_ms.div_euclid(1000);
        match (self.if_match, self.if_unmodified_since) {
            (Some(condition), _) if !matches(condition, etag) => {
                return Err(precondition_failed());
            }
            (None, Some(since)) if modified > epoch_seconds(since) => {
                return Err(precondition_failed());
            }
            _ => {}
        }
        match (self.if_none_match, self.if_modified_since) {
            (Some(condition), _) if matches(condition, etag) => Err(not_modified()),
            (None, Some(since)) if modified <= epoch_seconds(since) => Err(not_modified()),
            _ => Ok(()),
        }
    }
}

fn matches(condition: &ETagCondition, etag: &str) -> bool {
    match condition {
        ETagCondition::Any => true,
        ETagCondition::ETag(ETag::Strong(value) | ETag::Weak(value)) => value == etag,
    }
}

fn precondition_failed() -> S3Error {
    s3_error!(
        PreconditionFailed,
        "At least one of the pre-conditions you specified did not hold"
    )
}

fn not_modified() -> S3Error {
    S3Error::new(S3ErrorCode::NotModified)
}

/// Seconds since the epoch of `at`.
fn epoch_seconds(at: &Timestamp) -> i64 {
    let mut text = Vec::new();
    if at.format(TimestampFormat::EpochSeconds, &mut text).is_err() {
        return 0;
    }
    let text = String::from_utf8_lossy(&text);
    text.split('.')
        .next()
        .and_then(|whole| whole.parse().ok())
        .unwrap_or(0)
}

fn http_date(text: &str) -> Option<Timestamp> {
    Timestamp::parse(TimestampFormat::HttpDate, text).ok()
}

impl S3Api {
    /// The object `key` of `bucket` in `owner`'s tree, or S3's error for
    /// its absence (`NoSuchBucket` when the bucket is missing too).
    async fn find_object(&self, owner: Owner, bucket: &str, path: &FilePath) -> S3Result<Found> {
        match self.files.stat(owner, path).await {
            Ok(meta) => {
                let info = ObjectInfo::of(&meta);
                let etag = etag_of(&meta, info.as_ref());
                Ok(Found { meta, info, etag })
            }
            Err(AppError::NotFound(_)) => {
                self.require_bucket(owner, bucket).await?;
                Err(s3_error!(NoSuchKey, "The specified key does not exist."))
            }
            Err(error) => Err(object_error(error)),
        }
    }

    /// A folder marker (`key/`) as an empty object, if that folder was
    /// made (by `PUT key/`, or as a folder through another protocol): its
    /// creation time.
    async fn find_marker(&self, owner: Owner, bucket: &str, key: &str) -> S3Result<i64> {
        let name = FilePath::parse(&format!("{bucket}/{}", key.trim_end_matches('/')))
            .map_err(|error| s3_error!(InvalidArgument, "{error}"))?;
        let node = self
            .files
            .node(owner, Some(&name))
            .await
            .map_err(object_error)?;
        if let volume::webdav::Node::Folder(folder) = node
            && let Some(created_ms) = folder.created_ms
        {
            return Ok(created_ms);
        }
        self.require_bucket(owner, bucket).await?;
        Err(s3_error!(NoSuchKey, "The specified key does not exist."))
    }

    pub(super) async fn put_object_(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let declared = declared_checksum(
            sent_checksums!(req.input),
            req.input.checksum_algorithm.as_ref(),
            &req.headers,
        )?;
        let trailers = req.trailing_headers.clone();
        let input = req.input;
        self.require_bucket(owner, &input.bucket).await?;
        // A key ending in `/` names a folder (what consoles make as one).
        if input.key.ends_with('/') {
            if input.content_length.unwrap_or(0) > 0 {
                return Err(s3_error!(
                    InvalidArgument,
                    "An object whose key ends in '/' is a folder here, and holds no bytes."
                ));
            }
            let prefix = Prefix::parse(&format!("{}/{}", input.bucket, input.key))
                .map_err(|error| s3_error!(InvalidArgument, "{error}"))?;
            self.files
                .make_folder(owner, &prefix, &LockTokens::default())
                .await
                .map_err(object_error)?;
            return Ok(S3Response::new(PutObjectOutput {
                e_tag: Some(ETag::Strong(EMPTY_MD5.to_owned())),
                ..PutObjectOutput::default()
            }));
        }
        let path = object_path(&input.bucket, &input.key)?;
        if let Some(ETagCondition::ETag(_)) = &input.if_none_match {
            return Err(s3_error!(
                NotImplemented,
                "If-None-Match on a write takes only '*'."
            ));
        }
        if let Some(condition) = &input.if_match {
            let found = self.find_object(owner, &input.bucket, &path).await?;
            if !matches(condition, &found.etag) {
                return Err(precondition_failed());
            }
        }
        let verdict = Verdict::default();
        let body = input.body.unwrap_or_else(|| {
            StreamingBlob::wrap(futures_util::stream::empty::<
                Result<bytes::Bytes, std::io::Error>,
            >())
        });
        let checked = Checked::new(
            body,
            input.content_md5.as_deref(),
            declared,
            trailers,
            verdict.clone(),
        )?;
        let options = StoreOptions {
            declared: input
                .content_length
                .and_then(|length| u64::try_from(length).ok()),
            // S3's default, not a sniffed type: what S3 clients expect back.
            content_type: Some(input.content_type.map_or_else(
                || super::info::DEFAULT_CONTENT_TYPE.to_owned(),
                |content_type| content_type.to_string(),
            )),
            create_only: matches!(input.if_none_match, Some(ETagCondition::Any)),
        };
        let meta: BTreeMap<String, String> =
            input.metadata.unwrap_or_default().into_iter().collect();
        super::info::check_metadata_size(&meta)?;
        let headers = ObjectInfo::stored_headers(
            input.cache_control.as_ref(),
            input.content_disposition.as_ref(),
            input.content_encoding.as_ref(),
            input.content_language.as_ref(),
            input.expires.as_ref(),
        );
        // What S3 keeps goes into the file's row as it is stored, once the
        // body has passed its checks.
        let describe = {
            let (verdict, meta, headers) = (verdict.clone(), meta.clone(), headers.clone());
            Describe(Box::new(move || {
                verdict
                    .received()
                    .map(|received| ObjectInfo::put(&received, meta, headers).to_json())
            }))
        };
        let stored = match self
            .files
            .upload(&caller, &path, options, &LockTokens::default())
            .await
        {
            Ok(session) => {
                session
                    .send_described(axum::body::Body::from_stream(checked), Some(describe))
                    .await
            }
            Err(error) => Err(error),
        };
        let received = match (verdict.take(), stored) {
            (Some(Err(refused)), _) => return Err(refused),
            (_, Err(error)) => return Err(put_error(error)),
            (Some(Ok(received)), Ok(_)) => received,
            (None, Ok(_)) => {
                return Err(s3_error!(InternalError, "the body was not read to its end"));
            }
        };
        let info = ObjectInfo::put(&received, meta, headers);
        let fields = ChecksumFields::of(info.checksum.as_ref());
        Ok(S3Response::new(PutObjectOutput {
            e_tag: Some(ETag::Strong(info.etag)),
            checksum_crc32: fields.crc32,
            checksum_crc32c: fields.crc32c,
            checksum_crc64nvme: fields.crc64nvme,
            checksum_sha1: fields.sha1,
            checksum_sha256: fields.sha256,
            checksum_type: fields.kind,
            ..PutObjectOutput::default()
        }))
    }

    pub(super) async fn get_object_(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        // s3s does not parse `If-Range` into the input.
        let asked_if_range = parse_if_range(&req.headers);
        let input = req.input;
        if input.key.ends_with('/') {
            let made = self.find_marker(owner, &input.bucket, &input.key).await?;
            return Ok(S3Response::new(GetObjectOutput {
                body: Some(StreamingBlob::from(s3s::Body::empty())),
                content_length: Some(0),
                last_modified: Some(timestamp(made)),
                content_type: "application/x-directory".parse().ok(),
                e_tag: Some(ETag::Strong(EMPTY_MD5.to_owned())),
                ..GetObjectOutput::default()
            }));
        }
        let path = object_path(&input.bucket, &input.key)?;
        let found = self.find_object(owner, &input.bucket, &path).await?;
        Conditions {
            if_match: input.if_match.as_ref(),
            if_none_match: input.if_none_match.as_ref(),
            if_modified_since: input.if_modified_since.as_ref(),
            if_unmodified_since: input.if_unmodified_since.as_ref(),
        }
        .check(&found.etag, found.meta.modified_ms)?;
        // `If-Range` governs the client's `Range`, not a part's.
        let if_range = asked_if_range
            .filter(|_| input.range.is_some() && input.part_number.is_none())
            .map(|asked| super::if_range::validator(asked, &found.etag, &found.meta.sha256));
        let range = match input.part_number {
            Some(part) => part_range(found.info.as_ref(), input.range.is_some(), part)?,
            None => input.range,
        };
        let range = range.map(|range| match range {
            Range::Int { first, last } => ByteRange::FirstLast((first, last)),
            Range::Suffix { length } => ByteRange::Suffix(length),
        });
        let read = self
            .files
            .read_looked_up(
                owner,
                &path,
                Want::Content { range, if_range },
                Vec::new(),
                Some(found.meta.clone()),
            )
            .await
            .map_err(object_error)?;
        // Replaced since it was looked at: what S3 kept went with the old
        // content.
        let (info, etag) = if read.meta.sha256 == found.meta.sha256 {
            (found.info, found.etag)
        } else {
            let info = ObjectInfo::of(&read.meta);
            let etag = etag_of(&read.meta, info.as_ref());
            (info, etag)
        };
        let size = read.meta.size;
        let (body, content_length, content_range) = match read.body {
            ReadBody::Full(body) => (body, size, None),
            ReadBody::Partial { first, last, body } => (
                body,
                last - first + 1,
                Some(format!("bytes {first}-{last}/{size}")),
            ),
            ReadBody::NotModified | ReadBody::Headers => {
                return Err(s3_error!(InternalError, "the read gave no content"));
            }
        };
        let whole = content_range.is_none();
        let mut output = GetObjectOutput {
            body: Some(StreamingBlob::from(s3s::Body::http_body_unsync(body))),
            content_length: Some(i64::try_from(content_length).unwrap_or(i64::MAX)),
            content_range,
            accept_ranges: Some("bytes".to_owned()),
            ..GetObjectOutput::default()
        };
        let described = Described::of(&read.meta, info.as_ref(), etag);
        output.e_tag = Some(ETag::Strong(described.etag));
        output.last_modified = Some(described.last_modified);
        output.content_type = described.content_type.parse().ok();
        output.metadata = described.metadata;
        output.cache_control = described.headers.get("cache-control").cloned();
        output.content_disposition = described.headers.get("content-disposition").cloned();
        output.content_encoding = described.headers.get("content-encoding").cloned();
        output.content_language = described.headers.get("content-language").cloned();
        output.expires = described
            .headers
            .get("expires")
            .and_then(|text| http_date(text));
        output.parts_count = parts_count(info.as_ref(), input.part_number);
        if whole && checksum_wanted(input.checksum_mode.as_ref()) {
            answer_checksums!(
                output,
                ChecksumFields::of(info.as_ref().and_then(|info| info.checksum.as_ref()))
            );
        }
        // The response-* overrides of a (presigned) GET.
        if let Some(value) = input.response_content_type {
            output.content_type = value.parse().ok();
        }
        if let Some(value) = input.response_cache_control {
            output.cache_control = Some(value);
        }
        if let Some(value) = input.response_content_disposition {
            output.content_disposition = Some(value);
        }
        if let Some(value) = input.response_content_encoding {
            output.content_encoding = Some(value);
        }
        if let Some(value) = input.response_content_language {
            output.content_language = Some(value);
        }
        if let Some(value) = input.response_expires {
            output.expires = Some(value);
        }
        Ok(S3Response::new(output))
    }

    pub(super) async fn head_object_(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let input = req.input;
        if input.key.ends_with('/') {
            let made = self.find_marker(owner, &input.bucket, &input.key).await?;
            return Ok(S3Response::new(HeadObjectOutput {
                content_length: Some(0),
                last_modified: Some(timestamp(made)),
                content_type: "application/x-directory".parse().ok(),
                e_tag: Some(ETag::Strong(EMPTY_MD5.to_owned())),
                ..HeadObjectOutput::default()
            }));
        }
        let path = object_path(&input.bucket, &input.key)?;
        let found = self.find_object(owner, &input.bucket, &path).await?;
        Conditions {
            if_match: input.if_match.as_ref(),
            if_none_match: input.if_none_match.as_ref(),
            if_modified_since: input.if_modified_since.as_ref(),
            if_unmodified_since: input.if_unmodified_since.as_ref(),
        }
        .check(&found.etag, found.meta.modified_ms)?;
        let size = found.meta.size;
        let range = match input.part_number {
            Some(part) => part_range(found.info.as_ref(), input.range.is_some(), part)?,
            None => input.range,
        };
        let (content_length, content_range) = match range {
            None => (size, None),
            Some(range) => {
                let (first, last) = match range {
                    Range::Int { first, last } => {
                        (first, last.unwrap_or(u64::MAX).min(size.saturating_sub(1)))
                    }
                    Range::Suffix { length } => {
                        (size.saturating_sub(length), size.saturating_sub(1))
                    }
                };
                if first >= size || first > last {
                    return Err(s3_error!(
                        InvalidRange,
                        "The requested range is not satisfiable"
                    ));
                }
                (
                    last - first + 1,
                    Some(format!("bytes {first}-{last}/{size}")),
                )
            }
        };
        let whole = content_range.is_none();
        let described = Described::of(&found.meta, found.info.as_ref(), found.etag);
        let mut output = HeadObjectOutput {
            content_length: Some(i64::try_from(content_length).unwrap_or(i64::MAX)),
            content_range,
            accept_ranges: Some("bytes".to_owned()),
            e_tag: Some(ETag::Strong(described.etag)),
            last_modified: Some(described.last_modified),
            content_type: described.content_type.parse().ok(),
            metadata: described.metadata,
            cache_control: described.headers.get("cache-control").cloned(),
            content_disposition: described.headers.get("content-disposition").cloned(),
            content_encoding: described.headers.get("content-encoding").cloned(),
            content_language: described.headers.get("content-language").cloned(),
            expires: described
                .headers
                .get("expires")
                .and_then(|text| http_date(text)),
            parts_count: parts_count(found.info.as_ref(), input.part_number),
            ..HeadObjectOutput::default()
        };
        if whole && checksum_wanted(input.checksum_mode.as_ref()) {
            answer_checksums!(
                output,
                ChecksumFields::of(found.info.as_ref().and_then(|info| info.checksum.as_ref()))
            );
        }
        Ok(S3Response::new(output))
    }

    pub(super) async fn delete_object_(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        let caller = caller(&req)?;
        let input = req.input;
        self.require_bucket(caller.owner(), &input.bucket).await?;
        self.delete_key(caller.owner(), &input.bucket, &input.key)
            .await?;
        Ok(S3Response::new(DeleteObjectOutput::default()))
    }

    /// Delete `key` of `bucket`; a key that is not there is deleted
    /// already (S3's deletes are idempotent).
    async fn delete_key(&self, owner: Owner, bucket: &str, key: &str) -> S3Result<()> {
        if key.ends_with('/') {
            // A folder marker goes only with an empty folder: the objects
            // under it are not the marker's to take.
            let prefix = Prefix::parse(&format!("{bucket}/{key}"))
                .map_err(|error| s3_error!(InvalidArgument, "{error}"))?;
            // The marker goes; what is in the folder stays.
            match self
                .files
                .remove_folder_marker(owner, &prefix, &LockTokens::default())
                .await
            {
                Ok(_) | Err(AppError::NotFound(_)) => {}
                Err(error) => return Err(object_error(error)),
            }
            return Ok(());
        }
        let path = object_path(bucket, key)?;
        match self
            .files
            .delete_file(owner, &path, &LockTokens::default())
            .await
        {
            Ok(()) | Err(AppError::NotFound(_)) => Ok(()),
            Err(error) => Err(object_error(error)),
        }
    }

    pub(super) async fn delete_objects_(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let input = req.input;
        self.require_bucket(owner, &input.bucket).await?;
        if input.delete.objects.len() > 1000 {
            return Err(s3_error!(
                MalformedXML,
                "A DeleteObjects request names at most 1000 keys."
            ));
        }
        let quiet = input.delete.quiet.unwrap_or(false);
        let mut deleted = Vec::new();
        let mut errors = Vec::new();
        for object in input.delete.objects {
            match self.delete_key(owner, &input.bucket, &object.key).await {
                Ok(()) => {
                    if !quiet {
                        deleted.push(DeletedObject {
                            key: Some(object.key),
                            ..DeletedObject::default()
                        });
                    }
                }
                Err(error) => errors.push(s3s::dto::Error {
                    code: Some(error.code().as_str().to_owned()),
                    key: Some(object.key),
                    message: error.message().map(str::to_owned),
                    version_id: None,
                }),
            }
        }
        Ok(S3Response::new(DeleteObjectsOutput {
            deleted: Some(deleted),
            errors: Some(errors),
            ..DeleteObjectsOutput::default()
        }))
    }

    pub(super) async fn copy_object_(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let input = req.input;
        let (from, source) = self.copy_source(owner, &input.copy_source).await?;
        copy_source_conditions(
            &source,
            input.copy_source_if_match.as_ref(),
            input.copy_source_if_none_match.as_ref(),
            input.copy_source_if_modified_since.as_ref(),
            input.copy_source_if_unmodified_since.as_ref(),
        )?;
        self.require_bucket(owner, &input.bucket).await?;
        let to = object_path(&input.bucket, &input.key)?;
        let replace = match input
            .metadata_directive
            .as_ref()
            .map(MetadataDirective::as_str)
        {
            None | Some(MetadataDirective::COPY) => false,
            Some(MetadataDirective::REPLACE) => true,
            Some(_) => {
                return Err(s3_error!(
                    InvalidArgument,
                    "Unknown metadata directive: it is COPY or REPLACE."
                ));
            }
        };
        if from == to && !replace {
            return Err(s3_error!(
                InvalidRequest,
                "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes."
            ));
        }
        let copied = self
            .files
            .copy_file(owner, &from, &to, &LockTokens::default())
            .await
            .map_err(object_error)?;
        let mut info = source.info.clone().unwrap_or_else(|| ObjectInfo {
            etag: source.etag.clone(),
            ..ObjectInfo::default()
        });
        if replace {
            info.meta = input.metadata.unwrap_or_default().into_iter().collect();
            super::info::check_metadata_size(&info.meta)?;
            info.headers = ObjectInfo::stored_headers(
                input.cache_control.as_ref(),
                input.content_disposition.as_ref(),
                input.content_encoding.as_ref(),
                input.content_language.as_ref(),
                input.expires.as_ref(),
            );
            if let Some(content_type) = input.content_type {
                info.headers
                    .insert("content-type".to_owned(), content_type.to_string());
            }
        }
        if replace || source.info.is_some() {
            self.files
                .set_s3_info(owner, &to, &source.meta.sha256, &info.to_json())
                .await
                .map_err(object_error)?;
        }
        let fields = ChecksumFields::of(info.checksum.as_ref());
        Ok(S3Response::new(CopyObjectOutput {
            copy_object_result: Some(CopyObjectResult {
                e_tag: Some(ETag::Strong(info.etag)),
                last_modified: Some(timestamp(copied.modified_ms)),
                checksum_crc32: fields.crc32,
                checksum_crc32c: fields.crc32c,
                checksum_crc64nvme: fields.crc64nvme,
                checksum_sha1: fields.sha1,
                checksum_sha256: fields.sha256,
                checksum_type: fields.kind,
            }),
            ..CopyObjectOutput::default()
        }))
    }
}

/// A copy's `x-amz-copy-source-if-*`: all fail with 412.
pub(super) fn copy_source_conditions(
    source: &Found,
    if_match: Option<&ETagCondition>,
    if_none_match: Option<&ETagCondition>,
    if_modified_since: Option<&Timestamp>,
    if_unmodified_since: Option<&Timestamp>,
) -> S3Result<()> {
    let modified = source.meta.modified_ms.div_euclid(1000);
    let fails = if_match.is_some_and(|condition| !matches(condition, &source.etag))
        || (if_match.is_none()
            && if_unmodified_since.is_some_and(|since| modified > epoch_seconds(since)))
        || if_none_match.is_some_and(|condition| matches(condition, &source.etag))
        || (if_none_match.is_none()
            && if_modified_since.is_some_and(|since| modified <= epoch_seconds(since)));
    if fails {
        Err(precondition_failed())
    } else {
        Ok(())
    }
}

/// What an answer says of an object.
struct Described {
    etag: String,
    last_modified: Timestamp,
    content_type: String,
    metadata: Option<s3s::dto::Metadata>,
    headers: BTreeMap<String, String>,
}

impl Described {
    fn of(meta: &FileMeta, info: Option<&ObjectInfo>, etag: String) -> Self {
        let mut headers = info.map(|info| info.headers.clone()).unwrap_or_default();
        let content_type = headers
            .remove("content-type")
            .unwrap_or_else(|| meta.content_type.clone());
        Self {
            etag,
            last_modified: timestamp(meta.modified_ms),
            content_type,
            metadata: info
                .filter(|info| !info.meta.is_empty())
                .map(|info| info.meta.clone().into_iter().collect()),
            headers,
        }
    }
}

/// The bytes of part `part` of an object (`None`: all of it, the one part
/// of an object not uploaded in parts); `ranged`: a `Range` came too.
fn part_range(info: Option<&ObjectInfo>, ranged: bool, part: i32) -> S3Result<Option<Range>> {
    if ranged {
        return Err(s3_error!(
            InvalidRequest,
            "Cannot specify both Range header and partNumber query parameter"
        ));
    }
    let sizes = info
        .map(|info| info.part_sizes.as_slice())
        .unwrap_or_default();
    let index = usize::try_from(part)
        .ok()
        .and_then(|part| part.checked_sub(1));
    match index {
        Some(0) if sizes.is_empty() => Ok(None),
        Some(index) if index < sizes.len() => {
            let first: u64 = sizes[..index].iter().sum();
            Ok(Some(Range::Int {
                first,
                last: Some(first + sizes[index].max(1) - 1),
            }))
        }
        _ => {
            let mut error = S3Error::with_message(
                S3ErrorCode::Custom("InvalidPartNumber".into()),
                "The requested partnumber is not satisfiable",
            );
            error.set_status_code(axum::http::StatusCode::RANGE_NOT_SATISFIABLE);
            Err(error)
        }
    }
}

/// `x-amz-mp-parts-count`: sent when a part was asked for, as S3 does.
fn parts_count(info: Option<&ObjectInfo>, part: Option<i32>) -> Option<i32> {
    part?;
    info.and_then(|info| info.parts)
        .and_then(|parts| i32::try_from(parts).ok())
}

fn checksum_wanted(mode: Option<&s3s::dto::ChecksumMode>) -> bool {
    mode.is_some_and(|mode| mode.as_str().eq_ignore_ascii_case("ENABLED"))
}

/// A failed put in S3's dialect.
fn put_error(error: AppError) -> S3Error {
    match error {
        AppError::AlreadyExists(_) => precondition_failed(),
        error => object_error(error),
    }
}

impl S3Api {
    /// The object a copy's `source` names.
    pub(super) async fn copy_source(
        &self,
        owner: Owner,
        source: &CopySource,
    ) -> S3Result<(FilePath, Found)> {
        let CopySource::Bucket { bucket, key, .. } = source else {
            return Err(s3_error!(
                NotImplemented,
                "Only a bucket and key may be copied from."
            ));
        };
        let path = object_path(bucket, key)?;
        let found = self.find_object(owner, bucket, &path).await?;
        Ok((path, found))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from(std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds as u64))
    }

    fn tag(value: &str) -> ETagCondition {
        ETagCondition::ETag(ETag::Strong(value.to_owned()))
    }

    fn verdict(conditions: &Conditions<'_>) -> Option<S3ErrorCode> {
        conditions
            .evaluate("abc", 100_000)
            .err()
            .map(|error| error.code().clone())
    }

    #[test]
    fn conditions_follow_rfc_9110_order() {
        let none = Conditions {
            if_match: None,
            if_none_match: None,
            if_modified_since: None,
            if_unmodified_since: None,
        };
        assert_eq!(verdict(&none), None);
        // If-Match decides over If-Unmodified-Since.
        let (matching, old) = (tag("abc"), at(50));
        let c = Conditions {
            if_match: Some(&matching),
            if_unmodified_since: Some(&old),
            ..none
        };
        assert_eq!(verdict(&c), None);
        let other = tag("xyz");
        let c = Conditions {
            if_match: Some(&other),
            ..none
        };
        assert_eq!(verdict(&c), Some(S3ErrorCode::PreconditionFailed));
        let c = Conditions {
            if_unmodified_since: Some(&old),
            ..none
        };
        assert_eq!(verdict(&c), Some(S3ErrorCode::PreconditionFailed));
        // If-None-Match decides over If-Modified-Since.
        let (any, later) = (ETagCondition::Any, at(200));
        let c = Conditions {
            if_none_match: Some(&any),
            ..none
        };
        assert_eq!(verdict(&c), Some(S3ErrorCode::NotModified));
        let c = Conditions {
            if_none_match: Some(&other),
            if_modified_since: Some(&later),
            ..none
        };
        assert_eq!(verdict(&c), None);
        let c = Conditions {
            if_modified_since: Some(&later),
            ..none
        };
        assert_eq!(verdict(&c), Some(S3ErrorCode::NotModified));
        let c = Conditions {
            if_modified_since: Some(&old),
            ..none
        };
        assert_eq!(verdict(&c), None);
    }

    #[test]
    fn a_part_number_reads_that_part() {
        let info = ObjectInfo {
            parts: Some(3),
            part_sizes: vec![10, 10, 3],
            ..ObjectInfo::default()
        };
        let range = |part| part_range(Some(&info), false, part);
        assert!(matches!(
            range(1),
            Ok(Some(Range::Int {
                first: 0,
                last: Some(9)
            }))
        ));
        assert!(matches!(
            range(3),
            Ok(Some(Range::Int {
                first: 20,
                last: Some(22)
            }))
        ));
        assert!(range(4).is_err());
        assert!(range(0).is_err());
        assert!(part_range(Some(&info), true, 1).is_err());
        // An object put whole is its own part 1, and has no other.
        assert!(matches!(part_range(None, false, 1), Ok(None)));
        assert!(part_range(None, false, 2).is_err());
    }
}
