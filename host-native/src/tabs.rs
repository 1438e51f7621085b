//! The tab-loss simulator for native test hosts (feature `sim`): several
//! "tabs" over one SQLite database, each with its own deterministic
//! executor, its own lease owner and its own runtime, sharing one manual
//! clock. A tab can be killed without any cleanup — at a chosen journal
//! boundary, at its n-th commit, after n executor polls (a random await
//! point), or at once — and the page reloaded as a new tab, which sees the
//! dead tab's lease until it expires and continues only through an explicit
//! resume (S2.5, S3.1, S3.3).
//!
//! ```no_run
//! # use agent_host_native::tabs::{TabSim, KillAt};
//! let sim = TabSim::create(std::path::Path::new("/tmp/sim.sqlite3"), 7).unwrap();
//! let a = sim.open_tab("a").unwrap();
//! a.kill_at(KillAt::Journal { state: "running".into(), tool: "send_ticket".into() });
//! let run = a.start("session-1", "go").unwrap();
//! a.drive();                       // runs until the kill
//! assert!(a.is_dead());
//! let b = sim.open_tab("b").unwrap();
//! assert!(b.recover().unwrap().is_empty()); // the dead tab's lease is live
//! sim.expire_leases();
//! b.recover().unwrap();
//! b.resume(&run).unwrap();
//! b.drive();
//! ```
//!
//! The tools are the supervisor's simulator tools (`read_note`,
//! `write_note`, the counting external write `send_ticket`, ...), whose
//! [`ToolLog`] records every execution, so that a test can assert that a
//! non-idempotent write happened at most once.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_kernel::host::{
    Batch, Host, Lifecycle, ManualClock, Op, SeededEntropy, StorageError, Table,
};
use agent_kernel::journal::JournalRecord;
use agent_kernel::memory::{MEMORY_HOST_START_WALL_MS, SimExecutor};
use agent_kernel::run::AgentRun;
use agent_kernel::{OwnerId, RunId, SessionId};
use agent_supervisor::sim::tools::{SimToolsConfig, ToolLog, spawn_sim_tools};
use agent_supervisor::{RunConfig, RunError, Runtime, RuntimeOptions, Scenario, ScriptedProvider};

use crate::process::Liveness;
use crate::sqlite::{CommitHook, OpenError, SqliteStorage};

/// Simulation setup failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error("invalid id: {0}")]
    Id(#[from] agent_kernel::IdError),
    #[error("invalid scenario: {0}")]
    Scenario(String),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error("the tab stalled before the operation finished (a sleep nobody advanced?)")]
    Stalled,
    #[error("tab {0} is dead; open a new tab (reload)")]
    Dead(String),
}

/// Where a tab dies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KillAt {
    /// Before the first commit that writes a journal record of `tool` in
    /// `state` (`prepared`, `running`, `committed`, ...): that commit is refused.
    Journal { state: String, tool: String },
    /// The tab's n-th commit (1-based) is refused and the tab dies there.
    Commit(u64),
    /// After n executor polls (an arbitrary await point).
    AfterPolls(u64),
}

/// One database, one clock, many tabs.
pub struct TabSim {
    path: PathBuf,
    clock: ManualClock,
    seed: u64,
    scenario: Scenario,
    options: RuntimeOptions,
    log: ToolLog,
    tabs: AtomicU64,
}

impl std::fmt::Debug for TabSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TabSim")
            .field("path", &self.path)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

impl TabSim {
    /// A simulation over the database at `path` (created if needed) with the
    /// supervisor simulator's default scenario.
    pub fn create(path: &Path, seed: u64) -> Result<TabSim, SimError> {
        Self::with_scenario(path, seed, agent_supervisor::sim::SCENARIO)
    }

    /// A simulation whose tabs' model plays `scenario` (the scripted format).
    pub fn with_scenario(path: &Path, seed: u64, scenario: &str) -> Result<TabSim, SimError> {
        let scenario =
            Scenario::from_json(scenario).map_err(|e| SimError::Scenario(e.to_string()))?;
        // Open once so that a bad path fails here, and migrations ran.
        drop(SqliteStorage::open_inline(
            path,
            Arc::new(|_: &OwnerId| Liveness::Unknown),
        )?);
        Ok(TabSim {
            path: path.to_owned(),
            clock: ManualClock::new(MEMORY_HOST_START_WALL_MS),
            seed,
            scenario,
            options: RuntimeOptions::default(),
            log: ToolLog::default(),
            tabs: AtomicU64::new(0),
        })
    }

    /// The shared clock.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// The log of every simulated tool execution, across tabs.
    pub fn tool_log(&self) -> &ToolLog {
        &self.log
    }

    /// The lease time-to-live every tab uses.
    pub fn lease_ttl(&self) -> Duration {
        self.options.lease_ttl
    }

    /// Move the clock past every lease's time-to-live.
    pub fn expire_leases(&self) {
        self.clock
            .advance(self.options.lease_ttl + Duration::from_millis(1));
    }

    /// Open a tab (a page load): its own executor, storage handle and owner
    /// `tab-<name>`. Nothing runs until the tab is driven or told to act.
    pub fn open_tab(&self, name: &str) -> Result<Tab, SimError> {
        let n = self.tabs.fetch_add(1, Ordering::SeqCst);
        let owner = OwnerId::new(format!("tab-{name}"))?;
        // Tabs of one machine cannot see each other's processes: leases of
        // a lost tab end by expiry, as in a browser.
        let storage = Arc::new(SqliteStorage::open_inline(
            &self.path,
            Arc::new(|_: &OwnerId| Liveness::Unknown),
        )?);
        let executor = SimExecutor::seeded(self.seed.wrapping_mul(31).wrapping_add(n));
        let host = Host {
            storage: storage.clone(),
            clock: Arc::new(self.clock.clone()),
            executor: Arc::new(executor.clone()),
            entropy: Arc::new(SeededEntropy::new(
                self.seed.wrapping_mul(7919).wrapping_add(n),
            )),
            lifecycle: Lifecycle::new(),
            durable: true,
        };
        let tools = spawn_sim_tools(
            Arc::new(executor.clone()),
            host.clock.clone(),
            self.log.clone(),
            SimToolsConfig {
                storage: Some(storage.clone()),
                ..SimToolsConfig::default()
            },
        );
        let provider = Arc::new(ScriptedProvider::new(
            self.scenario.clone(),
            host.clock.clone(),
        ));
        let runtime = Runtime::new(host, owner.clone(), tools, provider, self.options.clone());
        let tab = Tab {
            name: name.to_owned(),
            owner,
            executor,
            clock: self.clock.clone(),
            storage,
            runtime,
            state: Arc::new(TabState::default()),
        };
        tab.install_hook();
        Ok(tab)
    }
}

#[derive(Default)]
struct TabState {
    dead: AtomicBool,
    commits: AtomicU64,
    polls: AtomicU64,
    kill: Mutex<Option<KillAt>>,
}

/// One simulated tab.
pub struct Tab {
    name: String,
    owner: OwnerId,
    executor: SimExecutor,
    clock: ManualClock,
    storage: Arc<SqliteStorage>,
    runtime: Runtime,
    state: Arc<TabState>,
}

impl std::fmt::Debug for Tab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tab")
            .field("name", &self.name)
            .field("dead", &self.is_dead())
            .finish_non_exhaustive()
    }
}

fn journal_matches(batch: &Batch, state: &str, tool: &str) -> bool {
    batch.ops.iter().any(|op| match op {
        Op::Put {
            table: Table::Journal,
            value,
            ..
        } => serde_json::from_slice::<JournalRecord>(value).is_ok_and(|rec| {
            rec.tool == tool
                && serde_json::to_value(rec.state)
                    .ok()
                    .is_some_and(|v| v.as_str() == Some(state))
        }),
        _ => false,
    })
}

impl Tab {
    fn install_hook(&self) {
        let state = self.state.clone();
        let hook: CommitHook = Arc::new(move |batch: &Batch| {
            let killed = || StorageError::Unavailable("the tab was killed".into());
            if state.dead.load(Ordering::SeqCst) {
                return Err(killed());
            }
            let n = state.commits.fetch_add(1, Ordering::SeqCst) + 1;
            let die = match state.kill.lock().ok().and_then(|k| k.clone()) {
                Some(KillAt::Commit(at)) => n == at,
                Some(KillAt::Journal { state: s, tool }) => journal_matches(batch, &s, &tool),
                _ => false,
            };
            if die {
                state.dead.store(true, Ordering::SeqCst);
                return Err(killed());
            }
            Ok(())
        });
        self.storage.set_commit_hook(Some(hook));
    }

    /// The tab's lease owner id.
    pub fn owner(&self) -> &OwnerId {
        &self.owner
    }

    /// The tab's runtime (for anything this API does not wrap).
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Arm a kill: the tab dies when it reaches `at`.
    pub fn kill_at(&self, at: KillAt) {
        if let Ok(mut k) = self.state.kill.lock() {
            *k = Some(at);
        }
    }

    /// Kill the tab now: every task is dropped, nothing is cleaned up, its
    /// lease stays until it expires.
    pub fn kill(&self) {
        self.state.dead.store(true, Ordering::SeqCst);
        self.executor.kill();
    }

    pub fn is_dead(&self) -> bool {
        self.state.dead.load(Ordering::SeqCst)
    }

    /// Run the tab's tasks until nothing can make progress or the tab dies
    /// (jumping the clock to pending sleeps). Returns the polls made.
    pub fn drive(&self) -> u64 {
        let mut polls = 0;
        loop {
            if self.is_dead() {
                self.executor.kill();
                return polls;
            }
            if let Ok(Some(KillAt::AfterPolls(n))) = self.state.kill.lock().map(|k| k.clone())
                && self.state.polls.load(Ordering::SeqCst) >= n
            {
                self.kill();
                return polls;
            }
            if self.executor.step() {
                polls += 1;
                self.state.polls.fetch_add(1, Ordering::SeqCst);
                continue;
            }
            match self.clock.next_deadline() {
                Some(deadline) => self
                    .clock
                    .advance(deadline.saturating_sub(self.clock_now())),
                None => return polls,
            }
        }
    }

    fn clock_now(&self) -> Duration {
        use agent_kernel::host::Clock;
        self.clock.monotonic()
    }

    fn act<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T, RunError>>,
    ) -> Result<T, SimError> {
        if self.is_dead() {
            return Err(SimError::Dead(self.name.clone()));
        }
        match self.executor.block_on_advancing(&self.clock, fut) {
            Some(r) => Ok(r?),
            None if self.is_dead() => Err(SimError::Dead(self.name.clone())),
            None => Err(SimError::Stalled),
        }
    }

    /// Start a run in `session` (its lease is taken; refused with
    /// `RunError::Lease(Held)` while another live tab holds it).
    pub fn start(&self, session: &str, prompt: &str) -> Result<RunId, SimError> {
        self.start_with(session, prompt, RunConfig::default())
    }

    pub fn start_with(
        &self,
        session: &str,
        prompt: &str,
        config: RunConfig,
    ) -> Result<RunId, SimError> {
        let session = SessionId::new(session)?;
        self.act(self.runtime.start(&session, prompt, config))
    }

    /// What a page load does: runs left `running` without a live lease
    /// become `interrupted`; nothing resumes by itself.
    pub fn recover(&self) -> Result<Vec<RunId>, SimError> {
        self.act(self.runtime.recover())
    }

    /// The person's explicit resume.
    pub fn resume(&self, run: &RunId) -> Result<(), SimError> {
        self.act(self.runtime.resume(run))
    }

    pub fn approve(&self, run: &RunId, request: &agent_kernel::RequestId) -> Result<(), SimError> {
        self.act(self.runtime.approve(run, request))
    }

    pub fn respond(
        &self,
        run: &RunId,
        request: &agent_kernel::RequestId,
        text: &str,
    ) -> Result<(), SimError> {
        self.act(self.runtime.respond(run, request, text))
    }

    pub fn decide(
        &self,
        run: &RunId,
        call: &agent_kernel::CallId,
        choice: agent_supervisor::Choice,
    ) -> Result<(), SimError> {
        self.act(self.runtime.decide(run, call, choice))
    }

    /// The run as stored.
    pub fn run(&self, run: &RunId) -> Result<AgentRun, SimError> {
        match self.executor.block_on(self.runtime.run(run)) {
            Some(r) => Ok(r?),
            None => Err(SimError::Stalled),
        }
    }

    /// Pending requests of the run.
    pub fn pending(&self, run: &RunId) -> Result<Vec<agent_kernel::run::PendingRequest>, SimError> {
        match self.executor.block_on(self.runtime.pending(run)) {
            Some(r) => Ok(r?),
            None => Err(SimError::Stalled),
        }
    }
}
