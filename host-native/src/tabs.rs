//! The tab-loss simulator for native test hosts (feature `sim`, issue 17):
//! several "tabs" over one SQLite database, each a full assembly
//! (`agent_assembly::Assembly`) wired from the same parts a host passes in
//! ([`SimWiring`]: provider, the host's own tools, plugins, secrets, run
//! configuration with its budget and Skill), each with its own
//! deterministic executor and lease owner, all sharing one manual clock.
//!
//! A tab can be killed without any cleanup, or be sent a lifecycle event
//! (online, offline, page hidden, executor lost), at a chosen journal
//! boundary, at its n-th commit, after n executor polls (an await point),
//! or at once; tabs open, reload and close; a person approves, denies,
//! answers, decides and stops through the tab's helpers. Every call that
//! reaches a tool is observed with the journal record durable at that
//! moment and handed to the invariants library
//! (`agent_supervisor::sim::invariants`), which [`TabSim::checker`] exposes;
//! [`run_seeds`] drives a whole [`SimPlan`] from seeds and returns the
//! summary line (S2.3, S2.5, S3.1, S3.3, S6.4).
//!
//! Plugins run on a tokio runtime of the simulation (their HTTP requests
//! are real, to the test host's own loopback servers) on the tabs' clock:
//! while one is in flight the tab waits for its answer instead of moving
//! the clock.
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
//! [`TabSim::create`] wires the supervisor's simulator tools (`read_note`,
//! `write_note`, the counting external write `send_ticket`, ...), whose
//! [`ToolLog`] records every execution.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use agent_assembly::{Assembly, AssemblyError, Parts, plugin_registrations};
use agent_kernel::actor::{Inbox, spawn_actor};
use agent_kernel::host::{
    Batch, Clock, Executor, Host, LeaseGuard, Lifecycle, LifecycleEvent, ManualClock, Op,
    SeededEntropy, StorageError, StorageExt, Table,
};
use agent_kernel::journal::JournalRecord;
use agent_kernel::memory::{MEMORY_HOST_START_WALL_MS, SimExecutor};
use agent_kernel::protocol::{ToolAddr, ToolMsg, ToolResult};
use agent_kernel::run::{AgentRun, PendingKind, PendingRequest, RunStatus};
use agent_kernel::{CallId, OwnerId, RequestId, RunId, SessionId};
use agent_supervisor::sim::tools::{SimToolsConfig, ToolLog, spawn_sim_tool_actors};
use agent_supervisor::sim::{Checker, Dispatch, Rule, SimSummary, Violation};
use agent_supervisor::{
    Choice, ModelProvider, RunConfig, RunError, RuntimeOptions, Sabotage, Scenario,
    ScriptedProvider,
};
use agent_tools::{
    PluginManifest, SecretHandle, SecretResolver, SecretValue, ToolRegistration,
    plugin::SecretError,
};

use crate::host::TokioExecutor;
use crate::process::Liveness;
use crate::sqlite::{CommitHook, OpenError, SqliteStorage};

/// How long a tab waits for a plugin's real answer before it gives up.
const EXTERNAL_WAIT: Duration = Duration::from_secs(60);

/// Simulation setup or a tab's action failed.
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
    #[error("cannot wire the tab: {0}")]
    Wiring(String),
    #[error("the tab stalled before the operation finished (a sleep nobody advanced?)")]
    Stalled,
    #[error("tab {0} is dead; open a new tab (reload)")]
    Dead(String),
    #[error("deep research: {0}")]
    Research(String),
}

impl From<AssemblyError> for SimError {
    fn from(e: AssemblyError) -> Self {
        match e {
            AssemblyError::Run(e) => SimError::Run(e),
            other => SimError::Wiring(other.to_string()),
        }
    }
}

/// Where something happens to a tab (a kill, a lifecycle event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    /// The first commit that writes a journal record of `tool` in `state`
    /// (`prepared`, `running`, `committed`, ...). A kill refuses that commit.
    Journal { state: String, tool: String },
    /// The tab's n-th commit (1-based). A kill refuses it.
    Commit(u64),
    /// After n executor polls (an arbitrary await point).
    AfterPolls(u64),
}

/// Where a tab dies (the name the first simulator used).
pub type KillAt = At;

/// What happens at an [`At`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interruption {
    /// The tab dies: every task dropped, nothing cleaned up or released.
    Kill,
    /// The host raises this lifecycle event; the tab lives on.
    Raise(LifecycleEvent),
}

/// Makes the model of a tab, on the tab's host.
pub type ProviderFactory = Arc<dyn Fn(&Host) -> Arc<dyn ModelProvider> + Send + Sync>;
/// Spawns a test host's own tools on a tab's host (its executor and clock).
pub type ToolsFactory = Arc<dyn Fn(&Host) -> Vec<ToolRegistration> + Send + Sync>;

/// What a host wires into every tab: the assembly's parts that are not the
/// host itself. Clones share the factories.
#[derive(Clone)]
pub struct SimWiring {
    pub provider: ProviderFactory,
    /// The host's own tools (spawned on each tab's executor).
    pub tools: Option<ToolsFactory>,
    /// HTTP plugins (run on the simulation's tokio runtime).
    pub plugins: Vec<PluginManifest>,
    /// MCP servers (their clients run on the simulation's tokio runtime;
    /// each tab connects its own, as each page load does).
    pub mcp: Vec<agent_mcp::McpServerConfig>,
    pub always_on_plugins: Vec<String>,
    pub secrets: Arc<dyn SecretResolver>,
    /// What `fetch_url` (and Deep Research's execution) reads through, or
    /// `None` (not offered).
    pub fetch: Option<Arc<dyn agent_fetch::FetchBackend>>,
    /// What every run starts with: budget, approval mode, allowlist, Skill.
    pub run_config: RunConfig,
    pub runtime: RuntimeOptions,
    /// Deliberate faults of the supervisor, for a test proving that its
    /// simulation can fail (`Sabotage::default()`: none).
    pub sabotage: Sabotage,
}

impl std::fmt::Debug for SimWiring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimWiring")
            .field("plugins", &self.plugins.len())
            .field("own_tools", &self.tools.is_some())
            .finish_non_exhaustive()
    }
}

impl SimWiring {
    /// A scripted model playing `scenario` (the supervisor's scripted
    /// format), no tools of the host's own, no plugins.
    pub fn scripted(scenario: &str) -> Result<SimWiring, SimError> {
        let scenario =
            Scenario::from_json(scenario).map_err(|e| SimError::Scenario(e.to_string()))?;
        Ok(SimWiring {
            provider: Arc::new(move |host: &Host| {
                Arc::new(ScriptedProvider::new(scenario.clone(), host.clock.clone()))
                    as Arc<dyn ModelProvider>
            }),
            tools: None,
            plugins: Vec::new(),
            mcp: Vec::new(),
            always_on_plugins: Vec::new(),
            secrets: Arc::new(NoSecrets),
            fetch: None,
            run_config: RunConfig::default(),
            runtime: RuntimeOptions::default(),
            sabotage: Sabotage::default(),
        })
    }

    /// Read through `backend` (`fetch_url` and Deep Research's execution).
    pub fn with_fetch(mut self, backend: Arc<dyn agent_fetch::FetchBackend>) -> SimWiring {
        self.fetch = Some(backend);
        self
    }

    /// Add the host's own tools.
    pub fn with_tools(
        mut self,
        tools: impl Fn(&Host) -> Vec<ToolRegistration> + Send + Sync + 'static,
    ) -> SimWiring {
        self.tools = Some(Arc::new(tools));
        self
    }

    /// Add an HTTP plugin.
    pub fn with_plugin(mut self, manifest: PluginManifest) -> SimWiring {
        self.plugins.push(manifest);
        self
    }

    /// Add an MCP server (Streamable HTTP or stdio).
    pub fn with_mcp(mut self, server: agent_mcp::McpServerConfig) -> SimWiring {
        self.mcp.push(server);
        self
    }

    /// Runs start with `config`.
    pub fn with_run_config(mut self, config: RunConfig) -> SimWiring {
        self.run_config = config;
        self
    }

    /// The supervisor simulator's tools, logging to `log`.
    fn with_sim_tools(self, log: ToolLog) -> SimWiring {
        self.with_tools(move |host: &Host| {
            spawn_sim_tool_actors(
                host.executor.clone(),
                host.clock.clone(),
                log.clone(),
                SimToolsConfig {
                    storage: Some(host.storage.clone()),
                    ..SimToolsConfig::default()
                },
            )
            .into_iter()
            .map(|(def, addr)| ToolRegistration::builtin(def, addr))
            .collect()
        })
    }
}

/// Resolves no secret (a wiring without plugin credentials).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSecrets;

#[async_trait::async_trait]
impl SecretResolver for NoSecrets {
    fn bound_origin(&self, _: &SecretHandle) -> Option<String> {
        None
    }
    async fn resolve(&self, handle: &SecretHandle) -> Result<SecretValue, SecretError> {
        Err(SecretError::Unknown(handle.0.clone()))
    }
}

/// One database, one clock, many tabs.
pub struct TabSim {
    path: PathBuf,
    clock: ManualClock,
    seed: u64,
    wiring: SimWiring,
    log: ToolLog,
    tabs: AtomicU64,
    checker: Arc<Mutex<Checker>>,
    /// Where plugins run (their requests are real): made on first use.
    external: Mutex<Option<tokio::runtime::Runtime>>,
}

impl std::fmt::Debug for TabSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TabSim")
            .field("path", &self.path)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

impl Drop for TabSim {
    fn drop(&mut self) {
        if let Ok(mut rt) = self.external.lock()
            && let Some(rt) = rt.take()
        {
            // Never blocks, also when dropped inside another runtime.
            rt.shutdown_background();
        }
    }
}

impl TabSim {
    /// A simulation over the database at `path` (created if needed) with the
    /// supervisor simulator's default scenario and tools.
    pub fn create(path: &Path, seed: u64) -> Result<TabSim, SimError> {
        Self::with_scenario(path, seed, agent_supervisor::sim::SCENARIO)
    }

    /// A simulation whose tabs' model plays `scenario` (the scripted
    /// format) with the supervisor simulator's tools.
    pub fn with_scenario(path: &Path, seed: u64, scenario: &str) -> Result<TabSim, SimError> {
        let log = ToolLog::default();
        let wiring = SimWiring::scripted(scenario)?.with_sim_tools(log.clone());
        let mut sim = Self::with_wiring(path, seed, wiring)?;
        sim.log = log;
        Ok(sim)
    }

    /// A simulation whose tabs are wired from `wiring`.
    pub fn with_wiring(path: &Path, seed: u64, wiring: SimWiring) -> Result<TabSim, SimError> {
        // Open once so that a bad path fails here, and migrations ran.
        drop(SqliteStorage::open_inline(
            path,
            Arc::new(|_: &OwnerId| Liveness::Unknown),
        )?);
        Ok(TabSim {
            path: path.to_owned(),
            clock: ManualClock::new(MEMORY_HOST_START_WALL_MS),
            seed,
            wiring,
            log: ToolLog::default(),
            tabs: AtomicU64::new(0),
            checker: Arc::new(Mutex::new(Checker::new(seed))),
            external: Mutex::new(None),
        })
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The shared clock.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// The log of every execution of the supervisor simulator's tools
    /// (empty with a host's own wiring).
    pub fn tool_log(&self) -> &ToolLog {
        &self.log
    }

    /// The invariants checker of this simulation (what was dispatched, what
    /// the person chose and was shown, the violations so far).
    pub fn checker(&self) -> MutexGuard<'_, Checker> {
        lock(&self.checker)
    }

    /// Check the stored state now (see `Checker::check_stored`).
    pub fn check_stored(&self) {
        if let Ok(storage) = self.storage() {
            let mut checker = lock(&self.checker);
            futures::executor::block_on(checker.check_stored(&storage));
        }
    }

    /// Check `run` as the end of a simulation (see `Checker::check_final`).
    pub fn check_final(&self, run: &RunId) {
        if let Ok(storage) = self.storage() {
            let mut checker = lock(&self.checker);
            futures::executor::block_on(checker.check_final(&storage, run));
        }
    }

    fn storage(&self) -> Result<SqliteStorage, SimError> {
        Ok(SqliteStorage::open_inline(
            &self.path,
            Arc::new(|_: &OwnerId| Liveness::Unknown),
        )?)
    }

    /// Every run stored.
    pub fn runs(&self) -> Result<Vec<AgentRun>, SimError> {
        let storage = self.storage()?;
        futures::executor::block_on(storage.scan_records::<AgentRun>(""))
            .map_err(|e| SimError::Run(e.into()))
    }

    /// The lease time-to-live every tab uses.
    pub fn lease_ttl(&self) -> Duration {
        self.wiring.runtime.lease_ttl
    }

    /// Move the clock past every lease's time-to-live.
    pub fn expire_leases(&self) {
        self.clock
            .advance(self.wiring.runtime.lease_ttl + Duration::from_millis(1));
    }

    fn external(&self) -> Result<tokio::runtime::Handle, SimError> {
        let mut rt = lock(&self.external);
        if let Some(rt) = rt.as_ref() {
            return Ok(rt.handle().clone());
        }
        let made = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("tabsim-plugins")
            .enable_all()
            .build()
            .map_err(|e| SimError::Wiring(format!("cannot start the plugin runtime: {e}")))?;
        let handle = made.handle().clone();
        *rt = Some(made);
        Ok(handle)
    }

    /// Open a tab (a page load): its own executor, storage handle, owner
    /// `tab-<name>` and assembly. Nothing runs until the tab is driven or
    /// told to act. Runs waiting for the person at this moment may not
    /// dispatch anything until the person acts on them.
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
        let in_flight = Arc::new(AtomicU64::new(0));
        let observe = |addr: ToolAddr, external: bool| {
            observe_tool(
                addr,
                &executor,
                storage.clone(),
                self.checker.clone(),
                external.then(|| in_flight.clone()),
            )
        };
        let mut own: Vec<ToolRegistration> = Vec::new();
        if let Some(tools) = &self.wiring.tools {
            for mut r in tools(&host) {
                r.addr = observe(r.addr, false);
                own.push(r);
            }
        }
        if !self.wiring.plugins.is_empty() {
            let handle = self.external()?;
            for manifest in &self.wiring.plugins {
                for mut r in plugin_registrations(
                    Arc::new(TokioExecutor::new(handle.clone())),
                    // The tab's clock: capabilities are minted and
                    // verified on it (a tab waits for a request in flight
                    // instead of moving it, so a timeout is not jumped to).
                    host.clock.clone(),
                    manifest,
                    self.wiring.secrets.clone(),
                    &self.wiring.always_on_plugins,
                )? {
                    r.addr = observe(r.addr, true);
                    own.push(r);
                }
            }
        }
        let mut mcp_servers = Vec::new();
        if !self.wiring.mcp.is_empty() {
            let handle = self.external()?;
            let env = agent_mcp::McpEnv {
                executor: Arc::new(TokioExecutor::new(handle.clone())),
                clock: host.clock.clone(),
                secrets: self.wiring.secrets.clone(),
                gateway: None,
                auth: None,
                elicitation: None,
            };
            for config in &self.wiring.mcp {
                let server = handle
                    .block_on(agent_mcp::spawn_mcp_server(&env, config))
                    .map_err(|e| SimError::Wiring(format!("MCP server {}: {e}", config.id)))?;
                for r in server.load.registrations.iter().cloned() {
                    let mut r = agent_assembly::mcp::registration(r);
                    r.addr = observe(r.addr, true);
                    own.push(r);
                }
                mcp_servers.push(server);
            }
        }
        let provider = (self.wiring.provider)(&host);
        let assembly = Assembly::build_with_tools(
            Parts {
                host: host.clone(),
                owner: owner.clone(),
                provider,
                javascript: None,
                pdf_reader: None,
                html_extractor: None,
                fetch: self.wiring.fetch.clone(),
                secrets: self.wiring.secrets.clone(),
                plugins: Vec::new(),
                always_on_plugins: Vec::new(),
                mcp: Vec::new(),
                search: None,
                runtime: self.wiring.runtime.clone(),
            },
            own,
        )?
        .map_runtime(|runtime| runtime.with_sabotage(self.wiring.sabotage));
        let tab = Tab {
            name: name.to_owned(),
            owner,
            executor,
            clock: self.clock.clone(),
            storage,
            host,
            assembly,
            state: Arc::new(TabState::default()),
            in_flight,
            checker: self.checker.clone(),
            log: self.log.clone(),
            run_config: self.wiring.run_config.clone(),
            guards: Mutex::new(Vec::new()),
            _mcp: mcp_servers,
        };
        tab.install_hook();
        // A page load: what waits for the person stays waiting for them.
        let waiting: Vec<RunId> =
            futures::executor::block_on(tab.storage.scan_records::<AgentRun>(""))
                .unwrap_or_default()
                .into_iter()
                .filter(|r| {
                    matches!(
                        r.status,
                        RunStatus::Interrupted
                            | RunStatus::AwaitingApproval
                            | RunStatus::AwaitingInput
                    )
                })
                .map(|r| r.id)
                .collect();
        let mut checker = lock(&self.checker);
        let step = checker.next_step();
        self.log.set_step(step);
        checker.page_loaded(&waiting);
        drop(checker);
        Ok(tab)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while the lock was held (a failed test assertion) leaves the
    // data as it was: keep using it.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Wrap a tool's address: every call is observed (with the journal record
/// durable at that moment) before it reaches the tool, and, for tools that
/// run outside the tab (`in_flight`), counted while it is in flight.
fn observe_tool(
    addr: ToolAddr,
    executor: &SimExecutor,
    storage: Arc<SqliteStorage>,
    checker: Arc<Mutex<Checker>>,
    in_flight: Option<Arc<AtomicU64>>,
) -> ToolAddr {
    let spawner = executor.clone();
    spawn_actor(
        executor,
        "observed tool",
        64,
        None,
        move |inbox: Inbox<ToolMsg>| async move {
            while let Ok(msg) = inbox.recv().await {
                match msg {
                    ToolMsg::Invoke { invocation, reply } => {
                        let (storage, checker) = (storage.clone(), checker.clone());
                        let addr = addr.clone();
                        let counter = in_flight.clone().map(InFlight::enter);
                        spawner.spawn(Box::pin(async move {
                            let d = &invocation.draft;
                            let step = lock(&checker).step();
                            let dispatch = Dispatch::observe(
                                &*storage, &d.run, &d.call_id, &d.tool, d.attempt, step,
                            )
                            .await;
                            let tool = d.tool.clone();
                            let result = addr
                                .ask(|reply| {
                                    // Recorded as the call is handed to the
                                    // tool, in the same poll: a kill after
                                    // this no longer stops it.
                                    lock(&checker).dispatched(dispatch);
                                    ToolMsg::Invoke { invocation, reply }
                                })
                                .await
                                .unwrap_or_else(|e| {
                                    ToolResult::error("tool_unavailable", e.to_string(), &tool)
                                });
                            drop(counter);
                            reply.send(result);
                        }));
                    }
                    ToolMsg::Cancel { run } => {
                        // A tool that stopped has nothing to cancel.
                        let _ = addr.send(ToolMsg::Cancel { run }).await;
                    }
                }
            }
            Ok::<(), String>(())
        },
    )
}

/// One call in flight outside the tab; counted down when dropped.
struct InFlight(Arc<AtomicU64>);

impl InFlight {
    fn enter(counter: Arc<AtomicU64>) -> InFlight {
        counter.fetch_add(1, Ordering::SeqCst);
        InFlight(counter)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Default)]
struct TabState {
    dead: AtomicBool,
    commits: AtomicU64,
    polls: AtomicU64,
    /// Interruptions that happened (kills and raised events).
    fired: AtomicU64,
    armed: Mutex<Vec<(At, Interruption)>>,
}

/// One simulated tab.
pub struct Tab {
    name: String,
    owner: OwnerId,
    executor: SimExecutor,
    clock: ManualClock,
    storage: Arc<SqliteStorage>,
    host: Host,
    assembly: Assembly,
    state: Arc<TabState>,
    in_flight: Arc<AtomicU64>,
    checker: Arc<Mutex<Checker>>,
    log: ToolLog,
    run_config: RunConfig,
    guards: Mutex<Vec<LeaseGuard>>,
    /// The MCP servers this tab connected (their connections live with it).
    _mcp: Vec<agent_mcp::McpServer>,
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
    batch.ops().iter().any(|op| match op {
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

/// Wakes the future a tab drives.
#[derive(Default)]
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Tab {
    fn install_hook(&self) {
        let state = self.state.clone();
        let lifecycle = self.host.lifecycle.clone();
        let hook: CommitHook = Arc::new(move |batch: &Batch| {
            let killed = || StorageError::Unavailable("the tab was killed".into());
            if state.dead.load(Ordering::SeqCst) {
                return Err(killed());
            }
            let n = state.commits.fetch_add(1, Ordering::SeqCst) + 1;
            let mut armed = lock(&state.armed);
            let mut die = false;
            armed.retain(|(at, what)| {
                let now = match at {
                    At::Commit(c) => n == *c,
                    At::Journal { state: s, tool } => journal_matches(batch, s, tool),
                    At::AfterPolls(_) => false,
                };
                if now {
                    state.fired.fetch_add(1, Ordering::SeqCst);
                    match what {
                        Interruption::Kill => die = true,
                        Interruption::Raise(event) => lifecycle.emit(*event),
                    }
                }
                !now
            });
            drop(armed);
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
    pub fn runtime(&self) -> &agent_supervisor::Runtime {
        self.assembly.runtime()
    }

    /// The tab's assembly.
    pub fn assembly(&self) -> &Assembly {
        &self.assembly
    }

    /// Arm a kill: the tab dies when it reaches `at`.
    pub fn kill_at(&self, at: At) {
        self.interrupt_at(at, Interruption::Kill);
    }

    /// Arm a lifecycle event: the host raises `event` when the tab reaches `at`.
    pub fn raise_at(&self, at: At, event: LifecycleEvent) {
        self.interrupt_at(at, Interruption::Raise(event));
    }

    /// Arm an interruption at `at`.
    pub fn interrupt_at(&self, at: At, what: Interruption) {
        lock(&self.state.armed).push((at, what));
    }

    /// Interruptions that happened in this tab (kills and raised events).
    pub fn interruptions(&self) -> u64 {
        self.state.fired.load(Ordering::SeqCst)
    }

    /// The host raises `event` now (online, offline, page hidden, executor lost).
    pub fn raise(&self, event: LifecycleEvent) {
        self.host.lifecycle.emit(event);
    }

    /// Whether the tab's host is online.
    pub fn is_online(&self) -> bool {
        self.host.lifecycle.is_online()
    }

    /// Kill the tab now: every task is dropped, nothing is cleaned up, its
    /// leases stay until they expire.
    pub fn kill(&self) {
        self.state.dead.store(true, Ordering::SeqCst);
        // A killed tab releases nothing.
        for guard in lock(&self.guards).drain(..) {
            std::mem::forget(guard);
        }
        self.executor.kill();
    }

    /// Close the tab as a person does: the page is hidden (running work is
    /// interrupted), its session leases are released, then it is gone.
    pub fn close(&self) {
        if self.is_dead() {
            return;
        }
        self.raise(LifecycleEvent::PageHidden);
        self.drive();
        lock(&self.guards).clear();
        self.drive();
        self.state.dead.store(true, Ordering::SeqCst);
        self.executor.kill();
    }

    pub fn is_dead(&self) -> bool {
        self.state.dead.load(Ordering::SeqCst)
    }

    /// Run the tab's tasks until nothing can make progress or the tab dies
    /// (jumping the clock to pending sleeps, waiting for plugins' real
    /// answers). Returns the polls made.
    pub fn drive(&self) -> u64 {
        let before = self.state.polls.load(Ordering::SeqCst);
        self.drive_until(|| false);
        self.state.polls.load(Ordering::SeqCst) - before
    }

    /// Drive until `done()` (true) or until nothing can make progress or
    /// the tab dies (false).
    fn drive_until(&self, mut done: impl FnMut() -> bool) -> bool {
        loop {
            if done() {
                return true;
            }
            if self.is_dead() {
                self.kill();
                return false;
            }
            let polls = self.state.polls.load(Ordering::SeqCst);
            let due = {
                let mut armed = lock(&self.state.armed);
                let mut due = Vec::new();
                armed.retain(|(at, what)| match at {
                    At::AfterPolls(n) if polls >= *n => {
                        due.push(*what);
                        false
                    }
                    _ => true,
                });
                due
            };
            for what in due {
                self.state.fired.fetch_add(1, Ordering::SeqCst);
                match what {
                    Interruption::Kill => {
                        self.kill();
                        return false;
                    }
                    Interruption::Raise(event) => self.raise(event),
                }
            }
            if self.executor.step() {
                self.state.polls.fetch_add(1, Ordering::SeqCst);
                continue;
            }
            if done() {
                return true;
            }
            if self.in_flight.load(Ordering::SeqCst) > 0 {
                // A plugin's request is out: wait for its real answer.
                let started = Instant::now();
                while self.executor.ready_tasks() == 0
                    && self.in_flight.load(Ordering::SeqCst) > 0
                    && started.elapsed() < EXTERNAL_WAIT
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
                if self.executor.ready_tasks() > 0 {
                    continue;
                }
                if self.in_flight.load(Ordering::SeqCst) > 0 {
                    return false;
                }
                continue;
            }
            match self.clock.next_deadline() {
                Some(deadline) => self
                    .clock
                    .advance(deadline.saturating_sub(self.clock.monotonic())),
                None => return false,
            }
        }
    }

    /// Drive `fut` with the tab's tasks until it completes.
    fn block_on<T>(&self, fut: impl Future<Output = T>) -> Result<T, SimError> {
        if self.is_dead() {
            return Err(SimError::Dead(self.name.clone()));
        }
        let mut fut = pin!(fut);
        let flag = Arc::new(Flag(AtomicBool::new(true)));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        let mut out = None;
        self.drive_until(|| {
            if flag.0.swap(false, Ordering::SeqCst)
                && let Poll::Ready(v) = fut.as_mut().poll(&mut cx)
            {
                out = Some(v);
            }
            out.is_some()
        });
        match out {
            Some(v) => Ok(v),
            None if self.is_dead() => Err(SimError::Dead(self.name.clone())),
            None => Err(SimError::Stalled),
        }
    }

    fn act<T>(&self, fut: impl Future<Output = Result<T, RunError>>) -> Result<T, SimError> {
        match self.block_on(fut)? {
            Ok(v) => Ok(v),
            // Refused because the tab died under it.
            Err(_) if self.is_dead() => Err(SimError::Dead(self.name.clone())),
            Err(e) => Err(e.into()),
        }
    }

    /// The person acts on `run`: the next step of the simulation.
    fn person_acts(&self, run: &RunId) {
        let mut checker = lock(&self.checker);
        checker.person_acted(run);
        self.log.set_step(checker.next_step());
    }

    /// Open `session` in this tab: take its lease (kept until the tab
    /// closes), open its workspace, recover what another owner left running.
    pub fn open_session(&self, session: &str) -> Result<Vec<RunId>, SimError> {
        let session = SessionId::new(session)?;
        let opened = match self.block_on(self.assembly.open_session(&session))? {
            Ok(opened) => opened,
            Err(_) if self.is_dead() => return Err(SimError::Dead(self.name.clone())),
            Err(e) => return Err(e.into()),
        };
        lock(&self.checker).page_loaded(&opened.recovered);
        lock(&self.guards).push(opened.guard);
        Ok(opened.recovered)
    }

    /// Start a run in `session` with the wiring's run configuration (its
    /// lease is taken; refused with `RunError::Lease(Held)` while another
    /// live tab holds it).
    pub fn start(&self, session: &str, prompt: &str) -> Result<RunId, SimError> {
        self.start_with(session, prompt, self.run_config.clone())
    }

    pub fn start_with(
        &self,
        session: &str,
        prompt: &str,
        config: RunConfig,
    ) -> Result<RunId, SimError> {
        lock(&self.checker).forbid_raw_text(prompt);
        self.open_session(session)?;
        let id = SessionId::new(session)?;
        let run = self.act(self.runtime().start(&id, prompt, config))?;
        self.person_acts(&run);
        Ok(run)
    }

    /// Deep Research through the tab's assembly (S9): the start turn.
    pub fn start_research(
        &self,
        session: &str,
        topic: &str,
    ) -> Result<agent_assembly::ResearchStart, SimError> {
        self.open_session(session)?;
        let id = SessionId::new(session)?;
        let started = self.research(self.assembly.start_research(
            &id,
            topic,
            self.run_config.clone(),
        ))?;
        self.person_acts(&started.run);
        Ok(started)
    }

    /// Take a task as far as it goes without the person.
    pub fn advance_research(
        &self,
        session: &str,
        task: &agent_research::TaskId,
    ) -> Result<agent_research::view::ResearchView, SimError> {
        let id = SessionId::new(session)?;
        self.research(self.assembly.advance_research(&id, task))
    }

    /// The person decides the task's plan request; research goes on.
    pub fn decide_plan(
        &self,
        session: &str,
        task: &agent_research::TaskId,
        request: &RequestId,
        decision: agent_research::PlanDecision,
    ) -> Result<agent_research::view::ResearchView, SimError> {
        let id = SessionId::new(session)?;
        self.person_acts_on_research(&id);
        self.research(self.assembly.decide_plan(&id, task, request, decision))
    }

    /// The person's Resume of an interrupted task.
    pub fn resume_research(
        &self,
        session: &str,
        task: &agent_research::TaskId,
    ) -> Result<agent_research::view::ResearchView, SimError> {
        let id = SessionId::new(session)?;
        self.person_acts_on_research(&id);
        self.research(self.assembly.resume_research(&id, task))
    }

    /// The tasks of `session`, newest first (reads only).
    pub fn research_tasks(
        &self,
        session: &str,
    ) -> Result<Vec<agent_research::view::ResearchView>, SimError> {
        let id = SessionId::new(session)?;
        self.research(self.assembly.research_tasks(&id))
    }

    /// The person acts on a task: on every research run of the session.
    fn person_acts_on_research(&self, session: &SessionId) {
        let runs = self
            .block_on(self.runtime().runs())
            .ok()
            .and_then(Result::ok);
        let mut checker = lock(&self.checker);
        for run in runs.unwrap_or_default() {
            if &run.session == session && run.mode == agent_kernel::run::RunMode::Research {
                checker.person_acted(&run.id);
            }
        }
        self.log.set_step(checker.next_step());
    }

    fn research<T>(
        &self,
        fut: impl Future<Output = Result<T, agent_assembly::ResearchDeskError>>,
    ) -> Result<T, SimError> {
        match self.block_on(fut)? {
            Ok(v) => Ok(v),
            Err(_) if self.is_dead() => Err(SimError::Dead(self.name.clone())),
            Err(e) => Err(SimError::Research(e.to_string())),
        }
    }

    /// What a page load does: runs left `running` without a live lease
    /// become `interrupted`; nothing resumes by itself.
    pub fn recover(&self) -> Result<Vec<RunId>, SimError> {
        let recovered = self.act(self.runtime().recover())?;
        lock(&self.checker).page_loaded(&recovered);
        Ok(recovered)
    }

    /// The person's explicit resume.
    pub fn resume(&self, run: &RunId) -> Result<(), SimError> {
        self.person_acts(run);
        self.act(self.runtime().resume(run))
    }

    /// The person approves a pending approval.
    pub fn approve(&self, run: &RunId, request: &RequestId) -> Result<(), SimError> {
        self.person_acts(run);
        self.act(self.runtime().approve(run, request))
    }

    /// The person denies a pending approval.
    pub fn deny(&self, run: &RunId, request: &RequestId) -> Result<(), SimError> {
        self.person_acts(run);
        self.act(self.runtime().deny(run, request))
    }

    /// The person answers `ask_user`.
    pub fn respond(&self, run: &RunId, request: &RequestId, text: &str) -> Result<(), SimError> {
        lock(&self.checker).forbid_raw_text(text);
        self.person_acts(run);
        self.act(self.runtime().respond(run, request, text))
    }

    /// The person decides about a call whose effect is unknown; "retry
    /// anyway" allows the checker one more execution of it.
    pub fn decide(&self, run: &RunId, call: &CallId, choice: Choice) -> Result<(), SimError> {
        if choice == Choice::RetryAnyway {
            lock(&self.checker).retry_chosen(run, call);
        }
        self.person_acts(run);
        self.act(self.runtime().decide(run, call, choice))
    }

    /// The person stops the run (`cancelled` / `user_stopped`).
    pub fn stop(&self, run: &RunId) -> Result<(), SimError> {
        self.person_acts(run);
        self.act(self.assembly.stop(run))
    }

    /// The run as stored.
    pub fn run(&self, run: &RunId) -> Result<AgentRun, SimError> {
        let storage = self.storage.clone();
        let run = run.clone();
        let loaded = futures::executor::block_on(async move {
            agent_supervisor::store::load_run(&*storage, &run).await
        });
        Ok(loaded?.0)
    }

    /// Pending requests of the run.
    pub fn pending(&self, run: &RunId) -> Result<Vec<PendingRequest>, SimError> {
        let storage = self.storage.clone();
        let run = run.clone();
        futures::executor::block_on(async move {
            agent_supervisor::store::pending_of(&*storage, &run).await
        })
        .map_err(|e| SimError::Run(e.into()))
    }

    /// What the page shows of the run's pending requests: each once (S6.4);
    /// the checker sees what was shown.
    pub fn present_pending(&self, run: &RunId) -> Result<Vec<PendingRequest>, SimError> {
        let shown = self.act(self.runtime().present_pending(run))?;
        lock(&self.checker).shown(run, &shown);
        Ok(shown)
    }

    /// Act as `person` on `run` until it is final, waits for something the
    /// person does not answer, or the tab dies (`Err(Dead)`).
    pub fn settle(&self, run: &RunId, person: &Person) -> Result<RunStatus, SimError> {
        let mut answers = person.answers.iter().cycle();
        for _ in 0..24 {
            self.drive();
            if self.is_dead() {
                return Err(SimError::Dead(self.name.clone()));
            }
            let record = self.run(run)?;
            let pending = self.pending(run)?;
            let outcome = match record.status {
                RunStatus::AwaitingApproval => {
                    let Some(p) = pending
                        .iter()
                        .find(|p| matches!(p.kind, PendingKind::Approval { .. }))
                    else {
                        return Ok(record.status);
                    };
                    if person.approve {
                        self.approve(run, &p.id)
                    } else {
                        self.deny(run, &p.id)
                    }
                }
                RunStatus::AwaitingInput => {
                    let Some(p) = pending
                        .iter()
                        .find(|p| matches!(p.kind, PendingKind::Input { .. }))
                    else {
                        return Ok(record.status);
                    };
                    let answer = answers.next().map_or("yes", String::as_str);
                    self.respond(run, &p.id, answer)
                }
                RunStatus::Interrupted => {
                    if !self.is_online() {
                        // The person is back online before they resume.
                        self.raise(LifecycleEvent::Online);
                    }
                    let decision = pending.iter().find_map(|p| match &p.kind {
                        PendingKind::Decision { call_id, .. } => Some(call_id.clone()),
                        _ => None,
                    });
                    match decision {
                        Some(call) => {
                            // The person checks the target: done if the call
                            // reached its tool, otherwise retried.
                            let reached = lock(&self.checker)
                                .dispatches()
                                .iter()
                                .any(|d| &d.run == run && d.call == call);
                            let choice = if reached {
                                Choice::MarkDone
                            } else {
                                Choice::RetryAnyway
                            };
                            self.decide(run, &call, choice)
                        }
                        None => self.resume(run),
                    }
                }
                RunStatus::Running => {
                    // Nothing left to drive while `running`: its supervisor
                    // is gone (its lease lost); a reload would recover it.
                    self.act(self.runtime().recover_session(&record.session))
                        .map(|_| ())
                }
                status => return Ok(status),
            };
            // Any other refusal (busy, a decision pending, a lease) is the
            // runtime's answer to the person, not a failure of the tab.
            if let Err(SimError::Dead(name)) = outcome {
                return Err(SimError::Dead(name));
            }
        }
        Ok(self.run(run)?.status)
    }
}

/// How the simulated person answers.
#[derive(Debug, Clone)]
pub struct Person {
    /// Approve every approval (otherwise deny).
    pub approve: bool,
    /// Answers to `ask_user`, in turn (repeated); "yes" when empty.
    pub answers: Vec<String>,
}

impl Default for Person {
    fn default() -> Self {
        Person {
            approve: true,
            answers: Vec::new(),
        }
    }
}

/// One session of a simulation and the prompts of its runs, in order.
#[derive(Debug, Clone)]
pub struct SessionPlan {
    pub session: String,
    pub prompts: Vec<String>,
}

/// What each seed of [`run_seeds`] plays: sessions with their runs, the
/// person, and how many interruptions (kills and lifecycle events at
/// random commits and await points) a seed may have at most.
#[derive(Debug, Clone)]
pub struct SimPlan {
    pub sessions: Vec<SessionPlan>,
    pub person: Person,
    pub max_interruptions: u32,
}

impl Default for SimPlan {
    fn default() -> Self {
        SimPlan {
            sessions: vec![SessionPlan {
                session: "sim-session".into(),
                prompts: vec!["simulated prompt".into()],
            }],
            person: Person::default(),
            max_interruptions: 3,
        }
    }
}

/// What one seed found.
#[derive(Debug, Clone, Default)]
pub struct SeedReport {
    pub seed: u64,
    pub crash_points: u64,
    pub violations: Vec<Violation>,
    /// How many calls reached each tool.
    pub dispatches: BTreeMap<String, u64>,
    /// Each run's final status.
    pub runs: Vec<(RunId, RunStatus)>,
}

/// The interruption a seed draws for a tab.
fn draw(rng: &SeededEntropy) -> (At, Interruption) {
    let below = |n: u64| rng.next_u64() % n;
    let at = if below(2) == 0 {
        At::Commit(1 + below(14))
    } else {
        At::AfterPolls(1 + below(80))
    };
    let what = match below(6) {
        0..=2 => Interruption::Kill,
        3 => Interruption::Raise(LifecycleEvent::Offline),
        4 => Interruption::Raise(LifecycleEvent::PageHidden),
        _ => Interruption::Raise(LifecycleEvent::ExecutorLost),
    };
    (at, what)
}

/// Play `plan` for one seed over a fresh database at `path`: tabs are
/// killed or interrupted where the seed says, reloaded, and the person
/// acts until every run is final or waits for them; then the invariants
/// are checked.
pub fn simulate_seed(
    path: &Path,
    seed: u64,
    wiring: &SimWiring,
    plan: &SimPlan,
) -> Result<SeedReport, SimError> {
    let sim = TabSim::with_wiring(path, seed, wiring.clone())?;
    let rng = SeededEntropy::new(seed ^ 0x7ab5_5eed);
    let mut left = 1 + rng.next_u64() % u64::from(plan.max_interruptions.max(1));
    let mut crash_points = 0;
    let mut tab_no = 0u64;
    let mut open = |crash_points: &mut u64, old: Option<Tab>| -> Result<Tab, SimError> {
        if let Some(old) = old {
            *crash_points += old.interruptions();
            sim.check_stored();
            sim.expire_leases();
        }
        tab_no += 1;
        let tab = sim.open_tab(&format!("t{tab_no}"))?;
        if left > 0 {
            left -= 1;
            let (at, what) = draw(&rng);
            tab.interrupt_at(at, what);
        }
        Ok(tab)
    };
    let mut tab = open(&mut crash_points, None)?;
    let mut runs = Vec::new();
    let mut known: BTreeSet<RunId> = BTreeSet::new();
    for session in &plan.sessions {
        for prompt in &session.prompts {
            let mut run: Option<RunId> = None;
            for _ in 0..12 {
                if tab.is_dead() {
                    tab = open(&mut crash_points, Some(tab))?;
                    let _ = tab.recover();
                    if let Some(id) = &run {
                        let _ = tab.present_pending(id);
                    }
                    continue;
                }
                let id = match &run {
                    Some(id) => id.clone(),
                    None => match tab.start(&session.session, prompt) {
                        Ok(id) => id,
                        Err(SimError::Dead(_)) => {
                            // Killed before `start` answered: a new run in
                            // the database is this one.
                            run = sim
                                .runs()?
                                .into_iter()
                                .map(|r| r.id)
                                .find(|id| !known.contains(id));
                            continue;
                        }
                        Err(e) => {
                            lock(&sim.checker)
                                .violation(Rule::Harness, format!("cannot start a run: {e}"));
                            break;
                        }
                    },
                };
                known.insert(id.clone());
                run = Some(id.clone());
                match tab.settle(&id, &plan.person) {
                    Err(SimError::Dead(_)) => continue,
                    Err(e) => {
                        lock(&sim.checker).violation(Rule::Harness, e.to_string());
                        break;
                    }
                    Ok(status) if status.is_final() => break,
                    // Interrupted by a raised event and nothing more to do,
                    // or waiting for the person: one more round decides.
                    Ok(_) => {
                        if tab.interruptions() == 0 {
                            break;
                        }
                    }
                }
            }
            if let Some(id) = run {
                known.insert(id.clone());
                runs.push(id);
            }
        }
    }
    crash_points += tab.interruptions();
    tab.close();
    sim.check_stored();
    let mut finals = Vec::new();
    for id in &runs {
        sim.check_final(id);
        if let Ok(r) = sim.runs()
            && let Some(r) = r.into_iter().find(|r| &r.id == id)
        {
            finals.push((id.clone(), r.status));
        }
    }
    let checker = lock(&sim.checker);
    let mut dispatches: BTreeMap<String, u64> = BTreeMap::new();
    for d in checker.dispatches() {
        *dispatches.entry(d.tool.clone()).or_default() += 1;
    }
    Ok(SeedReport {
        seed,
        crash_points,
        violations: checker.violations().to_vec(),
        dispatches,
        runs: finals,
    })
}

/// Play `plan` for every seed of `seeds`, each over a fresh database in
/// `dir`; returns the summary (its `Display` is the one-line
/// `crash-sim: <seeds> seeds, <points> crash points, <n> violations`) and
/// the calls that reached each tool, over all seeds.
pub fn run_seeds(
    dir: &Path,
    seeds: std::ops::Range<u64>,
    wiring: &SimWiring,
    plan: &SimPlan,
) -> Result<(SimSummary, BTreeMap<String, u64>), SimError> {
    let mut summary = SimSummary::default();
    let mut dispatches: BTreeMap<String, u64> = BTreeMap::new();
    for seed in seeds {
        let path = dir.join(format!("seed-{seed}.sqlite3"));
        let report = simulate_seed(&path, seed, wiring, plan)?;
        for (tool, n) in report.dispatches {
            *dispatches.entry(tool).or_default() += n;
        }
        summary.add_seed(report.crash_points, report.violations);
        // Each seed's database is its own; keep the directory small.
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
    Ok((summary, dispatches))
}

/// A simulation described in a file, for test hosts that do not write
/// Rust (`agentrt sim`): the model's script, plugins pointing at the test
/// host's own servers, the sessions with their prompts, the person.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimFile {
    /// The scripted model (`{"turns": [...]}`, the supervisor's scripted format).
    pub model: serde_json::Value,
    #[serde(default)]
    pub plugins: Vec<PluginManifest>,
    #[serde(default)]
    pub always_on_plugins: Vec<String>,
    /// `permissive` (default) or `strict`.
    #[serde(default)]
    pub approval: agent_capabilities::ApprovalMode,
    pub sessions: Vec<SimFileSession>,
    #[serde(default)]
    pub person: SimFilePerson,
    #[serde(default = "default_interruptions")]
    pub max_interruptions: u32,
}

fn default_interruptions() -> u32 {
    3
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimFileSession {
    pub session: String,
    pub prompts: Vec<String>,
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimFilePerson {
    #[serde(default = "yes")]
    pub approve: bool,
    #[serde(default)]
    pub answers: Vec<String>,
}

fn yes() -> bool {
    true
}

impl Default for SimFilePerson {
    fn default() -> Self {
        SimFilePerson {
            approve: true,
            answers: Vec::new(),
        }
    }
}

impl SimFile {
    /// Parse a scenario file: JSON, or TOML when the name ends in `.toml`.
    pub fn load(path: &Path) -> Result<SimFile, SimError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SimError::Scenario(format!("cannot read {}: {e}", path.display())))?;
        let is_toml = path.extension().is_some_and(|e| e == "toml");
        if is_toml {
            toml::from_str(&text).map_err(|e| SimError::Scenario(e.to_string()))
        } else {
            serde_json::from_str(&text).map_err(|e| SimError::Scenario(e.to_string()))
        }
    }

    /// The wiring and plan the file describes.
    pub fn into_parts(self) -> Result<(SimWiring, SimPlan), SimError> {
        let mut wiring = SimWiring::scripted(&self.model.to_string())?;
        wiring.plugins = self.plugins;
        wiring.always_on_plugins = self.always_on_plugins;
        agent_assembly::check_always_on(
            wiring.plugins.iter().map(|p| p.id.as_str()),
            &wiring.always_on_plugins,
        )
        .map_err(|e| SimError::Scenario(e.to_string()))?;
        wiring.run_config.approval = self.approval;
        let plan = SimPlan {
            sessions: self
                .sessions
                .into_iter()
                .map(|s| SessionPlan {
                    session: s.session,
                    prompts: s.prompts,
                })
                .collect(),
            person: Person {
                approve: self.person.approve,
                answers: self.person.answers,
            },
            max_interruptions: self.max_interruptions,
        };
        Ok((wiring, plan))
    }
}

/// What `agentrt sim --report` writes.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SimReportFile {
    /// The one-line summary.
    pub summary: String,
    pub seeds: u64,
    pub crash_points: u64,
    pub violations: Vec<Violation>,
    /// Calls that reached each tool, over all seeds.
    pub dispatches: BTreeMap<String, u64>,
}

impl SimReportFile {
    pub fn new(summary: &SimSummary, dispatches: BTreeMap<String, u64>) -> SimReportFile {
        SimReportFile {
            summary: summary.to_string(),
            seeds: summary.seeds,
            crash_points: summary.crash_points,
            violations: summary.violations.clone(),
            dispatches,
        }
    }
}
