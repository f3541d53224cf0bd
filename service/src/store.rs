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

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use axum::body::Body;
use bytes::Bytes;
use futures_util::Stream;

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
    /// The object lock the file is stored under (S3's
    /// `x-amz-object-lock-*`); without one its bucket's default applies.
    pub lock: Option<volume::VersionLock>,
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

    /// Store `body` as the file, `inspector` seeing it on its way (see
    /// [`Inspect`]). Once the body has passed, `describe` makes of what it
    /// was what the protocol keeps in the file's row (stored in the same
    /// transaction as the file: S3's ETag and checksums) and what it hands
    /// back here with the file. A body the inspector refuses stores nothing,
    /// and the refusal is the answer, whatever else failed.
    pub async fn send_inspected<S, E, I, T, D>(
        self,
        body: S,
        inspector: I,
        describe: D,
    ) -> Result<(FileMeta, T), Refusal<I::Refused>>
    where
        S: Stream<Item = Result<Bytes, E>> + Send + Unpin + 'static,
        E: std::fmt::Display + 'static,
        I: Inspect,
        T: Send + 'static,
        D: FnOnce(I::Passed) -> (Option<String>, T) + Send + 'static,
    {
        let (body, describe, outcome) = inspected(body, inspector, describe);
        let stored = self
            .send_described(Body::from_stream(body), Some(describe))
            .await;
        outcome.of(stored)
    }

    /// [`UploadSession::send`], keeping what `describe` makes once the body
    /// has ended in the file's row, in the same transaction as the file.
    async fn send_described(
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
        if let Some(lock) = options.lock {
            upload = upload.locked(lock);
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
    /// what they use (see `volume::quota`) but what making room could free
    /// (the file there now, the oldest versions and trash), less the new
    /// file's entry overhead; `None` without a quota.
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
        // What making room could free: the file there now (unless S3's
        // rules keep it as a version) and the oldest kept versions.
        let reclaimable = self
            .volume
            .reclaimable(owner, path)
            .await
            .map_err(|error| ServiceError::from_volume(error, path.as_str()))?;
        Ok(Some(
            quota
                .saturating_sub(used.saturating_sub(reclaimable))
                .saturating_sub(volume::ENTRY_OVERHEAD),
        ))
    }
}

fn quota_exceeded(room: u64) -> ServiceError {
    ServiceError::QuotaExceeded(format!(
        "the upload is larger than the {room} bytes left of your quota"
    ))
}

/// What a protocol makes of a body as it streams to its instance (S3: its
/// MD5 and the checksum its request declared). It sees every chunk; when
/// the body ends it passes it, saying what it was, or refuses it: then the
/// body fails instead of ending, so nothing is stored.
pub trait Inspect: Send + Unpin + 'static {
    /// What a body that passed was.
    type Passed: Send + 'static;
    /// Why a body was refused, in the protocol's terms.
    type Refused: Send + 'static;

    /// A chunk on its way to the instance.
    fn chunk(&mut self, bytes: &[u8]);

    /// The body's own stream failed with `error`: the refusal it means to
    /// the protocol, if it means one (S3: a chunk's signature).
    fn failed(&mut self, error: &str) -> Option<Self::Refused>;

    /// The body ended: what it was, or why it is refused.
    fn ended(&mut self) -> Result<Self::Passed, Self::Refused>;

    /// Whether it makes anything of the bytes it sees (a whole-content
    /// checksum does): a body stored from bytes kept already, which it
    /// would not see, cannot be inspected.
    fn sees_bytes(&self) -> bool {
        true
    }
}

/// A body nothing inspects: it always passes.
impl Inspect for () {
    type Passed = ();
    type Refused = std::convert::Infallible;

    fn chunk(&mut self, _: &[u8]) {}

    fn failed(&mut self, _: &str) -> Option<Self::Refused> {
        None
    }

    fn ended(&mut self) -> Result<(), Self::Refused> {
        Ok(())
    }

    fn sees_bytes(&self) -> bool {
        false
    }
}

/// Why an inspected body was not stored.
#[derive(Debug)]
pub enum Refusal<R> {
    /// Its inspector refused it.
    Refused(R),
    /// The store failed.
    Failed(ServiceError),
}

impl Refusal<std::convert::Infallible> {
    /// The store's error: nothing refuses a body that cannot be refused.
    pub fn failure(self) -> ServiceError {
        match self {
            Self::Failed(error) => error,
            Self::Refused(never) => match never {},
        }
    }
}

impl<R> From<ServiceError> for Refusal<R> {
    fn from(error: ServiceError) -> Self {
        Self::Failed(error)
    }
}

/// `body` through `inspector`, and where what it said of the body is found
/// once the body has ended (or failed).
pub(super) fn inspect<S, I: Inspect>(body: S, inspector: I) -> (Inspected<S, I>, Verdict<I>) {
    let verdict = Verdict(Arc::new(Mutex::new(None)));
    let body = Inspected {
        body,
        inspector: Some(inspector),
        verdict: verdict.clone(),
    };
    (body, verdict)
}

/// `body` through `inspector`; the [`Describe`] the instance runs once it
/// has ended (`describe` on what it was); and where the outcome is found
/// when the store returns. The instance takes the body and its `Describe`
/// apart and runs the latter without arguments, so the two meet in a
/// [`Verdict`], here and nowhere else.
fn inspected<S, I, T, D>(
    body: S,
    inspector: I,
    describe: D,
) -> (Inspected<S, I>, Describe, Outcome<I, T>)
where
    I: Inspect,
    T: Send + 'static,
    D: FnOnce(I::Passed) -> (Option<String>, T) + Send + 'static,
{
    let (body, verdict) = inspect(body, inspector);
    let outcome = Outcome {
        verdict: verdict.clone(),
        kept: Arc::new(Mutex::new(None)),
    };
    let kept = outcome.kept.clone();
    let describe = Describe(Box::new(move || {
        let passed = match verdict.take() {
            Some(Ok(passed)) => passed,
            other => {
                verdict.set(other);
                return None;
            }
        };
        let (row, value) = describe(passed);
        *lock(&kept) = Some(value);
        row
    }));
    (body, describe, outcome)
}

fn lock<T>(slot: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    slot.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What an [`Inspect`]or said of its body: nothing until it ended (or its
/// stream failed with a refusal).
pub(super) struct Verdict<I: Inspect>(Arc<Mutex<Option<Said<I>>>>);

/// What an inspector says of a body at its end.
type Said<I> = Result<<I as Inspect>::Passed, <I as Inspect>::Refused>;

impl<I: Inspect> Clone for Verdict<I> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<I: Inspect> Verdict<I> {
    /// What the inspector said, taken.
    pub(super) fn take(&self) -> Option<Said<I>> {
        lock(&self.0).take()
    }

    /// What the inspector passed the body as, taken; `None` (and what it
    /// said left) if it did not pass it.
    pub(super) fn take_passed(&self) -> Option<I::Passed> {
        match self.take() {
            Some(Ok(passed)) => Some(passed),
            other => {
                self.set(other);
                None
            }
        }
    }

    fn set(&self, said: Option<Said<I>>) {
        *lock(&self.0) = said;
    }
}

/// An inspected store's [`Verdict`] (until its `Describe` takes what the
/// body passed as), and what that `Describe` handed back.
struct Outcome<I: Inspect, T> {
    verdict: Verdict<I>,
    kept: Arc<Mutex<Option<T>>>,
}

impl<I: Inspect, T> Outcome<I, T> {
    /// The result of a store that returned `stored`: a refusal first.
    fn of(
        self,
        stored: Result<FileMeta, ServiceError>,
    ) -> Result<(FileMeta, T), Refusal<I::Refused>> {
        if let Some(Err(refused)) = self.verdict.take() {
            return Err(Refusal::Refused(refused));
        }
        let meta = stored?;
        match lock(&self.kept).take() {
            Some(value) => Ok((meta, value)),
            None => Err(Refusal::Failed(ServiceError::Internal(
                "the body was not read to its end".into(),
            ))),
        }
    }
}

/// A body on its way through its [`Inspect`]or, which says at its end
/// whether it passes.
pub(super) struct Inspected<S, I: Inspect> {
    body: S,
    /// Until the body ends.
    inspector: Option<I>,
    verdict: Verdict<I>,
}

impl<S, E, I> Stream for Inspected<S, I>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
    I: Inspect,
{
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        match Pin::new(&mut this.body).poll_next(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(bytes))) => {
                if let Some(inspector) = &mut this.inspector {
                    inspector.chunk(&bytes);
                }
                Poll::Ready(Some(Ok(bytes)))
            }
            Poll::Ready(Some(Err(error))) => {
                let text = error.to_string();
                if let Some(refused) = this
                    .inspector
                    .as_mut()
                    .and_then(|inspector| inspector.failed(&text))
                {
                    this.verdict.set(Some(Err(refused)));
                }
                Poll::Ready(Some(Err(std::io::Error::other(text))))
            }
            Poll::Ready(None) => {
                let Some(mut inspector) = this.inspector.take() else {
                    return Poll::Ready(None);
                };
                let verdict = inspector.ended();
                let failed = verdict.is_err();
                this.verdict.set(Some(verdict));
                if failed {
                    Poll::Ready(Some(Err(std::io::Error::other(
                        "the body does not match its checksum",
                    ))))
                } else {
                    Poll::Ready(None)
                }
            }
        }
    }
}
