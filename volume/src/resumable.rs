//! [`Volume`]'s uploads in parts, over time: tus's (appended at an
//! offset, see `appending`) and S3's multipart (numbered). A part's bytes
//! are written to the blob store first, then recorded by `uploads` in a
//! transaction that weighs them against the owner's quota; a part not
//! recorded is removed again.

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

    /// Part `part` of multipart upload `id`, opened for reading: an
    /// object of its own, or (named `@…`) appended in order with the
    /// parts before it (see [`crate::appending`]).
    pub async fn open_multipart_part(
        &self,
        id: &str,
        part: &uploads::MultipartPart,
    ) -> Result<BlobReader, VolumeError> {
        if let Some(at) = part.name.strip_prefix(crate::appending::APPENDED) {
            return self.open_appended_part(id, at, part.size).await;
        }
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
