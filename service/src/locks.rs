//! WebDAV's locks, which hold for every protocol: a change to a locked file
//! or folder is made only for a request that submits the lock's token.
//! Locks live in the database, so they hold across gateways.

use std::collections::HashMap;

use axum::body::Body;

use volume::webdav::{DavLock, LockOutcome, NewLock};
use volume::{FilePath, Owner};

use crate::ServiceError;
use auth::Caller;

use super::{FileService, StoreOptions};

/// What a request changes, for the locks that must have been submitted.
#[derive(Debug, Clone, Copy)]
pub enum Change<'a> {
    /// The resource of this key (a folder's membership, for a new member).
    One(&'a str),
    /// The resource of this key and everything under it.
    Tree(&'a str),
}

/// The lock tokens a request submits (in WebDAV's `If` header), or why
/// its `If` header could not be read: that matters (400) only where a
/// lock covers what the request changes, as it did before any lock existed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockTokens {
    Submitted(Vec<String>),
    Unreadable(String),
}

impl Default for LockTokens {
    fn default() -> Self {
        Self::Submitted(Vec::new())
    }
}

impl LockTokens {
    pub fn new(tokens: Vec<String>) -> Self {
        Self::Submitted(tokens)
    }

    /// These tokens and `token`.
    fn and(&self, token: &str) -> Self {
        match self {
            Self::Submitted(tokens) => {
                let mut tokens = tokens.clone();
                tokens.push(token.to_owned());
                Self::Submitted(tokens)
            }
            Self::Unreadable(_) => Self::Submitted(vec![token.to_owned()]),
        }
    }

    fn contains(&self, token: &str) -> Result<bool, ServiceError> {
        match self {
            Self::Submitted(tokens) => Ok(tokens.iter().any(|submitted| submitted == token)),
            Self::Unreadable(why) => Err(ServiceError::BadRequest(why.clone())),
        }
    }
}

/// Refuse (`423`, naming the lock's root key) a change that a lock covers
/// unless `tokens` submits the lock's token.
pub(crate) fn refuse_locked(
    locks: &[DavLock],
    tokens: &LockTokens,
    changes: &[Change<'_>],
) -> Result<(), ServiceError> {
    for change in changes {
        let (key, tree) = match *change {
            Change::One(key) => (key, false),
            Change::Tree(key) => (key, true),
        };
        for lock in locks {
            if (lock.covers(key) || (tree && lock.within(key))) && !tokens.contains(&lock.token)? {
                return Err(ServiceError::Locked(lock.root.clone()));
            }
        }
    }
    Ok(())
}

impl FileService {
    /// Every live lock in `owner`'s tree.
    pub async fn locks(&self, owner: Owner) -> Result<Vec<DavLock>, ServiceError> {
        self.volume
            .webdav()
            .locks(owner)
            .await
            .map_err(|error| ServiceError::from_volume(error, "locks"))
    }

    /// The locks' holders (their `DAV:owner` fragments), by token.
    pub async fn lock_holders(
        &self,
        owner: Owner,
    ) -> Result<HashMap<String, String>, ServiceError> {
        self.volume
            .webdav()
            .holders(owner)
            .await
            .map_err(|error| ServiceError::from_volume(error, "locks"))
    }

    /// Refuse (`423`) `changes` to `owner`'s tree that a live lock covers
    /// unless `tokens` submits its token. One small query, and only when the
    /// tree has locks does anything more happen.
    pub async fn check_locks(
        &self,
        owner: Owner,
        tokens: &LockTokens,
        changes: &[Change<'_>],
    ) -> Result<(), ServiceError> {
        let locks = self.locks(owner).await?;
        if locks.is_empty() {
            return Ok(());
        }
        refuse_locked(&locks, tokens, changes)
    }

    /// Take `lock` in `caller`'s tree. `creates`: the lock is on an unmapped
    /// name, which becomes an empty file (RFC 4918 §7.3) unless a file
    /// appeared there meanwhile; `tokens` are what the request submits for
    /// the locks on its folder. `None`: another lock conflicts.
    pub async fn lock(
        &self,
        caller: &Caller,
        lock: NewLock,
        creates: Option<&FilePath>,
        tokens: &LockTokens,
    ) -> Result<Option<DavLock>, ServiceError> {
        let owner = caller.owner();
        let root = lock.root.clone();
        let granted = self
            .volume
            .webdav()
            .lock(owner, lock)
            .await
            .map_err(|error| ServiceError::from_volume(error, &root))?;
        let lock = match granted {
            LockOutcome::Granted(lock) => lock,
            LockOutcome::Conflict => return Ok(None),
            LockOutcome::TooMany => {
                return Err(ServiceError::Unavailable(format!(
                    "this tree holds {} locks already",
                    volume::webdav::MAX_LOCKS_PER_OWNER
                )));
            }
        };
        if let Some(path) = creates {
            let options = StoreOptions {
                declared: Some(0),
                create_only: true,
                ..StoreOptions::default()
            };
            let tokens = tokens.and(&lock.token);
            let stored = self
                .store(caller, path, Body::empty(), options, &tokens)
                .await;
            if let Err(error) = stored {
                let _ = self.volume.webdav().unlock(owner, &lock.token).await;
                return Err(error);
            }
        }
        Ok(Some(lock))
    }

    /// Give `owner`'s lock `token` a new timeout; `None` if it expired.
    pub async fn refresh_lock(
        &self,
        owner: Owner,
        token: &str,
        timeout_s: u64,
    ) -> Result<Option<DavLock>, ServiceError> {
        self.volume
            .webdav()
            .refresh_lock(owner, token, timeout_s)
            .await
            .map_err(|error| ServiceError::from_volume(error, "locks"))
    }

    /// Release `owner`'s lock `token`.
    pub async fn unlock(&self, owner: Owner, token: &str) -> Result<(), ServiceError> {
        self.volume
            .webdav()
            .unlock(owner, token)
            .await
            .map(|_| ())
            .map_err(|error| ServiceError::from_volume(error, "locks"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(root: &str, infinite: bool, token: &str) -> DavLock {
        DavLock {
            token: token.into(),
            root: root.into(),
            infinite,
            exclusive: true,
            timeout_s: 60,
            expires_ms: i64::MAX,
        }
    }

    #[test]
    fn a_covered_change_needs_the_token() {
        let locks = [lock("a/", true, "urn:1")];
        let none = LockTokens::default();
        let with = LockTokens::new(vec!["urn:1".into()]);
        assert!(matches!(
            refuse_locked(&locks, &none, &[Change::One("a/b.txt")]),
            Err(ServiceError::Locked(root)) if root == "a/"
        ));
        assert!(refuse_locked(&locks, &with, &[Change::One("a/b.txt")]).is_ok());
        assert!(refuse_locked(&locks, &none, &[Change::One("c.txt")]).is_ok());
        // A tree change meets a lock inside the tree.
        let inner = [lock("t/u/v.txt", false, "urn:2")];
        assert!(refuse_locked(&inner, &none, &[Change::Tree("t/")]).is_err());
        assert!(refuse_locked(&inner, &none, &[Change::One("t/")]).is_ok());
        // An unreadable If header matters only where a lock is met.
        let unreadable = LockTokens::Unreadable("bad If".into());
        assert!(refuse_locked(&locks, &unreadable, &[Change::One("c.txt")]).is_ok());
        assert!(matches!(
            refuse_locked(&locks, &unreadable, &[Change::One("a/b.txt")]),
            Err(ServiceError::BadRequest(_))
        ));
    }
}
