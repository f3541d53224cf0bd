//! What belongs to an owner, in one list: every table that keeps rows of
//! an owner, each with its own module's steps for when the owner's user
//! goes ([`Accounts::remove_user`]) and for when a user adopts the open
//! tree ([`Accounts::adopt_open_tree`]): most tables' module declares its
//! table as [`OwnedRows`](crate::db::owned::OwnedRows) and takes the generic steps. A new table that
//! keeps an owner's rows is one line in [`TABLES`] (the suite checks every
//! table of the schema against it). Owns no table.

use crate::db::Conn;
use futures_util::future::BoxFuture;

use crate::accounts::{self, Accounts, shares};
use crate::db::WriteTx;
use crate::db::owned::Adopt;
use crate::error::VolumeError;
use crate::tree::{self, Tree};
use crate::types::{Owner, UserId, now_ms};
use crate::{bucket_config, history, locks, object_lock, properties, uploads, versioning};

/// One table's step for one owner, inside the caller's transaction: the
/// rows it changed.
type Step = for<'t> fn(&'t mut Conn, Owner) -> BoxFuture<'t, Result<u64, VolumeError>>;

/// A table that keeps rows of an owner, and its module's steps.
pub(crate) struct OwnedTable {
    pub(crate) name: &'static str,
    /// Remove the owner's rows (their user is going).
    delete: Step,
    /// Give the open tree's rows to a user; `None` where the open tree has
    /// none to give (it has no user), or keeps them.
    adopt: Option<Step>,
}

impl OwnedTable {
    /// Whether adopting the open tree gives its rows in this table too.
    #[cfg(test)]
    pub(crate) fn adopts(&self) -> bool {
        self.adopt.is_some()
    }
}

/// An [`OwnedTable`]: from the [`OwnedRows`](crate::db::owned::OwnedRows) its module declares, whose
/// generic steps it takes (`adopt:` the module's own `async fn` step
/// instead), or from its name and its module's own `delete` step.
macro_rules! owned {
    (rows: $rows:path $(, adopt: $adopt:path)? $(,)?) => {
        OwnedTable {
            name: $rows.table,
            delete: |tx, owner| Box::pin($rows.delete_in(tx, owner)),
            adopt: owned!(@adopt $rows $(, $adopt)?),
        }
    };
    ($name:literal, delete: $delete:path $(,)?) => {
        OwnedTable {
            name: $name,
            delete: |tx, owner| Box::pin($delete(tx, owner)),
            adopt: None,
        }
    };
    (@adopt $rows:path) => {
        match $rows.adopt {
            Adopt::Not => None,
            Adopt::All | Adopt::KeepingTheirs => {
                let step: Step = |tx, to| Box::pin($rows.adopt_in(tx, to));
                Some(step)
            }
        }
    };
    (@adopt $rows:path, $adopt:path) => {{
        let step: Step = |tx, to| Box::pin($adopt(tx, to));
        Some(step)
    }};
}

/// Every table that keeps rows of an owner, in the order both cascades
/// run their steps: the tree's tables first, as a file's writer takes
/// them after the owner's user row (which the caller holds), so none
/// deadlocks; parts before the uploads they are found through; the user's
/// row last, after every row that names it (`tokens` and `sessions`
/// reference it).
pub(crate) const TABLES: &[OwnedTable] = &[
    owned!(rows: tree::FILES, adopt: Tree::adopt_files_in),
    owned!(rows: history::OWNED, adopt: history::adopt_in),
    owned!(rows: versioning::OWNED),
    owned!(rows: object_lock::OWNED),
    owned!(rows: bucket_config::OWNED),
    owned!(rows: tree::FOLDERS),
    owned!(rows: properties::OWNED),
    owned!(rows: locks::OWNED),
    owned!(rows: shares::OWNED),
    owned!(rows: accounts::TOKENS),
    owned!(rows: accounts::S3_KEYS),
    // The open tree's unfinished uploads stay its own: they expire there.
    owned!("upload_parts", delete: uploads::delete_owner_parts_in),
    owned!("multipart_parts", delete: uploads::delete_owner_numbered_parts_in),
    owned!(rows: uploads::OWNED),
    owned!(rows: accounts::SESSIONS),
    owned!(rows: accounts::USERS),
];

/// The table whose adopted rows [`Accounts::adopt_open_tree`] counts.
const FILES: &str = "files";

/// Remove every row of `owner` inside `tx`, table by table in [`TABLES`]'
/// order.
async fn delete_in(tx: &mut Conn, owner: Owner) -> Result<(), VolumeError> {
    for table in TABLES {
        (table.delete)(tx, owner).await?;
    }
    Ok(())
}

/// Give the open tree's rows to `to` inside `tx`, table by table in
/// [`TABLES`]' order (a file at a path `to` has too refuses it all:
/// `AlreadyExists`); how many files moved.
async fn adopt_open_in(tx: &mut Conn, to: Owner) -> Result<u64, VolumeError> {
    let mut files = 0;
    for table in TABLES {
        if let Some(adopt) = table.adopt {
            let moved = adopt(tx, to).await?;
            if table.name == FILES {
                files = moved;
            }
        }
    }
    Ok(files)
}

impl Accounts {
    /// Remove a user with everything of theirs ([`TABLES`]: files, whose
    /// blobs the next garbage collection releases, folders, properties,
    /// locks, share links, tokens, S3 keys, unfinished uploads, whose
    /// parts' objects it collects too, and sessions), in one transaction;
    /// whether the user existed.
    pub async fn remove_user(&self, name: &str) -> Result<bool, VolumeError> {
        let db = self.db();
        db.write(async |tx: &mut WriteTx| {
            // The user's row first, as an upload takes it (after its blob's
            // ledger row, before its file row): the same order, no deadlock.
            let Some(owner) = accounts::lock_user_named(db, tx, name).await? else {
                return Ok(false);
            };
            if object_lock::holds_any(tx, owner, now_ms()).await? {
                return Err(VolumeError::UserHoldsLockedVersions(name.to_owned()));
            }
            delete_in(tx, owner).await?;
            Ok(true)
        })
        .await
    }

    /// Give the open tree (files, folders, properties, locks, share links
    /// and S3 keys made while the gateway had no user) to `user`, whose tree
    /// must not hold the same paths; how many files moved.
    pub async fn adopt_open_tree(&self, user: UserId) -> Result<u64, VolumeError> {
        let to = Owner::user(user);
        self.db()
            .write(async |tx: &mut WriteTx| adopt_open_in(tx, to).await)
            .await
    }
}
