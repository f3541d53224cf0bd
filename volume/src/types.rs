//! The ground floor: the types every module of the volume speaks in (a
//! file's metadata, a listing, digests, whose tree a file is in, the
//! index's clock). Nothing here touches the database or a blob store.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::error::VolumeError;

/// Everything the index knows about one stored file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileMeta {
    pub path: String,
    pub size: u64,
    /// Lowercase hex SHA-256 of the content: its address and ETag.
    pub sha256: String,
    /// Lowercase hex BLAKE3 of the content, which downloads are verified
    /// against (none for files stored before it was recorded).
    #[serde(skip)]
    pub blake3: Option<String>,
    pub content_type: String,
    /// Milliseconds since the Unix epoch.
    pub created_ms: i64,
    pub modified_ms: i64,
    /// What the S3 API keeps of the object (its MD5 ETag, user metadata,
    /// checksums), as its JSON; `None` when stored through another
    /// protocol. Replacing the content drops it.
    #[serde(skip)]
    pub s3_info: Option<String>,
    /// Which version of the path this is: [`NULL_VERSION`] in a tree that
    /// keeps no versions (S3's null version), else an opaque random id.
    pub version_id: String,
}

/// The version id of what an unversioned (or suspended) tree writes, as S3
/// spells it.
pub const NULL_VERSION: &str = "null";

/// One version of a path, as its history lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Version {
    /// Content: the current file, or an earlier one kept.
    File {
        meta: FileMeta,
        /// Whether it is the path's latest version (its current file).
        latest: bool,
    },
    /// A delete: the path reads as absent while it is the latest.
    DeleteMarker {
        path: String,
        version_id: String,
        /// When the delete happened.
        made_ms: i64,
        latest: bool,
    },
}

impl Version {
    pub fn path(&self) -> &str {
        match self {
            Self::File { meta, .. } => &meta.path,
            Self::DeleteMarker { path, .. } => path,
        }
    }

    pub fn version_id(&self) -> &str {
        match self {
            Self::File { meta, .. } => &meta.version_id,
            Self::DeleteMarker { version_id, .. } => version_id,
        }
    }

    pub fn is_latest(&self) -> bool {
        match self {
            Self::File { latest, .. } | Self::DeleteMarker { latest, .. } => *latest,
        }
    }

    /// When it was made: a file's last modification, a delete's time.
    pub fn modified_ms(&self) -> i64 {
        match self {
            Self::File { meta, .. } => meta.modified_ms,
            Self::DeleteMarker { made_ms, .. } => *made_ms,
        }
    }
}

/// Whether a tree keeps the versions it replaces and deletes, as S3 names
/// the states of a bucket's versioning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Versioning {
    /// Never configured, and not kept by default: a replace or a delete is
    /// final.
    Unversioned,
    /// Every write makes a new version; a delete leaves a delete marker.
    Enabled,
    /// Versions made so far stay; new writes (and deletes' markers) take
    /// the null version, replacing it.
    Suspended,
}

impl Versioning {
    pub(crate) fn as_db(self) -> &'static str {
        match self {
            Self::Unversioned => "unversioned",
            Self::Enabled => "enabled",
            Self::Suspended => "suspended",
        }
    }

    pub(crate) fn from_db(state: &str) -> Self {
        match state {
            "enabled" => Self::Enabled,
            "suspended" => Self::Suspended,
            _ => Self::Unversioned,
        }
    }
}

/// What the operator chose for trees whose versioning S3 never set:
/// every user's tree, unless a bucket made through S3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryPolicy {
    /// Keep replaced and deleted files (`--versions`).
    pub versions: bool,
    /// How long a replaced or deleted file is kept (`--trash-retention`).
    pub retention: std::time::Duration,
}

/// 30 days, as Nextcloud keeps deleted files.
pub const DEFAULT_RETENTION: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

impl Default for HistoryPolicy {
    fn default() -> Self {
        Self {
            versions: true,
            retention: DEFAULT_RETENTION,
        }
    }
}

/// The version id the file an upload completes takes where versions are
/// made: known before the upload is stored (S3 answers a multipart
/// completion's headers first), as unguessable as the upload's own id,
/// and unique as it is.
pub fn upload_version_id(upload_id: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(format!("version of upload {upload_id}").as_bytes());
    hex::encode(&digest[..16])
}

/// A new version id: 128 random bits in hex, unguessable and never
/// [`NULL_VERSION`].
pub(crate) fn new_version_id() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// What [`Volume::put_with`] keeps beside a file's content.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stored<'a> {
    /// What the S3 API keeps of an object, as JSON, in the same row.
    pub s3_info: Option<&'a str>,
    /// The upload whose parts this file is made of: they count against
    /// the owner's quota until the file is stored, and not beside it.
    pub completes: Option<&'a str>,
    /// The object lock its write asks for (S3's `x-amz-object-lock-*`);
    /// without one, the bucket's default retention applies.
    pub lock: Option<crate::VersionLock>,
}

/// One row of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    File(FileMeta),
    /// A folder's full prefix, ending with `/`.
    Folder(String),
}

impl Entry {
    /// The full path of the file, or the folder's prefix.
    pub fn name(&self) -> &str {
        match self {
            Self::File(meta) => &meta.path,
            Self::Folder(prefix) => prefix,
        }
    }
}

/// One page of a folder listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    pub entries: Vec<Entry>,
    /// Pass as `after` for the next page; `None` on the last page.
    pub next_after: Option<String>,
}

/// What an instance computed of an upload's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digests {
    /// SHA-256: the content's address and ETag.
    pub sha256: Digest,
    /// BLAKE3: what downloads are verified against. Without it they are
    /// verified by SHA-256.
    pub blake3: Option<Digest>,
}

/// A validated 256-bit digest (SHA-256 or BLAKE3) in lowercase hex.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Digest(String);

impl Digest {
    pub fn parse(hex: &str) -> Result<Self, VolumeError> {
        let valid = hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if valid {
            Ok(Self(hex.to_owned()))
        } else {
            Err(VolumeError::InvalidDigest(hex.chars().take(80).collect()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whose tree a file lives in: a user's, or the open tree that serves
/// while no user exists. Every file operation names one, so no request
/// reaches a file outside its caller's tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Owner(i64);

impl Owner {
    /// The tree of a gateway without users (loopback only).
    pub const OPEN: Self = Self(0);

    /// The tree of the user with this id.
    pub fn user(id: UserId) -> Self {
        Self(id.0)
    }

    /// The user whose tree this is; `None` for the open tree.
    pub fn user_id(self) -> Option<UserId> {
        (self != Self::OPEN).then_some(UserId(self.0))
    }

    /// The owner's id in the database: a user's id, or 0.
    pub(crate) fn id(self) -> i64 {
        self.0
    }

    /// The owner of the tree with database id `id`.
    pub(crate) fn from_id(id: i64) -> Self {
        Self(id)
    }
}

/// A user's id in the database (never 0: that is [`Owner::OPEN`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UserId(pub(crate) i64);

impl UserId {
    /// The number, to show.
    pub fn get(self) -> i64 {
        self.0
    }
}

/// What a garbage collection (or the sweep at open) found and removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    /// Temp files of writes that never finished (at open only).
    pub temp_files_removed: usize,
    /// Blobs no file names any more: unrecorded ones older than the grace
    /// period, stored ones whose removal never ran, removals left unfinished.
    pub orphan_blobs_removed: usize,
    /// Files whose blob is missing (logged; they read as an error).
    pub files_missing_blobs: usize,
    /// Resumable uploads expired (or parts left without an upload) and removed.
    pub uploads_removed: usize,
    /// Segments of packed blobs compacted: their live blobs moved, their
    /// file removed.
    pub segments_compacted: usize,
}

/// Milliseconds since the Unix epoch, the timestamps of the index.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}
