//! Parts kept in the blob store on their way to becoming one file (S3
//! multipart's): a request's bytes staged as a part at the body pace, and
//! the parts streamed through an instance as one upload at completion, a
//! part that cannot be read back being the server's fault ([`PartsFault`]).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use axum::body::Body;
use bytes::Bytes;
use futures_util::StreamExt as _;

use volume::{FileMeta, FilePath};

use crate::ServiceError;
use auth::Caller;

use super::{FileService, Inspect, LockTokens, Refusal, StoreOptions};

impl FileService {
    /// Read `body` (at most `room` bytes) into a staged part, at the pace
    /// every body must keep.
    pub(super) async fn stage_part(
        &self,
        body: Body,
        room: u64,
    ) -> Result<volume::StagedBlob, ServiceError> {
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
                    return Err(ServiceError::RequestTimeout(slowness.describe("sent")));
                }
                Ok(None) => break,
                Ok(Some(Err(error))) => {
                    return Err(ServiceError::BadRequest(format!(
                        "the body could not be read: {error}"
                    )));
                }
                Ok(Some(Ok(frame))) => frame,
            };
            received += frame.len() as u64;
            if received > room {
                return Err(ServiceError::BodyTooLarge { limit: room });
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
        Ok(staged)
    }

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
    pub(super) fn parts_bytes<P: StoredPart>(
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
pub(super) struct PartsFault(Arc<Mutex<Option<String>>>);

impl PartsFault {
    pub(super) fn keep(&self, error: &std::io::Error) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.get_or_insert_with(|| error.to_string());
    }

    /// `stored`, unless a part could not be read: then the server's error.
    pub(super) fn blame<T>(&self, stored: Result<T, ServiceError>) -> Result<T, ServiceError> {
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
