//! The tree: listings, folders, what a name is, and the changes that move
//! no bytes (delete, copy, move: rows, since content is addressed by its
//! digest).

use volume::webdav::{Depth, Node, Transfer};
use volume::{FilePath, Listing, Owner, Prefix};

use crate::ServiceError;
use storage_host::pool::BodySize;

use super::{Change, FileService, LockTokens};

/// The key of the folder the file or folder `path` is in.
pub fn parent_key_of(path: &str) -> &str {
    let path = path.strip_suffix('/').unwrap_or(path);
    path.rfind('/').map_or("", |slash| &path[..=slash])
}

/// A server-side copy or move of a file or a whole folder.
#[derive(Debug, Clone, Copy)]
pub struct TransferRequest<'a> {
    pub from: &'a FilePath,
    /// The source's key: its path, or its folder prefix.
    pub from_key: &'a str,
    pub to: &'a FilePath,
    /// The destination's key as it is now (a folder's prefix if one is there).
    pub to_key: &'a str,
    pub depth: Depth,
    /// Replace what is at the destination.
    pub overwrite: bool,
}

impl FileService {
    /// One page of `owner`'s folder `prefix`, listed by an instance.
    pub async fn list(
        &self,
        owner: Owner,
        prefix: &Prefix,
        after: Option<String>,
        limit: u32,
    ) -> Result<Listing, ServiceError> {
        let lease = self.pool.lease(BodySize::None).await?;
        let listed = prefix.as_str().to_owned();
        lease
            .run(move |instance| {
                Box::pin(
                    async move { instance.list(owner, &listed, after.as_deref(), limit).await },
                )
            })
            .await?
            .map_err(|error| ServiceError::from_handler(error, prefix.as_str()))
    }

    /// One page of `owner`'s folder `prefix`, straight from the index (for
    /// the host's own answers, such as a WebDAV multistatus).
    pub async fn list_page(
        &self,
        owner: Owner,
        prefix: &Prefix,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Listing, ServiceError> {
        self.volume
            .list(owner, prefix, after, limit)
            .await
            .map_err(|error| ServiceError::from_volume(error, prefix.as_str()))
    }

    /// What `name` is in `owner`'s tree (`None`: the root).
    pub async fn node(&self, owner: Owner, name: Option<&FilePath>) -> Result<Node, ServiceError> {
        self.volume
            .node(owner, name)
            .await
            .map_err(|error| ServiceError::from_volume(error, name.map_or("/", FilePath::as_str)))
    }

    /// Whether `owner` has the folder `prefix` (made, or holding files).
    pub async fn folder_exists(&self, owner: Owner, prefix: &Prefix) -> Result<bool, ServiceError> {
        self.volume
            .folder_exists(owner, prefix)
            .await
            .map_err(|error| ServiceError::from_volume(error, prefix.as_str()))
    }

    /// Make the empty folder `prefix`; whether it was new.
    pub async fn make_folder(
        &self,
        owner: Owner,
        prefix: &Prefix,
        tokens: &LockTokens,
    ) -> Result<bool, ServiceError> {
        let parent = parent_key_of(prefix.as_str());
        self.check_locks(owner, tokens, &[Change::One(parent)])
            .await?;
        self.volume
            .make_folder(owner, prefix)
            .await
            .map_err(|error| ServiceError::from_volume(error, prefix.as_str()))
    }

    /// Delete `owner`'s file `path` (through an instance).
    pub async fn delete_file(
        &self,
        owner: Owner,
        path: &FilePath,
        tokens: &LockTokens,
    ) -> Result<(), ServiceError> {
        self.check_delete(owner, path, tokens).await?;
        let lease = self.pool.lease(BodySize::None).await?;
        let deleted = path.as_str().to_owned();
        lease
            .run(move |instance| Box::pin(async move { instance.delete(owner, &deleted).await }))
            .await?
            .map_err(|error| ServiceError::from_handler(error, path.as_str()))
    }

    /// Refuse (`Locked`) to delete `owner`'s file `path` (any of its
    /// versions) under a WebDAV lock whose token `tokens` lacks: one on the
    /// file, or on its folder, whose membership changes.
    pub(crate) async fn check_delete(
        &self,
        owner: Owner,
        path: &FilePath,
        tokens: &LockTokens,
    ) -> Result<(), ServiceError> {
        let parent = parent_key_of(path.as_str());
        self.check_locks(
            owner,
            tokens,
            &[Change::Tree(path.as_str()), Change::One(parent)],
        )
        .await
    }

    /// Delete `owner`'s folder `prefix` and everything in it.
    pub async fn delete_folder(
        &self,
        owner: Owner,
        prefix: &Prefix,
        tokens: &LockTokens,
    ) -> Result<(), ServiceError> {
        let parent = parent_key_of(prefix.as_str());
        self.check_locks(
            owner,
            tokens,
            &[Change::Tree(prefix.as_str()), Change::One(parent)],
        )
        .await?;
        self.volume
            .delete_folder(owner, prefix)
            .await
            .map(|_| ())
            .map_err(|error| ServiceError::from_volume(error, prefix.as_str()))
    }

    /// Delete `owner`'s folder `prefix` only if nothing is in it (checked
    /// and done at once); whether it was empty.
    pub async fn delete_folder_if_empty(
        &self,
        owner: Owner,
        prefix: &Prefix,
        tokens: &LockTokens,
    ) -> Result<bool, ServiceError> {
        let parent = parent_key_of(prefix.as_str());
        self.check_locks(
            owner,
            tokens,
            &[Change::One(prefix.as_str()), Change::One(parent)],
        )
        .await?;
        self.volume
            .delete_folder_if_empty(owner, prefix)
            .await
            .map_err(|error| ServiceError::from_volume(error, prefix.as_str()))
    }

    /// Copy the file `from` to the file `to` as a row, replacing only a
    /// file at `to` (S3's CopyObject: never a folder of that name).
    pub async fn copy_file(
        &self,
        owner: Owner,
        from: &FilePath,
        version: Option<&str>,
        to: &FilePath,
        tokens: &LockTokens,
    ) -> Result<volume::FileMeta, ServiceError> {
        let parent = parent_key_of(to.as_str());
        self.check_locks(
            owner,
            tokens,
            &[Change::One(to.as_str()), Change::One(parent)],
        )
        .await?;
        self.volume
            .copy_file(owner, from, version, to)
            .await
            .map_err(|error| ServiceError::from_volume(error, from.as_str()))
    }

    /// Copy (`moving`: move) a file or a whole folder as rows.
    pub async fn transfer(
        &self,
        owner: Owner,
        transfer: TransferRequest<'_>,
        moving: bool,
        tokens: &LockTokens,
    ) -> Result<Transfer, ServiceError> {
        let to_folder = format!("{}/", transfer.to.as_str());
        let to_parent = parent_key_of(transfer.to.as_str());
        let from_parent = parent_key_of(transfer.from.as_str());
        let mut changes = vec![
            Change::Tree(transfer.to_key),
            Change::Tree(&to_folder),
            Change::One(to_parent),
        ];
        if moving {
            changes.extend([Change::Tree(transfer.from_key), Change::One(from_parent)]);
        }
        self.check_locks(owner, tokens, &changes).await?;
        let done = if moving {
            self.volume
                .move_node(owner, transfer.from, transfer.to, transfer.overwrite)
                .await
        } else {
            self.volume
                .copy_node(
                    owner,
                    transfer.from,
                    transfer.to,
                    transfer.depth,
                    transfer.overwrite,
                )
                .await
        };
        done.map_err(|error| match error {
            volume::VolumeError::AlreadyExists(_) => ServiceError::PreconditionFailed(format!(
                "{} exists and may not be replaced",
                transfer.to.as_str()
            )),
            error => ServiceError::from_volume(error, transfer.from.as_str()),
        })
    }
}
