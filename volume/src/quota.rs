//! The quota rule, over tables it does not own: what an owner uses is the
//! bytes of their files (the tree's) plus the bytes of every dead property
//! they keep (namespace, name and value: the properties'), and a change
//! that would take them past their quota is refused in the transaction
//! that makes it, after taking their user row (accounts) so one owner's
//! changes are weighed one at a time.

use sqlx::AnyConnection;

use crate::accounts;
use crate::db::{Database, WriteTx};
use crate::error::VolumeError;
use crate::path::FilePath;
use crate::properties;
use crate::tree::Tree;
use crate::types::Owner;

/// Take `owner`'s user row until `tx` ends; their quota (`None`: none).
/// Every writer that can add to an owner's usage takes it first (after
/// an upload's ledger row), always in that order, so none deadlocks.
pub(crate) async fn lock(
    db: &Database,
    tx: &mut WriteTx,
    owner: Owner,
) -> Result<Option<u64>, VolumeError> {
    accounts::locked_quota(db, tx, owner).await
}

/// What `owner` uses, leaving out the file `except` (one an upload is
/// about to replace), read on `conn`.
pub(crate) async fn usage(
    db: &Database,
    conn: &mut AnyConnection,
    owner: Owner,
    except: Option<&FilePath>,
) -> Result<u64, VolumeError> {
    let files = Tree::usage(conn, owner, except).await?;
    let properties = properties::usage(db, conn, owner).await?;
    Ok(files.saturating_add(properties))
}

/// Refuse (`QuotaExceeded`) to add `size` bytes to what `owner` uses
/// (leaving out the file `except`) past `quota`.
pub(crate) async fn check(
    db: &Database,
    conn: &mut AnyConnection,
    owner: Owner,
    quota: Option<u64>,
    except: Option<&FilePath>,
    size: u64,
) -> Result<(), VolumeError> {
    let Some(quota) = quota else {
        return Ok(());
    };
    let used = usage(db, conn, owner, except).await?;
    if used.saturating_add(size) > quota {
        return Err(VolumeError::QuotaExceeded { quota, used, size });
    }
    Ok(())
}
