//! The browser's `run_javascript` tool actor (S5.7): the same definition and
//! limits as `agent_tools::builtin::javascript`, but each script runs in the
//! [`ScriptWorker`], so a script that ignores the soft deadline is stopped by
//! terminating its Worker. The capability is verified before anything runs.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use agent_capabilities::{EffectRequest, Fingerprint, Target, Trust};
use agent_kernel::actor::spawn_actor;
use agent_kernel::host::{Clock, Executor};
use agent_kernel::protocol::{
    Provenance, ToolAddr, ToolFailure, ToolInvocation, ToolMsg, ToolResult, ToolSuccess,
};
use agent_tools::builtin::javascript::{JsLimits, TOOL_NAME, definition};
use agent_tools::codes;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::worker::{ScriptRequest, ScriptResponse, ScriptWorker, WorkerError};

/// Time allowed past the soft deadline before the Worker is terminated
/// (the engine checks its deadline every 10,000 ticks; a Worker may also
/// still be starting).
pub const HARD_DEADLINE_GRACE: Duration = Duration::from_millis(1_500);

fn provenance() -> Provenance {
    Provenance {
        origin: "builtin".into(),
        tool: TOOL_NAME.into(),
        ..Provenance::default()
    }
}

fn failure(code: &str, message: impl Into<String>, retryable: bool) -> ToolResult {
    ToolResult::Error(ToolFailure {
        code: code.to_owned(),
        message: message.into(),
        retryable,
        trust: Trust::Internal,
        provenance: provenance(),
        effect_may_have_happened: false,
    })
}

/// `code` (a string) and `input` (any JSON, default null).
fn parse_arguments(arguments: &Value) -> Result<(String, Value), String> {
    let Some(obj) = arguments.as_object() else {
        return Err("run_javascript takes an object with `code` and optional `input`".into());
    };
    if let Some(extra) = obj.keys().find(|k| *k != "code" && *k != "input") {
        return Err(format!(
            "run_javascript has no argument `{extra}`; it takes `code` and optional `input`"
        ));
    }
    let code = match obj.get("code") {
        Some(Value::String(code)) => code.clone(),
        Some(_) => return Err("`code` must be a string of JavaScript".into()),
        None => return Err("`code` is required: the JavaScript to run".into()),
    };
    Ok((code, obj.get("input").cloned().unwrap_or(Value::Null)))
}

struct JsTool {
    fingerprint: Fingerprint,
    worker: Rc<ScriptWorker>,
    clock: Arc<dyn Clock>,
    limits: JsLimits,
}

impl JsTool {
    fn authorise(&self, invocation: &ToolInvocation) -> Result<(), String> {
        let draft = &invocation.draft;
        if draft.tool != TOOL_NAME {
            return Err(format!(
                "this actor runs {TOOL_NAME}, but the invocation is for {}",
                draft.tool
            ));
        }
        if draft.fingerprint != self.fingerprint {
            return Err(format!(
                "the invocation was prepared for another definition of {TOOL_NAME}; load the tool again"
            ));
        }
        let request = EffectRequest {
            run_id: draft.run.to_string(),
            tool: TOOL_NAME.to_owned(),
            fingerprint: self.fingerprint.clone(),
            effects: definition().effects,
            target: Target::Nothing,
        };
        invocation
            .verifier
            .verify(&invocation.capability, &request, self.clock.wall_ms())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    async fn invoke(&self, invocation: ToolInvocation) -> ToolResult {
        let (code, input) = match parse_arguments(&invocation.draft.arguments) {
            Ok(parsed) => parsed,
            Err(message) => return failure(codes::INVALID_ARGUMENTS, message, false),
        };
        if let Err(message) = self.authorise(&invocation) {
            return failure(codes::CAPABILITY_REFUSED, message, false);
        }
        let limits = match serde_json::to_value(self.limits) {
            Ok(v) => v,
            Err(e) => return failure("js_engine_error", e.to_string(), false),
        };
        let request = ScriptRequest {
            code,
            input,
            limits,
        };
        let hard = self.limits.time() + HARD_DEADLINE_GRACE;
        match self.worker.run(&request, hard).await {
            Ok(ScriptResponse::Ok {
                value,
                json_bytes,
                elapsed_ms,
            }) => ToolResult::Success(ToolSuccess {
                content: json!({ "result": value }),
                trust: Trust::Internal,
                provenance: provenance(),
                references: Vec::new(),
                receipts: Vec::new(),
            })
            .with_detail(elapsed_ms, json_bytes),
            Ok(ScriptResponse::Err { code, message }) => failure(&code, message, false),
            Err(WorkerError::Terminated(after)) => failure(
                "js_time_limit",
                format!(
                    "the script ran past {} ms; its Worker was terminated and replaced",
                    after.as_millis()
                ),
                false,
            ),
            Err(e) => failure(
                "js_worker_lost",
                format!("{e}; the script may be retried"),
                true,
            ),
        }
    }
}

trait WithDetail {
    fn with_detail(self, elapsed_ms: u64, json_bytes: usize) -> ToolResult;
}

impl WithDetail for ToolResult {
    fn with_detail(mut self, elapsed_ms: u64, json_bytes: usize) -> ToolResult {
        if let ToolResult::Success(s) = &mut self
            && let Some(obj) = s.content.as_object_mut()
        {
            obj.insert("elapsed_ms".into(), json!(elapsed_ms));
            obj.insert("result_json_bytes".into(), json!(json_bytes));
        }
        self
    }
}

/// Spawn the actor; its address is registered as `run_javascript`.
pub fn spawn_js_tool(
    executor: &dyn Executor,
    clock: Arc<dyn Clock>,
    worker: Rc<ScriptWorker>,
    limits: JsLimits,
) -> Result<ToolAddr, String> {
    let fingerprint = definition()
        .fingerprint()
        .map_err(|e| format!("run_javascript has no fingerprint: {e}"))?;
    let tool = Rc::new(JsTool {
        fingerprint,
        worker,
        clock,
        limits,
    });
    Ok(spawn_actor(
        executor,
        TOOL_NAME,
        16,
        None,
        move |inbox| async move {
            // One script at a time: the Worker runs them in turn anyway.
            inbox
                .for_each(move |msg| {
                    let tool = tool.clone();
                    async move {
                        match msg {
                            ToolMsg::Invoke { invocation, reply } => {
                                let result = tool.invoke(invocation).await;
                                reply.send(result);
                            }
                            // Scripts run one at a time inside this loop, so a
                            // Cancel is read only after its script ended.
                            ToolMsg::Cancel { .. } => {}
                        }
                    }
                })
                .await;
            Ok::<(), String>(())
        },
    ))
}
