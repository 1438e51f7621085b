//! `run_javascript` (S5.7): its tool definition, the tool (on the one
//! tool-actor shell, `agent_kernel::tool`) that runs each call's script, and [`ScriptPlace`], where scripts run;
//! the engine itself (one engine for every place) is in [`engine`].
//!
//! The engine's interrupt handler is a soft deadline: QuickJS does not check
//! it inside some built-ins' generic loops (`Array.prototype.copyWithin` or
//! `reverse` on `{length: 2**53 - 1}` run for minutes). So a script also
//! needs a hard stop that ends its work whatever it is doing:
//!
//! - natively, the host supplies a [`ScriptRunner`] ([`ScriptPlace::Runner`]):
//!   `agentrt` runs each script in a sandbox process that is killed at the
//!   deadline plus a grace (`agent-host-native`'s `script_sandbox`), and the
//!   call fails `js_time_limit`;
//! - in the browser the host's own actor runs scripts in a dedicated Worker
//!   whose `terminate()` is the hard stop;
//! - [`ScriptPlace::InProcess`] (unit tests, embedders without a runner)
//!   hands each script to `agent_kernel::actor::run_blocking`: a spinning
//!   script occupies a blocking thread, never the async executor, but only
//!   the soft deadline bounds it.

#[cfg(feature = "quickjs")]
pub mod engine;
pub mod limits;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use agent_capabilities::{Idempotency, Origin, Sensitivity};
use agent_kernel::actor::ParentLink;
#[cfg(feature = "quickjs")]
use agent_kernel::actor::run_blocking;
use agent_kernel::host::{Clock, Executor};
use agent_kernel::protocol::{TargetRule, ToolAddr, ToolDefinition, ToolFailure, ToolSuccess};
use agent_kernel::tool::{Tool, ToolContext, ToolOptions, spawn_tool_with};
use agent_kernel::{MaybeSend, MaybeSync};
use serde_json::{Value, json};

#[cfg(feature = "quickjs")]
pub use engine::run_script;
pub use limits::{JsError, JsLimitError, JsLimits, JsOutput};

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
#[cfg(all(target_arch = "wasm32", feature = "quickjs"))]
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

/// Why a [`ScriptRunner`] has no result for a script.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptRunError {
    /// The engine's own typed outcome, or [`JsError::TimeLimit`] when the
    /// runner ended the script at its hard deadline.
    #[error(transparent)]
    Script(#[from] JsError),
    /// The place the script ran in was lost (a sandbox process that could not
    /// start, died, or answered something unreadable). Nothing of the script
    /// outlives this; the script itself may be retried.
    #[error("{0}")]
    Lost(String),
}

impl ScriptRunError {
    /// The failure code of the result envelope: the engine's code, or
    /// `js_worker_lost` (retryable) for a lost place.
    pub fn code(&self) -> &'static str {
        match self {
            ScriptRunError::Script(e) => e.code(),
            ScriptRunError::Lost(_) => "js_worker_lost",
        }
    }
}

/// Something outside this process's threads that runs one script with the
/// engine ([`run_script`]) and can end it whatever it is doing: past
/// `limits.time` plus its grace it answers [`JsError::TimeLimit`] and the
/// script's work has stopped.
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
pub trait ScriptRunner: MaybeSend + MaybeSync {
    /// Run `code` with `input` under `limits`.
    async fn run(
        &self,
        code: String,
        input: Value,
        limits: JsLimits,
    ) -> Result<JsOutput, ScriptRunError>;
}

/// Where the actor runs scripts.
#[derive(Clone)]
pub enum ScriptPlace {
    /// On the executor's blocking path in this process, timed by the tool's
    /// [`MonotonicNow`]: only the engine's soft deadline bounds a script.
    #[cfg(feature = "quickjs")]
    InProcess,
    /// In a runner the host supplies, which can end a script at its deadline.
    Runner(Arc<dyn ScriptRunner>),
}

impl std::fmt::Debug for ScriptPlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            #[cfg(feature = "quickjs")]
            ScriptPlace::InProcess => "InProcess",
            ScriptPlace::Runner(_) => "Runner",
        })
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
    /// Scripts run at the same time at most (each on its own blocking
    /// thread or in its own place of the runner).
    pub concurrency: usize,
    /// Where scripts run.
    pub place: ScriptPlace,
}

impl JavascriptTool {
    /// Default concurrency: two scripts at once, each bounded in time and memory.
    pub const DEFAULT_CONCURRENCY: usize = 2;

    /// A tool with the default limits and concurrency, timed by the host
    /// clock, running scripts in this process ([`ScriptPlace::InProcess`]);
    /// a host with a killable runner sets it with [`JavascriptTool::run_in`].
    #[cfg(all(not(target_arch = "wasm32"), feature = "quickjs"))]
    pub fn native(executor: Arc<dyn Executor>, clock: Arc<dyn Clock>) -> JavascriptTool {
        JavascriptTool {
            executor,
            now: monotonic_from(clock.clone()),
            clock,
            limits: JsLimits::DEFAULT,
            concurrency: Self::DEFAULT_CONCURRENCY,
            place: ScriptPlace::InProcess,
        }
    }

    /// This tool with its scripts run in `place`.
    pub fn run_in(mut self, place: ScriptPlace) -> JavascriptTool {
        self.place = place;
        self
    }

    /// Start the actor (the tool-actor shell, `agent_kernel::tool`); its
    /// address receives `ToolMsg`.
    ///
    /// The shell checks each invocation against the definition and verifies
    /// its capability (tool, definition fingerprint, no effects, no target)
    /// before the script runs; a stopped run's script call ends `cancelled`.
    pub fn spawn(self, parent: Option<ParentLink>) -> Result<ToolAddr, String> {
        let executor = self.executor.clone();
        let clock = self.clock.clone();
        let concurrency = self.concurrency.max(1);
        let options = ToolOptions {
            mailbox: concurrency * 4,
            concurrency: Some(concurrency),
            parent,
            ..ToolOptions::default()
        };
        spawn_tool_with(executor, clock, JsActor { tool: self }, options)
            .map(|(addr, _)| addr)
            .map_err(|e| e.to_string())
    }
}

struct JsActor {
    tool: JavascriptTool,
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl Tool for JsActor {
    type Args = Value;

    fn definition(&self) -> ToolDefinition {
        definition()
    }

    async fn call(&self, ctx: &ToolContext, arguments: Value) -> Result<ToolSuccess, ToolFailure> {
        let (code, input) = parse_arguments(&arguments)
            .map_err(|message| ctx.fail("invalid_arguments", message))?;
        match self.run(code, input).await {
            Ok(output) => {
                let mut success = ctx.ok(json!({ "result": output.value }));
                success.provenance.detail = BTreeMap::from([
                    (
                        "elapsed_ms".to_owned(),
                        json!(u64::try_from(output.elapsed.as_millis()).unwrap_or(u64::MAX)),
                    ),
                    ("result_json_bytes".to_owned(), json!(output.json_bytes)),
                ]);
                Ok(success)
            }
            Err(error) => {
                let code = error.code();
                tracing::debug!(code, "script refused, failed or lost");
                Err(match error {
                    ScriptRunError::Script(error) => ctx.fail(code, error.to_string()),
                    ScriptRunError::Lost(lost) => {
                        ctx.fail_retryable(code, format!("{lost}; the script may be retried"))
                    }
                })
            }
        }
    }
}

impl JsActor {
    /// Run the script where the tool says.
    async fn run(&self, code: String, input: Value) -> Result<JsOutput, ScriptRunError> {
        let limits = self.tool.limits;
        match &self.tool.place {
            ScriptPlace::Runner(runner) => runner.run(code, input, limits).await,
            #[cfg(feature = "quickjs")]
            ScriptPlace::InProcess => {
                let now = self.tool.now.clone();
                run_blocking(&*self.tool.executor, move || {
                    run_script(&code, &input, &limits, move || now())
                })
                .await
                .map_err(|lost| ScriptRunError::Lost(lost.to_string()))?
                .map_err(ScriptRunError::Script)
            }
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
