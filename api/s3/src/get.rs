//! `GetObject` and `HeadObject`: one object read whole, by range or by
//! part, with S3's conditionals. Both answer through one builder
//! ([`Answer`]): HEAD says of an object what GET says, without its bytes.

use std::collections::BTreeMap;

use s3s::dto::{
    ChecksumMode, ETag, GetObjectInput, GetObjectOutput, HeadObjectInput, HeadObjectOutput,
    Metadata, Range, StreamingBlob, Timestamp, TimestampFormat,
};
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result, s3_error};
use volume::{FileMeta, FilePath, NULL_VERSION, Owner};

use api_common::headers::parse_if_range;
use file_service::{ReadBody, Want};
use storage_host::runtime::ByteRange;

use super::checksum::{ChecksumFields, with_checksums};
use super::conditions::Conditions;
use super::error::object_error;
use super::info::EMPTY_MD5;
use super::info::{ObjectInfo, etag_of};
use super::lookup::Found;
use super::object_lock::LockFields;
use super::policy::hide_absence;
use super::versioning::checked_version;
use super::{S3Api, caller, object_path, timestamp};

/// `GetObjectOutput` or `HeadObjectOutput` (the same fields, two types)
/// from an [`Answer`], with the fields only one of them has.
macro_rules! object_answer {
    ($output:ident { $($field:ident: $value:expr),* } from $answer:expr) => {{
        let answer: Answer = $answer;
        with_checksums!(
            $output {
                $($field: $value,)*
                content_length: Some(answer.content_length),
                content_range: answer.content_range,
                accept_ranges: answer.accept_ranges,
                e_tag: Some(ETag::Strong(answer.etag)),
                last_modified: answer.last_modified,
                content_type: answer.content_type,
                metadata: answer.metadata,
                cache_control: answer.cache_control,
                content_disposition: answer.content_disposition,
                content_encoding: answer.content_encoding,
                content_language: answer.content_language,
                expires: answer.expires,
                parts_count: answer.parts_count,
                version_id: answer.version_id,
                object_lock_mode: answer.lock.mode,
                object_lock_retain_until_date: answer.lock.until,
                object_lock_legal_hold_status: answer.lock.hold,
                expiration: answer.expiration,
                ..$output::default()
            },
            answer.checksums
        )
    }};
}

/// What a key names, once looked up and past the read's conditions.
enum Looked {
    /// A folder marker (`key/`), made at this time.
    Marker(i64),
    Object(FilePath, Box<Found>),
}

impl S3Api {
    /// `GetObject`: the object's bytes (all, a range, or a part) and what
    /// S3 says of it.
    pub(super) async fn get_object_(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        // s3s does not parse `If-Range` into the input.
        let asked_if_range = parse_if_range(&req.headers);
        let input = req.input;
        let conditions = Conditions {
            if_match: input.if_match.as_ref(),
            if_none_match: input.if_none_match.as_ref(),
            if_modified_since: input.if_modified_since.as_ref(),
            if_unmodified_since: input.if_unmodified_since.as_ref(),
        };
        let (path, found) = match self
            .look_up(
                owner,
                (&input.bucket, &input.key),
                input.version_id.as_deref(),
                conditions,
            )
            .await
            .map_err(|error| hide_absence(&caller, error))?
        {
            Looked::Marker(made) => {
                return Ok(S3Response::new(
                    Answer::marker(made).get(StreamingBlob::from(s3s::Body::empty())),
                ));
            }
            Looked::Object(path, found) => (path, *found),
        };
        // `If-Range` governs the client's `Range`, not a part's.
        let if_range = asked_if_range
            .filter(|_| input.range.is_some() && input.part_number.is_none())
            .map(|asked| super::if_range::validator(asked, &found.etag, &found.meta.sha256));
        let range = asked_range(&found, input.range, input.part_number)?;
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
        let (body, span) = match read.body {
            ReadBody::Full(body) => (body, None),
            ReadBody::Partial { first, last, body } => (body, Some((first, last))),
            ReadBody::NotModified | ReadBody::Headers => {
                return Err(s3_error!(InternalError, "the read gave no content"));
            }
        };
        let mut answer = Answer::of(
            &read.meta,
            info.as_ref(),
            etag,
            Span { size, span },
            input.part_number,
            input.checksum_mode.as_ref(),
        );
        answer.version_id = self
            .version_header_for(owner, &input.bucket, &read.meta.version_id)
            .await?;
        answer.lock = self
            .lock_fields_for(owner, &input.bucket, &read.meta)
            .await?;
        answer.expiration = self
            .expiration_for(owner, &input.bucket, &read.meta)
            .await?;
        let answer = answer.overridden(Overrides {
            content_type: input.response_content_type,
            cache_control: input.response_cache_control,
            content_disposition: input.response_content_disposition,
            content_encoding: input.response_content_encoding,
            content_language: input.response_content_language,
            expires: input.response_expires,
        });
        Ok(S3Response::new(answer.get(StreamingBlob::from(
            s3s::Body::http_body_unsync(body),
        ))))
    }

    /// `HeadObject`: what `GetObject` would say of the object, without its
    /// bytes.
    pub(super) async fn head_object_(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let input = req.input;
        let conditions = Conditions {
            if_match: input.if_match.as_ref(),
            if_none_match: input.if_none_match.as_ref(),
            if_modified_since: input.if_modified_since.as_ref(),
            if_unmodified_since: input.if_unmodified_since.as_ref(),
        };
        let found = match self
            .look_up(
                owner,
                (&input.bucket, &input.key),
                input.version_id.as_deref(),
                conditions,
            )
            .await
            .map_err(|error| hide_absence(&caller, error))?
        {
            Looked::Marker(made) => return Ok(S3Response::new(Answer::marker(made).head())),
            Looked::Object(_, found) => *found,
        };
        let size = found.meta.size;
        let span = match asked_range(&found, input.range, input.part_number)? {
            None => None,
            Some(asked) => Some(storage_handler::range::resolve(asked, size).ok_or_else(|| {
                s3_error!(InvalidRange, "The requested range is not satisfiable")
            })?),
        };
        let mut answer = Answer::of(
            &found.meta,
            found.info.as_ref(),
            found.etag.clone(),
            Span { size, span },
            input.part_number,
            input.checksum_mode.as_ref(),
        );
        answer.version_id = self
            .version_header_for(owner, &input.bucket, &found.meta.version_id)
            .await?;
        answer.lock = self
            .lock_fields_for(owner, &input.bucket, &found.meta)
            .await?;
        answer.expiration = self
            .expiration_for(owner, &input.bucket, &found.meta)
            .await?;
        let tag_count = answer.tag_count;
        let mut response = S3Response::new(answer.head());
        if let Some(count) = tag_count {
            response
                .headers
                .insert("x-amz-tagging-count", axum::http::HeaderValue::from(count));
        }
        Ok(response)
    }

    /// What `key` of `bucket` names (its `version`, if one is asked), if
    /// the read's `conditions` hold for it (a folder marker has none to
    /// pass).
    async fn look_up(
        &self,
        owner: Owner,
        (bucket, key): (&str, &str),
        version: Option<&str>,
        conditions: Conditions<'_>,
    ) -> S3Result<Looked> {
        let version = version.map(checked_version).transpose()?;
        if key.ends_with('/') && version.is_none_or(|version| version == NULL_VERSION) {
            return Ok(Looked::Marker(self.find_marker(owner, bucket, key).await?));
        }
        let path = object_path(bucket, key)?;
        let found = match version {
            None => self.find_object(owner, bucket, &path).await?,
            Some(version) => self.find_version(owner, bucket, &path, version).await?,
        };
        conditions.check(&found.etag, found.meta.modified_ms)?;
        Ok(Looked::Object(path, Box::new(found)))
    }
}

/// The bytes a read asks for: part `part` (of `found`) or the client's
/// `range`; `None` for all of them.
fn asked_range(
    found: &Found,
    range: Option<Range>,
    part: Option<i32>,
) -> S3Result<Option<ByteRange>> {
    let range = match part {
        Some(part) => part_range(found.info.as_ref(), range.is_some(), part)?,
        None => range,
    };
    Ok(range.map(|range| match range {
        Range::Int { first, last } => ByteRange::FirstLast((first, last)),
        Range::Suffix { length } => ByteRange::Suffix(length),
    }))
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

/// The bytes an answer carries of an object of `size`: all of them, or
/// `first..=last`.
struct Span {
    size: u64,
    span: Option<(u64, u64)>,
}

/// The `response-*` overrides of a (presigned) GET.
struct Overrides {
    content_type: Option<String>,
    cache_control: Option<String>,
    content_disposition: Option<String>,
    content_encoding: Option<String>,
    content_language: Option<String>,
    expires: Option<Timestamp>,
}

/// What GET and HEAD answer of an object beside its bytes.
#[derive(Default)]
struct Answer {
    content_length: i64,
    content_range: Option<String>,
    accept_ranges: Option<String>,
    etag: String,
    last_modified: Option<Timestamp>,
    content_type: Option<String>,
    metadata: Option<Metadata>,
    cache_control: Option<String>,
    content_disposition: Option<String>,
    content_encoding: Option<String>,
    content_language: Option<String>,
    expires: Option<Timestamp>,
    parts_count: Option<i32>,
    checksums: ChecksumFields,
    /// `x-amz-version-id`: none from a bucket never versioned.
    version_id: Option<String>,
    /// `x-amz-object-lock-*`: none from a bucket without object lock.
    lock: LockFields,
    /// `x-amz-expiration`: when a lifecycle rule expires the object.
    expiration: Option<String>,
    /// `x-amz-tagging-count` (GET only, as S3).
    tag_count: Option<i32>,
}

impl Answer {
    /// A folder marker: an empty object, made at `made_ms`.
    fn marker(made_ms: i64) -> Self {
        Self {
            content_length: 0,
            last_modified: Some(timestamp(made_ms)),
            content_type: "application/x-directory".parse().ok(),
            etag: EMPTY_MD5.to_owned(),
            ..Self::default()
        }
    }

    /// The file `meta` with what S3 kept of it (`info`) and the ETag S3
    /// gives it: `span` of its bytes, read as part `part` if one was
    /// asked; its checksum if `mode` asks for it and the answer is whole.
    fn of(
        meta: &FileMeta,
        info: Option<&ObjectInfo>,
        etag: String,
        span: Span,
        part: Option<i32>,
        mode: Option<&ChecksumMode>,
    ) -> Self {
        let (length, content_range) = match span.span {
            None => (span.size, None),
            Some((first, last)) => (
                last - first + 1,
                Some(format!("bytes {first}-{last}/{}", span.size)),
            ),
        };
        let whole = content_range.is_none();
        let mut headers: BTreeMap<String, String> =
            info.map(|info| info.headers.clone()).unwrap_or_default();
        let content_type = headers
            .remove("content-type")
            .unwrap_or_else(|| meta.content_type.clone());
        let checksums = if whole && checksum_wanted(mode) {
            ChecksumFields::of(info.and_then(|info| info.checksum.as_ref()))
        } else {
            ChecksumFields::default()
        };
        Self {
            content_length: i64::try_from(length).unwrap_or(i64::MAX),
            content_range,
            accept_ranges: Some("bytes".to_owned()),
            etag,
            last_modified: Some(timestamp(meta.modified_ms)),
            content_type: content_type.parse().ok(),
            metadata: info
                .filter(|info| !info.meta.is_empty())
                .map(|info| info.meta.clone().into_iter().collect()),
            cache_control: headers.get("cache-control").cloned(),
            content_disposition: headers.get("content-disposition").cloned(),
            content_encoding: headers.get("content-encoding").cloned(),
            content_language: headers.get("content-language").cloned(),
            expires: headers.get("expires").and_then(|text| http_date(text)),
            parts_count: parts_count(info, part),
            checksums,
            version_id: None,
            lock: LockFields::default(),
            expiration: None,
            tag_count: crate::tagging::tag_count(info),
        }
    }

    /// With what a GET's `response-*` parameters ask for instead.
    fn overridden(mut self, asked: Overrides) -> Self {
        if let Some(value) = asked.content_type {
            self.content_type = value.parse().ok();
        }
        if let Some(value) = asked.cache_control {
            self.cache_control = Some(value);
        }
        if let Some(value) = asked.content_disposition {
            self.content_disposition = Some(value);
        }
        if let Some(value) = asked.content_encoding {
            self.content_encoding = Some(value);
        }
        if let Some(value) = asked.content_language {
            self.content_language = Some(value);
        }
        if let Some(value) = asked.expires {
            self.expires = Some(value);
        }
        self
    }

    /// The answer to a GET, with `body`.
    fn get(self, body: StreamingBlob) -> GetObjectOutput {
        let tag_count = self.tag_count;
        object_answer!(GetObjectOutput { body: Some(body), tag_count: tag_count } from self)
    }

    /// The answer to a HEAD.
    fn head(self) -> HeadObjectOutput {
        object_answer!(HeadObjectOutput {} from self)
    }
}

/// `x-amz-mp-parts-count`: sent when a part was asked for, as S3 does.
fn parts_count(info: Option<&ObjectInfo>, part: Option<i32>) -> Option<i32> {
    part?;
    info.and_then(|info| info.parts)
        .and_then(|parts| i32::try_from(parts).ok())
}

fn checksum_wanted(mode: Option<&ChecksumMode>) -> bool {
    mode.is_some_and(|mode| mode.as_str().eq_ignore_ascii_case("ENABLED"))
}

fn http_date(text: &str) -> Option<Timestamp> {
    Timestamp::parse(TimestampFormat::HttpDate, text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

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
