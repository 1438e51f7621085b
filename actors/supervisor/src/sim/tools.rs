//! A small tools actor speaking `ToolsMsg`, for the simulator and the tests
//! (the real registry lives in `agent-tools`). Tools: `read_note` (read-only),
//! `write_note` (idempotent local write), `send_ticket` (non-idempotent
//! external write that counts), `slow_op` (read-only, takes clock time),
//! `slow_ticket` (non-idempotent, takes clock time), `flaky_send` (on its
//! first attempt its effect may have happened; later attempts succeed),
//! `fail_op` (always fails), `destroy_note` (destructive), `hang_op`
//! (read-only, never answers: a script spinning natively, a read that never
//! ends; it holds the actor, so a test using it needs no other call after).
//! Executions go to a [`ToolLog`] that outlives killed tabs, like an external
//! system would.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use agent_capabilities::{
    ApprovalIdentity, EffectClass, EffectRequest, EffectSet, Fingerprint, Idempotency, Origin,
    PolicyInput, Sensitivity, Target, TargetScope, Trust, canonical_json, decide, sha256_hex,
};
use agent_kernel::actor::spawn_actor;
use agent_kernel::host::{Clock, Executor, Storage, StorageExt};
use agent_kernel::ids::{RunId, SessionId};
use agent_kernel::journal::{CallState, JournalRecord, idempotency_key};
use agent_kernel::protocol::{
    EffectReceipt, InvocationDraft, ModelToolSchema, PreparedCall, Provenance, RunToolConfig,
    TargetRule, ToolCall, ToolDefinition, ToolFailure, ToolInvocation, ToolResult, ToolSuccess,
    ToolsAddr, ToolsMsg,
};

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
    violations: Vec<String>,
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
    /// Re-executions of calls whose journal record was already committed.
    pub fn violations(&self) -> Vec<String> {
        self.inner
            .lock()
            .map(|i| i.violations.clone())
            .unwrap_or_default()
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
    fn violation(&self, v: String) {
        if let Ok(mut i) = self.inner.lock() {
            i.violations.push(v);
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
    /// When set, every dispatch checks the journal and logs a violation if
    /// the call was already committed.
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

/// Spawn the test tools actor on `executor`.
pub fn spawn_sim_tools(
    executor: &dyn Executor,
    clock: Arc<dyn Clock>,
    log: ToolLog,
    config: SimToolsConfig,
) -> ToolsAddr {
    // Fingerprints are computed once, as a registry does at registration.
    let defs: Vec<SimDef> = definitions()
        .into_iter()
        .filter_map(|def| {
            let fingerprint = def.fingerprint().ok()?;
            Some(SimDef { def, fingerprint })
        })
        .collect();
    spawn_actor(executor, "tools", 64, None, move |inbox| async move {
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
                    let result = dispatch(&defs, &*clock, &log, &config, invocation).await;
                    reply.send(result);
                }
            }
        }
        Ok::<(), String>(())
    })
}

/// A definition with its fingerprint.
struct SimDef {
    def: ToolDefinition,
    fingerprint: Fingerprint,
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
        .map(
            |SimDef {
                 def: d,
                 fingerprint,
             }| ModelToolSchema {
                name: d.name.clone(),
                description: d.description.clone(),
                parameters: d.parameters.clone(),
                fingerprint: fingerprint.clone(),
            },
        )
        .collect()
}

fn target_of(def: &ToolDefinition, args: &Value) -> Result<(Target, TargetScope), String> {
    match &def.target {
        TargetRule::WorkspacePathArg { field } => {
            let path = args
                .get(field)
                .and_then(Value::as_str)
                .filter(|p| !p.is_empty() && !p.starts_with('/') && !p.contains(".."))
                .ok_or_else(|| format!("{field} must be a relative workspace path"))?;
            Ok((
                Target::WorkspacePath { path: path.into() },
                TargetScope::Workspace {
                    prefix: path.into(),
                },
            ))
        }
        TargetRule::Endpoint { origin } => {
            let host = origin.split("://").nth(1).unwrap_or_default().to_owned();
            Ok((
                Target::Url {
                    origin: origin.clone(),
                    host,
                },
                TargetScope::Origins {
                    origins: [origin.clone()].into_iter().collect(),
                },
            ))
        }
        _ => Ok((Target::Nothing, TargetScope::NoTarget)),
    }
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
    let (target, scope) = target_of(def, &arguments)
        .map_err(|m| ToolResult::error("invalid_arguments", m, &def.name))?;
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

async fn dispatch(
    defs: &[SimDef],
    clock: &dyn Clock,
    log: &ToolLog,
    config: &SimToolsConfig,
    invocation: ToolInvocation,
) -> ToolResult {
    let draft = &invocation.draft;
    let Some((_, fingerprint)) = find(defs, &draft.tool) else {
        return ToolResult::error(
            "unknown_tool",
            "no tool of that name is registered",
            &draft.tool,
        );
    };
    if *fingerprint != draft.fingerprint {
        return ToolResult::error("definition_changed", "the definition changed", &draft.tool);
    }
    let request = EffectRequest {
        run_id: draft.run.to_string(),
        tool: draft.tool.clone(),
        fingerprint: draft.fingerprint.clone(),
        effects: draft.effects.clone(),
        target: draft.target.clone(),
    };
    if let Err(e) = invocation
        .verifier
        .verify(&invocation.capability, &request, clock.wall_ms())
    {
        return ToolResult::error("capability_refused", e.to_string(), &draft.tool);
    }
    if let Some(storage) = &config.storage
        && let Ok(Some(record)) = storage
            .get_record::<JournalRecord>(&JournalRecord::key_for(&draft.run, &draft.call_id))
            .await
        && record.state == CallState::Committed
    {
        log.violation(format!(
            "call {} of run {} executed again after it was committed",
            draft.call_id, draft.run
        ));
    }
    let execution = Execution {
        run: draft.run.to_string(),
        call: draft.call_id.to_string(),
        tool: draft.tool.clone(),
        attempt: draft.attempt,
        narrowed_to: invocation
            .capability
            .caveats()
            .iter()
            .filter_map(|c| match c {
                agent_capabilities::Caveat::Tools(tools) => Some(tools.clone()),
                _ => None,
            })
            .collect(),
    };
    let args = &draft.arguments;
    let path = args
        .get("path")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    match draft.tool.as_str() {
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
        "flaky_send" if draft.attempt > 1 => {
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
            provenance: provenance(&draft.tool),
            effect_may_have_happened: false,
        }),
    }
}
