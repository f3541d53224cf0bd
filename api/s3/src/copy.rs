//! Copies: `CopyObject` copies a file's row (never its bytes) with what S3
//! kept of it; `UploadPartCopy` reads its source (or a range of it) here,
//! to be stored as a part like any other body.

use s3s::dto::{
    CopyObjectInput, CopyObjectOutput, CopyObjectResult, CopySource, ETag, MetadataDirective,
    UploadPartCopyInput,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};
use volume::{FilePath, Owner};

use file_service::{LockTokens, ReadBody, Want};
use storage_host::runtime::ByteRange;

use super::checksum::{ChecksumFields, with_checksums};
use super::conditions::{copy_source_conditions, copy_source_conditions_of};
use super::error::object_error;
use super::info::{ObjectInfo, check_metadata_size};
use super::lookup::Found;
use super::object_lock::asked_lock;
use super::tagging::tags_of_header;
use super::versioning::checked_version;
use super::{S3Api, caller, object_path, timestamp};

impl S3Api {
    /// `CopyObject`: the source's row copied to the key (never its bytes),
    /// with what S3 kept of it, or the metadata the copy replaces it with.
    pub(super) async fn copy_object_(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let input = req.input;
        let (from, source, source_version) = self.copy_source(owner, &input.copy_source).await?;
        copy_source_conditions_of!(&source, input)?;
        self.require_bucket(owner, &input.bucket).await?;
        super::defaults::refuse_granting_acl(input.acl.as_ref())?;
        // A copy asks for its own lock, or gets the bucket's default: the
        // source's stays the source's.
        let lock = asked_lock(
            input.object_lock_mode.as_ref(),
            input.object_lock_retain_until_date.as_ref(),
            input.object_lock_legal_hold_status.as_ref(),
        )?;
        self.require_lock_for(owner, &input.bucket, lock.as_ref())
            .await?;
        // The source's tags, unless the copy replaces them.
        let new_tags = match input.tagging_directive.as_ref().map(|d| d.as_str()) {
            None | Some("COPY") => None,
            Some("REPLACE") => Some(tags_of_header(input.tagging.as_deref())?),
            Some(_) => {
                return Err(s3_error!(
                    InvalidArgument,
                    "Unknown tagging directive: it is COPY or REPLACE."
                ));
            }
        };
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
        // Copying an earlier version onto its own key is how S3 restores
        // it; the current one onto itself changes nothing.
        if from == to && !replace && source_version.is_none() {
            return Err(s3_error!(
                InvalidRequest,
                "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes."
            ));
        }
        let copied = self
            .files
            .copy_file(
                owner,
                &from,
                source_version.as_deref(),
                &to,
                &LockTokens::default(),
            )
            .await
            .map_err(object_error)?;
        if let Some(lock) = lock {
            self.files
                .lock_new_version(owner, &to, &copied.version_id, lock)
                .await
                .map_err(object_error)?;
        }
        let mut info = source.info.clone().unwrap_or_else(|| ObjectInfo {
            etag: source.etag.clone(),
            ..ObjectInfo::default()
        });
        if replace {
            info.meta = input.metadata.unwrap_or_default().into_iter().collect();
            check_metadata_size(&info.meta)?;
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
        let retagged = new_tags.is_some();
        if let Some(tags) = new_tags {
            info.tags = tags;
        }
        if replace || retagged || source.info.is_some() {
            self.files
                .set_s3_info(owner, &to, &source.meta.sha256, &info.to_json())
                .await
                .map_err(object_error)?;
        }
        let fields = ChecksumFields::of(info.checksum.as_ref());
        let CopySource::Bucket {
            bucket: source_bucket,
            ..
        } = &input.copy_source
        else {
            return Err(s3_error!(InternalError, "the copy source changed"));
        };
        let copy_source_version_id = self
            .version_header_for(owner, source_bucket, &source.meta.version_id)
            .await?;
        let version_id = self
            .version_header_for(owner, &input.bucket, &copied.version_id)
            .await?;
        Ok(S3Response::new(CopyObjectOutput {
            copy_source_version_id,
            version_id,
            copy_object_result: Some(with_checksums!(
                CopyObjectResult {
                    e_tag: Some(ETag::Strong(info.etag)),
                    last_modified: Some(timestamp(copied.modified_ms)),
                    ..CopyObjectResult::default()
                },
                fields
            )),
            ..CopyObjectOutput::default()
        }))
    }

    /// The object a copy's `source` names, and the version it asked for.
    async fn copy_source(
        &self,
        owner: Owner,
        source: &CopySource,
    ) -> S3Result<(FilePath, Found, Option<String>)> {
        let CopySource::Bucket {
            bucket,
            key,
            version_id,
        } = source
        else {
            return Err(s3_error!(
                NotImplemented,
                "Only a bucket and key may be copied from."
            ));
        };
        let path = object_path(bucket, key)?;
        let Some(version) = version_id.as_deref() else {
            let found = self.find_object(owner, bucket, &path).await?;
            return Ok((path, found, None));
        };
        let version = checked_version(version)?;
        let found = match self.find_version(owner, bucket, &path, version).await {
            Ok(found) => found,
            Err(error) if *error.code() == s3s::S3ErrorCode::MethodNotAllowed => {
                return Err(s3_error!(
                    InvalidRequest,
                    "The source of a copy request may not specifically refer to a delete marker by version id."
                ));
            }
            Err(error) => return Err(error),
        };
        Ok((path, found, Some(version.to_owned())))
    }

    /// The bytes an `UploadPartCopy` copies: its source, if it passes the
    /// copy's conditions, whole or the range asked; and the version copied
    /// (as `x-amz-copy-source-version-id` names it).
    pub(super) async fn part_copy_source(
        &self,
        owner: Owner,
        input: &UploadPartCopyInput,
    ) -> S3Result<(axum::body::Body, Option<String>)> {
        let (source_path, source, _) = self.copy_source(owner, &input.copy_source).await?;
        let CopySource::Bucket { bucket, .. } = &input.copy_source else {
            return Err(s3_error!(InternalError, "the copy source changed"));
        };
        let version = self
            .version_header_for(owner, bucket, &source.meta.version_id)
            .await?;
        copy_source_conditions_of!(&source, input)?;
        let range = input
            .copy_source_range
            .as_deref()
            .map(|range| copy_range(range, source.meta.size))
            .transpose()?;
        let read = self
            .files
            .read_looked_up(
                owner,
                &source_path,
                Want::content(range),
                Vec::new(),
                Some(source.meta.clone()),
            )
            .await
            .map_err(object_error)?;
        match read.body {
            ReadBody::Full(body) | ReadBody::Partial { body, .. } => Ok((body, version)),
            ReadBody::NotModified | ReadBody::Headers => {
                Err(s3_error!(InternalError, "the read gave no content"))
            }
        }
    }
}

/// `x-amz-copy-source-range: bytes=FIRST-LAST` over a source of `size`.
fn copy_range(range: &str, size: u64) -> S3Result<ByteRange> {
    let invalid = || {
        s3_error!(
            InvalidArgument,
            "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy"
        )
    };
    let (first, last) = range
        .trim()
        .strip_prefix("bytes=")
        .and_then(|span| span.split_once('-'))
        .ok_or_else(invalid)?;
    let first: u64 = first.parse().map_err(|_| invalid())?;
    let last: u64 = last.parse().map_err(|_| invalid())?;
    if first > last {
        return Err(invalid());
    }
    if last >= size {
        return Err(s3_error!(
            InvalidRange,
            "The requested range is not satisfiable"
        ));
    }
    Ok(ByteRange::FirstLast((first, Some(last))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_range_is_inclusive_and_within_the_source() {
        assert!(matches!(
            copy_range("bytes=0-9", 10),
            Ok(ByteRange::FirstLast((0, Some(9))))
        ));
        assert!(copy_range("bytes=0-10", 10).is_err());
        assert!(copy_range("bytes=5-4", 10).is_err());
        assert!(copy_range("0-4", 10).is_err());
        assert!(copy_range("bytes=-4", 10).is_err());
    }
}
