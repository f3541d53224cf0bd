//! Accounts in the metadata database: users (with their password hashes,
//! admin flag and quota), API tokens and browser sessions (only hashes of
//! their secrets are stored), S3 access keys, share links ([`shares`]), and
//! the server secrets every gateway on one database shares (the `users`,
//! `tokens`, `sessions`, `s3_keys`, `shares` and `secrets` tables, which
//! this module alone reads and writes). The cryptography is the gateway's;
//! this module only keeps the rows. Removing a user, or giving them the
//! open tree, is `owners`' (every table's step, in one list); this module
//! gives the steps for its own tables.

use sqlx::FromRow;

use crate::db::owned::{Adopt, OwnedRows};
use crate::db::{Database, DatabaseUrl, SqliteRow, WriteTx, sql, sqlite_row};
use crate::error::VolumeError;
use crate::types::now_ms;
pub use crate::types::{Owner, UserId};

pub(crate) mod shares;
pub(crate) use shares::share_count;

/// A user as the gateway needs it to authenticate and authorize.
#[derive(Clone, PartialEq, Eq)]
pub struct User {
    pub id: UserId,
    pub name: String,
    /// A PHC string (argon2id), never the password.
    pub password_hash: String,
    pub admin: bool,
    /// Most bytes the user's files may take; `None` is unlimited.
    pub quota: Option<u64>,
}

/// Without the password hash: a `User` may end up in a log.
impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("admin", &self.admin)
            .field("quota", &self.quota)
            .finish_non_exhaustive()
    }
}

impl User {
    pub fn owner(&self) -> Owner {
        Owner::user(self.id)
    }
}

#[derive(FromRow)]
struct UserRow {
    id: i64,
    name: String,
    password_hash: String,
    admin: i64,
    quota_bytes: Option<i64>,
}

sqlite_row!(UserRow {
    id,
    name,
    password_hash,
    admin,
    quota_bytes
});

impl From<UserRow> for User {
    fn from(row: UserRow) -> Self {
        Self {
            id: UserId(row.id),
            name: row.name,
            password_hash: row.password_hash,
            admin: row.admin != 0,
            quota: row.quota_bytes.and_then(|quota| u64::try_from(quota).ok()),
        }
    }
}

/// A user's row and one more column, `extra` (a session's CSRF token).
#[derive(FromRow)]
struct WithUser<T> {
    #[sqlx(flatten)]
    user: UserRow,
    extra: T,
}

impl<T: rusqlite::types::FromSql> SqliteRow for WithUser<T> {
    fn from_sqlite(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            user: UserRow::from_sqlite(row)?,
            extra: row.get("extra")?,
        })
    }
}

const USER_COLUMNS: &str =
    "users.id, users.name, users.password_hash, users.admin, users.quota_bytes";

/// A user to create.
#[derive(Debug, Clone)]
pub struct NewUser<'a> {
    pub name: &'a str,
    pub password_hash: &'a str,
    pub admin: bool,
    pub quota: Option<u64>,
}

/// An API token as listed (its secret is never stored).
#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct TokenInfo {
    /// The short public id `token revoke` takes.
    pub id: String,
    pub label: String,
    pub created_ms: i64,
}

sqlite_row!(TokenInfo {
    id,
    label,
    created_ms
});

/// An S3 access key as stored: its secret sealed by the gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Key {
    pub access_key: String,
    /// Whose files the key reaches ([`Owner::OPEN`]: the open tree's, only
    /// while the gateway has no user).
    pub owner: Owner,
    pub label: String,
    /// The secret as the gateway sealed it; the database never holds it
    /// in the clear.
    pub sealed: String,
    pub created_ms: i64,
}

#[derive(FromRow)]
struct S3KeyRow {
    access_key: String,
    owner: i64,
    label: String,
    sealed: String,
    created_ms: i64,
}

sqlite_row!(S3KeyRow {
    access_key,
    owner,
    label,
    sealed,
    created_ms
});

impl From<S3KeyRow> for S3Key {
    fn from(row: S3KeyRow) -> Self {
        Self {
            access_key: row.access_key,
            owner: Owner::from_id(row.owner),
            label: row.label,
            sealed: row.sealed,
            created_ms: row.created_ms,
        }
    }
}

const S3_KEY_COLUMNS: &str = "access_key, owner, label, sealed, created_ms";

/// A share link's row: who shared which path, until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Share {
    pub id: String,
    pub owner: Owner,
    pub path: String,
    /// The shared file's creation time: a file made again at the path
    /// since is another file, which the link does not reach.
    pub file_created_ms: i64,
    /// Milliseconds since the Unix epoch; `None` never expires.
    pub expires_ms: Option<i64>,
}

impl Share {
    /// Whether the link still works at `now_ms`.
    pub fn is_live(&self, now_ms: i64) -> bool {
        self.expires_ms.is_none_or(|expires| now_ms < expires)
    }
}

/// Browser sessions one user may have at once; signing in again past it
/// ends the oldest.
pub const MAX_SESSIONS_PER_USER: i64 = 32;

/// The accounts tables of one metadata database.
#[derive(Debug, Clone)]
pub struct Accounts {
    db: Database,
}

impl Accounts {
    /// The database, for what `quota` and `owners` do on the accounts'
    /// side.
    pub(crate) fn db(&self) -> &Database {
        &self.db
    }
}

fn to_i64(bytes: u64) -> Result<i64, VolumeError> {
    i64::try_from(bytes).map_err(|_| VolumeError::TooLarge(bytes))
}

impl Accounts {
    pub(crate) fn new(db: Database) -> Self {
        Self { db }
    }

    /// Open the database at `url` (running its migrations) for account
    /// management alone: no blob store, no garbage collection.
    pub async fn open(url: &DatabaseUrl) -> Result<Self, VolumeError> {
        Ok(Self::new(Database::open(url).await?))
    }

    pub async fn close(&self) {
        self.db.close().await;
    }

    /// Whether any user exists (if none, the gateway may serve the open tree). On SQLite it is answered on the caller's
    /// thread and the database is asked only when something committed to
    /// it since (SQLite's `data_version`, which sees other processes'
    /// commits too: a `gateway user add` beside a running gateway), so the
    /// check every request of an open gateway makes costs a `PRAGMA`.
    pub async fn users_exist(&self) -> Result<bool, VolumeError> {
        const ANY_USER: &str = "SELECT EXISTS (SELECT 1 FROM users)";
        if let Some(reader) = self.db.sync_reader() {
            return reader.watched(ANY_USER);
        }
        let (exist,): (bool,) = sql::query_as(ANY_USER).fetch_one(self.db.pool()).await?;
        Ok(exist)
    }

    /// How many users exist.
    pub async fn user_count(&self) -> Result<u64, VolumeError> {
        let (count,): (i64,) = sql::query_as("SELECT COUNT(*) FROM users")
            .fetch_one(self.db.pool())
            .await?;
        Ok(u64::try_from(count).unwrap_or_default())
    }

    /// Create a user; `AlreadyExists` if the name is taken.
    pub async fn add_user(&self, user: &NewUser<'_>) -> Result<User, VolumeError> {
        let quota = user.quota.map(to_i64).transpose()?;
        let row: Option<UserRow> = sql::query_as(
            "INSERT INTO users (name, password_hash, admin, quota_bytes, created_ms)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name) DO NOTHING
             RETURNING id, name, password_hash, admin, quota_bytes",
        )
        .bind(user.name)
        .bind(user.password_hash)
        .bind(i64::from(user.admin))
        .bind(quota)
        .bind(now_ms())
        .fetch_optional(self.db.pool())
        .await?;
        row.map(User::from)
            .ok_or_else(|| VolumeError::AlreadyExists(format!("user {}", user.name)))
    }

    pub async fn user_named(&self, name: &str) -> Result<Option<User>, VolumeError> {
        let row: Option<UserRow> =
            sql::query_as(&format!("SELECT {USER_COLUMNS} FROM users WHERE name = $1"))
                .bind(name)
                .fetch_optional(self.db.pool())
                .await?;
        Ok(row.map(User::from))
    }

    pub async fn user(&self, id: UserId) -> Result<Option<User>, VolumeError> {
        let row: Option<UserRow> =
            sql::query_as(&format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1"))
                .bind(id.0)
                .fetch_optional(self.db.pool())
                .await?;
        Ok(row.map(User::from))
    }

    /// Every user with the bytes they use (files and properties), by name.
    pub async fn users(&self) -> Result<Vec<(User, u64)>, VolumeError> {
        let rows: Vec<UserRow> = sql::query_as(&format!(
            "SELECT {USER_COLUMNS} FROM users ORDER BY users.name"
        ))
        .fetch_all(self.db.pool())
        .await?;
        let mut users = Vec::with_capacity(rows.len());
        for row in rows {
            let user = User::from(row);
            let used = self.usage(user.owner()).await?;
            users.push((user, used));
        }
        Ok(users)
    }

    /// Record a token for `user`: `hash` is what requests are matched on,
    /// `id` its short public name.
    pub async fn add_token(
        &self,
        user: UserId,
        id: &str,
        hash: &str,
        label: &str,
    ) -> Result<(), VolumeError> {
        sql::query(
            "INSERT INTO tokens (id, hash, user_id, label, created_ms) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(id)
        .bind(hash)
        .bind(user.0)
        .bind(label)
        .bind(now_ms())
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    /// Record an S3 access key (its secret sealed by the caller).
    pub async fn add_s3_key(&self, key: &S3Key) -> Result<(), VolumeError> {
        sql::query(&format!(
            "INSERT INTO s3_keys ({S3_KEY_COLUMNS}) VALUES ($1, $2, $3, $4, $5)"
        ))
        .bind(&key.access_key)
        .bind(key.owner.id())
        .bind(&key.label)
        .bind(&key.sealed)
        .bind(key.created_ms)
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    /// Whether any S3 key exists.
    pub async fn has_s3_keys(&self) -> Result<bool, VolumeError> {
        let row: Option<(String,)> = sql::query_as("SELECT access_key FROM s3_keys LIMIT 1")
            .fetch_optional(self.db.pool())
            .await?;
        Ok(row.is_some())
    }

    /// The S3 key `access_key`, if there is one.
    pub async fn s3_key(&self, access_key: &str) -> Result<Option<S3Key>, VolumeError> {
        let row: Option<S3KeyRow> = sql::query_as(&format!(
            "SELECT {S3_KEY_COLUMNS} FROM s3_keys WHERE access_key = $1"
        ))
        .bind(access_key)
        .fetch_optional(self.db.pool())
        .await?;
        Ok(row.map(S3Key::from))
    }

    /// `owner`'s S3 keys, oldest first.
    pub async fn s3_keys(&self, owner: Owner) -> Result<Vec<S3Key>, VolumeError> {
        let rows: Vec<S3KeyRow> = sql::query_as(&format!(
            "SELECT {S3_KEY_COLUMNS} FROM s3_keys WHERE owner = $1 ORDER BY created_ms, access_key"
        ))
        .bind(owner.id())
        .fetch_all(self.db.pool())
        .await?;
        Ok(rows.into_iter().map(S3Key::from).collect())
    }

    /// Revoke the S3 key `access_key`; whether there was one.
    pub async fn revoke_s3_key(&self, access_key: &str) -> Result<bool, VolumeError> {
        let done = sql::query("DELETE FROM s3_keys WHERE access_key = $1")
            .bind(access_key)
            .execute(self.db.pool())
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// The user a token hash belongs to.
    pub async fn token_user(&self, hash: &str) -> Result<Option<User>, VolumeError> {
        let row: Option<UserRow> = sql::query_as(&format!(
            "SELECT {USER_COLUMNS} FROM tokens JOIN users ON users.id = tokens.user_id
             WHERE tokens.hash = $1"
        ))
        .bind(hash)
        .fetch_optional(self.db.pool())
        .await?;
        Ok(row.map(User::from))
    }

    pub async fn tokens(&self, user: UserId) -> Result<Vec<TokenInfo>, VolumeError> {
        Ok(sql::query_as(
            "SELECT id, label, created_ms FROM tokens WHERE user_id = $1 ORDER BY created_ms, id",
        )
        .bind(user.0)
        .fetch_all(self.db.pool())
        .await?)
    }

    /// Revoke the token with public id `id` or secret hash `hash`; whether
    /// one was.
    pub async fn revoke_token(&self, id: &str, hash: &str) -> Result<bool, VolumeError> {
        let done = sql::query("DELETE FROM tokens WHERE id = $1 OR hash = $2")
            .bind(id)
            .bind(hash)
            .execute(self.db.pool())
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Record a browser session (by the hash of its cookie) with its CSRF
    /// token. The user's expired sessions, and the oldest past
    /// [`MAX_SESSIONS_PER_USER`], are cleared on the way.
    pub async fn add_session(
        &self,
        user: UserId,
        hash: &str,
        csrf: &str,
        expires_ms: i64,
    ) -> Result<(), VolumeError> {
        sql::query(
            "DELETE FROM sessions WHERE user_id = $1 AND (expires_ms <= $2 OR hash IN (
                 SELECT hash FROM sessions WHERE user_id = $1
                 ORDER BY expires_ms DESC LIMIT $4 OFFSET $3))",
        )
        .bind(user.0)
        .bind(now_ms())
        .bind(MAX_SESSIONS_PER_USER - 1)
        // Every row past the offset (both engines take a LIMIT this way).
        .bind(i64::MAX)
        .execute(self.db.pool())
        .await?;
        sql::query(
            "INSERT INTO sessions (hash, user_id, csrf, expires_ms) VALUES ($1, $2, $3, $4)",
        )
        .bind(hash)
        .bind(user.0)
        .bind(csrf)
        .bind(expires_ms)
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    /// The user of an unexpired session, and its CSRF token.
    pub async fn session(&self, hash: &str) -> Result<Option<(User, String)>, VolumeError> {
        let row: Option<WithUser<String>> = sql::query_as(&format!(
            "SELECT {USER_COLUMNS}, sessions.csrf AS extra
             FROM sessions JOIN users ON users.id = sessions.user_id
             WHERE sessions.hash = $1 AND sessions.expires_ms > $2"
        ))
        .bind(hash)
        .bind(now_ms())
        .fetch_optional(self.db.pool())
        .await?;
        Ok(row.map(|row| (row.user.into(), row.extra)))
    }

    pub async fn remove_session(&self, hash: &str) -> Result<(), VolumeError> {
        sql::query("DELETE FROM sessions WHERE hash = $1")
            .bind(hash)
            .execute(self.db.pool())
            .await?;
        Ok(())
    }

    /// The server secret `name`: the first gateway to ask stores `fresh`,
    /// every later one (on any gateway) gets that same value.
    pub async fn secret(&self, name: &str, fresh: &str) -> Result<String, VolumeError> {
        sql::query(
            "INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(fresh)
        .execute(self.db.pool())
        .await?;
        let (value,): (String,) = sql::query_as("SELECT value FROM secrets WHERE name = $1")
            .bind(name)
            .fetch_one(self.db.pool())
            .await?;
        Ok(value)
    }
}

/// `owner`'s quota, its user row locked until `tx` ends (PostgreSQL; SQLite
/// serialises writers already) so one user's uploads are weighed against it
/// one at a time; `None` for no quota (or the open tree).
pub(crate) async fn locked_quota(
    db: &Database,
    tx: &mut WriteTx,
    owner: Owner,
) -> Result<Option<u64>, VolumeError> {
    if owner == Owner::OPEN {
        return Ok(None);
    }
    let sql = format!(
        "SELECT quota_bytes FROM users WHERE id = $1{}",
        db.locking()
    );
    let row: Option<(Option<i64>,)> = sql::query_as(&sql)
        .bind(owner.id())
        .fetch_optional(&mut **tx)
        .await?;
    // A user removed meanwhile: their upload must not leave a row nobody
    // can reach.
    let (quota,) = row.ok_or_else(|| VolumeError::NotFound("the uploading user".into()))?;
    Ok(quota.and_then(|quota| u64::try_from(quota).ok()))
}

/// The owner whose user is named `name`, their row locked until `tx` ends
/// (PostgreSQL; SQLite serialises writers already); `None` when there is
/// no such user.
pub(crate) async fn lock_user_named(
    db: &Database,
    tx: &mut WriteTx,
    name: &str,
) -> Result<Option<Owner>, VolumeError> {
    let found: Option<(i64,)> = sql::query_as(&format!(
        "SELECT id FROM users WHERE name = $1{}",
        db.locking()
    ))
    .bind(name)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(found.map(|(id,)| Owner::from_id(id)))
}

/// The tokens, for `owners`' cascades: a user's go with them (the open
/// tree has none).
pub(crate) const TOKENS: OwnedRows = OwnedRows::new("tokens", "user_id", Adopt::Not);

/// The S3 keys, for `owners`' cascades: a user's go with them; the open
/// tree's all go to a user who adopts it.
pub(crate) const S3_KEYS: OwnedRows = OwnedRows::new("s3_keys", "owner", Adopt::All);

/// The sessions, for `owners`' cascades: a user's go with them (the open
/// tree has none).
pub(crate) const SESSIONS: OwnedRows = OwnedRows::new("sessions", "user_id", Adopt::Not);

/// The users, for `owners`' cascades: a user's own row goes last, after
/// every row naming it.
pub(crate) const USERS: OwnedRows = OwnedRows::new("users", "id", Adopt::Not);
