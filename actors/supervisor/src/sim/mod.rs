//! The crash simulator (feature `sim`): a seeded harness that runs a scripted
//! run with a read-only tool, an idempotent local write and a non-idempotent
//! counting external write, kills the tab (drops every task, releases
//! nothing) at journal/checkpoint boundaries and at random await points,
//! recovers and resumes as a person would, and checks the invariants of
//! issue 3 item 7 with the [`invariants`] library. Generic over storage:
//! pass any backend's factory.

pub mod invariants;
pub mod tools;

pub use invariants::{Checker, Dispatch, Rule, SimSummary, Violation};

use std::future::Future;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_capabilities::ApprovalMode;
use agent_kernel::host::{
    Batch, BlobRef, Clock, Executor, Host, LeaseCas, LeaseRecord, Lifecycle, ManualClock,
    SeededEntropy, Storage, StorageError, StorageExt, Table,
};
use agent_kernel::ids::{OwnerId, RunId, SessionId};
use agent_kernel::memory::{MEMORY_HOST_START_WALL_MS, SimExecutor};
use agent_kernel::run::{AgentRun, PendingKind, PendingRequest, RunStatus};

use crate::config::{RunConfig, RuntimeOptions};
use crate::provider::scripted::{Scenario, ScriptedProvider};
use crate::runtime::Runtime;
use crate::sabotage::Sabotage;
use crate::supervisor::Choice;
use tools::{SimToolsConfig, ToolLog, spawn_sim_tools};

/// The simulator's scenario: one tool round with the three kinds of tool,
/// a question for the person, then the final answer.
pub const SCENARIO: &str = r#"{"turns": [
  {"text": "Working.", "tool_calls": [
     {"name": "read_note", "arguments": {"path": "notes/a.txt"}},
     {"name": "write_note", "arguments": {"path": "notes/b.txt", "text": "hi"}},
     {"name": "send_ticket", "arguments": {"title": "sim"}}]},
  {"text": "One question.", "tool_calls": [{"name": "ask_user", "arguments": {"question": "go on?"}}]},
  {"text": "Done."}
]}"#;

/// What one seed found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimReport {
    pub seed: u64,
    /// Kills that actually happened.
    pub crash_points: u64,
    pub violations: Vec<Violation>,
    pub final_status: Option<RunStatus>,
}

/// Run every seed of `seeds`; print nothing (the caller prints the summary line).
pub fn run_seeds<F>(seeds: Range<u64>, storage_factory: F, sabotage: Sabotage) -> SimSummary
where
    F: Fn() -> Arc<dyn Storage>,
{
    let boundaries = [
        boundaries(&storage_factory, ApprovalMode::Permissive),
        boundaries(&storage_factory, ApprovalMode::Strict),
    ];
    let mut summary = SimSummary::default();
    for seed in seeds {
        let report = seed_with(seed, &storage_factory, sabotage, boundaries);
        summary.add_seed(report.crash_points, report.violations);
    }
    summary
}

/// Run one seed alone (reproduces what `run_seeds` does for that seed).
pub fn run_seed<F>(seed: u64, storage_factory: &F, sabotage: Sabotage) -> SimReport
where
    F: Fn() -> Arc<dyn Storage> + ?Sized,
{
    let boundaries = [
        boundaries(storage_factory, ApprovalMode::Permissive),
        boundaries(storage_factory, ApprovalMode::Strict),
    ];
    seed_with(seed, storage_factory, sabotage, boundaries)
}

/// How many commits (journal and checkpoint boundaries) an uninterrupted run makes.
pub fn boundaries<F>(storage_factory: &F, approval: ApprovalMode) -> u64
where
    F: Fn() -> Arc<dyn Storage> + ?Sized,
{
    simulate(0, storage_factory, Sabotage::default(), approval, &[])
        .1
        .max(1)
}

/// The kill plan of a seed: even seeds run permissive, odd ones strict. The
/// first tab dies at every boundary in turn (seed by seed) or, one seed in
/// four, after a random number of polls; up to two more tabs die at random.
fn seed_with<F>(
    seed: u64,
    storage_factory: &F,
    sabotage: Sabotage,
    boundaries: [u64; 2],
) -> SimReport
where
    F: Fn() -> Arc<dyn Storage> + ?Sized,
{
    let mut rng = Rng(seed ^ 0x5151_5eed);
    let strict = seed % 2 == 1;
    let approval = if strict {
        ApprovalMode::Strict
    } else {
        ApprovalMode::Permissive
    };
    let n = boundaries[usize::from(strict)];
    let step = seed / 2;
    let mut plan = vec![if step % 4 == 3 {
        Kill::AfterPolls(1 + rng.below(40))
    } else {
        Kill::AtCommit(1 + (step - step / 4) % n)
    }];
    for _ in 0..rng.below(3) {
        plan.push(if rng.below(3) == 0 {
            Kill::AfterPolls(1 + rng.below(40))
        } else {
            Kill::AtCommit(1 + rng.below(n))
        });
    }
    simulate(seed, storage_factory, sabotage, approval, &plan).0
}

/// SplitMix64 for the simulator's own choices.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// When a tab dies.
#[derive(Debug, Clone, Copy)]
enum Kill {
    /// The n-th commit of this tab is refused and the tab dies there.
    AtCommit(u64),
    /// After n executor polls.
    AfterPolls(u64),
    Never,
}

/// Storage as one tab sees it: after its death nothing it writes lands.
struct TabStorage {
    inner: Arc<dyn Storage>,
    commits: AtomicU64,
    kill_at_commit: Option<u64>,
    dead: AtomicBool,
}

impl TabStorage {
    fn check_alive(&self) -> Result<(), StorageError> {
        if self.dead.load(Ordering::SeqCst) {
            return Err(StorageError::Unavailable("the tab was killed".into()));
        }
        Ok(())
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl Storage for TabStorage {
    async fn get(&self, table: Table, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        self.inner.get(table, key).await
    }
    async fn scan_prefix(
        &self,
        table: Table,
        prefix: &str,
    ) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
        self.inner.scan_prefix(table, prefix).await
    }
    async fn commit(&self, batch: Batch) -> Result<(), StorageError> {
        self.check_alive()?;
        let n = self.commits.fetch_add(1, Ordering::SeqCst) + 1;
        if self.kill_at_commit == Some(n) {
            self.dead.store(true, Ordering::SeqCst);
            return Err(StorageError::Unavailable("the tab was killed".into()));
        }
        self.inner.commit(batch).await
    }
    async fn put_blob(&self, hash: &str, bytes: Vec<u8>) -> Result<BlobRef, StorageError> {
        self.check_alive()?;
        self.inner.put_blob(hash, bytes).await
    }
    async fn get_blob(&self, hash: &str) -> Result<Option<Vec<u8>>, StorageError> {
        self.inner.get_blob(hash).await
    }
    async fn delete_blob(&self, hash: &str) -> Result<bool, StorageError> {
        self.check_alive()?;
        self.inner.delete_blob(hash).await
    }
    async fn list_blobs(&self) -> Result<Vec<String>, StorageError> {
        self.inner.list_blobs().await
    }
    async fn current_lease(
        &self,
        session: &SessionId,
    ) -> Result<Option<LeaseRecord>, StorageError> {
        self.inner.current_lease(session).await
    }
    async fn lease_cas(
        &self,
        expected: Option<&LeaseRecord>,
        new: &LeaseRecord,
    ) -> Result<LeaseCas, StorageError> {
        self.check_alive()?;
        self.inner.lease_cas(expected, new).await
    }
}

fn read<T>(fut: impl Future<Output = T>) -> T {
    futures::executor::block_on(fut)
}

/// Run the scenario with tabs killed as `plan` says (then one more tab,
/// and one more if that one dies). Returns the report and how many commits
/// the last tab made.
fn simulate<F>(
    seed: u64,
    storage_factory: &F,
    sabotage: Sabotage,
    approval: ApprovalMode,
    plan: &[Kill],
) -> (SimReport, u64)
where
    F: Fn() -> Arc<dyn Storage> + ?Sized,
{
    let storage = storage_factory();
    let clock = ManualClock::new(MEMORY_HOST_START_WALL_MS);
    let log = ToolLog::default();
    let session = match SessionId::new("sim-session") {
        Ok(s) => s,
        Err(e) => return (failed_report(seed, e.to_string()), 0),
    };
    let scenario = match Scenario::from_json(SCENARIO) {
        Ok(s) => s,
        Err(e) => return (failed_report(seed, e.to_string()), 0),
    };
    let config = RunConfig {
        approval,
        ..RunConfig::default()
    };
    let mut last_commits = 0;
    let mut report = SimReport {
        seed,
        ..SimReport::default()
    };
    let mut run_id: Option<RunId> = None;
    let mut checker = Checker::new(seed);
    checker.forbid_raw_text(PROMPT);
    let mut fed = 0usize;
    let options = RuntimeOptions::default();
    let ttl = options.lease_ttl;

    for tab in 0..(plan.len() as u64 + 2) {
        let kill = usize::try_from(tab)
            .ok()
            .and_then(|t| plan.get(t).copied())
            .unwrap_or(Kill::Never);
        let tab_storage = Arc::new(TabStorage {
            inner: storage.clone(),
            commits: AtomicU64::new(0),
            kill_at_commit: match kill {
                Kill::AtCommit(n) => Some(n),
                _ => None,
            },
            dead: AtomicBool::new(false),
        });
        let executor = SimExecutor::seeded(seed.wrapping_mul(31).wrapping_add(tab));
        let host = Host {
            storage: tab_storage.clone(),
            clock: Arc::new(clock.clone()),
            executor: Arc::new(executor.clone()),
            entropy: Arc::new(SeededEntropy::new(
                seed.wrapping_mul(7919).wrapping_add(tab),
            )),
            lifecycle: Lifecycle::new(),
            durable: false,
        };
        let tools = spawn_sim_tools(
            Arc::new(executor.clone()),
            host.clock.clone(),
            log.clone(),
            SimToolsConfig {
                storage: Some(storage.clone()),
                ..SimToolsConfig::default()
            },
        );
        let provider = Arc::new(ScriptedProvider::new(scenario.clone(), host.clock.clone()));
        let owner = match OwnerId::new(format!("tab-{tab}")) {
            Ok(o) => o,
            Err(e) => return (failed_report(seed, e.to_string()), 0),
        };
        let runtime =
            Runtime::new(host, owner, tools, provider, options.clone()).with_sabotage(sabotage);
        let mut tab_driver = Tab {
            executor: &executor,
            clock: &clock,
            storage: &tab_storage,
            kill,
            polls: 0,
        };

        // Open the page: the first tab starts the run; later ones wait for
        // the dead tab's lease to expire and recover.
        if tab > 0 {
            clock.advance(ttl + Duration::from_secs(1));
        }
        if run_id.is_none() {
            // A person sees a run that was created before the tab died.
            let runs: Vec<AgentRun> = read(storage.scan_records("")).unwrap_or_default();
            run_id = runs.first().map(|r| r.id.clone());
        }
        log.set_step(checker.next_step());
        if let Some(id) = &run_id {
            checker.page_loaded([id]);
        }
        let outcome: Slot<Result<(), String>> = Slot::default();
        match &run_id {
            None => {
                let rt = runtime.clone();
                let out = outcome.clone();
                let cfg = config.clone();
                let sess = session.clone();
                let id_slot: Slot<RunId> = Slot::default();
                let ids = id_slot.clone();
                executor.spawn(Box::pin(async move {
                    match rt.start(&sess, PROMPT, cfg).await {
                        Ok(id) => {
                            ids.set(id);
                            out.set(Ok(()));
                        }
                        Err(e) => out.set(Err(e.to_string())),
                    }
                }));
                let alive = tab_driver.drive();
                feed(&mut checker, &log, &mut fed);
                run_id = id_slot.take().or_else(|| {
                    let runs: Vec<AgentRun> = read(storage.scan_records("")).unwrap_or_default();
                    runs.first().map(|r| r.id.clone())
                });
                if !alive {
                    report.crash_points += 1;
                    if run_id.is_none() {
                        // Killed before the run existed: start again in the next tab.
                        continue;
                    }
                }
            }
            Some(_) => {
                let rt = runtime.clone();
                let out = outcome.clone();
                executor.spawn(Box::pin(async move {
                    let r = rt.recover().await.map(|_| ()).map_err(|e| e.to_string());
                    out.set(r);
                }));
                let alive = tab_driver.drive();
                feed(&mut checker, &log, &mut fed);
                if !alive {
                    report.crash_points += 1;
                    read(checker.check_stored(&*storage));
                    continue;
                }
            }
        }
        let Some(id) = run_id.clone() else {
            checker.violation(Rule::Harness, "the run was never created");
            report.violations = checker.into_violations();
            return (report, last_commits);
        };
        if let Some(Err(e)) = outcome.take() {
            checker.violation(Rule::Harness, format!("tab {tab}: opening failed: {e}"));
        }

        // Act as a person until the run is final, or the tab dies.
        let mut died = false;
        for _ in 0..12 {
            let Ok((run, _)) = read(crate::store::load_run(&*storage, &id)) else {
                checker.violation(Rule::RecordsKept, "the run record disappeared");
                report.violations = checker.into_violations();
                return (report, last_commits);
            };
            if run.status.is_final() {
                break;
            }
            let pending: Vec<PendingRequest> =
                read(crate::store::pending_of(&*storage, &id)).unwrap_or_default();
            let rt = runtime.clone();
            let run_key = id.clone();
            // Every action but re-recovering a run left `running` is the person's.
            let person = run.status != RunStatus::Running;
            let action: Option<agent_kernel::maybe_send::BoxFuture<'static, ()>> = match run.status
            {
                RunStatus::AwaitingApproval => pending
                    .iter()
                    .find(|p| matches!(p.kind, PendingKind::Approval { .. }))
                    .map(|p| {
                        let req = p.id.clone();
                        Box::pin(async move {
                            let _ = rt.approve(&run_key, &req).await;
                        }) as _
                    }),
                RunStatus::AwaitingInput => pending
                    .iter()
                    .find(|p| matches!(p.kind, PendingKind::Input { .. }))
                    .map(|p| {
                        let req = p.id.clone();
                        Box::pin(async move {
                            let _ = rt.respond(&run_key, &req, "yes").await;
                        }) as _
                    }),
                RunStatus::Interrupted => {
                    let decision = pending.iter().find_map(|p| match &p.kind {
                        PendingKind::Decision { call_id, .. } => Some(call_id.clone()),
                        _ => None,
                    });
                    Some(match decision {
                        // A person checks the ticket system: if the ticket is there the
                        // call is marked done, otherwise it is retried.
                        Some(call) => {
                            let choice = if log.executed(id.as_str(), call.as_str()) {
                                Choice::MarkDone
                            } else {
                                checker.retry_chosen(&id, &call);
                                Choice::RetryAnyway
                            };
                            Box::pin(async move {
                                let _ = rt.decide(&run_key, &call, choice).await;
                            }) as _
                        }
                        None => Box::pin(async move {
                            let _ = rt.resume(&run_key).await;
                        }) as _,
                    })
                }
                // Running with nothing left to drive: the supervisor died (for
                // example its lease was lost); recover it like a reload would.
                RunStatus::Running => Some(Box::pin(async move {
                    let _ = rt.recover().await;
                }) as _),
                _ => None,
            };
            let Some(action) = action else {
                checker.violation(
                    Rule::Settled,
                    format!("run is {} with no pending request to answer", run.status),
                );
                break;
            };
            if person {
                checker.person_acted(&id);
            }
            log.set_step(checker.next_step());
            executor.spawn(action);
            let alive = tab_driver.drive();
            feed(&mut checker, &log, &mut fed);
            if !alive {
                died = true;
                break;
            }
        }
        if died {
            report.crash_points += 1;
        }
        read(checker.check_stored(&*storage));
        last_commits = tab_storage.commits.load(Ordering::SeqCst);
        if !died {
            break;
        }
    }
    match &run_id {
        Some(id) => {
            read(checker.check_final(&*storage, id));
            report.final_status = read(crate::store::load_run(&*storage, id))
                .ok()
                .map(|(run, _)| run.status);
        }
        None => checker.violation(Rule::Harness, "no run was started"),
    }
    report.violations = checker.into_violations();
    (report, last_commits)
}

/// The prompt of the simulated run; stored only in blobs (S2.2).
const PROMPT: &str = "simulated prompt";

/// Hand the checker the dispatches the tools logged since the last call.
fn feed(checker: &mut Checker, log: &ToolLog, fed: &mut usize) {
    let all = log.dispatches();
    for d in all.iter().skip(*fed) {
        checker.dispatched(d.clone());
    }
    *fed = all.len();
}

fn failed_report(seed: u64, why: String) -> SimReport {
    SimReport {
        seed,
        violations: vec![Violation {
            seed,
            step: 0,
            rule: Rule::Harness,
            detail: format!("setup failed: {why}"),
        }],
        ..SimReport::default()
    }
}

/// A value a spawned task hands back.
struct Slot<T>(Arc<Mutex<Option<T>>>);
impl<T> Clone for Slot<T> {
    fn clone(&self) -> Self {
        Slot(self.0.clone())
    }
}
impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot(Arc::new(Mutex::new(None)))
    }
}
impl<T> Slot<T> {
    fn set(&self, v: T) {
        if let Ok(mut s) = self.0.lock() {
            *s = Some(v);
        }
    }
    fn take(&self) -> Option<T> {
        self.0.lock().ok().and_then(|mut s| s.take())
    }
}

struct Tab<'a> {
    executor: &'a SimExecutor,
    clock: &'a ManualClock,
    storage: &'a TabStorage,
    kill: Kill,
    polls: u64,
}

impl Tab<'_> {
    /// Run the tab until nothing is ready and no sleep is pending (true), or
    /// until it is killed (false: every task dropped, nothing released).
    fn drive(&mut self) -> bool {
        loop {
            if self.storage.dead.load(Ordering::SeqCst) {
                self.executor.kill();
                return false;
            }
            if let Kill::AfterPolls(n) = self.kill
                && self.polls >= n
            {
                self.storage.dead.store(true, Ordering::SeqCst);
                self.executor.kill();
                return false;
            }
            if self.executor.step() {
                self.polls += 1;
                continue;
            }
            match self.clock.next_deadline() {
                Some(deadline) => self
                    .clock
                    .advance(deadline.saturating_sub(self.clock.monotonic())),
                None => return true,
            }
        }
    }
}
