//! Every statement the volume runs is built here: [`query`] and
//! [`query_as`] wrap sqlx's own (which `volume/clippy.toml` forbids
//! elsewhere) and refuse to run a statement whose arguments do not fit its
//! text.
//!
//! Why: on PostgreSQL sqlx prepares each SQL text once per connection,
//! with the parameter types of its first use, and caches it by text. A
//! statement bound with one argument more than its placeholders (SQLite
//! ignores the extra) is prepared with that many parameters; the same text
//! bound rightly elsewhere then fails on that connection, or the first one
//! fails on a connection where the right one came first. Which happens
//! depends on which pooled connection ran what before: the `MOVE` and
//! `MKCOL` 500s of issue 20. Checked here, a mismatch fails at once, on
//! both engines, every time: the argument count always; in debug builds
//! (every test) also that one SQL text is always bound with the same types.
//!
//! A statement runs where [`On`] says: on sqlx (a pool, a connection, a
//! PostgreSQL transaction) or on SQLite's writer connection (`rusqlite`,
//! on the caller's thread: see [`super::writer`]), with the same text and
//! arguments; each bound argument is kept for both.

use rusqlite::types::{ToSqlOutput, Value};
use sqlx::any::{AnyArguments, AnyRow, AnyTypeInfoKind};
use sqlx::{Any, Encode, FromRow, Type};

use super::conn::On;
use super::writer::{self, SqliteRow};

/// What a statement that returns no rows did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Done {
    rows_affected: u64,
}

impl Done {
    pub(crate) fn rows_affected(&self) -> u64 {
        self.rows_affected
    }
}

/// An argument as SQLite's writer binds it (owned: it outlives the value
/// bound), or why it cannot be.
fn sqlite_value<T: rusqlite::ToSql>(value: &T) -> Result<Value, String> {
    match value.to_sql() {
        Ok(ToSqlOutput::Borrowed(value)) => Ok(value.into()),
        Ok(ToSqlOutput::Owned(value)) => Ok(value),
        Ok(_) => Err("an argument SQLite cannot take as a value".to_owned()),
        Err(error) => Err(error.to_string()),
    }
}

/// A statement that returns no rows worth reading (or is read as raw rows).
#[allow(clippy::disallowed_methods)]
pub(crate) fn query(sql: &str) -> Statement<'_> {
    Statement {
        shape: Shape::new(sql),
        inner: sqlx::query(sql),
        values: Vec::new(),
    }
}

/// A statement whose rows are read as `O`.
#[allow(clippy::disallowed_methods)]
pub(crate) fn query_as<O>(sql: &str) -> StatementAs<'_, O>
where
    O: Send + Unpin + for<'r> FromRow<'r, AnyRow> + SqliteRow,
{
    StatementAs {
        shape: Shape::new(sql),
        inner: sqlx::query_as(sql),
        values: Vec::new(),
    }
}

/// [`sqlx::query::Query`], checked before it runs.
#[must_use = "a statement does nothing until it is executed"]
pub(crate) struct Statement<'q> {
    shape: Shape<'q>,
    inner: sqlx::query::Query<'q, Any, AnyArguments<'q>>,
    values: Vec<Result<Value, String>>,
}

impl<'q> Statement<'q> {
    pub(crate) fn bind<T>(mut self, value: T) -> Self
    where
        T: 'q + Encode<'q, Any> + Type<Any> + rusqlite::ToSql,
    {
        self.shape.bound::<T>();
        self.values.push(sqlite_value(&value));
        self.inner = self.inner.bind(value);
        self
    }

    pub(crate) async fn execute<'c>(self, on: impl Into<On<'c>>) -> Result<Done, sqlx::Error> {
        self.shape.check()?;
        let rows_affected = match on.into() {
            On::Pool(pool) => self.inner.execute(pool).await?.rows_affected(),
            On::Sqlx(conn) => self.inner.execute(conn).await?.rows_affected(),
            On::Writer(conn) => writer::execute(conn, self.shape.sql, &self.values)?,
        };
        Ok(Done { rows_affected })
    }
}

/// [`sqlx::query::QueryAs`], checked before it runs.
#[must_use = "a statement does nothing until it is executed"]
pub(crate) struct StatementAs<'q, O> {
    shape: Shape<'q>,
    inner: sqlx::query::QueryAs<'q, Any, O, AnyArguments<'q>>,
    values: Vec<Result<Value, String>>,
}

impl<'q, O> StatementAs<'q, O>
where
    O: Send + Unpin + for<'r> FromRow<'r, AnyRow> + SqliteRow,
{
    pub(crate) fn bind<T>(mut self, value: T) -> Self
    where
        T: 'q + Encode<'q, Any> + Type<Any> + rusqlite::ToSql,
    {
        self.shape.bound::<T>();
        self.values.push(sqlite_value(&value));
        self.inner = self.inner.bind(value);
        self
    }

    pub(crate) async fn fetch_one<'c>(self, on: impl Into<On<'c>>) -> Result<O, sqlx::Error> {
        self.fetch_optional(on)
            .await?
            .ok_or(sqlx::Error::RowNotFound)
    }

    pub(crate) async fn fetch_optional<'c>(
        self,
        on: impl Into<On<'c>>,
    ) -> Result<Option<O>, sqlx::Error> {
        self.shape.check()?;
        match on.into() {
            On::Pool(pool) => self.inner.fetch_optional(pool).await,
            On::Sqlx(conn) => self.inner.fetch_optional(conn).await,
            On::Writer(conn) => writer::rows(conn, self.shape.sql, &self.values, Some(1))
                .map(|rows| rows.into_iter().next()),
        }
    }

    pub(crate) async fn fetch_all<'c>(self, on: impl Into<On<'c>>) -> Result<Vec<O>, sqlx::Error> {
        self.shape.check()?;
        match on.into() {
            On::Pool(pool) => self.inner.fetch_all(pool).await,
            On::Sqlx(conn) => self.inner.fetch_all(conn).await,
            On::Writer(conn) => writer::rows(conn, self.shape.sql, &self.values, None),
        }
    }
}

/// A statement's text and the types of the arguments bound to it so far.
struct Shape<'q> {
    sql: &'q str,
    kinds: Vec<AnyTypeInfoKind>,
}

impl<'q> Shape<'q> {
    fn new(sql: &'q str) -> Self {
        Self {
            sql,
            kinds: Vec::new(),
        }
    }

    fn bound<T: Type<Any>>(&mut self) {
        self.kinds.push(T::type_info().kind());
    }

    /// Refuse a statement bound with more or fewer arguments than its
    /// highest placeholder, or (debug builds) with other types than the
    /// same text was bound with before.
    fn check(&self) -> Result<(), sqlx::Error> {
        let placeholders = placeholders(self.sql);
        if self.kinds.len() != placeholders {
            return Err(sqlx::Error::Protocol(format!(
                "{} arguments bound to a statement with {placeholders} placeholders: {}",
                self.kinds.len(),
                self.sql
            )));
        }
        #[cfg(debug_assertions)]
        same_types_as_before(self.sql, &self.kinds)?;
        Ok(())
    }
}

/// The highest `$N` in `sql` (the statements here put no `$` in literals).
fn placeholders(sql: &str) -> usize {
    let bytes = sql.as_bytes();
    let mut highest = 0;
    for (at, _) in sql.match_indices('$') {
        let digits = bytes[at + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if let Ok(n) = sql[at + 1..at + 1 + digits].parse::<usize>() {
            highest = highest.max(n);
        }
    }
    highest
}

/// Refuse `sql` bound with `kinds` when this process bound the same text
/// with other types before: its prepared statement would not fit.
#[cfg(debug_assertions)]
fn same_types_as_before(sql: &str, kinds: &[AnyTypeInfoKind]) -> Result<(), sqlx::Error> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};

    static SEEN: OnceLock<Mutex<HashMap<String, Vec<AnyTypeInfoKind>>>> = OnceLock::new();
    let mut seen = SEEN
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let first = seen.entry(sql.to_owned()).or_insert_with(|| kinds.to_vec());
    if first.as_slice() != kinds {
        return Err(sqlx::Error::Protocol(format!(
            "a statement bound as {kinds:?}, first bound as {first:?}: {sql}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_counted_by_the_highest() {
        assert_eq!(placeholders("SELECT 1"), 0);
        assert_eq!(placeholders("DELETE FROM t WHERE a = $1 AND b = $2"), 2);
        assert_eq!(placeholders("SELECT $2 || SUBSTR(p, $3), $1, $1"), 3);
        assert_eq!(placeholders("VALUES ($10, $9)"), 10);
        assert_eq!(placeholders("SELECT '$'"), 0);
    }

    #[test]
    fn a_statement_with_an_argument_too_many_is_refused() {
        let statement = query("DELETE FROM dav_locks WHERE owner = $1 AND path = $2")
            .bind(1_i64)
            .bind("from")
            .bind("to");
        assert!(statement.shape.check().is_err());
        let statement = query("DELETE FROM dav_locks WHERE owner = $1 AND path = $2")
            .bind(1_i64)
            .bind("from");
        assert!(statement.shape.check().is_ok());
    }

    #[cfg(debug_assertions)]
    #[test]
    fn one_text_is_always_bound_with_the_same_types() {
        let sql = "SELECT $1 -- types test";
        assert!(query(sql).bind(1_i64).shape.check().is_ok());
        assert!(query(sql).bind(Some(2_i64)).shape.check().is_ok());
        assert!(query(sql).bind("one").shape.check().is_err());
    }
}
