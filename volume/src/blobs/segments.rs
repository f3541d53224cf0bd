//! Small blobs packed into segment files, as Haystack and SeaweedFS's
//! volumes keep them: a blob of at most [`SMALL_BLOB`] bytes on a local
//! store is not a file of its own but a record appended to the open
//! segment, `<root>/segments/<number>`, and the writers that append at
//! about the same time share one `fdatasync` ([`GroupSync`]) where each
//! file of its own cost a file, two fsyncs and a link. The blob's ledger
//! row says where its record is ([`Packed`]); the record's header (a magic
//! number, the length, the digest) lets compaction check what it copies.
//!
//! The next segment is written as zeros ahead of its records
//! ([`spare_segment`]), so that a record's `fdatasync` need not write the
//! file's size and allocation too.
//!
//! A segment is appended to by one process, never after it restarts (a new
//! one is opened then), so a record torn by a crash lies past every
//! record a row names. Records no row names (blobs removed since, writes a
//! crash cut before their row) are dead space, given back when the
//! collection compacts the segment (`Volume::compact_segments`): its live
//! records are copied to the open segment, the rows moved, the segment
//! recorded as retired and its file removed.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tokio::sync::Notify;

use super::open_segment::{OpenSegment, RecordSync};
pub(crate) use super::shared::SEGMENT_TARGET;
use super::shared::{SMALL_BLOB, blocking, read_rest};
use super::spare_segment::{self, SPARE_AFTER, Spares};
use crate::error::VolumeError;
use crate::types::Digest;

/// Bytes before each record's blob: [`MAGIC`], its length (u32, little
/// endian) and its SHA-256.
pub(crate) const HEADER: u64 = 4 + 4 + 32;

const MAGIC: &[u8; 4] = b"WSB1";

/// The folder of segment files under the blob root.
const SEGMENTS: &str = "segments";

/// Where a packed blob's bytes are: `len` bytes from `offset` of segment
/// `segment` (past its record's header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Packed {
    pub(crate) segment: i64,
    pub(crate) offset: i64,
    pub(crate) len: i64,
}

impl Packed {
    /// The record's bytes in its segment, header included.
    pub(crate) fn record_len(&self) -> u64 {
        HEADER + u64::try_from(self.len).unwrap_or(0)
    }
}

/// A segment file as a listing sees it.
#[derive(Debug, Clone)]
pub(crate) struct ListedSegment {
    pub(crate) id: i64,
    pub(crate) len: u64,
    pub(crate) modified: SystemTime,
}

/// The segments of one local blob store.
#[derive(Debug)]
pub(crate) struct Segments {
    dir: PathBuf,
    /// The segment records are appended to, and the number the next one
    /// gets; `None` until the first small blob after a start.
    open: Mutex<Appending>,
    /// Where blobs were last read or written, so that a small read need
    /// not ask the index (a hint: see `Volume::read_packed`).
    seen: Mutex<HashMap<Digest, Packed>>,
    /// Told when a segment is closed for a new one: time to compact.
    rolled: Notify,
    /// The next segment's file, written as zeros ahead.
    spares: Arc<Spares>,
}

/// The most placements [`Segments`] remembers; past it, it starts afresh.
const SEEN: usize = 1 << 14;

#[derive(Debug)]
struct Appending {
    segment: Option<Arc<OpenSegment>>,
    next_id: i64,
}

impl Segments {
    /// The segments under `root`; new ones are numbered after every one
    /// there and every one retired (`retired_max`), so none is reused.
    pub(crate) fn open(root: &Path) -> Result<Self, VolumeError> {
        let dir = root.join(SEGMENTS);
        fs::create_dir_all(&dir).map_err(|e| VolumeError::io("creating the segment folder", e))?;
        Ok(Self {
            spares: Arc::new(Spares::new(&dir)),
            dir,
            open: Mutex::new(Appending {
                segment: None,
                next_id: 1,
            }),
            seen: Mutex::new(HashMap::new()),
            rolled: Notify::new(),
        })
    }

    /// New segments are numbered above `highest` (the highest retired).
    pub(crate) async fn number_after(&self, highest: i64) -> Result<(), VolumeError> {
        let listed = self.list().await?;
        let highest = listed.iter().map(|s| s.id).fold(highest, i64::max);
        let mut open = self.open.lock().expect("segments lock");
        open.next_id = open.next_id.max(highest + 1);
        Ok(())
    }

    fn path_of(&self, id: i64) -> PathBuf {
        self.dir.join(id.to_string())
    }

    /// The number of the segment appended to now, if any.
    pub(crate) fn open_id(&self) -> Option<i64> {
        let open = self.open.lock().expect("segments lock");
        open.segment.as_ref().map(|segment| segment.id)
    }

    /// Append blob `digest`'s `bytes` (at most [`SMALL_BLOB`] of content
    /// and its outboard) as a record; returns once it is durable.
    pub(crate) async fn append(
        self: &Arc<Self>,
        digest: &Digest,
        bytes: &[u8],
    ) -> Result<Packed, VolumeError> {
        let (packed, sync) = self.append_unsynced(digest, bytes).await?;
        sync.durable().await?;
        Ok(packed)
    }

    /// [`Segments::append`], returning once the record is written (to the
    /// page cache), with what makes it durable: no row may name it before.
    pub(crate) async fn append_unsynced(
        self: &Arc<Self>,
        digest: &Digest,
        bytes: &[u8],
    ) -> Result<(Packed, RecordSync), VolumeError> {
        let len = u32::try_from(bytes.len()).map_err(|_| {
            VolumeError::io(
                "packing a blob",
                io::Error::other("a blob too large for a segment"),
            )
        })?;
        let mut record = Vec::with_capacity(bytes.len() + HEADER as usize);
        record.extend_from_slice(MAGIC);
        record.extend_from_slice(&len.to_le_bytes());
        record.extend_from_slice(&digest_bytes(digest));
        record.extend_from_slice(bytes);
        let write = |segment: &OpenSegment, at: u64, record: &[u8]| {
            segment
                .file
                .write_all_at(record, at)
                .map_err(|e| VolumeError::io("writing a packed blob", e))
        };
        let (segment, at) = match self.reserve_in_open(record.len() as u64) {
            // Room in the open segment: at most 64 KiB into the page cache,
            // on this thread (a round trip to a blocking thread costs more).
            Some((segment, at)) => {
                write(&segment, at, &record)?;
                (segment, at)
            }
            // A new segment: made, and its name fsynced, on a blocking thread.
            None => {
                let segments = self.clone();
                blocking(move || {
                    let (segment, at) = segments.reserve(record.len() as u64)?;
                    write(&segment, at, &record)?;
                    Ok((segment, at))
                })
                .await?
            }
        };
        if (at..at + HEADER + bytes.len() as u64).contains(&SPARE_AFTER) {
            self.spares.prepare();
        }
        let packed = Packed {
            segment: segment.id,
            offset: i64::try_from(at + HEADER).unwrap_or(i64::MAX),
            len: i64::from(len),
        };
        // A hint for reads, which find the digest only in a committed row.
        self.seen(digest, packed);
        Ok((packed, segment.written()))
    }

    /// Room for `len` bytes in the open segment, opening a new one when
    /// there is none, it is full, or its last sync failed (what it holds
    /// after that failure can no longer be trusted to reach the disk).
    fn reserve(&self, len: u64) -> Result<(Arc<OpenSegment>, u64), VolumeError> {
        let mut open = self.open.lock().expect("segments lock");
        if let Some(room) = Self::room_in(&open, len) {
            return Ok(room);
        }
        // The spare made ahead, else an empty file. Another process on the
        // same store may have taken the number.
        let mut spare = self.spares.take();
        let (id, file) = loop {
            let id = open.next_id;
            let path = self.path_of(id);
            let made = match spare.take() {
                Some(file) => match spare_segment::link(&file, &path) {
                    Ok(()) => Ok(file),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        spare = Some(file);
                        Err(e)
                    }
                    Err(error) => {
                        tracing::debug!(%error, "a spare segment could not be named: segments grow by appends");
                        self.spares.unsupported();
                        continue;
                    }
                },
                None => OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(&path),
            };
            open.next_id += 1;
            match made {
                Ok(file) => break (id, file),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(VolumeError::io("creating a segment", e)),
            }
        };
        // Its name made durable once; its records by `fdatasync` after.
        sync_dir(&self.dir)?;
        let segment = Arc::new(OpenSegment::new(id, file, len));
        if open.segment.replace(segment.clone()).is_some() {
            self.rolled.notify_one();
        }
        Ok((segment, 0))
    }

    /// Room for `len` bytes in the open segment, if it has it (no I/O).
    fn reserve_in_open(&self, len: u64) -> Option<(Arc<OpenSegment>, u64)> {
        Self::room_in(&self.open.lock().expect("segments lock"), len)
    }

    fn room_in(open: &Appending, len: u64) -> Option<(Arc<OpenSegment>, u64)> {
        let segment = open.segment.as_ref()?;
        if segment.failed() {
            return None;
        }
        let mut end = segment.end.lock().expect("segment end");
        (*end == 0 || *end + len <= SEGMENT_TARGET).then(|| {
            let at = *end;
            *end += len;
            (segment.clone(), at)
        })
    }

    /// Whether the next segment's spare is ready; `None` if none will be.
    #[cfg(test)]
    pub(crate) fn has_spare(&self) -> Option<bool> {
        self.spares.ready()
    }

    /// Returns once a segment has been closed for a new one (since the
    /// last call returned).
    pub(crate) async fn rolled(&self) {
        self.rolled.notified().await;
    }

    /// Where blob `digest` was last seen packed, if remembered.
    pub(crate) fn last_seen(&self, digest: &Digest) -> Option<Packed> {
        self.seen.lock().expect("seen lock").get(digest).copied()
    }

    /// Remember that blob `digest` is packed at `packed`.
    pub(crate) fn seen(&self, digest: &Digest, packed: Packed) {
        let mut seen = self.seen.lock().expect("seen lock");
        if seen.len() >= SEEN {
            seen.clear();
        }
        seen.insert(digest.clone(), packed);
    }

    /// Forget where blob `digest` was (its segment is gone).
    pub(crate) fn forget(&self, digest: &Digest) {
        self.seen.lock().expect("seen lock").remove(digest);
    }

    /// Append no more to segment `id` (another process retired it).
    pub(crate) fn abandon(&self, id: i64) {
        let mut open = self.open.lock().expect("segments lock");
        if open
            .segment
            .as_ref()
            .is_some_and(|segment| segment.id == id)
        {
            open.segment = None;
        }
    }

    /// A packed blob's bytes, the content's `size` first; `None` when its
    /// segment is gone (compacted away after the caller read the row).
    /// Read on the caller's thread: a few KiB, most often from the page
    /// cache (see `LocalBlobs::open_blob`).
    pub(crate) fn read(&self, packed: Packed) -> Result<Option<Vec<u8>>, VolumeError> {
        let file = match File::open(self.path_of(packed.segment)) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(VolumeError::io("reading a packed blob", e)),
        };
        let bytes = vec![0; usize::try_from(packed.len).unwrap_or(0)];
        let offset = u64::try_from(packed.offset).unwrap_or(0);
        // A record cut short reads short: the reader's verification fails it.
        read_rest(&file, bytes, offset, 0, "reading a packed blob").map(Some)
    }

    /// A record's blob, checked against its header (the magic, the length
    /// and `digest`): `None` if the header says otherwise or the segment
    /// is gone. For compaction, which must never copy the wrong bytes.
    pub(crate) async fn read_record(
        self: &Arc<Self>,
        digest: &Digest,
        packed: Packed,
    ) -> Result<Option<Vec<u8>>, VolumeError> {
        let segments = self.clone();
        let expected = digest_bytes(digest);
        blocking(move || {
            let file = match File::open(segments.path_of(packed.segment)) {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(VolumeError::io("reading a segment", e)),
            };
            let start = u64::try_from(packed.offset)
                .unwrap_or(0)
                .saturating_sub(HEADER);
            let mut record = vec![0; usize::try_from(packed.record_len()).unwrap_or(0)];
            match file.read_exact_at(&mut record, start) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
                Err(e) => return Err(VolumeError::io("reading a segment", e)),
            }
            let len = u32::from_le_bytes(record[4..8].try_into().expect("4 bytes"));
            if &record[..4] != MAGIC
                || i64::from(len) != packed.len
                || record[8..HEADER as usize] != expected
            {
                return Ok(None);
            }
            record.drain(..HEADER as usize);
            Ok(Some(record))
        })
        .await
    }

    /// Whether segment `id` holds `packed`'s record (its file is there and
    /// long enough).
    pub(crate) fn holds(&self, packed: Packed) -> Result<bool, VolumeError> {
        match fs::metadata(self.path_of(packed.segment)) {
            Ok(meta) => Ok(meta.len() >= u64::try_from(packed.offset + packed.len).unwrap_or(0)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(VolumeError::io("looking for a segment", e)),
        }
    }

    /// Every segment file; the open one's length is that of its records
    /// (its file may hold zeros past them: see `spare_segment`).
    pub(crate) async fn list(&self) -> Result<Vec<ListedSegment>, VolumeError> {
        let dir = self.dir.clone();
        let open = {
            let open = self.open.lock().expect("segments lock");
            open.segment
                .as_ref()
                .map(|segment| (segment.id, *segment.end.lock().expect("segment end")))
        };
        blocking(move || {
            let listing_error = |e| VolumeError::io("listing segments", e);
            let mut found = Vec::new();
            for entry in fs::read_dir(&dir).map_err(listing_error)? {
                let entry = entry.map_err(listing_error)?;
                let Some(id) = entry
                    .file_name()
                    .to_str()
                    .and_then(|name| name.parse::<i64>().ok())
                else {
                    continue;
                };
                let meta = entry.metadata().map_err(listing_error)?;
                let len = match open {
                    Some((open, end)) if open == id => meta.len().min(end),
                    _ => meta.len(),
                };
                found.push(ListedSegment {
                    id,
                    len,
                    modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                });
            }
            found.sort_by_key(|segment| segment.id);
            Ok(found)
        })
        .await
    }

    /// Remove segment `id`'s file (retired: no row names it); one already
    /// gone is not an error. Readers that opened it read on.
    pub(crate) async fn remove(&self, id: i64) -> Result<(), VolumeError> {
        match tokio::fs::remove_file(self.path_of(id)).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(VolumeError::io("removing a segment", e)),
        }
    }
}

/// Whether a blob of `len` bytes (content and outboard) is packed.
pub(crate) fn packs(len: u64) -> bool {
    len <= SMALL_BLOB
}

fn digest_bytes(digest: &Digest) -> [u8; 32] {
    let mut raw = [0; 32];
    hex::decode_to_slice(digest.as_str(), &mut raw).expect("a digest is 64 hex digits");
    raw
}

fn sync_dir(dir: &Path) -> Result<(), VolumeError> {
    File::open(dir)
        .and_then(|dir| dir.sync_all())
        .map_err(|e| VolumeError::io("syncing the segment folder", e))
}
