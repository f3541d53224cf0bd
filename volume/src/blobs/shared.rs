//! What the blob modules share, so none of them imports another for it:
//! the size below which a blob is handled whole, a listed blob, and the
//! trip to the blocking pool every file operation takes.

use std::io;
use std::time::SystemTime;

use crate::error::VolumeError;
use crate::types::Digest;

/// A blob this small is handled whole: an upload is staged in memory
/// (written to the store in one trip to the blocking pool, or none when its
/// content is already stored), a local blob is opened and read at once, on
/// the caller's thread. At most one 64 KiB group of the handler's BLAKE3
/// tree, so a blob read whole this way never has an outboard to read.
pub(crate) const SMALL_BLOB: u64 = 64 << 10;

/// A blob as a listing of the store sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListedBlob {
    pub(crate) digest: Digest,
    pub(crate) modified: SystemTime,
}

/// Run blocking file work on tokio's blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, VolumeError> + Send + 'static,
) -> Result<T, VolumeError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| VolumeError::io("blob I/O task", io::Error::other(e)))?
}
