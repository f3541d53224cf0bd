//! `UploadPart` and `UploadPartCopy`: a body, checked like a `PutObject`'s,
//! or bytes of another object, kept as a numbered part of an upload.

use std::sync::{Arc, Mutex, PoisonError};

use s3s::dto::{
    CopyPartResult, ETag, UploadPartCopyInput, UploadPartCopyOutput, UploadPartInput,
    UploadPartOutput,
};
use s3s::{S3Request, S3Response, S3Result};
use volume::uploads::{MultipartPart, Upload};

use crate::auth::Caller;
use crate::error::AppError;
use crate::s3::body::{BodyChecks, Checked, Verdict};
use crate::s3::checksum::{Algorithm, sent_checksums};
use crate::s3::error::object_error;
use crate::s3::{S3Api, caller, timestamp};

use super::{no_such_upload, part_fields, part_number};

impl S3Api {
    /// `UploadPart`: the body, checked on its way, kept as a part.
    pub(in crate::s3) async fn upload_part_(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        let caller = caller(&req)?;
        let checks = BodyChecks::of(
            sent_checksums!(req.input),
            req.input.checksum_algorithm.as_ref(),
            &req.headers,
            req.trailing_headers.clone(),
        )?;
        let input = req.input;
        let number = part_number(input.part_number)?;
        let upload = self
            .upload_for(&caller, &input.bucket, &input.key, &input.upload_id)
            .await?;
        let verdict = Verdict::default();
        let checked = checks.check(input.body, input.content_md5.as_deref(), verdict.clone())?;
        let part = self
            .store_part(&caller, &upload, number, checked, &verdict)
            .await?;
        let fields = part_fields(&part);
        Ok(S3Response::new(UploadPartOutput {
            e_tag: Some(ETag::Strong(part.etag)),
            checksum_crc32: fields.crc32,
            checksum_crc32c: fields.crc32c,
            checksum_crc64nvme: fields.crc64nvme,
            checksum_sha1: fields.sha1,
            checksum_sha256: fields.sha256,
            ..UploadPartOutput::default()
        }))
    }

    /// Store `body` (checked into `verdict`) as part `number` of `upload`.
    async fn store_part<S>(
        &self,
        caller: &Caller,
        upload: &Upload,
        number: u32,
        body: S,
        verdict: &Verdict,
    ) -> S3Result<MultipartPart>
    where
        S: futures_util::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static,
    {
        let described = Arc::new(Mutex::new(None));
        let describe = {
            let verdict = verdict.clone();
            let described = described.clone();
            move || match verdict.take() {
                Some(Ok(received)) => {
                    let checksum = received
                        .checksum
                        .map(|(algorithm, value)| format!("{}:{value}", algorithm.name()))
                        .unwrap_or_default();
                    Some((hex::encode(received.md5), checksum))
                }
                other => {
                    *described.lock().unwrap_or_else(PoisonError::into_inner) = other;
                    None
                }
            }
        };
        match self
            .files
            .put_part(caller, upload, number, body, describe)
            .await
        {
            Ok(part) => Ok(part),
            Err(error) => {
                let refused = described
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take()
                    .or_else(|| verdict.take());
                match (refused, error) {
                    (Some(Err(refused)), _) => Err(refused),
                    (_, AppError::NotFound(_)) => Err(no_such_upload()),
                    (_, error) => Err(object_error(error)),
                }
            }
        }
    }

    /// `UploadPartCopy`: bytes of another object kept as a part.
    pub(in crate::s3) async fn upload_part_copy_(
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
        let body = self.part_copy_source(owner, &input).await?;
        let verdict = Verdict::default();
        let checked = Checked::new(body.into_data_stream(), None, None, None, verdict.clone())?;
        let part = self
            .store_part(&caller, &upload, number, checked, &verdict)
            .await?;
        Ok(S3Response::new(UploadPartCopyOutput {
            copy_part_result: Some(CopyPartResult {
                e_tag: Some(ETag::Strong(part.etag)),
                last_modified: Some(timestamp(part.created_ms)),
                ..CopyPartResult::default()
            }),
            ..UploadPartCopyOutput::default()
        }))
    }
}
