//! `run_javascript` (S5.7): its tool definition and the actor that runs
//! scripts on the host's blocking path; the engine itself is in [`engine`].
//!
//! Natively the actor hands each script to `agent_kernel::actor::run_blocking`,
//! so a spinning script occupies a blocking thread, never the async executor.
//! In the browser the host runs this actor inside a dedicated Worker, whose
//! `terminate()` is the hard stop behind the interrupt handler's soft deadline.

pub mod engine;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use agent_capabilities::{Idempotency, Origin, Sensitivity, Target, Trust};
use agent_kernel::actor::{ParentLink, run_blocking};
use agent_kernel::host::{Clock, Executor};
use agent_kernel::protocol::{TargetRule, ToolAddr, ToolDefinition, ToolInvocation, ToolResult};
use serde_json::{Value, json};

pub use engine::{JsError, JsLimitError, JsLimits, JsOutput, run_script};

use super::invoke::{Definition, spawn_invoke_actor};

/// The tool's name as registered.
pub const TOOL_NAME: &str = "run_javascript";

/// A monotonic time source the engine can call from a blocking thread or
/// Worker: time since an arbitrary fixed point, never going backwards.
pub type MonotonicNow = Arc<dyn Fn() -> Duration + Send + Sync>;

/// The host clock's monotonic time as a [`MonotonicNow`] (natively the
/// host `Clock` is `Send + Sync`, so it can cross to a blocking thread).
#[cfg(not(target_arch = "wasm32"))]
pub fn monotonic_from(clock: Arc<dyn Clock>) -> MonotonicNow {
    Arc::new(move || clock.monotonic())
}

/// In the browser Worker: `performance.now()` when the global scope has it,
/// else `Date.now()`. The Worker's `terminate()` is the hard stop; this is
/// the soft deadline.
#[cfg(target_arch = "wasm32")]
pub fn browser_monotonic() -> MonotonicNow {
    Arc::new(|| {
        let global = js_sys::global();
        let ms = js_sys::Reflect::get(&global, &"performance".into())
            .ok()
            .filter(|p| p.is_object())
            .and_then(|p| {
                let now = js_sys::Reflect::get(&p, &"now".into()).ok()?;
                let now: js_sys::Function = wasm_bindgen_cast(now)?;
                now.call0(&p).ok()?.as_f64()
            })
            .unwrap_or_else(js_sys::Date::now);
        Duration::from_secs_f64(ms.max(0.0) / 1000.0)
    })
}

#[cfg(target_arch = "wasm32")]
fn wasm_bindgen_cast(value: js_sys::wasm_bindgen::JsValue) -> Option<js_sys::Function> {
    use js_sys::wasm_bindgen::JsCast;
    value.dyn_into::<js_sys::Function>().ok()
}

/// QuickJS's wasm32 build imports `env.__rquickjs_host_now_us` for `Date`;
/// defining it here leaves the module with no `env` import (TOOLCHAIN.md).
#[cfg(target_arch = "wasm32")]
// `no_mangle` is an unsafe attribute because exported symbol names can
// collide; this one is the exact name QuickJS's C code links against, it
// takes no pointers and only reads the wall clock.
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
pub extern "C" fn __rquickjs_host_now_us() -> f64 {
    js_sys::Date::now() * 1000.0
}

/// The `run_javascript` tool definition: pure computation, no effects, no target.
pub fn definition() -> ToolDefinition {
    let d = JsLimits::DEFAULT;
    ToolDefinition {
        name: TOOL_NAME.to_owned(),
        description: format!(
            "Run a short synchronous JavaScript program (QuickJS, ES2023) and return its \
             completion value as JSON: the value of the last expression statement, or what a \
             returned promise fulfils with. The JSON `input` argument is available as the \
             global `input`. There is no network, DOM, file system, module loading, timers, \
             console or host access. Default limits: {} ms, {} MiB heap, {} KiB stack, \
             {} KiB of result JSON.",
            d.time_ms,
            d.heap_bytes / (1024 * 1024),
            d.stack_bytes / 1024,
            d.output_bytes / 1024
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "description": "A classic script (not a module). Its completion value is the result, e.g. `input.values.reduce((a, b) => a + b, 0)`.",
                    "maxLength": d.code_bytes,
                },
                "input": {
                    "description": "Any JSON value, bound to the global `input`."
                }
            },
            "required": ["code"],
            "additionalProperties": false,
        }),
        origin: Origin::Builtin,
        provider: None,
        effects: BTreeSet::new(),
        idempotency: Idempotency::Idempotent,
        sensitivity: Sensitivity::Private,
        target: TargetRule::None,
        annotations: Some(json!({ "readOnlyHint": true, "openWorldHint": false })),
    }
}

/// Everything the `run_javascript` actor needs from its host.
#[derive(Clone)]
pub struct JavascriptTool {
    /// Spawns the actor and runs scripts on its blocking path.
    pub executor: Arc<dyn Executor>,
    /// Wall time for capability expiry.
    pub clock: Arc<dyn Clock>,
    /// The deadline's time source, called from the blocking thread.
    pub now: MonotonicNow,
    /// The limits every script runs under (a profile may have lowered them).
    pub limits: JsLimits,
    /// Scripts run at the same time at most (each on its own blocking thread).
    pub concurrency: usize,
}

impl JavascriptTool {
    /// Default concurrency: two scripts at once, each bounded in time and memory.
    pub const DEFAULT_CONCURRENCY: usize = 2;

    /// A tool with the default limits and concurrency, timed by the host clock.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn native(executor: Arc<dyn Executor>, clock: Arc<dyn Clock>) -> JavascriptTool {
        JavascriptTool {
            executor,
            now: monotonic_from(clock.clone()),
            clock,
            limits: JsLimits::DEFAULT,
            concurrency: Self::DEFAULT_CONCURRENCY,
        }
    }

    /// Start the actor; its address receives `ToolMsg::Invoke`.
    ///
    /// Each invocation's capability is verified with its verifier (tool,
    /// definition fingerprint, no effects, no target) before the script runs.
    pub fn spawn(self, parent: Option<ParentLink>) -> Result<ToolAddr, String> {
        let definition = Definition::new(definition())?;
        let executor = self.executor.clone();
        let concurrency = self.concurrency;
        // Send + Sync natively; on wasm32 the host types are neither, and
        // the single-threaded executor shares the actor state all the same.
        #[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
        let actor = Arc::new(JsActor {
            definition,
            tool: self,
        });
        Ok(spawn_invoke_actor(
            &*executor,
            TOOL_NAME,
            concurrency,
            parent,
            move |invocation| {
                let actor = actor.clone();
                async move { actor.invoke(invocation).await }
            },
        ))
    }
}

struct JsActor {
    definition: Definition,
    tool: JavascriptTool,
}

impl JsActor {
    async fn invoke(&self, invocation: ToolInvocation) -> ToolResult {
        let (code, input) = match parse_arguments(&invocation.draft.arguments) {
            Ok(parsed) => parsed,
            Err(message) => return self.definition.invalid_arguments(message),
        };
        if let Err(refused) =
            self.definition
                .authorise(&invocation, Target::Nothing, self.tool.clock.wall_ms())
        {
            return self.definition.refused(refused);
        }
        let limits = self.tool.limits;
        let now = self.tool.now.clone();
        let outcome = run_blocking(&*self.tool.executor, move || {
            run_script(&code, &input, &limits, move || now())
        })
        .await;
        match outcome {
            Ok(Ok(output)) => {
                let mut detail = BTreeMap::new();
                detail.insert(
                    "elapsed_ms".to_owned(),
                    json!(u64::try_from(output.elapsed.as_millis()).unwrap_or(u64::MAX)),
                );
                detail.insert("result_json_bytes".to_owned(), json!(output.json_bytes));
                self.definition.success(
                    json!({ "result": output.value }),
                    Trust::Internal,
                    detail,
                    None,
                    Vec::new(),
                )
            }
            Ok(Err(error)) => {
                tracing::debug!(code = error.code(), "script refused or failed");
                self.definition
                    .failure(error.code(), error.to_string(), false)
            }
            Err(lost) => self.definition.failure(
                "js_worker_lost",
                format!("{lost}; the script may be retried"),
                true,
            ),
        }
    }
}

/// `code` (a string) and `input` (any JSON, default null).
fn parse_arguments(arguments: &Value) -> Result<(String, Value), String> {
    let Some(obj) = arguments.as_object() else {
        return Err(
            "run_javascript takes an object with `code` (a string) and optional `input`".into(),
        );
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
    let input = obj.get("input").cloned().unwrap_or(Value::Null);
    Ok((code, input))
}
