//! `CreateMultipartUpload`: an upload session, keeping what the object
//! will be stored with (metadata, headers, the checksum asked for) until
//! it completes.

use s3s::dto::{
    ChecksumAlgorithm, ChecksumType, CreateMultipartUploadInput, CreateMultipartUploadOutput,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::checksum::Algorithm;
use crate::error::object_error;
use crate::info::{DEFAULT_CONTENT_TYPE, ObjectInfo, check_metadata_size};
use crate::object_lock::{AskedLock, asked_lock};
use crate::tagging::tags_of_header;
use crate::{S3Api, caller, object_path};

use super::Pending;

impl S3Api {
    pub(crate) async fn create_multipart_upload_(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        let caller = caller(&req)?;
        let lock = asked_lock(
            req.input.object_lock_mode.as_ref(),
            req.input.object_lock_retain_until_date.as_ref(),
            req.input.object_lock_legal_hold_status.as_ref(),
        )?;
        let input = req.input;
        self.require_bucket(caller.owner(), &input.bucket).await?;
        self.require_lock_for(caller.owner(), &input.bucket, lock.as_ref())
            .await?;
        crate::defaults::refuse_granting_acl(input.acl.as_ref())?;
        let path = object_path(&input.bucket, &input.key)?;
        let checksum = input
            .checksum_algorithm
            .as_ref()
            .map(|algorithm| {
                Algorithm::parse(algorithm.as_str()).ok_or_else(|| {
                    s3_error!(
                        InvalidRequest,
                        "Checksum algorithm provided is unsupported."
                    )
                })
            })
            .transpose()?;
        let full_object = match input.checksum_type.as_ref().map(ChecksumType::as_str) {
            Some(ChecksumType::FULL_OBJECT) => {
                if matches!(checksum, Some(Algorithm::Sha1 | Algorithm::Sha256)) {
                    return Err(s3_error!(
                        InvalidRequest,
                        "The FULL_OBJECT checksum type is not supported for SHA1 or SHA256."
                    ));
                }
                true
            }
            Some(ChecksumType::COMPOSITE) if matches!(checksum, Some(Algorithm::Crc64Nvme)) => {
                return Err(s3_error!(
                    InvalidRequest,
                    "The COMPOSITE checksum type is not supported for CRC64NVME."
                ));
            }
            Some(ChecksumType::COMPOSITE) => false,
            None => matches!(checksum, Some(Algorithm::Crc64Nvme)),
            Some(_) => return Err(s3_error!(InvalidRequest, "Unknown checksum type.")),
        };
        let meta = input.metadata.unwrap_or_default().into_iter().collect();
        check_metadata_size(&meta)?;
        let pending = Pending {
            meta,
            headers: ObjectInfo::stored_headers(
                input.cache_control.as_ref(),
                input.content_disposition.as_ref(),
                input.content_encoding.as_ref(),
                input.content_language.as_ref(),
                input.expires.as_ref(),
            ),
            checksum,
            full_object,
            lock: lock.map(AskedLock::from),
            tags: tags_of_header(input.tagging.as_deref())?,
        };
        let upload = self
            .files
            .begin_multipart(
                &caller,
                &path,
                Some(input.content_type.map_or_else(
                    || DEFAULT_CONTENT_TYPE.to_owned(),
                    |content_type| content_type.to_string(),
                )),
                serde_json::to_string(&pending).unwrap_or_default(),
            )
            .await
            .map_err(object_error)?;
        Ok(S3Response::new(CreateMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(upload.id),
            checksum_algorithm: checksum
                .map(|algorithm| ChecksumAlgorithm::from_static(algorithm.name())),
            checksum_type: checksum.map(|_| {
                ChecksumType::from_static(if full_object {
                    ChecksumType::FULL_OBJECT
                } else {
                    ChecksumType::COMPOSITE
                })
            }),
            ..CreateMultipartUploadOutput::default()
        }))
    }
}
