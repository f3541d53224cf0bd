//! Write transactions, and group commit on SQLite.
//!
//! PostgreSQL writers each get a transaction of their own: they lock the
//! rows they read (`FOR UPDATE`) and commit in parallel. SQLite has one
//! write lock per file, so this process's writers take turns; and each
//! commit is an fsync of the WAL. Rather than one transaction (and one
//! fsync) per writer, writers that take their turns back to back share one:
//! each that joins runs in a savepoint of the group's transaction (so one
//! that fails or is dropped undoes only its own writes; the one that began
//! it needs none: undoing the whole transaction undoes its alone), and the
//! last writer of a run (no other writer waiting for a turn, or the group
//! full) commits the group once for all of them. [`WriteTx::commit`] returns
//! only once that commit is durable, so nothing is acknowledged before it
//! is; a commit that fails fails every writer of the group, and a crash
//! before it loses only writes none of them had been told were stored. A
//! writer that undoes its part while the group holds others' work waits for
//! that commit too: what it read of their work (and answered on) is durable
//! before it answers. Every step that changes the group runs in a task of
//! its own, so a cancelled writer cannot leave it half-way; a PostgreSQL
//! transaction begins in a task of its own for the same reason (see
//! [`WriteTx::own`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection, AnyPool, Transaction, TransactionManager as _};
use tokio::sync::{Mutex, OwnedMutexGuard, oneshot};

use crate::error::VolumeError;

type Manager = <Any as sqlx::Database>::TransactionManager;

/// Most writers one group commit takes: the first of them waits for the
/// others' work, so this bounds what sharing a commit adds to its latency.
const MAX_GROUP: usize = 32;

/// A write transaction: on PostgreSQL one of its own; on SQLite a savepoint
/// in this process's group transaction, held with this process's turn to
/// write. Queries run on it through `&mut **tx`. Dropped without
/// [`WriteTx::commit`], its writes are rolled back.
#[derive(Debug)]
pub(crate) struct WriteTx(Kind);

#[derive(Debug)]
enum Kind {
    Own(Transaction<'static, Any>),
    Grouped(Turn),
}

/// SQLite's writers in this process: whose turn it is, and the group
/// transaction open between turns.
#[derive(Debug, Default)]
pub(crate) struct Writers {
    /// Held by the writer whose turn it is; between turns, the group still
    /// waiting for its commit, if any.
    open: Arc<Mutex<Option<Group>>>,
    /// Writers waiting for a turn: while there are some, a finishing writer
    /// leaves the group open for them to join.
    waiting: AtomicUsize,
    /// A settler is queued for a turn: it commits a group left open once
    /// every writer queued before it has joined (see [`Writers::settle`]).
    settler_queued: AtomicBool,
}

/// Counts a writer as waiting until it has its turn or gives up.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(waiting: &'a AtomicUsize) -> Self {
        waiting.fetch_add(1, Ordering::SeqCst);
        Self(waiting)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Writers {
    fn others_waiting(&self) -> bool {
        self.waiting.load(Ordering::SeqCst) > 0
    }

    /// Leave `group` open for the writers waiting for a turn, and make sure
    /// it is committed even if none of them comes (gave up, or failed): a
    /// settler queues for a turn behind them (turns are first come, first
    /// served) and ends whatever group it finds open.
    fn leave_open(self: &Arc<Self>, guard: &mut OwnedMutexGuard<Option<Group>>, group: Group) {
        **guard = Some(group);
        if self.settler_queued.swap(true, Ordering::SeqCst) {
            return;
        }
        let writers = self.clone();
        let settle = async move {
            let mut guard = writers.open.clone().lock_owned().await;
            writers.settler_queued.store(false, Ordering::SeqCst);
            if let Some(group) = guard.take() {
                group.end().await;
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(settle)),
            // No runtime left: the group's writers are gone with it, and
            // its connection rolls back when it is released.
            Err(_) => drop(guard.take()),
        }
    }
}

/// An open SQLite transaction (`BEGIN IMMEDIATE`: it holds the write lock)
/// and the writers whose work it holds.
#[derive(Debug)]
struct Group {
    conn: PoolConnection<Any>,
    members: Vec<oneshot::Sender<Result<(), Failure>>>,
}

/// Why a group's commit failed, as each of its writers is told.
#[derive(Debug, Clone)]
struct Failure {
    no_space: bool,
    message: String,
}

impl From<Failure> for VolumeError {
    fn from(failure: Failure) -> Self {
        if failure.no_space {
            Self::NoSpace
        } else {
            Self::Database(sqlx::Error::Protocol(format!(
                "the group commit failed: {}",
                failure.message
            )))
        }
    }
}

impl Failure {
    fn of(error: &VolumeError) -> Self {
        Self {
            no_space: matches!(error, VolumeError::NoSpace),
            message: error.to_string(),
        }
    }
}

/// One writer's turn: the group, lent to it until it ends. Dropped before
/// it ends (an early `?` return, a cancelled caller), its part is undone in
/// a task of its own.
#[derive(Debug)]
struct Turn {
    writers: Arc<Writers>,
    /// Both `Some` until the turn ends.
    guard: Option<OwnedMutexGuard<Option<Group>>>,
    group: Option<Group>,
    part: Part,
}

/// What of the group's transaction is one writer's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// It began the group: the whole transaction so far is its work, and
    /// undoing it is rolling that back (no savepoint needed: two
    /// statements fewer per group).
    Whole,
    /// It joined others' work: its savepoint.
    Savepoint,
}

/// How a writer's part of the group ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Release its savepoint: its writes go with the group's commit.
    Keep,
    /// Roll back to its savepoint: its writes are undone.
    Undo,
}

impl WriteTx {
    /// Begin a transaction of its own (PostgreSQL), in a task of its own.
    ///
    /// sqlx counts a transaction only once the server has answered `BEGIN`,
    /// and a rollback on drop only undoes a counted one. A caller cancelled
    /// in between (a client hanging up) would leave the server in a
    /// transaction nobody knows of, on a connection the pool hands out
    /// again: its later statements would run inside it, hold their locks
    /// and never commit (`idle in transaction`, and writers waiting on it
    /// for ever). In a task `BEGIN` always finishes; if the caller has gone,
    /// the transaction is dropped there, counted, and rolled back.
    pub(super) async fn own(pool: &AnyPool) -> Result<Self, VolumeError> {
        let pool = pool.clone();
        let begun = tokio::spawn(async move { pool.begin().await });
        Ok(Self(Kind::Own(begun.await.map_err(lost)??)))
    }

    /// Wait for this process's turn to write on SQLite, then join the open
    /// group (or begin one).
    pub(super) async fn grouped(
        writers: &Arc<Writers>,
        pool: &AnyPool,
    ) -> Result<Self, VolumeError> {
        let waiting = Waiting::new(&writers.waiting);
        let guard = writers.open.clone().lock_owned().await;
        drop(waiting);
        // Every step that changes the group runs in a task of its own: a
        // caller cancelled mid-step (a client hanging up on a WebDAV
        // request) must not leave the group half-way, and other writers'
        // work with it. Cancelled now, the turn is dropped, and undone.
        let start = start_turn(writers.clone(), guard, pool.clone());
        let turn = tokio::spawn(start).await.map_err(lost)??;
        Ok(Self(Kind::Grouped(turn)))
    }

    /// Commit: returns once the writes are durable.
    pub(crate) async fn commit(self) -> Result<(), VolumeError> {
        match self.0 {
            Kind::Own(tx) => Ok(tx.commit().await?),
            Kind::Grouped(turn) => turn.end(End::Keep).await,
        }
    }

    pub(crate) async fn rollback(self) -> Result<(), VolumeError> {
        match self.0 {
            Kind::Own(tx) => Ok(tx.rollback().await?),
            Kind::Grouped(turn) => turn.end(End::Undo).await,
        }
    }
}

impl std::ops::Deref for WriteTx {
    type Target = AnyConnection;

    fn deref(&self) -> &AnyConnection {
        match &self.0 {
            Kind::Own(tx) => tx,
            Kind::Grouped(turn) => &turn.live().conn,
        }
    }
}

impl std::ops::DerefMut for WriteTx {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        match &mut self.0 {
            Kind::Own(tx) => tx,
            Kind::Grouped(turn) => &mut turn.live_mut().conn,
        }
    }
}

impl Group {
    async fn begin(pool: &AnyPool) -> Result<Self, VolumeError> {
        let mut conn = pool.acquire().await?;
        Manager::begin(&mut conn, Some("BEGIN IMMEDIATE".into())).await?;
        Ok(Self {
            conn,
            members: Vec::new(),
        })
    }

    /// Commit, and tell every writer of the group how it went. The
    /// connection goes back to the pool, which rolls back or closes one a
    /// failed COMMIT left behind.
    async fn commit(mut self) {
        let outcome = Manager::commit(&mut self.conn)
            .await
            .map_err(|error| Failure::of(&VolumeError::from(error)));
        for member in self.members {
            let _ = member.send(outcome.clone());
        }
    }

    /// Commit the group if it holds any writer's work, else just end its
    /// transaction (and with it the write lock).
    async fn end(mut self) {
        if self.members.is_empty() {
            if Manager::rollback(&mut self.conn).await.is_err() {
                let _ = self.conn.close().await;
            }
        } else {
            self.commit().await;
        }
    }

    /// Throw the whole group away: its state is not to be trusted (a
    /// savepoint that would not begin or end; SQLite may even have rolled
    /// the transaction back by itself, on a full disk). Closing the
    /// connection rolls back whatever is open on it.
    async fn abort(self, why: &VolumeError) {
        let _ = self.conn.close().await;
        let failure = Failure::of(why);
        for member in self.members {
            let _ = member.send(Err(failure.clone()));
        }
    }
}

/// With the turn held: join the open group or begin one, and open this
/// writer's savepoint in it.
async fn start_turn(
    writers: Arc<Writers>,
    mut guard: OwnedMutexGuard<Option<Group>>,
    pool: AnyPool,
) -> Result<Turn, VolumeError> {
    let (mut group, part) = match guard.take() {
        Some(group) => (group, Part::Savepoint),
        None => (Group::begin(&pool).await?, Part::Whole),
    };
    // A savepoint (sqlx counts the depth): this writer's own part.
    if part == Part::Savepoint
        && let Err(error) = Manager::begin(&mut group.conn, None).await
    {
        let error = VolumeError::from(error);
        group.abort(&error).await;
        return Err(error);
    }
    Ok(Turn {
        writers,
        guard: Some(guard),
        group: Some(group),
        part,
    })
}

/// End a writer's part `how`. Then commit the group now, if nobody waits
/// for a turn or it is full, or leave it open for the next writer. A kept
/// part returns once the group's commit is durable.
async fn end_turn(
    writers: Arc<Writers>,
    mut guard: OwnedMutexGuard<Option<Group>>,
    mut group: Group,
    part: Part,
    how: End,
) -> Result<(), VolumeError> {
    let ended = match (part, how) {
        (Part::Savepoint, End::Keep) => Manager::commit(&mut group.conn).await,
        (Part::Savepoint, End::Undo) => Manager::rollback(&mut group.conn).await,
        (Part::Whole, End::Keep) => Ok(()),
        // Nobody else's work is in the group yet (members join it only as
        // their turns end): rolling it all back undoes this writer's alone,
        // and ends the group.
        (Part::Whole, End::Undo) => {
            return match Manager::rollback(&mut group.conn).await {
                Ok(()) => Ok(()),
                Err(error) => {
                    let error = VolumeError::from(error);
                    group.abort(&error).await;
                    Err(error)
                }
            };
        }
    };
    if let Err(error) = ended {
        let error = VolumeError::from(error);
        group.abort(&error).await;
        return Err(error);
    }
    // A kept part waits for the group's commit. So does an undone one when
    // the group holds other writers' work: it may have failed because of
    // what it saw of that work (a file already moved away), and its answer
    // must not be seen before that work is durable (a read on another
    // connection would not find it yet), nor stand if the commit fails.
    let settled = (how == End::Keep || !group.members.is_empty()).then(|| {
        let (member, settled) = oneshot::channel();
        group.members.push(member);
        settled
    });
    if writers.others_waiting() && group.members.len() < MAX_GROUP {
        writers.leave_open(&mut guard, group);
    } else {
        group.end().await;
    }
    drop(guard);
    match settled {
        None => Ok(()),
        Some(settled) => Ok(settled.await.map_err(lost)??),
    }
}

/// A group, or the task holding it, went away before saying how it ended.
fn lost(error: impl std::fmt::Display) -> VolumeError {
    VolumeError::Database(sqlx::Error::Protocol(format!(
        "a write transaction was lost before it ended: {error}"
    )))
}

impl Turn {
    fn live(&self) -> &Group {
        self.group
            .as_ref()
            .expect("a write transaction is used only during its turn")
    }

    fn live_mut(&mut self) -> &mut Group {
        self.group
            .as_mut()
            .expect("a write transaction is used only during its turn")
    }

    /// End the turn in a task of its own (see [`WriteTx::grouped`]); the
    /// outcome comes back here unless this caller is cancelled first.
    async fn end(mut self, how: End) -> Result<(), VolumeError> {
        let (Some(guard), Some(group)) = (self.guard.take(), self.group.take()) else {
            return Ok(());
        };
        let ending = end_turn(self.writers.clone(), guard, group, self.part, how);
        tokio::spawn(ending).await.map_err(lost)?
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let (Some(guard), Some(group)) = (self.guard.take(), self.group.take()) else {
            return;
        };
        let undo = end_turn(self.writers.clone(), guard, group, self.part, End::Undo);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(undo)),
            // No runtime left: the group's writers are gone with it, and its
            // connection rolls back when it is released.
            Err(_) => drop(undo),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use crate::db::{Database, DatabaseUrl, sql};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writers_share_commits_and_undo_only_their_own_part() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(&DatabaseUrl::Sqlite(dir.path().join("t.sqlite")))
            .await
            .unwrap();
        sql::query("CREATE TABLE t (n INTEGER PRIMARY KEY)")
            .execute(db.pool())
            .await
            .unwrap();
        // At once: even writers commit, n % 4 == 1 roll back, n % 8 == 3
        // are dropped mid-turn (an error returned early), n % 8 == 7 are
        // cancelled as they commit (their rows may or may not stay).
        let writers: Vec<_> = (0..64_i64)
            .map(|n| {
                let db = db.clone();
                tokio::spawn(async move {
                    let mut tx = db.begin_write().await?;
                    sql::query("INSERT INTO t (n) VALUES ($1)")
                        .bind(n)
                        .execute(&mut *tx)
                        .await?;
                    match n % 8 {
                        1 | 5 => tx.rollback().await,
                        3 => {
                            drop(tx);
                            Ok(())
                        }
                        7 => {
                            let cancelled =
                                tokio::time::timeout(Duration::from_micros(1), tx.commit());
                            let _ = cancelled.await;
                            Ok(())
                        }
                        _ => tx.commit().await,
                    }
                })
            })
            .collect();
        for writer in writers {
            tokio::time::timeout(Duration::from_secs(30), writer)
                .await
                .expect("every writer finishes")
                .unwrap()
                .unwrap();
        }
        // What each writer was told is what another connection sees.
        let rows: Vec<(i64,)> = sql::query_as("SELECT n FROM t ORDER BY n")
            .fetch_all(db.pool())
            .await
            .unwrap();
        let rows: Vec<i64> = rows.into_iter().map(|(n,)| n).collect();
        let kept: Vec<i64> = (0..64).filter(|n| n % 2 == 0).collect();
        let cancelled: Vec<i64> = rows.iter().copied().filter(|n| n % 8 == 7).collect();
        let others: Vec<i64> = rows.iter().copied().filter(|n| n % 8 != 7).collect();
        assert_eq!(others, kept, "every committed row and no undone one");
        assert!(cancelled.len() <= 8);
        // No group is left holding the write lock: a write outside a
        // turn goes through at once.
        tokio::time::timeout(
            Duration::from_secs(2),
            sql::query("INSERT INTO t (n) VALUES (1000)").execute(db.pool()),
        )
        .await
        .expect("the write lock is free")
        .unwrap();
    }
}
