//! The Wasm side of the gateway: one `Engine` with the pooling allocator, the
//! storage component compiled once into an `InstancePre`, and one
//! [`HandlerInstance`] per store with a typed method for each guest export.
//!
//! Layout:
//! - `mod.rs`: the engine, instantiation, the typed calls and how a failed
//!   call is classified ([`CallFailure`]).
//! - `digest`: the host side of the `digest` import, the hashes' inner
//!   loops lent to the guest.
//! - [`host`]: the store's data and the host side of the `volume` and `body`
//!   interfaces (uploads staged as they pass, content read and responses
//!   written a chunk at a time).
//! - `limiter`: the `ResourceLimiter`: exact memory figure, per-instance cap,
//!   and the instance's share of the memory budget.
//! - `native`: the same handler compiled into the gateway, against the same
//!   host functions ([`HandlerKind::Native`], a measuring instrument).
//! - `stream`: answers streamed to the client through a small paced
//!   channel ([`paced_body`]): an instance's `send-body`, or any answer the
//!   host writes as it produces it.
//!
//! The WIT bindings stay in here: the typed calls take and return the
//! project's own types (`storage_handler::types`, `volume::FileMeta`).

mod digest;
pub mod host;
mod limiter;
mod native;
mod stream;
pub mod upload;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use wasmtime::component::{Component, HasSelf, Linker, Resource};
use wasmtime::error::Context as _;
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap,
    UpdateDeadline,
};

use volume::{Owner, Volume};

use crate::budget::{MemoryBudget, Reservation};
use host::HostState;
pub use host::{Pace, ResponseSink};
use limiter::{MemoryLimiter, Refusal};
use native::NativeHandler;
pub use stream::{Cut, PacedSender, Slowness, paced_body};
pub use upload::{Describe, Upload};

/// Bindings generated from `wit/storage.wit`.
pub mod bindings {
    // The generated glue is not ours to document or lint.
    #![allow(
        missing_docs,
        missing_debug_implementations,
        unreachable_pub,
        unsafe_code
    )]
    wasmtime::component::bindgen!({
        world: "storage",
        path: "../wit",
        // `digest` is linked by hand (`digest.rs`), to hash the guest's
        // bytes where they lie.
        imports: { default: async },
        exports: { default: async },
        additional_derives: [PartialEq],
        with: {
            "wasm-storage:storage/body.upload": super::upload::Upload,
            "wasm-storage:storage/body.content": super::host::Content,
            "wasm-storage:storage/body.response": super::host::ResponseSink,
        },
    });
}

use bindings::{Storage, StoragePre};

pub use storage_handler::hashes::HashState;
/// The values of a call, in the project's own types: the WIT bindings
/// never leave this module.
pub use storage_handler::types::{
    AppendRequest, BodyError, ByteRange, FetchBody, FetchRequest, FileEnd, HandlerError, IfRange,
    StoreRequest, VolumeError as GuestVolumeError,
};

/// What a fetch prepared: the file's row and what `send_body` will send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub meta: volume::FileMeta,
    pub body: FetchBody,
}

/// The storage component built from `storage-guest/` by the build script.
pub const BUILTIN_GUEST: &[u8] = include_bytes!(env!("STORAGE_GUEST_WASM"));

/// How often the epoch ticks; request deadlines are counted in ticks.
const EPOCH_TICK: Duration = Duration::from_millis(50);

/// Limits that shape the engine and every instance.
#[derive(Debug, Clone)]
pub struct RuntimeLimits {
    /// Instances that may exist at once (serving ones plus replacements
    /// being made); sizes the pooling allocator.
    pub max_instances: u32,
    /// Most linear memory one instance may hold, in bytes.
    pub memory_cap: u64,
    /// Longest a request may go without progress: running in the guest with
    /// no body bytes moved, or waiting on a client that sends or reads
    /// nothing.
    pub request_timeout: Duration,
    /// Slowest a client may move a body on average, in bytes per second,
    /// once [`host::Pace::GRACE`] has passed (0: no minimum).
    pub min_body_rate: u64,
    /// What runs the handler.
    pub handler: HandlerKind,
}

/// What runs the storage handler in each instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HandlerKind {
    /// The storage component, in Wasm: what the gateway is for.
    Wasm,
    /// The same handler logic compiled into the gateway, against the same
    /// host functions: a measuring instrument for what Wasm costs. No
    /// sandbox, and its buffers are not linear memory, so the estimator
    /// never replaces an instance.
    Native,
}

/// The compiled storage component and everything needed to instantiate it.
#[derive(Clone)]
pub struct Runtime {
    engine: Engine,
    pre: StoragePre<HostState>,
    volume: Arc<Volume>,
    budget: Arc<MemoryBudget>,
    limits: RuntimeLimits,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Compile `component` (a binary or text component implementing the
    /// `storage` world) for an engine sized by `limits`; every instance's
    /// memory is counted against `budget`.
    pub fn new(
        component: &[u8],
        volume: Arc<Volume>,
        budget: Arc<MemoryBudget>,
        limits: RuntimeLimits,
    ) -> wasmtime::Result<Self> {
        let engine = Engine::new(&engine_config(&limits))?;
        let component =
            Component::new(&engine, component).context("compiling the storage component")?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        {
            use bindings::wasm_storage::storage::{body, types, volume};
            types::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)?;
            body::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)?;
            volume::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)?;
        }
        digest::add_to_linker(&mut linker)?;
        let pre = StoragePre::new(linker.instantiate_pre(&component)?)
            .context("the component does not implement the wasm-storage `storage` world")?;
        spawn_epoch_ticker(&engine);
        Ok(Self {
            engine,
            pre,
            volume,
            budget,
            limits,
        })
    }

    pub fn limits(&self) -> &RuntimeLimits {
        &self.limits
    }

    /// How slow a client may be with a body, either way.
    pub fn pace(&self) -> Pace {
        Pace {
            stall: self.limits.request_timeout,
            min_rate: self.limits.min_body_rate,
        }
    }

    pub fn budget(&self) -> &Arc<MemoryBudget> {
        &self.budget
    }

    /// A fresh store and component instance (or native handler).
    pub async fn instantiate(&self) -> wasmtime::Result<HandlerInstance> {
        let limiter = MemoryLimiter::new(self.limits.memory_cap, self.budget.clone());
        let memory = limiter.gauge();
        let mut store = Store::new(
            &self.engine,
            HostState::new(self.volume.clone(), limiter, self.pace()),
        );
        store.limiter(|state| state.limiter_mut());
        // A request is interrupted when a whole timeout passes in the guest
        // without a body byte moving: a large body may take long, a stuck
        // guest may not.
        let deadline_ticks = ticks(self.limits.request_timeout);
        store.epoch_deadline_callback(move |mut context| {
            if context.data_mut().progress_since_last_look() {
                Ok(UpdateDeadline::Continue(deadline_ticks))
            } else {
                Err(Trap::Interrupt.into())
            }
        });
        let code = match self.limits.handler {
            HandlerKind::Wasm => {
                // Instantiation runs Wasm too (initialisers): it gets a deadline.
                store.set_epoch_deadline(deadline_ticks);
                Code::Wasm(self.pre.instantiate_async(&mut store).await?)
            }
            HandlerKind::Native => Code::Native(NativeHandler::default()),
        };
        store.data_mut().limiter_mut().instantiated();
        Ok(HandlerInstance {
            store,
            code,
            memory,
            deadline_ticks,
        })
    }
}

fn engine_config(limits: &RuntimeLimits) -> Config {
    let mut pooling = PoolingAllocationConfig::default();
    // A component instance holds several core instances (the program, the
    // WASI adapter, shims), each with its tables and memories.
    let slots = limits.max_instances.max(1);
    pooling
        .total_component_instances(slots)
        .total_core_instances(slots * 8)
        .total_memories(slots * 4)
        .total_tables(slots * 8)
        .total_stacks(slots)
        .max_memory_size(usize::try_from(limits.memory_cap).unwrap_or(usize::MAX))
        // Dropping an instance hands all its pages back to the OS: the point
        // of replacing a bloated instance is that RSS really falls.
        .linear_memory_keep_resident(0)
        .table_keep_resident(0);
    let mut config = Config::new();
    config
        .epoch_interruption(true)
        .memory_init_cow(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
    config
}

fn spawn_epoch_ticker(engine: &Engine) {
    // A thread, not a task: it must tick even if every runtime worker is busy.
    let engine = engine.weak();
    std::thread::Builder::new()
        .name("epoch-ticker".into())
        .spawn(move || {
            while let Some(engine) = engine.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })
        .ok();
}

fn ticks(timeout: Duration) -> u64 {
    (timeout.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64
}

/// One store with one instance of the storage component (or, measuring,
/// the native handler).
pub struct HandlerInstance {
    store: Store<HostState>,
    code: Code,
    memory: Arc<AtomicU64>,
    deadline_ticks: u64,
}

/// What a [`HandlerInstance`] calls.
enum Code {
    Wasm(Storage),
    Native(NativeHandler),
}

impl std::fmt::Debug for HandlerInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandlerInstance")
            .field("memory_bytes", &self.memory.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Why an instance could not finish a call. The instance is unusable after
/// any of these and must be replaced.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallFailure {
    #[error("the request needs more than the instance memory cap of {cap} bytes")]
    MemoryCap { cap: u64 },
    #[error("the request needs more memory than the memory budget of {budget} bytes has free")]
    MemoryBudget { budget: u64 },
    #[error("the request made no progress within the request timeout")]
    Timeout,
    #[error("the instance trapped: {0}")]
    Trap(String),
}

/// What a call into the guest gives: the guest's own answer, or why the
/// instance failed.
pub type CallResult<T, E = HandlerError> = Result<Result<T, E>, CallFailure>;

impl HandlerInstance {
    /// The instance's linear memory in bytes, readable while it is busy.
    pub fn memory_gauge(&self) -> Arc<AtomicU64> {
        self.memory.clone()
    }

    /// Let the next calls grow into `reservation`'s bytes.
    pub fn grant(&mut self, reservation: Reservation) {
        let bytes = reservation.into_allowance();
        self.store.data_mut().limiter_mut().grant(bytes);
    }

    /// Give back what was granted and not grown into.
    pub fn return_unspent(&mut self) {
        self.store.data_mut().limiter_mut().return_unspent();
    }

    /// Read `upload` into the instance, hash it, and store it in `owner`'s
    /// tree: the handler's `append` of a whole body.
    pub async fn store(
        &mut self,
        owner: Owner,
        request: StoreRequest,
        upload: Upload,
    ) -> CallResult<volume::FileMeta> {
        let whole = AppendRequest {
            store: request,
            resume: HashState::default(),
            ends: FileEnd::BodyEnd,
            head: Vec::new(),
            checkpoint_every: 0,
        };
        Ok(self.append(owner, whole, upload).await?.and_then(|stored| {
            stored.ok_or_else(|| {
                HandlerError::Body(BodyError::Internal(
                    "a whole upload ended without being stored".into(),
                ))
            })
        }))
    }

    /// Run one request's share of a resumable upload (`upload` replays
    /// what the upload kept past `request.resume`, then the client's
    /// bytes): its states recorded on the way, its file stored if its last
    /// byte came (`Some`).
    pub async fn append(
        &mut self,
        owner: Owner,
        request: AppendRequest,
        upload: Upload,
    ) -> CallResult<Option<volume::FileMeta>> {
        self.start_call(owner);
        let request = request.into();
        let body = self.store.data_mut().push(upload).map_err(trap)?;
        let outcome = match &self.code {
            Code::Wasm(bindings) => {
                let borrowed = Resource::new_borrow(body.rep());
                bindings
                    .wasm_storage_storage_handler()
                    .call_append(&mut self.store, &request, borrowed)
                    .await
            }
            Code::Native(_) => {
                Ok(NativeHandler::append(self.store.data_mut(), request, &body).await)
            }
        };
        drop(self.store.data_mut().remove(body));
        Ok(self
            .classify(outcome)?
            .map(|stored| stored.map(|meta| own_meta(meta.into())))
            .map_err(Into::into))
    }

    /// Answer a read from metadata, or read and verify the content, which
    /// then waits in the instance for [`HandlerInstance::send_body`].
    /// `looked_up` is the file's row as the caller read it for `owner` a
    /// moment ago, if it did: the call starts from it rather than asking
    /// the index again.
    pub async fn fetch(
        &mut self,
        owner: Owner,
        request: FetchRequest,
        looked_up: Option<volume::FileMeta>,
    ) -> CallResult<Fetched> {
        self.start_call(owner);
        if let Some(meta) = looked_up {
            self.store.data_mut().looked_up(meta);
        }
        let request = request.into();
        let outcome = match &mut self.code {
            Code::Wasm(bindings) => {
                bindings
                    .wasm_storage_storage_handler()
                    .call_fetch(&mut self.store, &request)
                    .await
            }
            Code::Native(native) => Ok(native.fetch(self.store.data_mut(), request).await),
        };
        Ok(self
            .classify(outcome)?
            .map(|fetched| {
                let fetched = storage_handler::types::Fetched::from(fetched);
                Fetched {
                    meta: own_meta(fetched.meta),
                    body: fetched.body,
                }
            })
            .map_err(Into::into))
    }

    /// Stream what the last fetch prepared into `sink`.
    pub async fn send_body(&mut self, sink: ResponseSink) -> CallResult<(), BodyError> {
        // Streams what `fetch` prepared; its volume calls ran already, and
        // it may make none.
        self.store.set_epoch_deadline(self.deadline_ticks);
        self.store.data_mut().begin_call(None);
        let out = self.store.data_mut().push(sink).map_err(trap)?;
        let outcome = match &mut self.code {
            Code::Wasm(bindings) => {
                let borrowed = Resource::new_borrow(out.rep());
                bindings
                    .wasm_storage_storage_handler()
                    .call_send_body(&mut self.store, borrowed)
                    .await
            }
            Code::Native(native) => Ok(native.send_body(self.store.data_mut(), &out).await),
        };
        let sink = self.store.data_mut().remove(out);
        let outcome = self.classify(outcome);
        if !matches!(outcome, Ok(Ok(()))) {
            // What was sent is not the whole answer: the client must see it
            // fail, not end.
            if let Some(sink) = sink {
                sink.abort();
            }
        }
        Ok(outcome?.map_err(Into::into))
    }

    pub async fn delete(&mut self, owner: Owner, path: &str) -> CallResult<()> {
        self.start_call(owner);
        let outcome = match &self.code {
            Code::Wasm(bindings) => {
                bindings
                    .wasm_storage_storage_handler()
                    .call_delete(&mut self.store, path)
                    .await
            }
            Code::Native(_) => Ok(NativeHandler::delete(self.store.data_mut(), path).await),
        };
        Ok(self.classify(outcome)?.map_err(Into::into))
    }

    pub async fn list(
        &mut self,
        owner: Owner,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> CallResult<volume::Listing> {
        self.start_call(owner);
        let outcome = match &self.code {
            Code::Wasm(bindings) => {
                bindings
                    .wasm_storage_storage_handler()
                    .call_list(&mut self.store, prefix, after, limit)
                    .await
            }
            Code::Native(_) => {
                Ok(NativeHandler::list(self.store.data_mut(), prefix, after, limit).await)
            }
        };
        Ok(self
            .classify(outcome)?
            .map(|listing| {
                let listing = storage_handler::types::Listing::from(listing);
                volume::Listing {
                    entries: listing
                        .entries
                        .into_iter()
                        .map(|entry| match entry {
                            storage_handler::types::Entry::File(meta) => {
                                volume::Entry::File(own_meta(meta))
                            }
                            storage_handler::types::Entry::Folder(prefix) => {
                                volume::Entry::Folder(prefix)
                            }
                        })
                        .collect(),
                    next_after: listing.next_after,
                }
            })
            .map_err(Into::into))
    }

    /// Arm the call's deadline and scope its volume operations to `owner`.
    fn start_call(&mut self, owner: Owner) {
        self.store.set_epoch_deadline(self.deadline_ticks);
        self.store.data_mut().begin_call(Some(owner));
    }

    fn classify<T, E>(&self, outcome: wasmtime::Result<Result<T, E>>) -> CallResult<T, E> {
        outcome.map_err(|error| {
            let limiter = self.store.data().limiter();
            match limiter.refused() {
                Some(Refusal::Cap) => CallFailure::MemoryCap { cap: limiter.cap() },
                Some(Refusal::Budget) => CallFailure::MemoryBudget {
                    budget: self.store.data().budget_total(),
                },
                None if matches!(error.downcast_ref::<Trap>(), Some(Trap::Interrupt)) => {
                    CallFailure::Timeout
                }
                None => CallFailure::Trap(format!("{error:#}")),
            }
        })
    }
}

/// The guest's view of a row, as the project's one `FileMeta`.
fn own_meta(meta: storage_handler::types::FileMeta) -> volume::FileMeta {
    storage_handler::file_meta!(volume::FileMeta, meta, s3_info: None)
}

fn trap(error: impl std::fmt::Display) -> CallFailure {
    CallFailure::Trap(error.to_string())
}
