//! Share links' rows: which owner's file at which path a link names, until
//! when. The link's token (and its signature) is the share adapter's; the
//! service decides whether a link is live.
//!
//! A link made while the gateway served openly belongs to the open tree. It
//! stops working the moment the first user exists (nobody could revoke it
//! otherwise), unless that user adopted the open tree
//! (`gateway user add --adopt-open-tree`), which makes it theirs.

use volume::accounts::Share;
use volume::{FilePath, Owner};

use crate::ServiceError;
use auth::Caller;

use super::FileService;

/// The file a live share link names.
#[derive(Debug, Clone)]
pub struct SharedFile {
    pub owner: Owner,
    pub path: FilePath,
}

impl FileService {
    /// Record link `id` to `caller`'s file `path` (which must exist).
    pub async fn share(
        &self,
        caller: &Caller,
        path: &FilePath,
        id: &str,
        expires_ms: Option<i64>,
    ) -> Result<(), ServiceError> {
        let owner = caller.owner();
        let meta = self.stat(owner, path).await?;
        self.volume
            .accounts()
            .add_share(id, owner, path, meta.created_ms, expires_ms)
            .await
            .map_err(|error| ServiceError::from_volume(error, path.as_str()))
    }

    /// The file link `id` names if it is live: known, not revoked, not
    /// expired (`expires_ms` is what the link itself says), its file the
    /// one that was shared (a file made again at the path since is another
    /// file), and, for the open tree's links, the gateway still open.
    pub async fn shared_file(
        &self,
        id: &str,
        expires_ms: Option<i64>,
    ) -> Result<SharedFile, ServiceError> {
        let gone =
            || ServiceError::NotFound("this share link (expired, revoked or unknown)".into());
        let share: Share = self
            .volume
            .accounts()
            .share(id)
            .await
            .map_err(|error| ServiceError::from_volume(error, "share"))?
            .ok_or_else(gone)?;
        if share.expires_ms != expires_ms || !share.is_live(volume::now_ms()) {
            return Err(gone());
        }
        if share.owner == Owner::OPEN
            && !self
                .auth
                .is_open()
                .await
                .map_err(|error| ServiceError::Internal(error.to_string()))?
        {
            return Err(gone());
        }
        let path = FilePath::parse(&share.path)?;
        let meta = self
            .volume
            .stat(share.owner, &path)
            .await
            .map_err(|_| gone())?;
        if meta.created_ms != share.file_created_ms {
            return Err(gone());
        }
        Ok(SharedFile {
            owner: share.owner,
            path,
        })
    }

    /// Revoke `caller`'s link `id`; whether there was one.
    pub async fn revoke_share(&self, caller: &Caller, id: &str) -> Result<bool, ServiceError> {
        self.volume
            .accounts()
            .revoke_share(id, caller.owner())
            .await
            .map_err(|error| ServiceError::from_volume(error, "share"))
    }
}
