//! Reads on the caller's own thread (SQLite only): the point lookups every
//! request makes (a file's row, whether any user exists) run on a
//! `rusqlite` connection of this process, synchronously, where sqlx would
//! send each to its connection's worker thread and wait for the answer: two
//! thread switches per query, most of a small GET's CPU (issue 24's
//! profile). A lookup by primary key in a WAL database is a few
//! microseconds of work on pages in memory; readers never wait for the
//! writer (WAL), so a request's worker thread is held for about as long as
//! it would take a mutex. Writes run on a `rusqlite` connection too (see
//! [`super::writer`]); every other read stays on sqlx.
//!
//! Both libraries link the same SQLite (`libsqlite3-sys`, one copy in the
//! build), and a commit through sqlx is visible here to the next statement:
//! an acknowledged write is read back by the next request.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::error::VolumeError;

/// Connections kept for reuse, at least: more are opened when more
/// threads read at once (twice the cores are kept, as every tokio worker
/// and blocking thread may read), and closed when they come back to a full
/// shelf.
const KEPT_AT_LEAST: usize = 8;

/// A reader that found the database busy (a WAL index being rebuilt after
/// a crash) waits at most this long.
const BUSY_WAIT: Duration = Duration::from_secs(2);

/// The watched question (whether any user exists: every request of an
/// open gateway asks) holds its one connection: it gives up sooner (a 500,
/// failing closed) rather than hold every worker.
const WATCHED_BUSY_WAIT: Duration = Duration::from_millis(100);

/// Read-only connections to one SQLite file.
pub(crate) struct SyncReader {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
    /// How many idle connections are kept.
    kept: usize,
    /// The watched question's last answer (see [`SyncReader::watched`]).
    watched: Mutex<Watched>,
}

struct Watched {
    /// A connection kept for the change signal: `PRAGMA data_version`
    /// changes on a connection whenever another connection (of any process)
    /// commits to the file.
    connection: Connection,
    data_version: i64,
    /// The question last asked (its SQL), and its answer then.
    query: &'static str,
    answer: bool,
}

impl std::fmt::Debug for SyncReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncReader")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SyncReader {
    /// Readers of the SQLite file at `path` (which sqlx has opened and
    /// migrated already). Connections are opened now, so a file that
    /// cannot be read fails at start rather than at the first request.
    pub(crate) fn open(path: &Path) -> Result<Self, VolumeError> {
        let watcher = connect(path)?;
        watcher
            .busy_timeout(WATCHED_BUSY_WAIT)
            .map_err(from_sqlite)?;
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        Ok(Self {
            path: path.to_owned(),
            idle: Mutex::new(vec![connect(path)?]),
            kept: KEPT_AT_LEAST.max(2 * cores),
            watched: Mutex::new(Watched {
                connection: watcher,
                data_version: i64::MIN,
                query: "",
                answer: false,
            }),
        })
    }

    /// Run `read` on a connection of this thread's choosing.
    pub(crate) fn read<T>(
        &self,
        read: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, VolumeError> {
        let connection = match lock(&self.idle).pop() {
            Some(connection) => connection,
            None => connect(&self.path)?,
        };
        let result = read(&connection);
        let mut idle = lock(&self.idle);
        if idle.len() < self.kept {
            idle.push(connection);
        }
        result.map_err(from_sqlite)
    }

    /// The answer to `query` (one row, one boolean column; the accounts'
    /// whether any user exists): asked of the database only when something
    /// committed to it since the last answer (any table, any process: a
    /// `gateway user add` run beside the gateway included), or when the
    /// last question was another, so the answer is never stale and most
    /// requests pay one `PRAGMA` for it.
    pub(crate) fn watched(&self, query: &'static str) -> Result<bool, VolumeError> {
        let mut seen = lock(&self.watched);
        let Watched {
            connection,
            data_version,
            query: asked,
            answer,
        } = &mut *seen;
        let version: i64 = connection
            .prepare_cached("PRAGMA data_version")
            .and_then(|mut statement| statement.query_row([], |row| row.get(0)))
            .map_err(from_sqlite)?;
        if version != *data_version || query != *asked {
            *answer = connection
                .prepare_cached(query)
                .and_then(|mut statement| statement.query_row([], |row| row.get(0)))
                .map_err(from_sqlite)?;
            *data_version = version;
            *asked = query;
        }
        Ok(*answer)
    }
}

impl SyncReader {
    /// At shutdown: close the idle connections and move the WAL's pages
    /// into the database file, as SQLite does when its last connection
    /// closes (this reader's watched question stays open until the process ends,
    /// so that would not happen): a copy of the file alone is then whole.
    pub(crate) fn close(&self) {
        lock(&self.idle).clear();
        let checkpoint = Connection::open_with_flags(&self.path, OpenFlags::SQLITE_OPEN_READ_WRITE)
            .and_then(|connection| {
                connection.busy_timeout(BUSY_WAIT)?;
                connection.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            });
        if let Err(error) = checkpoint {
            tracing::warn!(%error, "checkpointing the index's WAL at shutdown");
        }
    }
}

/// A connection that can only read: a bug here cannot write.
fn connect(path: &Path) -> Result<Connection, VolumeError> {
    let connection = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(from_sqlite)?;
    connection.busy_timeout(BUSY_WAIT).map_err(from_sqlite)?;
    connection
        .pragma_update(None, "query_only", true)
        .map_err(from_sqlite)?;
    Ok(connection)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn from_sqlite(error: rusqlite::Error) -> VolumeError {
    VolumeError::Read(error.to_string())
}
