//! Uploads in numbered parts (S3 multipart): parts arrive in any order,
//! over any number of requests and gateways, may be sent again, and are
//! chosen when the upload completes. What a part's number, ETag and
//! checksum mean is the protocol's; this keeps them.
//!
//! A part that comes in order (the next number after parts 1..k, all
//! appended so) is appended where the upload keeps its bytes and hashed
//! as it comes, like a tus PATCH (`volume::appending`); any other is kept
//! as a part of its own. A completion that chooses the appended parts,
//! then any others, takes up the hashes where the appended parts left
//! them and reads each other part once: parts sent in order are never
//! read or written again. Any other choice (or a whole-content checksum,
//! which must see every byte) streams the chosen parts through an
//! instance as one upload.

use axum::body::Body;
use bytes::Bytes;
use futures_util::Stream;

use storage_host::runtime::{AppendRequest, Describe, FileEnd, HashState, Upload as UploadBody};
use volume::appending::{APPENDED, Appending, Numbered};
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
        D: FnOnce(I::Passed) -> (String, String) + Send + Sync + 'static,
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
        if let Some(appending) = self.in_order(upload, number, &parts).await? {
            let part = Part {
                number,
                room,
                by_quota,
            };
            return self
                .append_part(caller, upload, part, appending, body, inspector, describe)
                .await;
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
        if !inspector.sees_bytes()
            && let Some(rest) = self.after_appended(upload, &parts).await?
        {
            let stored = self
                .complete_appended(caller, upload, &parts, rest, inspector, describe, lock)
                .await;
            if stored.is_ok() {
                self.forget_upload(&upload.id).await;
            }
            return stored;
        }
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
        if stored.is_ok() {
            self.forget_upload(&upload.id).await;
        }
        stored
    }

    async fn forget_upload(&self, id: &str) {
        if let Err(error) = self.volume.remove_upload(None, id).await {
            tracing::warn!(%id, %error, "could not remove a finished upload");
        }
    }

    /// Abort `caller`'s multipart upload `id` and free its parts.
    pub async fn abort_multipart(&self, caller: &Caller, id: &str) -> Result<(), ServiceError> {
        self.find_multipart(caller, id).await?;
        self.remove_upload(caller, id).await
    }

    /// `upload` taken up to append part `number` in order, if it comes in
    /// order: parts 1 to `number - 1` are there, all appended, and no
    /// other request holds the upload (else it is kept as a part of its
    /// own).
    async fn in_order(
        &self,
        upload: &Upload,
        number: u32,
        parts: &[MultipartPart],
    ) -> Result<Option<Appending>, ServiceError> {
        let appended = parts.iter().all(|part| part.name.starts_with(APPENDED));
        let numbered = parts
            .iter()
            .zip(1..)
            .all(|(part, expected)| part.number == expected);
        let bytes: u64 = parts.iter().map(|part| part.size).sum();
        if !(appended && numbered) || number as usize != parts.len() + 1 || bytes != upload.received
        {
            return Ok(None);
        }
        let resume = HashState::decode(&upload.hashed).unwrap_or_default();
        match self
            .volume
            .resume_upload(upload, resume.offset(), resume.outboard_len())
            .await
        {
            Ok(appending) => Ok(Some(appending)),
            // Another part is being appended, or came meanwhile.
            Err(volume::VolumeError::UploadBusy(_) | volume::VolumeError::UploadMovedOn(_)) => {
                Ok(None)
            }
            Err(error) => Err(ServiceError::from_volume(error, &upload.id)),
        }
    }

    /// Append `body` as part `part.number` of `upload`, in order, through
    /// an instance that takes up the upload's hashes; recorded with its
    /// ETag and checksum once `inspector` passed it.
    #[allow(clippy::too_many_arguments)]
    async fn append_part<S, E, I, D>(
        &self,
        caller: &Caller,
        upload: &Upload,
        part: Part,
        mut appending: Appending,
        body: S,
        inspector: I,
        describe: D,
    ) -> Result<MultipartPart, Refusal<I::Refused>>
    where
        S: Stream<Item = Result<Bytes, E>> + Send + Unpin + 'static,
        E: std::fmt::Display + 'static,
        I: Inspect,
        D: FnOnce(I::Passed) -> (String, String) + Send + Sync + 'static,
    {
        let (body, verdict) = inspect(body, inspector);
        let passed = verdict.clone();
        appending.log.numbering(Numbered {
            number: part.number,
            describe: Box::new(move || passed.take_passed().map(describe)),
        });
        let refusals = appending.log.refusals();
        let resume = HashState::decode(&upload.hashed).unwrap_or_default();
        let request = AppendRequest {
            store: self.store_request(upload),
            resume,
            ends: FileEnd::Later,
            head: std::mem::take(&mut appending.head),
            checkpoint_every: 0,
        };
        let body = UploadBody::resuming(
            Body::from_stream(body),
            part.room,
            appending,
            None,
            expires_after(self.upload_expiry),
        );
        let appended = self.run_append(caller, request, body).await?;
        if let Some(Err(refused)) = verdict.take() {
            return Err(Refusal::Refused(refused));
        }
        if let Some(refused) = refusals.take() {
            return Err(match refused {
                // Aborted meanwhile.
                volume::VolumeError::UploadMovedOn(_)
                    if self.find_multipart(caller, &upload.id).await.is_err() =>
                {
                    ServiceError::NotFound(format!("upload {}", upload.id))
                }
                // Another part came in order meanwhile: sent again, this
                // one is kept as a part of its own.
                volume::VolumeError::UploadMovedOn(_) => ServiceError::Unavailable(
                    "another part of the upload was stored meanwhile: send this one again".into(),
                ),
                other => ServiceError::from_volume(other, &upload.id),
            }
            .into());
        }
        match appended {
            Ok(_) => self
                .multipart_parts(upload)
                .await?
                .into_iter()
                .find(|kept| kept.number == part.number)
                .ok_or_else(|| ServiceError::BadRequest("the part was refused".into()).into()),
            Err(error) => Err(match ServiceError::from_handler(error, &upload.path) {
                ServiceError::BodyTooLarge { limit } if part.by_quota => {
                    ServiceError::QuotaExceeded(format!(
                        "the part is larger than the {limit} bytes left of your quota"
                    ))
                }
                other => other,
            }
            .into()),
        }
    }

    /// The parts `chosen` names after the appended ones it starts with, if
    /// it starts with every appended part, in order, and names no other
    /// appended part: what a completion reads (none when the parts came in
    /// order).
    async fn after_appended(
        &self,
        upload: &Upload,
        chosen: &[MultipartPart],
    ) -> Result<Option<Vec<MultipartPart>>, ServiceError> {
        let appended: Vec<MultipartPart> = self
            .multipart_parts(upload)
            .await?
            .into_iter()
            .filter(|part| part.name.starts_with(APPENDED))
            .collect();
        let bytes: u64 = appended.iter().map(|part| part.size).sum();
        let (first, rest) = chosen.split_at(appended.len().min(chosen.len()));
        let usable = !appended.is_empty()
            && bytes == upload.received
            && first == appended.as_slice()
            && rest.iter().all(|part| !part.name.starts_with(APPENDED));
        Ok(usable.then(|| rest.to_vec()))
    }

    /// Store `upload`'s file from its appended parts and then `rest`: the
    /// hashes taken up where the appended parts left them, `rest` read
    /// once through an instance, the file linked or composed from the
    /// bytes kept (see [`FileService::complete_multipart`]).
    #[allow(clippy::too_many_arguments)]
    async fn complete_appended<I, T, D>(
        &self,
        caller: &Caller,
        upload: &Upload,
        chosen: &[MultipartPart],
        rest: Vec<MultipartPart>,
        mut inspector: I,
        describe: D,
        lock: Option<volume::VersionLock>,
    ) -> Result<(FileMeta, T), ServiceError>
    where
        I: Inspect<Refused = std::convert::Infallible>,
        T: Send + 'static,
        D: FnOnce(I::Passed) -> (Option<String>, T) + Send + 'static,
    {
        let resume = HashState::decode(&upload.hashed).unwrap_or_default();
        let mut appending = self
            .volume
            .resume_upload(upload, resume.offset(), resume.outboard_len())
            .await
            .map_err(|error| match error {
                volume::VolumeError::UploadBusy(_) | volume::VolumeError::UploadMovedOn(_) => {
                    ServiceError::Unavailable(
                        "a part of the upload is being stored: complete it again in a moment"
                            .into(),
                    )
                }
                other => ServiceError::from_volume(other, &upload.id),
            })?;
        let total: u64 = chosen.iter().map(|part| part.size).sum();
        let Ok(passed) = inspector.ended();
        let (row, value) = describe(passed);
        let request = AppendRequest {
            store: self.store_request(upload),
            resume,
            ends: FileEnd::At(total),
            head: std::mem::take(&mut appending.head),
            checkpoint_every: 0,
        };
        let (bytes, fault) = self.parts_bytes(&upload.id, rest);
        let mut body = UploadBody::resuming(
            Body::from_stream(bytes),
            total - upload.received,
            appending,
            None,
            expires_after(self.upload_expiry),
        )
        .completing(upload.id.clone())
        .described(Describe(Box::new(move || row)));
        if let Some(lock) = lock {
            body = body.locked(lock);
        }
        let stored = match self.run_append(caller, request, body).await {
            Ok(Ok(Some(meta))) => Ok(meta),
            Ok(Ok(None)) => Err(ServiceError::Internal(
                "the parts did not make the whole upload".into(),
            )),
            Ok(Err(error)) => Err(ServiceError::from_handler(error, &upload.path)),
            Err(error) => Err(error),
        };
        fault.blame(stored).map(|meta| (meta, value))
    }
}

/// A part on its way: its number, the bytes it may bring, and whether
/// the quota set that bound.
struct Part {
    number: u32,
    room: u64,
    by_quota: bool,
}
