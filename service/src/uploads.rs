//! Resumable uploads: a file sent in parts over time, over any number of
//! requests, gateways and restarts, until the last byte is in.
//!
//! [`FileService::begin_upload`] decides what can be decided up front (the
//! path, the size limit, what is left of the quota) and records the
//! upload; each [`FileService::append_upload`] sends its request's bytes
//! through an instance, which takes up the upload's hashes where the last
//! request left them, while the host appends the bytes where the upload
//! keeps them (`volume::appending`) and records them at checkpoints: a cut
//! request keeps what it brought. The request that brings the last byte
//! stores the file from the bytes kept, never copied or hashed again; then
//! the upload goes. tus is the adapter over this (S3 multipart's parts are
//! `parts.rs`'s).

use volume::uploads::{NewUpload, Upload, UploadKind};
use volume::{FileMeta, FilePath, now_ms};

use axum::body::Body;
use std::time::Duration;
use storage_host::runtime::{
    AppendRequest, FileEnd, HandlerError, HashState, StoreRequest, Upload as UploadBody,
};

use crate::ServiceError;
use auth::Caller;

use super::store::inspect;
use super::{Change, FileService, Inspect, LockTokens, StoreOptions, parent_key_of};

/// Bytes between two checkpoints of a request's bytes: at most this much
/// of a cut request is sent again.
pub(crate) const CHECKPOINT_EVERY: u64 = 4 << 20;

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
        self.record_upload(UploadKind::Tus, caller, path, length, options, metadata)
            .await
    }

    /// Record a new upload of `kind`.
    pub(super) async fn record_upload(
        &self,
        kind: UploadKind,
        caller: &Caller,
        path: &FilePath,
        length: Option<u64>,
        options: &StoreOptions,
        metadata: String,
    ) -> Result<Upload, ServiceError> {
        let new = NewUpload {
            kind,
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
            .filter(|upload| matches!(upload.kind, UploadKind::Tus | UploadKind::TusPartial))
            .ok_or_else(|| ServiceError::NotFound(format!("upload {id}")))
    }

    /// Add `chunk` to `caller`'s upload `id` (setting its length if it had
    /// none), durably; store the file if that was the last byte.
    ///
    /// The bytes go through an instance as they come, appended where the
    /// upload keeps them, its hashes taken up where the last request left
    /// them; what came is recorded every [`CHECKPOINT_EVERY`] bytes, at the
    /// end and when the body is cut, so a cut request keeps what it
    /// brought (but for one with a checksum: its bytes are kept only whole).
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
        let length = self.reconciled_length(&upload, length)?;
        let path = FilePath::parse(&upload.path).map_err(ServiceError::from)?;
        // Its file is written at the last byte: a lock on it (or its
        // folder) is told now, before a byte is read. A partial upload
        // writes no file.
        let partial = upload.kind == UploadKind::TusPartial;
        if !partial {
            let parent = parent_key_of(path.as_str());
            self.check_locks(
                caller.owner(),
                &LockTokens::default(),
                &[Change::One(path.as_str()), Change::One(parent)],
            )
            .await?;
        }
        // What the body may bring: up to the length, the size limit, and
        // what the quota leaves (the owner's unfinished uploads, this one's
        // bytes among them, count in it). A cheap refusal before a byte is
        // read: each checkpoint is weighed again, under the owner's lock, as
        // it is recorded (and the file as it is stored).
        let mut room = length.unwrap_or(self.max_body).saturating_sub(offset);
        let mut by_quota = false;
        if let Some(quota_room) = self.quota_room(caller, &path).await? {
            let left = quota_room.saturating_add(volume::ENTRY_OVERHEAD);
            if left < room {
                room = left;
                by_quota = true;
                if length.is_some_and(|length| length - offset > left) {
                    return Err(ServiceError::QuotaExceeded(format!(
                        "the upload's {} bytes left are more than the {left} bytes your quota leaves",
                        length.unwrap_or_default() - offset
                    ))
                    .into());
                }
            }
        }
        // Where the upload's hashes stand (an upload recorded before they
        // were kept is hashed again from its start).
        let resume = HashState::decode(&upload.hashed).unwrap_or_default();
        let mut appending = match self
            .volume
            .resume_upload(&upload, resume.offset(), resume.outboard_len())
            .await
        {
            Ok(appending) => appending,
            Err(volume::VolumeError::UploadMovedOn(_)) => {
                let now = self.find_upload(caller, id).await?;
                return Err(AppendError::OffsetMismatch(now.received));
            }
            Err(volume::VolumeError::UploadBusy(_)) => {
                return Err(ServiceError::Locked(format!(
                    "upload {id} is being written by another request: try again in a moment"
                ))
                .into());
            }
            Err(other) => return Err(ServiceError::from_volume(other, id).into()),
        };
        let refusals = appending.log.refusals();
        let head = std::mem::take(&mut appending.head);
        // A body with a checksum is kept only whole, once it is checked.
        let checkpoint_every = match (checksum.is_some(), length) {
            (true, _) => 0,
            // Each checkpoint a part: spread so that the rest fits in
            // what is left of the parts an upload may keep.
            (false, Some(length)) if !self.volume.appends_in_place() => {
                let parts_left = u64::from(volume::uploads::MAX_PARTS / 2);
                CHECKPOINT_EVERY.max((length - offset).div_ceil(parts_left))
            }
            (false, _) => CHECKPOINT_EVERY,
        };
        let (body, verdict) = inspect(body.into_data_stream(), ChecksumCheck::new(checksum));
        let body = UploadBody::resuming(
            Body::from_stream(body),
            room,
            appending,
            length.filter(|_| upload.length.is_none()),
            expires_after(self.upload_expiry),
        )
        .completing(id.to_owned());
        let request = AppendRequest {
            store: self.store_request(&upload),
            resume,
            ends: match length {
                Some(length) if !partial => FileEnd::At(length),
                _ => FileEnd::Later,
            },
            head,
            checkpoint_every,
        };
        let appended = self.run_append(caller, request, body).await?;
        if let Some(Err(())) = verdict.take() {
            return Err(AppendError::ChecksumMismatch);
        }
        if let Some(refused) = refusals.take() {
            return Err(match refused {
                volume::VolumeError::UploadMovedOn(_) => {
                    let now = self.find_upload(caller, id).await?;
                    AppendError::OffsetMismatch(now.received)
                }
                other => ServiceError::from_volume(other, id).into(),
            });
        }
        match appended {
            Ok(Some(meta)) => {
                self.finish_upload(id).await;
                Ok(Appended::Complete(meta))
            }
            Ok(None) => Ok(Appended::Partial(self.find_upload(caller, id).await?)),
            Err(error) => {
                // The file's store refused it for good (a 4xx: the path
                // taken for a create-only upload): that ends the upload.
                // Anything else (a cut body, no room now, a 5xx) leaves it
                // where its last checkpoint stands.
                let storing = matches!(error, HandlerError::Volume(_));
                let error = match ServiceError::from_handler(error, path.as_str()) {
                    ServiceError::BodyTooLarge { limit } if by_quota => {
                        ServiceError::QuotaExceeded(format!(
                            "the request is larger than the {limit} bytes left of your quota"
                        ))
                    }
                    other => other,
                };
                if storing && is_final(&error) {
                    self.finish_upload(id).await;
                }
                Err(error.into())
            }
        }
    }

    /// What storing `upload`'s file asks of an instance.
    pub(super) fn store_request(&self, upload: &Upload) -> StoreRequest {
        StoreRequest {
            path: upload.path.clone(),
            content_type: Some(upload.content_type.clone()).filter(|given| !given.is_empty()),
            create_only: upload.create_only,
            window: self.body_window,
        }
    }

    /// Run one request's share of a resumable upload, `request` over
    /// `body`, in an instance for `caller` (once one and its memory are
    /// free).
    pub(super) async fn run_append(
        &self,
        caller: &Caller,
        request: AppendRequest,
        body: UploadBody,
    ) -> Result<Result<Option<FileMeta>, HandlerError>, ServiceError> {
        let lease = self
            .pool
            .lease(self.body_size(None))
            .await
            .map_err(ServiceError::from)?;
        let owner = caller.owner();
        lease
            .run(move |instance| Box::pin(instance.append(owner, request, body)))
            .await
            .map_err(ServiceError::from)
    }

    /// The upload's length once the request's `asked` is taken into
    /// account: refused if it contradicts the one known, is less than what
    /// was sent, or is over the size limit.
    fn reconciled_length(
        &self,
        upload: &Upload,
        asked: Option<u64>,
    ) -> Result<Option<u64>, ServiceError> {
        let offset = upload.received;
        match (upload.length, asked) {
            (Some(known), Some(asked)) if known != asked => Err(ServiceError::BadRequest(format!(
                "the upload's length is {known} bytes, not {asked}"
            ))),
            (Some(known), _) => Ok(Some(known)),
            (None, Some(asked)) if asked < offset => Err(ServiceError::BadRequest(format!(
                "a length of {asked} bytes is less than the {offset} bytes sent"
            ))),
            (None, Some(asked)) if asked > self.max_body => Err(ServiceError::BodyTooLarge {
                limit: self.max_body,
            }),
            (None, asked) => Ok(asked),
        }
    }

    /// Forget finished upload `id` and its bytes (the file, if stored,
    /// keeps its own name for them).
    async fn finish_upload(&self, id: &str) {
        if let Err(error) = self.volume.remove_upload(None, id).await {
            // The collection removes it when it expires.
            tracing::warn!(%id, %error, "could not remove a finished upload");
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
}

/// The check of a request's bytes against the checksum the client sent
/// with them (tus's `Upload-Checksum`), as they stream: a mismatch fails
/// the body at its end, so none of it is kept.
enum ChecksumCheck {
    None,
    Sha1(sha1::Sha1, Vec<u8>),
    Sha256(sha2::Sha256, Vec<u8>),
}

impl ChecksumCheck {
    fn new(checksum: Option<Checksum>) -> Self {
        use sha2::Digest as _;
        match checksum {
            None => Self::None,
            Some(Checksum::Sha1(sent)) => Self::Sha1(sha1::Sha1::new(), sent),
            Some(Checksum::Sha256(sent)) => Self::Sha256(sha2::Sha256::new(), sent),
        }
    }
}

impl Inspect for ChecksumCheck {
    type Passed = ();
    type Refused = ();

    fn chunk(&mut self, bytes: &[u8]) {
        use sha2::Digest as _;
        match self {
            Self::None => {}
            Self::Sha1(hasher, _) => hasher.update(bytes),
            Self::Sha256(hasher, _) => hasher.update(bytes),
        }
    }

    fn failed(&mut self, _: &str) -> Option<()> {
        None
    }

    fn ended(&mut self) -> Result<(), ()> {
        use sha2::Digest as _;
        let matches = match std::mem::replace(self, Self::None) {
            Self::None => true,
            Self::Sha1(hasher, sent) => hasher.finalize().as_slice() == sent,
            Self::Sha256(hasher, sent) => hasher.finalize().as_slice() == sent,
        };
        if matches { Ok(()) } else { Err(()) }
    }
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
