//! The `object_locks` table: S3 Object Lock's retention and legal hold of
//! a version, by the version's identity (owner, path, version id), which
//! stays the same while the version moves from `files` (current) to
//! `file_versions` (earlier) and back. A version is *held* while its
//! retention's date is ahead of the server's clock or its legal hold is
//! on; nothing removes a held version or renames its path. A bucket's lock
//! configuration (enabled, and its default retention) rides on its
//! versioning row (`versioning`), since lock needs versioning on and every
//! write reads that row already.

use crate::db::Conn;

use crate::db::owned::{Adopt, OwnedRows};
use crate::db::sql;
use crate::error::VolumeError;
use crate::types::Owner;

/// One day, as retention periods count them.
const DAY_MS: i64 = 24 * 3600 * 1000;

/// How strictly a retention holds (S3's `ObjectLockMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// Held, except from a caller who may bypass governance and asks to.
    Governance,
    /// Held from everyone until its date; it can be extended, never
    /// shortened or taken off.
    Compliance,
}

impl LockMode {
    /// S3's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Governance => "GOVERNANCE",
            Self::Compliance => "COMPLIANCE",
        }
    }

    /// From S3's spelling (exactly: S3 refuses `governance`).
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "GOVERNANCE" => Some(Self::Governance),
            "COMPLIANCE" => Some(Self::Compliance),
            _ => None,
        }
    }
}

/// A version's retention: held in `mode` until `until_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub mode: LockMode,
    /// Milliseconds since the epoch, by the server's clock.
    pub until_ms: i64,
}

/// How long a bucket's default retention lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetentionPeriod {
    Days(u32),
    /// Years of 365 days.
    Years(u32),
}

impl RetentionPeriod {
    fn millis(self) -> i64 {
        match self {
            Self::Days(days) => i64::from(days) * DAY_MS,
            Self::Years(years) => i64::from(years) * 365 * DAY_MS,
        }
    }
}

/// The retention a bucket gives every new version that asks for none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefaultRetention {
    pub mode: LockMode,
    pub period: RetentionPeriod,
}

impl DefaultRetention {
    /// The retention of a version made at `now_ms`.
    pub fn from(self, now_ms: i64) -> Retention {
        Retention {
            mode: self.mode,
            until_ms: now_ms.saturating_add(self.period.millis()),
        }
    }
}

/// A bucket's object lock: it is enabled (it exists), with a default
/// retention or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BucketLock {
    pub default: Option<DefaultRetention>,
}

impl BucketLock {
    /// As `versioning.object_lock` keeps it: `''`, `GOVERNANCE 30d`,
    /// `COMPLIANCE 1y`.
    pub(crate) fn to_db(self) -> String {
        match self.default {
            None => String::new(),
            Some(DefaultRetention { mode, period }) => match period {
                RetentionPeriod::Days(days) => format!("{} {days}d", mode.as_str()),
                RetentionPeriod::Years(years) => format!("{} {years}y", mode.as_str()),
            },
        }
    }

    /// From `versioning.object_lock` (what is not understood: no default).
    pub(crate) fn from_db(text: &str) -> Self {
        let default = text.split_once(' ').and_then(|(mode, period)| {
            let mode = LockMode::parse(mode)?;
            let period = if let Some(days) = period.strip_suffix('d') {
                RetentionPeriod::Days(days.parse().ok()?)
            } else {
                RetentionPeriod::Years(period.strip_suffix('y')?.parse().ok()?)
            };
            Some(DefaultRetention { mode, period })
        });
        Self { default }
    }
}

/// What holds one version: its retention and its legal hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VersionLock {
    pub retention: Option<Retention>,
    /// On or off; `None`: never set (S3 answers the two apart).
    pub legal_hold: Option<bool>,
}

impl VersionLock {
    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        self.retention.is_none() && self.legal_hold.is_none()
    }

    /// Whether its legal hold is on.
    pub fn held_legally(&self) -> bool {
        self.legal_hold == Some(true)
    }

    /// The retention, while it holds at `now_ms`.
    pub fn retained(&self, now_ms: i64) -> Option<Retention> {
        self.retention
            .filter(|retention| retention.until_ms > now_ms)
    }

    /// Whether the version is held at `now_ms`.
    pub fn holds(&self, now_ms: i64) -> bool {
        self.held_legally() || self.retained(now_ms).is_some()
    }

    /// Why removing the version at `now_ms` is refused, if it is:
    /// `bypass` is a caller who may bypass governance asking to.
    pub fn refuses_removal(&self, now_ms: i64, bypass: bool) -> Option<String> {
        if self.held_legally() {
            return Some("it is under a legal hold".to_owned());
        }
        match self.retained(now_ms) {
            Some(Retention {
                mode: LockMode::Governance,
                ..
            }) if bypass => None,
            Some(retention) => Some(format!(
                "it is retained in {} mode until {}",
                retention.mode.as_str(),
                rfc3339(retention.until_ms)
            )),
            None => None,
        }
    }

    /// Why replacing this retention by `new` at `now_ms` is refused, if it
    /// is (S3's rules: a retention that holds may be extended in its
    /// mode; shortened, taken off or changed in mode only under
    /// governance and with `bypass`; never under compliance).
    pub fn refuses_retention(
        &self,
        new: Option<Retention>,
        now_ms: i64,
        bypass: bool,
    ) -> Option<String> {
        let old = self.retained(now_ms)?;
        let extends = new.is_some_and(|new| new.mode == old.mode && new.until_ms >= old.until_ms);
        if extends || (old.mode == LockMode::Governance && bypass) {
            return None;
        }
        Some(format!(
            "its retention in {} mode until {} may only be extended{}",
            old.mode.as_str(),
            rfc3339(old.until_ms),
            if old.mode == LockMode::Governance {
                " (or changed by a caller bypassing governance retention)"
            } else {
                ""
            }
        ))
    }
}

/// `ms` since the epoch as RFC 3339, for messages.
pub(crate) fn rfc3339(ms: i64) -> String {
    let at = std::time::UNIX_EPOCH
        + std::time::Duration::from_millis(u64::try_from(ms).unwrap_or_default());
    humantime::format_rfc3339_seconds(at).to_string()
}

/// The lock rows, for `owners`' cascades: a user's go with them (a user
/// who keeps held versions cannot be removed, see `owners`); the open
/// tree's go with its versions to a user who adopts it.
pub(crate) const OWNED: OwnedRows = OwnedRows::new("object_locks", "owner", Adopt::All);

/// The lock of `owner`'s version `version_id` of `path`, read on `conn`
/// (empty: none).
pub(crate) async fn get(
    conn: &mut Conn,
    owner: Owner,
    path: &str,
    version_id: &str,
) -> Result<VersionLock, VolumeError> {
    let row: Option<(Option<String>, Option<i64>, Option<i64>)> = sql::query_as(
        "SELECT mode, retain_until_ms, legal_hold FROM object_locks
         WHERE owner = $1 AND path = $2 AND version_id = $3",
    )
    .bind(owner.id())
    .bind(path)
    .bind(version_id)
    .fetch_optional(conn)
    .await?;
    Ok(
        row.map_or_else(VersionLock::default, |(mode, until, hold)| VersionLock {
            retention: mode
                .as_deref()
                .and_then(LockMode::parse)
                .zip(until)
                .map(|(mode, until_ms)| Retention { mode, until_ms }),
            legal_hold: hold.map(|hold| hold != 0),
        }),
    )
}

/// Set the lock of `owner`'s version `version_id` of `path` inside `tx`
/// (an empty one: forget it).
pub(crate) async fn set(
    tx: &mut Conn,
    owner: Owner,
    path: &str,
    version_id: &str,
    lock: VersionLock,
) -> Result<(), VolumeError> {
    if lock.is_empty() {
        return forget(tx, owner, path, version_id).await;
    }
    sql::query(
        "INSERT INTO object_locks (owner, path, version_id, mode, retain_until_ms, legal_hold)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (owner, path, version_id) DO UPDATE SET mode = excluded.mode,
             retain_until_ms = excluded.retain_until_ms, legal_hold = excluded.legal_hold",
    )
    .bind(owner.id())
    .bind(path)
    .bind(version_id)
    .bind(lock.retention.map(|retention| retention.mode.as_str()))
    .bind(lock.retention.map(|retention| retention.until_ms))
    .bind(lock.legal_hold.map(i64::from))
    .execute(tx)
    .await?;
    Ok(())
}

/// Forget the lock of a version that is gone, inside `tx`.
pub(crate) async fn forget(
    tx: &mut Conn,
    owner: Owner,
    path: &str,
    version_id: &str,
) -> Result<(), VolumeError> {
    sql::query("DELETE FROM object_locks WHERE owner = $1 AND path = $2 AND version_id = $3")
        .bind(owner.id())
        .bind(path)
        .bind(version_id)
        .execute(tx)
        .await?;
    Ok(())
}

/// SQL true of a `file_versions` row no lock holds at `now_ms`: what
/// retention, the quota's room and lifecycle may take.
pub(crate) fn unheld(now_ms: i64) -> String {
    format!(
        "NOT EXISTS (SELECT 1 FROM object_locks l WHERE l.owner = file_versions.owner
             AND l.path = file_versions.path AND l.version_id = file_versions.version_id
             AND (l.legal_hold = 1 OR l.retain_until_ms > {now_ms}))"
    )
}

/// Where [`refuse_held`] looks: one path's versions, or every path of a
/// folder (from `lower` to before `upper`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Paths<'a> {
    One(&'a str),
    Within { lower: &'a str, upper: &'a str },
}

/// Refuse, with [`VolumeError::Locked`], to move or remove `paths` while
/// a version there is held at `now_ms`.
pub(crate) async fn refuse_held(
    conn: &mut Conn,
    owner: Owner,
    paths: Paths<'_>,
    now_ms: i64,
) -> Result<(), VolumeError> {
    const HELD: &str = "(legal_hold = 1 OR retain_until_ms > $2)";
    let (lower, upper) = match paths {
        Paths::One(path) => (path, None),
        Paths::Within { lower, upper } => (lower, Some(upper)),
    };
    let statement = match upper {
        None => format!(
            "SELECT path, version_id FROM object_locks
             WHERE owner = $1 AND {HELD} AND path = $3 LIMIT 1"
        ),
        Some(_) => format!(
            "SELECT path, version_id FROM object_locks
             WHERE owner = $1 AND {HELD} AND path >= $3 AND path < $4 LIMIT 1"
        ),
    };
    let mut query = sql::query_as(&statement)
        .bind(owner.id())
        .bind(now_ms)
        .bind(lower);
    if let Some(upper) = upper {
        query = query.bind(upper);
    }
    let row: Option<(String, String)> = query.fetch_optional(&mut *conn).await?;
    let Some((path, version_id)) = row else {
        return Ok(());
    };
    let lock = get(conn, owner, &path, &version_id).await?;
    Err(VolumeError::Locked {
        reason: lock
            .refuses_removal(now_ms, false)
            .unwrap_or_else(|| "it is locked".to_owned()),
        path,
        version_id,
    })
}

/// Whether `owner` keeps any held version, read on `conn`.
pub(crate) async fn holds_any(
    conn: &mut Conn,
    owner: Owner,
    now_ms: i64,
) -> Result<bool, VolumeError> {
    let row: Option<(i64,)> = sql::query_as(
        "SELECT 1 FROM object_locks WHERE owner = $1
           AND (legal_hold = 1 OR retain_until_ms > $2) LIMIT 1",
    )
    .bind(owner.id())
    .bind(now_ms)
    .fetch_optional(conn)
    .await?;
    Ok(row.is_some())
}

/// Forget every lock that no longer holds and whose version is gone,
/// inside `tx`: the collection's sweep. How many went.
pub(crate) async fn sweep(tx: &mut Conn, now_ms: i64) -> Result<u64, VolumeError> {
    let done = sql::query(
        "DELETE FROM object_locks WHERE (legal_hold IS NULL OR legal_hold = 0)
           AND (retain_until_ms IS NULL OR retain_until_ms <= $1)
           AND NOT EXISTS (SELECT 1 FROM files f WHERE f.owner = object_locks.owner
                 AND f.path = object_locks.path AND f.version_id = object_locks.version_id)
           AND NOT EXISTS (SELECT 1 FROM file_versions v WHERE v.owner = object_locks.owner
                 AND v.path = object_locks.path AND v.version_id = object_locks.version_id)",
    )
    .bind(now_ms)
    .execute(tx)
    .await?;
    Ok(done.rows_affected())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;

    fn retention(mode: LockMode, until_ms: i64) -> Option<Retention> {
        Some(Retention { mode, until_ms })
    }

    #[test]
    fn a_bucket_lock_round_trips_through_its_column() {
        for lock in [
            BucketLock::default(),
            BucketLock {
                default: Some(DefaultRetention {
                    mode: LockMode::Governance,
                    period: RetentionPeriod::Days(30),
                }),
            },
            BucketLock {
                default: Some(DefaultRetention {
                    mode: LockMode::Compliance,
                    period: RetentionPeriod::Years(7),
                }),
            },
        ] {
            assert_eq!(BucketLock::from_db(&lock.to_db()), lock);
        }
    }

    #[test]
    fn governance_yields_to_a_bypass_compliance_and_legal_holds_to_nothing() {
        let governed = VersionLock {
            retention: retention(LockMode::Governance, NOW + 1),
            legal_hold: None,
        };
        assert!(governed.refuses_removal(NOW, false).is_some());
        assert!(governed.refuses_removal(NOW, true).is_none());
        assert!(
            governed.refuses_removal(NOW + 1, false).is_none(),
            "expired"
        );
        let complied = VersionLock {
            retention: retention(LockMode::Compliance, NOW + 1),
            legal_hold: None,
        };
        assert!(complied.refuses_removal(NOW, true).is_some());
        let held = VersionLock {
            retention: None,
            legal_hold: Some(true),
        };
        assert!(held.refuses_removal(NOW, true).is_some());
    }

    #[test]
    fn a_retention_may_be_extended_and_only_governance_shortened_with_a_bypass() {
        let governed = VersionLock {
            retention: retention(LockMode::Governance, NOW + 10),
            legal_hold: None,
        };
        let later = retention(LockMode::Governance, NOW + 20);
        let sooner = retention(LockMode::Governance, NOW + 5);
        let stricter = retention(LockMode::Compliance, NOW + 20);
        assert!(governed.refuses_retention(later, NOW, false).is_none());
        assert!(governed.refuses_retention(sooner, NOW, false).is_some());
        assert!(governed.refuses_retention(sooner, NOW, true).is_none());
        assert!(governed.refuses_retention(stricter, NOW, false).is_some());
        assert!(governed.refuses_retention(stricter, NOW, true).is_none());
        assert!(governed.refuses_retention(None, NOW, true).is_none());
        let complied = VersionLock {
            retention: retention(LockMode::Compliance, NOW + 10),
            legal_hold: None,
        };
        assert!(
            complied
                .refuses_retention(retention(LockMode::Compliance, NOW + 20), NOW, false)
                .is_none()
        );
        assert!(complied.refuses_retention(sooner, NOW, true).is_some());
        assert!(complied.refuses_retention(later, NOW, true).is_some());
        assert!(complied.refuses_retention(None, NOW, true).is_some());
        assert!(
            complied
                .refuses_retention(sooner, NOW + 10, false)
                .is_none(),
            "expired"
        );
    }
}
