//! SQLite's writer connection: this process's write transactions run on
//! one `rusqlite` connection, on the writer's own thread, where sqlx would
//! send each statement to its connection's worker thread and wait for the
//! answer (two thread switches per statement, most of a small write's CPU:
//! issue 36's profile). Its statements work on pages in memory; only the
//! group's `BEGIN` (when another process holds the lock) and `COMMIT` (the
//! WAL's fsync) may wait, and those run on a blocking thread (see
//! [`super::write_tx`]). A statement over many rows (a folder's move or
//! copy, at most `MAX_TREE_ROWS`) holds the caller's thread for as long as
//! it runs, as it holds SQLite's one write lock. Rows are read as sqlx
//! reads them: [`SqliteRow`].

use std::borrow::Cow;
use std::path::Path;

use rusqlite::types::{FromSql, Value};
use rusqlite::{Connection, ErrorCode, OpenFlags};

/// Statements kept prepared on the writer connection (rusqlite's default
/// is 16; the volume writes with about 170).
const PREPARED: usize = 512;

/// A row type read from `rusqlite` as sqlx's `FromRow` reads it from an
/// `AnyRow`: the same columns.
pub(crate) trait SqliteRow: Sized {
    fn from_sqlite(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self>;
}

/// [`SqliteRow`] for a struct read by column name, field by field (as
/// `#[derive(sqlx::FromRow)]` reads it).
macro_rules! sqlite_row {
    ($name:ident { $($field:ident),* $(,)? }) => {
        impl $crate::db::SqliteRow for $name {
            fn from_sqlite(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
                Ok(Self { $($field: row.get(stringify!($field))?),* })
            }
        }
    };
}
pub(crate) use sqlite_row;

/// Tuples are read by position.
macro_rules! tuple_rows {
    ($($t:ident $i:tt),+) => {
        impl<$($t: FromSql),+> SqliteRow for ($($t,)+) {
            fn from_sqlite(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
                Ok(($(row.get::<_, $t>($i)?,)+))
            }
        }
    };
}
tuple_rows!(A 0);
tuple_rows!(A 0, B 1);
tuple_rows!(A 0, B 1, C 2);
tuple_rows!(A 0, B 1, C 2, D 3);
tuple_rows!(A 0, B 1, C 2, D 3, E 4);
tuple_rows!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_rows!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_rows!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
tuple_rows!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
tuple_rows!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
tuple_rows!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
tuple_rows!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);

/// The writer connection to the SQLite file at `path` (migrated already),
/// set up as sqlx sets up its own (`Database::open`).
pub(crate) fn open(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;",
    )?;
    conn.set_prepared_statement_cache_capacity(PREPARED);
    Ok(conn)
}

/// Run one of a group's own statements (`BEGIN`, `COMMIT`, a savepoint's
/// start or end: no rows, no arguments), kept prepared like every other:
/// `execute_batch` would parse it again each time, twice per writer's turn.
pub(super) fn control(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

/// `sql` prepared (and kept prepared) on `conn` with `values` bound: `$N`
/// is a named parameter to SQLite, bound by its name.
fn prepared<'c>(
    conn: &'c Connection,
    sql: &str,
    values: &[Result<Value, String>],
) -> Result<rusqlite::CachedStatement<'c>, sqlx::Error> {
    let mut statement = conn.prepare_cached(sql).map_err(error)?;
    for (n, value) in values.iter().enumerate() {
        let value = value
            .as_ref()
            .map_err(|why| sqlx::Error::Encode(why.clone().into()))?;
        if let Some(index) = statement
            .parameter_index(&format!("${}", n + 1))
            .map_err(error)?
        {
            statement.raw_bind_parameter(index, value).map_err(error)?;
        }
    }
    Ok(statement)
}

/// Run `sql` to its end; the rows it changed.
pub(super) fn execute(
    conn: &Connection,
    sql: &str,
    values: &[Result<Value, String>],
) -> Result<u64, sqlx::Error> {
    let mut statement = prepared(conn, sql, values)?;
    let writes = !statement.readonly();
    let mut rows = statement.raw_query();
    while rows.next().map_err(error)?.is_some() {}
    drop(rows);
    Ok(if writes { conn.changes() } else { 0 })
}

/// The rows of `sql` (at most `most`), read as `O`.
pub(super) fn rows<O: SqliteRow>(
    conn: &Connection,
    sql: &str,
    values: &[Result<Value, String>],
    most: Option<usize>,
) -> Result<Vec<O>, sqlx::Error> {
    let mut statement = prepared(conn, sql, values)?;
    let mut rows = statement.raw_query();
    let mut read = Vec::new();
    while most.is_none_or(|most| read.len() < most) {
        match rows.next().map_err(error)? {
            Some(row) => read.push(O::from_sqlite(row).map_err(error)?),
            None => break,
        }
    }
    Ok(read)
}

/// A `rusqlite` error as sqlx reports SQLite's: a database error with
/// SQLite's extended code (what `VolumeError` reads a full disk from).
pub(crate) fn error(error: rusqlite::Error) -> sqlx::Error {
    match error {
        rusqlite::Error::SqliteFailure(failure, message) => {
            sqlx::Error::Database(Box::new(WriterError {
                code: failure.extended_code,
                kind: failure.code,
                message: message.unwrap_or_else(|| failure.to_string()),
            }))
        }
        rusqlite::Error::QueryReturnedNoRows => sqlx::Error::RowNotFound,
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::InvalidColumnType(..)
        | rusqlite::Error::InvalidColumnName(_)
        | rusqlite::Error::IntegralValueOutOfRange(..) => sqlx::Error::ColumnDecode {
            index: String::new(),
            source: Box::new(error),
        },
        other => sqlx::Error::Protocol(format!("SQLite's writer connection: {other}")),
    }
}

/// An error SQLite gave the writer connection.
#[derive(Debug)]
struct WriterError {
    code: i32,
    kind: ErrorCode,
    message: String,
}

impl std::fmt::Display for WriterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "(code: {}) {}", self.code, self.message)
    }
}

impl std::error::Error for WriterError {}

impl sqlx::error::DatabaseError for WriterError {
    fn message(&self) -> &str {
        &self.message
    }

    fn code(&self) -> Option<Cow<'_, str>> {
        Some(self.code.to_string().into())
    }

    fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self
    }

    fn kind(&self) -> sqlx::error::ErrorKind {
        use sqlx::error::ErrorKind;
        const UNIQUE: i32 = 2067;
        const PRIMARY_KEY: i32 = 1555;
        const FOREIGN_KEY: i32 = 787;
        const NOT_NULL: i32 = 1299;
        const CHECK: i32 = 275;
        match (self.kind, self.code) {
            (ErrorCode::ConstraintViolation, UNIQUE | PRIMARY_KEY) => ErrorKind::UniqueViolation,
            (ErrorCode::ConstraintViolation, FOREIGN_KEY) => ErrorKind::ForeignKeyViolation,
            (ErrorCode::ConstraintViolation, NOT_NULL) => ErrorKind::NotNullViolation,
            (ErrorCode::ConstraintViolation, CHECK) => ErrorKind::CheckViolation,
            _ => ErrorKind::Other,
        }
    }
}
