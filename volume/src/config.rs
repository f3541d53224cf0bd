//! Where a volume keeps what: its database, its blob store and this
//! process's working directory (and the directory's id, which names the
//! removals it claims), and how long garbage collection waits before it
//! takes something over.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::blobs::{BlobUrl, S3Settings};
use crate::db::DatabaseUrl;
use crate::error::VolumeError;
use crate::types::HistoryPolicy;

/// The file in a data directory that holds the directory's id.
const CLAIMANT_FILE: &str = "claimant";

/// How long a blob the ledger does not know is left alone, by default: an
/// upload on some gateway may have written it and be about to record it.
pub const DEFAULT_ORPHAN_GRACE: Duration = Duration::from_secs(10 * 60);

/// How long a removal may run, by default, before another process takes it
/// over (its remover presumably stopped). It must outlast any one removal,
/// S3 retries included (`object_store` gives up after 3 minutes), or a late
/// delete could remove a blob written again since.
pub const DEFAULT_REMOVAL_LEASE: Duration = Duration::from_secs(5 * 60);

/// Where a volume keeps what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeConfig {
    /// This process's working directory: uploads are staged in its `tmp/`
    /// (always local). By default it also holds the index and the blobs.
    pub data_dir: PathBuf,
    pub database: DatabaseUrl,
    pub blobs: BlobUrl,
    /// For an S3 blob store: settings over the `AWS_*` environment.
    pub s3: S3Settings,
    /// Blobs in the store that the ledger does not know are collected once
    /// they are this old (see [`DEFAULT_ORPHAN_GRACE`]).
    pub orphan_grace: Duration,
    /// A removal running longer than this is taken over (see
    /// [`DEFAULT_REMOVAL_LEASE`]). Gateways' clocks must agree to well
    /// within it.
    pub removal_lease: Duration,
    /// Whether trees S3 set no versioning for keep versions and a trash,
    /// and for how long.
    pub history: HistoryPolicy,
    /// How long a day of lifecycle rules is: a day, except under the test
    /// clock (`--lifecycle-test-day`), which only a gateway on loopback
    /// accepts.
    pub lifecycle_day: Duration,
    /// Whether blobs of up to 64 KiB on a local store are packed into
    /// segment files (the default) rather than a file each.
    pub pack_small_blobs: bool,
}

impl VolumeConfig {
    /// The embedded defaults: `index.sqlite` and `blobs/` in `data_dir`.
    pub fn in_data_dir(data_dir: &Path) -> Self {
        Self {
            data_dir: data_dir.to_path_buf(),
            database: DatabaseUrl::in_data_dir(data_dir),
            blobs: BlobUrl::Local(data_dir.join("blobs")),
            s3: S3Settings::default(),
            orphan_grace: DEFAULT_ORPHAN_GRACE,
            removal_lease: DEFAULT_REMOVAL_LEASE,
            history: HistoryPolicy::default(),
            lifecycle_day: Duration::from_secs(24 * 3600),
            pack_small_blobs: true,
        }
    }
}

/// Who claims this process's removals: the data directory's id, held with
/// an exclusive lock on its file for as long as the returned [`Claimant`]
/// lives; or, when another live process holds it (two processes on one
/// data directory), an id of this process's own, which takes over nothing
/// at start (the other's claims may be in progress).
pub(crate) fn claimant(data_dir: &Path) -> Result<Claimant, VolumeError> {
    let id = claimant_id(data_dir)?;
    let file = std::fs::File::open(data_dir.join(CLAIMANT_FILE))
        .map_err(|e| VolumeError::io("opening the data directory's id", e))?;
    match file.try_lock() {
        Ok(()) => Ok(Claimant {
            id,
            _lock: Some(file),
        }),
        Err(std::fs::TryLockError::WouldBlock) => {
            tracing::warn!(
                "another process uses this data directory: this one's interrupted removals \
                 will be finished by the collection after --removal-lease"
            );
            Ok(Claimant {
                id: new_claimant_id(),
                _lock: None,
            })
        }
        Err(std::fs::TryLockError::Error(e)) => {
            Err(VolumeError::io("locking the data directory's id", e))
        }
    }
}

/// The id this process's removals carry, and the lock that makes it the
/// data directory's alone (`None`: an id of this process's own).
#[derive(Debug)]
pub(crate) struct Claimant {
    pub(crate) id: String,
    _lock: Option<std::fs::File>,
}

impl Claimant {
    /// Whether the id is the data directory's, held by this process alone:
    /// only then are the removals it names this process's to finish at once.
    pub(crate) fn owns_directory(&self) -> bool {
        self._lock.is_some()
    }
}

/// The id of `data_dir`, made on first use: the ledger names the removals a
/// process claims by it, so the next process on the same directory (one at
/// a time holds it, see [`claimant`]) knows which unfinished removals were its own.
fn claimant_id(data_dir: &Path) -> Result<String, VolumeError> {
    let file = data_dir.join(CLAIMANT_FILE);
    match std::fs::read_to_string(&file) {
        Ok(id) if is_claimant_id(id.trim()) => return Ok(id.trim().to_owned()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(VolumeError::io("reading the data directory's id", e)),
    }
    let id = new_claimant_id();
    // Whole or absent: written aside, made durable, then renamed in place.
    let io = |e| VolumeError::io("writing the data directory's id", e);
    let mut staged = tempfile::NamedTempFile::new_in(data_dir).map_err(io)?;
    staged.write_all(id.as_bytes()).map_err(io)?;
    staged.as_file().sync_all().map_err(io)?;
    staged.persist(&file).map_err(|e| io(e.error))?;
    Ok(id)
}

/// 32 lowercase hex digits.
fn is_claimant_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// 128 random bits (the standard library's per-process hash keys, over the
/// time and the process id), as hex.
fn new_claimant_id() -> String {
    use std::hash::BuildHasher as _;
    let seed = (std::process::id(), crate::types::now_ms(), nanos_now());
    let random = std::collections::hash_map::RandomState::new();
    let (high, low) = (random.hash_one(seed), random.hash_one((seed, 1u8)));
    format!("{high:016x}{low:016x}")
}

/// Nanoseconds now: two ids made in one millisecond still differ.
fn nanos_now() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_data_directory_keeps_its_id() {
        let dir = tempfile::tempdir().unwrap();
        let id = claimant_id(dir.path()).unwrap();
        assert!(is_claimant_id(&id), "{id}");
        assert_eq!(claimant_id(dir.path()).unwrap(), id);
        let other = tempfile::tempdir().unwrap();
        assert_ne!(claimant_id(other.path()).unwrap(), id);
        // Held by one process (here, one value) at a time.
        let first = claimant(dir.path()).unwrap();
        assert_eq!(first.id, id);
        assert!(first.owns_directory());
        let second = claimant(dir.path()).unwrap();
        assert_ne!(second.id, id);
        assert!(!second.owns_directory());
        drop(first);
        assert!(claimant(dir.path()).unwrap().owns_directory());
    }
}
