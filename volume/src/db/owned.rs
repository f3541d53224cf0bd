//! The steps of `owners`' cascades that are the same in every table that
//! keeps an owner's rows, over the table as its module names it
//! ([`OwnedRows`]): each module declares its own table, so the table stays
//! with its owner; `owners` lists the declarations. The open tree is
//! owner 0.

use crate::db::Conn;

use super::sql;
use crate::error::VolumeError;
use crate::types::Owner;

/// What adopting the open tree does to a table's rows of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Adopt {
    /// Nothing: the open tree has none (they are a user's), or keeps them.
    Not,
    /// They all become the adopting user's.
    All,
    /// They become the adopting user's, except at a `path` where the user
    /// has a row of the table too: there the user's stays, the open tree's
    /// goes.
    KeepingTheirs,
}

/// A table that keeps rows of an owner, as its module declares it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OwnedRows {
    pub(crate) table: &'static str,
    /// The column that holds the owner's id (`owner`, or a user's id).
    pub(crate) column: &'static str,
    pub(crate) adopt: Adopt,
}

impl OwnedRows {
    /// The rows of `table` whose `column` holds their owner's id, which
    /// adopting the open tree treats as `adopt` says.
    pub(crate) const fn new(table: &'static str, column: &'static str, adopt: Adopt) -> Self {
        Self {
            table,
            column,
            adopt,
        }
    }

    /// Delete `owner`'s rows inside `tx` (their user is going); how many
    /// went.
    pub(crate) async fn delete_in(self, tx: &mut Conn, owner: Owner) -> Result<u64, VolumeError> {
        let Self { table, column, .. } = self;
        run_for(
            tx,
            &format!("DELETE FROM {table} WHERE {column} = $1"),
            owner,
        )
        .await
    }

    /// Give the open tree's rows to `to` inside `tx`, as [`Self::adopt`]
    /// says; how many moved.
    pub(crate) async fn adopt_in(self, tx: &mut Conn, to: Owner) -> Result<u64, VolumeError> {
        let Self { table, column, .. } = self;
        match self.adopt {
            Adopt::Not => return Ok(0),
            Adopt::All => {}
            Adopt::KeepingTheirs => {
                let overlap = format!(
                    "DELETE FROM {table} WHERE {column} = 0 AND path IN
                         (SELECT path FROM {table} WHERE {column} = $1)"
                );
                run_for(tx, &overlap, to).await?;
            }
        }
        let adopt = format!("UPDATE {table} SET {column} = $1 WHERE {column} = 0");
        run_for(tx, &adopt, to).await
    }
}

/// Run `statement`, whose one parameter is `owner`'s id, inside `tx`; the
/// rows it changed.
pub(crate) async fn run_for(
    tx: &mut Conn,
    statement: &str,
    owner: Owner,
) -> Result<u64, VolumeError> {
    let done = sql::query(statement).bind(owner.id()).execute(tx).await?;
    Ok(done.rows_affected())
}
