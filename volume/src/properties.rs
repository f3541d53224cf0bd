//! The `dav_properties` table: WebDAV dead properties, the ones clients
//! store on a resource. This module alone reads and writes it. A property
//! is kept by its resource's *key*: a file's path, or a folder's prefix
//! ending with `/` (the root folder's key is empty). What a property takes
//! (the bytes of its namespace, name and value) counts against its owner's
//! quota like a file's bytes (see `quota`).

use crate::db::{Conn, SqliteRow, sqlite_row};

use crate::db::owned::{Adopt, OwnedRows};
use crate::db::{Database, KEYS_PER_QUERY, placeholders, rekey, rewrite, sql};
use crate::error::VolumeError;
use crate::path::Prefix;
use crate::types::Owner;

/// The most dead properties one resource may hold.
pub const MAX_PROPERTIES_PER_RESOURCE: usize = 256;

/// A property a client stored on a resource.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DeadProperty {
    /// Empty for a property in no namespace.
    pub namespace: String,
    pub name: String,
    /// An XML fragment (text and elements, each element declaring its
    /// namespace), as it goes back inside the property's element.
    pub value: String,
}

sqlite_row!(DeadProperty {
    namespace,
    name,
    value
});

/// One step of a `PROPPATCH`, applied in document order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PropertyChange {
    Set(DeadProperty),
    Remove { namespace: String, name: String },
}

/// Apply `changes` to the properties of `key` inside `tx`, in order;
/// refuses (`TooManyProperties`) to leave it with more than
/// [`MAX_PROPERTIES_PER_RESOURCE`]. The caller commits or rolls back.
pub(crate) async fn apply(
    tx: &mut Conn,
    owner: Owner,
    key: &str,
    changes: &[PropertyChange],
) -> Result<(), VolumeError> {
    for change in changes {
        match change {
            PropertyChange::Set(property) => {
                sql::query(
                    "INSERT INTO dav_properties (owner, path, namespace, name, value)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (owner, path, namespace, name)
                     DO UPDATE SET value = excluded.value",
                )
                .bind(owner.id())
                .bind(key)
                .bind(&property.namespace)
                .bind(&property.name)
                .bind(&property.value)
                .execute(&mut *tx)
                .await?;
            }
            PropertyChange::Remove { namespace, name } => {
                sql::query(
                    "DELETE FROM dav_properties
                     WHERE owner = $1 AND path = $2 AND namespace = $3 AND name = $4",
                )
                .bind(owner.id())
                .bind(key)
                .bind(namespace)
                .bind(name)
                .execute(&mut *tx)
                .await?;
            }
        }
    }
    let (count,): (i64,) =
        sql::query_as("SELECT COUNT(*) FROM dav_properties WHERE owner = $1 AND path = $2")
            .bind(owner.id())
            .bind(key)
            .fetch_one(tx)
            .await?;
    if usize::try_from(count).unwrap_or(usize::MAX) > MAX_PROPERTIES_PER_RESOURCE {
        return Err(VolumeError::TooManyProperties {
            limit: MAX_PROPERTIES_PER_RESOURCE,
        });
    }
    Ok(())
}

/// The dead properties of the resources `keys` (a folder's listing),
/// keyed by resource.
pub(crate) async fn of_keys(
    db: &Database,
    owner: Owner,
    keys: &[String],
) -> Result<Vec<(String, DeadProperty)>, VolumeError> {
    #[derive(sqlx::FromRow)]
    struct Row {
        path: String,
        #[sqlx(flatten)]
        property: DeadProperty,
    }
    impl SqliteRow for Row {
        fn from_sqlite(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
            Ok(Self {
                path: row.get("path")?,
                property: DeadProperty::from_sqlite(row)?,
            })
        }
    }
    let mut found = Vec::new();
    for chunk in keys.chunks(KEYS_PER_QUERY) {
        let sql = format!(
            "SELECT path, namespace, name, value FROM dav_properties
             WHERE owner = $1 AND path IN ({}) ORDER BY path, namespace, name",
            placeholders(chunk.len())
        );
        let mut query = sql::query_as::<Row>(&sql).bind(owner.id());
        for key in chunk {
            query = query.bind(key);
        }
        let rows = query.fetch_all(db.pool()).await?;
        found.extend(rows.into_iter().map(|row| (row.path, row.property)));
    }
    Ok(found)
}

/// The bytes `owner`'s properties take (namespace, name and value),
/// read on `conn`.
pub(crate) async fn usage(
    db: &Database,
    conn: &mut Conn,
    owner: Owner,
) -> Result<u64, VolumeError> {
    let (used,): (i64,) = sql::query_as(&format!(
        "SELECT CAST(COALESCE(SUM({}), 0) AS BIGINT) FROM dav_properties WHERE owner = $1",
        property_bytes(db)
    ))
    .bind(owner.id())
    .fetch_one(conn)
    .await?;
    Ok(u64::try_from(used).unwrap_or_default())
}

/// The bytes the properties at `key` take, and (with `under`, a folder
/// and its upper bound) those of everything in it: what a copy adds.
pub(crate) async fn bytes_of(
    db: &Database,
    conn: &mut Conn,
    owner: Owner,
    key: &str,
    under: Option<(&Prefix, &str)>,
) -> Result<u64, VolumeError> {
    let (lower, upper) = under.map_or((key, ""), |(prefix, upper)| (prefix.as_str(), upper));
    let (bytes,): (i64,) = sql::query_as(&format!(
        "SELECT CAST(COALESCE(SUM({}), 0) AS BIGINT) FROM dav_properties
         WHERE owner = $1 AND (path = $2 OR (path >= $3 AND path < $4))",
        property_bytes(db)
    ))
    .bind(owner.id())
    .bind(key)
    .bind(lower)
    .bind(upper)
    .fetch_one(conn)
    .await?;
    Ok(u64::try_from(bytes).unwrap_or_default())
}

/// SQL for the bytes one property row takes.
fn property_bytes(db: &Database) -> String {
    format!(
        "{} + {} + {}",
        db.byte_length("namespace"),
        db.byte_length("name"),
        db.byte_length("value")
    )
}

/// Drop the properties at `key` inside `tx`.
pub(crate) async fn forget(tx: &mut Conn, owner: Owner, key: &str) -> Result<(), VolumeError> {
    sql::query("DELETE FROM dav_properties WHERE owner = $1 AND path = $2")
        .bind(owner.id())
        .bind(key)
        .execute(tx)
        .await?;
    Ok(())
}

/// Drop the properties at `key` and at every key from `lower` to `upper`
/// (a folder's range; empty bounds: none) inside `tx`.
pub(crate) async fn forget_within(
    tx: &mut Conn,
    owner: Owner,
    key: &str,
    lower: &str,
    upper: &str,
) -> Result<(), VolumeError> {
    sql::query(
        "DELETE FROM dav_properties WHERE owner = $1
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

/// Copy the properties at `from` to `to` inside `tx`, replacing any of
/// the same name there.
pub(crate) async fn copy(
    tx: &mut Conn,
    owner: Owner,
    from: &str,
    to: &str,
) -> Result<(), VolumeError> {
    rekey(
        "INSERT INTO dav_properties (owner, path, namespace, name, value)
         SELECT owner, $3, namespace, name, value FROM dav_properties
         WHERE owner = $1 AND path = $2
         ON CONFLICT (owner, path, namespace, name) DO UPDATE SET value = excluded.value",
        owner,
        from,
        to,
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// Copy the properties of everything under the folder `from` (not its
/// own) to the same keys under `to`, inside `tx`.
pub(crate) async fn copy_range(
    tx: &mut Conn,
    owner: Owner,
    from: &Prefix,
    to: &Prefix,
    upper: &str,
) -> Result<(), VolumeError> {
    rewrite(
        "INSERT INTO dav_properties (owner, path, namespace, name, value)
         SELECT owner, $2 || SUBSTR(path, CAST($3 AS INTEGER)), namespace, name, value
         FROM dav_properties WHERE owner = $1 AND path > $4 AND path < $5",
        owner,
        from,
        to,
        upper,
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// Move the properties at `from` to `to` inside `tx`.
pub(crate) async fn rename(
    tx: &mut Conn,
    owner: Owner,
    from: &str,
    to: &str,
) -> Result<(), VolumeError> {
    let statement = "UPDATE dav_properties SET path = $3 WHERE owner = $1 AND path = $2";
    rekey(statement, owner, from, to).execute(tx).await?;
    Ok(())
}

/// Move the properties of the folder `from` and everything under it to
/// the same keys under `to`, inside `tx`.
pub(crate) async fn rename_range(
    tx: &mut Conn,
    owner: Owner,
    from: &Prefix,
    to: &Prefix,
    upper: &str,
) -> Result<(), VolumeError> {
    rewrite(
        "UPDATE dav_properties SET path = $2 || SUBSTR(path, CAST($3 AS INTEGER))
         WHERE owner = $1 AND path >= $4 AND path < $5",
        owner,
        from,
        to,
        upper,
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// The properties, for `owners`' cascades: a user's go with them; the
/// open tree's go to a user who adopts it, except at a key where the user
/// has properties too (theirs stay).
pub(crate) const OWNED: OwnedRows = OwnedRows::new("dav_properties", "owner", Adopt::KeepingTheirs);
