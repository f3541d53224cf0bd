//! Multipart uploads: upload sessions of the file service whose parts are
//! numbered. Parts are kept durably (database + blob store) across
//! restarts and gateways; completing sends the chosen parts through an
//! instance as one upload, so the object is hashed and verified like any
//! other, and appears at its key atomically. Abandoned uploads expire
//! (`--upload-expiry` after their last part) and are collected.
//!
//! - `create`: `CreateMultipartUpload`, what the upload keeps until it
//!   completes.
//! - `part`: `UploadPart` and `UploadPartCopy`.
//! - `complete`: `CompleteMultipartUpload` and `AbortMultipartUpload`.
//! - `rules`: what a completion must satisfy, and the ETag and checksum
//!   it makes (no I/O).
//! - `list`: `ListParts` and `ListMultipartUploads`.

mod complete;
mod create;
mod list;
mod part;
mod rules;

use std::collections::BTreeMap;

use s3s::{S3Error, S3ErrorCode, S3Result, s3_error};
use serde::{Deserialize, Serialize};
use volume::uploads::{MultipartPart, Upload};

use auth::Caller;
use file_service::MAX_PARTS;
use file_service::ServiceError;

use super::checksum::{Algorithm, ChecksumFields, StoredChecksum};
use super::error::object_error;
use super::{S3Api, object_path};

/// The caller, the input and the upload an operation on one upload names
/// (`CompleteMultipartUpload`, `AbortMultipartUpload`, `ListParts`: the
/// same fields in three types).
macro_rules! upload_of {
    ($api:expr, $req:expr) => {{
        let caller = crate::caller(&$req)?;
        let input = $req.input;
        let upload = $api
            .upload_for(&caller, &input.bucket, &input.key, &input.upload_id)
            .await?;
        (caller, input, upload)
    }};
}
use upload_of;

/// What an upload keeps from its creation until it completes.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct Pending {
    #[serde(default)]
    pub(super) meta: BTreeMap<String, String>,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    /// The checksum asked for at creation.
    #[serde(default)]
    pub(super) checksum: Option<Algorithm>,
    /// Of the whole object, rather than composed of the parts'.
    #[serde(default)]
    pub(super) full_object: bool,
    /// The tags asked for at creation (`x-amz-tagging`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) tags: Vec<(String, String)>,
    /// The object lock asked for at creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) lock: Option<crate::object_lock::AskedLock>,
}

pub(super) fn no_such_upload() -> S3Error {
    s3_error!(
        NoSuchUpload,
        "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed."
    )
}

/// A part's stored checksum (`ALGORITHM:base64`), split.
pub(super) fn part_checksum(part: &MultipartPart) -> Option<(Algorithm, &str)> {
    let (name, value) = part.checksum.split_once(':')?;
    Some((Algorithm::parse(name)?, value))
}

/// A part's checksum as an answer's fields.
pub(super) fn part_fields(part: &MultipartPart) -> ChecksumFields {
    ChecksumFields::of(
        part_checksum(part)
            .map(|(algorithm, value)| StoredChecksum {
                algorithm,
                value: value.to_owned(),
                composite: false,
            })
            .as_ref(),
    )
}

impl S3Api {
    /// `caller`'s upload `id`, if it is for `bucket`/`key`.
    pub(super) async fn upload_for(
        &self,
        caller: &Caller,
        bucket: &str,
        key: &str,
        id: &str,
    ) -> S3Result<Upload> {
        let path = object_path(bucket, key)?;
        let upload = match self.files.find_multipart(caller, id).await {
            Ok(upload) => upload,
            Err(ServiceError::NotFound(_)) => return Err(no_such_upload()),
            Err(error) => return Err(object_error(error)),
        };
        if upload.path != path.as_str() {
            return Err(no_such_upload());
        }
        Ok(upload)
    }
}

/// A part number as S3 allows it.
pub(super) fn part_number(number: i32) -> S3Result<u32> {
    u32::try_from(number)
        .ok()
        .filter(|number| (1..=MAX_PARTS).contains(number))
        .ok_or_else(|| {
            S3Error::with_message(
                S3ErrorCode::InvalidArgument,
                format!("Part number must be an integer between 1 and {MAX_PARTS}, inclusive"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_numbers_are_one_to_ten_thousand() {
        assert_eq!(part_number(1).ok(), Some(1));
        assert_eq!(part_number(10_000).ok(), Some(10_000));
        assert!(part_number(0).is_err());
        assert!(part_number(10_001).is_err());
        assert!(part_number(-1).is_err());
    }
}
