//! A small tools actor speaking `ToolsMsg`, for the simulator and the tests
//! (the real registry lives in `agent-tools`). Tools: `read_note` (read-only),
//! `write_note` (idempotent local write), `send_ticket` (non-idempotent
//! external write that counts), `slow_op` (read-only, takes clock time),
//! `slow_ticket` (non-idempotent, takes clock time), `flaky_send` (on its
//! first attempt its effect may have happened; later attempts succeed),
//! `fail_op` (always fails), `destroy_note` (destructive), `hang_op`
//! (read-only, never answers by itself: a script spinning natively, a read
//! that never ends; a stop cancels it). Each tool runs on the one tool-actor
//! shell (`agent_kernel::tool`), which verifies every capability.
//! Executions go to a [`ToolLog`] that outlives killed tabs, like an external
//! system would.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use agent_capabilities::{
    ApprovalIdentity, EffectClass, EffectSet, Fingerprint, Idempotency, Origin, PolicyInput,
    Sensitivity, Trust, canonical_json, decide, sha256_hex,
};
use agent_kernel::actor::spawn_actor;
use agent_kernel::host::{Clock, Executor, Storage};
use agent_kernel::ids::{RunId, SessionId};
use agent_kernel::journal::idempotency_key;
use agent_kernel::maybe_send::boxed;
use agent_kernel::protocol::{
    EffectReceipt, InvocationDraft, ModelToolSchema, PreparedCall, Provenance, RunToolConfig,
    TargetRule, ToolAddr, ToolCall, ToolDefinition, ToolFailure, ToolMsg, ToolResult, ToolSuccess,
    ToolsAddr, ToolsMsg,
};
use agent_kernel::tool::validate::derive_target;
use agent_kernel::tool::{Tool, ToolContext, spawn_tool};

use super::invariants::Dispatch;

/// One execution of a tool with an effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execution {
    pub run: String,
    pub call: String,
    pub tool: String,
    pub attempt: u32,
    /// The tool sets the capability was narrowed to (`Caveat::Tools`, as an
    /// applied Skill adds), outermost first.
    pub narrowed_to: Vec<std::collections::BTreeSet<String>>,
}

#[derive(Debug, Default)]
struct LogInner {
    executions: Vec<Execution>,
    dispatches: Vec<Dispatch>,
    step: u64,
    tickets: u64,
}

/// What the tools did, shared across tabs.
#[derive(Debug, Clone, Default)]
pub struct ToolLog {
    inner: Arc<Mutex<LogInner>>,
}

impl ToolLog {
    pub fn executions(&self) -> Vec<Execution> {
        self.inner
            .lock()
            .map(|i| i.executions.clone())
            .unwrap_or_default()
    }
    /// Dispatches out of the durability order (dispatched before `running`
    /// was durable, or again after `committed`), by
    /// [`Dispatch::durability_violation`]; seen only with
    /// [`SimToolsConfig::storage`] set.
    pub fn violations(&self) -> Vec<String> {
        self.dispatches()
            .iter()
            .filter_map(Dispatch::durability_violation)
            .collect()
    }
    /// Every call that reached a test tool, with the journal record durable
    /// at that moment (only with [`SimToolsConfig::storage`] set).
    pub fn dispatches(&self) -> Vec<Dispatch> {
        self.inner
            .lock()
            .map(|i| i.dispatches.clone())
            .unwrap_or_default()
    }
    /// The simulation step later dispatches are stamped with.
    pub fn set_step(&self, step: u64) {
        if let Ok(mut i) = self.inner.lock() {
            i.step = step;
        }
    }
    fn step(&self) -> u64 {
        self.inner.lock().map(|i| i.step).unwrap_or(0)
    }
    /// How many tickets `send_ticket` created.
    pub fn tickets(&self) -> u64 {
        self.inner.lock().map(|i| i.tickets).unwrap_or(0)
    }
    /// Did `call` of `run` execute at least once?
    pub fn executed(&self, run: &str, call: &str) -> bool {
        self.executions()
            .iter()
            .any(|e| e.run == run && e.call == call)
    }
    fn record(&self, e: Execution, ticket: bool) {
        if let Ok(mut i) = self.inner.lock() {
            i.executions.push(e);
            if ticket {
                i.tickets += 1;
            }
        }
    }
    fn dispatched(&self, d: Dispatch) {
        if let Ok(mut i) = self.inner.lock() {
            i.dispatches.push(d);
        }
    }
}

/// Definitions of the test tools.
pub fn definitions() -> Vec<ToolDefinition> {
    let obj = |props: Value, required: &[&str]| json!({"type": "object", "properties": props, "required": required});
    let def = |name: &str,
               effects: &[EffectClass],
               idempotency: Idempotency,
               target: TargetRule,
               parameters: Value| ToolDefinition {
        name: name.into(),
        description: format!("test tool {name}"),
        parameters,
        origin: Origin::Builtin,
        provider: None,
        effects: effects.iter().copied().collect::<EffectSet>(),
        idempotency,
        sensitivity: Sensitivity::Private,
        target,
        annotations: None,
    };
    let path = || TargetRule::WorkspacePathArg {
        field: "path".into(),
    };
    vec![
        def(
            "read_note",
            &[EffectClass::ReadLocal],
            Idempotency::Idempotent,
            path(),
            obj(
                json!({"path": {"type": "string"}, "message": {"type": "string"}}),
                &["path"],
            ),
        ),
        def(
            "write_note",
            &[EffectClass::WriteLocal],
            Idempotency::Idempotent,
            path(),
            obj(
                json!({"path": {"type": "string"}, "text": {"type": "string"}}),
                &["path"],
            ),
        ),
        def(
            "send_ticket",
            &[EffectClass::WriteExternal],
            Idempotency::NonIdempotent,
            TargetRule::Endpoint {
                origin: "https://tickets.example".into(),
            },
            obj(json!({"title": {"type": "string"}}), &["title"]),
        ),
        def(
            "slow_op",
            &[EffectClass::ReadLocal],
            Idempotency::Idempotent,
            TargetRule::None,
            obj(json!({"ms": {"type": "integer"}}), &["ms"]),
        ),
        def(
            "flaky_send",
            &[EffectClass::WriteExternal],
            Idempotency::NonIdempotent,
            TargetRule::Endpoint {
                origin: "https://tickets.example".into(),
            },
            obj(json!({"title": {"type": "string"}}), &[]),
        ),
        def(
            "slow_ticket",
            &[EffectClass::WriteExternal],
            Idempotency::NonIdempotent,
            TargetRule::Endpoint {
                origin: "https://tickets.example".into(),
            },
            obj(json!({"ms": {"type": "integer"}}), &["ms"]),
        ),
        def(
            "fail_op",
            &[EffectClass::ReadLocal],
            Idempotency::Idempotent,
            TargetRule::None,
            obj(json!({}), &[]),
        ),
        def(
            "hang_op",
            &[EffectClass::ReadLocal],
            Idempotency::Idempotent,
            TargetRule::None,
            obj(json!({}), &[]),
        ),
        def(
            "destroy_note",
            &[EffectClass::DestructiveLocal],
            Idempotency::NonIdempotent,
            path(),
            obj(json!({"path": {"type": "string"}}), &["path"]),
        ),
    ]
}

/// Settings of the test tools actor.
#[derive(Clone)]
pub struct SimToolsConfig {
    /// Text `read_note` returns (tests plant a marker here).
    pub note_text: String,
    /// When set, every dispatch reads the call's journal record, and the log
    /// keeps it (see [`ToolLog::dispatches`]).
    pub storage: Option<Arc<dyn Storage>>,
}

impl Default for SimToolsConfig {
    fn default() -> Self {
        Self {
            note_text: "hello from the note".into(),
            storage: None,
        }
    }
}

/// Spawn one actor per test tool on `executor` (each on the one tool-actor
/// shell), for a host to register as it registers its own tools (the
/// native `TabSim` puts them in the assembly's registry).
pub fn spawn_sim_tool_actors(
    executor: Arc<dyn Executor>,
    clock: Arc<dyn Clock>,
    log: ToolLog,
    config: SimToolsConfig,
) -> Vec<(ToolDefinition, ToolAddr)> {
    let config = Arc::new(config);
    definitions()
        .into_iter()
        .filter_map(|def| {
            let tool = SimTool {
                def: def.clone(),
                clock: clock.clone(),
                log: log.clone(),
                config: config.clone(),
            };
            let (addr, _) = spawn_tool(executor.clone(), clock.clone(), tool).ok()?;
            Some((def, addr))
        })
        .collect()
}

/// Spawn the test tools actor on `executor`: each test tool is its own
/// actor on the one tool-actor shell (`agent_kernel::tool`, which checks
/// the draft, verifies the capability and handles cancellation); this actor
/// answers `Schemas` and `Prepare`, forwards each `Dispatch` on its own task
/// and turns `CancelRun` into `ToolMsg::Cancel` for every tool.
pub fn spawn_sim_tools(
    executor: Arc<dyn Executor>,
    clock: Arc<dyn Clock>,
    log: ToolLog,
    config: SimToolsConfig,
) -> ToolsAddr {
    // Fingerprints are computed once, as a registry does at registration.
    let defs: Vec<SimDef> = spawn_sim_tool_actors(executor.clone(), clock, log, config)
        .into_iter()
        .filter_map(|(def, addr)| {
            let fingerprint = def.fingerprint().ok()?;
            Some(SimDef {
                shown: ModelToolSchema::of(&def, fingerprint.clone()),
                def,
                fingerprint,
                addr,
            })
        })
        .collect();
    let spawner = executor.clone();
    spawn_actor(&*executor, "tools", 64, None, move |inbox| async move {
        while let Ok(msg) = inbox.recv().await {
            match msg {
                ToolsMsg::Schemas {
                    config: run_config,
                    reply,
                    ..
                } => {
                    reply.send(schemas(&defs, &run_config));
                }
                ToolsMsg::Prepare {
                    run,
                    session,
                    call,
                    attempt,
                    config: run_config,
                    reply,
                } => reply.send(prepare(&defs, run, session, call, attempt, &run_config)),
                ToolsMsg::Dispatch { invocation, reply } => {
                    let Some(tool) = defs.iter().find(|d| d.def.name == invocation.draft.tool)
                    else {
                        reply.send(ToolResult::error(
                            "unknown_tool",
                            "no tool of that name is registered",
                            &invocation.draft.tool,
                        ));
                        continue;
                    };
                    let addr = tool.addr.clone();
                    let name = tool.def.name.clone();
                    spawner.spawn(boxed(async move {
                        let result = addr
                            .ask(|reply| ToolMsg::Invoke { invocation, reply })
                            .await
                            .unwrap_or_else(|e| {
                                ToolResult::error("tool_unavailable", e.to_string(), &name)
                            });
                        reply.send(result);
                    }));
                }
                ToolsMsg::CancelRun { run } => {
                    for d in &defs {
                        // A tool actor that stopped has nothing to cancel.
                        let _ = d.addr.send(ToolMsg::Cancel { run: run.clone() }).await;
                    }
                }
            }
        }
        Ok::<(), String>(())
    })
}

/// A definition with its fingerprint and its tool actor.
struct SimDef {
    def: ToolDefinition,
    fingerprint: Fingerprint,
    shown: ModelToolSchema,
    addr: ToolAddr,
}

fn find<'a>(defs: &'a [SimDef], name: &str) -> Option<(&'a ToolDefinition, &'a Fingerprint)> {
    defs.iter()
        .find(|d| d.def.name == name)
        .map(|d| (&d.def, &d.fingerprint))
}

fn schemas(defs: &[SimDef], config: &RunToolConfig) -> Vec<ModelToolSchema> {
    defs.iter()
        .filter(|SimDef { def: d, .. }| {
            config
                .allowlist
                .as_ref()
                .is_none_or(|a| a.contains(&d.name))
        })
        .map(|d| d.shown.clone())
        .collect()
}

// The shape is the protocol's `ToolsMsg::Prepare` reply.
#[allow(clippy::result_large_err)]
fn prepare(
    defs: &[SimDef],
    run: RunId,
    session: SessionId,
    call: ToolCall,
    attempt: u32,
    config: &RunToolConfig,
) -> Result<PreparedCall, ToolResult> {
    let (def, fingerprint) = find(defs, &call.name).ok_or_else(|| {
        ToolResult::error(
            "unknown_tool",
            "no tool of that name is registered",
            &call.name,
        )
    })?;
    if config
        .allowlist
        .as_ref()
        .is_some_and(|a| !a.contains(&def.name))
    {
        return Err(ToolResult::error(
            "not_allowed",
            "this tool is not allowed in this run",
            &def.name,
        ));
    }
    let arguments: Value = serde_json::from_str(&call.arguments)
        .ok()
        .filter(Value::is_object)
        .ok_or_else(|| {
            ToolResult::error(
                "invalid_arguments",
                "arguments must be a JSON object",
                &def.name,
            )
        })?;
    let canonical = canonical_json(&arguments).map_err(|_| {
        ToolResult::error(
            "invalid_arguments",
            "arguments are not canonical JSON",
            &def.name,
        )
    })?;
    let (target, scope) = derive_target(&def.target, &arguments)
        .map_err(|e| ToolResult::error("invalid_arguments", e.to_string(), &def.name))?;
    let fingerprint = fingerprint.clone();
    let identity = ApprovalIdentity {
        origin: def.origin.clone(),
        provider: def.provider.clone(),
        tool: def.name.clone(),
        fingerprint: fingerprint.clone(),
        effects: def.effects.clone(),
        scope: scope.clone(),
    };
    let target_summary = scope.summary();
    let decision = decide(
        config.approval,
        &PolicyInput {
            identity: identity.clone(),
            allowed: true,
            trusted_external: def.origin == Origin::Builtin,
            unknown_mcp_function: false,
            target_summary: target_summary.clone(),
        },
    );
    Ok(PreparedCall {
        draft: InvocationDraft {
            idempotency_key: idempotency_key(&run, &call.call_id),
            run,
            session,
            call_id: call.call_id,
            tool: def.name.clone(),
            fingerprint,
            arguments,
            args_hash: sha256_hex(canonical.as_bytes()),
            effects: def.effects.clone(),
            idempotency: def.idempotency,
            sensitivity: def.sensitivity,
            origin: def.origin.clone(),
            provider: def.provider.clone(),
            target,
            scope,
            attempt,
        },
        decision,
        identity,
        target_summary,
    })
}

fn provenance(tool: &str) -> Provenance {
    Provenance {
        origin: "builtin".into(),
        tool: tool.into(),
        detail: BTreeMap::new(),
        ..Provenance::default()
    }
}

fn ok(tool: &str, content: Value, receipts: Vec<EffectReceipt>) -> ToolResult {
    ToolResult::Success(ToolSuccess {
        content,
        trust: Trust::Internal,
        provenance: provenance(tool),
        references: Vec::new(),
        receipts,
    })
}

/// One test tool on the shell.
struct SimTool {
    def: ToolDefinition,
    clock: Arc<dyn Clock>,
    log: ToolLog,
    config: Arc<SimToolsConfig>,
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl Tool for SimTool {
    type Args = Value;

    fn definition(&self) -> ToolDefinition {
        self.def.clone()
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolSuccess, ToolFailure> {
        match run_tool(self, ctx, &args).await {
            ToolResult::Success(success) => Ok(success),
            ToolResult::Error(failure) => Err(failure),
        }
    }
}

/// Carry out one checked call of a test tool.
async fn run_tool(tool: &SimTool, ctx: &ToolContext, args: &Value) -> ToolResult {
    let (clock, log, config) = (&*tool.clock, &tool.log, &*tool.config);
    if let Some(storage) = &config.storage {
        let dispatch = Dispatch::observe(
            &**storage,
            &ctx.run,
            &ctx.call_id,
            ctx.tool(),
            ctx.attempt,
            log.step(),
        )
        .await;
        log.dispatched(dispatch);
    }
    let execution = Execution {
        run: ctx.run.to_string(),
        call: ctx.call_id.to_string(),
        tool: ctx.tool().to_owned(),
        attempt: ctx.attempt,
        narrowed_to: ctx
            .capability()
            .caveats()
            .iter()
            .filter_map(|c| match c {
                agent_capabilities::Caveat::Tools(tools) => Some(tools.clone()),
                _ => None,
            })
            .collect(),
    };
    let path = args
        .get("path")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    match ctx.tool() {
        "read_note" => ok(
            "read_note",
            json!({"path": path, "text": config.note_text}),
            Vec::new(),
        ),
        "write_note" => {
            log.record(execution, false);
            ok(
                "write_note",
                json!({"written": path}),
                vec![EffectReceipt {
                    effect: EffectClass::WriteLocal,
                    target: path,
                    detail: json!({"revision": 1}),
                }],
            )
        }
        "send_ticket" => {
            log.record(execution, true);
            ok(
                "send_ticket",
                json!({"ticket": log.tickets()}),
                vec![EffectReceipt {
                    effect: EffectClass::WriteExternal,
                    target: "https://tickets.example".into(),
                    detail: json!({"ticket": log.tickets()}),
                }],
            )
        }
        "slow_op" => {
            let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(0);
            clock.sleep(Duration::from_millis(ms)).await;
            log.record(execution, false);
            ok("slow_op", json!({"slept_ms": ms}), Vec::new())
        }
        "slow_ticket" => {
            let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(0);
            clock.sleep(Duration::from_millis(ms)).await;
            log.record(execution, true);
            ok("slow_ticket", json!({"ticket": log.tickets()}), Vec::new())
        }
        "flaky_send" if ctx.attempt > 1 => {
            log.record(execution, true);
            ok("flaky_send", json!({"ticket": log.tickets()}), Vec::new())
        }
        "flaky_send" => {
            log.record(execution, true);
            ToolResult::Error(ToolFailure {
                code: "timeout_after_send".into(),
                message: "the request was sent but no answer came".into(),
                retryable: false,
                trust: Trust::Internal,
                provenance: provenance("flaky_send"),
                effect_may_have_happened: true,
            })
        }
        "hang_op" => {
            log.record(execution, false);
            futures::future::pending::<ToolResult>().await
        }
        "destroy_note" => {
            log.record(execution, false);
            ok("destroy_note", json!({"destroyed": path}), Vec::new())
        }
        _ => ToolResult::Error(ToolFailure {
            code: "tool_failed".into(),
            message: "this tool always fails".into(),
            retryable: false,
            trust: Trust::Internal,
            provenance: provenance(ctx.tool()),
            effect_may_have_happened: false,
        }),
    }
}
