//! Tags: an object version's (`Put`/`Get`/`DeleteObjectTagging`,
//! `x-amz-tagging` on `PutObject`, `CopyObject` and
//! `CreateMultipartUpload`, `x-amz-tagging-count` on reads), kept in what
//! S3 keeps of the version (`ObjectInfo`), so they follow it through the
//! history; and a bucket's (`Put`/`Get`/`DeleteBucketTagging`), a bucket
//! configuration document. Checked as S3 checks them.

use std::collections::HashSet;

use s3s::dto::{
    DeleteBucketTaggingInput, DeleteBucketTaggingOutput, DeleteObjectTaggingInput,
    DeleteObjectTaggingOutput, GetBucketTaggingInput, GetBucketTaggingOutput,
    GetObjectTaggingInput, GetObjectTaggingOutput, PutBucketTaggingInput, PutBucketTaggingOutput,
    PutObjectTaggingInput, PutObjectTaggingOutput, Tag,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};
use volume::{ConfigKind, FilePath, Owner};

use crate::error::object_error;
use crate::info::ObjectInfo;
use crate::{S3Api, caller, object_path};

/// Most tags an object has, as S3.
const MOST_OBJECT_TAGS: usize = 10;

/// Most tags a bucket has, as S3.
const MOST_BUCKET_TAGS: usize = 50;

/// What S3 says of an `x-amz-tagging` it cannot read (`answers` names
/// the header as the argument).
pub(crate) const BAD_TAGGING_HEADER: &str = "The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query parameters without tag name duplicates.";

/// Whether a tag's text holds only what S3 allows: letters, digits,
/// spaces and `+ - = . _ : / @`.
fn allowed_text(text: &str) -> bool {
    text.chars()
        .all(|c| c.is_alphanumeric() || c.is_whitespace() || "+-=._:/@".contains(c))
}

/// Tags as S3 checks them: at most `most`, keys unique, 1 to 128
/// characters, values at most 256.
fn checked(tags: Vec<(String, String)>, most: usize) -> S3Result<Vec<(String, String)>> {
    if tags.len() > most {
        let mut error = s3s::S3Error::with_message(
            s3s::S3ErrorCode::Custom("BadRequest".into()),
            format!("Object tags cannot be greater than {most}"),
        );
        error.set_status_code(axum::http::StatusCode::BAD_REQUEST);
        return Err(error);
    }
    let mut keys = HashSet::new();
    for (key, value) in &tags {
        if key.is_empty() || key.chars().count() > 128 || !allowed_text(key) {
            return Err(s3_error!(
                InvalidTag,
                "The TagKey you have provided is invalid"
            ));
        }
        if value.chars().count() > 256 || !allowed_text(value) {
            return Err(s3_error!(
                InvalidTag,
                "The TagValue you have provided is invalid"
            ));
        }
        if key.starts_with("aws:") {
            return Err(s3_error!(
                InvalidTag,
                "Your TagKey cannot be prefixed with aws:"
            ));
        }
        if !keys.insert(key.as_str()) {
            return Err(s3_error!(
                InvalidTag,
                "Cannot provide multiple Tags with the same key"
            ));
        }
    }
    Ok(tags)
}

/// The tags of an `x-amz-tagging` header (a URL query: `k1=v1&k2=v2`).
pub(crate) fn tags_of_header(header: Option<&str>) -> S3Result<Vec<(String, String)>> {
    let Some(header) = header else {
        return Ok(Vec::new());
    };
    let decode = |text: &str| {
        percent_encoding::percent_decode_str(&text.replace('+', " "))
            .decode_utf8()
            .map(|text| text.into_owned())
            .map_err(|_| s3_error!(InvalidArgument, "The tagging header is not valid UTF-8"))
    };
    let mut tags: Vec<(String, String)> = Vec::new();
    for pair in header.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = decode(key)?;
        if tags.iter().any(|(seen, _)| *seen == key) {
            return Err(s3s::S3Error::with_message(
                s3s::S3ErrorCode::InvalidArgument,
                BAD_TAGGING_HEADER,
            ));
        }
        tags.push((key, decode(value)?));
    }
    checked(tags, MOST_OBJECT_TAGS)
}

/// The tags of a form upload's `tagging` field: S3's `Tagging` XML.
pub(crate) fn tags_of_document(document: &str) -> S3Result<Vec<(String, String)>> {
    let unescape = |text: &str| {
        text.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&")
    };
    let inner = |text: &str, name: &str| {
        let open = format!("<{name}>");
        let close = format!("</{name}>");
        let start = text.find(&open)? + open.len();
        let end = text[start..].find(&close)? + start;
        Some(unescape(&text[start..end]))
    };
    let malformed = || {
        s3_error!(
            MalformedXML,
            "The XML you provided was not well-formed or did not validate against our published schema"
        )
    };
    if !document.trim_start().starts_with("<Tagging") {
        return Err(malformed());
    }
    let mut tags = Vec::new();
    for tag in document.split("<Tag>").skip(1) {
        let key = inner(tag, "Key").ok_or_else(malformed)?;
        let value = inner(tag, "Value").unwrap_or_default();
        tags.push((key, value));
    }
    checked(tags, MOST_OBJECT_TAGS)
}

fn tags_of_set(set: Vec<Tag>, most: usize) -> S3Result<Vec<(String, String)>> {
    let tags = set
        .into_iter()
        .map(|tag| match (tag.key, tag.value) {
            (Some(key), value) => Ok((key, value.unwrap_or_default())),
            (None, _) => Err(s3_error!(
                InvalidTag,
                "The TagKey you have provided is invalid"
            )),
        })
        .collect::<S3Result<Vec<_>>>()?;
    checked(tags, most)
}

fn tag_set(tags: &[(String, String)]) -> Vec<Tag> {
    tags.iter()
        .map(|(key, value)| Tag {
            key: Some(key.clone()),
            value: Some(value.clone()),
        })
        .collect()
}

/// `x-amz-tagging-count` of an object with `info`: none without tags.
pub(crate) fn tag_count(info: Option<&ObjectInfo>) -> Option<i32> {
    info.map(|info| info.tags.len())
        .filter(|count| *count > 0)
        .and_then(|count| i32::try_from(count).ok())
}

impl S3Api {
    /// The version whose tags a request reads or writes: a key whose latest
    /// version is a delete marker has none to tag (S3's 405).
    async fn tagged_version(
        &self,
        owner: Owner,
        (bucket, path): (&str, &FilePath),
        version: Option<&str>,
    ) -> S3Result<crate::lookup::Found> {
        match self.find_object_version(owner, bucket, path, version).await {
            Err(error) if version.is_none() && *error.code() == s3s::S3ErrorCode::NoSuchKey => {
                let versions = self
                    .files
                    .versions_of(owner, path)
                    .await
                    .map_err(object_error)?;
                if matches!(
                    versions.first(),
                    Some(volume::Version::DeleteMarker { latest: true, .. })
                ) {
                    Err(s3_error!(
                        MethodNotAllowed,
                        "The specified method is not allowed against this resource."
                    ))
                } else {
                    Err(error)
                }
            }
            other => other,
        }
    }

    /// Replace the tags of `version` (or the current version) of `path`:
    /// the version id changed, for S3's answer.
    async fn retag(
        &self,
        owner: Owner,
        (bucket, path): (&str, &FilePath),
        version: Option<&str>,
        tags: Vec<(String, String)>,
    ) -> S3Result<Option<String>> {
        let found = self.tagged_version(owner, (bucket, path), version).await?;
        let mut info = found.info.unwrap_or_else(|| ObjectInfo {
            etag: found.etag.clone(),
            ..ObjectInfo::default()
        });
        info.tags = tags;
        self.files
            .set_version_s3_info(owner, path, &found.meta.version_id, &info.to_json())
            .await
            .map_err(object_error)?;
        self.version_header_for(owner, bucket, &found.meta.version_id)
            .await
    }

    pub(crate) async fn put_object_tagging_(
        &self,
        req: S3Request<PutObjectTaggingInput>,
    ) -> S3Result<S3Response<PutObjectTaggingOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let input = req.input;
        self.require_bucket(owner, &input.bucket).await?;
        let path = object_path(&input.bucket, &input.key)?;
        let tags = tags_of_set(input.tagging.tag_set, MOST_OBJECT_TAGS)?;
        let version_id = self
            .retag(
                owner,
                (&input.bucket, &path),
                input.version_id.as_deref(),
                tags,
            )
            .await?;
        Ok(S3Response::new(PutObjectTaggingOutput { version_id }))
    }

    pub(crate) async fn get_object_tagging_(
        &self,
        req: S3Request<GetObjectTaggingInput>,
    ) -> S3Result<S3Response<GetObjectTaggingOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let input = req.input;
        self.require_bucket(owner, &input.bucket).await?;
        let path = object_path(&input.bucket, &input.key)?;
        let found = self
            .tagged_version(owner, (&input.bucket, &path), input.version_id.as_deref())
            .await?;
        let tags = found.info.map(|info| info.tags).unwrap_or_default();
        let version_id = self
            .version_header_for(owner, &input.bucket, &found.meta.version_id)
            .await?;
        Ok(S3Response::new(GetObjectTaggingOutput {
            tag_set: tag_set(&tags),
            version_id,
        }))
    }

    pub(crate) async fn delete_object_tagging_(
        &self,
        req: S3Request<DeleteObjectTaggingInput>,
    ) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let input = req.input;
        self.require_bucket(owner, &input.bucket).await?;
        let path = object_path(&input.bucket, &input.key)?;
        let version_id = self
            .retag(
                owner,
                (&input.bucket, &path),
                input.version_id.as_deref(),
                Vec::new(),
            )
            .await?;
        Ok(S3Response::new(DeleteObjectTaggingOutput { version_id }))
    }

    pub(crate) async fn put_bucket_tagging_(
        &self,
        req: S3Request<PutBucketTaggingInput>,
    ) -> S3Result<S3Response<PutBucketTaggingOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let input = req.input;
        self.require_bucket(owner, &input.bucket).await?;
        let tags = tags_of_set(input.tagging.tag_set, MOST_BUCKET_TAGS)?;
        // No tag at all: the bucket has none, as S3 keeps it.
        if tags.is_empty() {
            self.files
                .delete_bucket_config(owner, &input.bucket, Some(ConfigKind::Tagging))
                .await
                .map_err(object_error)?;
        } else {
            let body = serde_json::to_string(&tags).unwrap_or_default();
            self.files
                .set_bucket_config(owner, &input.bucket, ConfigKind::Tagging, &body)
                .await
                .map_err(object_error)?;
        }
        Ok(S3Response::new(PutBucketTaggingOutput::default()))
    }

    pub(crate) async fn get_bucket_tagging_(
        &self,
        req: S3Request<GetBucketTaggingInput>,
    ) -> S3Result<S3Response<GetBucketTaggingOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let bucket = &req.input.bucket;
        self.require_bucket(owner, bucket).await?;
        let tags: Vec<(String, String)> = self
            .files
            .bucket_config(owner, bucket, ConfigKind::Tagging)
            .await
            .map_err(object_error)?
            .and_then(|body| serde_json::from_str(&body).ok())
            .ok_or_else(|| s3_error!(NoSuchTagSet, "The TagSet does not exist"))?;
        Ok(S3Response::new(GetBucketTaggingOutput {
            tag_set: tag_set(&tags),
        }))
    }

    pub(crate) async fn delete_bucket_tagging_(
        &self,
        req: S3Request<DeleteBucketTaggingInput>,
    ) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let bucket = &req.input.bucket;
        self.require_bucket(owner, bucket).await?;
        self.files
            .delete_bucket_config(owner, bucket, Some(ConfigKind::Tagging))
            .await
            .map_err(object_error)?;
        Ok(S3Response::new(DeleteBucketTaggingOutput::default()))
    }
}
