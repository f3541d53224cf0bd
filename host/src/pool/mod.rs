//! The pool of long-lived storage instances and the dispatcher in front of it.
//!
//! Each instance serves one request at a time. A request takes an idle
//! instance (waiting in a bounded queue when none is idle), runs its call in a
//! task of its own, so a client that hangs up cannot cancel storage work
//! half-way, and hands the instance back. An instance that trapped, or that
//! is draining, is replaced on the way back: the fresh instance joins the pool
//! before the old one is dropped, so serving capacity never dips.
//!
//! Invariants: the semaphore's permits equal the number of idle instances;
//! the memory budget's `used` is every live instance's linear memory plus
//! what leased requests reserved and have not grown into (`crate::budget`).
//!
//! Layout:
//! - `mod.rs`: the pool and the instances' lifecycle: create, check in,
//!   drain and replace, make room in the budget, close.
//! - [`dispatch`]: which idle instance a request gets.
//! - [`admission`]: what a request reserves, and the bounded wait queue.
//! - [`lease`]: an instance checked out, and the work run on it.
//! - [`instance`]: one instance's figures, shared with the pool, and the
//!   snapshot the admin API shows.
//! - [`footprints`]: what each request needed, recorded at check-in.
//! - [`recycling`]: whether an instance is kept or replaced, and why; pure.

pub mod admission;
pub mod dispatch;
pub mod footprints;
pub mod instance;
pub mod lease;
pub mod recycling;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, TryAcquireError};

pub use admission::BodySize;
use admission::QueueSlot;
pub use dispatch::Dispatch;
use estimator::Footprint;
pub use footprints::FootprintLog;
use instance::{Instance, InstanceInfo};
pub use instance::{InstanceState, InstanceStatus};
pub use lease::{Answer, Lease};
pub use recycling::ReplaceReason;
use recycling::{Decision, Limits, Occasion, Record};

use crate::budget::{MemoryBudget, Reservation};
use crate::runtime::{CallFailure, Runtime};

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
    /// The first instance's id. Above every id in the stored samples, so no
    /// two runs on the same data ever share an instance id.
    pub first_instance_id: u64,
    /// Footprints of the most recent requests kept for the estimator.
    pub footprint_window: usize,
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
    #[error(
        "the request needs {need} bytes of instance memory, more than the memory budget of {budget} bytes can ever give it"
    )]
    OverBudget { need: u64, budget: u64 },
    #[error(transparent)]
    Failed(#[from] CallFailure),
    #[error("the instance's task ended without an answer")]
    Lost,
}

/// How a leased instance comes back.
#[derive(Debug)]
enum Outcome {
    /// It served its request, which found it at `memory_before` bytes.
    Served { memory_before: u64 },
    /// It failed; it is replaced.
    Failed(CallFailure),
    /// It was not used.
    Unused,
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
    budget: Arc<MemoryBudget>,
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
    footprints: FootprintLog,
}

impl Pool {
    /// Create the pool and its `config.size` instances.
    pub async fn start(runtime: Runtime, config: PoolConfig) -> wasmtime::Result<Arc<Self>> {
        let first_id = config.first_instance_id.max(1);
        let pool = Arc::new(Self {
            budget: runtime.budget().clone(),
            runtime,
            state: Mutex::default(),
            idle_permits: Semaphore::new(0),
            waiting: AtomicUsize::new(0),
            next_id: AtomicU64::new(first_id),
            threshold: AtomicU64::new(0),
            recycling: AtomicUsize::new(0),
            baseline: AtomicU64::new(0),
            footprints: FootprintLog::new(config.footprint_window),
            config,
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

    pub fn budget(&self) -> &MemoryBudget {
        &self.budget
    }

    /// What recent requests needed, for the estimator.
    pub fn footprints(&self) -> &FootprintLog {
        &self.footprints
    }

    /// Take an idle instance for the caller's exclusive use, with `body`'s
    /// bytes of the memory budget reserved for it. Waits (holding nothing
    /// but a place in the queue) while the budget is short or no instance is
    /// idle; makes room by replacing idle grown instances when the budget is
    /// short. Give it back with [`Lease::spawn`], [`Lease::run`] or
    /// [`Lease::release`].
    pub async fn lease(self: &Arc<Self>, body: BodySize) -> Result<Lease, DispatchError> {
        let need = body.reservation();
        // Every other instance holds at least a fresh instance's memory.
        let others = (self.config.size as u64).saturating_sub(1) * self.baseline_bytes();
        if need.saturating_add(others) > self.budget.total() {
            return Err(DispatchError::OverBudget {
                need,
                budget: self.budget.total(),
            });
        }
        let deadline = tokio::time::Instant::now() + self.config.queue_timeout;
        let mut slot = None;
        let reservation = match self.budget.try_reserve(need) {
            Some(reservation) => reservation,
            None => {
                slot = Some(self.queue_slot()?);
                self.wait_for_budget(need, deadline).await?
            }
        };
        let permit = match self.idle_permits.try_acquire() {
            Ok(permit) => permit,
            Err(TryAcquireError::Closed) => return Err(DispatchError::ShuttingDown),
            Err(TryAcquireError::NoPermits) => {
                if slot.is_none() {
                    slot = Some(self.queue_slot()?);
                }
                match tokio::time::timeout_at(deadline, self.idle_permits.acquire()).await {
                    Err(_) => return Err(DispatchError::QueueTimeout(self.config.queue_timeout)),
                    Ok(Err(_)) => return Err(DispatchError::ShuttingDown),
                    Ok(Ok(permit)) => permit,
                }
            }
        };
        drop(slot);
        permit.forget();
        let mut instance = {
            let mut state = self.lock();
            let memory: Vec<u64> = state.idle.iter().map(|i| i.info.memory_bytes()).collect();
            let need = self.baseline_bytes() + body.body_bytes();
            let at = self.config.dispatch.choose(&memory, need);
            at.and_then(|at| state.idle.remove(at))
                .expect("every idle permit stands for an idle instance")
        };
        instance.info.busy.store(true, Ordering::Relaxed);
        instance.handler.grant(reservation);
        Ok(Lease {
            pool: self.clone(),
            memory_before: instance.info.memory_bytes(),
            instance: Some(instance),
        })
    }

    fn queue_slot(&self) -> Result<QueueSlot<'_>, DispatchError> {
        QueueSlot::take(&self.waiting, self.config.queue_capacity).ok_or(DispatchError::QueueFull)
    }

    /// Wait until `need` bytes of the budget can be reserved, replacing idle
    /// grown instances to make room.
    async fn wait_for_budget(
        &self,
        need: u64,
        deadline: tokio::time::Instant,
    ) -> Result<Reservation, DispatchError> {
        loop {
            let freed = self.budget.freed();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if let Some(reservation) = self.budget.try_reserve(need) {
                return Ok(reservation);
            }
            if self.lock().closed {
                return Err(DispatchError::ShuttingDown);
            }
            if self.make_room(need).await > 0 {
                continue;
            }
            if tokio::time::timeout_at(deadline, freed).await.is_err() {
                return Err(DispatchError::QueueTimeout(self.config.queue_timeout));
            }
        }
    }

    /// Replace idle instances grown past a fresh one's memory, largest
    /// first, until `need` bytes are free or none is left. Returns how many
    /// were replaced.
    async fn make_room(&self, need: u64) -> usize {
        let mut grown: Vec<(u64, u64, ReplaceReason)> = self
            .lock()
            .idle
            .iter()
            .filter_map(|instance| {
                let record = instance.info.record();
                match self.decide(&record, Occasion::BudgetShort) {
                    Decision::Replace(reason) => {
                        Some((record.memory_bytes, instance.info.id, reason))
                    }
                    _ => None,
                }
            })
            .collect();
        grown.sort_unstable_by(|a, b| b.cmp(a));
        let mut replaced = 0;
        for (_, id, reason) in grown {
            if self.budget.available() >= need {
                break;
            }
            if self.drain(id, reason).await {
                replaced += 1;
            }
        }
        replaced
    }

    /// Hand a finished instance back, replacing it if it failed, drains, or
    /// grew above the threshold (memory only grows during requests, so this
    /// check catches every crossing the moment it happens). A served request
    /// leaves its footprint for the estimator.
    async fn check_in(&self, mut instance: Instance, outcome: Outcome) {
        instance.handler.return_unspent();
        let info = instance.info.clone();
        info.busy.store(false, Ordering::Relaxed);
        let mut grew = false;
        match &outcome {
            Outcome::Served { memory_before } => {
                info.requests.fetch_add(1, Ordering::Relaxed);
                let memory_after = info.memory_bytes();
                grew = memory_after > *memory_before;
                self.footprints
                    .record(Footprint::observed(*memory_before, memory_after));
            }
            Outcome::Failed(_) => {
                info.requests.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Unused => {}
        }
        if self.lock().closed {
            self.retire(instance);
            return;
        }
        let failed = matches!(outcome, Outcome::Failed(_));
        match self.decide(&info.record(), Occasion::CheckIn { grew, failed }) {
            Decision::Replace(reason) => {
                if let Outcome::Failed(failure) = &outcome {
                    tracing::warn!(instance = info.id, %failure, "instance failed; replacing it");
                }
                self.replace(instance, reason).await;
            }
            Decision::Recycle(reason) => {
                info.start_draining(reason);
                self.replace(instance, reason).await;
                self.recycling.fetch_sub(1, Ordering::AcqRel);
            }
            decision @ (Decision::Keep | Decision::HeldBack(_)) => {
                info.held_back
                    .store(decision.holds_back_threshold(), Ordering::Relaxed);
                self.make_idle(instance);
            }
        }
    }

    /// [`recycling::decide`] with the pool's figures now. A `Recycle`
    /// decision has taken its place under the recycling cap (give it back
    /// when the replacement is made): deciding and taking the place are one
    /// atomic step, so concurrent check-ins never exceed the cap.
    fn decide(&self, record: &Record, occasion: Occasion) -> Decision {
        let mut decision = Decision::Keep;
        // Only a `Recycle` updates the count; any other decision leaves it.
        let _ = self
            .recycling
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |recycling| {
                decision = recycling::decide(record, occasion, &self.limits(recycling));
                matches!(decision, Decision::Recycle(_)).then_some(recycling + 1)
            });
        decision
    }

    fn limits(&self, recycling: usize) -> Limits {
        Limits {
            threshold: self.threshold(),
            baseline_bytes: self.baseline_bytes(),
            min_requests: self.config.min_requests_before_recycle,
            max_recycling: self.config.max_recycling,
            recycling,
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

    /// Replace every idle instance above the threshold, within the
    /// recycling cap (busy ones are checked when their request ends); the
    /// reason is [`recycling::decide`]'s. Returns how many were replaced.
    pub async fn enforce(&self) -> usize {
        let idle: Vec<(u64, Record)> = self
            .lock()
            .idle
            .iter()
            .map(|instance| (instance.info.id, instance.info.record()))
            .collect();
        let mut replaced = 0;
        for (id, record) in idle {
            match self.decide(&record, Occasion::Sweep) {
                Decision::Recycle(reason) => {
                    if self.drain(id, reason).await {
                        replaced += 1;
                    }
                    self.recycling.fetch_sub(1, Ordering::AcqRel);
                }
                // Every place is taken: a later sweep replaces the rest.
                Decision::HeldBack(_) => break,
                // A sweep never gives `Replace`: an instance already
                // draining is left to the replacement under way.
                Decision::Keep | Decision::Replace(_) => {}
            }
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
            self.discard_replaced(old, reason);
        }
        true
    }

    /// Make a fresh instance join the pool before `old` is dropped.
    async fn replace(&self, old: Instance, reason: ReplaceReason) {
        match self.create().await {
            Ok(fresh) => {
                self.make_idle(fresh);
                self.discard_replaced(old, reason);
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

    /// Count and log the replacement of `old`, then retire it.
    fn discard_replaced(&self, old: Instance, reason: ReplaceReason) {
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
        let handler = self.runtime.instantiate().await?;
        let info = Arc::new(InstanceInfo::new(
            self.next_id.fetch_add(1, Ordering::Relaxed),
            handler.memory_gauge(),
        ));
        self.baseline.store(info.memory_bytes(), Ordering::Relaxed);
        self.lock().live.insert(info.id, info.clone());
        Ok(Instance { info, handler })
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
            .map(|info| info.status(now))
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
