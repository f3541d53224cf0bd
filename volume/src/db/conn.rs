//! Where a statement runs: [`Conn`], a connection a caller holds across
//! statements (a write transaction's, or a pooled one for reads), and
//! [`On`], what one statement is given.

use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection, AnyPool, Transaction};

/// A connection held across statements.
#[derive(Debug)]
pub(crate) enum Conn {
    /// A PostgreSQL write transaction of its own.
    Tx(Transaction<'static, Any>),
    /// A pooled connection, outside any transaction (reads).
    Pooled(PoolConnection<Any>),
    /// SQLite's writer connection, in this process's group transaction,
    /// during one writer's turn (see [`super::write_tx`]).
    Writer(rusqlite::Connection),
}

/// What one statement runs on.
pub(crate) enum On<'c> {
    Pool(&'c AnyPool),
    Sqlx(&'c mut AnyConnection),
    /// Run on the caller's thread.
    Writer(&'c rusqlite::Connection),
}

impl<'c> From<&'c AnyPool> for On<'c> {
    fn from(pool: &'c AnyPool) -> Self {
        Self::Pool(pool)
    }
}

impl<'c> From<&'c mut Conn> for On<'c> {
    fn from(conn: &'c mut Conn) -> Self {
        match conn {
            Conn::Tx(tx) => Self::Sqlx(tx),
            Conn::Pooled(conn) => Self::Sqlx(conn),
            Conn::Writer(conn) => Self::Writer(conn),
        }
    }
}
