//! The pool of long-lived storage instances and the dispatcher in front of it.
//!
//! Each instance serves one request at a time. A request takes an idle
//! instance (waiting in a bounded queue when none is idle), runs its call in a
//! task of its own, so a client that hangs up cannot cancel storage work
//! half-way, and hands the instance back. An instance that trapped, or that
//! is draining, is replaced on the way back: the fresh instance joins the pool
//! before the old one is dropped, so serving capacity never dips.
//!
//! Invariant: the semaphore's permits equal the number of idle instances.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::{Semaphore, TryAcquireError, oneshot};

use crate::runtime::bindings::exports::wasm_storage::storage::handler::HandlerError;
use crate::runtime::{Call, CallFailure, Reply, Runtime, WasmInstance};

/// Which idle instance a request gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Dispatch {
    /// The most recently used: traffic stays on few instances, so few grow.
    Mru,
    /// The least recently used: traffic spreads evenly over the pool.
    Lru,
    /// By the request's size: the smallest idle instance whose memory
    /// already holds it, else the largest (which grows least). Large
    /// requests keep to few instances; small ones stay on small instances.
    MemoryAware,
}

/// How the dispatcher queues requests and when instances may be recycled.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// Instances kept serving.
    pub size: usize,
    /// Requests that may wait for an idle instance.
    pub queue_capacity: usize,
    /// Longest a request waits for an idle instance.
    pub queue_timeout: Duration,
    /// Requests an instance must have served before the memory threshold
    /// may replace it.
    pub min_requests_before_recycle: u64,
    /// Most instances being replaced for the threshold at once.
    pub max_recycling: usize,
    pub dispatch: Dispatch,
}

/// Why a request got no answer from an instance.
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error("all instances are busy and the wait queue is full")]
    QueueFull,
    #[error("no instance became free within {0:?}")]
    QueueTimeout(Duration),
    #[error("the server is shutting down")]
    ShuttingDown,
    #[error(transparent)]
    Failed(#[from] CallFailure),
    #[error("the instance's task ended without an answer")]
    Lost,
}

/// Why an instance was replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplaceReason {
    /// It trapped (including growth past the memory cap, or a timeout).
    Trap,
    /// An operator asked for it through the admin API.
    Requested,
    /// Its linear memory went above the restart threshold.
    Threshold,
}

/// What an instance is doing, as shown by the admin API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceState {
    Idle,
    Busy,
    /// Gets no new requests; replaced as soon as it is idle.
    Draining,
}

/// The figures of one instance, shared between the pool and the instance.
#[derive(Debug)]
struct InstanceInfo {
    id: u64,
    created: Instant,
    /// Linear-memory bytes, kept exact by the instance's limiter.
    memory: Arc<AtomicU64>,
    requests: AtomicU64,
    busy: AtomicBool,
    /// Set when the instance must take no new request; says why.
    drain: Mutex<Option<ReplaceReason>>,
}

impl InstanceInfo {
    fn drain_reason(&self) -> Option<ReplaceReason> {
        *self
            .drain
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Mark draining for `reason`; false if it was draining already.
    fn start_draining(&self, reason: ReplaceReason) -> bool {
        let mut drain = self
            .drain
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if drain.is_some() {
            return false;
        }
        *drain = Some(reason);
        true
    }

    fn stop_draining(&self) {
        *self
            .drain
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = None;
    }

    fn memory_bytes(&self) -> u64 {
        self.memory.load(Ordering::Relaxed)
    }
}

/// A snapshot of one instance.
#[derive(Debug, Clone, Serialize)]
pub struct InstanceStatus {
    pub id: u64,
    pub state: InstanceState,
    pub memory_bytes: u64,
    pub requests: u64,
    pub age_ms: u64,
}

#[derive(Debug)]
struct Instance {
    info: Arc<InstanceInfo>,
    wasm: WasmInstance,
}

#[derive(Debug, Default)]
struct State {
    /// Idle instances, least recently used at the front.
    idle: VecDeque<Instance>,
    /// Every instance alive, idle or busy.
    live: BTreeMap<u64, Arc<InstanceInfo>>,
    replacements: BTreeMap<ReplaceReason, u64>,
    closed: bool,
}

/// The instance pool. Share it as `Arc<Pool>`.
#[derive(Debug)]
pub struct Pool {
    runtime: Runtime,
    config: PoolConfig,
    state: Mutex<State>,
    idle_permits: Semaphore,
    waiting: AtomicUsize,
    next_id: AtomicU64,
    /// Replace instances above this many bytes of linear memory (0: never).
    threshold: AtomicU64,
    /// Replacements for the threshold under way.
    recycling: AtomicUsize,
    /// Linear memory of the most recently created instance: what a fresh
    /// instance holds.
    baseline: AtomicU64,
}

impl Pool {
    /// Create the pool and its `config.size` instances.
    pub async fn start(runtime: Runtime, config: PoolConfig) -> wasmtime::Result<Arc<Self>> {
        let pool = Arc::new(Self {
            runtime,
            config,
            state: Mutex::default(),
            idle_permits: Semaphore::new(0),
            waiting: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            threshold: AtomicU64::new(0),
            recycling: AtomicUsize::new(0),
            baseline: AtomicU64::new(0),
        });
        for _ in 0..pool.config.size {
            let instance = pool.create().await?;
            pool.make_idle(instance);
        }
        Ok(pool)
    }

    pub fn config(&self) -> &PoolConfig {
        &self.config
    }

    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Run `call` on an idle instance. `size_hint` is how many body bytes
    /// the call will buffer, when known (it steers memory-aware dispatch).
    pub async fn dispatch(
        self: &Arc<Self>,
        call: Call,
        size_hint: Option<u64>,
    ) -> Result<Result<Reply, HandlerError>, DispatchError> {
        let mut lease = self.lease(size_hint).await?;
        let (answer, answered) = oneshot::channel();
        // A task of its own: a client that hangs up must not cancel storage
        // work half-way (nor leave an instance mid-call).
        tokio::spawn(async move {
            let outcome = lease.call(call).await;
            let failure = outcome.as_ref().err().map(ToString::to_string);
            // The client gets its answer before any replacement is made.
            let _ = answer.send(outcome);
            lease.release(failure).await;
        });
        answered
            .await
            .map_err(|_| DispatchError::Lost)?
            .map_err(DispatchError::from)
    }

    /// Take an idle instance for the caller's exclusive use, waiting in the
    /// queue if none is idle. Give it back with [`Lease::release`].
    pub async fn lease(self: &Arc<Self>, size_hint: Option<u64>) -> Result<Lease, DispatchError> {
        let permit = match self.idle_permits.try_acquire() {
            Ok(permit) => permit,
            Err(TryAcquireError::Closed) => return Err(DispatchError::ShuttingDown),
            Err(TryAcquireError::NoPermits) => {
                let _slot = QueueSlot::take(&self.waiting, self.config.queue_capacity)
                    .ok_or(DispatchError::QueueFull)?;
                match tokio::time::timeout(self.config.queue_timeout, self.idle_permits.acquire())
                    .await
                {
                    Err(_) => return Err(DispatchError::QueueTimeout(self.config.queue_timeout)),
                    Ok(Err(_)) => return Err(DispatchError::ShuttingDown),
                    Ok(Ok(permit)) => permit,
                }
            }
        };
        permit.forget();
        let instance = {
            let mut state = self.lock();
            let taken = match self.config.dispatch {
                Dispatch::Mru => state.idle.pop_back(),
                Dispatch::Lru => state.idle.pop_front(),
                Dispatch::MemoryAware => {
                    let need = self.baseline_bytes() + size_hint.unwrap_or(0);
                    best_fit(&state.idle, need).and_then(|at| state.idle.remove(at))
                }
            };
            taken.expect("every idle permit stands for an idle instance")
        };
        instance.info.busy.store(true, Ordering::Relaxed);
        Ok(Lease {
            pool: self.clone(),
            instance: Some(instance),
        })
    }

    /// Hand a finished instance back, replacing it if it failed, drains, or
    /// grew above the threshold (memory only grows during requests, so this
    /// check catches every crossing the moment it happens).
    async fn check_in(&self, instance: Instance, failure: Option<String>) {
        let info = instance.info.clone();
        info.requests.fetch_add(1, Ordering::Relaxed);
        info.busy.store(false, Ordering::Relaxed);
        if self.lock().closed {
            self.retire(instance);
            return;
        }
        if let Some(failure) = failure {
            tracing::warn!(instance = info.id, %failure, "instance failed; replacing it");
            self.replace(instance, ReplaceReason::Trap).await;
        } else if let Some(reason) = info.drain_reason() {
            self.replace(instance, reason).await;
        } else if self.over_threshold(&info) && self.reserve_recycling() {
            info.start_draining(ReplaceReason::Threshold);
            self.replace(instance, ReplaceReason::Threshold).await;
            self.recycling.fetch_sub(1, Ordering::AcqRel);
        } else {
            self.make_idle(instance);
        }
    }

    /// Set the restart threshold in bytes; `None` turns recycling off.
    pub fn set_threshold(&self, threshold: Option<u64>) {
        self.threshold
            .store(threshold.unwrap_or(0), Ordering::Relaxed);
    }

    pub fn threshold(&self) -> Option<u64> {
        Some(self.threshold.load(Ordering::Relaxed)).filter(|&t| t > 0)
    }

    /// Linear memory of a fresh instance, in bytes.
    pub fn baseline_bytes(&self) -> u64 {
        self.baseline.load(Ordering::Relaxed)
    }

    fn over_threshold(&self, info: &InstanceInfo) -> bool {
        self.threshold()
            .is_some_and(|threshold| info.memory_bytes() > threshold)
            && info.requests.load(Ordering::Relaxed) >= self.config.min_requests_before_recycle
    }

    /// Take one of the `max_recycling` places; false when all are taken.
    fn reserve_recycling(&self) -> bool {
        let cap = self.config.max_recycling.max(1);
        self.recycling
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < cap).then_some(n + 1)
            })
            .is_ok()
    }

    /// Replace every idle instance above the threshold (busy ones are
    /// checked when their request ends). Returns how many were replaced.
    pub async fn enforce(&self) -> usize {
        let candidates: Vec<u64> = self
            .lock()
            .idle
            .iter()
            .filter(|instance| {
                instance.info.drain_reason().is_none() && self.over_threshold(&instance.info)
            })
            .map(|instance| instance.info.id)
            .collect();
        let mut replaced = 0;
        for id in candidates {
            if !self.reserve_recycling() {
                break;
            }
            if self.drain(id, ReplaceReason::Threshold).await {
                replaced += 1;
            }
            self.recycling.fetch_sub(1, Ordering::AcqRel);
        }
        replaced
    }

    /// Mark instance `id` draining: it takes no new request and is replaced
    /// at once if idle, else when its request ends. Returns false if there is
    /// no such instance.
    pub async fn drain(&self, id: u64, reason: ReplaceReason) -> bool {
        let Some(info) = self.lock().live.get(&id).cloned() else {
            return false;
        };
        if !info.start_draining(reason) || info.busy.load(Ordering::Relaxed) {
            return true;
        }
        let fresh = match self.create().await {
            Ok(fresh) => fresh,
            Err(error) => {
                tracing::error!(instance = id, %error, "could not create a replacement; the instance keeps serving");
                info.stop_draining();
                return true;
            }
        };
        // Swap in place, so the idle count (and the permits) never change.
        let old = {
            let mut state = self.lock();
            match state.idle.iter().position(|i| i.info.id == id) {
                Some(at) => Some(std::mem::replace(&mut state.idle[at], fresh)),
                None => {
                    // Checked out meanwhile: its check-in replaces it.
                    drop(state);
                    self.retire(fresh);
                    None
                }
            }
        };
        if let Some(old) = old {
            self.retired(old, reason);
        }
        true
    }

    /// Make a fresh instance join the pool before `old` is dropped.
    async fn replace(&self, old: Instance, reason: ReplaceReason) {
        match self.create().await {
            Ok(fresh) => {
                self.make_idle(fresh);
                self.retired(old, reason);
            }
            Err(error) if reason == ReplaceReason::Trap => {
                tracing::error!(instance = old.info.id, %error, "could not create a replacement for a failed instance");
                self.retire(old);
            }
            Err(error) => {
                tracing::error!(instance = old.info.id, %error, "could not create a replacement; the instance keeps serving");
                old.info.stop_draining();
                self.make_idle(old);
            }
        }
    }

    fn retired(&self, old: Instance, reason: ReplaceReason) {
        tracing::info!(
            instance = old.info.id,
            memory_bytes = old.info.memory_bytes(),
            threshold_bytes = self.threshold(),
            requests = old.info.requests.load(Ordering::Relaxed),
            ?reason,
            "replaced an instance"
        );
        *self.lock().replacements.entry(reason).or_default() += 1;
        self.retire(old);
    }

    async fn create(&self) -> wasmtime::Result<Instance> {
        let wasm = self.runtime.instantiate().await?;
        let info = Arc::new(InstanceInfo {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            created: Instant::now(),
            memory: wasm.memory_gauge(),
            requests: AtomicU64::new(0),
            busy: AtomicBool::new(false),
            drain: Mutex::new(None),
        });
        self.baseline.store(info.memory_bytes(), Ordering::Relaxed);
        self.lock().live.insert(info.id, info.clone());
        Ok(Instance { info, wasm })
    }

    fn make_idle(&self, instance: Instance) {
        let mut state = self.lock();
        if state.closed {
            drop(state);
            self.retire(instance);
            return;
        }
        state.idle.push_back(instance);
        drop(state);
        self.idle_permits.add_permits(1);
    }

    /// Drop an instance (its store, its memory) and forget it.
    fn retire(&self, instance: Instance) {
        self.lock().live.remove(&instance.info.id);
        drop(instance);
    }

    /// Stop handing out instances (waiters get `ShuttingDown`) and drop the
    /// idle ones; busy ones are dropped when their request ends.
    pub fn close(&self) {
        let idle = {
            let mut state = self.lock();
            state.closed = true;
            std::mem::take(&mut state.idle)
        };
        self.idle_permits.close();
        for instance in idle {
            self.retire(instance);
        }
    }

    /// Every live instance, in id order.
    pub fn instances(&self) -> Vec<InstanceStatus> {
        let now = Instant::now();
        self.lock()
            .live
            .values()
            .map(|info| InstanceStatus {
                id: info.id,
                state: if info.drain_reason().is_some() {
                    InstanceState::Draining
                } else if info.busy.load(Ordering::Relaxed) {
                    InstanceState::Busy
                } else {
                    InstanceState::Idle
                },
                memory_bytes: info.memory_bytes(),
                requests: info.requests.load(Ordering::Relaxed),
                age_ms: u64::try_from(now.duration_since(info.created).as_millis())
                    .unwrap_or(u64::MAX),
            })
            .collect()
    }

    /// Replacements so far, by reason.
    pub fn replacements(&self) -> BTreeMap<ReplaceReason, u64> {
        self.lock().replacements.clone()
    }

    /// Requests waiting for an idle instance right now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock leaves plain data behind; carry on.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The idle instance for a request needing `need` bytes of linear memory:
/// the smallest that already holds it, else the largest.
fn best_fit(idle: &VecDeque<Instance>, need: u64) -> Option<usize> {
    let memory = |at: usize| idle[at].info.memory_bytes();
    let fitting = (0..idle.len())
        .filter(|&at| memory(at) >= need)
        .min_by_key(|&at| memory(at));
    fitting.or_else(|| (0..idle.len()).max_by_key(|&at| memory(at)))
}

/// An instance checked out of the pool. If it is dropped without being
/// released (its task panicked), the instance is discarded and a fresh one
/// takes its place.
#[derive(Debug)]
pub struct Lease {
    pool: Arc<Pool>,
    instance: Option<Instance>,
}

impl Lease {
    /// The leased instance's id.
    pub fn instance_id(&self) -> u64 {
        self.instance
            .as_ref()
            .map_or(0, |instance| instance.info.id)
    }

    /// Run `call` on the leased instance.
    pub async fn call(&mut self, call: Call) -> Result<Result<Reply, HandlerError>, CallFailure> {
        match self.instance.as_mut() {
            Some(instance) => instance.wasm.call(call).await,
            None => Err(CallFailure::Trap(wasmtime::format_err!(
                "the lease was already released"
            ))),
        }
    }

    /// Give the instance back; `failure` says why its last call failed, and
    /// makes the pool replace it.
    pub async fn release(mut self, failure: Option<String>) {
        if let Some(instance) = self.instance.take() {
            self.pool.check_in(instance, failure).await;
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(instance) = self.instance.take() {
            let pool = self.pool.clone();
            tracing::error!(
                instance = instance.info.id,
                "an instance was lost mid-request; replacing it"
            );
            pool.retire(instance);
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move {
                    match pool.create().await {
                        Ok(fresh) => pool.make_idle(fresh),
                        Err(error) => tracing::error!(%error, "could not replace a lost instance"),
                    }
                });
            }
        }
    }
}

/// A place in the wait queue, given back on drop.
struct QueueSlot<'a>(&'a AtomicUsize);

impl<'a> QueueSlot<'a> {
    fn take(waiting: &'a AtomicUsize, capacity: usize) -> Option<Self> {
        let before = waiting.fetch_add(1, Ordering::AcqRel);
        let slot = Self(waiting);
        (before < capacity).then_some(slot)
    }
}

impl Drop for QueueSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
