//! The `uploads`, `upload_parts` and `multipart_parts` tables: uploads on
//! their way in, tus's (parts at offsets, in order) and S3's multipart
//! (numbered parts, any order, chosen at completion). This module alone
//! reads and writes them; the parts' bytes are
//! objects in the blob store (`uploads/<id>/<name>`), which
//! [`crate::Volume`] writes before it records them here.

use crate::db::{Conn, sqlite_row};

use crate::db::owned::{self, Adopt, OwnedRows};
use crate::db::{Database, WriteTx, sql};
use crate::error::VolumeError;
use crate::types::{Owner, now_ms};

mod numbered;
pub(crate) use numbered::{
    multipart_uploads, numbered_part_in, numbered_parts, record_numbered_part_in,
    touch_multipart_in,
};

/// Most unfinished uploads one owner may have at once (each expires; the
/// bytes and parts they keep count against their owner's quota).
pub const MAX_UPLOADS_PER_OWNER: u64 = 64;

/// Most parts one upload may have: S3's limit for multipart uploads, and
/// tus's here (the last part included), since every part is a row and an
/// object of its own and completion reads them all.
pub const MAX_PARTS: u32 = 10_000;

/// Which protocol's upload a row is: each sees only its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UploadKind {
    /// tus 1.0: parts appended at the upload's offset.
    Tus,
    /// tus's partial upload (`concatenation`): appended the same way, but
    /// no file of its own; a final upload joins it with others.
    TusPartial,
    /// S3 multipart: numbered parts, any order, replaced at will.
    Multipart,
}

impl UploadKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Tus => "tus",
            Self::TusPartial => "tus-partial",
            Self::Multipart => "multipart",
        }
    }

    fn parse(text: &str) -> Self {
        match text {
            "multipart" => Self::Multipart,
            "tus-partial" => Self::TusPartial,
            _ => Self::Tus,
        }
    }
}

/// A resumable upload as the index knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    pub id: String,
    pub kind: UploadKind,
    pub owner: Owner,
    /// Where the file goes, in its owner's tree.
    pub path: String,
    /// The file's length; `None` until the client declares it.
    pub length: Option<u64>,
    /// Bytes received and recorded so far: the upload's offset.
    pub received: u64,
    /// The content type to store the file with; empty to sniff one.
    pub content_type: String,
    /// Refuse to replace an existing file when the upload completes.
    pub create_only: bool,
    /// What the client sent as its upload's metadata, kept to echo back.
    pub metadata: String,
    pub created_ms: i64,
    pub expires_ms: i64,
    /// Where its hashes stand (a tus upload's), as the handler wrote it:
    /// recorded with `received`; empty at the start.
    pub hashed: String,
}

/// An upload to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewUpload {
    pub kind: UploadKind,
    pub owner: Owner,
    pub path: crate::FilePath,
    pub length: Option<u64>,
    pub content_type: String,
    pub create_only: bool,
    pub metadata: String,
    pub expires_ms: i64,
}

/// One recorded part of an upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadPart {
    /// Where it starts in the file.
    pub offset: u64,
    pub size: u64,
    /// Its object's name under `uploads/<id>/`.
    pub name: String,
    /// Bytes of outboard after its content in that object.
    pub outboard: u64,
}

/// One recorded part of an S3 multipart upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultipartPart {
    pub number: u32,
    pub size: u64,
    /// Hex MD5 of its bytes.
    pub etag: String,
    /// The checksum sent with it, `ALGORITHM:base64`; empty when none was.
    pub checksum: String,
    /// Its object's name under `uploads/<id>/`.
    pub name: String,
    pub created_ms: i64,
}

#[derive(sqlx::FromRow)]
struct UploadRow {
    id: String,
    kind: String,
    owner: i64,
    path: String,
    length: Option<i64>,
    received: i64,
    content_type: String,
    create_only: i64,
    metadata: String,
    created_ms: i64,
    expires_ms: i64,
    hashed: String,
}

sqlite_row!(UploadRow {
    id,
    kind,
    owner,
    path,
    length,
    received,
    content_type,
    create_only,
    metadata,
    created_ms,
    expires_ms,
    hashed
});

impl From<UploadRow> for Upload {
    fn from(row: UploadRow) -> Self {
        Self {
            id: row.id,
            kind: UploadKind::parse(&row.kind),
            owner: Owner::from_id(row.owner),
            path: row.path,
            length: row.length.and_then(|length| u64::try_from(length).ok()),
            received: u64::try_from(row.received).unwrap_or_default(),
            content_type: row.content_type,
            create_only: row.create_only != 0,
            metadata: row.metadata,
            created_ms: row.created_ms,
            expires_ms: row.expires_ms,
            hashed: row.hashed,
        }
    }
}

const COLUMNS: &str = "id, kind, owner, path, length, received, content_type, create_only, \
                       metadata, created_ms, expires_ms, hashed";

fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Record `new` as upload `id`, unless its owner has
/// [`MAX_UPLOADS_PER_OWNER`] unfinished ones already (`None`).
pub(crate) async fn insert(
    db: &Database,
    id: &str,
    new: &NewUpload,
) -> Result<Option<Upload>, VolumeError> {
    let now = now_ms();
    db.write(async |tx: &mut WriteTx| {
        db.lock_tree(tx, new.owner.id()).await?;
        let (unfinished,): (i64,) =
            sql::query_as("SELECT COUNT(*) FROM uploads WHERE owner = $1 AND expires_ms > $2")
                .bind(new.owner.id())
                .bind(now)
                .fetch_one(&mut **tx)
                .await?;
        if u64::try_from(unfinished).unwrap_or_default() >= MAX_UPLOADS_PER_OWNER {
            return Ok(None);
        }
        sql::query(
            "INSERT INTO uploads (id, owner, path, length, received, content_type, \
             create_only, metadata, created_ms, expires_ms, kind) \
             VALUES ($1, $2, $3, $4, 0, $5, $6, $7, $8, $9, $10)",
        )
        .bind(id)
        .bind(new.owner.id())
        .bind(new.path.as_str())
        .bind(new.length.map(to_i64))
        .bind(&new.content_type)
        .bind(i64::from(new.create_only))
        .bind(&new.metadata)
        .bind(now)
        .bind(new.expires_ms)
        .bind(new.kind.as_str())
        .execute(&mut **tx)
        .await?;
        Ok(Some(Upload {
            id: id.to_owned(),
            kind: new.kind,
            owner: new.owner,
            path: new.path.as_str().to_owned(),
            length: new.length,
            received: 0,
            content_type: new.content_type.clone(),
            create_only: new.create_only,
            metadata: new.metadata.clone(),
            created_ms: now,
            expires_ms: new.expires_ms,
            hashed: String::new(),
        }))
    })
    .await
}

/// `owner`'s unexpired upload `id`.
pub(crate) async fn get(
    db: &Database,
    owner: Owner,
    id: &str,
) -> Result<Option<Upload>, VolumeError> {
    let row: Option<UploadRow> = sql::query_as(&format!(
        "SELECT {COLUMNS} FROM uploads WHERE id = $1 AND owner = $2 AND expires_ms > $3"
    ))
    .bind(id)
    .bind(owner.id())
    .bind(now_ms())
    .fetch_optional(db.pool())
    .await?;
    Ok(row.map(Upload::from))
}

/// How many parts upload `id` keeps, in `tx`.
pub(crate) async fn part_count_in(tx: &mut WriteTx, id: &str) -> Result<u64, VolumeError> {
    let (parts,): (i64,) = sql::query_as("SELECT COUNT(*) FROM upload_parts WHERE upload_id = $1")
        .bind(id)
        .fetch_one(&mut **tx)
        .await?;
    Ok(u64::try_from(parts).unwrap_or_default())
}

/// A checkpoint of a tus upload: its bytes kept up to `received`, its
/// hashes at `hashed`, and the part that brought them (an object store's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Checkpoint<'a> {
    pub(crate) received: u64,
    pub(crate) hashed: &'a str,
    pub(crate) part: Option<&'a UploadPart>,
    /// The upload's length, if it had none.
    pub(crate) length: Option<u64>,
    pub(crate) expires_ms: i64,
}

/// Record `checkpoint` of `owner`'s upload `id` in `tx`, if it still
/// stands at `from` (no other request took it on meanwhile) and has not
/// expired at `now`. `None` when it moved on or is gone. The caller
/// weighs what it adds first (the part limit, the quota).
pub(crate) async fn record_checkpoint_in(
    tx: &mut WriteTx,
    owner: Owner,
    id: &str,
    from: u64,
    checkpoint: &Checkpoint<'_>,
    now: i64,
) -> Result<Option<Upload>, VolumeError> {
    let moved = sql::query(
        "UPDATE uploads SET received = $1, hashed = $2, expires_ms = $3, \
         length = COALESCE(length, $4) \
         WHERE id = $5 AND owner = $6 AND received = $7 AND expires_ms > $8",
    )
    .bind(to_i64(checkpoint.received))
    .bind(checkpoint.hashed)
    .bind(checkpoint.expires_ms)
    .bind(checkpoint.length.map(to_i64))
    .bind(id)
    .bind(owner.id())
    .bind(to_i64(from))
    .bind(now)
    .execute(&mut **tx)
    .await?;
    if moved.rows_affected() != 1 {
        return Ok(None);
    }
    if let Some(part) = checkpoint.part.filter(|part| part.size > 0) {
        sql::query(
            "INSERT INTO upload_parts (upload_id, offset_at, size, name, outboard) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(id)
        .bind(to_i64(part.offset))
        .bind(to_i64(part.size))
        .bind(&part.name)
        .bind(to_i64(part.outboard))
        .execute(&mut **tx)
        .await?;
    }
    let row: UploadRow = sql::query_as(&format!("SELECT {COLUMNS} FROM uploads WHERE id = $1"))
        .bind(id)
        .fetch_one(&mut **tx)
        .await?;
    Ok(Some(Upload::from(row)))
}

/// The bytes and the parts `owner`'s unexpired uploads keep, leaving out
/// upload `except` (one being completed), read on `conn`: what they count
/// against the quota (a numbered part appended in order, `@…`, among the
/// bytes `received`).
pub(crate) async fn kept(
    conn: &mut Conn,
    owner: Owner,
    except: Option<&str>,
) -> Result<(u64, u64), VolumeError> {
    let now = now_ms();
    // No upload id is empty: nothing left out.
    let except = except.unwrap_or("");
    let (appended, appended_parts): (Option<i64>, i64) = sql::query_as(
        "SELECT CAST(COALESCE(SUM(uploads.received), 0) AS BIGINT), \
         (SELECT COUNT(*) FROM upload_parts JOIN uploads ON uploads.id = upload_parts.upload_id \
          WHERE uploads.owner = $1 AND uploads.id <> $2 AND uploads.expires_ms > $3) \
         FROM uploads WHERE owner = $1 AND id <> $2 AND expires_ms > $3",
    )
    .bind(owner.id())
    .bind(except)
    .bind(now)
    .fetch_one(&mut *conn)
    .await?;
    let (numbered, numbered_parts): (Option<i64>, i64) = sql::query_as(
        "SELECT CAST(COALESCE(SUM(CASE WHEN multipart_parts.name LIKE '@%' THEN 0 \
         ELSE multipart_parts.size END), 0) AS BIGINT), COUNT(*) \
         FROM multipart_parts JOIN uploads ON uploads.id = multipart_parts.upload_id \
         WHERE uploads.owner = $1 AND uploads.id <> $2 AND uploads.expires_ms > $3",
    )
    .bind(owner.id())
    .bind(except)
    .bind(now)
    .fetch_one(&mut *conn)
    .await?;
    let count = |n: i64| u64::try_from(n).unwrap_or_default();
    let bytes = |sum: Option<i64>| sum.map_or(0, count);
    Ok((
        bytes(appended).saturating_add(bytes(numbered)),
        count(appended_parts).saturating_add(count(numbered_parts)),
    ))
}

/// How many parts upload `id` keeps.
pub(crate) async fn part_count(db: &Database, id: &str) -> Result<u64, VolumeError> {
    let (parts,): (i64,) = sql::query_as("SELECT COUNT(*) FROM upload_parts WHERE upload_id = $1")
        .bind(id)
        .fetch_one(db.pool())
        .await?;
    Ok(u64::try_from(parts).unwrap_or_default())
}

/// The parts of upload `id`, in the order of the file.
pub(crate) async fn parts(db: &Database, id: &str) -> Result<Vec<UploadPart>, VolumeError> {
    let rows: Vec<(i64, i64, String, i64)> = sql::query_as(
        "SELECT offset_at, size, name, outboard FROM upload_parts WHERE upload_id = $1 \
         ORDER BY offset_at",
    )
    .bind(id)
    .fetch_all(db.pool())
    .await?;
    Ok(rows
        .into_iter()
        .map(|(offset, size, name, outboard)| UploadPart {
            offset: u64::try_from(offset).unwrap_or_default(),
            size: u64::try_from(size).unwrap_or_default(),
            name,
            outboard: u64::try_from(outboard).unwrap_or_default(),
        })
        .collect())
}

/// Forget the recorded parts of tus upload `id` (joined into its file).
pub(crate) async fn forget_parts(db: &Database, id: &str) -> Result<(), VolumeError> {
    db.write(async |tx: &mut WriteTx| {
        sql::query("DELETE FROM upload_parts WHERE upload_id = $1")
            .bind(id)
            .execute(&mut **tx)
            .await?;
        Ok(())
    })
    .await
}

/// Forget upload `id` (of `owner`, when given; only if it has expired,
/// with `only_expired`: the collection's view, which another gateway's
/// request may just have moved on) and its parts; whether it was there.
pub(crate) async fn delete(
    db: &Database,
    owner: Option<Owner>,
    id: &str,
    only_expired: bool,
) -> Result<bool, VolumeError> {
    let expired_before = if only_expired { now_ms() } else { i64::MAX };
    db.write(async |tx: &mut WriteTx| {
        let gone = match owner {
            Some(owner) => {
                sql::query("DELETE FROM uploads WHERE id = $1 AND owner = $2 AND expires_ms <= $3")
                    .bind(id)
                    .bind(owner.id())
                    .bind(expired_before)
                    .execute(&mut **tx)
                    .await?
            }
            None => {
                sql::query("DELETE FROM uploads WHERE id = $1 AND expires_ms <= $2")
                    .bind(id)
                    .bind(expired_before)
                    .execute(&mut **tx)
                    .await?
            }
        };
        let removed = gone.rows_affected() == 1;
        // Only the parts of an upload this call removed: another owner's
        // stay (and are not theirs to see).
        if removed {
            for statement in [
                "DELETE FROM upload_parts WHERE upload_id = $1",
                "DELETE FROM multipart_parts WHERE upload_id = $1",
            ] {
                sql::query(statement).bind(id).execute(&mut **tx).await?;
            }
        }
        Ok(removed)
    })
    .await
}

/// Drop the tus parts of every upload of `owner` inside `tx` (their user
/// is going; see `owners`: before the uploads, through whose rows they are
/// found; their objects are collected as parts no upload names). How many
/// went.
pub(crate) async fn delete_owner_parts_in(tx: &mut Conn, owner: Owner) -> Result<u64, VolumeError> {
    owned::run_for(
        tx,
        "DELETE FROM upload_parts WHERE upload_id IN (SELECT id FROM uploads WHERE owner = $1)",
        owner,
    )
    .await
}

/// Drop the multipart parts of every upload of `owner` inside `tx` (as
/// [`delete_owner_parts_in`]); how many went.
pub(crate) async fn delete_owner_numbered_parts_in(
    tx: &mut Conn,
    owner: Owner,
) -> Result<u64, VolumeError> {
    owned::run_for(
        tx,
        "DELETE FROM multipart_parts WHERE upload_id IN \
         (SELECT id FROM uploads WHERE owner = $1)",
        owner,
    )
    .await
}

/// The uploads, for `owners`' cascades: a user's go with them, after
/// their parts; the open tree's stay its own (they expire there).
pub(crate) const OWNED: OwnedRows = OwnedRows::new("uploads", "owner", Adopt::Not);

/// Uploads that expired.
pub(crate) async fn expired(db: &Database) -> Result<Vec<String>, VolumeError> {
    let rows: Vec<(String,)> = sql::query_as("SELECT id FROM uploads WHERE expires_ms <= $1")
        .bind(now_ms())
        .fetch_all(db.pool())
        .await?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}

/// Every upload the index knows, expired or not.
pub(crate) async fn all(db: &Database) -> Result<std::collections::HashSet<String>, VolumeError> {
    let rows: Vec<(String,)> = sql::query_as("SELECT id FROM uploads")
        .fetch_all(db.pool())
        .await?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}

/// Unfinished, unexpired uploads.
pub(crate) async fn in_progress(db: &Database) -> Result<u64, VolumeError> {
    let (count,): (i64,) = sql::query_as("SELECT COUNT(*) FROM uploads WHERE expires_ms > $1")
        .bind(now_ms())
        .fetch_one(db.pool())
        .await?;
    Ok(u64::try_from(count).unwrap_or_default())
}
