//! WebDAV's dead properties: values a client stores beside a file or a
//! folder, by key. They count against their owner's quota like file bytes
//! (the volume checks as it writes them), so a user cannot store around
//! the quota in properties.

use std::collections::HashMap;

use volume::Owner;
use volume::webdav::{DeadProperty, PropertyChange};

use crate::ServiceError;

use super::{Change, FileService, LockTokens};

impl FileService {
    /// The dead properties of each of `keys` in `owner`'s tree.
    pub async fn properties_of(
        &self,
        owner: Owner,
        keys: &[String],
    ) -> Result<HashMap<String, Vec<DeadProperty>>, ServiceError> {
        let mut found = HashMap::<String, Vec<DeadProperty>>::new();
        if keys.is_empty() {
            return Ok(found);
        }
        for (key, property) in self
            .volume
            .webdav()
            .properties_of(owner, keys)
            .await
            .map_err(|error| ServiceError::from_volume(error, &keys[0]))?
        {
            found.entry(key).or_default().push(property);
        }
        Ok(found)
    }

    /// When each of the folders `keys` was made on purpose (those that were).
    pub async fn folders_made(
        &self,
        owner: Owner,
        keys: &[String],
    ) -> Result<HashMap<String, i64>, ServiceError> {
        if keys.is_empty() {
            return Ok(HashMap::new());
        }
        self.volume
            .webdav()
            .folders_made(owner, keys)
            .await
            .map_err(|error| ServiceError::from_volume(error, &keys[0]))
    }

    /// Set and remove dead properties of `key`, all or nothing; past the
    /// quota, 507.
    pub async fn change_properties(
        &self,
        owner: Owner,
        key: &str,
        changes: &[PropertyChange],
        tokens: &LockTokens,
    ) -> Result<(), ServiceError> {
        self.check_locks(owner, tokens, &[Change::One(key)]).await?;
        self.volume
            .webdav()
            .change_properties(owner, key, changes)
            .await
            .map_err(|error| ServiceError::from_volume(error, key))
    }

    /// Drop whatever properties and locks a vanished resource left at `key`.
    pub async fn forget(&self, owner: Owner, key: &str) -> Result<(), ServiceError> {
        self.volume
            .webdav()
            .forget(owner, key)
            .await
            .map_err(|error| ServiceError::from_volume(error, key))
    }
}
