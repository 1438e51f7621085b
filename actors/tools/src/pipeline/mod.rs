//! The tools actor: one per host. It answers `ToolsMsg` (Schemas, Prepare,
//! Dispatch, CancelRun) from the registry, runs the discovery tools `search_tools` and
//! `load_tools` itself, and forwards checked invocations to tool actors,
//! wrapping their results (S5.2–S5.4, S5.8). It tracks which tool actors
//! hold each run's calls, so that `CancelRun` (the run was stopped) reaches
//! exactly them as `ToolMsg::Cancel`. The registry changes only
//! through this actor's control handle, so no lock guards its state.
//!
//! This module owns the actor, its handle and what each run sees; preparing
//! and dispatching a call is in `calls`, the discovery tools in
//! `discovery_tools`.

// Refusals are `ToolResult`s because the protocol answers `Prepare` with
// `Result<PreparedCall, ToolResult>`: they go to the model as they are.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use futures::StreamExt;
use futures::future::Either;

use agent_capabilities::{Fingerprint, Origin};
use agent_kernel::actor::{ActorError, Addr, Reply, mailbox};
use agent_kernel::host::{Clock, Executor, Storage};
use agent_kernel::ids::RunId;
use agent_kernel::maybe_send::boxed;
use agent_kernel::protocol::{
    ModelToolSchema, ResultSpill, RunToolConfig, ToolAddr, ToolDefinition, ToolMsg, ToolResult,
    ToolsAddr, ToolsMsg,
};
use agent_kernel::run::RunMode;

use crate::codes;
use crate::discovery::SearchIndex;
use crate::loaded::{self, LoadedToolsError};
use crate::registry::{
    Exposure, MAX_SCHEMAS_PER_REQUEST, RegisteredTool, Registry, RegistryError, RegistrySnapshot,
    ToolRegistration,
};
use crate::validate::{ArgumentError, CompiledSchema};

mod calls;
mod discovery_tools;

use discovery_tools::discovery_definitions;

/// How many runs' loaded tools the actor keeps in memory; the oldest run is
/// forgotten first. With [`ToolsOptions::storage`] its loaded tools are read
/// back when it is seen again; without, its model sees only the always-on
/// tools again.
pub const MAX_TRACKED_RUNS: usize = 1024;

/// Settings of the tools actor.
pub struct ToolsOptions {
    /// Where large results go (S5.8); without it they are truncated.
    pub spill: Option<Arc<dyn ResultSpill>>,
    /// Where each run's `load_tools` set is kept (`Table::Meta`, key
    /// `tools/loaded/<run>`, see [`crate::loaded`]), so it survives a page
    /// reload or process restart: a run the actor has not seen since it
    /// started is read back from here. Without it the set lives in memory
    /// only and a restarted host answers `tool_not_loaded` until the model
    /// loads the tools again. Hosts pass their session storage.
    pub storage: Option<Arc<dyn Storage>>,
    pub mailbox: usize,
}

impl Default for ToolsOptions {
    fn default() -> Self {
        ToolsOptions {
            spill: None,
            storage: None,
            mailbox: 64,
        }
    }
}

/// Changes and inspection of the registry, sent through [`ToolsHandle`].
enum Control {
    Register(Vec<ToolRegistration>, Reply<Result<(), RegistryError>>),
    Replace(
        Origin,
        Vec<ToolRegistration>,
        Reply<Result<(), RegistryError>>,
    ),
    Remove(Origin, Reply<Result<usize, RegistryError>>),
    Snapshot(Reply<RegistrySnapshot>),
    Loaded(RunId, Reply<Result<BTreeSet<String>, LoadedToolsError>>),
}

/// A registry change failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Actor(#[from] ActorError),
    #[error(transparent)]
    LoadedTools(#[from] LoadedToolsError),
}

/// The tools actor's handles: `addr` for runs (ToolsMsg), the methods for
/// the host (registry changes).
#[derive(Clone, Debug)]
pub struct ToolsHandle {
    pub addr: ToolsAddr,
    control: Addr<Control>,
}

impl ToolsHandle {
    /// Register tools atomically.
    pub async fn register(&self, tools: Vec<ToolRegistration>) -> Result<(), ControlError> {
        Ok(self.control.ask(|r| Control::Register(tools, r)).await??)
    }
    /// Replace every tool of `origin` (a plugin's configuration changed).
    pub async fn replace_provider(
        &self,
        origin: Origin,
        tools: Vec<ToolRegistration>,
    ) -> Result<(), ControlError> {
        Ok(self
            .control
            .ask(|r| Control::Replace(origin, tools, r))
            .await??)
    }
    /// Remove every tool of `origin`.
    pub async fn remove_provider(&self, origin: Origin) -> Result<usize, ControlError> {
        Ok(self.control.ask(|r| Control::Remove(origin, r)).await??)
    }
    /// Names, origins and fingerprints of every registered tool.
    pub async fn snapshot(&self) -> Result<RegistrySnapshot, ControlError> {
        Ok(self.control.ask(Control::Snapshot).await?)
    }
    /// The discoverable tools loaded for `run` (read back from storage when
    /// the actor has not seen the run since it started).
    pub async fn loaded(&self, run: RunId) -> Result<BTreeSet<String>, ControlError> {
        Ok(self.control.ask(|r| Control::Loaded(run, r)).await??)
    }
}

#[derive(Default)]
struct RunState {
    config: RunToolConfig,
    /// Discoverable tools loaded with `load_tools`.
    loaded: BTreeSet<String>,
    /// The fingerprint of each definition as the model was last shown it.
    shown: BTreeMap<String, Fingerprint>,
}

struct Internal {
    def: ToolDefinition,
    fingerprint: Fingerprint,
    schema: CompiledSchema,
    shown: ModelToolSchema,
}

/// What a Prepare or Dispatch resolved a name to.
enum Resolved<'a> {
    Discovery(&'a Internal),
    Registered(&'a RegisteredTool),
}

impl Resolved<'_> {
    fn def(&self) -> &ToolDefinition {
        match self {
            Resolved::Discovery(i) => &i.def,
            Resolved::Registered(t) => &t.definition,
        }
    }
    fn fingerprint(&self) -> &Fingerprint {
        match self {
            Resolved::Discovery(i) => &i.fingerprint,
            Resolved::Registered(t) => &t.fingerprint,
        }
    }
    fn shown(&self) -> &ModelToolSchema {
        match self {
            Resolved::Discovery(i) => &i.shown,
            Resolved::Registered(t) => &t.shown,
        }
    }
    fn schema(&self) -> &CompiledSchema {
        match self {
            Resolved::Discovery(i) => &i.schema,
            Resolved::Registered(t) => &t.schema,
        }
    }
    fn trusted_external(&self) -> bool {
        match self {
            Resolved::Discovery(_) => true,
            Resolved::Registered(t) => t.trusted_external,
        }
    }
    /// An MCP function the configuration does not declare (S6.1).
    fn unknown_function(&self) -> bool {
        match self {
            Resolved::Discovery(_) => false,
            Resolved::Registered(t) => t.unknown_function,
        }
    }
}

struct ToolsActor {
    registry: Registry,
    discovery: BTreeMap<String, Internal>,
    index: Option<(u64, SearchIndex)>,
    runs: BTreeMap<RunId, RunState>,
    run_order: VecDeque<RunId>,
    clock: Arc<dyn Clock>,
    executor: Arc<dyn Executor>,
    spill: Option<Arc<dyn ResultSpill>>,
    storage: Option<Arc<dyn Storage>>,
    /// The tool actors holding a dispatched call, by run and dispatch number:
    /// where `CancelRun` sends `ToolMsg::Cancel`.
    in_flight: BTreeMap<RunId, BTreeMap<u64, ToolAddr>>,
    next_dispatch: u64,
    /// Each dispatch task reports here when its call came back.
    ended: async_channel::Sender<(RunId, u64)>,
}

/// Spawn the tools actor with a filled registry.
pub fn spawn_tools(
    executor: Arc<dyn Executor>,
    clock: Arc<dyn Clock>,
    registry: Registry,
    options: ToolsOptions,
) -> ToolsHandle {
    let mut discovery = BTreeMap::new();
    for def in discovery_definitions() {
        // Both are fixed, valid definitions: compiling and fingerprinting
        // them cannot fail (covered by the unit test below).
        if let (Ok(schema), Ok(fingerprint)) =
            (CompiledSchema::builtin(&def.parameters), def.fingerprint())
        {
            discovery.insert(
                def.name.clone(),
                Internal {
                    shown: ModelToolSchema::of(&def, fingerprint.clone()),
                    def,
                    fingerprint,
                    schema,
                },
            );
        }
    }
    let (ended_tx, ended_rx) = async_channel::unbounded();
    let actor = ToolsActor {
        registry,
        discovery,
        index: None,
        runs: BTreeMap::new(),
        run_order: VecDeque::new(),
        clock,
        executor: executor.clone(),
        spill: options.spill,
        storage: options.storage,
        in_flight: BTreeMap::new(),
        next_dispatch: 0,
        ended: ended_tx,
    };
    let (control, control_inbox) = mailbox::<Control>("tools-control", 16);
    let addr = agent_kernel::spawn_actor(
        &*executor,
        "tools",
        options.mailbox,
        None,
        move |inbox: agent_kernel::Inbox<ToolsMsg>| actor.run(inbox, control_inbox, ended_rx),
    );
    ToolsHandle { addr, control }
}

fn error_for(e: &ArgumentError, tool: &str) -> ToolResult {
    let code = match e {
        ArgumentError::TooLarge { .. } => codes::ARGUMENTS_TOO_LARGE,
        _ => codes::INVALID_ARGUMENTS,
    };
    ToolResult::error(code, e.to_string(), tool)
}

impl ToolsActor {
    async fn run(
        mut self,
        inbox: agent_kernel::Inbox<ToolsMsg>,
        control: agent_kernel::Inbox<Control>,
        ended: async_channel::Receiver<(RunId, u64)>,
    ) -> Result<(), std::convert::Infallible> {
        let mut messages = std::pin::pin!(futures::stream::select(
            futures::stream::select(inbox.map(Either::Left), control.map(Either::Right))
                .map(Either::Left),
            ended.map(Either::Right),
        ));
        while let Some(msg) = messages.next().await {
            match msg {
                Either::Left(Either::Left(m)) => self.handle(m).await,
                Either::Left(Either::Right(c)) => self.control(c).await,
                Either::Right((run, dispatch)) => {
                    if let Some(calls) = self.in_flight.get_mut(&run) {
                        calls.remove(&dispatch);
                        if calls.is_empty() {
                            self.in_flight.remove(&run);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Tell every tool actor holding a call of `run` that the run stopped.
    /// The sends run on their own task: a busy tool's full mailbox must not
    /// hold up this actor.
    fn cancel_run(&mut self, run: RunId) {
        let mut holders: Vec<ToolAddr> = Vec::new();
        for addr in self
            .in_flight
            .get(&run)
            .into_iter()
            .flat_map(|c| c.values())
        {
            if !holders.iter().any(|h| h.same_actor(addr)) {
                holders.push(addr.clone());
            }
        }
        tracing::debug!(run = %run, tool_actors = holders.len(), "cancelling the run's calls");
        if holders.is_empty() {
            return;
        }
        self.executor.spawn(boxed(async move {
            for addr in holders {
                // A tool actor that stopped has no call left to cancel.
                let _ = addr.send(ToolMsg::Cancel { run: run.clone() }).await;
            }
        }));
    }

    async fn control(&mut self, msg: Control) {
        match msg {
            Control::Register(tools, reply) => reply.send(self.registry.register_all(tools)),
            Control::Replace(origin, tools, reply) => {
                reply.send(self.registry.replace_provider(&origin, tools))
            }
            Control::Remove(origin, reply) => reply.send(self.registry.remove_provider(&origin)),
            Control::Snapshot(reply) => reply.send(self.registry.snapshot()),
            Control::Loaded(run, reply) => {
                let result = self.restore(&run).await.map(|()| {
                    self.runs
                        .get(&run)
                        .map(|r| r.loaded.clone())
                        .unwrap_or_default()
                });
                reply.send(result)
            }
        }
    }

    /// Read `run`'s loaded tools back from storage when the actor does not
    /// hold the run (first message since a restart, or evicted). The restored
    /// names pass the same filters as any loaded name: the registry's current
    /// definitions, the run's mode and allowlist, and the 64-schema cap
    /// (`schema_list`, used by Schemas and Prepare). Each keeps the
    /// fingerprint it was loaded with as the one the model was shown, so a
    /// definition changed since is refused with `definition_changed` until
    /// the next Schemas shows the new one. (A definition that changed and was
    /// already re-shown before the restart is refused once more: the record
    /// keeps load-time fingerprints. That errs on the side of nothing running.)
    async fn restore(&mut self, run: &RunId) -> Result<(), LoadedToolsError> {
        if self.runs.contains_key(run) {
            return Ok(());
        }
        let Some(storage) = self.storage.clone() else {
            return Ok(());
        };
        let Some(tools) = loaded::read(&*storage, run).await? else {
            return Ok(());
        };
        tracing::debug!(run = %run, tools = tools.len(), "loaded tools restored from storage");
        let state = self.run_state(run);
        for (name, fingerprint) in tools {
            state.loaded.insert(name.clone());
            state.shown.insert(name, fingerprint);
        }
        Ok(())
    }

    fn run_state(&mut self, run: &RunId) -> &mut RunState {
        if !self.runs.contains_key(run) {
            if self.runs.len() >= MAX_TRACKED_RUNS
                && let Some(oldest) = self.run_order.pop_front()
            {
                self.runs.remove(&oldest);
            }
            self.run_order.push_back(run.clone());
        }
        self.runs.entry(run.clone()).or_default()
    }

    async fn handle(&mut self, msg: ToolsMsg) {
        match msg {
            ToolsMsg::Schemas { run, config, reply } => {
                let restored = self.restore(&run).await;
                let _span = tracing::info_span!("tools.schemas", run = %run).entered();
                match restored {
                    Ok(()) => reply.send(self.schemas(&run, config)),
                    Err(e) => {
                        // No error channel here: the model sees the always-on
                        // tools, and the next Prepare or load_tools of the run
                        // reports the error as a tool result.
                        tracing::warn!(error = %e, "loaded tools unreadable; showing the always-on tools only");
                        reply.send(self.schema_list(&config, &BTreeSet::new()).0);
                    }
                }
            }
            ToolsMsg::Prepare {
                run,
                session,
                call,
                attempt,
                config,
                reply,
            } => {
                let restored = self.restore(&run).await;
                let _span = tracing::info_span!("tools.prepare", run = %run, call = %call.call_id, tool = %call.name).entered();
                let result = match restored {
                    Ok(()) => self.prepare(&run, &session, &call, attempt, config),
                    Err(e) => Err(ToolResult::error(
                        codes::LOADED_TOOLS_UNAVAILABLE,
                        format!("{e}; nothing ran"),
                        &call.name,
                    )),
                };
                match &result {
                    Ok(p) => tracing::debug!(args_hash = %p.draft.args_hash, "prepared"),
                    Err(ToolResult::Error(e)) => tracing::info!(code = %e.code, "prepare refused"),
                    Err(_) => {}
                }
                reply.send(result);
            }
            ToolsMsg::Dispatch { invocation, reply } => {
                let span = tracing::info_span!(
                    "tools.dispatch",
                    run = %invocation.draft.run,
                    call = %invocation.draft.call_id,
                    tool = %invocation.draft.tool,
                    attempt = invocation.draft.attempt,
                );
                let inner = span.clone();
                tracing::Instrument::instrument(self.dispatch(invocation, reply, inner), span)
                    .await;
            }
            ToolsMsg::CancelRun { run } => self.cancel_run(run),
        }
    }

    /// Discoverable registered tools the run may see.
    fn discoverable_visible(&self, config: &RunToolConfig, tool: &RegisteredTool) -> bool {
        tool.exposure == Exposure::Discoverable && tool.offered_to(config)
    }

    fn discovery_on(&self, config: &RunToolConfig) -> bool {
        config.mode == RunMode::Agent
            && self
                .registry
                .iter()
                .any(|t| self.discoverable_visible(config, t))
    }

    /// The always-on schemas (built-ins, then the discovery tools) of a run.
    fn always_on(&self, config: &RunToolConfig) -> Vec<Resolved<'_>> {
        let mut out: Vec<Resolved<'_>> = self
            .registry
            .iter()
            .filter(|t| t.exposure == Exposure::AlwaysOn && t.offered_to(config))
            .map(Resolved::Registered)
            .collect();
        if self.discovery_on(config) {
            out.extend(self.discovery.values().map(Resolved::Discovery));
        }
        out
    }

    /// The schemas of a run with `loaded` tools: the always-on ones, then
    /// each loaded tool still registered and visible, up to the 64-schema
    /// cap. Also returns the loaded names that made it in.
    fn schema_list(
        &self,
        config: &RunToolConfig,
        loaded: &BTreeSet<String>,
    ) -> (Vec<ModelToolSchema>, BTreeSet<String>) {
        let mut list: Vec<ModelToolSchema> = self
            .always_on(config)
            .iter()
            .map(|r| r.shown().clone())
            .collect();
        let mut still_loaded = BTreeSet::new();
        for name in loaded {
            let Some(t) = self.registry.get(name) else {
                continue;
            };
            if !self.discoverable_visible(config, t) {
                continue;
            }
            if list.len() >= MAX_SCHEMAS_PER_REQUEST {
                tracing::warn!(tool = %name, "loaded tool dropped: the request is at its schema limit");
                continue;
            }
            still_loaded.insert(name.clone());
            list.push(t.shown.clone());
        }
        (list, still_loaded)
    }

    fn schemas(&mut self, run: &RunId, config: RunToolConfig) -> Vec<ModelToolSchema> {
        let loaded = self
            .runs
            .get(run)
            .map(|r| r.loaded.clone())
            .unwrap_or_default();
        let (list, still_loaded) = self.schema_list(&config, &loaded);
        let state = self.run_state(run);
        state.config = config;
        state.loaded = still_loaded;
        state.shown = list
            .iter()
            .map(|s| (s.name.clone(), s.fingerprint.clone()))
            .collect();
        list
    }
}
