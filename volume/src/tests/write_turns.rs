//! Write transactions on SQLite: group commit, each writer's part undone
//! alone, what the rows name outside the index synced first, and the
//! writer connection waiting for another's write lock.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;

use crate::db::{Database, DatabaseUrl, MustBeDurable, sql};
use crate::error::VolumeError;

/// The numbers in table `t`, as a connection of the pool reads them.
async fn numbers(db: &Database) -> Vec<i64> {
    let rows: Vec<(i64,)> = sql::query_as("SELECT n FROM t ORDER BY n")
        .fetch_all(db.pool())
        .await
        .unwrap();
    rows.into_iter().map(|(n,)| n).collect()
}

/// A fresh SQLite database (in `dir`, kept by the caller) with `table`
/// made in it, and its file.
async fn database_with(dir: &tempfile::TempDir, table: &str) -> (Database, std::path::PathBuf) {
    let file = dir.path().join("t.sqlite");
    let db = Database::open(&DatabaseUrl::Sqlite(file.clone()))
        .await
        .unwrap();
    sql::query(table).execute(db.pool()).await.unwrap();
    (db, file)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_share_commits_and_undo_only_their_own_part() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = database_with(&dir, "CREATE TABLE t (n INTEGER PRIMARY KEY)").await;
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
                        let cancelled = tokio::time::timeout(Duration::from_micros(1), tx.commit());
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
    let rows = numbers(&db).await;
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

/// `BEGIN` on the writer connection waits (on a blocking thread) while
/// another connection holds SQLite's write lock, and goes on once it is
/// free: nothing fails for a `gateway user add` run beside the gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_waits_for_another_connections_write_lock() {
    let dir = tempfile::tempdir().unwrap();
    let (db, file) = database_with(&dir, "CREATE TABLE t (n INTEGER PRIMARY KEY)").await;
    let other = rusqlite::Connection::open(&file).unwrap();
    other
        .execute_batch("BEGIN IMMEDIATE; INSERT INTO t (n) VALUES (1);")
        .unwrap();
    let writer = tokio::spawn({
        let db = db.clone();
        async move {
            let mut tx = db.begin_write().await?;
            sql::query("INSERT INTO t (n) VALUES ($1)")
                .bind(2_i64)
                .execute(&mut *tx)
                .await?;
            tx.commit().await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!writer.is_finished(), "the writer waits for the lock");
    other.execute_batch("COMMIT").unwrap();
    tokio::time::timeout(Duration::from_secs(5), writer)
        .await
        .expect("the writer goes on once the lock is free")
        .unwrap()
        .unwrap();
    assert_eq!(numbers(&db).await, vec![1, 2]);
}

/// The writer connection binds `$N` by its name, whatever order the text
/// names them in, and reads rows as sqlx does; what it cannot do is an
/// error, not a wrong answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_connection_binds_by_name_and_reads_as_sqlx_does() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = database_with(&dir, "CREATE TABLE t (a TEXT NOT NULL, b INTEGER, c BLOB)").await;
    let mut tx = db.begin_write().await.unwrap();
    let done = sql::query("INSERT INTO t (c, b, a) VALUES ($3, $2, $1), ($1, $2, $3)")
        .bind("first")
        .bind(Option::<i64>::None)
        .bind(vec![1_u8, 2])
        .execute(&mut *tx)
        .await;
    // The second row's `a` would be a blob: allowed by SQLite's typing.
    assert_eq!(done.unwrap().rows_affected(), 2);
    let row: (String, Option<i64>, Vec<u8>) =
        sql::query_as("SELECT a, b, c FROM t WHERE a = $1 AND $2 = 7")
            .bind("first")
            .bind(7_i64)
            .fetch_one(&mut *tx)
            .await
            .unwrap();
    assert_eq!(row, ("first".to_owned(), None, vec![1, 2]));
    let none: Option<(String,)> = sql::query_as("SELECT a FROM t WHERE b = $1")
        .bind(3_i64)
        .fetch_optional(&mut *tx)
        .await
        .unwrap();
    assert_eq!(none, None);
    let missing = sql::query_as::<(String,)>("SELECT a FROM t WHERE b = $1")
        .bind(3_i64)
        .fetch_one(&mut *tx)
        .await;
    assert!(matches!(missing, Err(sqlx::Error::RowNotFound)));
    let not_null = sql::query("INSERT INTO t (a) VALUES ($1)")
        .bind(Option::<String>::None)
        .execute(&mut *tx)
        .await;
    assert!(
        matches!(not_null, Err(sqlx::Error::Database(_))),
        "{not_null:?}"
    );
    tx.rollback().await.unwrap();
}

/// Stands for a packed record that a writer's row names: when synced, it
/// looks through a connection of its own whether that row is already
/// committed (it must not be), and fails if told to.
#[derive(Debug)]
struct Record {
    file: std::path::PathBuf,
    n: i64,
    fail: bool,
    /// Times synced, and whether the row was visible at any of them.
    synced: AtomicUsize,
    row_seen_first: AtomicBool,
}

impl MustBeDurable for Record {
    fn sync_now(&self) -> Result<(), VolumeError> {
        let visible: i64 = rusqlite::Connection::open(&self.file)
            .and_then(|other| {
                other.query_row("SELECT count(*) FROM t WHERE n = ?1", [self.n], |row| {
                    row.get(0)
                })
            })
            .unwrap();
        self.row_seen_first.fetch_or(visible > 0, Ordering::SeqCst);
        self.synced.fetch_add(1, Ordering::SeqCst);
        if self.fail {
            return Err(VolumeError::io(
                "syncing a record",
                std::io::Error::other("the disk refused"),
            ));
        }
        Ok(())
    }

    fn sync(&self) -> BoxFuture<'_, Result<(), VolumeError>> {
        async { self.sync_now() }.boxed()
    }
}

/// Insert `record`'s row in a write transaction that must make `record`
/// durable first, and commit.
async fn write_row(db: &Database, record: Arc<Record>) -> Result<(), VolumeError> {
    let mut tx = db.begin_write().await?;
    sql::query("INSERT INTO t (n) VALUES ($1)")
        .bind(record.n)
        .execute(&mut *tx)
        .await?;
    tx.durable_first(record);
    tx.commit().await
}

/// What a writer's rows name outside the index is made durable before the
/// group commits, never after; when it cannot be, the whole group is
/// undone, and what each writer is told matches what is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_syncs_what_its_rows_name_first_or_is_undone() {
    let dir = tempfile::tempdir().unwrap();
    let (db, file) = database_with(&dir, "CREATE TABLE t (n INTEGER PRIMARY KEY)").await;
    let record = |n: i64, fail: bool| {
        Arc::new(Record {
            file: file.clone(),
            n,
            fail,
            synced: AtomicUsize::new(0),
            row_seen_first: AtomicBool::new(false),
        })
    };
    // One writer alone, then one whose record cannot be synced.
    let synced = record(-1, false);
    write_row(&db, synced.clone()).await.unwrap();
    assert_eq!(synced.synced.load(Ordering::SeqCst), 1);
    assert!(!synced.row_seen_first.load(Ordering::SeqCst));
    let refused = record(-2, true);
    assert!(write_row(&db, refused.clone()).await.is_err());
    assert_eq!(refused.synced.load(Ordering::SeqCst), 1);
    assert_eq!(numbers(&db).await, vec![-1], "the refused row is undone");
    sql::query("DELETE FROM t")
        .execute(db.pool())
        .await
        .unwrap();
    // Many at once, a few of them refused.
    let records: Vec<Arc<Record>> = (0..24_i64).map(|n| record(n, n % 8 == 5)).collect();
    let writers: Vec<_> = records
        .iter()
        .map(|record| {
            let (db, record) = (db.clone(), record.clone());
            tokio::spawn(async move { write_row(&db, record).await })
        })
        .collect();
    let mut told_stored = Vec::new();
    for (n, writer) in (0..).zip(writers) {
        let told = tokio::time::timeout(Duration::from_secs(30), writer)
            .await
            .expect("every writer finishes")
            .unwrap();
        if n % 8 == 5 {
            assert!(told.is_err(), "writer {n}: its record could not be synced");
        }
        if told.is_ok() {
            told_stored.push(n);
        }
    }
    assert_eq!(numbers(&db).await, told_stored, "stored is what was told");
    for record in &records {
        assert!(
            !record.row_seen_first.load(Ordering::SeqCst),
            "row {} was committed before its record was synced",
            record.n
        );
        if told_stored.contains(&record.n) {
            assert!(record.synced.load(Ordering::SeqCst) >= 1, "{}", record.n);
        }
    }
    // The writer connection is fine after a group undone.
    let mut tx = db.begin_write().await.unwrap();
    sql::query("INSERT INTO t (n) VALUES (100)")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert!(numbers(&db).await.contains(&100));
}
