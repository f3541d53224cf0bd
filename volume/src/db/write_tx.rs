//! Write transactions, and group commit on SQLite.
//!
//! PostgreSQL writers each get a transaction of their own: they lock the
//! rows they read (`FOR UPDATE`) and commit in parallel. SQLite has one
//! write lock per file, so this process's writers take turns, on one
//! connection (`rusqlite`, statements on the writer's own thread: see
//! [`super::writer`]); and each commit is an fsync of the WAL. Rather than
//! one transaction (and one fsync) per writer, writers that take their
//! turns back to back share one:
//! each that joins runs in a savepoint of the group's transaction (so one
//! that fails or is dropped undoes only its own writes; the one that began
//! it needs none: undoing the whole transaction undoes its alone), and the
//! last writer of a run (no other writer waiting for a turn, or the group
//! full) commits the group once for all of them, after making durable, on
//! the same blocking thread, what their rows name outside the index
//! ([`WriteTx::durable_first`]). [`WriteTx::commit`] returns
//! only once that commit is durable, so nothing is acknowledged before it
//! is; a commit that fails fails every writer of the group, and a crash
//! before it loses only writes none of them had been told were stored. A
//! writer that undoes its part while the group holds others' work waits for
//! that commit too: what it read of their work (and answered on) is durable
//! before it answers. Every step that changes the group runs in a task of
//! its own, so a cancelled writer cannot leave it half-way; a PostgreSQL
//! transaction begins in a task of its own for the same reason (see
//! [`WriteTx::own`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use rusqlite::Connection;
use sqlx::AnyPool;
use tokio::sync::{Mutex, OwnedMutexGuard, oneshot};

use super::conn::Conn;
use super::durable_first::{DurableFirst, MustBeDurable};
use super::writer;
use crate::error::VolumeError;

/// How long a group's `BEGIN` waits for another process's writer (a
/// `gateway user add` beside the gateway) or this one's pool (samples,
/// keys): as long as sqlx's connections wait (`busy_timeout`).
const BUSY_WAIT: Duration = Duration::from_secs(10);

/// Most writers one group commit takes: the first of them waits for the
/// others' work, so this bounds what sharing a commit adds to its latency.
const MAX_GROUP: usize = 32;

/// A write transaction: on PostgreSQL one of its own; on SQLite a savepoint
/// in this process's group transaction, held with this process's turn to
/// write. Queries run on it through `&mut **tx` (its [`Conn`]). Dropped
/// without [`WriteTx::commit`], its writes are rolled back.
#[derive(Debug)]
pub(crate) struct WriteTx(Kind);

#[derive(Debug)]
enum Kind {
    /// Always [`Conn::Tx`], and what must be durable before it commits.
    Own(Conn, DurableFirst),
    Grouped(Turn),
}

/// SQLite's writers in this process: whose turn it is, the group
/// transaction open between turns, and the writer connection between
/// groups.
#[derive(Debug)]
pub(crate) struct Writers {
    /// The SQLite file.
    path: PathBuf,
    /// The writer connection while no group holds it (`None` before the
    /// first group, and after one whose state could not be trusted).
    idle: std::sync::Mutex<Option<Connection>>,
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
    pub(crate) fn new(path: PathBuf) -> Self {
        Self {
            path,
            idle: std::sync::Mutex::default(),
            open: Arc::default(),
            waiting: AtomicUsize::default(),
            settler_queued: AtomicBool::default(),
        }
    }

    /// The writer connection, opened if there is none.
    fn connection(&self) -> Result<Connection, VolumeError> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match idle {
            Some(conn) => Ok(conn),
            None => {
                let conn = writer::open(&self.path).map_err(writer::error)?;
                conn.busy_timeout(Duration::ZERO).map_err(writer::error)?;
                Ok(conn)
            }
        }
    }

    /// Keep `conn` (out of any transaction) for the next group.
    fn keep(&self, conn: Connection) {
        if conn.is_autocommit() {
            *self.idle.lock().unwrap_or_else(PoisonError::into_inner) = Some(conn);
        }
    }

    /// At shutdown: close the writer connection.
    pub(crate) fn close(&self) {
        drop(
            self.idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
    }

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
                group.end(&writers).await;
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
/// on the writer connection, and the writers whose work it holds.
#[derive(Debug)]
struct Group {
    /// Always [`Conn::Writer`] (what a writer's statements run on).
    conn: Conn,
    members: Vec<oneshot::Sender<Result<(), Failure>>>,
    /// What its writers' rows name outside the index: made durable just
    /// before its `COMMIT`, on the same blocking thread.
    first: DurableFirst,
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
        let tx = begun.await.map_err(lost)??;
        Ok(Self(Kind::Own(Conn::Tx(tx), DurableFirst::default())))
    }

    /// Wait for this process's turn to write on SQLite, then join the open
    /// group (or begin one).
    pub(super) async fn grouped(writers: &Arc<Writers>) -> Result<Self, VolumeError> {
        let waiting = Waiting::new(&writers.waiting);
        let guard = writers.open.clone().lock_owned().await;
        drop(waiting);
        // Every step that changes the group runs in a task of its own: a
        // caller cancelled mid-step (a client hanging up on a WebDAV
        // request) must not leave the group half-way, and other writers'
        // work with it. Cancelled now, the turn is dropped, and undone.
        let start = start_turn(writers.clone(), guard);
        let turn = tokio::spawn(start).await.map_err(lost)??;
        Ok(Self(Kind::Grouped(turn)))
    }

    /// `what` (written outside the index, named by this transaction's
    /// rows) is made durable before the commit: on SQLite with the
    /// group's, on the thread that commits it.
    pub(crate) fn durable_first(&mut self, what: Arc<dyn MustBeDurable>) {
        match &mut self.0 {
            Kind::Own(_, first) => first.push(what),
            Kind::Grouped(turn) => turn.live_mut().first.push(what),
        }
    }

    /// Whether it holds the store's one write lock (SQLite): no other
    /// writer changes a row until it commits, whatever rows it reads.
    pub(crate) fn holds_the_write_lock(&self) -> bool {
        matches!(self.0, Kind::Grouped(_))
    }

    /// Commit: returns once the writes are durable.
    pub(crate) async fn commit(self) -> Result<(), VolumeError> {
        match self.0 {
            Kind::Own(Conn::Tx(tx), first) => {
                first.sync().await?;
                Ok(tx.commit().await?)
            }
            Kind::Own(..) => unreachable!("a write transaction of its own is a transaction"),
            Kind::Grouped(turn) => turn.end(End::Keep).await,
        }
    }

    pub(crate) async fn rollback(self) -> Result<(), VolumeError> {
        match self.0 {
            Kind::Own(Conn::Tx(tx), _) => Ok(tx.rollback().await?),
            Kind::Own(..) => unreachable!("a write transaction of its own is a transaction"),
            Kind::Grouped(turn) => turn.end(End::Undo).await,
        }
    }
}

impl std::ops::Deref for WriteTx {
    type Target = Conn;

    fn deref(&self) -> &Conn {
        match &self.0 {
            Kind::Own(conn, _) => conn,
            Kind::Grouped(turn) => &turn.live().conn,
        }
    }
}

impl std::ops::DerefMut for WriteTx {
    fn deref_mut(&mut self) -> &mut Conn {
        match &mut self.0 {
            Kind::Own(conn, _) => conn,
            Kind::Grouped(turn) => &mut turn.live_mut().conn,
        }
    }
}

/// How a `BEGIN` that waited for another connection's lock ended: begun,
/// or failed (with the connection, unless it could not be trusted again).
enum Waited {
    Begun(Connection),
    Failed(Option<Connection>, rusqlite::Error),
}

/// Run `sql` (one statement: no rows, no arguments) on the writer
/// connection.
fn run(conn: &Connection, sql: &str) -> Result<(), VolumeError> {
    Ok(writer::control(conn, sql).map_err(writer::error)?)
}

impl Group {
    /// Begin a group on the writer connection. `BEGIN IMMEDIATE` takes the
    /// write lock: at once, unless another connection holds it (the pool's
    /// or another process's), when it waits on a blocking thread.
    async fn begin(writers: &Writers) -> Result<Self, VolumeError> {
        let conn = writers.connection()?;
        let conn = match writer::control(&conn, "BEGIN IMMEDIATE") {
            Ok(()) => conn,
            Err(error) if error.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) => {
                let waited = tokio::task::spawn_blocking(move || {
                    let begun = conn
                        .busy_timeout(BUSY_WAIT)
                        .and_then(|()| writer::control(&conn, "BEGIN IMMEDIATE"));
                    // Back to not waiting, whatever happened: a connection
                    // kept waiting would hold a runtime thread next time
                    // (one that cannot be reset is closed).
                    match (begun, conn.busy_timeout(Duration::ZERO)) {
                        (Ok(()), Ok(())) => Waited::Begun(conn),
                        (Err(error), Ok(())) => Waited::Failed(Some(conn), error),
                        (_, Err(error)) => Waited::Failed(None, error),
                    }
                });
                match waited.await.map_err(lost)? {
                    Waited::Begun(conn) => conn,
                    Waited::Failed(conn, error) => {
                        if let Some(conn) = conn {
                            writers.keep(conn);
                        }
                        return Err(writer::error(error).into());
                    }
                }
            }
            Err(error) => {
                writers.keep(conn);
                return Err(writer::error(error).into());
            }
        };
        Ok(Self {
            conn: Conn::Writer(conn),
            members: Vec::new(),
            first: DurableFirst::default(),
        })
    }

    fn writer(&self) -> &Connection {
        match &self.conn {
            Conn::Writer(conn) => conn,
            _ => unreachable!("a group is on the writer connection"),
        }
    }

    fn into_writer(self) -> (Connection, Vec<oneshot::Sender<Result<(), Failure>>>) {
        match self.conn {
            Conn::Writer(conn) => (conn, self.members),
            _ => unreachable!("a group is on the writer connection"),
        }
    }

    /// Make durable what the group's rows name outside the index, then
    /// commit (the WAL's fsync), in one trip to a blocking thread; and tell
    /// every writer of the group how it went. If those bytes cannot be made
    /// durable, the group is rolled back. A connection a failed COMMIT left
    /// in a transaction is closed, which rolls it back.
    async fn commit(mut self, writers: &Writers) {
        let first = std::mem::take(&mut self.first);
        let (conn, members) = self.into_writer();
        let committing = tokio::task::spawn_blocking(move || {
            let committed = match first.sync_now() {
                Ok(()) => {
                    writer::control(&conn, "COMMIT").map_err(|error| writer::error(error).into())
                }
                Err(error) => {
                    // Undone, so that no row names what is not durable
                    // (one that will not roll back is closed by `keep`).
                    let _ = writer::control(&conn, "ROLLBACK");
                    Err(error)
                }
            };
            (conn, committed)
        });
        let outcome = match committing.await {
            Ok((conn, committed)) => {
                writers.keep(conn);
                committed.map_err(|error| Failure::of(&error))
            }
            Err(error) => Err(Failure::of(&lost(error))),
        };
        for member in members {
            let _ = member.send(outcome.clone());
        }
    }

    /// Commit the group if it holds any writer's work, else just end its
    /// transaction (and with it the write lock).
    async fn end(self, writers: &Writers) {
        if self.members.is_empty() {
            let (conn, _) = self.into_writer();
            if run(&conn, "ROLLBACK").is_ok() {
                writers.keep(conn);
            }
        } else {
            self.commit(writers).await;
        }
    }

    /// Throw the whole group away: its state is not to be trusted (a
    /// savepoint that would not begin or end; SQLite may even have rolled
    /// the transaction back by itself, on a full disk). Closing the
    /// connection rolls back whatever is open on it; the next group opens
    /// another.
    fn abort(self, why: &VolumeError) {
        let (conn, members) = self.into_writer();
        drop(conn);
        let failure = Failure::of(why);
        for member in members {
            let _ = member.send(Err(failure.clone()));
        }
    }
}

/// With the turn held: join the open group or begin one, and open this
/// writer's savepoint in it.
async fn start_turn(
    writers: Arc<Writers>,
    mut guard: OwnedMutexGuard<Option<Group>>,
) -> Result<Turn, VolumeError> {
    let (group, part) = match guard.take() {
        Some(group) => (group, Part::Savepoint),
        None => (Group::begin(&writers).await?, Part::Whole),
    };
    // A savepoint: this writer's own part.
    if part == Part::Savepoint
        && let Err(error) = run(group.writer(), "SAVEPOINT writer")
    {
        group.abort(&error);
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
        (Part::Savepoint, End::Keep) => run(group.writer(), "RELEASE writer"),
        (Part::Savepoint, End::Undo) => run(group.writer(), "ROLLBACK TO writer")
            .and_then(|()| run(group.writer(), "RELEASE writer")),
        (Part::Whole, End::Keep) => Ok(()),
        // Nobody else's work is in the group yet (members join it only as
        // their turns end): rolling it all back undoes this writer's alone,
        // and ends the group.
        (Part::Whole, End::Undo) => {
            return match run(group.writer(), "ROLLBACK") {
                Ok(()) => {
                    let (conn, _) = group.into_writer();
                    writers.keep(conn);
                    Ok(())
                }
                Err(error) => {
                    group.abort(&error);
                    Err(error)
                }
            };
        }
    };
    if let Err(error) = ended {
        group.abort(&error);
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
        group.end(&writers).await;
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
