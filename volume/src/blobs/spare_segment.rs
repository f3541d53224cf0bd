//! Segments written as zeros ahead of the appends, as PostgreSQL writes its
//! WAL segments. An `fdatasync` after a record written over blocks that are
//! already allocated and written has only that data to write; after an
//! append it must also write the inode (the size changed) and the
//! allocation's metadata. On this machine's disk (ext4), 4 KiB records
//! synced one by one ran at 3427 and 2325/s appended, 5606 and 4825/s over
//! zeros (`docs/benchmarks.md`).
//!
//! The spare is an unnamed file (`O_TMPFILE`) in the segment folder,
//! zero-filled and synced on a blocking thread while the open segment
//! fills, and linked under the next segment's number when that one opens
//! (`linkat`, which fails if the name is taken, as `create_new` does). A
//! crash before the link leaves nothing behind: an unnamed file is freed
//! with its last descriptor. A filesystem without unnamed files gets no
//! spares, and its segments grow by appends as before.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use rustix::fs::{AtFlags, CWD, Mode, OFlags};

use super::shared::SEGMENT_TARGET;

/// A spare is prepared when the open segment's records pass this much
/// (once per segment: the record that crosses it asks): a store that has
/// packed 4 MiB is packing, and one that packs a little never pays for
/// 32 MiB of zeros.
pub(super) const SPARE_AFTER: u64 = SEGMENT_TARGET / 8;

/// The zeros written at a time.
const ZEROS: usize = 1 << 20;

/// The next segment's file, made ahead.
#[derive(Debug)]
pub(super) struct Spares {
    dir: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug)]
enum State {
    Idle,
    Preparing,
    Ready(File),
    /// The last attempt failed (a full disk most likely); the next segment
    /// tries again.
    Failed,
    /// This filesystem has no unnamed files.
    Unsupported,
}

impl Spares {
    pub(super) fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_owned(),
            state: Mutex::new(State::Idle),
        }
    }

    /// Start making a spare on a blocking thread, unless one is made or
    /// under way, or none can be made here.
    pub(super) fn prepare(self: &Arc<Self>) {
        {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            if !matches!(*state, State::Idle | State::Failed) {
                return;
            }
            *state = State::Preparing;
        }
        let spares = self.clone();
        drop(tokio::task::spawn_blocking(move || {
            let made = zero_filled(&spares.dir);
            let mut state = spares.state.lock().unwrap_or_else(PoisonError::into_inner);
            *state = match made {
                Ok(file) => State::Ready(file),
                Err(error) if unsupported(&error) => {
                    tracing::debug!(%error, "no unnamed files here: segments grow by appends");
                    State::Unsupported
                }
                Err(error) => {
                    tracing::warn!(%error, "a spare segment could not be made; segments grow by appends");
                    State::Failed
                }
            };
        }));
    }

    /// Make no more spares (they cannot be named here).
    pub(super) fn unsupported(&self) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = State::Unsupported;
    }

    /// Whether a spare is ready; `None` if none will be (none can be made
    /// here, or the last attempt failed).
    #[cfg(test)]
    pub(super) fn ready(&self) -> Option<bool> {
        match *self.state.lock().unwrap_or_else(PoisonError::into_inner) {
            State::Ready(_) => Some(true),
            State::Preparing | State::Idle => Some(false),
            State::Failed | State::Unsupported => None,
        }
    }

    /// The spare, if one is ready.
    pub(super) fn take(&self) -> Option<File> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match std::mem::replace(&mut *state, State::Idle) {
            State::Ready(file) => Some(file),
            other => {
                *state = other;
                None
            }
        }
    }
}

/// A spare is not made on a filesystem with less than this free: 32 MiB
/// of zeros must not be what fills a disk that files still fit on.
const ROOM_FOR_SPARE: u64 = 8 * SEGMENT_TARGET;

/// An unnamed file in `dir` of [`SEGMENT_TARGET`] zeros, durable (its
/// blocks and its inode).
fn zero_filled(dir: &Path) -> io::Result<File> {
    let room = rustix::fs::statvfs(dir)?;
    if room.f_bavail.saturating_mul(room.f_frsize) < ROOM_FOR_SPARE {
        return Err(io::Error::new(
            io::ErrorKind::StorageFull,
            "too little free space for a spare segment",
        ));
    }
    let fd = rustix::fs::open(
        dir,
        OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )?;
    let file = File::from(fd);
    let zeros = vec![0; ZEROS];
    let mut at = 0;
    while at < SEGMENT_TARGET {
        std::os::unix::fs::FileExt::write_all_at(&file, &zeros, at)?;
        at += ZEROS as u64;
    }
    file.sync_all()?;
    Ok(file)
}

fn unsupported(error: &io::Error) -> bool {
    use rustix::io::Errno;
    Errno::from_io_error(error)
        .is_some_and(|errno| [Errno::OPNOTSUPP, Errno::ISDIR, Errno::INVAL].contains(&errno))
}

/// Give unnamed `file` the name `path`; `AlreadyExists` if it is taken.
/// Through `/proc/self/fd`, which needs no privilege, else `AT_EMPTY_PATH`
/// (which needs `CAP_DAC_READ_SEARCH`) where `/proc` is not mounted.
pub(super) fn link(file: &File, path: &Path) -> io::Result<()> {
    let proc_path = format!("/proc/self/fd/{}", file.as_raw_fd());
    match rustix::fs::linkat(CWD, &proc_path, CWD, path, AtFlags::SYMLINK_FOLLOW) {
        Err(rustix::io::Errno::NOENT) if !Path::new("/proc/self/fd").exists() => Ok(
            rustix::fs::linkat(file, "", CWD, path, AtFlags::EMPTY_PATH)?,
        ),
        linked => Ok(linked?),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt as _;

    use super::*;

    /// A spare is made in the background, holds zeros, and once linked is
    /// a file of that name; a name already taken is refused.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_spare_is_zeros_linked_under_a_free_name() {
        let dir = tempfile::tempdir().expect("temp dir");
        let spares = Arc::new(Spares::new(dir.path()));
        spares.prepare();
        let file = loop {
            if let Some(file) = spares.take() {
                break file;
            }
            if spares.ready().is_none() {
                eprintln!(
                    "skipped: no spare can be made here (no O_TMPFILE, or under 256 MiB free)"
                );
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        };
        assert!(spares.take().is_none(), "a spare is taken once");
        let mut some = [1; 4096];
        file.read_exact_at(&mut some, SEGMENT_TARGET - 4096)
            .expect("read");
        assert!(some.iter().all(|&b| b == 0));
        std::fs::write(dir.path().join("1"), b"taken").expect("write");
        let refused = link(&file, &dir.path().join("1")).expect_err("the name is taken");
        assert_eq!(refused.kind(), io::ErrorKind::AlreadyExists);
        link(&file, &dir.path().join("2")).expect("linked");
        file.write_all_at(b"record", 0).expect("write");
        let named = std::fs::read(dir.path().join("2")).expect("read");
        assert_eq!(named.len() as u64, SEGMENT_TARGET);
        assert_eq!(&named[..6], b"record");
    }
}
