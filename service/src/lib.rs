//! The file service: every operation a storage protocol needs, over the
//! caller's own tree, in the project's own types.
//!
//! REST (`/files`), share links (`/share`) and WebDAV (`/dav`) are adapters:
//! they parse their protocol, call this, and answer in their dialect. The
//! service alone talks to the instance pool (through the runtime's typed
//! calls) and to the volume, and it alone applies the caller's tree, the
//! quota, WebDAV's locks (which hold for every protocol) and the memory
//! reservation. It never knows which protocol asked.
//!
//! - `read`: a file whole, a range, or headers only, verified by an
//!   instance and streamed to the client; conditionals.
//! - `store`: an upload: one body, hashed by an instance, under the quota
//!   and the memory budget.
//! - `tree`: listings, folders, nodes, deleting, copying and moving.
//! - `locks`: what a change touches ([`Change`]), the check every change
//!   passes, and taking, refreshing and releasing locks.
//! - `properties`: WebDAV's dead properties (counted in the quota).
//! - `shares`: share links' rows: made, resolved, revoked.
//! - `uploads`: resumable uploads: parts kept durably until the last byte,
//!   then the whole stored like any upload.
//! - `multipart`: uploads in numbered parts (S3's), chosen at completion.
//! - `objects`: what S3 needs beside: flat scans of a tree, and what it
//!   keeps of an object.

mod concat;
mod configs;
mod error;
mod locks;
mod multipart;
mod object_lock;
mod objects;
mod parts;
mod properties;
mod read;
mod shares;
mod store;
mod tree;
mod uploads;
mod versions;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use volume::{FilePath, Owner, Volume};

use auth::{Authenticator, Caller};
use storage_host::pool::{BodySize, Pool};
use storage_host::runtime::Pace;

pub use error::ServiceError;
pub use locks::{Change, LockTokens};
pub use multipart::MAX_PARTS;
pub use read::{FileRead, ReadBody, Want};
pub use shares::SharedFile;
pub use store::{Inspect, Refusal, StoreOptions};
pub use tree::{TransferRequest, parent_key_of};
pub use uploads::{AppendError, Appended, Checksum, Chunk};

/// The one way protocols reach files.
#[derive(Debug, Clone)]
pub struct FileService {
    pool: Arc<Pool>,
    volume: Arc<Volume>,
    auth: Arc<Authenticator>,
    /// Largest accepted upload, in bytes.
    max_body: u64,
    /// Most body bytes an instance holds at once.
    body_window: u64,
    /// How long an unfinished resumable upload lives without progress.
    upload_expiry: Duration,
    /// Reads refused or cut short because stored content failed
    /// verification, since start.
    integrity_failures: Arc<AtomicU64>,
}

/// A signed-in user's bytes in use (files and what else they keep) and quota.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Usage {
    pub used: u64,
    /// `null`: no quota.
    pub quota: Option<u64>,
}

impl FileService {
    pub fn new(
        pool: Arc<Pool>,
        volume: Arc<Volume>,
        auth: Arc<Authenticator>,
        max_body: u64,
        body_window: u64,
        upload_expiry: Duration,
    ) -> Self {
        Self {
            pool,
            volume,
            auth,
            max_body,
            body_window,
            upload_expiry,
            integrity_failures: Arc::default(),
        }
    }

    /// Largest accepted upload, in bytes.
    pub fn max_body(&self) -> u64 {
        self.max_body
    }

    /// Reads refused or cut short because stored content failed
    /// verification, since start.
    pub fn integrity_failures(&self) -> u64 {
        self.integrity_failures.load(Ordering::Relaxed)
    }

    /// What a call with a body of `size` bytes (`None`: not declared) holds
    /// in its instance, for its memory reservation: the body, up to the
    /// window.
    fn body_size(&self, size: Option<u64>) -> BodySize {
        match size {
            Some(size) => BodySize::Known(size.min(self.body_window)),
            None => BodySize::Unknown,
        }
    }

    /// How slow a client may be reading an answer the host writes.
    pub fn pace(&self) -> Pace {
        self.pool.runtime().pace()
    }

    /// The usage to show `caller` (none on an open gateway).
    pub async fn usage(&self, caller: &Caller) -> Result<Option<Usage>, ServiceError> {
        let Some(user) = caller.user() else {
            return Ok(None);
        };
        let used = self
            .volume
            .accounts()
            .usage(user.owner())
            .await
            .map_err(|error| ServiceError::from_volume(error, "usage"))?;
        Ok(Some(Usage {
            used,
            quota: user.quota,
        }))
    }

    /// `owner`'s file `path` as the index has it.
    pub async fn stat(
        &self,
        owner: Owner,
        path: &FilePath,
    ) -> Result<volume::FileMeta, ServiceError> {
        self.volume
            .stat(owner, path)
            .await
            .map_err(|error| ServiceError::from_volume(error, path.as_str()))
    }
}
