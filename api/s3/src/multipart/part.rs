//! `UploadPart` and `UploadPartCopy`: a body, checked like a `PutObject`'s,
//! or bytes of another object, kept as a numbered part of an upload.

use s3s::dto::{
    CopyPartResult, ETag, UploadPartCopyInput, UploadPartCopyOutput, UploadPartInput,
    UploadPartOutput,
};
use s3s::{S3Request, S3Response, S3Result};
use volume::uploads::{MultipartPart, Upload};

use crate::body::{BodyCheck, BodyChecks, Received, body_checks_of};
use crate::checksum::{Algorithm, ChecksumFields, sent_checksums, with_checksums};
use crate::error::object_error;
use crate::{S3Api, caller, timestamp};
use auth::Caller;
use file_service::Refusal;
use file_service::ServiceError;

use super::{no_such_upload, part_fields, part_number};

impl S3Api {
    /// `UploadPart`: the body, checked on its way, kept as a part.
    pub(crate) async fn upload_part_(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        let caller = caller(&req)?;
        let checks = body_checks_of!(req)?;
        let input = req.input;
        let number = part_number(input.part_number)?;
        let upload = self
            .upload_for(&caller, &input.bucket, &input.key, &input.upload_id)
            .await?;
        let (body, check) = checks.check(input.body, input.content_md5.as_deref())?;
        let part = self
            .store_part(&caller, &upload, number, body, check)
            .await?;
        let fields = part_fields(&part);
        Ok(S3Response::new(with_checksums!(
            UploadPartOutput {
                e_tag: Some(ETag::Strong(part.etag)),
                ..UploadPartOutput::default()
            },
            fields,
            without type
        )))
    }

    /// Store `body`, checked by `check`, as part `number` of `upload`: its
    /// ETag the hex MD5 of what passed, its checksum `ALGORITHM:base64`.
    async fn store_part<S, E>(
        &self,
        caller: &Caller,
        upload: &Upload,
        number: u32,
        body: S,
        check: BodyCheck,
    ) -> S3Result<MultipartPart>
    where
        S: futures_util::Stream<Item = Result<bytes::Bytes, E>> + Send + Unpin + 'static,
        E: std::fmt::Display + 'static,
    {
        let describe = |received: Received| {
            let checksum = received
                .checksum
                .map(|(algorithm, value)| format!("{}:{value}", algorithm.name()))
                .unwrap_or_default();
            (hex::encode(received.md5), checksum)
        };
        self.files
            .put_part(caller, upload, number, body, check, describe)
            .await
            .map_err(|refusal| match refusal {
                Refusal::Refused(refused) => refused,
                Refusal::Failed(ServiceError::NotFound(_)) => no_such_upload(),
                Refusal::Failed(error) => object_error(error),
            })
    }

    /// `UploadPartCopy`: bytes of another object kept as a part.
    pub(crate) async fn upload_part_copy_(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let input = req.input;
        let number = part_number(input.part_number)?;
        let upload = self
            .upload_for(&caller, &input.bucket, &input.key, &input.upload_id)
            .await?;
        let (body, copy_source_version_id) = self.part_copy_source(owner, &input).await?;
        let check = BodyCheck::new(None, None, None)?;
        let part = self
            .store_part(&caller, &upload, number, body.into_data_stream(), check)
            .await?;
        Ok(S3Response::new(UploadPartCopyOutput {
            copy_part_result: Some(CopyPartResult {
                e_tag: Some(ETag::Strong(part.etag)),
                last_modified: Some(timestamp(part.created_ms)),
                ..CopyPartResult::default()
            }),
            copy_source_version_id,
            ..UploadPartCopyOutput::default()
        }))
    }
}
