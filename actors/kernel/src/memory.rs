//! The in-memory host: `MemoryStorage` (tables, blobs and leases behind one
//! mutex), `SimExecutor` (a deterministic single-threaded executor that can be
//! killed like a closed tab) and `MemoryHost`, which bundles them with a
//! `ManualClock`, `SeededEntropy` and a `Lifecycle` for tests, the crash
//! simulator and the browser's non-durable fallback.
//!
//! Everything here is deterministic: the same seed gives the same ids, the
//! same poll order and therefore the same run.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use crate::host::lease_cas::{self, LeaseCas};
use crate::host::storage::{Batch, BlobRef, LeaseRecord, Op, Storage, StorageError, Table};
use crate::host::{Clock, Executor, Host, Lifecycle, ManualClock, SeededEntropy};
use crate::ids::SessionId;
use crate::maybe_send::{BoxFuture, MaybeSend, MaybeSync};

// ---------------------------------------------------------------------------
// Storage
// ---------------------------------------------------------------------------

#[derive(Default, Clone)]
struct StorageState {
    tables: BTreeMap<Table, BTreeMap<String, Vec<u8>>>,
    blobs: BTreeMap<String, Vec<u8>>,
    leases: BTreeMap<SessionId, LeaseRecord>,
}

impl StorageState {
    fn table(&self, table: Table) -> Option<&BTreeMap<String, Vec<u8>>> {
        self.tables.get(&table)
    }

    fn value(&self, table: Table, key: &str) -> Option<&Vec<u8>> {
        self.table(table).and_then(|t| t.get(key))
    }

    fn check(&self, batch: &Batch) -> Result<(), StorageError> {
        batch.check_blobs()?;
        if let Some(fence) = &batch.fence {
            fence.check(self.leases.get(&fence.session).map(|l| l.epoch))?;
        }
        for condition in &batch.conditions {
            let (table, key) = condition.target();
            condition.check(self.value(table, key).map(Vec::as_slice))?;
        }
        Ok(())
    }

    fn apply(&mut self, ops: Vec<Op>) {
        for op in ops {
            match op {
                Op::Put { table, key, value } => {
                    self.tables.entry(table).or_default().insert(key, value);
                }
                Op::Delete { table, key } => {
                    if let Some(t) = self.tables.get_mut(&table) {
                        t.remove(&key);
                    }
                }
                Op::PutBlob { hash, bytes } => {
                    self.blobs.entry(hash).or_insert(bytes);
                }
            }
        }
    }
}

/// Called before every commit with the batch; an `Err` refuses the batch
/// (nothing is applied). Lets the crash simulator stop at a journal boundary
/// or inject a storage failure.
#[cfg(not(target_arch = "wasm32"))]
pub type CommitHook = Arc<dyn Fn(&Batch) -> Result<(), StorageError> + Send + Sync>;
/// Called before every commit with the batch; an `Err` refuses the batch
/// (nothing is applied). Lets the crash simulator stop at a journal boundary
/// or inject a storage failure.
#[cfg(target_arch = "wasm32")]
pub type CommitHook = Arc<dyn Fn(&Batch) -> Result<(), StorageError>>;

/// Storage in memory: one ordered map per table, blobs by SHA-256, leases by
/// session, all behind one mutex so that every batch is atomic. Not durable.
#[derive(Default)]
pub struct MemoryStorage {
    state: Mutex<StorageState>,
    hook: Mutex<Option<CommitHook>>,
    commits: AtomicU64,
}

impl fmt::Debug for MemoryStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStorage")
            .field("commits", &self.commit_count())
            .finish_non_exhaustive()
    }
}

fn poisoned() -> StorageError {
    StorageError::Backend(
        "memory storage lock poisoned by a panic in another task; start a fresh store".into(),
    )
}

impl MemoryStorage {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> Result<MutexGuard<'_, StorageState>, StorageError> {
        self.state.lock().map_err(|_| poisoned())
    }

    /// A deep copy of everything stored (tables, blobs, leases), without the
    /// hook: what a second tab would see, or a snapshot to compare against.
    pub fn fork(&self) -> Result<MemoryStorage, StorageError> {
        let state = self.state()?.clone();
        Ok(MemoryStorage {
            state: Mutex::new(state),
            ..MemoryStorage::default()
        })
    }

    /// Put raw bytes under a key, bypassing fences and conditions. For tests
    /// that plant a corrupted record (`Batch::put` works too).
    pub fn corrupt_for_tests(
        &self,
        table: Table,
        key: &str,
        bytes: &[u8],
    ) -> Result<(), StorageError> {
        self.state()?
            .tables
            .entry(table)
            .or_default()
            .insert(key.to_owned(), bytes.to_vec());
        Ok(())
    }

    /// Number of committed batches so far (refused batches do not count).
    pub fn commit_count(&self) -> u64 {
        self.commits.load(Ordering::SeqCst)
    }

    /// Install (or with `None` remove) a hook run before every commit.
    pub fn set_commit_hook(&self, hook: Option<CommitHook>) {
        if let Ok(mut h) = self.hook.lock() {
            *h = hook;
        }
    }

    /// Number of keys in a table.
    pub fn len(&self, table: Table) -> usize {
        self.state
            .lock()
            .map(|s| s.table(table).map_or(0, BTreeMap::len))
            .unwrap_or(0)
    }

    /// True when no table holds any key and no blob is stored.
    pub fn is_empty(&self) -> bool {
        self.state
            .lock()
            .map(|s| s.tables.values().all(BTreeMap::is_empty) && s.blobs.is_empty())
            .unwrap_or(true)
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl Storage for MemoryStorage {
    async fn get(&self, table: Table, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self.state()?.value(table, key).cloned())
    }

    async fn scan_prefix(
        &self,
        table: Table,
        prefix: &str,
    ) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
        let state = self.state()?;
        let Some(t) = state.table(table) else {
            return Ok(Vec::new());
        };
        // String order is byte order for UTF-8, so a range scan is ordered by bytes.
        Ok(t.range::<str, _>((
            std::ops::Bound::Included(prefix),
            std::ops::Bound::Unbounded,
        ))
        .take_while(|(k, _)| k.starts_with(prefix))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect())
    }

    async fn commit(&self, batch: Batch) -> Result<(), StorageError> {
        let hook = self.hook.lock().ok().and_then(|h| h.clone());
        if let Some(hook) = hook {
            hook(&batch)?;
        }
        let mut state = self.state()?;
        state.check(&batch)?;
        state.apply(batch.into_ops());
        self.commits.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    async fn put_blob(&self, hash: &str, bytes: Vec<u8>) -> Result<BlobRef, StorageError> {
        let blob = BlobRef::claimed(hash, &bytes)?;
        self.state()?
            .blobs
            .entry(blob.hash.clone())
            .or_insert(bytes);
        Ok(blob)
    }

    async fn get_blob(&self, hash: &str) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self.state()?.blobs.get(hash).cloned())
    }

    async fn delete_blob(&self, hash: &str) -> Result<bool, StorageError> {
        Ok(self.state()?.blobs.remove(hash).is_some())
    }

    async fn list_blobs(&self) -> Result<Vec<String>, StorageError> {
        Ok(self.state()?.blobs.keys().cloned().collect())
    }

    async fn current_lease(
        &self,
        session: &SessionId,
    ) -> Result<Option<LeaseRecord>, StorageError> {
        Ok(self.state()?.leases.get(session).cloned())
    }

    /// Under the state's one lock: compare, then store.
    async fn lease_cas(
        &self,
        expected: Option<&LeaseRecord>,
        new: &LeaseRecord,
    ) -> Result<LeaseCas, StorageError> {
        let mut state = self.state()?;
        let stored = state.leases.get(&new.session);
        if !lease_cas::is_expected(expected, stored) {
            return Ok(LeaseCas::Refused {
                current: stored.cloned(),
            });
        }
        state.leases.insert(new.session.clone(), new.clone());
        Ok(LeaseCas::Swapped)
    }
}

// ---------------------------------------------------------------------------
// Executor
// ---------------------------------------------------------------------------

type TaskId = u64;

#[derive(Default)]
struct ReadyQueue {
    order: VecDeque<TaskId>,
    queued: HashSet<TaskId>,
}

impl ReadyQueue {
    fn push(&mut self, id: TaskId) {
        if self.queued.insert(id) {
            self.order.push_back(id);
        }
    }
}

/// Wakes one task by putting its id back on the ready queue.
struct TaskWaker {
    id: TaskId,
    ready: Arc<Mutex<ReadyQueue>>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if let Ok(mut q) = self.ready.lock() {
            q.push(self.id);
        }
    }
}

/// Wakes the future given to `block_on`.
#[derive(Default)]
struct FlagWaker(AtomicBool);

impl Wake for FlagWaker {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

struct ExecState {
    tasks: BTreeMap<TaskId, BoxFuture<'static, ()>>,
    next_id: TaskId,
    /// Bumped by `kill`, so that a task being polled while its tab dies is
    /// dropped instead of put back.
    generation: u64,
}

struct ExecShared {
    state: Mutex<ExecState>,
    ready: Arc<Mutex<ReadyQueue>>,
    order: Option<SeededEntropy>,
    polls: AtomicU64,
    running: AtomicBool,
}

/// A deterministic single-threaded executor for tests and the crash
/// simulator.
///
/// - `spawn` queues a task; nothing runs until the owner drives the executor
///   with [`SimExecutor::run_until_stalled`], [`SimExecutor::step`] or
///   [`SimExecutor::block_on`].
/// - Ready tasks are polled in FIFO order, or, when built with
///   [`SimExecutor::seeded`], in an order drawn from a SplitMix64 stream: the
///   same seed gives the same poll order.
/// - [`SimExecutor::kill`] drops every task without polling it again (a
///   killed tab runs no cleanup); tasks spawned while they are dropped are
///   dropped too. The executor can be used again afterwards.
/// - `spawn_blocking` runs the job inline, at once.
///
/// Clones share the same queue. Driving is not reentrant: a task that calls
/// `run_until_stalled` on its own executor gets 0 back and nothing happens.
#[derive(Clone)]
pub struct SimExecutor {
    shared: Arc<ExecShared>,
}

impl fmt::Debug for SimExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimExecutor")
            .field("pending_tasks", &self.pending_tasks())
            .field("seeded", &self.shared.order.is_some())
            .finish()
    }
}

impl Default for SimExecutor {
    fn default() -> Self {
        Self::new()
    }
}

impl SimExecutor {
    fn build(order: Option<SeededEntropy>) -> Self {
        Self {
            shared: Arc::new(ExecShared {
                state: Mutex::new(ExecState {
                    tasks: BTreeMap::new(),
                    next_id: 0,
                    generation: 0,
                }),
                ready: Arc::new(Mutex::new(ReadyQueue::default())),
                order,
                polls: AtomicU64::new(0),
                running: AtomicBool::new(false),
            }),
        }
    }

    /// Poll ready tasks in the order they became ready.
    pub fn new() -> Self {
        Self::build(None)
    }

    /// Poll ready tasks in an order picked by a SplitMix64 stream from `seed`.
    pub fn seeded(seed: u64) -> Self {
        Self::build(Some(SeededEntropy::new(seed)))
    }

    /// Tasks spawned and not yet finished (ready or parked).
    pub fn pending_tasks(&self) -> usize {
        self.shared.state.lock().map(|s| s.tasks.len()).unwrap_or(0)
    }

    /// Tasks that are ready to be polled.
    pub fn ready_tasks(&self) -> usize {
        self.shared.ready.lock().map(|q| q.order.len()).unwrap_or(0)
    }

    /// Polls made since the executor was created.
    pub fn polls(&self) -> u64 {
        self.shared.polls.load(Ordering::SeqCst)
    }

    fn next_ready(&self) -> Option<TaskId> {
        let mut q = self.shared.ready.lock().ok()?;
        let len = q.order.len();
        if len == 0 {
            return None;
        }
        let index = match &self.shared.order {
            // `len` fits in u64 and the remainder is below `len`: both casts are lossless.
            Some(rng) => (rng.next_u64() % len as u64) as usize,
            None => 0,
        };
        let id = q.order.remove(index)?;
        q.queued.remove(&id);
        Some(id)
    }

    /// Poll one task that is ready. False when none was ready.
    pub fn step(&self) -> bool {
        if self.shared.running.swap(true, Ordering::SeqCst) {
            return false;
        }
        let _reset = ResetOnDrop(&self.shared.running);
        self.step_inner()
    }

    fn step_inner(&self) -> bool {
        loop {
            let Some(id) = self.next_ready() else {
                return false;
            };
            // Take the task out so that it can spawn (and kill) while it runs.
            let (task, generation) = {
                let Ok(mut state) = self.shared.state.lock() else {
                    return false;
                };
                match state.tasks.remove(&id) {
                    Some(task) => (task, state.generation),
                    // Finished or killed since it was woken: try the next one.
                    None => continue,
                }
            };
            let mut task = task;
            let waker = Waker::from(Arc::new(TaskWaker {
                id,
                ready: self.shared.ready.clone(),
            }));
            let mut cx = Context::from_waker(&waker);
            self.shared.polls.fetch_add(1, Ordering::SeqCst);
            let poll = task.as_mut().poll(&mut cx);
            if poll.is_pending() {
                let killed = match self.shared.state.lock() {
                    Ok(mut state) if state.generation == generation => {
                        state.tasks.insert(id, task);
                        None
                    }
                    _ => Some(task),
                };
                if let Some(task) = killed {
                    // Killed while it ran: drop it outside the lock (its drop
                    // may spawn), then drop whatever that spawned.
                    drop(task);
                    self.drain();
                }
            }
            return true;
        }
    }

    /// Poll ready tasks until none is ready; returns how many polls were made.
    pub fn run_until_stalled(&self) -> usize {
        if self.shared.running.swap(true, Ordering::SeqCst) {
            return 0;
        }
        let _reset = ResetOnDrop(&self.shared.running);
        let mut polls = 0;
        while self.step_inner() {
            polls += 1;
        }
        polls
    }

    /// Drop every task without polling it (a killed tab: no cleanup runs).
    /// Tasks spawned by those drops are dropped too. Returns how many tasks
    /// were dropped.
    pub fn kill(&self) -> usize {
        if let Ok(mut state) = self.shared.state.lock() {
            state.generation = state.generation.wrapping_add(1);
        }
        self.drain()
    }

    /// Drop every task, and the tasks their drops spawn, until none is left.
    fn drain(&self) -> usize {
        let mut dropped = 0;
        loop {
            let tasks = match self.shared.state.lock() {
                Ok(mut state) => std::mem::take(&mut state.tasks),
                Err(_) => return dropped,
            };
            if let Ok(mut q) = self.shared.ready.lock() {
                q.order.clear();
                q.queued.clear();
            }
            if tasks.is_empty() {
                return dropped;
            }
            dropped += tasks.len();
            // Dropped outside the lock: a drop (a lease guard) may spawn.
            drop(tasks);
        }
    }

    /// Drive `fut` and every spawned task until `fut` completes (`Some`) or
    /// nothing can make progress (`None`: the future is stalled, for example
    /// waiting on a `ManualClock` that nobody advances).
    pub fn block_on<F: Future>(&self, fut: F) -> Option<F::Output> {
        self.drive(fut, || false)
    }

    /// Like `block_on`, but when everything stalls and `clock` has a pending
    /// sleep, jump the clock to the earliest deadline and continue.
    pub fn block_on_advancing<F: Future>(&self, clock: &ManualClock, fut: F) -> Option<F::Output> {
        self.drive(fut, || match clock.next_deadline() {
            Some(deadline) => {
                clock.advance(deadline.saturating_sub(clock.monotonic()));
                true
            }
            None => false,
        })
    }

    fn drive<F: Future>(&self, fut: F, mut on_stall: impl FnMut() -> bool) -> Option<F::Output> {
        let mut fut = pin!(fut);
        let flag = Arc::new(FlagWaker(AtomicBool::new(true)));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        loop {
            if flag.0.swap(false, Ordering::SeqCst) {
                if let Poll::Ready(value) = fut.as_mut().poll(&mut cx) {
                    return Some(value);
                }
                continue;
            }
            if self.step() {
                continue;
            }
            if flag.0.load(Ordering::SeqCst) {
                continue;
            }
            if !on_stall() {
                return None;
            }
        }
    }
}

struct ResetOnDrop<'a>(&'a AtomicBool);

impl Drop for ResetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl Executor for SimExecutor {
    fn spawn(&self, task: BoxFuture<'static, ()>) {
        let Ok(mut state) = self.shared.state.lock() else {
            return;
        };
        let id = state.next_id;
        state.next_id = state.next_id.wrapping_add(1);
        state.tasks.insert(id, task);
        drop(state);
        if let Ok(mut q) = self.shared.ready.lock() {
            q.push(id);
        }
    }

    /// Runs the job inline. Natively a panicking job is contained (as on a
    /// blocking thread): its result channel is dropped and the waiter sees it lost.
    fn spawn_blocking(&self, job: Box<dyn FnOnce() + Send + 'static>) {
        #[cfg(not(target_arch = "wasm32"))]
        {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        }
        #[cfg(target_arch = "wasm32")]
        job();
    }
}

// ---------------------------------------------------------------------------
// Host
// ---------------------------------------------------------------------------

/// Wall time at which a `MemoryHost` clock starts: 2026-01-01T00:00:00Z.
pub const MEMORY_HOST_START_WALL_MS: u64 = 1_767_225_600_000;

/// An in-memory host: `MemoryStorage`, `ManualClock` (starting at
/// [`MEMORY_HOST_START_WALL_MS`]), `SimExecutor`, `SeededEntropy` and a
/// `Lifecycle`, with `durable: false`. The same seed gives the same ids and
/// the same poll order.
#[derive(Clone)]
pub struct MemoryHost {
    storage: Arc<MemoryStorage>,
    clock: ManualClock,
    executor: SimExecutor,
    entropy: Arc<SeededEntropy>,
    lifecycle: Lifecycle,
}

impl fmt::Debug for MemoryHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryHost")
            .field("clock", &self.clock)
            .field("executor", &self.executor)
            .finish_non_exhaustive()
    }
}

/// Mixes the seed so that entropy and poll order use different streams.
const ORDER_SEED_MIX: u64 = 0xA076_1D64_78BD_642F;

impl MemoryHost {
    /// A host whose entropy and executor poll order both derive from `seed`.
    pub fn new(seed: u64) -> Self {
        Self::with_executor(seed, SimExecutor::seeded(seed ^ ORDER_SEED_MIX))
    }

    /// A host whose executor polls in FIFO order (easiest to reason about).
    pub fn fifo(seed: u64) -> Self {
        Self::with_executor(seed, SimExecutor::new())
    }

    /// A host around a given executor (for example one shared by several simulated tabs).
    pub fn with_executor(seed: u64, executor: SimExecutor) -> Self {
        Self {
            storage: Arc::new(MemoryStorage::new()),
            clock: ManualClock::new(MEMORY_HOST_START_WALL_MS),
            executor,
            entropy: Arc::new(SeededEntropy::new(seed)),
            lifecycle: Lifecycle::new(),
        }
    }

    /// Replace the storage (for example one shared with another simulated tab).
    pub fn with_storage(mut self, storage: Arc<MemoryStorage>) -> Self {
        self.storage = storage;
        self
    }

    /// Replace the clock (for example one shared with another simulated tab).
    pub fn with_clock(mut self, clock: ManualClock) -> Self {
        self.clock = clock;
        self
    }

    /// The bundle runtime components take.
    pub fn host(&self) -> Host {
        Host {
            storage: self.storage.clone(),
            clock: Arc::new(self.clock.clone()),
            executor: Arc::new(self.executor.clone()),
            entropy: self.entropy.clone(),
            lifecycle: self.lifecycle.clone(),
            durable: false,
        }
    }

    pub fn storage(&self) -> &Arc<MemoryStorage> {
        &self.storage
    }
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }
    pub fn executor(&self) -> &SimExecutor {
        &self.executor
    }
    pub fn entropy(&self) -> &Arc<SeededEntropy> {
        &self.entropy
    }
    pub fn lifecycle(&self) -> &Lifecycle {
        &self.lifecycle
    }

    /// Drive `fut` with the executor; `None` when it stalls.
    pub fn block_on<F: Future>(&self, fut: F) -> Option<F::Output> {
        self.executor.block_on(fut)
    }

    /// Drive `fut`, jumping the clock to the next sleep deadline whenever
    /// everything stalls; `None` when it stalls with no sleep pending.
    pub fn block_on_advancing<F: Future>(&self, fut: F) -> Option<F::Output> {
        self.executor.block_on_advancing(&self.clock, fut)
    }

    /// Advance the clock and run whatever became ready.
    pub fn advance(&self, by: Duration) -> usize {
        self.clock.advance(by);
        self.executor.run_until_stalled()
    }
}

// Keep the bounds honest: the in-memory host must be usable wherever a host is.
const _: fn() = || {
    fn assert_bounds<T: MaybeSend + MaybeSync>() {}
    assert_bounds::<MemoryStorage>();
    assert_bounds::<SimExecutor>();
};
