//! Blobs as files under a local directory: `<root>/<first two hex
//! digits>/<sha256>`. A blob is linked into place from its fsynced temp file
//! and the directory fsynced, so a blob file that exists is complete and
//! durable, and a link that finds the name taken finds the same content.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use super::reader::BlobReader;
use super::segments::Segments;
use super::shared::{ListedBlob, SMALL_BLOB, blocking};
use super::staged::{Staged, StagedBlob, make_temp_file};
use crate::error::VolumeError;
use crate::types::Digest;

/// The folder under the root that holds resumable uploads' parts.
const UPLOADS: &str = "uploads";

/// The name of a tus upload's file, under its folder.
pub(crate) const UPLOAD_CONTENT: &str = "content";

/// The bytes a new blob file is linked from.
enum Source {
    Staged(PathBuf),
    Memory { bytes: Vec<u8>, tmp: PathBuf },
}

#[derive(Debug, Clone)]
pub(crate) struct LocalBlobs {
    root: PathBuf,
    /// Where small blobs are packed.
    segments: Arc<Segments>,
}

impl LocalBlobs {
    pub(crate) fn open(root: &Path) -> Result<Self, VolumeError> {
        fs::create_dir_all(root).map_err(|e| VolumeError::io("creating the blob directory", e))?;
        Ok(Self {
            root: root.to_path_buf(),
            segments: Arc::new(Segments::open(root)?),
        })
    }

    pub(crate) fn segments(&self) -> &Arc<Segments> {
        &self.segments
    }

    pub(crate) fn path_of(&self, digest: &Digest) -> PathBuf {
        let hex = digest.as_str();
        self.root.join(&hex[..2]).join(hex)
    }

    pub(crate) async fn write(
        &self,
        digest: &Digest,
        staged: &mut StagedBlob,
    ) -> Result<(), VolumeError> {
        self.write_to(self.path_of(digest), staged).await
    }

    /// Where part `name` of upload `upload` lives.
    fn part_path(&self, upload: &str, name: &str) -> PathBuf {
        self.root.join(UPLOADS).join(upload).join(name)
    }

    /// Store `staged` as part `name` of upload `upload`.
    pub(crate) async fn write_part(
        &self,
        upload: &str,
        name: &str,
        staged: &mut StagedBlob,
    ) -> Result<(), VolumeError> {
        self.write_to(self.part_path(upload, name), staged).await
    }

    /// Resumable upload `upload`'s own files (its content, and its
    /// outboard beside it), taken for one request (a lock on the content
    /// file, released when it closes; `UploadBusy` while another holds
    /// it), open for appending; and whether its content is linked into a
    /// blob already (a completion whose record failed, or one whose
    /// upload is about to go), which must be copied before it is cut back
    /// ([`StagedBlob::break_link`]).
    pub(crate) async fn kept_upload(
        &self,
        tmp: &Path,
        upload: &str,
    ) -> Result<(StagedBlob, bool), VolumeError> {
        let dir = self.root.join(UPLOADS).join(upload);
        let uploads = self.root.join(UPLOADS);
        let id = upload.to_owned();
        let (content, outboard, linked) = blocking(move || {
            let error = |e| VolumeError::io("opening an upload's file", e);
            if !dir.exists() {
                fs::create_dir_all(&dir).map_err(error)?;
                sync_dir(&uploads)?;
            }
            let content_path = dir.join(UPLOAD_CONTENT);
            // Its names are made durable once, when they are made.
            let made = !content_path.exists();
            let content = open_rw(&content_path)?;
            match content.try_lock() {
                Ok(()) => {}
                Err(fs::TryLockError::WouldBlock) => return Err(VolumeError::UploadBusy(id)),
                Err(fs::TryLockError::Error(e)) => return Err(error(e)),
            }
            let linked =
                std::os::unix::fs::MetadataExt::nlink(&content.metadata().map_err(error)?) > 1;
            let outboard_path = dir.join("outboard");
            let outboard = open_rw(&outboard_path)?;
            let content_len = at_end(&content)?;
            let outboard_len = at_end(&outboard)?;
            if made {
                sync_dir(&dir)?;
            }
            Ok((
                (content, content_path, content_len),
                (outboard, outboard_path, outboard_len),
                linked,
            ))
        })
        .await?;
        Ok((StagedBlob::kept(tmp, content, outboard), linked))
    }

    /// Part `name` of upload `upload`, opened for reading; `None` if absent.
    pub(crate) async fn open_part(
        &self,
        upload: &str,
        name: &str,
    ) -> Result<Option<BlobReader>, VolumeError> {
        let path = self.part_path(upload, name);
        blocking(move || match File::open(&path) {
            Ok(file) => {
                let len = file
                    .metadata()
                    .map_err(|e| VolumeError::io("reading an upload's part", e))?
                    .len();
                Ok(Some(BlobReader::file(file, len, len)))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(VolumeError::io("reading an upload's part", e)),
        })
        .await
    }

    /// Remove part `name` of upload `upload`.
    pub(crate) async fn remove_part(&self, upload: &str, name: &str) -> Result<(), VolumeError> {
        match tokio::fs::remove_file(self.part_path(upload, name)).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(VolumeError::io("removing an upload's part", e)),
        }
    }

    /// Remove every part of upload `upload`.
    pub(crate) async fn remove_parts(&self, upload: &str) -> Result<(), VolumeError> {
        let dir = self.root.join(UPLOADS).join(upload);
        blocking(move || match fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(VolumeError::io("removing an upload's parts", e)),
        })
        .await
    }

    /// The uploads that have parts here, with when their folder last changed.
    pub(crate) async fn uploads_with_parts(
        &self,
    ) -> Result<Vec<(String, SystemTime)>, VolumeError> {
        let dir = self.root.join(UPLOADS);
        blocking(move || {
            let entries = match fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(VolumeError::io("listing uploads", e)),
            };
            let mut found = Vec::new();
            for entry in entries.flatten() {
                let modified = entry
                    .metadata()
                    .and_then(|meta| meta.modified())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                if let Some(name) = entry.file_name().to_str() {
                    found.push((name.to_owned(), modified));
                }
            }
            Ok(found)
        })
        .await
    }

    /// Link `staged` into place at `target` (its folder made if need be).
    async fn write_to(&self, target: PathBuf, staged: &mut StagedBlob) -> Result<(), VolumeError> {
        let root = self.root.clone();
        // What to link into place: the staged temp file, or, for bytes
        // staged in memory, a temp file of their own written and fsynced
        // in the same trip to the blocking pool as the rest.
        let source = match staged.staged().await? {
            Staged::File(path) => Source::Staged(path.to_path_buf()),
            Staged::Memory { bytes, tmp } => Source::Memory {
                bytes: bytes.to_vec(),
                tmp: tmp.to_path_buf(),
            },
        };
        blocking(move || {
            let written;
            let source = match source {
                Source::Staged(path) => path,
                Source::Memory { bytes, tmp } => {
                    let (mut file, path) = make_temp_file(&tmp)?;
                    io::Write::write_all(&mut file, &bytes)
                        .and_then(|()| file.sync_all())
                        .map_err(|e| VolumeError::io("writing a blob", e))?;
                    // Removed when this trip ends, after the link.
                    written = path;
                    written.to_path_buf()
                }
            };
            let fan_out = target.parent().unwrap_or(&root);
            if !fan_out.exists() {
                fs::create_dir_all(fan_out)
                    .map_err(|e| VolumeError::io("creating a blob directory", e))?;
                // Every new level, up to the root, made durable.
                let mut made = fan_out.parent();
                while let Some(dir) = made {
                    sync_dir(dir)?;
                    if dir == root {
                        break;
                    }
                    made = dir.parent();
                }
            }
            // A second name for the staged file: atomic, and it refuses to
            // replace a blob that is already there (the same content).
            match fs::hard_link(&source, &target) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(VolumeError::io("linking a blob into place", e)),
            }
            // Also when another process linked it: it may not have made the
            // name durable yet, and this one's row will name it.
            sync_dir(fan_out)
        })
        .await
    }

    /// Rename the staged file over the blob: readers of the old file keep
    /// reading it, new ones open the new one.
    pub(crate) async fn replace(
        &self,
        digest: &Digest,
        staged: &mut StagedBlob,
    ) -> Result<(), VolumeError> {
        let target = self.path_of(digest);
        let Staged::File(source) = staged.staged().await? else {
            // Content with an outboard is more than one 64 KiB group, and
            // so never staged in memory.
            return Ok(());
        };
        let source = source.to_path_buf();
        let fan_out = target.parent().unwrap_or(&self.root).to_path_buf();
        blocking(move || {
            // A second name for the staged (fsynced) file, renamed over the
            // blob: the staged name goes when the staged blob is dropped.
            let (file, link) = make_temp_file(source.parent().unwrap_or(&fan_out))?;
            drop(file);
            fs::remove_file(&link)
                .and_then(|()| fs::hard_link(&source, &link))
                .map_err(|e| VolumeError::io("rewriting a blob", e))?;
            link.persist(&target)
                .map_err(|e| VolumeError::io("rewriting a blob", e.error))?;
            sync_dir(&fan_out)
        })
        .await
    }

    /// Asked inside the write transaction that records the blob, so on the
    /// caller's thread: one `stat` of a directory entry in memory, where the
    /// blocking pool's round trip would lengthen every writer's turn.
    pub(crate) async fn exists(&self, digest: &Digest) -> Result<bool, VolumeError> {
        self.path_of(digest)
            .try_exists()
            .map_err(|e| VolumeError::io("looking for a blob", e))
    }

    pub(crate) async fn open_blob(
        &self,
        digest: &Digest,
        size: u64,
    ) -> Result<Option<BlobReader>, VolumeError> {
        let path = self.path_of(digest);
        if size <= SMALL_BLOB {
            // Opened and read on the caller's thread: at most 64 KiB, most
            // often from the page cache, costs a few microseconds, less than
            // the trip to the blocking pool and back (two thread switches,
            // the largest cost of a small GET). A read that has to reach the
            // disk holds this worker for that one read, as an event loop
            // like nginx's does.
            let mut content = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
            match File::open(&path) {
                Ok(file) => io::Read::read_to_end(&mut io::Read::take(file, size), &mut content)
                    .map_err(|e| VolumeError::io("reading a blob", e))?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(VolumeError::io("reading a blob", e)),
            };
            return Ok(Some(BlobReader::in_memory(content.into(), size)));
        }
        // Opened and measured on the caller's thread too (a name and an
        // inode the kernel holds, most often): past the content is its
        // outboard. Its reads take the blocking pool only for what the page
        // cache does not hold (`shared::read_at`).
        match File::open(&path) {
            Ok(file) => {
                let stored = file
                    .metadata()
                    .map_err(|e| VolumeError::io("reading a blob", e))?
                    .len();
                Ok(Some(BlobReader::file(file, size, stored)))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(VolumeError::io("reading a blob", e)),
        }
    }

    pub(crate) async fn remove(&self, digest: &Digest) -> Result<(), VolumeError> {
        match tokio::fs::remove_file(self.path_of(digest)).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(VolumeError::io("removing a blob", e)),
        }
    }

    pub(crate) async fn list(&self) -> Result<Vec<ListedBlob>, VolumeError> {
        let root = self.root.clone();
        blocking(move || {
            let mut found = Vec::new();
            let listing_error = |e| VolumeError::io("listing blobs", e);
            for fan_out in fs::read_dir(&root).map_err(listing_error)? {
                let fan_out = fan_out.map_err(listing_error)?;
                if !fan_out.file_type().map_err(listing_error)?.is_dir() {
                    continue;
                }
                for blob in fs::read_dir(fan_out.path()).map_err(listing_error)? {
                    let blob = blob.map_err(listing_error)?;
                    let Some(digest) = blob
                        .file_name()
                        .to_str()
                        .and_then(|name| Digest::parse(name).ok())
                    else {
                        continue;
                    };
                    let modified = blob
                        .metadata()
                        .and_then(|meta| meta.modified())
                        .unwrap_or(SystemTime::UNIX_EPOCH);
                    found.push(ListedBlob { digest, modified });
                }
            }
            Ok(found)
        })
        .await
    }
}

/// `path`, opened to read and write (made if missing).
fn open_rw(path: &Path) -> Result<File, VolumeError> {
    fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| VolumeError::io("opening an upload's file", e))
}

/// Place `file`'s cursor at its end; its length.
fn at_end(file: &File) -> Result<u64, VolumeError> {
    let mut cursor = file;
    io::Seek::seek(&mut cursor, io::SeekFrom::End(0))
        .map_err(|e| VolumeError::io("opening an upload's file", e))
}

fn sync_dir(dir: &Path) -> Result<(), VolumeError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| VolumeError::io("syncing a directory", e))
}
