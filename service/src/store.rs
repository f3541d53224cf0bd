//! Storing a body as a file: the upload side of the service.
//!
//! An upload is a session: [`FileService::upload`] opens it and decides
//! everything that can be decided before a byte is read (the locks, the
//! size limit, what is left of the quota), then the body is sent, today in
//! one request ([`UploadSession::send`]). A body is read from the client
//! only once it holds an instance and its share of the memory budget; the
//! instance hashes it as it comes (SHA-256, the content's address; BLAKE3,
//! its verification) and the volume makes it durable before the answer.
//! Uploads in parts over time (S3 multipart, tus) are sessions too: their
//! parts are kept durably, and the file appears at its path only when the
//! last part is in and the whole has passed through an instance.

use axum::body::Body;

use volume::{FileMeta, FilePath, Owner};

use crate::ServiceError;
use auth::Caller;
use storage_host::runtime::{Describe, StoreRequest, Upload};

use super::{Change, FileService, LockTokens, parent_key_of};

/// How a body is to be stored.
#[derive(Debug, Clone, Default)]
pub struct StoreOptions {
    /// The length the client declared (`Content-Length`), if it did.
    pub declared: Option<u64>,
    /// The content type the client named; else the instance sniffs one.
    pub content_type: Option<String>,
    /// Refuse to replace an existing file (`If-None-Match: *`).
    pub create_only: bool,
}

/// An upload that may go ahead: its checks passed; its body is next.
#[derive(Debug)]
pub struct UploadSession<'a> {
    service: &'a FileService,
    owner: Owner,
    path: &'a FilePath,
    options: StoreOptions,
    /// The most bytes the body may have: the size limit, or what is left
    /// of the quota if that is less.
    limit: u64,
    /// The upload whose parts the body is, if it is one's: they count
    /// against the quota until the file is stored, not beside it.
    completes: Option<String>,
}

impl UploadSession<'_> {
    /// Store `body` as the file: hashed by an instance, durable before
    /// this returns.
    pub async fn send(self, body: Body) -> Result<FileMeta, ServiceError> {
        self.send_described(body, None).await
    }

    /// [`UploadSession::send`], keeping what `describe` makes once the body
    /// has ended (what S3 keeps of an object) in the file's row, in the same
    /// transaction as the file.
    pub async fn send_described(
        self,
        body: Body,
        describe: Option<Describe>,
    ) -> Result<FileMeta, ServiceError> {
        let Self {
            service,
            owner,
            path,
            options,
            limit,
            completes,
        } = self;
        let declared = options.declared;
        // Wait for memory and an instance holding no body: until then the
        // client is held by TCP back-pressure.
        let lease = service.pool.lease(service.body_size(declared)).await?;
        let mut upload = Upload::new(body, limit, service.volume.stage());
        if let Some(describe) = describe {
            upload = upload.described(describe);
        }
        if let Some(id) = completes {
            upload = upload.completing(id);
        }
        let request = StoreRequest {
            path: path.as_str().to_owned(),
            content_type: options.content_type,
            create_only: options.create_only,
            window: service.body_window,
        };
        let max_body = service.max_body;
        lease
            .run(move |instance| Box::pin(instance.store(owner, request, upload)))
            .await?
            .map_err(
                |error| match ServiceError::from_handler(error, path.as_str()) {
                    // An undeclared body cut off at what the quota left.
                    ServiceError::BodyTooLarge { limit } if limit < max_body => {
                        quota_exceeded(limit)
                    }
                    other => other,
                },
            )
    }
}

impl FileService {
    /// Store `body` as `caller`'s file `path`: an upload in one request.
    pub async fn store(
        &self,
        caller: &Caller,
        path: &FilePath,
        body: Body,
        options: StoreOptions,
        tokens: &LockTokens,
    ) -> Result<FileMeta, ServiceError> {
        self.upload(caller, path, options, tokens)
            .await?
            .send(body)
            .await
    }

    /// Open an upload of `caller`'s file `path`. `tokens` are the lock
    /// tokens the request submits: a lock on the file or its folder needs
    /// its token. A declared length over the size limit or what is left of
    /// the quota is refused here, before a byte of the body is read.
    pub async fn upload<'a>(
        &'a self,
        caller: &Caller,
        path: &'a FilePath,
        options: StoreOptions,
        tokens: &LockTokens,
    ) -> Result<UploadSession<'a>, ServiceError> {
        self.upload_completing(caller, path, options, tokens, None)
            .await
    }

    /// [`FileService::upload`] of a body that is the parts of upload
    /// `completes`, if it is one's: those parts count against the quota
    /// already and become the file, so they are not counted beside it.
    pub async fn upload_completing<'a>(
        &'a self,
        caller: &Caller,
        path: &'a FilePath,
        options: StoreOptions,
        tokens: &LockTokens,
        completes: Option<&str>,
    ) -> Result<UploadSession<'a>, ServiceError> {
        let owner = caller.owner();
        let parent = parent_key_of(path.as_str());
        self.check_locks(
            owner,
            tokens,
            &[Change::One(path.as_str()), Change::One(parent)],
        )
        .await?;
        let declared = options.declared;
        if declared.is_some_and(|declared| declared > self.max_body) {
            return Err(ServiceError::BodyTooLarge {
                limit: self.max_body,
            });
        }
        // The same for the quota: what is left of it (plus the file this
        // replaces). The volume checks again as it commits, under a lock.
        let room = self.quota_room_completing(caller, path, completes).await?;
        if let Some(room) = room
            && declared.is_some_and(|declared| declared > room)
        {
            return Err(quota_exceeded(room));
        }
        Ok(UploadSession {
            service: self,
            owner,
            path,
            options,
            limit: room.map_or(self.max_body, |room| room.min(self.max_body)),
            completes: completes.map(str::to_owned),
        })
    }

    /// The bytes `caller` may still store at `path`: their quota, less
    /// what they use (see `volume::quota`) but the file there now, less
    /// the new file's entry overhead; `None` without a quota.
    pub(super) async fn quota_room(
        &self,
        caller: &Caller,
        path: &FilePath,
    ) -> Result<Option<u64>, ServiceError> {
        self.quota_room_completing(caller, path, None).await
    }

    /// [`FileService::quota_room`] for a file made of upload `completes`'s
    /// parts, which count already and become the file.
    async fn quota_room_completing(
        &self,
        caller: &Caller,
        path: &FilePath,
        completes: Option<&str>,
    ) -> Result<Option<u64>, ServiceError> {
        let Some(quota) = caller.user().and_then(|user| user.quota) else {
            return Ok(None);
        };
        let owner = caller.owner();
        let used = self
            .volume
            .accounts()
            .usage_completing(owner, completes)
            .await
            .map_err(|error| ServiceError::from_volume(error, path.as_str()))?;
        let replaced = self
            .volume
            .stat(owner, path)
            .await
            .map_or(0, |meta| meta.size.saturating_add(volume::ENTRY_OVERHEAD));
        Ok(Some(
            quota
                .saturating_sub(used.saturating_sub(replaced))
                .saturating_sub(volume::ENTRY_OVERHEAD),
        ))
    }
}

fn quota_exceeded(room: u64) -> ServiceError {
    ServiceError::QuotaExceeded(format!(
        "the upload is larger than the {room} bytes left of your quota"
    ))
}
