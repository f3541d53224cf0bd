//! A file's metadata as REST clients see it, which the file routes and
//! the history's answer alike.

use api_common::headers::rfc3339;
use serde::Serialize;
use volume::FileMeta;

/// File metadata as clients see it.
#[derive(Debug, Serialize)]
pub(crate) struct MetaView {
    pub(crate) path: String,
    pub(crate) size: u64,
    pub(crate) sha256: String,
    pub(crate) content_type: String,
    /// RFC 3339, UTC.
    pub(crate) created: String,
    pub(crate) modified: String,
    /// Which version of the path this is (`null` where none are kept):
    /// what `?version=` and `?restore=` name.
    pub(crate) version_id: String,
}

impl From<&FileMeta> for MetaView {
    fn from(meta: &FileMeta) -> Self {
        Self {
            path: meta.path.clone(),
            size: meta.size,
            sha256: meta.sha256.clone(),
            content_type: meta.content_type.clone(),
            created: rfc3339(meta.created_ms),
            modified: rfc3339(meta.modified_ms),
            version_id: meta.version_id.clone(),
        }
    }
}
