//! The Wasm side of the gateway: one `Engine` with the pooling allocator, the
//! storage component compiled once into an `InstancePre`, and the per-store
//! host state (WASI, the memory limiter, the volume the guest calls into).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::error::Context as _;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use volume::{FilePath, Prefix, Volume, VolumeError};

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
        imports: { default: async },
        exports: { default: async },
        additional_derives: [PartialEq],
    });
}

use bindings::exports::wasm_storage::storage::handler::{
    FetchRequest, Fetched, HandlerError, StoreRequest,
};
use bindings::wasm_storage::storage::types::{self as wit, FileMeta, Listing};
use bindings::{Storage, StoragePre};

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
    /// Longest a single request may run inside an instance.
    pub request_timeout: Duration,
}

/// The compiled storage component and everything needed to instantiate it.
#[derive(Clone)]
pub struct Runtime {
    engine: Engine,
    pre: StoragePre<HostState>,
    volume: Arc<Volume>,
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
    /// `storage` world) for an engine sized by `limits`.
    pub fn new(
        component: &[u8],
        volume: Arc<Volume>,
        limits: RuntimeLimits,
    ) -> wasmtime::Result<Self> {
        let engine = Engine::new(&engine_config(&limits))?;
        let component =
            Component::new(&engine, component).context("compiling the storage component")?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        Storage::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)?;
        let pre = StoragePre::new(linker.instantiate_pre(&component)?)
            .context("the component does not implement the wasm-storage `storage` world")?;
        spawn_epoch_ticker(&engine);
        Ok(Self {
            engine,
            pre,
            volume,
            limits,
        })
    }

    pub fn limits(&self) -> &RuntimeLimits {
        &self.limits
    }

    /// A fresh store and component instance.
    pub async fn instantiate(&self) -> wasmtime::Result<WasmInstance> {
        let memory = Arc::new(AtomicU64::new(0));
        let state = HostState {
            wasi: WasiCtx::builder().inherit_stderr().build(),
            table: ResourceTable::new(),
            limiter: MemoryLimiter {
                cap: self.limits.memory_cap,
                bytes: memory.clone(),
                refused: false,
            },
            volume: self.volume.clone(),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.limiter);
        store.epoch_deadline_trap();
        // Instantiation runs Wasm too (initialisers): it gets a deadline.
        let deadline_ticks = ticks(self.limits.request_timeout);
        store.set_epoch_deadline(deadline_ticks);
        let bindings = self.pre.instantiate_async(&mut store).await?;
        Ok(WasmInstance {
            store,
            bindings,
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

/// One store with one instance of the storage component.
pub struct WasmInstance {
    store: Store<HostState>,
    bindings: Storage,
    memory: Arc<AtomicU64>,
    deadline_ticks: u64,
}

impl std::fmt::Debug for WasmInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmInstance")
            .field("memory_bytes", &self.memory.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// A request for the guest's `handler` interface.
#[derive(Debug)]
pub enum Call {
    Store {
        request: StoreRequest,
        body: Bytes,
    },
    Fetch(FetchRequest),
    Delete(String),
    List {
        prefix: String,
        after: Option<String>,
        limit: u32,
    },
}

/// The guest's answer to a [`Call`].
#[derive(Debug)]
pub enum Reply {
    Stored(FileMeta),
    Fetched(Fetched),
    Deleted,
    Listed(Listing),
}

/// Why an instance could not finish a call. The instance is unusable after
/// any of these and must be replaced.
#[derive(Debug, thiserror::Error)]
pub enum CallFailure {
    #[error("the request needs more than the instance memory cap of {cap} bytes")]
    MemoryCap { cap: u64 },
    #[error("the request ran longer than the request timeout")]
    Timeout,
    #[error("the instance trapped: {0}")]
    Trap(wasmtime::Error),
}

impl WasmInstance {
    /// The instance's linear memory in bytes, readable while it is busy.
    pub fn memory_gauge(&self) -> Arc<AtomicU64> {
        self.memory.clone()
    }

    pub async fn call(&mut self, call: Call) -> Result<Result<Reply, HandlerError>, CallFailure> {
        self.store.set_epoch_deadline(self.deadline_ticks);
        let guest = self.bindings.wasm_storage_storage_handler();
        let store = &mut self.store;
        let outcome = match call {
            Call::Store { request, body } => guest
                .call_put(&mut *store, &request, &body)
                .await
                .map(|r| r.map(Reply::Stored)),
            Call::Fetch(request) => guest
                .call_fetch(&mut *store, &request)
                .await
                .map(|r| r.map(Reply::Fetched)),
            Call::Delete(path) => guest
                .call_delete(&mut *store, &path)
                .await
                .map(|r| r.map(|()| Reply::Deleted)),
            Call::List {
                prefix,
                after,
                limit,
            } => guest
                .call_list(&mut *store, &prefix, after.as_deref(), limit)
                .await
                .map(|r| r.map(Reply::Listed)),
        };
        outcome.map_err(|error| {
            if self.store.data().limiter.refused {
                CallFailure::MemoryCap {
                    cap: self.limits_cap(),
                }
            } else if matches!(error.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
                CallFailure::Timeout
            } else {
                CallFailure::Trap(error)
            }
        })
    }

    fn limits_cap(&self) -> u64 {
        self.store.data().limiter.cap
    }
}

/// The data of every store.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: MemoryLimiter,
    volume: Arc<Volume>,
}

impl std::fmt::Debug for HostState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostState")
            .field("memory_bytes", &self.limiter.bytes.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Tracks the exact linear-memory size of one instance (the sum over its
/// memories: every growth passes through here, creation included) and
/// refuses growth past the cap, which makes the guest trap.
struct MemoryLimiter {
    cap: u64,
    bytes: Arc<AtomicU64>,
    /// Set when a growth was refused, so a trap can be told apart.
    refused: bool,
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self.bytes.load(Ordering::Relaxed) + desired as u64 - current as u64;
        if total > self.cap {
            self.refused = true;
            return Ok(false);
        }
        self.bytes.store(total, Ordering::Relaxed);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        _desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(true)
    }
}

impl wit::Host for HostState {}

impl bindings::wasm_storage::storage::volume::Host for HostState {
    async fn put(
        &mut self,
        path: String,
        body: Vec<u8>,
        sha256: String,
        content_type: String,
        overwrite: bool,
    ) -> Result<FileMeta, wit::VolumeError> {
        let path =
            FilePath::parse(&path).map_err(|e| wit::VolumeError::InvalidPath(e.to_string()))?;
        let digest = volume::Digest::parse(&sha256).map_err(to_wit_error)?;
        self.volume
            .put(&path, body, &digest, &content_type, overwrite)
            .await
            .map(to_wit_meta)
            .map_err(to_wit_error)
    }

    async fn stat(&mut self, path: String) -> Result<FileMeta, wit::VolumeError> {
        let path =
            FilePath::parse(&path).map_err(|e| wit::VolumeError::InvalidPath(e.to_string()))?;
        self.volume
            .stat(&path)
            .await
            .map(to_wit_meta)
            .map_err(to_wit_error)
    }

    async fn read(&mut self, path: String) -> Result<(FileMeta, Vec<u8>), wit::VolumeError> {
        let path =
            FilePath::parse(&path).map_err(|e| wit::VolumeError::InvalidPath(e.to_string()))?;
        let (meta, content) = self.volume.read(&path).await.map_err(to_wit_error)?;
        Ok((to_wit_meta(meta), content))
    }

    async fn delete(&mut self, path: String) -> Result<(), wit::VolumeError> {
        let path =
            FilePath::parse(&path).map_err(|e| wit::VolumeError::InvalidPath(e.to_string()))?;
        self.volume.delete(&path).await.map_err(to_wit_error)
    }

    async fn list(
        &mut self,
        prefix: String,
        after: Option<String>,
        limit: u32,
    ) -> Result<Listing, wit::VolumeError> {
        let prefix =
            Prefix::parse(&prefix).map_err(|e| wit::VolumeError::InvalidPath(e.to_string()))?;
        let listing = self
            .volume
            .list(&prefix, after.as_deref(), limit)
            .await
            .map_err(to_wit_error)?;
        Ok(Listing {
            entries: listing
                .entries
                .into_iter()
                .map(|entry| match entry {
                    volume::Entry::File(meta) => wit::Entry::File(to_wit_meta(meta)),
                    volume::Entry::Folder(prefix) => wit::Entry::Folder(prefix),
                })
                .collect(),
            next_after: listing.next_after,
        })
    }
}

fn to_wit_meta(meta: volume::FileMeta) -> FileMeta {
    FileMeta {
        path: meta.path,
        size: meta.size,
        sha256: meta.sha256,
        content_type: meta.content_type,
        created_ms: meta.created_ms,
        modified_ms: meta.modified_ms,
    }
}

fn to_wit_error(error: VolumeError) -> wit::VolumeError {
    match error {
        VolumeError::NotFound(_) => wit::VolumeError::NotFound,
        VolumeError::AlreadyExists(_) => wit::VolumeError::AlreadyExists,
        VolumeError::NoSpace => wit::VolumeError::NoSpace,
        VolumeError::InvalidPath(e) => wit::VolumeError::InvalidPath(e.to_string()),
        other => {
            // The detail stays in the log; the guest (and so the client)
            // sees only that the volume failed.
            tracing::error!(error = %other, "volume operation failed");
            wit::VolumeError::Internal(other.to_string())
        }
    }
}
