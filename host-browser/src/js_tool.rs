//! The browser's `run_javascript` tool actor (S5.7): the same definition and
//! limits as `agent_tools::builtin::javascript`, made by the one tool-actor
//! shell (`agent_kernel::tool`), which checks the draft and verifies the
//! capability before anything runs. Each script runs in a [`ModuleWorker`],
//! so a script that ignores the soft deadline is stopped by terminating its
//! Worker; a script whose run is stopped (`ToolMsg::Cancel`) is ended the
//! same way.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use agent_kernel::host::{Clock, Executor};
use agent_kernel::protocol::{ToolAddr, ToolDefinition, ToolFailure, ToolSuccess};
use agent_kernel::tool::{Tool, ToolContext, ToolOptions, codes, spawn_tool_with};
use agent_tools::builtin::javascript::{JsLimits, definition};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::worker::{ModuleWorker, ScriptRequest, ScriptResponse, WorkerError};

/// Time allowed past the soft deadline before the Worker is terminated
/// (the engine checks its deadline every 10,000 ticks; a Worker may also
/// still be starting).
pub const HARD_DEADLINE_GRACE: Duration = Duration::from_millis(1_500);

/// The arguments (the definition's schema has checked them): `code` and
/// optional `input` (any JSON, default null).
#[derive(Deserialize)]
struct JsArgs {
    code: String,
    #[serde(default)]
    input: Value,
}

struct JsWorkerTool {
    worker: Rc<ModuleWorker>,
    limits: JsLimits,
}

/// Terminates the Worker when a script's call is dropped before its answer
/// (the shell ends a stopped run's call at once), so the script does not
/// keep the Worker busy for the next one.
struct TerminateUnlessAnswered<'a> {
    worker: &'a ModuleWorker,
    answered: bool,
}

impl Drop for TerminateUnlessAnswered<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.worker.terminate("the run was stopped");
        }
    }
}

#[async_trait::async_trait(?Send)]
impl Tool for JsWorkerTool {
    type Args = JsArgs;

    fn definition(&self) -> ToolDefinition {
        definition()
    }

    async fn call(&self, ctx: &ToolContext, args: JsArgs) -> Result<ToolSuccess, ToolFailure> {
        let limits = serde_json::to_value(self.limits)
            .map_err(|e| ctx.fail("js_engine_error", e.to_string()))?;
        let request = ScriptRequest {
            code: args.code,
            input: args.input,
            limits,
        };
        let hard = self.limits.time() + HARD_DEADLINE_GRACE;
        let mut guard = TerminateUnlessAnswered {
            worker: &self.worker,
            answered: false,
        };
        let answer = self.worker.run(&request, hard).await;
        guard.answered = true;
        match answer {
            Ok(ScriptResponse::Ok {
                value,
                json_bytes,
                elapsed_ms,
            }) => Ok(ctx.ok(json!({
                "result": value,
                "elapsed_ms": elapsed_ms,
                "result_json_bytes": json_bytes,
            }))),
            Ok(ScriptResponse::Err { code, message }) => Err(ctx.fail(&code, message)),
            Err(WorkerError::Terminated(after)) => Err(ctx.fail(
                "js_time_limit",
                format!(
                    "the script ran past {} ms; its Worker was terminated and replaced",
                    after.as_millis()
                ),
            )),
            // The call's executor is gone: the supervisor interrupts the
            // run (S2.5) and Resume runs the script again.
            Err(e @ WorkerError::Lost(_)) => Err(ctx.fail(codes::EXECUTOR_LOST, e.to_string())),
            Err(e @ WorkerError::Trapped(_)) => Err(ctx.fail("js_engine_error", e.to_string())),
            Err(e) => {
                Err(ctx.fail_retryable("js_worker_lost", format!("{e}; the script may be retried")))
            }
        }
    }
}

/// Spawn the actor; its address is registered as `run_javascript`. One
/// script runs at a time (the Worker runs them in turn anyway).
pub fn spawn_js_tool(
    executor: Arc<dyn Executor>,
    clock: Arc<dyn Clock>,
    worker: Rc<ModuleWorker>,
    limits: JsLimits,
) -> Result<ToolAddr, String> {
    let options = ToolOptions {
        mailbox: 16,
        concurrency: Some(1),
        ..ToolOptions::default()
    };
    spawn_tool_with(executor, clock, JsWorkerTool { worker, limits }, options)
        .map(|(addr, _)| addr)
        .map_err(|e| e.to_string())
}
