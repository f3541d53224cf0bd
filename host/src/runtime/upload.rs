//! An upload's body as the host keeps it: read from the client's socket
//! only as the guest asks for bytes, staged in the volume on its way in
//! (so `volume.put` stores bytes the host already has), with what a
//! protocol keeps of it ([`Describe`]) and, for one request's share of a
//! resumable upload, what the upload kept, fed again first, and its
//! record ([`Resumable`]).

use std::time::Instant;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt as _;

use volume::{StagedBlob, VolumeError};

use super::bindings::wasm_storage::storage::body::BodyError;
use super::stream::Pace;

/// An upload's body, read from the client only as the guest asks for it.
#[derive(Debug)]
pub struct Upload {
    pub(super) body: axum::body::BodyDataStream,
    /// What a protocol keeps in the file's row beside the content, made
    /// once the body is read to its end (S3: the MD5 and checksums),
    /// written in the transaction that stores the file.
    pub(super) describe: Option<Describe>,
    /// Where each chunk goes on its way to the guest; taken by `volume.put`.
    pub(super) staged: Option<StagedBlob>,
    /// The upload whose parts this body is (their bytes count against the
    /// quota until the file is stored, not beside it).
    pub(super) completes: Option<String>,
    /// The object lock the write asks for (S3's headers).
    pub(super) lock: Option<volume::VersionLock>,
    /// Most bytes the body may have.
    pub(super) limit: u64,
    pub(super) received: u64,
    /// Read from the socket, not yet given to the guest.
    pub(super) pending: Bytes,
    pub(super) ended: bool,
    /// When the guest first asked for bytes.
    pub(super) started: Option<Instant>,
    /// A resumable upload's request: what it kept, fed again first, and
    /// its record.
    pub(super) resumable: Option<Resumable>,
}

/// One request's share of a resumable upload, as the host keeps it.
#[derive(Debug)]
pub struct Resumable {
    /// The bytes the upload kept past where its hashes stand.
    pub replay: volume::appending::Replay,
    pub log: volume::appending::UploadLog,
    /// The upload's length, recorded with the first checkpoint if it had
    /// none.
    pub length: Option<u64>,
    /// When the upload expires once this request records a checkpoint.
    pub expires_ms: i64,
}

/// Makes what S3 keeps of an object, once its body was read to its end.
pub struct Describe(pub Box<dyn FnOnce() -> Option<String> + Send>);

impl std::fmt::Debug for Describe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Describe(..)")
    }
}

impl Upload {
    /// Keep what `describe` makes (once the body has ended) in the file's
    /// row.
    pub fn described(mut self, describe: Describe) -> Self {
        self.describe = Some(describe);
        self
    }

    /// The body is the parts of upload `id`, completing it.
    pub fn completing(mut self, id: String) -> Self {
        self.completes = Some(id);
        self
    }

    /// The body is one request's share of a resumable upload, staged in
    /// `appending`'s place for it.
    pub fn resuming(
        body: axum::body::Body,
        limit: u64,
        appending: volume::appending::Appending,
        length: Option<u64>,
        expires_ms: i64,
    ) -> Self {
        let volume::appending::Appending {
            staged,
            replay,
            log,
            ..
        } = appending;
        let mut upload = Self::new(body, limit, staged);
        upload.resumable = Some(Resumable {
            replay,
            log,
            length,
            expires_ms,
        });
        upload
    }

    /// The file is stored under `lock` (else its bucket's default).
    pub fn locked(mut self, lock: volume::VersionLock) -> Self {
        self.lock = Some(lock);
        self
    }

    /// `body` as the client sends it, at most `limit` bytes, staged in
    /// `staged` as it passes.
    pub fn new(body: axum::body::Body, limit: u64, staged: StagedBlob) -> Self {
        Self {
            body: body.into_data_stream(),
            describe: None,
            staged: Some(staged),
            completes: None,
            lock: None,
            limit,
            received: 0,
            pending: Bytes::new(),
            ended: false,
            started: None,
            resumable: None,
        }
    }

    /// Up to `max` bytes: what a resumable upload kept first, then as many
    /// frames as it takes, or what is left.
    pub(super) async fn read(&mut self, max: usize, pace: Pace) -> Result<Vec<u8>, BodyError> {
        if let Some(resumable) = self
            .resumable
            .as_mut()
            .filter(|resumable| !resumable.replay.is_empty())
        {
            return resumable
                .replay
                .read(max)
                .await
                .map_err(internal_body_error);
        }
        let started = *self.started.get_or_insert_with(Instant::now);
        let mut chunk = BytesMut::new();
        while chunk.len() < max {
            if self.pending.is_empty() {
                if self.ended {
                    break;
                }
                let moved = self.received + chunk.len() as u64;
                let (deadline, slowness) = pace.deadline(started, moved);
                match tokio::time::timeout_at(deadline.into(), self.body.next()).await {
                    Err(_) => return Err(BodyError::TimedOut(slowness.describe("sent"))),
                    Ok(None) => {
                        self.ended = true;
                        continue;
                    }
                    Ok(Some(Err(error))) => {
                        return Err(BodyError::Aborted(format!(
                            "could not read the request body: {error}"
                        )));
                    }
                    Ok(Some(Ok(frame))) => self.pending = frame,
                }
            }
            let take = self.pending.len().min(max - chunk.len());
            chunk.extend_from_slice(&self.pending.split_to(take));
        }
        self.received += chunk.len() as u64;
        if self.received > self.limit {
            return Err(BodyError::TooLarge(self.limit));
        }
        self.staged()?.write(&chunk).await.map_err(staging_error)?;
        Ok(chunk.into())
    }

    /// Where the upload's bytes (and its outboard) are staged until stored.
    pub(super) fn staged(&mut self) -> Result<&mut StagedBlob, BodyError> {
        self.staged
            .as_mut()
            .ok_or_else(|| BodyError::Internal("the upload was already stored".into()))
    }
}

/// A failure to stage an upload's bytes, as the guest sees it.
pub(super) fn staging_error(error: VolumeError) -> BodyError {
    match error {
        VolumeError::NoSpace => BodyError::NoSpace,
        other => internal_body_error(other),
    }
}

/// A body transfer that failed on the host's side, as the guest sees it
/// (the detail logged).
pub(super) fn internal_body_error(error: impl std::fmt::Display) -> BodyError {
    tracing::error!(%error, "body transfer failed");
    BodyError::Internal(error.to_string())
}
