//! The data of every store, and the host side of the `volume` and `body`
//! interfaces.
//!
//! Bodies move a chunk at a time. An [`Upload`] reads the client's socket
//! only when the guest asks for bytes, and stages each chunk in the volume on
//! its way in, so `volume.put` stores bytes the host already has: a body
//! crosses into the guest once and never back. [`Content`] reads a blob and
//! [`ResponseSink`] writes the response a chunk at a time. The host never
//! holds more than a chunk or two of any body.

use std::sync::Arc;

use bytes::Bytes;
use wasmtime::component::{Resource, ResourceTable, ResourceTableError};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use volume::{BlobReader, FilePath, Owner, Prefix, Volume, VolumeError};

use super::bindings;
use super::bindings::wasm_storage::storage::body::{BodyError, HashState};
use super::bindings::wasm_storage::storage::types::{self as wit, FileMeta, Listing};
use super::limiter::MemoryLimiter;
use super::upload::{Upload, internal_body_error, staging_error};

/// The data of every store.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: MemoryLimiter,
    volume: Arc<Volume>,
    /// The tree this call's volume operations reach: set by every call
    /// into the guest and cleared after it, so a guest can never name
    /// another owner's files (and none outside a call).
    owner: Option<Owner>,
    /// How slow a client may move a body.
    pace: Pace,
    /// Body bytes moved so far, and the count at the last deadline check:
    /// a request that moves bytes is making progress.
    progress: u64,
    progress_seen: u64,
    /// A body call just gave up on a slow client: the guest gets a full
    /// deadline to answer that, rather than racing the same timeout.
    gave_up_on_client: bool,
    /// The row of the file this call reads, as the route read it a moment
    /// before (to size the call's memory reservation): `stat` and `open`
    /// of that path start from it instead of asking the index again.
    looked_up: Option<volume::FileMeta>,
}

impl std::fmt::Debug for HostState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostState")
            .field("limiter", &self.limiter)
            .finish_non_exhaustive()
    }
}

impl HostState {
    pub(super) fn new(volume: Arc<Volume>, limiter: MemoryLimiter, pace: Pace) -> Self {
        Self {
            wasi: WasiCtx::builder().inherit_stderr().build(),
            table: ResourceTable::new(),
            limiter,
            volume,
            owner: None,
            pace,
            progress: 0,
            progress_seen: 0,
            gave_up_on_client: false,
            looked_up: None,
        }
    }

    /// Begin a call for `owner`: scope its volume operations to that tree,
    /// and forget what the previous call left of its progress.
    pub(super) fn begin_call(&mut self, owner: Option<Owner>) {
        self.owner = owner;
        self.progress_seen = self.progress;
        self.gave_up_on_client = false;
        self.looked_up = None;
    }

    /// The row of the file the call in progress reads, read by the caller
    /// for the call's owner a moment ago.
    pub(super) fn looked_up(&mut self, meta: volume::FileMeta) {
        self.looked_up = Some(meta);
    }

    /// What the caller looked up for `path`, if anything.
    fn looked_up_for(&self, path: &FilePath) -> Option<&volume::FileMeta> {
        self.looked_up
            .as_ref()
            .filter(|meta| meta.path == path.as_str())
    }

    /// The tree the call in progress may reach.
    fn owner(&self) -> Result<Owner, wit::VolumeError> {
        self.owner
            .ok_or_else(|| wit::VolumeError::Internal("a volume call outside a request".into()))
    }

    pub(super) fn limiter(&self) -> &MemoryLimiter {
        &self.limiter
    }

    pub(super) fn limiter_mut(&mut self) -> &mut MemoryLimiter {
        &mut self.limiter
    }

    pub(super) fn budget_total(&self) -> u64 {
        self.limiter.budget_total()
    }

    /// True when body bytes moved since the last call.
    pub(super) fn progress_since_last_look(&mut self) -> bool {
        let moved = self.progress != self.progress_seen;
        self.progress_seen = self.progress;
        moved || std::mem::take(&mut self.gave_up_on_client)
    }

    pub(super) fn push<T: Send + 'static>(
        &mut self,
        resource: T,
    ) -> Result<Resource<T>, ResourceTableError> {
        self.table.push(resource)
    }

    pub(super) fn remove<T: 'static>(&mut self, resource: Resource<T>) -> Option<T> {
        self.table.delete(resource).ok()
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// A stored file's content, read as the guest asks for it.
#[derive(Debug)]
pub struct Content {
    reader: BlobReader,
    /// The blob's address and content size, to attach an outboard to it.
    sha256: String,
    size: u64,
}

/// The response body the guest writes: a paced stream to the client.
pub type ResponseSink = super::stream::PacedSender;

pub use super::stream::Pace;

impl bindings::wasm_storage::storage::body::Host for HostState {}

impl bindings::wasm_storage::storage::body::HostUpload for HostState {
    async fn read(&mut self, upload: Resource<Upload>, max: u32) -> Result<Vec<u8>, BodyError> {
        let pace = self.pace;
        let upload = self.table.get_mut(&upload).map_err(internal_body_error)?;
        let chunk = upload.read(max as usize, pace).await.inspect_err(|error| {
            self.gave_up_on_client = matches!(error, BodyError::TimedOut(_));
        })?;
        self.progress += chunk.len() as u64;
        Ok(chunk)
    }

    async fn keep_outboard(
        &mut self,
        upload: Resource<Upload>,
        piece: Vec<u8>,
    ) -> Result<(), BodyError> {
        let upload = self.table.get_mut(&upload).map_err(internal_body_error)?;
        upload
            .staged()?
            .write_outboard(&piece)
            .await
            .map_err(staging_error)
    }

    async fn checkpoint(
        &mut self,
        upload: Resource<Upload>,
        state: HashState,
    ) -> Result<(), BodyError> {
        let upload = self.table.get_mut(&upload).map_err(internal_body_error)?;
        let Some(resumable) = upload.resumable.as_mut() else {
            // A whole upload keeps no states.
            return Ok(());
        };
        let staged = upload
            .staged
            .as_mut()
            .ok_or_else(|| BodyError::Internal("the upload was already stored".into()))?;
        let state = storage_handler::hashes::HashState::from(state);
        let text = state.encode();
        let hashed = volume::appending::HashedAt {
            text: &text,
            offset: state.offset(),
            outboard_len: state.outboard_len(),
        };
        match self
            .volume
            .checkpoint_upload(
                &mut resumable.log,
                staged,
                hashed,
                resumable.length,
                resumable.expires_ms,
            )
            .await
        {
            Ok(_) => Ok(()),
            // Refused (the upload moved on, the quota): the service says why.
            Err(VolumeError::UploadMovedOn(why)) => Err(BodyError::Aborted(why)),
            Err(error) => Err(staging_error(error)),
        }
    }

    async fn drop(&mut self, upload: Resource<Upload>) -> wasmtime::Result<()> {
        self.table.delete(upload)?;
        Ok(())
    }
}

impl bindings::wasm_storage::storage::body::HostContent for HostState {
    async fn read(&mut self, content: Resource<Content>, max: u32) -> Result<Vec<u8>, BodyError> {
        let content = self.table.get_mut(&content).map_err(internal_body_error)?;
        let chunk = content
            .reader
            .read(max as usize)
            .await
            .map_err(internal_body_error)?;
        self.progress += chunk.len() as u64;
        Ok(chunk)
    }

    async fn seek(&mut self, content: Resource<Content>, offset: u64) -> Result<(), BodyError> {
        let content = self.table.get_mut(&content).map_err(internal_body_error)?;
        content.reader.seek(offset);
        Ok(())
    }

    async fn outboard_len(&mut self, content: Resource<Content>) -> u64 {
        self.table
            .get(&content)
            .map_or(0, |content| content.reader.outboard_len())
    }

    async fn read_outboard(
        &mut self,
        content: Resource<Content>,
        pieces: Vec<(u64, u32)>,
    ) -> Result<Vec<u8>, BodyError> {
        // A proof needs a few KiB; a guest asking for more is refused.
        const MOST: u64 = 4 << 20;
        if pieces.iter().map(|&(_, len)| u64::from(len)).sum::<u64>() > MOST {
            return Err(BodyError::Internal(
                "more than 4 MiB of outboard asked for at once".into(),
            ));
        }
        let content = self.table.get_mut(&content).map_err(internal_body_error)?;
        let bytes = content
            .reader
            .read_outboard(&pieces)
            .await
            .map_err(internal_body_error)?;
        self.progress += bytes.len() as u64;
        Ok(bytes)
    }

    async fn attach_outboard(&mut self, content: Resource<Content>, outboard: Vec<u8>) {
        let Ok(content) = self.table.get(&content) else {
            return;
        };
        let Ok(digest) = volume::Digest::parse(&content.sha256) else {
            return;
        };
        let (volume, size) = (self.volume.clone(), content.size);
        if outboard.len() as u64 != storage_handler::tree::Shape::of(size).outboard_len() {
            tracing::warn!(%digest, size, "an outboard of the wrong length was offered; not kept");
            return;
        }
        // In the background: the blob is copied, and this read need not wait.
        tokio::spawn(async move {
            match volume.attach_outboard(&digest, size, &outboard).await {
                Ok(()) => {
                    tracing::info!(%digest, size, "kept an outboard for a blob stored without one")
                }
                Err(error) => tracing::warn!(%digest, %error, "could not keep an outboard"),
            }
        });
    }

    async fn drop(&mut self, content: Resource<Content>) -> wasmtime::Result<()> {
        self.table.delete(content)?;
        Ok(())
    }
}

impl bindings::wasm_storage::storage::body::HostResponse for HostState {
    async fn write(
        &mut self,
        out: Resource<ResponseSink>,
        chunk: Vec<u8>,
    ) -> Result<(), BodyError> {
        let sink = self.table.get_mut(&out).map_err(internal_body_error)?;
        let len = chunk.len() as u64;
        match sink.send(Bytes::from(chunk)).await {
            Err(super::stream::Cut::TooSlow(why)) => {
                self.gave_up_on_client = true;
                Err(BodyError::TimedOut(why))
            }
            Err(super::stream::Cut::Gone) => Err(BodyError::Aborted("the client went away".into())),
            Ok(()) => {
                self.progress += len;
                Ok(())
            }
        }
    }

    async fn drop(&mut self, out: Resource<ResponseSink>) -> wasmtime::Result<()> {
        self.table.delete(out)?;
        Ok(())
    }
}

impl wit::Host for HostState {}

impl bindings::wasm_storage::storage::volume::Host for HostState {
    async fn put(
        &mut self,
        path: String,
        body: Resource<Upload>,
        sha256: String,
        blake3: String,
        content_type: String,
        overwrite: bool,
    ) -> Result<FileMeta, wit::VolumeError> {
        let owner = self.owner()?;
        let path = parse_path(&path)?;
        let digests = volume::Digests {
            sha256: volume::Digest::parse(&sha256).map_err(to_wit_error)?,
            blake3: Some(volume::Digest::parse(&blake3).map_err(to_wit_error)?),
        };
        let upload = self
            .table
            .get_mut(&body)
            .map_err(|e| wit::VolumeError::Internal(e.to_string()))?;
        if !upload.ended {
            return Err(wit::VolumeError::Internal(
                "the body must be read to its end before it is stored".into(),
            ));
        }
        let staged = upload
            .staged
            .take()
            .ok_or_else(|| wit::VolumeError::Internal("the upload was already stored".into()))?;
        let s3_info = upload.describe.take().and_then(|describe| (describe.0)());
        let stored = volume::Stored {
            s3_info: s3_info.as_deref(),
            completes: upload.completes.as_deref(),
            lock: upload.lock,
        };
        self.volume
            .put_with(
                owner,
                &path,
                staged,
                &digests,
                &content_type,
                overwrite,
                stored,
            )
            .await
            .map(to_wit_meta)
            .map_err(to_wit_error)
    }

    async fn stat(&mut self, path: String) -> Result<FileMeta, wit::VolumeError> {
        let path = parse_path(&path)?;
        if let Some(meta) = self.looked_up_for(&path) {
            return Ok(to_wit_meta(meta.clone()));
        }
        self.volume
            .stat(self.owner()?, &path)
            .await
            .map(to_wit_meta)
            .map_err(to_wit_error)
    }

    async fn open(
        &mut self,
        path: String,
    ) -> Result<(FileMeta, Resource<Content>), wit::VolumeError> {
        let path = parse_path(&path)?;
        let looked_up = self.looked_up.take_if(|meta| meta.path == path.as_str());
        let (meta, reader) = self
            .volume
            .read_looked_up(self.owner()?, &path, looked_up)
            .await
            .map_err(to_wit_error)?;
        let content = self
            .table
            .push(Content {
                reader,
                sha256: meta.sha256.clone(),
                size: meta.size,
            })
            .map_err(|e| wit::VolumeError::Internal(e.to_string()))?;
        Ok((to_wit_meta(meta), content))
    }

    async fn delete(&mut self, path: String) -> Result<(), wit::VolumeError> {
        let path = parse_path(&path)?;
        self.volume
            .delete(self.owner()?, &path)
            .await
            .map_err(to_wit_error)
    }

    async fn list(
        &mut self,
        prefix: String,
        after: Option<String>,
        limit: u32,
    ) -> Result<Listing, wit::VolumeError> {
        let prefix =
            Prefix::parse(&prefix).map_err(|e| wit::VolumeError::InvalidPath(e.to_string()))?;
        let listing = self
            .volume
            .list(self.owner()?, &prefix, after.as_deref(), limit)
            .await
            .map_err(to_wit_error)?;
        Ok(Listing {
            entries: listing
                .entries
                .into_iter()
                .map(|entry| match entry {
                    volume::Entry::File(meta) => wit::Entry::File(to_wit_meta(meta)),
                    volume::Entry::Folder(prefix) => wit::Entry::Folder(prefix),
                })
                .collect(),
            next_after: listing.next_after,
        })
    }
}

fn parse_path(path: &str) -> Result<FilePath, wit::VolumeError> {
    FilePath::parse(path).map_err(|e| wit::VolumeError::InvalidPath(e.to_string()))
}

/// The volume's row as the WIT type (what S3 keeps of it stays here).
fn to_wit_meta(meta: volume::FileMeta) -> FileMeta {
    storage_handler::file_meta!(FileMeta, meta)
}

fn to_wit_error(error: VolumeError) -> wit::VolumeError {
    match error {
        VolumeError::NotFound(_) => wit::VolumeError::NotFound,
        VolumeError::AlreadyExists(_) => wit::VolumeError::AlreadyExists,
        VolumeError::NoSpace => wit::VolumeError::NoSpace,
        VolumeError::InvalidPath(e) => wit::VolumeError::InvalidPath(e.to_string()),
        busy @ VolumeError::Busy(_) => wit::VolumeError::Busy(busy.to_string()),
        quota @ VolumeError::QuotaExceeded { .. } => {
            wit::VolumeError::QuotaExceeded(quota.to_string())
        }
        other => {
            // The detail stays in the log; the guest (and so the client)
            // sees only that the volume failed.
            tracing::error!(error = %other, "volume operation failed");
            wit::VolumeError::Internal(other.to_string())
        }
    }
}
