//! The `multipart_parts` table: S3 multipart's numbered parts, any order,
//! replaced at will, chosen at completion (`super` owns the uploads).

use crate::db::{Database, WriteTx, sql};
use crate::error::VolumeError;
use crate::types::{Owner, now_ms};

use super::{COLUMNS, MultipartPart, Upload, UploadRow, to_i64};

/// Move `owner`'s unexpired (at `now`) multipart upload `id`'s expiry to
/// `expires_ms`, in `tx`; `false` when the upload is gone.
pub(crate) async fn touch_multipart_in(
    tx: &mut WriteTx,
    owner: Owner,
    id: &str,
    expires_ms: i64,
    now: i64,
) -> Result<bool, VolumeError> {
    let touched = sql::query(
        "UPDATE uploads SET expires_ms = $1 \
         WHERE id = $2 AND owner = $3 AND kind = 'multipart' AND expires_ms > $4",
    )
    .bind(expires_ms)
    .bind(id)
    .bind(owner.id())
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(touched.rows_affected() == 1)
}

/// The part numbered `number` of multipart upload `id`, in `tx`: its
/// object's name and its size.
pub(crate) async fn numbered_part_in(
    tx: &mut WriteTx,
    id: &str,
    number: u32,
) -> Result<Option<(String, u64)>, VolumeError> {
    let part: Option<(String, i64)> = sql::query_as(
        "SELECT name, size FROM multipart_parts WHERE upload_id = $1 AND part_number = $2",
    )
    .bind(id)
    .bind(i64::from(number))
    .fetch_optional(&mut **tx)
    .await?;
    Ok(part.map(|(name, size)| (name, u64::try_from(size).unwrap_or_default())))
}

/// Record `part` of multipart upload `id` in `tx`, replacing a part of the
/// same number (the caller weighs it first, and removes the replaced
/// part's object).
pub(crate) async fn record_numbered_part_in(
    tx: &mut WriteTx,
    id: &str,
    part: &MultipartPart,
) -> Result<(), VolumeError> {
    sql::query(
        "INSERT INTO multipart_parts \
         (upload_id, part_number, size, etag, checksum, name, created_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) \
         ON CONFLICT (upload_id, part_number) DO UPDATE SET size = excluded.size, \
         etag = excluded.etag, checksum = excluded.checksum, name = excluded.name, \
         created_ms = excluded.created_ms",
    )
    .bind(id)
    .bind(i64::from(part.number))
    .bind(to_i64(part.size))
    .bind(&part.etag)
    .bind(&part.checksum)
    .bind(&part.name)
    .bind(part.created_ms)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The recorded parts of multipart upload `id`, by number.
pub(crate) async fn numbered_parts(
    db: &Database,
    id: &str,
) -> Result<Vec<MultipartPart>, VolumeError> {
    let rows: Vec<(i64, i64, String, String, String, i64)> = sql::query_as(
        "SELECT part_number, size, etag, checksum, name, created_ms FROM multipart_parts \
         WHERE upload_id = $1 ORDER BY part_number",
    )
    .bind(id)
    .fetch_all(db.pool())
    .await?;
    Ok(rows
        .into_iter()
        .map(
            |(number, size, etag, checksum, name, created_ms)| MultipartPart {
                number: u32::try_from(number).unwrap_or_default(),
                size: u64::try_from(size).unwrap_or_default(),
                etag,
                checksum,
                name,
                created_ms,
            },
        )
        .collect())
}

/// Up to `limit` of `owner`'s unexpired multipart uploads whose path is at
/// or past `from` and before `upper`, by path, then by when they began.
pub(crate) async fn multipart_uploads(
    db: &Database,
    owner: Owner,
    from: &str,
    upper: &str,
    limit: usize,
) -> Result<Vec<Upload>, VolumeError> {
    let rows: Vec<UploadRow> = sql::query_as(&format!(
        "SELECT {COLUMNS} FROM uploads WHERE owner = $1 AND kind = 'multipart' \
         AND expires_ms > $2 AND path >= $3 AND path < $4 \
         ORDER BY path, created_ms, id LIMIT $5"
    ))
    .bind(owner.id())
    .bind(now_ms())
    .bind(from)
    .bind(upper)
    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
    .fetch_all(db.pool())
    .await?;
    Ok(rows.into_iter().map(Upload::from).collect())
}
