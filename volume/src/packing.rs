//! The index's side of packed blobs (see `blobs/segments.rs`): where a
//! blob's record is (its ledger row's `segment`, `segment_offset`,
//! `packed_len`), reading one, and the compaction that gives back the
//! space of records no row names.
//!
//! Compaction, one sealed segment at a time (closed, untouched for the
//! orphan grace, so every write that packed into it has recorded its row
//! or never will): each stored blob whose row names the segment is read
//! (checked against its record's header), appended to the open segment and
//! its row moved, only if it still names the old place; then, in one
//! transaction that finds no row naming the segment, the segment is
//! recorded as retired, and only then is its file removed. A write that
//! packed into the segment records its row in a transaction that first
//! checks the segment is not retired (`segment_retired`), so the two
//! serialise: either compaction sees the row and moves it, or the write
//! sees the retirement and packs the blob again.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::OptionalExtension as _;

use crate::Volume;
use crate::blobs::{Packed, RecordSync, SEGMENT_TARGET, Segments, Staged, StagedBlob};
use crate::db::{Database, WriteTx, sql};
use crate::error::VolumeError;
use crate::types::{Digest, now_ms};

/// How long a segment no longer open stays untouched before compaction
/// takes it.
const SEALED_AFTER: Duration = Duration::from_secs(5);

/// Where blob `digest` is packed; `None` for a blob of its own (or none).
pub(crate) async fn placement(
    db: &Database,
    digest: &Digest,
) -> Result<Option<Packed>, VolumeError> {
    const SQL: &str = "SELECT segment, segment_offset, packed_len FROM blobs
                       WHERE sha256 = $1 AND segment IS NOT NULL";
    let row: Option<(i64, i64, i64)> = if let Some(reader) = db.sync_reader() {
        // Every small read asks: on the caller's thread (`db::reader`).
        reader.read(|connection| {
            connection
                .prepare_cached(&SQL.replace("$1", "?1"))?
                .query_row([digest.as_str()], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })
                .optional()
        })?
    } else {
        sql::query_as(SQL)
            .bind(digest.as_str())
            .fetch_optional(db.pool())
            .await?
    };
    Ok(row.map(|(segment, offset, len)| Packed {
        segment,
        offset,
        len,
    }))
}

/// Whether segment `id` was compacted away (in `tx`, which records a blob
/// packed into it: see the module's doc).
pub(crate) async fn segment_retired(tx: &mut WriteTx, id: i64) -> Result<bool, VolumeError> {
    let row: Option<(i64,)> = sql::query_as("SELECT id FROM retired_segments WHERE id = $1")
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?;
    Ok(row.is_some())
}

/// The highest segment number ever retired (0 if none).
async fn highest_retired(db: &Database) -> Result<i64, VolumeError> {
    let row: (Option<i64>,) = sql::query_as("SELECT MAX(id) FROM retired_segments")
        .fetch_one(db.pool())
        .await?;
    Ok(row.0.unwrap_or(0))
}

/// The bytes of live records (headers included) in each segment: one
/// scan of the index's packed rows.
async fn live_bytes(db: &Database) -> Result<HashMap<i64, u64>, VolumeError> {
    let rows: Vec<(i64, i64, i64)> = sql::query_as(
        "SELECT segment, CAST(COALESCE(SUM(packed_len), 0) AS BIGINT), COUNT(*) FROM blobs
         WHERE segment IS NOT NULL AND state = 'stored' GROUP BY segment",
    )
    .fetch_all(db.pool())
    .await?;
    Ok(rows
        .into_iter()
        .map(|(segment, bytes, records)| {
            let bytes = u64::try_from(bytes).unwrap_or(0);
            let headers = u64::try_from(records).unwrap_or(0) * crate::blobs::RECORD_HEADER;
            (segment, bytes + headers)
        })
        .collect())
}

/// The stored blobs packed into segment `id`.
async fn packed_in(db: &Database, id: i64) -> Result<Vec<(Digest, Packed)>, VolumeError> {
    let rows: Vec<(String, i64, i64)> = sql::query_as(
        "SELECT sha256, segment_offset, packed_len FROM blobs
         WHERE segment = $1 AND state = 'stored'",
    )
    .bind(id)
    .fetch_all(db.pool())
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(hex, offset, len)| {
            let packed = Packed {
                segment: id,
                offset,
                len,
            };
            Some((Digest::parse(&hex).ok()?, packed))
        })
        .collect())
}

impl Volume {
    /// Number new segments past every one there or retired (at open).
    pub(crate) async fn number_segments(&self) -> Result<(), VolumeError> {
        if let Some(segments) = self.blobs.segments() {
            segments
                .number_after(highest_retired(self.db()).await?)
                .await?;
        }
        Ok(())
    }

    /// Blob `digest`'s bytes if it is packed (its content `size` bytes
    /// first): `Ok(None)` for a blob of its own, `Ok(Some(None))` when its
    /// segment went (compacted after the row was read: read the row again).
    pub(crate) async fn read_packed(
        &self,
        digest: &Digest,
        size: u64,
    ) -> Result<Option<Option<Vec<u8>>>, VolumeError> {
        let Some(segments) = self.blobs.segments() else {
            return Ok(None);
        };
        if !crate::blobs::packs(size) {
            return Ok(None);
        }
        // Where it was last seen: its bytes are there for as long as that
        // segment is (records are never rewritten, numbers never reused),
        // whether or not its row has moved since.
        if let Some(packed) = segments.last_seen(digest) {
            match segments.read(packed)? {
                Some(bytes) => return Ok(Some(Some(bytes))),
                None => segments.forget(digest),
            }
        }
        match placement(self.db(), digest).await? {
            Some(packed) => {
                let bytes = segments.read(packed)?;
                if bytes.is_some() {
                    segments.seen(digest, packed);
                }
                Ok(Some(bytes))
            }
            None => Ok(None),
        }
    }

    /// Write `staged` as blob `digest`: packed into a segment when the
    /// store packs blobs this small (returned: where, for the row, and
    /// what makes the record durable, for the transaction that inserts the
    /// row: [`WriteTx::durable_first`]), else a blob of its own, durable
    /// when this returns.
    pub(crate) async fn write_blob(
        &self,
        digest: &Digest,
        staged: &mut StagedBlob,
    ) -> Result<Option<(Packed, RecordSync)>, VolumeError> {
        if let Some(segments) = self.blobs.segments()
            && self.pack_small_blobs
            && crate::blobs::packs(staged.content_len() + staged.outboard_len())
            && let Staged::Memory { bytes, .. } = staged.staged().await?
        {
            // Copied once, into the record with its header.
            return segments.append_unsynced(digest, bytes).await.map(Some);
        }
        self.blobs.write(digest, staged).await.map(|()| None)
    }

    /// Whether `packed` (a blob just packed, whose row could not be
    /// inserted) lies in a segment retired meanwhile, in `tx`; the open
    /// segment is then abandoned if it is that one (retired by another
    /// process sharing the store), and the blob must be written again.
    pub(crate) async fn packed_gone(
        &self,
        tx: &mut WriteTx,
        packed: Option<Packed>,
    ) -> Result<bool, VolumeError> {
        let Some(packed) = packed else {
            return Ok(false);
        };
        if !segment_retired(tx, packed.segment).await? {
            return Ok(false);
        }
        if let Some(segments) = self.blobs.segments() {
            segments.abandon(packed.segment);
        }
        Ok(true)
    }

    /// Whether blob `digest` is in the store, packed or of its own.
    pub(crate) async fn blob_present(&self, digest: &Digest) -> Result<bool, VolumeError> {
        if let Some(segments) = self.blobs.segments()
            && let Some(packed) = placement(self.db(), digest).await?
        {
            return segments.holds(packed);
        }
        self.blobs.exists(digest).await
    }

    /// The digests of packed blobs whose records are there (their segment
    /// holds them), for the collection's check that every file has its blob.
    pub(crate) async fn packed_present(&self) -> Result<HashSet<String>, VolumeError> {
        let Some(segments) = self.blobs.segments() else {
            return Ok(HashSet::new());
        };
        let lengths: HashMap<i64, u64> = segments
            .list()
            .await?
            .into_iter()
            .map(|segment| (segment.id, segment.len))
            .collect();
        let rows: Vec<(String, i64, i64, i64)> = sql::query_as(
            "SELECT sha256, segment, segment_offset, packed_len FROM blobs
             WHERE segment IS NOT NULL",
        )
        .fetch_all(self.db().pool())
        .await?;
        Ok(rows
            .into_iter()
            .filter(|(_, segment, offset, len)| {
                lengths
                    .get(segment)
                    .is_some_and(|&have| have >= u64::try_from(offset + len).unwrap_or(u64::MAX))
            })
            .map(|(hex, ..)| hex)
            .collect())
    }

    /// Returns once a segment has been closed for a new one: a caller then
    /// compacts ([`Volume::compact_segments`]), so that the space of
    /// records no row names is given back at the pace it is written, not
    /// only every `--gc-interval`. Never returns without segments.
    pub async fn segment_closed(&self) {
        match self.blobs.segments() {
            Some(segments) => segments.rolled().await,
            None => std::future::pending().await,
        }
    }

    /// Compact every sealed segment that is mostly dead space (see the
    /// module's doc); returns how many were removed. Sealed: not the open
    /// one, and untouched for [`SEALED_AFTER`] (or the orphan grace, if
    /// shorter); correctness does not rest on it (a write into a segment
    /// retired under it packs again), it only spares writes in flight.
    pub async fn compact_segments(&self) -> Result<usize, VolumeError> {
        let Some(segments) = self.blobs.segments() else {
            return Ok(0);
        };
        let old_enough = SystemTime::now()
            .checked_sub(self.orphan_grace.min(SEALED_AFTER))
            .unwrap_or(UNIX_EPOCH);
        let open = segments.open_id();
        let mut removed = 0;
        let live_bytes = live_bytes(self.db()).await?;
        for segment in segments.list().await? {
            if Some(segment.id) == open || segment.modified > old_enough {
                continue;
            }
            let live = live_bytes.get(&segment.id).copied().unwrap_or(0);
            // Half dead, or a small leftover (a segment open at a stop).
            if live * 2 > segment.len && segment.len >= SEGMENT_TARGET / 4 {
                continue;
            }
            let live = packed_in(self.db(), segment.id).await?;
            if self.compact(segments, segment.id, live).await? {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Move segment `id`'s `live` blobs to the open segment, then retire it
    /// and remove its file; `false` if rows still name it (rows recorded
    /// meanwhile: the next collection moves them).
    async fn compact(
        &self,
        segments: &std::sync::Arc<Segments>,
        id: i64,
        live: Vec<(Digest, Packed)>,
    ) -> Result<bool, VolumeError> {
        let mut moved_bytes = 0;
        for (digest, from) in &live {
            let Some(bytes) = segments.read_record(digest, *from).await? else {
                tracing::error!(%digest, segment = id, "a packed blob's record is not what its row says; left in place");
                return Ok(false);
            };
            // Where it goes must not be retired either (by another
            // process sharing the store), like any packed write's place.
            let mut attempts = 0;
            loop {
                let to = segments.append(digest, &bytes).await?;
                let moved = self
                    .db()
                    .write(async |tx: &mut WriteTx| {
                        if segment_retired(tx, to.segment).await? {
                            return Ok(false);
                        }
                        sql::query(
                            "UPDATE blobs SET segment = $4, segment_offset = $5
                             WHERE sha256 = $1 AND segment = $2 AND segment_offset = $3",
                        )
                        .bind(digest.as_str())
                        .bind(from.segment)
                        .bind(from.offset)
                        .bind(to.segment)
                        .bind(to.offset)
                        .execute(&mut **tx)
                        .await?;
                        Ok(true)
                    })
                    .await?;
                if moved {
                    break;
                }
                segments.abandon(to.segment);
                attempts += 1;
                if attempts == 3 {
                    return Ok(false);
                }
            }
            moved_bytes += from.record_len();
        }
        let retired = self
            .db()
            .write(async |tx: &mut WriteTx| {
                let naming: Option<(String,)> =
                    sql::query_as("SELECT sha256 FROM blobs WHERE segment = $1 LIMIT 1")
                        .bind(id)
                        .fetch_optional(&mut **tx)
                        .await?;
                if naming.is_some() {
                    return Ok(false);
                }
                sql::query(
                    "INSERT INTO retired_segments (id, retired_ms) VALUES ($1, $2)
                     ON CONFLICT (id) DO NOTHING",
                )
                .bind(id)
                .bind(now_ms())
                .execute(&mut **tx)
                .await?;
                Ok(true)
            })
            .await?;
        if retired {
            segments.remove(id).await?;
            tracing::debug!(
                segment = id,
                blobs = live.len(),
                moved_bytes,
                "compacted a segment"
            );
        }
        Ok(retired)
    }
}
