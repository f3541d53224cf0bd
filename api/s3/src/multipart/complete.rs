//! `CompleteMultipartUpload`: the parts a list names, checked by the
//! [`rules`](super::rules), sent through an instance as one object; and
//! `AbortMultipartUpload`, which forgets an upload and its parts.

use std::convert::Infallible;

use s3s::dto::{
    AbortMultipartUploadInput, AbortMultipartUploadOutput, CompleteMultipartUploadInput,
    CompleteMultipartUploadOutput, ETag,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};
use volume::uploads::{MultipartPart, Upload};

use crate::S3Api;
use crate::checksum::{
    Algorithm, ChecksumFields, StoredChecksum, Streaming, sent_checksums, with_checksums,
};
use crate::error::object_error;
use crate::info::ObjectInfo;
use auth::Caller;
use file_service::Inspect;
use file_service::ServiceError;

use super::{Pending, no_such_upload, rules, upload_of};

/// A completion whose parts passed the rules: what is left is to store
/// them as the object.
struct Completion {
    caller: Caller,
    upload: Upload,
    pending: Pending,
    chosen: Vec<MultipartPart>,
    etag: String,
    /// The composite checksum made of the parts' (if one was asked for).
    composite: Option<StoredChecksum>,
    bucket: String,
    key: String,
}

impl S3Api {
    /// `CompleteMultipartUpload`: the listed parts, once they pass the
    /// rules, stored as the object.
    pub(crate) async fn complete_multipart_upload_(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let (caller, input, upload) = upload_of!(self, req);
        let pending: Pending = serde_json::from_str(&upload.metadata).unwrap_or_default();
        let asked = input
            .multipart_upload
            .and_then(|upload| upload.parts)
            .unwrap_or_default();
        rules::check_named(&asked)?;
        let stored = self
            .files
            .multipart_parts(&upload)
            .await
            .map_err(object_error)?;
        let chosen = rules::choose(&asked, &stored)?;
        let etag = rules::composite_etag(&chosen);
        let composite = rules::composite_checksum(&pending, &chosen);
        if let Some(composite) = &composite {
            rules::check_sent_composite(composite, sent_checksums!(input))?;
        }
        // The header goes out before the object is stored (see below): the
        // version it will be is known already (see
        // `volume::upload_version_id`), where the bucket makes versions.
        let version_id = match self
            .files
            .bucket_versioning(caller.owner(), &input.bucket)
            .await
            .map_err(object_error)?
        {
            Some(volume::Versioning::Enabled) => Some(volume::upload_version_id(&upload.id)),
            _ => None,
        };
        let completion = Completion {
            caller,
            upload,
            pending,
            chosen,
            etag,
            composite,
            bucket: input.bucket,
            key: input.key,
        };
        // The parts are read through an instance now, which takes a while
        // for a large object: S3 answers 200 at once and keeps the
        // connection alive with whitespace until the result (or an error)
        // is written in the body, and so does `s3s` with a future. In a
        // task of its own: a client that goes away does not cut the
        // completion (and what S3 keeps of the object) short.
        let done = tokio::spawn(self.clone().store_completion(completion));
        let answer = async move {
            done.await
                .map_err(|error| s3_error!(InternalError, "the completion failed: {error}"))?
        };
        Ok(S3Response::new(CompleteMultipartUploadOutput {
            future: Some(Box::pin(answer)),
            version_id,
            ..CompleteMultipartUploadOutput::default()
        }))
    }

    /// Store `completion`'s parts as its object, and say so as S3 does.
    async fn store_completion(
        self,
        completion: Completion,
    ) -> S3Result<CompleteMultipartUploadOutput> {
        let Completion {
            caller,
            upload,
            pending,
            chosen,
            etag,
            composite,
            bucket,
            key,
        } = completion;
        let count = chosen.len();
        let lock = pending.lock.map(volume::VersionLock::from);
        let part_sizes: Vec<u64> = chosen.iter().map(|part| part.size).collect();
        let whole = WholeChecksum(
            pending
                .checksum
                .filter(|_| pending.full_object)
                .map(|algorithm| (algorithm, algorithm.streaming())),
        );
        // What S3 keeps of the object is made once the last part has
        // streamed by (a whole-object checksum needs every byte), goes
        // into the file's row with it, and comes back for the answer.
        let describe = {
            let etag = etag.clone();
            move |whole: Option<StoredChecksum>| {
                let info = ObjectInfo {
                    etag,
                    meta: pending.meta,
                    headers: pending.headers,
                    checksum: composite.or(whole),
                    parts: u32::try_from(count).ok(),
                    part_sizes,
                    tags: pending.tags,
                };
                (Some(info.to_json()), info)
            }
        };
        let completed = self
            .files
            .complete_multipart(&caller, &upload, chosen, whole, describe, lock)
            .await;
        let (stored, info) = match completed {
            Ok(completed) => completed,
            // Completed (or aborted) by another request meanwhile, which
            // took its parts: as S3 answers the one that lost.
            Err(_)
                if self
                    .files
                    .find_multipart(&caller, &upload.id)
                    .await
                    .is_err() =>
            {
                return Err(no_such_upload());
            }
            Err(error) => return Err(object_error(error)),
        };
        let fields = ChecksumFields::of(info.checksum.as_ref());
        Ok(with_checksums!(
            CompleteMultipartUploadOutput {
                bucket: Some(bucket.clone()),
                key: Some(key.clone()),
                location: Some(format!("/{bucket}/{key}")),
                e_tag: Some(ETag::Strong(etag)),
                version_id: (stored.version_id != volume::NULL_VERSION)
                    .then_some(stored.version_id),
                ..CompleteMultipartUploadOutput::default()
            },
            fields
        ))
    }

    /// `AbortMultipartUpload`: the upload and its parts forgotten.
    pub(crate) async fn abort_multipart_upload_(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        let (caller, _, upload) = upload_of!(self, req);
        match self.files.abort_multipart(&caller, &upload.id).await {
            Ok(()) => {}
            Err(ServiceError::NotFound(_)) => return Err(no_such_upload()),
            Err(error) => return Err(object_error(error)),
        }
        Ok(S3Response::new(AbortMultipartUploadOutput::default()))
    }
}

/// The whole object's checksum, if a full-object one was asked for, made
/// as the parts stream through the instance.
struct WholeChecksum(Option<(Algorithm, Streaming)>);

impl Inspect for WholeChecksum {
    type Passed = Option<StoredChecksum>;
    type Refused = Infallible;

    fn chunk(&mut self, bytes: &[u8]) {
        if let Some((_, hasher)) = &mut self.0 {
            hasher.update(bytes);
        }
    }

    fn failed(&mut self, _: &str) -> Option<Infallible> {
        None
    }

    fn ended(&mut self) -> Result<Option<StoredChecksum>, Infallible> {
        Ok(self.0.take().map(|(algorithm, mut hasher)| StoredChecksum {
            algorithm,
            value: hasher.finish(algorithm),
            composite: false,
        }))
    }

    fn sees_bytes(&self) -> bool {
        self.0.is_some()
    }
}
