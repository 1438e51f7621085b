//! [`TabSim`]: one SQLite database, one manual clock and many tabs over
//! them; what can happen to a tab ([`At`], [`Interruption`]) and the
//! simulator's errors ([`SimError`]). Every call that reaches a tool is
//! observed here with the journal record durable at that moment.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use agent_assembly::{Assembly, Parts, plugin_registrations};
use agent_kernel::actor::{Inbox, spawn_actor};
use agent_kernel::host::{Executor, Host, Lifecycle, ManualClock, SeededEntropy, StorageExt};
use agent_kernel::memory::{MEMORY_HOST_START_WALL_MS, SimExecutor};
use agent_kernel::protocol::{ToolAddr, ToolMsg, ToolResult};
use agent_kernel::run::{AgentRun, RunStatus};
use agent_kernel::{OwnerId, RunId};
use agent_supervisor::sim::tools::ToolLog;
use agent_supervisor::sim::{Checker, Dispatch};
use agent_tools::ToolRegistration;

use crate::host::TokioExecutor;
use crate::process::Liveness;
use crate::sqlite::SqliteStorage;

use super::error::SimError;
use super::tab::{Tab, TabState, lock};
use super::wiring::SimWiring;

/// One database, one clock, many tabs.
pub struct TabSim {
    pub(crate) path: PathBuf,
    pub(crate) clock: ManualClock,
    pub(crate) seed: u64,
    pub(crate) wiring: SimWiring,
    pub(crate) log: ToolLog,
    pub(crate) tabs: AtomicU64,
    pub(crate) checker: Arc<Mutex<Checker>>,
    /// Where plugins run (their requests are real): made on first use.
    pub(crate) external: Mutex<Option<tokio::runtime::Runtime>>,
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

    pub(crate) fn storage(&self) -> Result<SqliteStorage, SimError> {
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

    pub(crate) fn external(&self) -> Result<tokio::runtime::Handle, SimError> {
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

/// Wrap a tool's address: every call is observed (with the journal record
/// durable at that moment) before it reaches the tool, and, for tools that
/// run outside the tab (`in_flight`), counted while it is in flight.
pub(crate) fn observe_tool(
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
pub(crate) struct InFlight(Arc<AtomicU64>);

impl InFlight {
    pub(crate) fn enter(counter: Arc<AtomicU64>) -> InFlight {
        counter.fetch_add(1, Ordering::SeqCst);
        InFlight(counter)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
