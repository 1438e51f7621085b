//! The tools actor: one per host. It answers `ToolsMsg` (Schemas, Prepare,
//! Dispatch, CancelRun) from the registry, runs the discovery tools `search_tools` and
//! `load_tools` itself, and forwards checked invocations to tool actors,
//! wrapping their results (S5.2–S5.4, S5.8). It tracks which tool actors
//! hold each run's calls, so that `CancelRun` (the run was stopped) reaches
//! exactly them as `ToolMsg::Cancel`. The registry changes only
//! through this actor's control handle, so no lock guards its state.

// Refusals are `ToolResult`s because the protocol answers `Prepare` with
// `Result<PreparedCall, ToolResult>`: they go to the model as they are.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use futures::StreamExt;
use futures::future::Either;
use serde::Deserialize;
use serde_json::{Value, json};

use agent_capabilities::{
    ApprovalIdentity, EffectSet, Fingerprint, Idempotency, Origin, PolicyInput, Sensitivity, Trust,
    decide,
};
use agent_kernel::actor::{ActorError, Addr, Reply, mailbox};
use agent_kernel::host::{Clock, Executor, Storage};
use agent_kernel::ids::{RunId, SessionId};
use agent_kernel::journal::idempotency_key;
use agent_kernel::maybe_send::boxed;
use agent_kernel::protocol::{
    InvocationDraft, ModelToolSchema, PreparedCall, Provenance, ResultSpill, RunToolConfig,
    TargetRule, ToolAddr, ToolCall, ToolDefinition, ToolInvocation, ToolMsg, ToolResult,
    ToolSuccess, ToolsAddr, ToolsMsg,
};
use agent_kernel::run::RunMode;

use crate::codes;
use crate::discovery::{
    DEFAULT_SEARCH_LIMIT, LoadError, MAX_QUERY_BYTES, MAX_SEARCH_LIMIT, SearchDoc, SearchIndex,
    plan_load,
};
use crate::envelope::{CallSite, wrap};
use crate::gate::{check_draft, precheck_capability, verify_capability};
use crate::loaded::{self, LoadedToolsError};
use crate::registry::{
    Exposure, MAX_SCHEMAS_PER_REQUEST, RegisteredTool, Registry, RegistryError, RegistrySnapshot,
    ToolRegistration,
};
use crate::validate::{ArgumentError, CompiledSchema, derive_target, parse_arguments};

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

fn discovery_definitions() -> Vec<ToolDefinition> {
    let base = |name: &str, description: &str, parameters: Value| ToolDefinition {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters,
        origin: Origin::Builtin,
        provider: None,
        effects: EffectSet::new(),
        idempotency: Idempotency::Idempotent,
        sensitivity: Sensitivity::Public,
        target: TargetRule::None,
        annotations: None,
    };
    vec![
        base(
            "search_tools",
            "Search the plugin and MCP tools that can be loaded, by what they do. Returns names and short descriptions, best match first; load the ones you need with load_tools.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_BYTES,
                              "description": "What the tool should do, in a few words."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_LIMIT,
                              "description": "How many results (default 5)."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        ),
        base(
            "load_tools",
            "Load tools found with search_tools by their exact names, so that you can call them from the next step on. At most 64 tool schemas can be available at once.",
            json!({
                "type": "object",
                "properties": {
                    "names": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 64},
                              "minItems": 1, "maxItems": MAX_SCHEMAS_PER_REQUEST, "uniqueItems": true}
                },
                "required": ["names"],
                "additionalProperties": false
            }),
        ),
    ]
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

fn allowed(config: &RunToolConfig, name: &str) -> bool {
    config.allowlist.as_ref().is_none_or(|a| a.contains(name))
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
        tool.exposure == Exposure::Discoverable
            && tool.in_mode(config.mode)
            && allowed(config, &tool.definition.name)
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
            .filter(|t| {
                t.exposure == Exposure::AlwaysOn
                    && t.in_mode(config.mode)
                    && allowed(config, &t.definition.name)
            })
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

    fn resolve(
        &self,
        name: &str,
        config: &RunToolConfig,
        loaded: &BTreeSet<String>,
    ) -> Result<Resolved<'_>, ToolResult> {
        if let Some(internal) = self.discovery.get(name) {
            if self.discovery_on(config) {
                return Ok(Resolved::Discovery(internal));
            }
            return Err(ToolResult::error(
                codes::TOOL_NOT_ALLOWED,
                format!(
                    "{name} is not available in this run (no loadable tools in this mode and allowlist)"
                ),
                name,
            ));
        }
        let Some(tool) = self.registry.get(name) else {
            return Err(ToolResult::error(
                codes::UNKNOWN_TOOL,
                format!(
                    "there is no tool named {name:?}; use one of the tools you were given, or search_tools to find more"
                ),
                name,
            ));
        };
        if !tool.in_mode(config.mode) || !allowed(config, name) {
            return Err(ToolResult::error(
                codes::TOOL_NOT_ALLOWED,
                format!("tool {name} is not available in this run's mode or allowlist"),
                name,
            ));
        }
        if tool.exposure == Exposure::Discoverable && !loaded.contains(name) {
            return Err(ToolResult::error(
                codes::TOOL_NOT_LOADED,
                format!("tool {name} is not loaded; call load_tools with [\"{name}\"] first"),
                name,
            ));
        }
        Ok(Resolved::Registered(tool))
    }

    fn prepare(
        &mut self,
        run: &RunId,
        session: &SessionId,
        call: &ToolCall,
        attempt: u32,
        config: RunToolConfig,
    ) -> Result<PreparedCall, ToolResult> {
        let (loaded, shown) = {
            let state = self.run_state(run);
            state.config = config.clone();
            (state.loaded.clone(), state.shown.get(&call.name).cloned())
        };
        // The same cap and visibility rules as the schemas the model is shown
        // (a set restored from storage has not passed through Schemas yet).
        let loaded = self.schema_list(&config, &loaded).1;
        let (def, fingerprint, trusted_external, unknown_function, schema) = {
            let resolved = self.resolve(&call.name, &config, &loaded)?;
            (
                resolved.def().clone(),
                resolved.fingerprint().clone(),
                resolved.trusted_external(),
                resolved.unknown_function(),
                resolved.schema().clone(),
            )
        };

        // The model acts on the definition it was shown: if that changed
        // (a rug pull), refuse; the next Schemas shows the new definition,
        // whose new identity the policy asks about again (S6.2).
        if let Some(shown) = shown
            && shown != fingerprint
        {
            self.run_state(run)
                .shown
                .insert(call.name.clone(), fingerprint.clone());
            return Err(ToolResult::error(
                codes::DEFINITION_CHANGED,
                format!(
                    "the definition of {} changed after it was shown (fingerprint {shown} is now {fingerprint}); nothing ran. Its new definition needs approval again",
                    def.name
                ),
                &def.name,
            ));
        }

        let args = parse_arguments(&call.arguments).map_err(|e| error_for(&e, &def.name))?;
        schema
            .check(&args.value)
            .map_err(|e| error_for(&e, &def.name))?;
        let (target, scope) = derive_target(&def.target, &args.value)
            .map_err(|e| ToolResult::error(e.code(), e.to_string(), &def.name))?;
        let draft = InvocationDraft {
            run: run.clone(),
            session: session.clone(),
            call_id: call.call_id.clone(),
            tool: def.name.clone(),
            fingerprint: fingerprint.clone(),
            arguments: args.value,
            args_hash: args.hash,
            effects: def.effects.clone(),
            idempotency: def.idempotency,
            sensitivity: def.sensitivity,
            origin: def.origin.clone(),
            provider: def.provider.clone(),
            target: target.clone(),
            scope: scope.clone(),
            attempt,
            idempotency_key: idempotency_key(run, &call.call_id),
        };
        let identity = ApprovalIdentity {
            origin: def.origin.clone(),
            provider: def.provider.clone(),
            tool: def.name.clone(),
            fingerprint,
            effects: def.effects.clone(),
            scope,
        };
        let target_summary = target.summary();
        let decision = decide(
            config.approval,
            &PolicyInput {
                identity: identity.clone(),
                allowed: true,
                trusted_external,
                unknown_mcp_function: unknown_function,
                target_summary: target_summary.clone(),
            },
        );
        Ok(PreparedCall {
            draft,
            decision,
            identity,
            target_summary,
        })
    }

    async fn dispatch(
        &mut self,
        invocation: ToolInvocation,
        reply: Reply<ToolResult>,
        span: tracing::Span,
    ) {
        let name = invocation.draft.tool.clone();
        let now = self.clock.wall_ms();
        let run_config = self
            .runs
            .get(&invocation.draft.run)
            .map(|r| r.config.clone())
            .unwrap_or_default();
        let kind = {
            let resolved = if let Some(internal) = self.discovery.get(&name) {
                Resolved::Discovery(internal)
            } else if let Some(tool) = self.registry.get(&name) {
                Resolved::Registered(tool)
            } else {
                reply.send(ToolResult::error(
                    codes::UNKNOWN_TOOL,
                    format!("tool {name:?} is no longer registered; nothing ran"),
                    &name,
                ));
                return;
            };
            if let Err(refusal) = check_draft(
                &invocation.draft,
                resolved.def(),
                resolved.fingerprint(),
                resolved.schema(),
            ) {
                reply.send(refusal);
                return;
            }
            match resolved {
                Resolved::Discovery(internal) => Either::Left(internal.def.clone()),
                Resolved::Registered(tool) => {
                    Either::Right((tool.addr.clone(), tool.definition.clone()))
                }
            }
        };
        let site = CallSite {
            session: invocation.draft.session.clone(),
            run: invocation.draft.run.clone(),
            call: invocation.draft.call_id.clone(),
        };
        match kind {
            Either::Left(def) => {
                // Executed here, so this is the authoritative verification.
                if let Err(refusal) = verify_capability(&invocation, now) {
                    reply.send(refusal);
                    return;
                }
                if let Err(e) = self.restore(&invocation.draft.run).await {
                    reply.send(ToolResult::error(
                        codes::LOADED_TOOLS_UNAVAILABLE,
                        format!("{e}; nothing was loaded"),
                        &def.name,
                    ));
                    return;
                }
                let raw = self.run_discovery(&invocation, &run_config).await;
                reply.send(wrap(raw, &def, &site, self.spill.as_ref()).await);
            }
            Either::Right((addr, def)) => {
                if let Err(refusal) = precheck_capability(&invocation, now) {
                    reply.send(refusal);
                    return;
                }
                let spill = self.spill.clone();
                let read_only = agent_capabilities::is_read_only(&def.effects);
                self.next_dispatch += 1;
                let dispatch = self.next_dispatch;
                let run = invocation.draft.run.clone();
                self.in_flight
                    .entry(run.clone())
                    .or_default()
                    .insert(dispatch, addr.clone());
                let ended = self.ended.clone();
                let task = async move {
                    let raw = match addr
                        .ask(|r| ToolMsg::Invoke {
                            invocation,
                            reply: r,
                        })
                        .await
                    {
                        Ok(result) => result,
                        Err(e) => {
                            let maybe = matches!(e, ActorError::NoReply { .. }) && !read_only;
                            let mut failure = ToolResult::error(
                                codes::TOOL_UNAVAILABLE,
                                format!(
                                    "{e}; {}",
                                    if maybe {
                                        "the effect may have happened"
                                    } else {
                                        "nothing ran"
                                    }
                                ),
                                &def.name,
                            );
                            if let ToolResult::Error(f) = &mut failure {
                                f.effect_may_have_happened = maybe;
                            }
                            failure
                        }
                    };
                    let wrapped = wrap(raw, &def, &site, spill.as_ref()).await;
                    tracing::debug!(success = wrapped.is_success(), "dispatched");
                    reply.send(wrapped);
                    // The actor may have stopped: then nothing tracks the call.
                    let _ = ended.send((run, dispatch)).await;
                };
                self.executor
                    .spawn(boxed(tracing::Instrument::instrument(task, span)));
            }
        }
    }

    fn index(&mut self) -> &SearchIndex {
        let generation = self.registry.generation();
        if self.index.as_ref().is_none_or(|(g, _)| *g != generation) {
            let docs = self
                .registry
                .iter()
                .filter(|t| t.exposure == Exposure::Discoverable)
                .map(|t| SearchDoc {
                    name: t.definition.name.clone(),
                    provider: t.definition.provider.clone().unwrap_or_default(),
                    description: t.definition.description.clone(),
                })
                .collect();
            self.index = Some((generation, SearchIndex::build(docs)));
        }
        match &self.index {
            Some((_, idx)) => idx,
            None => unreachable!("the index was built just above"),
        }
    }

    async fn run_discovery(&mut self, inv: &ToolInvocation, config: &RunToolConfig) -> ToolResult {
        let draft = &inv.draft;
        let ok = |content: Value, trust: Trust| {
            ToolResult::Success(ToolSuccess {
                content,
                trust,
                provenance: Provenance {
                    origin: "builtin".into(),
                    tool: draft.tool.clone(),
                    ..Provenance::default()
                },
                references: Vec::new(),
                receipts: Vec::new(),
            })
        };
        match draft.tool.as_str() {
            "search_tools" => {
                #[derive(Deserialize)]
                struct Args {
                    query: String,
                    limit: Option<usize>,
                }
                let Ok(args) = serde_json::from_value::<Args>(draft.arguments.clone()) else {
                    return ToolResult::error(
                        codes::INVALID_ARGUMENTS,
                        "search_tools needs a query",
                        &draft.tool,
                    );
                };
                let limit = args
                    .limit
                    .unwrap_or(DEFAULT_SEARCH_LIMIT)
                    .clamp(1, MAX_SEARCH_LIMIT);
                let visible: BTreeSet<String> = self
                    .registry
                    .iter()
                    .filter(|t| self.discoverable_visible(config, t))
                    .map(|t| t.definition.name.clone())
                    .collect();
                let loaded = self
                    .runs
                    .get(&draft.run)
                    .map(|r| r.loaded.clone())
                    .unwrap_or_default();
                let hits = self
                    .index()
                    .search(&args.query, limit, |n| visible.contains(n));
                let results: Vec<Value> = hits
                    .into_iter()
                    .map(|h| {
                        json!({
                            "name": h.name,
                            "provider": h.provider,
                            "description": h.description,
                            "loaded": loaded.contains(&h.name),
                        })
                    })
                    .collect();
                // Descriptions are written by plugin authors: data, not instructions.
                ok(json!({ "results": results }), Trust::ExternalUntrusted)
            }
            "load_tools" => {
                #[derive(Deserialize)]
                struct Args {
                    names: Vec<String>,
                }
                let Ok(args) = serde_json::from_value::<Args>(draft.arguments.clone()) else {
                    return ToolResult::error(
                        codes::INVALID_ARGUMENTS,
                        "load_tools needs names",
                        &draft.tool,
                    );
                };
                let always_on: BTreeSet<String> = self
                    .always_on(config)
                    .iter()
                    .map(|r| r.def().name.clone())
                    .collect();
                let loaded = self
                    .runs
                    .get(&draft.run)
                    .map(|r| r.loaded.clone())
                    .unwrap_or_default();
                let known = |n: &str| {
                    self.registry
                        .get(n)
                        .is_some_and(|t| self.discoverable_visible(config, t))
                };
                match plan_load(&args.names, known, &always_on, &loaded) {
                    Ok(plan) => {
                        let fps: Vec<(String, Fingerprint)> = plan
                            .new
                            .iter()
                            .filter_map(|n| {
                                self.registry
                                    .get(n)
                                    .map(|t| (n.clone(), t.fingerprint.clone()))
                            })
                            .collect();
                        // Saved before the model is told they are loaded, so
                        // a reload or restart never forgets a loaded tool.
                        if let Some(storage) = self.storage.clone()
                            && !fps.is_empty()
                        {
                            let add: BTreeMap<String, Fingerprint> = fps.iter().cloned().collect();
                            if let Err(e) = loaded::merge(&*storage, &draft.run, &add).await {
                                return ToolResult::error(
                                    codes::LOADED_TOOLS_UNAVAILABLE,
                                    format!("{e}; nothing was loaded"),
                                    &draft.tool,
                                );
                            }
                        }
                        let state = self.run_state(&draft.run);
                        for (n, f) in fps {
                            state.loaded.insert(n.clone());
                            state.shown.insert(n, f);
                        }
                        ok(
                            json!({
                                "loaded": plan.new,
                                "already_available": plan.already,
                                "schemas_in_use": plan.total,
                                "capacity": MAX_SCHEMAS_PER_REQUEST,
                            }),
                            Trust::Internal,
                        )
                    }
                    Err(e) => {
                        let code = match e {
                            LoadError::Capacity { .. } => codes::TOOL_CAPACITY_EXCEEDED,
                            LoadError::Unknown { .. } | LoadError::Empty => codes::UNKNOWN_TOOL,
                        };
                        ToolResult::error(code, e.to_string(), &draft.tool)
                    }
                }
            }
            other => ToolResult::error(
                codes::UNKNOWN_TOOL,
                format!("no discovery tool {other}"),
                other,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_definitions_compile() {
        for def in discovery_definitions() {
            assert!(
                CompiledSchema::compile(&def.parameters).is_ok(),
                "{}",
                def.name
            );
            assert!(def.fingerprint().is_ok());
            assert!(crate::registry::DISCOVERY_TOOL_NAMES.contains(&def.name.as_str()));
        }
    }
}
