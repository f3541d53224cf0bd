//! Uploads in numbered parts (S3 multipart): parts arrive in any order,
//! over any number of requests and gateways, may be sent again, and are
//! chosen when the upload completes; the file is then sent through an
//! instance from the chosen parts, like any upload (hashed, verified,
//! stored atomically at its path). What a part's number, ETag and
//! checksum mean is the protocol's; this keeps them.

use axum::body::Body;
use bytes::Bytes;
use futures_util::Stream;

use volume::uploads::{MultipartPart, NewUpload, Upload, UploadKind};
use volume::{FileMeta, FilePath};

use crate::ServiceError;
use auth::Caller;

use super::store::inspect;
use super::uploads::{expires_after, new_upload_id};
use super::{FileService, Inspect, LockTokens, Refusal, StoreOptions};

/// Most parts an upload may have (S3's limit, tus's too).
pub const MAX_PARTS: u32 = volume::uploads::MAX_PARTS;

impl FileService {
    /// Start a multipart upload of `caller`'s file `path`, keeping
    /// `metadata` (the protocol's, opaque here) until it completes.
    pub async fn begin_multipart(
        &self,
        caller: &Caller,
        path: &FilePath,
        content_type: Option<String>,
        metadata: String,
    ) -> Result<Upload, ServiceError> {
        let options = StoreOptions {
            content_type: content_type.clone(),
            ..StoreOptions::default()
        };
        self.upload(caller, path, options, &LockTokens::default())
            .await?;
        let new = NewUpload {
            kind: UploadKind::Multipart,
            owner: caller.owner(),
            path: path.clone(),
            length: None,
            content_type: content_type.unwrap_or_default(),
            create_only: false,
            metadata,
            expires_ms: expires_after(self.upload_expiry),
        };
        self.volume
            .create_upload(&new_upload_id(), &new)
            .await
            .map_err(|error| ServiceError::from_volume(error, path.as_str()))?
            .ok_or_else(|| {
                ServiceError::Forbidden(format!(
                    "you have {} unfinished uploads: complete or abort one first",
                    volume::uploads::MAX_UPLOADS_PER_OWNER
                ))
            })
    }

    /// `caller`'s unfinished multipart upload `id`.
    pub async fn find_multipart(&self, caller: &Caller, id: &str) -> Result<Upload, ServiceError> {
        self.volume
            .find_upload(caller.owner(), id)
            .await
            .map_err(|error| ServiceError::from_volume(error, id))?
            .filter(|upload| upload.kind == UploadKind::Multipart)
            .ok_or_else(|| ServiceError::NotFound(format!("upload {id}")))
    }

    /// Store `body` as part `number` of `caller`'s upload `upload` (one
    /// sent before under that number is replaced), durably, `inspector`
    /// seeing it on its way (see [`Inspect`]); `describe` makes of what it
    /// passed as the part's ETag and checksum (the protocol's). A body the
    /// inspector refuses is not kept, and the refusal is the answer.
    pub async fn put_part<S, E, I, D>(
        &self,
        caller: &Caller,
        upload: &Upload,
        number: u32,
        body: S,
        inspector: I,
        describe: D,
    ) -> Result<MultipartPart, Refusal<I::Refused>>
    where
        S: Stream<Item = Result<Bytes, E>> + Send + Unpin + 'static,
        E: std::fmt::Display + 'static,
        I: Inspect,
        D: FnOnce(I::Passed) -> (String, String),
    {
        if !(1..=MAX_PARTS).contains(&number) {
            return Err(
                ServiceError::BadRequest(format!("a part number is 1 to {MAX_PARTS}")).into(),
            );
        }
        // What the part may bring: the size limit, and what the quota
        // leaves beside the owner's other unfinished uploads.
        let path = FilePath::parse(&upload.path).map_err(ServiceError::from)?;
        // The object may not pass the size limit: the parts kept so far
        // (but one this replaces) and this one.
        let parts = self.multipart_parts(upload).await?;
        let (same, others): (Vec<_>, Vec<_>) = parts.iter().partition(|part| part.number == number);
        let kept: u64 = others.iter().map(|part| part.size).sum();
        let mut room = self.max_body.saturating_sub(kept);
        let mut by_quota = false;
        // What the quota leaves (every unfinished upload's parts count in
        // it, but the one this replaces): a cheap refusal before a byte is
        // read; the part is weighed again, under the owner's lock, as it
        // is recorded.
        if let Some(quota_room) = self.quota_room(caller, &path).await? {
            let replaced: u64 = same
                .iter()
                .map(|part| part.size.saturating_add(volume::ENTRY_OVERHEAD))
                .sum();
            let left = quota_room.saturating_add(replaced);
            if left < room {
                room = left;
                by_quota = true;
            }
        }
        let (body, verdict) = inspect(body, inspector);
        let staged = self
            .stage_part(Body::from_stream(body), room)
            .await
            .map_err(|error| match error {
                ServiceError::BodyTooLarge { limit } if by_quota => ServiceError::QuotaExceeded(
                    format!("the part is larger than the {limit} bytes left of your quota"),
                ),
                other => other,
            });
        let staged = match (verdict.take(), staged) {
            (Some(Err(refused)), _) => return Err(Refusal::Refused(refused)),
            (_, Err(error)) => return Err(error.into()),
            (Some(Ok(passed)), Ok(staged)) => (passed, staged),
            (None, Ok(_)) => {
                return Err(ServiceError::BadRequest("the part was refused".into()).into());
            }
        };
        let ((etag, checksum), staged) = (describe(staged.0), staged.1);
        self.volume
            .store_multipart_part(
                caller.owner(),
                &upload.id,
                number,
                staged,
                etag,
                checksum,
                expires_after(self.upload_expiry),
            )
            .await
            .map_err(|error| ServiceError::from_volume(error, &upload.id))?
            .ok_or_else(|| ServiceError::NotFound(format!("upload {}", upload.id)).into())
    }

    /// The recorded parts of `upload`, by number.
    pub async fn multipart_parts(
        &self,
        upload: &Upload,
    ) -> Result<Vec<MultipartPart>, ServiceError> {
        self.volume
            .multipart_parts(&upload.id)
            .await
            .map_err(|error| ServiceError::from_volume(error, &upload.id))
    }

    /// `caller`'s unfinished multipart uploads to paths from `from` and
    /// before `upper`, at most `limit`.
    pub async fn multipart_uploads(
        &self,
        caller: &Caller,
        from: &str,
        upper: &str,
        limit: usize,
    ) -> Result<Vec<Upload>, ServiceError> {
        self.volume
            .multipart_uploads(caller.owner(), from, upper, limit)
            .await
            .map_err(|error| ServiceError::from_volume(error, from))
    }

    /// Store `upload`'s file from `parts` (in the order given) through an
    /// instance, `inspector` seeing every byte on its way (a whole-content
    /// checksum) and `describe` making of what it saw what S3 keeps of the
    /// file in its row, and what it hands back here; then forget the
    /// upload. If it fails the upload stays, to be completed again or
    /// aborted (as S3 keeps it).
    pub async fn complete_multipart<I, T, D>(
        &self,
        caller: &Caller,
        upload: &Upload,
        parts: Vec<MultipartPart>,
        inspector: I,
        describe: D,
        lock: Option<volume::VersionLock>,
    ) -> Result<(FileMeta, T), ServiceError>
    where
        I: Inspect<Refused = std::convert::Infallible>,
        T: Send + 'static,
        D: FnOnce(I::Passed) -> (Option<String>, T) + Send + 'static,
    {
        let path = FilePath::parse(&upload.path)?;
        let declared = parts.iter().map(|part| part.size).sum();
        let options = StoreOptions {
            declared: Some(declared),
            content_type: Some(upload.content_type.clone()).filter(|given| !given.is_empty()),
            create_only: false,
            lock,
        };
        let stored = self
            .store_parts(
                caller, &path, options, &upload.id, parts, inspector, describe,
            )
            .await;
        if stored.is_ok()
            && let Err(error) = self.volume.remove_upload(None, &upload.id).await
        {
            tracing::warn!(id = %upload.id, %error, "could not remove a finished upload");
        }
        stored
    }

    /// Abort `caller`'s multipart upload `id` and free its parts.
    pub async fn abort_multipart(&self, caller: &Caller, id: &str) -> Result<(), ServiceError> {
        self.find_multipart(caller, id).await?;
        self.remove_upload(caller, id).await
    }
}
