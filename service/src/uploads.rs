//! Resumable uploads: a file sent in parts over time, over any number of
//! requests, gateways and restarts, until the last byte is in.
//!
//! [`FileService::begin_upload`] decides what can be decided up front (the
//! path, the size limit, what is left of the quota) and records the
//! upload; each [`FileService::append_upload`] stages its request's bytes
//! (checked against a checksum if the client sent one) and stores them as a
//! durable part before it answers. When the parts reach the upload's
//! length, the whole is sent through an instance from the parts, like any
//! upload ([`super::UploadSession`]): hashed, verified, stored atomically
//! at its path; then the parts go. Protocols (tus today, S3 multipart
//! next) are adapters over this.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::body::Body;
use bytes::Bytes;
use futures_util::StreamExt as _;
use sha2::Digest as _;

use volume::uploads::{NewUpload, Upload, UploadKind, UploadPart};
use volume::{FileMeta, FilePath, now_ms};

use crate::ServiceError;
use auth::Caller;

use super::{FileService, Inspect, LockTokens, Refusal, StoreOptions};

/// A checksum the client sent for a request's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checksum {
    Sha1(Vec<u8>),
    Sha256(Vec<u8>),
}

/// A request's bytes for an upload: where they go, and what the client
/// said of them.
#[derive(Debug)]
pub struct Chunk {
    /// Where they start: the upload's offset as the client knows it.
    pub offset: u64,
    /// The upload's length, if the client says it now (it was deferred).
    pub length: Option<u64>,
    pub body: Body,
    pub checksum: Option<Checksum>,
}

/// What became of an upload after a request's bytes.
#[derive(Debug)]
pub enum Appended {
    /// Still waiting for bytes.
    Partial(Upload),
    /// The last byte came: the file is stored.
    Complete(FileMeta),
}

/// Why a request's bytes were not added.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// The upload is at another offset than the request said.
    #[error("the upload is at byte {0}")]
    OffsetMismatch(u64),
    /// The bytes do not match the checksum the client sent.
    #[error("the bytes do not match the checksum sent with them")]
    ChecksumMismatch,
    #[error(transparent)]
    App(#[from] ServiceError),
}

impl FileService {
    /// Start a resumable upload of `caller`'s file `path`, of `length`
    /// bytes if known, expiring after `--upload-expiry` without progress.
    pub async fn begin_upload(
        &self,
        caller: &Caller,
        path: &FilePath,
        length: Option<u64>,
        options: &StoreOptions,
        metadata: String,
    ) -> Result<Upload, ServiceError> {
        // The same checks as a one-request upload of a declared length.
        let declared = StoreOptions {
            declared: length,
            ..options.clone()
        };
        self.upload(caller, path, declared, &LockTokens::default())
            .await?;
        if options.create_only && self.volume.stat(caller.owner(), path).await.is_ok() {
            // Said now rather than after every byte is sent.
            return Err(ServiceError::AlreadyExists(path.as_str().to_owned()));
        }
        let new = NewUpload {
            kind: UploadKind::Tus,
            owner: caller.owner(),
            path: path.clone(),
            length,
            content_type: options.content_type.clone().unwrap_or_default(),
            create_only: options.create_only,
            metadata,
            expires_ms: expires_after(self.upload_expiry),
        };
        let id = new_upload_id();
        self.volume
            .create_upload(&id, &new)
            .await
            .map_err(|error| ServiceError::from_volume(error, path.as_str()))?
            .ok_or_else(|| {
                ServiceError::Forbidden(format!(
                    "you have {} unfinished uploads: finish or cancel one first",
                    volume::uploads::MAX_UPLOADS_PER_OWNER
                ))
            })
    }

    /// `caller`'s unfinished upload `id`.
    pub async fn find_upload(&self, caller: &Caller, id: &str) -> Result<Upload, ServiceError> {
        self.volume
            .find_upload(caller.owner(), id)
            .await
            .map_err(|error| ServiceError::from_volume(error, id))?
            .filter(|upload| upload.kind == UploadKind::Tus)
            .ok_or_else(|| ServiceError::NotFound(format!("upload {id}")))
    }

    /// Add `chunk` to `caller`'s upload `id` (setting its length if it had
    /// none), durably; store the file if that was the last byte.
    pub async fn append_upload(
        &self,
        caller: &Caller,
        id: &str,
        chunk: Chunk,
    ) -> Result<Appended, AppendError> {
        let Chunk {
            offset,
            length,
            body,
            checksum,
        } = chunk;
        let upload = self.find_upload(caller, id).await?;
        if upload.received != offset {
            return Err(AppendError::OffsetMismatch(upload.received));
        }
        let length = match (upload.length, length) {
            (Some(known), Some(asked)) if known != asked => {
                return Err(ServiceError::BadRequest(format!(
                    "the upload's length is {known} bytes, not {asked}"
                ))
                .into());
            }
            (Some(known), _) => Some(known),
            (None, Some(asked)) => {
                if asked < offset {
                    return Err(ServiceError::BadRequest(format!(
                        "a length of {asked} bytes is less than the {offset} bytes sent"
                    ))
                    .into());
                }
                if asked > self.max_body {
                    return Err(ServiceError::BodyTooLarge {
                        limit: self.max_body,
                    }
                    .into());
                }
                Some(asked)
            }
            (None, None) => None,
        };
        // What the body may bring: up to the length, the size limit, and
        // what the quota leaves (the owner's unfinished uploads, this one's
        // parts among them, count in it). A cheap refusal before a byte is
        // read: the part is weighed again, under the owner's lock, as it is
        // recorded (or as the file is stored).
        let mut room = length.unwrap_or(self.max_body).saturating_sub(offset);
        let path = FilePath::parse(&upload.path).map_err(ServiceError::from)?;
        if let Some(quota_room) = self.quota_room(caller, &path).await? {
            // This upload's parts become one file: their entries give way
            // to its one.
            let parts = self
                .volume
                .upload_part_count(id)
                .await
                .map_err(|error| ServiceError::from_volume(error, id))?;
            let left = quota_room.saturating_add(parts.saturating_mul(volume::ENTRY_OVERHEAD));
            if left < room {
                room = left;
                if length.is_some_and(|length| length - offset > left) {
                    return Err(ServiceError::QuotaExceeded(format!(
                        "the upload's {} bytes left are more than the {left} bytes your quota leaves",
                        length.unwrap_or_default() - offset
                    ))
                    .into());
                }
            }
        }
        let staged = self.stage_part(body, room, checksum).await?;
        if length == Some(offset + staged.len()) {
            // The last bytes: kept as a part, but the upload stands where
            // this request began until the file is stored, so a request cut
            // off (or failed) now is sent again, never taken for done.
            let last = self
                .volume
                .store_upload_part(id, offset, staged)
                .await
                .map_err(|error| ServiceError::from_volume(error, id))?;
            let upload = Upload { length, ..upload };
            return Ok(Appended::Complete(
                self.complete_upload(caller, upload, last).await?,
            ));
        }
        let appended = self
            .volume
            .append_upload(
                caller.owner(),
                id,
                offset,
                staged,
                length.filter(|_| upload.length.is_none()),
                expires_after(self.upload_expiry),
            )
            .await
            .map_err(|error| ServiceError::from_volume(error, id))?;
        match appended {
            Some(upload) => Ok(Appended::Partial(upload)),
            None => {
                // Another request took it further (or it went) meanwhile.
                let now = self.find_upload(caller, id).await?;
                Err(AppendError::OffsetMismatch(now.received))
            }
        }
    }

    /// Cancel `caller`'s resumable upload `id` and free its bytes.
    pub async fn cancel_upload(&self, caller: &Caller, id: &str) -> Result<(), ServiceError> {
        // Only a tus upload: a multipart one is S3's to abort.
        self.find_upload(caller, id).await?;
        self.remove_upload(caller, id).await
    }

    /// Forget `caller`'s upload `id`, of any kind, and free its bytes.
    pub(super) async fn remove_upload(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<(), ServiceError> {
        let removed = self
            .volume
            .remove_upload(Some(caller.owner()), id)
            .await
            .map_err(|error| ServiceError::from_volume(error, id))?;
        if removed {
            Ok(())
        } else {
            Err(ServiceError::NotFound(format!("upload {id}")))
        }
    }

    /// Unfinished uploads that have not expired, on every gateway of this
    /// store.
    pub async fn uploads_in_progress(&self) -> u64 {
        self.volume.uploads_in_progress().await.unwrap_or_default()
    }

    /// Read `body` (at most `room` bytes) into a staged part, at the pace
    /// every body must keep, checking it against `checksum`.
    pub(super) async fn stage_part(
        &self,
        body: Body,
        room: u64,
        checksum: Option<Checksum>,
    ) -> Result<volume::StagedBlob, AppendError> {
        enum Hasher {
            Sha1(sha1::Sha1),
            Sha256(sha2::Sha256),
        }
        let mut hasher = checksum.as_ref().map(|checksum| match checksum {
            Checksum::Sha1(_) => Hasher::Sha1(sha1::Sha1::new()),
            Checksum::Sha256(_) => Hasher::Sha256(sha2::Sha256::new()),
        });
        let pace = self.pace();
        let started = Instant::now();
        let mut staged = self.volume.stage();
        // Frames are small; the staged file is written a chunk at a time.
        let mut pending = Vec::with_capacity(STAGE_CHUNK);
        let mut received = 0;
        let mut frames = body.into_data_stream();
        loop {
            let (deadline, slowness) = pace.deadline(started, received);
            let frame = match tokio::time::timeout_at(deadline.into(), frames.next()).await {
                Err(_) => {
                    return Err(ServiceError::RequestTimeout(slowness.describe("sent")).into());
                }
                Ok(None) => break,
                Ok(Some(Err(error))) => {
                    return Err(ServiceError::BadRequest(format!(
                        "the body could not be read: {error}"
                    ))
                    .into());
                }
                Ok(Some(Ok(frame))) => frame,
            };
            received += frame.len() as u64;
            if received > room {
                return Err(ServiceError::BodyTooLarge { limit: room }.into());
            }
            match &mut hasher {
                Some(Hasher::Sha1(hasher)) => hasher.update(&frame),
                Some(Hasher::Sha256(hasher)) => hasher.update(&frame),
                None => {}
            }
            pending.extend_from_slice(&frame);
            if pending.len() >= STAGE_CHUNK {
                staged
                    .write(&pending)
                    .await
                    .map_err(|error| ServiceError::from_volume(error, "an upload's part"))?;
                pending.clear();
            }
        }
        staged
            .write(&pending)
            .await
            .map_err(|error| ServiceError::from_volume(error, "an upload's part"))?;
        let matches = match (checksum, hasher) {
            (Some(Checksum::Sha1(sent)), Some(Hasher::Sha1(hasher))) => {
                hasher.finalize().as_slice() == sent
            }
            (Some(Checksum::Sha256(sent)), Some(Hasher::Sha256(hasher))) => {
                hasher.finalize().as_slice() == sent
            }
            _ => true,
        };
        if !matches {
            return Err(AppendError::ChecksumMismatch);
        }
        Ok(staged)
    }

    /// Send the finished `upload`'s recorded parts and `last` through an
    /// instance as one upload of its file; then forget the upload. A
    /// refusal that no retry can change (a 4xx: the path taken for a
    /// create-only upload, a bad path) ends the upload too;
    /// anything else (no memory or instance free now, a lock, a 5xx)
    /// leaves it where the last request began, to be sent again.
    async fn complete_upload(
        &self,
        caller: &Caller,
        upload: Upload,
        last: UploadPart,
    ) -> Result<FileMeta, ServiceError> {
        let path = FilePath::parse(&upload.path)?;
        let options = StoreOptions {
            declared: upload.length,
            content_type: Some(upload.content_type.clone()).filter(|given| !given.is_empty()),
            create_only: upload.create_only,
            lock: None,
        };
        let mut parts = self
            .volume
            .upload_parts(&upload.id)
            .await
            .map_err(|error| ServiceError::from_volume(error, &upload.id))?;
        if last.size > 0 {
            parts.push(last.clone());
        }
        let stored = self
            .store_parts(caller, &path, options, &upload.id, parts, (), |()| {
                (None, ())
            })
            .await
            .map(|(meta, ())| meta);
        let finished = match &stored {
            Ok(_) => true,
            Err(error) => is_final(error),
        };
        if finished {
            if let Err(error) = self.volume.remove_upload(None, &upload.id).await {
                // The collection removes it when it expires.
                tracing::warn!(id = %upload.id, %error, "could not remove a finished upload");
            }
        } else if let Err(error) = self.volume.discard_upload_part(&upload.id, &last).await {
            // The upload's removal (expiry, termination) removes it.
            tracing::warn!(id = %upload.id, %error, "could not remove an unrecorded last part");
        }
        stored
    }
}

impl FileService {
    /// Store upload `id`'s `parts`, one after the other, at `path` through
    /// an instance as one upload, `inspector` seeing every byte on its way
    /// and `describe` making of what it saw what the file's row keeps, and
    /// what it hands back here. A part that cannot be read back is the
    /// server's fault ([`PartsFault`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn store_parts<P, I, T, D>(
        &self,
        caller: &Caller,
        path: &FilePath,
        options: StoreOptions,
        id: &str,
        parts: Vec<P>,
        inspector: I,
        describe: D,
    ) -> Result<(FileMeta, T), ServiceError>
    where
        P: StoredPart,
        I: Inspect<Refused = std::convert::Infallible>,
        T: Send + 'static,
        D: FnOnce(I::Passed) -> (Option<String>, T) + Send + 'static,
    {
        let (bytes, fault) = self.parts_bytes(id, parts);
        fault.blame(
            match self
                .upload_completing(caller, path, options, &LockTokens::default(), Some(id))
                .await
            {
                Ok(session) => session
                    .send_inspected(Box::pin(bytes), inspector, describe)
                    .await
                    .map_err(Refusal::failure),
                Err(error) => Err(error),
            },
        )
    }

    /// The bytes of upload `id`'s `parts`, one after the other, and what
    /// keeps a failure to read them.
    fn parts_bytes<P: StoredPart>(
        &self,
        id: &str,
        parts: Vec<P>,
    ) -> (
        impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
        PartsFault,
    ) {
        let volume = self.volume.clone();
        let id = id.to_owned();
        let fault = PartsFault::default();
        let record = fault.clone();
        let bytes = futures_util::stream::iter(parts)
            .then(move |part| {
                let (volume, id) = (volume.clone(), id.clone());
                async move { part.open(&volume, &id).await }
            })
            .flat_map(|opened| match opened {
                Ok(reader) => part_bytes(reader).left_stream(),
                Err(error) => futures_util::stream::once(async move {
                    Err(std::io::Error::other(error.to_string()))
                })
                .right_stream(),
            })
            .inspect(move |chunk| {
                if let Err(error) = chunk {
                    record.keep(error);
                }
            });
        (bytes, fault)
    }
}

/// Why an upload's own parts could not be read, once they could not.
/// The parts are the server's to keep: a failure to read them is the
/// server's (a 5xx, the upload kept), whatever the upload session made of
/// its body ending early (a client's cut body is a 4xx).
#[derive(Debug, Clone, Default)]
struct PartsFault(Arc<Mutex<Option<String>>>);

impl PartsFault {
    fn keep(&self, error: &std::io::Error) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.get_or_insert_with(|| error.to_string());
    }

    /// `stored`, unless a part could not be read: then the server's error.
    fn blame<T>(&self, stored: Result<T, ServiceError>) -> Result<T, ServiceError> {
        match self.0.lock().unwrap_or_else(PoisonError::into_inner).take() {
            Some(error) => Err(ServiceError::Internal(format!(
                "a part of the upload could not be read: {error}"
            ))),
            None => stored,
        }
    }
}

/// A part of an upload kept in the blob store.
pub(super) trait StoredPart: Send + 'static {
    /// The part of upload `id`, opened for reading.
    fn open(
        self,
        volume: &volume::Volume,
        id: &str,
    ) -> impl Future<Output = Result<volume::BlobReader, volume::VolumeError>> + Send;
}

impl StoredPart for UploadPart {
    async fn open(
        self,
        volume: &volume::Volume,
        id: &str,
    ) -> Result<volume::BlobReader, volume::VolumeError> {
        volume.open_upload_part(id, &self).await
    }
}

impl StoredPart for volume::uploads::MultipartPart {
    async fn open(
        self,
        volume: &volume::Volume,
        id: &str,
    ) -> Result<volume::BlobReader, volume::VolumeError> {
        volume.open_multipart_part(id, &self).await
    }
}

/// Bytes staged at a time as a request's frames arrive, and read at a time
/// from a part.
const STAGE_CHUNK: usize = 1 << 20;

/// The bytes of one part, a chunk at a time.
fn part_bytes(
    reader: volume::BlobReader,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    futures_util::stream::try_unfold(reader, |mut reader| async move {
        let chunk = reader
            .read(STAGE_CHUNK)
            .await
            .map_err(|error| std::io::Error::other(error.to_string()))?;
        Ok((!chunk.is_empty()).then(|| (Bytes::from(chunk), reader)))
    })
}

/// Whether a failure to store a finished upload's file ends the upload: a
/// refusal no retry can change (a 4xx: the path taken for a create-only
/// upload, a bad path), not one that may pass later (no memory
/// or instance free now, a lock, a timeout, a 5xx).
fn is_final(error: &ServiceError) -> bool {
    match error {
        ServiceError::BadPath(_)
        | ServiceError::BadRequest(_)
        | ServiceError::NotFound(_)
        | ServiceError::NoSuchVersion { .. }
        | ServiceError::DeleteMarker { .. }
        | ServiceError::AlreadyExists(_)
        | ServiceError::BodyTooLarge { .. }
        | ServiceError::InstanceMemory { .. }
        | ServiceError::OverBudget(_)
        | ServiceError::RangeNotSatisfiable { .. }
        | ServiceError::Forbidden(_)
        | ServiceError::NoObjectLock(_)
        | ServiceError::InvalidBucketState(_)
        | ServiceError::PreconditionFailed(_) => true,
        ServiceError::Unavailable(_)
        | ServiceError::NoSpace
        | ServiceError::QuotaExceeded(_)
        | ServiceError::RequestTimeout(_)
        | ServiceError::Locked(_)
        | ServiceError::ObjectLocked(_)
        | ServiceError::Integrity(_)
        | ServiceError::Internal(_) => false,
    }
}

/// When an upload touched now expires.
pub(super) fn expires_after(expiry: Duration) -> i64 {
    now_ms().saturating_add(i64::try_from(expiry.as_millis()).unwrap_or(i64::MAX))
}

/// A new upload's id: 128 random bits, URL-safe.
pub(super) fn new_upload_id() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
