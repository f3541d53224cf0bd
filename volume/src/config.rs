//! Where a volume keeps what: its database, its blob store and this
//! process's working directory, and how long garbage collection waits
//! before it takes something over.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::blobs::{BlobUrl, S3Settings};
use crate::db::DatabaseUrl;

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
        }
    }
}
