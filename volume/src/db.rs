//! The metadata database: SQLite (the embedded default) or PostgreSQL, one
//! `sqlx::AnyPool` in front of both; on SQLite, writes and the hot reads
//! run on `rusqlite` connections on the caller's thread instead (`writer`,
//! `reader`). Queries are written once, with `$N` placeholders both engines
//! (and `rusqlite`) accept; the few places where the engines differ (how a
//! writer takes its locks, the migrations) are named here.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{Any, AnyPool, Executor as _};

use crate::error::VolumeError;
use crate::path::Prefix;
use crate::types::Owner;

mod conn;
mod durable_first;
pub(crate) mod owned;
mod reader;
pub(crate) mod sql;
mod write_tx;
mod writer;

pub(crate) use conn::{Conn, On};
pub(crate) use durable_first::MustBeDurable;
pub(crate) use reader::SyncReader;
pub(crate) use write_tx::WriteTx;
use write_tx::Writers;
pub(crate) use writer::{SqliteRow, sqlite_row};

/// Where the metadata lives: `--database-url`.
#[derive(Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    /// A SQLite file (the embedded default: `index.sqlite` in the data dir).
    Sqlite(PathBuf),
    /// A PostgreSQL server: a `postgres://` or `postgresql://` URL.
    Postgres(String),
}

impl DatabaseUrl {
    /// The default: `index.sqlite` in `data_dir`.
    pub fn in_data_dir(data_dir: &Path) -> Self {
        Self::Sqlite(data_dir.join("index.sqlite"))
    }
}

impl FromStr for DatabaseUrl {
    type Err = String;

    /// `postgres://…`, `postgresql://…`, `sqlite://PATH` or `sqlite:PATH`.
    fn from_str(url: &str) -> Result<Self, Self::Err> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Self::Postgres(url.to_owned()))
        } else if let Some(path) = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
        {
            let path = path.split('?').next().unwrap_or_default();
            if path.is_empty() {
                return Err("a sqlite: URL needs a file path".into());
            }
            Ok(Self::Sqlite(PathBuf::from(path)))
        } else {
            Err(format!(
                "{url:?} is not a database URL: use postgres://USER:PASSWORD@HOST:PORT/DB or sqlite://PATH"
            ))
        }
    }
}

/// Shown without the password.
impl fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sqlite(path) => write!(f, "sqlite://{}", path.display()),
            Self::Postgres(url) => match (url.find("://"), url.rfind('@')) {
                (Some(scheme_end), Some(at)) if at > scheme_end => {
                    let credentials = &url[scheme_end + 3..at];
                    let user = credentials.split(':').next().unwrap_or_default();
                    write!(f, "{}{user}:***{}", &url[..scheme_end + 3], &url[at..])
                }
                _ => f.write_str(url),
            },
        }
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// Which engine a [`Database`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Engine {
    Sqlite,
    Postgres,
}

#[derive(Debug, Clone)]
pub(crate) struct Database {
    pool: AnyPool,
    engine: Engine,
    /// SQLite has one write lock per file; writers in this process take
    /// turns here, first come first served, rather than in SQLite's busy
    /// handler, which sleeps up to 100 ms between tries and lets late
    /// writers overtake early ones (seconds of tail latency at 8 writers);
    /// and writers that come back to back share one commit, on one
    /// connection. `None` on PostgreSQL.
    writers: Option<Arc<Writers>>,
    /// SQLite: the reads every request makes, on the request's own thread
    /// (see [`reader`]).
    reader: Option<Arc<SyncReader>>,
}

/// Characters a file path must not carry raw inside a `sqlite://` URL.
const URL_UNSAFE: &AsciiSet = &CONTROLS.add(b' ').add(b'%').add(b'?').add(b'#');

impl Database {
    /// Connect and run the engine's migrations.
    pub(crate) async fn open(url: &DatabaseUrl) -> Result<Self, VolumeError> {
        sqlx::any::install_default_drivers();
        let (engine, connect_url, sqlite_file) = match url {
            DatabaseUrl::Sqlite(path) => {
                if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| VolumeError::io("creating the database's directory", e))?;
                }
                let text = path.to_string_lossy();
                let encoded = utf8_percent_encode(&text, URL_UNSAFE);
                let url = format!("sqlite://{encoded}?mode=rwc");
                (Engine::Sqlite, url, Some(path))
            }
            DatabaseUrl::Postgres(url) => (Engine::Postgres, url.clone(), None),
        };
        let options = AnyConnectOptions::from_str(&connect_url)?;
        let pool = AnyPoolOptions::new()
            .max_connections(match engine {
                Engine::Sqlite => 8,
                Engine::Postgres => 16,
            })
            .acquire_timeout(Duration::from_secs(30))
            // A pooled PostgreSQL connection may have been cut by the network
            // or a server restart: ping it before use. A SQLite connection
            // is a file handle in this process; its ping is only a round
            // trip to the connection's worker thread, as much as the query
            // it precedes (a connection a refused COMMIT left in a
            // transaction is dealt with on release, below).
            .test_before_acquire(engine == Engine::Postgres)
            .after_connect(move |connection, _| {
                Box::pin(async move {
                    if engine == Engine::Sqlite {
                        // WAL: readers never wait for the writer. FULL: a
                        // commit acknowledged to a client survives power loss.
                        connection
                            .execute(
                                "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
                                 PRAGMA busy_timeout = 10000; PRAGMA foreign_keys = ON;",
                            )
                            .await?;
                    }
                    Ok(())
                })
            })
            .after_release(|connection, _| {
                Box::pin(async move { Ok(release_transaction(connection).await) })
            })
            .connect_with(options)
            .await?;
        match engine {
            Engine::Sqlite => sqlx::migrate!("./migrations/sqlite").run(&pool).await?,
            Engine::Postgres => sqlx::migrate!("./migrations/postgres").run(&pool).await?,
        }
        let reader = sqlite_file
            .map(|path| SyncReader::open(path).map(Arc::new))
            .transpose()?;
        let writers = sqlite_file.map(|path| Arc::new(Writers::new(path.clone())));
        Ok(Self {
            pool,
            engine,
            writers,
            reader,
        })
    }

    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// A pooled connection, for reads that take several statements.
    pub(crate) async fn connection(&self) -> Result<Conn, VolumeError> {
        Ok(Conn::Pooled(self.pool.acquire().await?))
    }

    /// Reads on the caller's thread, where the engine allows them (SQLite).
    pub(crate) fn sync_reader(&self) -> Option<&SyncReader> {
        self.reader.as_deref()
    }

    /// A transaction that will write. SQLite takes its one write lock at the
    /// start (`BEGIN IMMEDIATE`), so a read-then-write transaction never
    /// fails half-way on a lock upgrade; PostgreSQL locks rows as they are
    /// read with [`Database::locking`].
    /// On SQLite, writers that come back to back share one commit (see
    /// [`write_tx`]).
    pub(crate) async fn begin_write(&self) -> Result<WriteTx, VolumeError> {
        match &self.writers {
            Some(writers) => WriteTx::grouped(writers).await,
            None => WriteTx::own(&self.pool).await,
        }
    }

    /// Run `body` in a write transaction ([`Database::begin_write`]):
    /// committed when it returns `Ok`, rolled back when it returns an
    /// error. On SQLite the rollback, too, returns only once the group's
    /// commit is settled (see [`write_tx`]): an error found by reading
    /// other writers' work in the group is not answered before that work
    /// is durable.
    pub(crate) async fn write<T>(
        &self,
        body: impl AsyncFnOnce(&mut WriteTx) -> Result<T, VolumeError>,
    ) -> Result<T, VolumeError> {
        let mut tx = self.begin_write().await?;
        match body(&mut tx).await {
            Ok(value) => {
                tx.commit().await?;
                Ok(value)
            }
            Err(error) => {
                tx.rollback().await?;
                Err(error)
            }
        }
    }

    /// Appended to a `SELECT` in a write transaction: lock the rows read
    /// until commit. SQLite needs nothing (its writers are serialised).
    pub(crate) fn locking(&self) -> &'static str {
        match self.engine {
            Engine::Sqlite => "",
            Engine::Postgres => " FOR UPDATE",
        }
    }

    /// SQL for the length in bytes of the text column `column`.
    pub(crate) fn byte_length(&self, column: &str) -> String {
        match self.engine {
            Engine::Sqlite => format!("LENGTH(CAST({column} AS BLOB))"),
            Engine::Postgres => format!("OCTET_LENGTH({column})"),
        }
    }

    /// Serialise, until `tx` ends, the transactions that take this lock for
    /// `owner`'s tree: a row-less lock on PostgreSQL (an advisory lock);
    /// nothing on SQLite, whose writers take turns already. Copies, moves,
    /// folder deletes and lock grants take it. Row locks alone do not do
    /// for a tree: under READ COMMITTED each statement reads afresh, so a
    /// move that found its source, then waited on rows another move of the
    /// same tree held, would find them gone and replace its destination
    /// (the other's result) with nothing.
    pub(crate) async fn lock_tree(&self, tx: &mut WriteTx, owner: i64) -> Result<(), VolumeError> {
        if self.engine == Engine::Postgres {
            sql::query("SELECT pg_advisory_xact_lock($1)")
                .bind(owner)
                .execute(&mut **tx)
                .await?;
        }
        Ok(())
    }

    pub(crate) async fn close(&self) {
        if let Some(writers) = &self.writers {
            writers.close();
        }
        self.pool.close().await;
        if let Some(reader) = &self.reader {
            reader.close();
        }
    }
}

/// Whether a connection coming back to the pool may be used again. One
/// still in a transaction (dropped without commit, or whose commit failed)
/// is rolled back; if that fails it is closed. A COMMIT that fails on a
/// full disk leaves SQLite with no transaction but sqlx counting one, and
/// every later `BEGIN` on that connection would fail: the store would stay
/// wedged after the disk had room again.
async fn release_transaction(connection: &mut sqlx::AnyConnection) -> bool {
    use sqlx::{Connection as _, TransactionManager as _};
    if !connection.is_in_transaction() {
        return true;
    }
    let rolled_back = <Any as sqlx::Database>::TransactionManager::rollback(connection).await;
    rolled_back.is_ok() && !connection.is_in_transaction()
}

/// Keys bound in one `IN (…)` list (both engines take far more).
pub(crate) const KEYS_PER_QUERY: usize = 500;

/// `$2, $3, …` for `count` keys after the owner's `$1`.
pub(crate) fn placeholders(count: usize) -> String {
    (0..count)
        .map(|at| format!("${}", at + 2))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A statement that takes what `owner` keeps at the path `from` to the
/// path `to`: `$1` owner, `$2` `from`, `$3` `to`. Every table with paths
/// (the tree's, properties) copies and moves one path alike; see
/// [`rewrite`] for a folder's range.
pub(crate) fn rekey<'q>(
    sql: &'q str,
    owner: Owner,
    from: &'q str,
    to: &'q str,
) -> sql::Statement<'q> {
    sql::query(sql).bind(owner.id()).bind(from).bind(to)
}

/// A statement that rewrites paths under `from` to lie under `to`: `$1`
/// owner, `$2` the new prefix, `$3` where the rest of a path starts (in
/// characters, as both engines' `SUBSTR` counts), `$4`..`$5` the range.
/// Every table with paths (the tree's, properties) rewrites them alike.
pub(crate) fn rewrite<'q>(
    sql: &'q str,
    owner: Owner,
    from: &'q Prefix,
    to: &'q Prefix,
    upper: &'q str,
) -> sql::Statement<'q> {
    let rest_starts = i64::try_from(from.as_str().chars().count() + 1).unwrap_or(i64::MAX);
    sql::query(sql)
        .bind(owner.id())
        .bind(to.as_str())
        .bind(rest_starts)
        .bind(from.as_str())
        .bind(upper)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_select_the_engine() {
        assert_eq!(
            "postgres://u:p@127.0.0.1:5432/db".parse::<DatabaseUrl>(),
            Ok(DatabaseUrl::Postgres(
                "postgres://u:p@127.0.0.1:5432/db".into()
            ))
        );
        assert_eq!(
            "sqlite:///var/lib/x.sqlite".parse::<DatabaseUrl>(),
            Ok(DatabaseUrl::Sqlite("/var/lib/x.sqlite".into()))
        );
        assert_eq!(
            "sqlite:data/x.sqlite?mode=rwc".parse::<DatabaseUrl>(),
            Ok(DatabaseUrl::Sqlite("data/x.sqlite".into()))
        );
        assert!("mysql://x".parse::<DatabaseUrl>().is_err());
        assert!("sqlite://".parse::<DatabaseUrl>().is_err());
    }

    #[test]
    fn the_password_is_never_shown() {
        let url: DatabaseUrl = "postgres://alice:s3cret@db:5432/store"
            .parse()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(url.to_string(), "postgres://alice:***@db:5432/store");
        assert!(!format!("{url:?}").contains("s3cret"));
    }
}
