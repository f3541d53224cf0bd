//! [`Volume`]'s uploads in parts, over time: tus's (appended at an
//! offset) and S3's multipart (numbered). A part's bytes are written to
//! the blob store first, then recorded by `uploads` in a transaction that
//! weighs them against the owner's quota; a part not recorded is removed
//! again.

use crate::db::WriteTx;
use crate::error::VolumeError;
use crate::quota;
use crate::types::{Owner, now_ms};
use crate::{BlobReader, StagedBlob, Volume, uploads};

impl Volume {
    /// Start a resumable upload as `id` (unique, chosen by the caller);
    /// `None` when its owner has too many unfinished ones.
    pub async fn create_upload(
        &self,
        id: &str,
        new: &uploads::NewUpload,
    ) -> Result<Option<uploads::Upload>, VolumeError> {
        uploads::insert(self.db(), id, new).await
    }

    /// `owner`'s unexpired, unfinished upload `id`.
    pub async fn find_upload(
        &self,
        owner: Owner,
        id: &str,
    ) -> Result<Option<uploads::Upload>, VolumeError> {
        uploads::get(self.db(), owner, id).await
    }

    /// Store the `staged` bytes as a part of upload `id` starting at
    /// `offset`, durably, without recording it: what [`Volume::append_upload`]
    /// records, or what the request that ends an upload sends through an
    /// instance with the recorded parts (so that, until the file is stored,
    /// the upload stands where that request began).
    pub async fn store_upload_part(
        &self,
        id: &str,
        offset: u64,
        mut staged: StagedBlob,
    ) -> Result<uploads::UploadPart, VolumeError> {
        let size = staged.len();
        let name = if size > 0 {
            use std::hash::BuildHasher as _;
            let nonce = std::collections::hash_map::RandomState::new().hash_one(now_ms());
            let name = format!("{offset:020}-{nonce:016x}");
            self.blobs.write_part(id, &name, &mut staged).await?;
            name
        } else {
            String::new()
        };
        Ok(uploads::UploadPart { offset, size, name })
    }

    /// Remove a part [`Volume::store_upload_part`] stored and nothing
    /// recorded (the request that ended an upload failed short of storing
    /// its file): the client sends those bytes again, and until then they
    /// must not sit outside every quota.
    pub async fn discard_upload_part(
        &self,
        id: &str,
        part: &uploads::UploadPart,
    ) -> Result<(), VolumeError> {
        if part.name.is_empty() {
            return Ok(());
        }
        self.blobs.remove_part(id, &part.name).await
    }

    /// Add the `staged` bytes to `owner`'s upload `id`, whose offset the
    /// caller saw at `offset`: stored as a part of their own, then recorded
    /// (with the upload's `length`, if it had none, and its new expiry). A
    /// part is durable before this returns. `None` when the upload moved on
    /// meanwhile (another request added a part) or is gone; the part is
    /// removed again then, and when it is refused: past the owner's quota
    /// (`QuotaExceeded`, weighed as it is recorded) or past
    /// [`uploads::MAX_PARTS`] (`TooManyParts`).
    pub async fn append_upload(
        &self,
        owner: Owner,
        id: &str,
        offset: u64,
        staged: StagedBlob,
        length: Option<u64>,
        expires_ms: i64,
    ) -> Result<Option<uploads::Upload>, VolumeError> {
        let part = self.store_upload_part(id, offset, staged).await?;
        let recorded = self
            .record_part(owner, id, offset, &part, length, expires_ms)
            .await;
        // A part refused (past the quota or the part limit) or not taken
        // (the upload moved on) is removed again: nothing names it.
        if !matches!(recorded, Ok(Some(_))) && part.size > 0 {
            self.blobs.remove_part(id, &part.name).await?;
        }
        recorded
    }

    /// How many parts upload `id` keeps.
    pub async fn upload_part_count(&self, id: &str) -> Result<u64, VolumeError> {
        uploads::part_count(self.db(), id).await
    }

    /// The parts of upload `id`, in the order of the file.
    pub async fn upload_parts(&self, id: &str) -> Result<Vec<uploads::UploadPart>, VolumeError> {
        uploads::parts(self.db(), id).await
    }

    /// Part `part` of upload `id`, opened for reading.
    pub async fn open_upload_part(
        &self,
        id: &str,
        part: &uploads::UploadPart,
    ) -> Result<BlobReader, VolumeError> {
        self.blobs
            .open_part(id, &part.name)
            .await?
            .ok_or_else(|| VolumeError::NotFound(format!("part {} of upload {id}", part.name)))
    }

    /// Forget upload `id` (`owner`'s, when given) and free its parts;
    /// whether it was there.
    pub async fn remove_upload(&self, owner: Option<Owner>, id: &str) -> Result<bool, VolumeError> {
        let removed = uploads::delete(self.db(), owner, id, false).await?;
        if removed {
            self.blobs.remove_parts(id).await?;
        }
        Ok(removed)
    }

    /// Store the `staged` bytes as part `number` of `owner`'s multipart
    /// upload `id`, durably, replacing a part of that number (`etag`: their
    /// hex MD5; `checksum`: `ALGORITHM:base64` or empty), and move its
    /// expiry to `expires_ms`. `None` when the upload is gone. Refused
    /// (`QuotaExceeded`) when what it adds would take the owner past their
    /// quota, weighed as it is recorded; its bytes are removed again then.
    #[allow(clippy::too_many_arguments)]
    pub async fn store_multipart_part(
        &self,
        owner: Owner,
        id: &str,
        number: u32,
        mut staged: StagedBlob,
        etag: String,
        checksum: String,
        expires_ms: i64,
    ) -> Result<Option<uploads::MultipartPart>, VolumeError> {
        use std::hash::BuildHasher as _;
        let nonce = std::collections::hash_map::RandomState::new().hash_one(now_ms());
        let name = format!("part-{number:05}-{nonce:016x}");
        let part = uploads::MultipartPart {
            number,
            size: staged.len(),
            etag,
            checksum,
            name,
            created_ms: now_ms(),
        };
        self.blobs.write_part(id, &part.name, &mut staged).await?;
        match self
            .record_numbered_part(owner, id, &part, expires_ms)
            .await
        {
            Ok(Some(replaced)) => {
                if let Some(replaced) = replaced {
                    self.blobs.remove_part(id, &replaced).await?;
                }
                Ok(Some(part))
            }
            Ok(None) => {
                self.blobs.remove_part(id, &part.name).await?;
                Ok(None)
            }
            // Refused (past the quota): nothing names it.
            Err(error) => {
                self.blobs.remove_part(id, &part.name).await?;
                Err(error)
            }
        }
    }

    /// The recorded parts of multipart upload `id`, by number.
    pub async fn multipart_parts(
        &self,
        id: &str,
    ) -> Result<Vec<uploads::MultipartPart>, VolumeError> {
        uploads::numbered_parts(self.db(), id).await
    }

    /// Part `part` of multipart upload `id`, opened for reading.
    pub async fn open_multipart_part(
        &self,
        id: &str,
        part: &uploads::MultipartPart,
    ) -> Result<BlobReader, VolumeError> {
        self.blobs
            .open_part(id, &part.name)
            .await?
            .ok_or_else(|| VolumeError::NotFound(format!("part {} of upload {id}", part.number)))
    }

    /// Up to `limit` of `owner`'s unexpired multipart uploads to paths from
    /// `from` and before `upper`, by path, then by age.
    pub async fn multipart_uploads(
        &self,
        owner: Owner,
        from: &str,
        upper: &str,
        limit: usize,
    ) -> Result<Vec<uploads::Upload>, VolumeError> {
        uploads::multipart_uploads(self.db(), owner, from, upper, limit).await
    }

    /// Unfinished uploads that have not expired.
    pub async fn uploads_in_progress(&self) -> Result<u64, VolumeError> {
        uploads::in_progress(self.db()).await
    }

    /// Record tus part `part` of `owner`'s upload `id` (see
    /// [`uploads::record_part_in`]), refused when the upload has
    /// [`uploads::MAX_PARTS`]` - 1` already (`TooManyParts`: the rest must
    /// come in one request) or when it would take its owner past their quota
    /// (`QuotaExceeded`), weighed under the owner's user row, taken before
    /// the upload's (the quota's lock order), with everything else they keep.
    async fn record_part(
        &self,
        owner: Owner,
        id: &str,
        offset: u64,
        part: &uploads::UploadPart,
        length: Option<u64>,
        expires_ms: i64,
    ) -> Result<Option<uploads::Upload>, VolumeError> {
        let db = self.db();
        let now = now_ms();
        db.write(async |tx: &mut WriteTx| {
            let quota = quota::lock(db, tx, owner).await?;
            if part.size > 0 {
                if uploads::part_count_in(tx, id).await? >= u64::from(uploads::MAX_PARTS) - 1 {
                    return Err(VolumeError::TooManyParts {
                        limit: uploads::MAX_PARTS,
                    });
                }
                let cost = quota::cost(part.size);
                quota::check(db, tx, owner, quota, quota::Leaving::NOTHING, cost).await?;
            }
            uploads::record_part_in(
                tx, owner, id, offset, part.size, &part.name, length, expires_ms, now,
            )
            .await
        })
        .await
    }

    /// Record S3 part `part` of `owner`'s unexpired multipart upload `id`,
    /// replacing a part of the same number, and move the upload's expiry to
    /// `expires_ms`: the name of the part it replaced, as `Some(Some(name))`;
    /// `None` when the upload is gone. Refused (`QuotaExceeded`) when what
    /// the part adds would take its owner past their quota, weighed under
    /// the owner's user row with everything else they keep.
    async fn record_numbered_part(
        &self,
        owner: Owner,
        id: &str,
        part: &uploads::MultipartPart,
        expires_ms: i64,
    ) -> Result<Option<Option<String>>, VolumeError> {
        let db = self.db();
        let now = now_ms();
        db.write(async |tx: &mut WriteTx| {
            let quota = quota::lock(db, tx, owner).await?;
            if !uploads::touch_multipart_in(tx, owner, id, expires_ms, now).await? {
                return Ok(None);
            }
            let replaced = uploads::numbered_part_in(tx, id, part.number).await?;
            // What the part adds beside the one it replaces; one no larger
            // adds nothing, and is taken even past the quota (it frees room).
            let freed = replaced.as_ref().map_or(0, |(_, size)| quota::cost(*size));
            let added = quota::cost(part.size).saturating_sub(freed);
            if added > 0 {
                quota::check(db, tx, owner, quota, quota::Leaving::NOTHING, added).await?;
            }
            uploads::record_numbered_part_in(tx, id, part).await?;
            Ok(Some(replaced.map(|(name, _)| name)))
        })
        .await
    }
}
