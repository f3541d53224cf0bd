//! tus's `concatenation`: partial uploads sent side by side, then joined
//! by a final one. A partial upload is appended like any tus upload (each
//! byte kept where it arrives, recorded at checkpoints, so a cut request
//! keeps what it brought), but its last byte stores no file. The final
//! upload names finished partial uploads in order: their bytes are read
//! once, in that order, through an instance that hashes them as one file,
//! appended where the final upload keeps its bytes, and stored from there.
//! So each byte is written twice in all, once by its partial and once by
//! the final: a file's hashes need its bytes in order, which parts sent
//! side by side never are.

use std::collections::VecDeque;

use axum::body::Body;
use bytes::Bytes;

use volume::appending::{Appending, Replay};
use volume::uploads::{Upload, UploadKind};
use volume::{FileMeta, FilePath};

use crate::ServiceError;
use auth::Caller;

use super::parts::PartsFault;
use super::uploads::new_upload_id;
use super::{AppendError, Appended, Chunk, FileService, StoreOptions};

impl FileService {
    /// Start a partial upload of `length` bytes (`Upload-Concat: partial`),
    /// keeping `metadata` to echo back.
    pub async fn begin_partial_upload(
        &self,
        caller: &Caller,
        length: Option<u64>,
        metadata: String,
    ) -> Result<Upload, ServiceError> {
        if length.is_some_and(|length| length > self.max_body) {
            return Err(ServiceError::BodyTooLarge {
                limit: self.max_body,
            });
        }
        // No file of its own: a name that is never stored, for its row.
        let path = FilePath::parse(&format!(".partial/{}", new_upload_id()))?;
        if let Some(room) = self.quota_room(caller, &path).await?
            && length.is_some_and(|length| length > room)
        {
            return Err(ServiceError::QuotaExceeded(format!(
                "the upload is larger than the {room} bytes left of your quota"
            )));
        }
        let options = StoreOptions::default();
        self.record_upload(
            UploadKind::TusPartial,
            caller,
            &path,
            length,
            &options,
            metadata,
        )
        .await
    }

    /// Join `caller`'s finished partial uploads `parts`, in that order,
    /// into their file `path` (`Upload-Concat: final`): the final upload,
    /// and the file it stored. The partial uploads go once it is stored;
    /// a final upload that fails goes (its partial uploads stay, to be
    /// joined again).
    pub async fn concatenate(
        &self,
        caller: &Caller,
        path: &FilePath,
        parts: &[String],
        options: &StoreOptions,
        metadata: String,
    ) -> Result<(Upload, FileMeta), ServiceError> {
        if parts.is_empty() {
            return Err(ServiceError::BadRequest(
                "Upload-Concat: final names no partial upload".into(),
            ));
        }
        let mut partials = Vec::new();
        for id in parts {
            let upload = self.find_upload(caller, id).await?;
            if upload.kind != UploadKind::TusPartial {
                return Err(ServiceError::BadRequest(format!(
                    "upload {id} is not a partial upload"
                )));
            }
            if upload.length != Some(upload.received) {
                return Err(ServiceError::BadRequest(format!(
                    "partial upload {id} is not finished: it has {} bytes",
                    upload.received
                )));
            }
            partials.push(upload);
        }
        let total = partials.iter().map(|upload| upload.received).sum();
        let joined = self
            .begin_upload(caller, path, Some(total), options, metadata)
            .await?;
        let stored = self.join(caller, &joined, &partials).await;
        match stored {
            Ok(meta) => {
                for partial in &partials {
                    if let Err(error) = self.volume.remove_upload(None, &partial.id).await {
                        tracing::warn!(id = %partial.id, %error, "could not remove a joined upload");
                    }
                }
                Ok((joined, meta))
            }
            Err(error) => {
                if let Err(removed) = self.volume.remove_upload(None, &joined.id).await {
                    tracing::warn!(id = %joined.id, error = %removed, "could not remove a failed final upload");
                }
                Err(error)
            }
        }
    }

    /// Send `partials`' bytes, in order, to the final upload `joined`.
    async fn join(
        &self,
        caller: &Caller,
        joined: &Upload,
        partials: &[Upload],
    ) -> Result<FileMeta, ServiceError> {
        // Each taken for this request (no PATCH may change it meanwhile),
        // read from its start.
        let mut held: Vec<Appending> = Vec::new();
        for partial in partials {
            let appending =
                self.volume
                    .resume_upload(partial, 0, 0)
                    .await
                    .map_err(|error| match error {
                        volume::VolumeError::UploadBusy(_)
                        | volume::VolumeError::UploadMovedOn(_) => ServiceError::Locked(format!(
                            "partial upload {} is being written by another request",
                            partial.id
                        )),
                        other => ServiceError::from_volume(other, &partial.id),
                    })?;
            held.push(appending);
        }
        let replays: VecDeque<Replay> = held
            .iter_mut()
            .map(|appending| std::mem::take(&mut appending.replay))
            .collect();
        let fault = PartsFault::default();
        let record = fault.clone();
        let bytes = futures_util::stream::unfold(replays, move |mut replays| {
            let record = record.clone();
            async move {
                loop {
                    let replay = replays.front_mut()?;
                    match replay.read(1 << 20).await {
                        Ok(chunk) if chunk.is_empty() => {
                            replays.pop_front();
                        }
                        Ok(chunk) => return Some((Ok(Bytes::from(chunk)), replays)),
                        Err(error) => {
                            let error = std::io::Error::other(error.to_string());
                            record.keep(&error);
                            replays.clear();
                            return Some((Err(error), replays));
                        }
                    }
                }
            }
        });
        let chunk = Chunk {
            offset: 0,
            length: None,
            body: Body::from_stream(bytes),
            checksum: None,
        };
        let appended = self.append_upload(caller, &joined.id, chunk).await;
        drop(held);
        let appended = match appended {
            Ok(appended) => Ok(appended),
            Err(AppendError::App(error)) => Err(error),
            Err(other) => Err(ServiceError::Internal(other.to_string())),
        };
        match fault.blame(appended)? {
            Appended::Complete(meta) => Ok(meta),
            Appended::Partial(_) => Err(ServiceError::Internal(
                "the partial uploads did not make the whole file".into(),
            )),
        }
    }
}
