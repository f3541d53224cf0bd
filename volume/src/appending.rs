//! A tus upload's bytes kept where they arrive, a request at a time, and
//! hashed once: on a local store appended in place to the upload's own
//! file (its outboard in a file beside it); on an object store, shared by
//! gateways, as a part per checkpoint (the content, then the outboard
//! written meanwhile). A checkpoint makes what came durable, then records
//! how much there is and where the hashes stand, weighed against the
//! owner's quota, in one transaction that takes effect only if the upload
//! still stands where the request found it. The file that completes it is
//! a link to the upload's file (local), or a blob made of its parts in the
//! object store; never hashed again.
//!
//! On a local store one request at a time holds an upload (a lock on its
//! file, which the kernel releases with the process): another is told the
//! upload is busy.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use crate::blobs::{BlobStore, KeptPart, UPLOAD_CONTENT as CONTENT};
use crate::db::WriteTx;
use crate::error::VolumeError;
use crate::quota;
use crate::types::{Owner, now_ms};
use crate::uploads::{self, Checkpoint, Upload, UploadPart};
use crate::{BlobReader, StagedBlob, Volume};

/// A request's hold on a tus upload: where its bytes go, what it feeds
/// the hashes again first, and its record.
#[derive(Debug)]
pub struct Appending {
    /// Where the request's bytes are staged: the upload's own files
    /// (local), or a part to come (object store).
    pub staged: StagedBlob,
    /// The bytes the upload kept past where its hashes stand.
    pub replay: Replay,
    /// The file's first bytes (up to 4 KiB) when its hashes stand past
    /// them, to sniff a content type from.
    pub head: Vec<u8>,
    pub log: UploadLog,
}

/// How long a request waits for another to let go of an upload (one cut
/// off records what it brought first) before it is told it is busy.
const HOLD_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Bytes of a file's start a content type is sniffed from.
const HEAD: usize = 4 << 10;

/// What a request knows of its upload's record, and records.
#[derive(Debug)]
pub struct UploadLog {
    owner: Owner,
    id: String,
    /// The bytes recorded: where the upload stands.
    recorded: u64,
    /// Where the hashes stood at the last record, and the outboard
    /// written up to there.
    hashed: String,
    hashed_outboard: u64,
    /// Where the staged bytes start in the file (a part's offset; 0 for
    /// the upload's own file, which holds them all).
    staged_from: u64,
    /// The part the next checkpoint writes is the object store's.
    in_parts: bool,
    /// The numbered part this request brings, recorded with its
    /// checkpoint (S3 multipart's, appended in order).
    numbered: Option<Numbered>,
    /// Why a checkpoint was refused, for whoever answers the client.
    refused: Refusals,
}

impl UploadLog {
    /// The bytes recorded so far.
    pub fn recorded(&self) -> u64 {
        self.recorded
    }

    /// This request brings numbered part `numbered`, recorded with the
    /// checkpoint at its end.
    pub fn numbering(&mut self, numbered: Numbered) {
        self.numbered = Some(numbered);
    }

    /// Where a refused checkpoint leaves its reason.
    pub fn refusals(&self) -> Refusals {
        self.refused.clone()
    }
}

/// Where a request's refused checkpoint leaves its reason (the upload
/// moved on, the quota), for the answer to the client.
#[derive(Debug, Clone, Default)]
pub struct Refusals(Arc<Mutex<Option<VolumeError>>>);

impl Refusals {
    /// The reason the last checkpoint was refused, taken.
    pub fn take(&self) -> Option<VolumeError> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// Bytes an upload kept, read again a chunk at a time.
#[derive(Debug, Default)]
pub struct Replay {
    pieces: VecDeque<(BlobReader, u64)>,
}

impl Replay {
    /// Bytes left.
    pub fn len(&self) -> u64 {
        self.pieces.iter().map(|(_, left)| left).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Up to `max` more bytes; empty at the end.
    pub async fn read(&mut self, max: usize) -> Result<Vec<u8>, VolumeError> {
        while let Some((reader, left)) = self.pieces.front_mut() {
            let want = usize::try_from(*left).unwrap_or(usize::MAX).min(max);
            let chunk = if want == 0 {
                Vec::new()
            } else {
                reader.read(want).await?
            };
            if chunk.is_empty() {
                if *left > 0 {
                    return Err(VolumeError::NotFound("an upload's kept bytes".into()));
                }
                self.pieces.pop_front();
                continue;
            }
            *left -= chunk.len() as u64;
            return Ok(chunk);
        }
        Ok(Vec::new())
    }
}

/// Where an upload's hashes stand, as the handler said it: its words
/// (kept for the next request), and what they imply of the bytes kept.
#[derive(Debug, Clone, Copy)]
pub struct HashedAt<'a> {
    pub text: &'a str,
    /// The bytes hashed.
    pub offset: u64,
    /// The bytes of outboard written for them.
    pub outboard_len: u64,
}

/// How a multipart part appended in order is named: `@` and where it
/// is (its offset in the upload's file on a local store, the kept part's
/// name on an object store).
pub const APPENDED: &str = "@";

/// A numbered part (S3 multipart's) a request appends in order, recorded
/// with its checkpoint: its number, and what makes its ETag and checksum
/// once its body passed (`None`: it did not, and nothing is recorded).
pub struct Numbered {
    pub number: u32,
    pub describe: Box<dyn FnOnce() -> Option<(String, String)> + Send + Sync>,
}

impl std::fmt::Debug for Numbered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Numbered")
            .field("number", &self.number)
            .finish_non_exhaustive()
    }
}

impl Volume {
    /// Whether an upload's bytes are appended to one file (a local store),
    /// rather than kept as a part per checkpoint (an object store, where
    /// an upload keeps at most [`uploads::MAX_PARTS`]).
    pub fn appends_in_place(&self) -> bool {
        matches!(self.blobs, BlobStore::Local(_))
    }

    /// Take up `upload` (a tus upload, as just read) where it stands: its
    /// hashes at `hashed_from` bytes, having written `outboard_len` bytes
    /// of outboard. `Busy` while another request holds it.
    pub async fn resume_upload(
        &self,
        upload: &Upload,
        hashed_from: u64,
        outboard_len: u64,
    ) -> Result<Appending, VolumeError> {
        let log = |staged_from, in_parts| UploadLog {
            owner: upload.owner,
            id: upload.id.clone(),
            recorded: upload.received,
            hashed: upload.hashed.clone(),
            hashed_outboard: outboard_len,
            staged_from,
            in_parts,
            numbered: None,
            refused: Refusals::default(),
        };
        let parts = uploads::parts(self.db(), &upload.id).await?;
        let replay_range = (hashed_from, upload.received);
        match &self.blobs {
            BlobStore::Local(local) => {
                let mut staged = self.take_upload(local, upload).await?;
                if staged.len() < upload.received && !parts.is_empty() {
                    // Kept as parts before uploads were appended in place:
                    // joined once into its file (hashed again from 0).
                    self.join_parts(&mut staged, upload, &parts).await?;
                }
                if staged.len() < upload.received || staged.outboard_len() < outboard_len {
                    return Err(VolumeError::NotFound(format!(
                        "the kept bytes of upload {}",
                        upload.id
                    )));
                }
                // What came after the record was never recorded.
                staged.cut_back(upload.received, outboard_len).await?;
                let mut replay = Replay::default();
                let mut head = Vec::new();
                if let Some(mut reader) = local.open_part(&upload.id, CONTENT).await? {
                    if hashed_from > 0 {
                        head = reader.read(HEAD).await?;
                    }
                    reader.seek(replay_range.0);
                    replay
                        .pieces
                        .push_back((reader, replay_range.1 - replay_range.0));
                }
                Ok(Appending {
                    staged,
                    replay,
                    head,
                    log: log(0, false),
                })
            }
            BlobStore::Object(_) => {
                let mut replay = Replay::default();
                for part in &parts {
                    let (from, to) = (part.offset, part.offset + part.size);
                    if to <= replay_range.0 || from >= replay_range.1 {
                        continue;
                    }
                    let mut reader = self.open_upload_part(&upload.id, part).await?;
                    let start = replay_range.0.max(from);
                    reader.seek(start - from);
                    replay
                        .pieces
                        .push_back((reader, to.min(replay_range.1) - start));
                }
                let mut head = Vec::new();
                if let Some(first) = parts.first().filter(|_| hashed_from > 0) {
                    let mut reader = self.open_upload_part(&upload.id, first).await?;
                    let take = usize::try_from(first.size).unwrap_or(HEAD).min(HEAD);
                    head = reader.read(take).await?;
                }
                let mut staged = self.stage();
                staged.after_parts(&upload.id, parts.iter().map(kept_part).collect());
                Ok(Appending {
                    staged,
                    replay,
                    head,
                    log: log(upload.received, true),
                })
            }
        }
    }

    /// `upload`'s own files on a local store, taken for this request once
    /// the request that holds them lets go (a cut request records what it
    /// brought first: a moment), if the upload still stands where the
    /// caller found it (else `UploadMovedOn`: the caller's offset is
    /// stale, and cutting back to it would lose what was recorded).
    async fn take_upload(
        &self,
        local: &crate::blobs::LocalBlobs,
        upload: &Upload,
    ) -> Result<StagedBlob, VolumeError> {
        let started = std::time::Instant::now();
        let (mut staged, linked) = loop {
            match local.kept_upload(&self.tmp, &upload.id).await {
                Err(VolumeError::UploadBusy(_)) if started.elapsed() < HOLD_WAIT => {
                    tokio::time::sleep(std::time::Duration::from_millis(25)).await;
                }
                other => break other?,
            }
        };
        match uploads::get(self.db(), upload.owner, &upload.id).await? {
            Some(now) if now.received == upload.received && now.hashed == upload.hashed => {}
            _ => return Err(VolumeError::UploadMovedOn(upload.id.clone())),
        }
        if linked {
            // Its file became a blob, but the upload stands (the record of
            // the file failed): the blob keeps that file, the upload a copy.
            staged.break_link().await?;
        }
        Ok(staged)
    }

    /// Record what `staged` holds of `log`'s upload as kept, its hashes
    /// at `hashed` (and its length, if it had none): durable first, then
    /// recorded. `None` when nothing new came. Refused when the upload
    /// moved on or past its owner's quota: the reason is left in
    /// [`UploadLog::refusals`], and the error says it in words.
    pub async fn checkpoint_upload(
        &self,
        log: &mut UploadLog,
        staged: &mut StagedBlob,
        hashed: HashedAt<'_>,
        length: Option<u64>,
        expires_ms: i64,
    ) -> Result<Option<Upload>, VolumeError> {
        let received = log.staged_from + staged.len();
        let outboard = staged.outboard_len()
            + staged
                .earlier()
                .map_or(0, |(_, parts)| parts.iter().map(|part| part.outboard).sum());
        if hashed.offset > received || outboard != hashed.outboard_len {
            return Err(VolumeError::io(
                "recording an upload's checkpoint",
                std::io::Error::other(format!(
                    "the hashes stand at byte {} with {} bytes of outboard, \
                     but {received} bytes and {outboard} of outboard are kept",
                    hashed.offset, hashed.outboard_len
                )),
            ));
        }
        let (hashed, outboard) = (hashed.text, hashed.outboard_len);
        if received == log.recorded && hashed == log.hashed {
            return Ok(None);
        }
        let part = if log.in_parts && !staged.is_empty() {
            use std::hash::BuildHasher as _;
            let nonce = std::collections::hash_map::RandomState::new().hash_one(now_ms());
            let name = format!("{:020}-{nonce:016x}", log.staged_from);
            let part = UploadPart {
                offset: log.staged_from,
                size: staged.len(),
                name,
                outboard: staged.outboard_len(),
            };
            self.blobs.write_part(&log.id, &part.name, staged).await?;
            Some(part)
        } else {
            staged.sync().await?;
            None
        };
        let checkpoint = Checkpoint {
            received,
            hashed,
            part: part.as_ref(),
            length,
            expires_ms,
        };
        let numbered = match log.numbered.take() {
            Some(Numbered { number, describe }) => match describe() {
                Some((etag, checksum)) => Some(uploads::MultipartPart {
                    number,
                    size: received - log.recorded,
                    etag,
                    checksum,
                    name: format!(
                        "{APPENDED}{}",
                        part.as_ref()
                            .map_or_else(|| log.recorded.to_string(), |part| part.name.clone())
                    ),
                    created_ms: now_ms(),
                }),
                // Its body did not pass: nothing of it is kept.
                None => {
                    if let Some(part) = &part {
                        self.blobs.remove_part(&log.id, &part.name).await?;
                    }
                    return Ok(None);
                }
            },
            None => None,
        };
        let recorded = self
            .record_checkpoint(log, &checkpoint, numbered.as_ref())
            .await;
        match recorded {
            Ok(Some(upload)) => {
                log.recorded = received;
                log.hashed = hashed.to_owned();
                log.hashed_outboard = outboard;
                if let Some(part) = part {
                    // The next part starts here, after every part so far.
                    let (id, mut earlier) = staged
                        .earlier()
                        .map(|(id, parts)| (id.to_owned(), parts.to_vec()))
                        .unwrap_or_else(|| (log.id.clone(), Vec::new()));
                    earlier.push(kept_part(&part));
                    *staged = self.stage();
                    staged.after_parts(&id, earlier);
                    log.staged_from = received;
                }
                Ok(Some(upload))
            }
            refused => {
                // What came is not kept: nothing of it stays on disk.
                match &part {
                    Some(part) => self.blobs.remove_part(&log.id, &part.name).await?,
                    None => staged.cut_back(log.recorded, log.hashed_outboard).await?,
                }
                let error = match refused {
                    Ok(_) => VolumeError::UploadMovedOn(log.id.clone()),
                    Err(error) => error,
                };
                let said = error.to_string();
                *log.refused.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
                Err(VolumeError::UploadMovedOn(said))
            }
        }
    }

    /// Record `checkpoint` of `log`'s upload, weighed against its owner's
    /// quota (under the owner's row, taken before the upload's: the
    /// quota's lock order) and the part limit.
    async fn record_checkpoint(
        &self,
        log: &UploadLog,
        checkpoint: &Checkpoint<'_>,
        numbered: Option<&uploads::MultipartPart>,
    ) -> Result<Option<Upload>, VolumeError> {
        let db = self.db();
        let now = now_ms();
        let added = checkpoint.received.saturating_sub(log.recorded);
        db.write(async |tx: &mut WriteTx| {
            let quota = quota::lock(db, tx, log.owner).await?;
            let cost = match checkpoint.part {
                Some(_) => {
                    if uploads::part_count_in(tx, &log.id).await? >= u64::from(uploads::MAX_PARTS) {
                        return Err(VolumeError::TooManyParts {
                            limit: uploads::MAX_PARTS,
                        });
                    }
                    quota::cost(added)
                }
                None => added,
            };
            if cost > 0 {
                quota::check(db, tx, log.owner, quota, quota::Leaving::NOTHING, cost).await?;
            }
            let recorded = uploads::record_checkpoint_in(
                tx,
                log.owner,
                &log.id,
                log.recorded,
                checkpoint,
                now,
            )
            .await?;
            if let (Some(_), Some(part)) = (&recorded, numbered) {
                if uploads::numbered_part_in(tx, &log.id, part.number)
                    .await?
                    .is_some()
                {
                    // Sent meanwhile as a part of its own: that one stands.
                    return Ok(None);
                }
                uploads::record_numbered_part_in(tx, &log.id, part).await?;
            }
            Ok(recorded)
        })
        .await
    }

    /// Bytes `at..at + size` of multipart upload `id`'s appended parts:
    /// on a local store, of the upload's file (`at` its offset); on an
    /// object store, kept part `at`.
    pub(crate) async fn open_appended_part(
        &self,
        id: &str,
        at: &str,
        size: u64,
    ) -> Result<BlobReader, VolumeError> {
        let missing = || VolumeError::NotFound(format!("part {at} of upload {id}"));
        let (name, offset) = match &self.blobs {
            BlobStore::Local(_) => (CONTENT, at.parse().map_err(|_| missing())?),
            BlobStore::Object(_) => (at, 0),
        };
        let mut reader = self.blobs.open_part(id, name).await?.ok_or_else(missing)?;
        reader.seek(offset);
        reader.end_at(offset + size);
        Ok(reader)
    }

    /// Join `upload`'s `parts` (kept as parts before uploads were appended
    /// in place) into its own file `staged`, then forget them.
    async fn join_parts(
        &self,
        staged: &mut StagedBlob,
        upload: &Upload,
        parts: &[UploadPart],
    ) -> Result<(), VolumeError> {
        for part in parts {
            let mut reader = self.open_upload_part(&upload.id, part).await?;
            loop {
                let chunk = reader.read(1 << 20).await?;
                if chunk.is_empty() {
                    break;
                }
                staged.write(&chunk).await?;
            }
        }
        staged.sync().await?;
        uploads::forget_parts(self.db(), &upload.id).await?;
        for part in parts {
            self.blobs.remove_part(&upload.id, &part.name).await?;
        }
        Ok(())
    }
}

fn kept_part(part: &UploadPart) -> KeptPart {
    KeptPart {
        name: part.name.clone(),
        size: part.size,
        outboard: part.outboard,
    }
}
