//! An upload's bytes while they arrive: in memory while they are few, then
//! in a local temp file; or, for a resumable upload on a local store, in
//! the upload's own files, appended in place over many requests.

use std::fs;
use std::path::{Path, PathBuf};

use tempfile::TempPath;
use tokio::io::AsyncWriteExt;

use super::shared::{SMALL_BLOB, blocking};
use crate::error::VolumeError;

/// A blob's bytes being staged as they arrive, before anyone knows its
/// digest: in memory while they are few, then in a temp file. Dropped, the
/// temp file goes with it (a blob written from it keeps its own link or
/// copy).
#[derive(Debug)]
pub struct StagedBlob {
    place: Place,
    /// Where a temp file is made if the bytes outgrow memory.
    tmp: PathBuf,
    /// Bytes of content staged.
    len: u64,
    /// The content's outboard as it arrives, appended to the content when
    /// the blob is written (see `reader.rs`).
    outboard: Option<Box<StagedBlob>>,
    /// Bytes of outboard appended to `place` after the content.
    appended: u64,
    /// The parts a resumable upload kept in an object store before these
    /// bytes, which the blob is made of first (`upload`'s, in order).
    earlier: Option<(String, Vec<KeptPart>)>,
    /// A resumable upload's own file: its writeback started as it comes.
    flusher: Option<Flusher>,
}

/// Starts the kernel's writeback of a resumable upload's file as its bytes
/// come (an `fdatasync` on a blocking thread, one at a time, every
/// [`FLUSH_EVERY`] bytes), so a checkpoint's own sync finds little left to
/// write and the request does not wait for the disk in one go, as a
/// one-request upload, synced once at its end, does not.
#[derive(Debug)]
struct Flusher {
    file: std::sync::Arc<fs::File>,
    busy: std::sync::Arc<std::sync::atomic::AtomicBool>,
    since: u64,
}

/// Bytes written between two starts of a kept file's writeback.
const FLUSH_EVERY: u64 = 1 << 20;

impl Flusher {
    fn wrote(&mut self, bytes: u64) {
        use std::sync::atomic::Ordering;
        self.since += bytes;
        if self.since < FLUSH_EVERY || self.busy.swap(true, Ordering::AcqRel) {
            return;
        }
        self.since = 0;
        let (file, busy) = (self.file.clone(), self.busy.clone());
        tokio::task::spawn_blocking(move || {
            // A head start only: the checkpoint's sync is the one that counts.
            let _ = file.sync_data();
            busy.store(false, Ordering::Release);
        });
    }
}

/// A resumable upload's part in an object store: its content, then the
/// outboard written while it arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeptPart {
    pub(crate) name: String,
    pub(crate) size: u64,
    pub(crate) outboard: u64,
}

/// A staged file's name: a temp file's, removed with it, or a resumable
/// upload's own, which stays until the upload goes.
#[derive(Debug)]
enum StagedPath {
    Temp(TempPath),
    Kept(PathBuf),
}

impl StagedPath {
    fn as_path(&self) -> &Path {
        match self {
            Self::Temp(path) => path,
            Self::Kept(path) => path,
        }
    }
}

#[derive(Debug)]
enum Place {
    Memory(Vec<u8>),
    File {
        file: tokio::fs::File,
        path: StagedPath,
        /// Flushed and fsynced since the last write.
        synced: bool,
    },
}

/// Where the staged bytes are, for the blob store to take them from.
#[derive(Debug)]
pub(crate) enum Staged<'a> {
    /// In memory; `tmp` is where a temp file of them may be made.
    Memory { bytes: &'a [u8], tmp: &'a Path },
    /// A temp file, flushed and fsynced.
    File(&'a Path),
}

impl StagedBlob {
    /// Nothing staged yet; a temp file, if one is needed, goes in `tmp`.
    pub(crate) fn new(tmp: &Path) -> Self {
        Self {
            place: Place::Memory(Vec::new()),
            tmp: tmp.to_path_buf(),
            len: 0,
            outboard: None,
            appended: 0,
            earlier: None,
            flusher: None,
        }
    }

    /// A resumable upload's own files, `content` and `outboard` (of
    /// `len` and `outboard_len` bytes, open for appending at their ends):
    /// what comes is appended in place, and the blob is linked from them.
    pub(crate) fn kept(
        tmp: &Path,
        content: (fs::File, PathBuf, u64),
        outboard: (fs::File, PathBuf, u64),
    ) -> Self {
        let file = |(file, path, _): (fs::File, PathBuf, u64)| Place::File {
            file: tokio::fs::File::from_std(file),
            path: StagedPath::Kept(path),
            synced: true,
        };
        let outboard_len = outboard.2;
        let outboard = Self {
            len: outboard_len,
            place: file(outboard),
            ..Self::new(tmp)
        };
        let flusher = content.0.try_clone().ok().map(|file| Flusher {
            file: std::sync::Arc::new(file),
            busy: std::sync::Arc::default(),
            since: 0,
        });
        Self {
            len: content.2,
            place: file(content),
            outboard: Some(Box::new(outboard)),
            flusher,
            ..Self::new(tmp)
        }
    }

    /// These bytes follow `parts` of `upload`, kept in an object store:
    /// the blob is made of those, then these.
    pub(crate) fn after_parts(&mut self, upload: &str, parts: Vec<KeptPart>) {
        self.earlier = Some((upload.to_owned(), parts));
    }

    /// The parts these bytes follow, if any.
    pub(crate) fn earlier(&self) -> Option<(&str, &[KeptPart])> {
        self.earlier
            .as_ref()
            .map(|(upload, parts)| (upload.as_str(), parts.as_slice()))
    }

    /// Bytes of the content the blob is made of: the parts it follows,
    /// then these.
    pub fn content_len(&self) -> u64 {
        self.earlier.as_ref().map_or(0, |(_, parts)| {
            parts.iter().map(|part| part.size).sum::<u64>()
        }) + self.len
    }

    /// Bytes of outboard staged (not yet appended).
    pub(crate) fn outboard_len(&self) -> u64 {
        self.outboard.as_ref().map_or(0, |outboard| outboard.len)
    }

    /// Give a resumable upload's file a copy of its own, renamed over its
    /// name and locked, so what is appended or cut back next never touches
    /// a blob it is linked into.
    pub(crate) async fn break_link(&mut self) -> Result<(), VolumeError> {
        let Place::File {
            file,
            path: StagedPath::Kept(path),
            ..
        } = &mut self.place
        else {
            return Ok(());
        };
        file.flush()
            .await
            .map_err(|e| VolumeError::io("copying an upload's file", e))?;
        let from = file
            .try_clone()
            .await
            .map_err(|e| VolumeError::io("copying an upload's file", e))?
            .into_std()
            .await;
        let path = path.clone();
        let copy = blocking(move || {
            let error = |e| VolumeError::io("copying an upload's file", e);
            let dir = path.parent().unwrap_or(Path::new("."));
            let (mut copy, copy_path) = make_temp_file(dir)?;
            let mut from = &from;
            std::io::Seek::seek(&mut from, std::io::SeekFrom::Start(0)).map_err(error)?;
            std::io::copy(&mut from, &mut copy).map_err(error)?;
            copy.sync_all().map_err(error)?;
            copy_path
                .persist(&path)
                .map_err(|e| VolumeError::io("copying an upload's file", e.error))?;
            let copy = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .map_err(error)?;
            copy.try_lock()
                .map_err(|_| VolumeError::UploadBusy(path.display().to_string()))?;
            let mut end = &copy;
            std::io::Seek::seek(&mut end, std::io::SeekFrom::End(0)).map_err(error)?;
            Ok(copy)
        })
        .await?;
        if let Some(flusher) = &mut self.flusher {
            flusher.file = std::sync::Arc::new(
                copy.try_clone()
                    .map_err(|e| VolumeError::io("copying an upload's file", e))?,
            );
        }
        if let Place::File { file, synced, .. } = &mut self.place {
            *file = tokio::fs::File::from_std(copy);
            *synced = true;
        }
        Ok(())
    }

    /// Cut what is staged back to `len` bytes and the outboard to
    /// `outboard_len` (a resumable upload's own files, when what came
    /// after its record was refused).
    pub(crate) async fn cut_back(
        &mut self,
        len: u64,
        outboard_len: u64,
    ) -> Result<(), VolumeError> {
        if let Some(outboard) = &mut self.outboard {
            Box::pin(outboard.cut_back(outboard_len, 0)).await?;
        }
        if let Place::File { file, .. } = &mut self.place
            && self.len > len
        {
            use tokio::io::AsyncSeekExt as _;
            let error = |e| VolumeError::io("cutting an upload back", e);
            file.flush().await.map_err(error)?;
            file.set_len(len).await.map_err(error)?;
            file.seek(std::io::SeekFrom::End(0)).await.map_err(error)?;
            self.len = len;
        }
        Ok(())
    }

    /// Make what is staged so far durable where it is (a file's data, and
    /// its outboard's): a resumable upload's checkpoint.
    pub(crate) async fn sync(&mut self) -> Result<(), VolumeError> {
        // The two files' syncs at once: the disk's two waits overlap.
        let outboard = async {
            match &mut self.outboard {
                Some(outboard) => Box::pin(outboard.sync()).await,
                None => Ok(()),
            }
        };
        let content = async {
            if let Place::File { file, synced, .. } = &mut self.place
                && !*synced
            {
                file.flush()
                    .await
                    .map_err(|e| VolumeError::io("writing an upload", e))?;
                file.sync_data()
                    .await
                    .map_err(|e| VolumeError::io("syncing an upload", e))?;
                *synced = true;
            }
            Ok(())
        };
        let (outboard, content) = tokio::join!(outboard, content);
        outboard.and(content)
    }

    /// Append `chunk` to the content.
    pub async fn write(&mut self, chunk: &[u8]) -> Result<(), VolumeError> {
        if self.appended > 0 {
            return Err(VolumeError::io(
                "staging a blob",
                std::io::Error::other("content after its outboard"),
            ));
        }
        self.append(chunk).await?;
        self.len += chunk.len() as u64;
        if let Some(flusher) = &mut self.flusher {
            flusher.wrote(chunk.len() as u64);
        }
        Ok(())
    }

    /// Append `piece` to the content's outboard, which follows the content
    /// once it is all there.
    pub async fn write_outboard(&mut self, piece: &[u8]) -> Result<(), VolumeError> {
        let tmp = self.tmp.clone();
        self.outboard
            .get_or_insert_with(|| Box::new(StagedBlob::new(&tmp)))
            .write(piece)
            .await
    }

    /// Bytes of the blob as stored: content and outboard.
    pub(crate) fn stored_len(&self) -> u64 {
        self.len + self.appended + self.outboard.as_ref().map_or(0, |outboard| outboard.len)
    }

    /// Put the outboard staged so far after the content.
    async fn append_outboard(&mut self) -> Result<(), VolumeError> {
        let Some(mut outboard) = self.outboard.take() else {
            return Ok(());
        };
        match &mut outboard.place {
            Place::Memory(bytes) => {
                let bytes = std::mem::take(bytes);
                self.append(&bytes).await?;
            }
            Place::File { file, .. } => {
                use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};
                file.flush()
                    .await
                    .map_err(|e| VolumeError::io("writing a blob", e))?;
                file.seek(std::io::SeekFrom::Start(0))
                    .await
                    .map_err(|e| VolumeError::io("reading a staged outboard", e))?;
                let mut piece = vec![0; 1 << 20];
                loop {
                    let n = file
                        .read(&mut piece)
                        .await
                        .map_err(|e| VolumeError::io("reading a staged outboard", e))?;
                    if n == 0 {
                        break;
                    }
                    self.append(&piece[..n]).await?;
                }
            }
        }
        self.appended += outboard.len;
        Ok(())
    }

    /// Append `chunk` to what is staged, in memory or in the temp file.
    async fn append(&mut self, chunk: &[u8]) -> Result<(), VolumeError> {
        match &mut self.place {
            Place::Memory(bytes) if (bytes.len() + chunk.len()) as u64 <= SMALL_BLOB => {
                bytes.extend_from_slice(chunk);
            }
            Place::Memory(bytes) => {
                let held = std::mem::take(bytes);
                let (mut file, path) = temp_file(&self.tmp).await?;
                for part in [held.as_slice(), chunk] {
                    file.write_all(part)
                        .await
                        .map_err(|e| VolumeError::io("writing a blob", e))?;
                }
                self.place = Place::File {
                    file,
                    path: StagedPath::Temp(path),
                    synced: false,
                };
            }
            Place::File { file, synced, .. } => {
                file.write_all(chunk)
                    .await
                    .map_err(|e| VolumeError::io("writing a blob", e))?;
                *synced = false;
            }
        }
        Ok(())
    }

    /// Bytes staged so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The staged bytes (content, then outboard), a temp file flushed and
    /// fsynced first.
    pub(crate) async fn staged(&mut self) -> Result<Staged<'_>, VolumeError> {
        self.append_outboard().await?;
        match &mut self.place {
            Place::Memory(bytes) => Ok(Staged::Memory {
                bytes,
                tmp: &self.tmp,
            }),
            Place::File { file, path, synced } => {
                if !*synced {
                    file.flush()
                        .await
                        .map_err(|e| VolumeError::io("writing a blob", e))?;
                    file.sync_all()
                        .await
                        .map_err(|e| VolumeError::io("syncing a blob", e))?;
                    *synced = true;
                }
                Ok(Staged::File(path.as_path()))
            }
        }
    }
}

/// A new temp file in `tmp`, removed when its path is dropped.
pub(crate) async fn temp_file(tmp: &Path) -> Result<(tokio::fs::File, TempPath), VolumeError> {
    let tmp = tmp.to_path_buf();
    let (file, path) = blocking(move || make_temp_file(&tmp)).await?;
    Ok((tokio::fs::File::from_std(file), path))
}

/// [`temp_file`], for code already on the blocking pool.
pub(crate) fn make_temp_file(tmp: &Path) -> Result<(fs::File, TempPath), VolumeError> {
    tempfile::Builder::new()
        .prefix("upload-")
        .tempfile_in(tmp)
        .map(tempfile::NamedTempFile::into_parts)
        .map_err(|e| VolumeError::io("creating a temp file", e))
}

/// Remove every leftover temp file in `tmp`; returns how many there were.
pub(crate) async fn clear_temp(tmp: &Path) -> Result<usize, VolumeError> {
    let tmp: PathBuf = tmp.to_path_buf();
    blocking(move || {
        let mut removed = 0;
        for entry in fs::read_dir(&tmp).map_err(|e| VolumeError::io("listing temp files", e))? {
            let entry = entry.map_err(|e| VolumeError::io("listing temp files", e))?;
            fs::remove_file(entry.path())
                .map_err(|e| VolumeError::io("removing a temp file", e))?;
            removed += 1;
        }
        Ok(removed)
    })
    .await
}
