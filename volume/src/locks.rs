//! The `dav_locks` table: WebDAV write locks, kept in the database so
//! every gateway on it sees the same locks. This module alone reads and
//! writes it. A lock is kept by its root's *key*: a file's path, or a
//! folder's prefix ending with `/` (the root folder's key is empty).

use crate::db::{Conn, sqlite_row};

use crate::db::owned::{Adopt, OwnedRows};
use crate::db::{Database, WriteTx, sql};
use crate::error::VolumeError;
use crate::types::{Owner, now_ms};

/// The most locks one tree may hold at once: a client that locks without
/// end gets refused rather than slowing every write of its owner (each
/// write reads its tree's locks).
pub const MAX_LOCKS_PER_OWNER: usize = 256;

/// A write lock on a resource (and, `infinite`, everything under it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DavLock {
    /// The lock token, a URI.
    pub token: String,
    /// The locked resource's key (the lock root).
    pub root: String,
    pub infinite: bool,
    pub exclusive: bool,
    pub timeout_s: u64,
    pub expires_ms: i64,
}

impl DavLock {
    /// Whether this lock applies to the resource `key`: its root, or
    /// (depth infinity) anything under a locked folder.
    pub fn covers(&self, key: &str) -> bool {
        self.root == key || (self.infinite && self.root_is_folder() && key.starts_with(&self.root))
    }

    /// Whether this lock's root is `key` or lies under the folder `key`.
    pub fn within(&self, key: &str) -> bool {
        self.root == key || (key_is_folder(key) && self.root.starts_with(key))
    }

    /// Whether this lock and a lock on `root` would lock a resource in
    /// common.
    fn overlaps(&self, root: &str, infinite: bool) -> bool {
        self.covers(root) || (infinite && key_is_folder(root) && self.root.starts_with(root))
    }

    fn root_is_folder(&self) -> bool {
        key_is_folder(&self.root)
    }
}

/// Folder keys end with `/`; the root folder's key is empty.
fn key_is_folder(key: &str) -> bool {
    key.is_empty() || key.ends_with('/')
}

/// A lock asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLock {
    pub token: String,
    pub root: String,
    pub infinite: bool,
    pub exclusive: bool,
    pub holder: String,
    pub timeout_s: u64,
}

/// Whether a lock was granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockOutcome {
    Granted(DavLock),
    /// A lock in the way (an exclusive one, or any for an exclusive ask).
    Conflict,
    /// The tree holds [`MAX_LOCKS_PER_OWNER`] locks already.
    TooMany,
}

#[derive(sqlx::FromRow)]
struct LockRow {
    token: String,
    path: String,
    infinite: i64,
    exclusive: i64,
    timeout_s: i64,
    expires_ms: i64,
}

sqlite_row!(LockRow {
    token,
    path,
    infinite,
    exclusive,
    timeout_s,
    expires_ms
});

impl From<LockRow> for DavLock {
    fn from(row: LockRow) -> Self {
        Self {
            token: row.token,
            root: row.path,
            infinite: row.infinite != 0,
            exclusive: row.exclusive != 0,
            timeout_s: u64::try_from(row.timeout_s).unwrap_or_default(),
            expires_ms: row.expires_ms,
        }
    }
}

/// Everything of a lock but its holder, which only lock discovery reads.
const LOCK_COLUMNS: &str = "token, path, infinite, exclusive, timeout_s, expires_ms";

/// The locks of `owner`'s tree that have not expired.
pub(crate) async fn locks(db: &Database, owner: Owner) -> Result<Vec<DavLock>, VolumeError> {
    if let Some(reader) = db.sync_reader() {
        // Every write asks (most often to find none): on the caller's
        // thread (`db::reader`), not a trip to a pooled connection's.
        let sql =
            format!("SELECT {LOCK_COLUMNS} FROM dav_locks WHERE owner = ?1 AND expires_ms > ?2");
        return reader.read(|connection| {
            connection
                .prepare_cached(&sql)?
                .query_map(rusqlite::params![owner.id(), now_ms()], |row| {
                    Ok(DavLock::from(LockRow {
                        token: row.get(0)?,
                        path: row.get(1)?,
                        infinite: row.get(2)?,
                        exclusive: row.get(3)?,
                        timeout_s: row.get(4)?,
                        expires_ms: row.get(5)?,
                    }))
                })?
                .collect()
        });
    }
    let rows: Vec<LockRow> = sql::query_as(&format!(
        "SELECT {LOCK_COLUMNS} FROM dav_locks WHERE owner = $1 AND expires_ms > $2"
    ))
    .bind(owner.id())
    .bind(now_ms())
    .fetch_all(db.pool())
    .await?;
    Ok(rows.into_iter().map(DavLock::from).collect())
}

/// The holders (the clients' `DAV:owner` fragments) of `owner`'s live
/// locks, by token: what lock discovery shows.
pub(crate) async fn holders(
    db: &Database,
    owner: Owner,
) -> Result<std::collections::HashMap<String, String>, VolumeError> {
    let rows: Vec<(String, String)> =
        sql::query_as("SELECT token, holder FROM dav_locks WHERE owner = $1 AND expires_ms > $2")
            .bind(owner.id())
            .bind(now_ms())
            .fetch_all(db.pool())
            .await?;
    Ok(rows.into_iter().collect())
}

/// Grant `lock` unless a live lock is in its way, in one write
/// transaction that holds the tree's lock: two gateways cannot both
/// grant an exclusive lock on one resource. (It deletes nothing, so it
/// never waits on rows a copy or move holds; expired locks are cleared
/// by [`clear_expired`].)
pub(crate) async fn lock(
    db: &Database,
    owner: Owner,
    lock: NewLock,
) -> Result<LockOutcome, VolumeError> {
    let now = now_ms();
    db.write(async |tx: &mut WriteTx| {
        db.lock_tree(tx, owner.id()).await?;
        let rows: Vec<LockRow> = sql::query_as(&format!(
            "SELECT {LOCK_COLUMNS} FROM dav_locks WHERE owner = $1 AND expires_ms > $2"
        ))
        .bind(owner.id())
        .bind(now)
        .fetch_all(&mut **tx)
        .await?;
        let held: Vec<DavLock> = rows.into_iter().map(DavLock::from).collect();
        if held.len() >= MAX_LOCKS_PER_OWNER {
            return Ok(LockOutcome::TooMany);
        }
        if held.iter().any(|other| {
            (other.exclusive || lock.exclusive) && other.overlaps(&lock.root, lock.infinite)
        }) {
            return Ok(LockOutcome::Conflict);
        }
        let expires_ms = now.saturating_add(seconds_ms(lock.timeout_s));
        sql::query(&format!(
            "INSERT INTO dav_locks ({LOCK_COLUMNS}, holder, owner)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
        ))
        .bind(&lock.token)
        .bind(&lock.root)
        .bind(i64::from(lock.infinite))
        .bind(i64::from(lock.exclusive))
        .bind(i64::try_from(lock.timeout_s).unwrap_or(i64::MAX))
        .bind(expires_ms)
        .bind(&lock.holder)
        .bind(owner.id())
        .execute(&mut **tx)
        .await?;
        Ok(LockOutcome::Granted(DavLock {
            token: lock.token,
            root: lock.root,
            infinite: lock.infinite,
            exclusive: lock.exclusive,
            timeout_s: lock.timeout_s,
            expires_ms,
        }))
    })
    .await
}

/// Remove every lock that has expired (they count for nothing already);
/// how many went.
pub(crate) async fn clear_expired(db: &Database) -> Result<u64, VolumeError> {
    let gone = sql::query("DELETE FROM dav_locks WHERE expires_ms <= $1")
        .bind(now_ms())
        .execute(db.pool())
        .await?;
    Ok(gone.rows_affected())
}

/// Give the live lock `token` a new timeout; the lock, if it was live.
pub(crate) async fn refresh_lock(
    db: &Database,
    owner: Owner,
    token: &str,
    timeout_s: u64,
) -> Result<Option<DavLock>, VolumeError> {
    let now = now_ms();
    let row: Option<LockRow> = sql::query_as(&format!(
        "UPDATE dav_locks SET timeout_s = $3, expires_ms = $4
         WHERE owner = $1 AND token = $2 AND expires_ms > $5 RETURNING {LOCK_COLUMNS}"
    ))
    .bind(owner.id())
    .bind(token)
    .bind(i64::try_from(timeout_s).unwrap_or(i64::MAX))
    .bind(now.saturating_add(seconds_ms(timeout_s)))
    .bind(now)
    .fetch_optional(db.pool())
    .await?;
    Ok(row.map(DavLock::from))
}

/// Remove the lock `token`; whether it was there.
pub(crate) async fn unlock(db: &Database, owner: Owner, token: &str) -> Result<bool, VolumeError> {
    let done = sql::query("DELETE FROM dav_locks WHERE owner = $1 AND token = $2")
        .bind(owner.id())
        .bind(token)
        .execute(db.pool())
        .await?;
    Ok(done.rows_affected() > 0)
}

/// Drop the locks rooted at `key` and at every key from `lower` to
/// `upper` (a folder's range; empty bounds: none) inside `tx`.
pub(crate) async fn forget_within(
    tx: &mut Conn,
    owner: Owner,
    key: &str,
    lower: &str,
    upper: &str,
) -> Result<(), VolumeError> {
    sql::query(
        "DELETE FROM dav_locks WHERE owner = $1
         AND (path = $2 OR (path >= $3 AND path < $4))",
    )
    .bind(owner.id())
    .bind(key)
    .bind(lower)
    .bind(upper)
    .execute(tx)
    .await?;
    Ok(())
}

/// The locks, for `owners`' cascades: a user's go with them; the open
/// tree's all go to a user who adopts it.
pub(crate) const OWNED: OwnedRows = OwnedRows::new("dav_locks", "owner", Adopt::All);

fn seconds_ms(seconds: u64) -> i64 {
    i64::try_from(seconds.saturating_mul(1000)).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(root: &str, infinite: bool) -> DavLock {
        DavLock {
            token: "urn:uuid:x".into(),
            root: root.into(),
            infinite,
            exclusive: true,
            timeout_s: 60,
            expires_ms: 0,
        }
    }

    #[test]
    fn locks_cover_their_root_and_with_depth_infinity_what_is_under_it() {
        assert!(lock("a/", false).covers("a/"));
        assert!(!lock("a/", false).covers("a/b"));
        assert!(lock("a/", true).covers("a/b"));
        assert!(lock("a/", true).covers("a/b/c/"));
        assert!(!lock("a/", true).covers("ab"));
        assert!(lock("", true).covers("x"));
        assert!(!lock("a", true).covers("a/b"), "a file lock has no members");
        assert!(lock("a/b", false).within("a/"));
        assert!(!lock("a/b", false).within("a/b/"));
        assert!(!lock("a/", false).overlaps("a/b", false));
        assert!(lock("a/b", false).overlaps("a/", true));
        assert!(lock("a/", true).overlaps("a/b", false));
    }
}
