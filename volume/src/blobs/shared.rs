//! What the blob modules share, so none of them imports another for it:
//! the size below which a blob is handled whole, a segment's size, a
//! listed blob, and the trip to the blocking pool every file operation
//! takes (and the positioned read that takes it only when the page cache
//! cannot answer).

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

/// A segment of packed blobs is closed once it holds this much; the next
/// record opens a new one. Small enough that compacting one is a short job.
pub(crate) const SEGMENT_TARGET: u64 = 32 << 20;

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

/// `buf.len()` bytes of `file` at `offset`, fewer only where the file ends.
/// Read on the caller's thread while the page cache holds them (`preadv2`
/// with `RWF_NOWAIT`, which answers `EAGAIN` rather than wait for the
/// disk), the rest on the blocking pool: a cached read, the common case,
/// costs no trip there and back (two thread switches per chunk), and a read
/// that must reach the disk never holds a runtime worker.
pub(crate) async fn read_at(
    file: &std::sync::Arc<std::fs::File>,
    mut buf: Vec<u8>,
    offset: u64,
    what: &'static str,
) -> Result<Vec<u8>, VolumeError> {
    let filled = read_cached(file, &mut buf, offset);
    if filled == buf.len() {
        return Ok(buf);
    }
    let file = file.clone();
    blocking(move || read_rest(&file, buf, offset, filled, what)).await
}

/// `buf` with its bytes from `filled` on read (it holds those before), cut
/// where the file ends: a blocking read, on the caller's thread.
pub(crate) fn read_rest(
    file: &std::fs::File,
    mut buf: Vec<u8>,
    offset: u64,
    mut filled: usize,
    what: &'static str,
) -> Result<Vec<u8>, VolumeError> {
    while filled < buf.len() {
        match std::os::unix::fs::FileExt::read_at(file, &mut buf[filled..], offset + filled as u64)
        {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(VolumeError::io(what, e)),
        }
    }
    buf.truncate(filled);
    Ok(buf)
}

/// How many of `buf`'s bytes the page cache gave without waiting; `buf.len()`
/// also when the file ended first (then `buf` is cut to what it holds).
/// Anything short of that (not cached, a filesystem without `RWF_NOWAIT`,
/// an error) is left to the blocking read, which reports errors.
#[cfg(target_os = "linux")]
fn read_cached(file: &std::fs::File, buf: &mut Vec<u8>, offset: u64) -> usize {
    use rustix::io::{ReadWriteFlags, preadv2};
    let mut filled = 0;
    while filled < buf.len() {
        let mut slices = [io::IoSliceMut::new(&mut buf[filled..])];
        match preadv2(
            file,
            &mut slices,
            offset + filled as u64,
            ReadWriteFlags::NOWAIT,
        ) {
            Ok(0) => {
                buf.truncate(filled);
                return filled;
            }
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => break,
        }
    }
    filled
}

#[cfg(not(target_os = "linux"))]
fn read_cached(_: &std::fs::File, _: &mut Vec<u8>, _: u64) -> usize {
    0
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::sync::Arc;

    use super::*;

    fn file_of(content: &[u8]) -> (tempfile::NamedTempFile, Arc<std::fs::File>) {
        let mut file = tempfile::NamedTempFile::new().expect("temp file");
        file.write_all(content).expect("write");
        let read = Arc::new(std::fs::File::open(file.path()).expect("open"));
        (file, read)
    }

    #[tokio::test]
    async fn a_positioned_read_gives_its_bytes_and_stops_where_the_file_ends() {
        let content: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        let (_keep, file) = file_of(&content);
        for (offset, len) in [
            (0, 300_000),
            (1, 262_144),
            (299_990, 5),
            (299_990, 64),
            (300_000, 8),
            (0, 0),
        ] {
            let got = read_at(&file, vec![0; len], offset as u64, "reading")
                .await
                .expect("read");
            let end = (offset + len).min(content.len());
            assert_eq!(got, content[offset.min(end)..end], "{offset}+{len}");
        }
    }

    #[test]
    fn what_the_page_cache_did_not_give_is_read_by_the_blocking_read() {
        let content: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let (_keep, file) = file_of(&content);
        // As if the cache had given the first 4096 bytes (kept), then no more.
        let mut buf = vec![7; 8000];
        buf[..4096].copy_from_slice(&content[1000..5096]);
        let got = read_rest(&file, buf, 1000, 4096, "reading").expect("read");
        assert_eq!(got, content[1000..9000]);
        let past_the_end = read_rest(&file, vec![0; 500], 9800, 0, "reading").expect("read");
        assert_eq!(past_the_end, content[9800..]);
    }
}
