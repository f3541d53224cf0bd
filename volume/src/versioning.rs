//! The `versioning` table: a bucket's versioning as S3 set it
//! (`PutBucketVersioning`), by its top-level folder. A path outside any
//! such folder follows the operator's [`HistoryPolicy`]: every user's tree
//! keeps versions unless the operator says otherwise, and a bucket made
//! through S3 is made unversioned, as S3 makes one.

use sqlx::AnyConnection;

use crate::db::owned::{Adopt, OwnedRows};
use crate::db::{Database, sql};
use crate::error::VolumeError;
use crate::types::{HistoryPolicy, Owner, Versioning};

/// How a path's versions are kept: the state, and whether S3 set it (its
/// versions stay until deleted) or the operator's default did (the
/// retention expires them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Keeping {
    pub(crate) state: Versioning,
    pub(crate) by_s3: bool,
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
    conn: &mut AnyConnection,
    owner: Owner,
    path: &str,
    policy: HistoryPolicy,
) -> Result<Keeping, VolumeError> {
    let set = match bucket_key(path) {
        Some(key) => set_state(conn, owner, key).await?,
        None => None,
    };
    Ok(match set {
        Some(state) => Keeping { state, by_s3: true },
        None => Keeping {
            state: if policy.versions {
                Versioning::Enabled
            } else {
                Versioning::Unversioned
            },
            by_s3: false,
        },
    })
}

/// What S3 set for the bucket `bucket` (its name), if it did.
pub(crate) async fn get(
    db: &Database,
    owner: Owner,
    bucket: &str,
) -> Result<Option<Versioning>, VolumeError> {
    let key = format!("{bucket}/");
    if let Some(reader) = db.sync_reader() {
        // Asked by S3's reads of unversioned objects: on the caller's
        // thread, as a file's lookup (`db::reader`).
        let row = reader.read(|connection| {
            use rusqlite::OptionalExtension as _;
            connection
                .prepare_cached("SELECT state FROM versioning WHERE owner = ?1 AND path = ?2")?
                .query_row((owner.id(), key.as_str()), |row| row.get::<_, String>(0))
                .optional()
        })?;
        return Ok(row.map(|state| Versioning::from_db(&state)));
    }
    let mut conn = db.pool().acquire().await?;
    set_state(&mut conn, owner, &key).await
}

async fn set_state(
    conn: &mut AnyConnection,
    owner: Owner,
    key: &str,
) -> Result<Option<Versioning>, VolumeError> {
    let row: Option<(String,)> =
        sql::query_as("SELECT state FROM versioning WHERE owner = $1 AND path = $2")
            .bind(owner.id())
            .bind(key)
            .fetch_optional(conn)
            .await?;
    Ok(row.map(|(state,)| Versioning::from_db(&state)))
}

/// Set the bucket `bucket`'s versioning inside `tx`.
pub(crate) async fn set(
    tx: &mut AnyConnection,
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
pub(crate) async fn forget(
    tx: &mut AnyConnection,
    owner: Owner,
    bucket: &str,
) -> Result<(), VolumeError> {
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
