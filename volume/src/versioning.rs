//! The `versioning` table: a bucket's versioning as S3 set it
//! (`PutBucketVersioning`), by its top-level folder. A path outside any
//! such folder follows the operator's [`HistoryPolicy`]: every user's tree
//! keeps versions unless the operator says otherwise, and a bucket made
//! through S3 is made unversioned, as S3 makes one.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::db::Conn;

use crate::db::owned::{Adopt, OwnedRows};
use crate::db::{Database, sql};
use crate::error::VolumeError;
use crate::object_lock::BucketLock;
use crate::types::{HistoryPolicy, Owner, Versioning};

/// How a path's versions are kept: the state, and whether S3 set it (its
/// versions stay until deleted) or the operator's default did (the
/// retention expires them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Keeping {
    pub(crate) state: Versioning,
    pub(crate) by_s3: bool,
    /// The bucket's object lock, if it has one: its default retention
    /// goes to every new version that asks for none.
    pub(crate) lock: Option<BucketLock>,
}

impl Keeping {
    /// Whether what a replace or delete takes is kept.
    pub(crate) fn keeps(self) -> bool {
        self.state != Versioning::Unversioned
    }

    /// Whether the operator's retention expires what is kept.
    pub(crate) fn retained(self) -> bool {
        !self.by_s3
    }
}

/// The versioning rows, for `owners`' cascades: a user's go with them;
/// the open tree's go to a user who adopts it, a bucket both have keeping
/// the user's.
pub(crate) const OWNED: OwnedRows = OwnedRows::new("versioning", "owner", Adopt::KeepingTheirs);

/// The key of the bucket `path` lies in: its top-level folder (`name/`),
/// or `None` for a file at the root.
fn bucket_key(path: &str) -> Option<&str> {
    path.find('/').map(|slash| &path[..=slash])
}

/// How `path` of `owner` keeps its versions, read on `conn`.
pub(crate) async fn keeping(
    conn: &mut Conn,
    owner: Owner,
    path: &str,
    policy: HistoryPolicy,
) -> Result<Keeping, VolumeError> {
    let set = match bucket_key(path) {
        Some(key) => set_state(conn, owner, key).await?,
        None => None,
    };
    Ok(keeping_of(set, policy))
}

/// [`keeping`], read outside any transaction (on SQLite on the caller's
/// thread): what a store of a file asks before it takes its turn to
/// write, so the writers' serialised part stays short. A versioning set
/// meanwhile applies from the next write, as S3's takes a while to apply.
pub(crate) async fn keeping_now(
    db: &Database,
    states: &StateCache,
    owner: Owner,
    path: &str,
    policy: HistoryPolicy,
) -> Result<Keeping, VolumeError> {
    let set = match bucket_key(path) {
        Some(key) => states.get(db, owner, &key[..key.len() - 1]).await?,
        None => None,
    };
    Ok(keeping_of(set, policy))
}

/// How long this process trusts a bucket's versioning as it read it.
const TRUSTED_FOR: Duration = Duration::from_secs(1);

/// Most buckets remembered (past it, all are forgotten and read again).
const MOST_REMEMBERED: usize = 4096;

/// What S3 set for a bucket: its versioning, and its object lock if it
/// enabled one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BucketState {
    pub(crate) versioning: Versioning,
    pub(crate) lock: Option<BucketLock>,
}

/// What S3 set for buckets, as this process last read it: every read and
/// write of an object asks, and it rarely changes. A state read is trusted
/// for [`TRUSTED_FOR`], so another gateway's change applies within it (S3's
/// own take a while to apply); this process's own changes apply at once.
#[derive(Debug, Default)]
pub(crate) struct StateCache(Mutex<HashMap<BucketOf, Remembered>>);

/// A bucket: its owner's id and its name.
type BucketOf = (i64, String);

/// What S3 set for a bucket, and when this process read it.
type Remembered = (Option<BucketState>, Instant);

impl StateCache {
    /// What S3 set for `owner`'s bucket `bucket`, if it did.
    pub(crate) async fn get(
        &self,
        db: &Database,
        owner: Owner,
        bucket: &str,
    ) -> Result<Option<BucketState>, VolumeError> {
        let key = (owner.id(), bucket.to_owned());
        if let Some((state, read)) = self.entries().get(&key)
            && read.elapsed() < TRUSTED_FOR
        {
            return Ok(*state);
        }
        let state = get(db, owner, bucket).await?;
        self.remember(owner, bucket, state);
        Ok(state)
    }

    /// `state` is what `owner`'s bucket `bucket` has now.
    pub(crate) fn remember(&self, owner: Owner, bucket: &str, state: Option<BucketState>) {
        let mut entries = self.entries();
        if entries.len() >= MOST_REMEMBERED {
            entries.clear();
        }
        entries.insert((owner.id(), bucket.to_owned()), (state, Instant::now()));
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<BucketOf, Remembered>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// How a path keeps versions given what S3 `set` for its bucket.
fn keeping_of(set: Option<BucketState>, policy: HistoryPolicy) -> Keeping {
    match set {
        Some(BucketState { versioning, lock }) => Keeping {
            state: versioning,
            by_s3: true,
            lock,
        },
        None => Keeping {
            state: if policy.versions {
                Versioning::Enabled
            } else {
                Versioning::Unversioned
            },
            by_s3: false,
            lock: None,
        },
    }
}

/// What S3 set for the bucket `bucket` (its name), if it did, read from
/// the database (see [`StateCache`]).
async fn get(
    db: &Database,
    owner: Owner,
    bucket: &str,
) -> Result<Option<BucketState>, VolumeError> {
    let key = format!("{bucket}/");
    if let Some(reader) = db.sync_reader() {
        // Asked by S3's reads of unversioned objects: on the caller's
        // thread, as a file's lookup (`db::reader`).
        let row = reader.read(|connection| {
            use rusqlite::OptionalExtension as _;
            connection
                .prepare_cached(
                    "SELECT state, object_lock FROM versioning WHERE owner = ?1 AND path = ?2",
                )?
                .query_row((owner.id(), key.as_str()), |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?))
                })
                .optional()
        })?;
        return Ok(row.map(|(state, lock)| state_of(&state, lock.as_deref())));
    }
    let mut conn = db.connection().await?;
    set_state(&mut conn, owner, &key).await
}

/// What S3 set for the bucket whose folder is `key` (`name/`), read on
/// `conn`.
pub(crate) async fn set_state(
    conn: &mut Conn,
    owner: Owner,
    key: &str,
) -> Result<Option<BucketState>, VolumeError> {
    let row: Option<(String, Option<String>)> =
        sql::query_as("SELECT state, object_lock FROM versioning WHERE owner = $1 AND path = $2")
            .bind(owner.id())
            .bind(key)
            .fetch_optional(conn)
            .await?;
    Ok(row.map(|(state, lock)| state_of(&state, lock.as_deref())))
}

fn state_of(state: &str, lock: Option<&str>) -> BucketState {
    BucketState {
        versioning: Versioning::from_db(state),
        lock: lock.map(BucketLock::from_db),
    }
}

/// Enable object lock on the bucket `bucket` inside `tx`, with `lock`'s
/// default retention (its versioning is on: the caller checked).
pub(crate) async fn set_lock(
    tx: &mut Conn,
    owner: Owner,
    bucket: &str,
    lock: BucketLock,
) -> Result<(), VolumeError> {
    sql::query("UPDATE versioning SET object_lock = $3 WHERE owner = $1 AND path = $2")
        .bind(owner.id())
        .bind(format!("{bucket}/"))
        .bind(lock.to_db())
        .execute(tx)
        .await?;
    Ok(())
}

/// Set the bucket `bucket`'s versioning inside `tx`.
pub(crate) async fn set(
    tx: &mut Conn,
    owner: Owner,
    bucket: &str,
    state: Versioning,
) -> Result<(), VolumeError> {
    sql::query(
        "INSERT INTO versioning (owner, path, state) VALUES ($1, $2, $3)
         ON CONFLICT (owner, path) DO UPDATE SET state = excluded.state",
    )
    .bind(owner.id())
    .bind(format!("{bucket}/"))
    .bind(state.as_db())
    .execute(tx)
    .await?;
    Ok(())
}

/// Forget the bucket `bucket`'s versioning inside `tx` (it was deleted).
pub(crate) async fn forget(tx: &mut Conn, owner: Owner, bucket: &str) -> Result<(), VolumeError> {
    sql::query("DELETE FROM versioning WHERE owner = $1 AND path = $2")
        .bind(owner.id())
        .bind(format!("{bucket}/"))
        .execute(tx)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::bucket_key;

    #[test]
    fn a_path_is_in_the_bucket_of_its_top_level_folder() {
        assert_eq!(bucket_key("photos/2024/a.jpg"), Some("photos/"));
        assert_eq!(bucket_key("photos/a.jpg"), Some("photos/"));
        assert_eq!(bucket_key("notes.txt"), None);
    }
}
