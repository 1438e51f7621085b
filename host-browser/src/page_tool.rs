//! Page tools (issue 36, S5.9): tools the embedding page defines as
//! JavaScript functions (`rt.registerTool`). This module owns what is
//! particular to them: reading a page's definition into a
//! [`ToolDefinition`] of origin `page` (everything but the function body
//! is in it, so in its fingerprint: the declared trust, deadline and offer
//! too), and the tool actor that calls the function with an `AbortSignal`.
//!
//! Everything else is the one path every tool takes: the tools actor's
//! registry (name rules and collisions, S5.5; the schema compiled by the
//! validator), the policy from the declared effects (S6.1), the journal,
//! the one tool shell (`agent_kernel::tool`, which verifies the capability
//! before `execute` runs), the envelope (a result over the limit spills to
//! the workspace, S5.8; `external_untrusted` results are fenced, S5.4).
//!
//! A call ends at the tool's deadline whatever its promise does later: the
//! signal aborts and the call fails; a tool that is not read-only then ends
//! `effect_unknown` (its effect may have happened). A stopped run or a
//! dropped call or `pagehide` aborts the signal too.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agent_capabilities::{EffectClass, EffectSet, Idempotency, Origin, Sensitivity, Trust};
use agent_kernel::host::{Clock, Executor, Lifecycle, LifecycleEvent, timeout};
use agent_kernel::protocol::{TargetRule, ToolDefinition, ToolFailure, ToolProgress, ToolSuccess};
use agent_kernel::run::RunMode;
use agent_kernel::tool::{Tool, ToolContext, ToolOptions, spawn_tool_with};
use agent_tools::ToolRegistration;
use agent_tools::registry::Exposure;
use futures::FutureExt;
use serde::Deserialize;
use serde_json::{Value, json};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

/// A page tool's deadline when its definition gives none.
pub const DEFAULT_PAGE_TOOL_TIMEOUT_MS: u64 = 30_000;
/// The longest deadline a page tool may declare (a plugin's bound too).
pub const MAX_PAGE_TOOL_TIMEOUT_MS: u64 = 300_000;

/// The stable codes of a page tool's failures.
pub mod codes {
    /// `execute` threw, or its promise was rejected.
    pub const PAGE_TOOL_ERROR: &str = "page_tool_error";
    /// `execute` resolved with something that is not JSON (undefined, a
    /// function, a BigInt, a cycle).
    pub const PAGE_TOOL_BAD_RESULT: &str = "page_tool_bad_result";
    /// The deadline passed before `execute` settled; its signal aborted.
    pub const PAGE_TOOL_TIMEOUT: &str = "page_tool_timeout";
    /// The run was stopped, or the page hidden, while `execute` ran; its
    /// signal aborted.
    pub const PAGE_TOOL_STOPPED: &str = "page_tool_stopped";
}

/// How the model finds a page tool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Offer {
    /// In every request of an agent run.
    #[default]
    Always,
    /// Found with `search_tools` and added with `load_tools` (S5.2).
    Search,
}

/// The trust of a page tool's results (part 5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PageTrust {
    /// Fenced as data, like web content (the default).
    #[default]
    ExternalUntrusted,
    /// Data the embedder vouches for: not fenced.
    User,
}

/// The argument whose value names what a call touches, shown in approval
/// requests and automatic-approval summaries.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageTarget {
    pub arg: String,
}

/// A page's definition, without its `execute` function (snake_case, like
/// the rest of the page API's configuration objects).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
    pub effects: EffectSet,
    pub idempotency: Idempotency,
    #[serde(default)]
    pub sensitivity: Option<Sensitivity>,
    #[serde(default)]
    pub target: Option<PageTarget>,
    #[serde(default)]
    pub trust: Option<PageTrust>,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub offer: Option<Offer>,
}

impl PageToolSpec {
    /// The deadline of one call; refused outside 1..=[`MAX_PAGE_TOOL_TIMEOUT_MS`].
    pub fn timeout(&self) -> Result<Duration, String> {
        match self.timeout_ms.unwrap_or(DEFAULT_PAGE_TOOL_TIMEOUT_MS) {
            ms @ 1..=MAX_PAGE_TOOL_TIMEOUT_MS => Ok(Duration::from_millis(ms)),
            other => Err(format!(
                "timeout_ms must be between 1 and {MAX_PAGE_TOOL_TIMEOUT_MS}, not {other}"
            )),
        }
    }

    /// The registry's definition: origin `page`, no provider; the target
    /// argument as its [`TargetRule::PageArg`] (so the argument's value is
    /// the call's target and its summary); the trust, deadline and offer in
    /// its `page_tool` annotation,
    /// so a change to any of them is a new fingerprint (S6.2).
    pub fn definition(&self) -> Result<ToolDefinition, String> {
        let timeout = self.timeout()?;
        if self.effects.contains(&EffectClass::CredentialExposure) {
            return Err(
                "effects: a page tool cannot declare credential_exposure (it is given no credentials)"
                    .into(),
            );
        }
        if let Some(target) = &self.target
            && self
                .parameters
                .pointer("/properties")
                .and_then(|p| p.get(&target.arg))
                .is_none()
        {
            return Err(format!(
                "target.arg names {:?}, which is not a property of parameters",
                target.arg
            ));
        }
        Ok(ToolDefinition {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.parameters.clone(),
            origin: Origin::Page,
            provider: None,
            effects: self.effects.clone(),
            idempotency: self.idempotency,
            sensitivity: self.sensitivity.unwrap_or(Sensitivity::Public),
            target: self
                .target
                .as_ref()
                .map_or(TargetRule::None, |t| TargetRule::PageArg {
                    field: t.arg.clone(),
                }),
            annotations: Some(json!({
                "page_tool": {
                    "trust": self.trust.unwrap_or_default(),
                    "timeout_ms": timeout.as_millis() as u64,
                    "offer": self.offer.unwrap_or_default(),
                }
            })),
        })
    }
}

/// One registered page tool: its definition and the page's function.
struct PageTool {
    def: ToolDefinition,
    execute: js_sys::Function,
    timeout: Duration,
    trust: PageTrust,
    read_only: bool,
    /// The page's lifecycle: `pagehide` aborts a call's signal.
    lifecycle: Lifecycle,
}

/// Aborts the call's signal when the call ends without an answer (a
/// deadline, a stop, the call dropped by the shell).
struct AbortUnlessSettled {
    controller: web_sys::AbortController,
    settled: Cell<bool>,
}

impl Drop for AbortUnlessSettled {
    fn drop(&mut self) {
        if !self.settled.get() {
            self.controller.abort();
        }
    }
}

/// What the page's promise settled with.
enum Settled {
    Value(JsValue),
    Thrown(JsValue),
}

/// The message of a thrown value: an `Error`'s message, else its string.
fn thrown_message(value: &JsValue) -> String {
    if let Some(error) = value.dyn_ref::<js_sys::Error>() {
        return String::from(error.message());
    }
    value.as_string().unwrap_or_else(|| {
        js_sys::JSON::stringify(value)
            .ok()
            .map(String::from)
            .unwrap_or_default()
    })
}

/// The JSON of a resolved value; `None` when it has none.
fn json_of(value: &JsValue) -> Result<Value, String> {
    let text = js_sys::JSON::stringify(value).map_err(|e| {
        format!(
            "the result cannot be written as JSON: {}",
            thrown_message(&e)
        )
    })?;
    let text: Option<String> = text.as_string();
    let Some(text) = text else {
        return Err("the result has no JSON form (undefined, a function or a symbol); resolve with a JSON value".into());
    };
    serde_json::from_str(&text).map_err(|e| format!("the result is not JSON: {e}"))
}

impl PageTool {
    fn failure(&self, ctx: &ToolContext, code: &str, message: String, effect: bool) -> ToolFailure {
        let mut failure = ctx.fail(code, message);
        failure.effect_may_have_happened = effect;
        failure.retryable = self.read_only || self.def.idempotency == Idempotency::Idempotent;
        failure.trust = Trust::ExternalUntrusted;
        failure
    }
}

#[async_trait::async_trait(?Send)]
impl Tool for PageTool {
    type Args = Value;

    fn definition(&self) -> ToolDefinition {
        self.def.clone()
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolSuccess, ToolFailure> {
        let controller = web_sys::AbortController::new()
            .map_err(|e| ctx.fail(codes::PAGE_TOOL_ERROR, thrown_message(&e)))?;
        let guard = AbortUnlessSettled {
            controller: controller.clone(),
            settled: Cell::new(false),
        };
        // Progress reports cross from the page's callback to this call
        // through a channel; a report after the call ended goes nowhere.
        let (progress_tx, progress_rx) = async_channel::unbounded::<String>();
        let progress = Closure::<dyn Fn(JsValue)>::new(move |text: JsValue| {
            let text = text.as_string().unwrap_or_else(|| thrown_message(&text));
            let _ = progress_tx.try_send(text);
        })
        .into_js_value();
        let page_ctx = js_sys::Object::new();
        let set = |key: &str, value: &JsValue| {
            let _ = js_sys::Reflect::set(&page_ctx, &JsValue::from_str(key), value);
        };
        set("signal", &controller.signal().into());
        set("run_id", &JsValue::from_str(ctx.run.as_str()));
        set("call_id", &JsValue::from_str(ctx.call_id.as_str()));
        set("idempotency_key", &JsValue::from_str(&ctx.idempotency_key));
        set("progress", &progress);
        let js_args =
            serde::Serialize::serialize(&args, &serde_wasm_bindgen::Serializer::json_compatible())
                .map_err(|e| ctx.fail(codes::PAGE_TOOL_ERROR, e.to_string()))?;
        let settle = async {
            match self.execute.call2(&JsValue::NULL, &js_args, &page_ctx) {
                Err(thrown) => Settled::Thrown(thrown),
                Ok(returned) => {
                    let promise = js_sys::Promise::resolve(&returned);
                    match wasm_bindgen_futures::JsFuture::from(promise).await {
                        Ok(value) => Settled::Value(value),
                        Err(thrown) => Settled::Thrown(thrown),
                    }
                }
            }
        };
        let page_events = self.lifecycle.subscribe();
        let watched = async {
            let settle = settle.fuse();
            futures::pin_mut!(settle);
            let mut reports = 0.0;
            loop {
                futures::select! {
                    settled = settle => return Some(settled),
                    // The page is going away: its function's work is
                    // interrupted with the run's (S2.5).
                    event = page_events.recv().fuse() => if matches!(
                        event,
                        Ok(LifecycleEvent::PageHidden | LifecycleEvent::ExecutorLost)
                    ) {
                        return None;
                    },
                    text = progress_rx.recv().fuse() => if let Ok(text) = text {
                        reports += 1.0;
                        ctx.report_progress(ToolProgress { progress: reports, total: None, message: Some(text) });
                    },
                    () = ctx.cancelled().fuse() => return None,
                }
            }
        };
        let outcome = timeout(&*ctx.clock, self.timeout, watched).await;
        let effect = !self.read_only;
        let settled = match outcome {
            Err(_) => {
                controller.abort();
                return Err(self.failure(
                    ctx,
                    codes::PAGE_TOOL_TIMEOUT,
                    format!(
                        "{} did not settle within {} ms; its signal was aborted. {}",
                        self.def.name,
                        self.timeout.as_millis(),
                        if effect {
                            "Its effect may or may not have happened"
                        } else {
                            "Nothing was changed"
                        }
                    ),
                    effect,
                ));
            }
            Ok(None) => {
                controller.abort();
                return Err(self.failure(
                    ctx,
                    codes::PAGE_TOOL_STOPPED,
                    format!(
                        "{} was stopped with its run or its page; its signal was aborted. {}",
                        self.def.name,
                        if effect {
                            "Its effect may or may not have happened"
                        } else {
                            "Nothing was changed"
                        }
                    ),
                    effect,
                ));
            }
            Ok(Some(settled)) => settled,
        };
        guard.settled.set(true);
        match settled {
            // The page's function ran and reported an error: it decides
            // whether it changed anything, and a thrown error says it did not.
            Settled::Thrown(thrown) => Err(self.failure(
                ctx,
                codes::PAGE_TOOL_ERROR,
                format!("{} failed: {}", self.def.name, thrown_message(&thrown)),
                false,
            )),
            Settled::Value(value) => match json_of(&value) {
                Err(why) => Err(self.failure(ctx, codes::PAGE_TOOL_BAD_RESULT, why, effect)),
                Ok(content) => {
                    let mut success = ctx.ok_untrusted(content);
                    if self.trust == PageTrust::User {
                        success.trust = Trust::User;
                    }
                    Ok(success)
                }
            },
        }
    }
}

/// What `registerTool` resolves with.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Registered {
    pub name: String,
    pub fingerprint: String,
}

/// The page tools of one runtime, registered with its tools actor as the
/// provider `page` (the whole set replaced at each change, atomically).
pub struct PageTools {
    executor: Arc<dyn Executor>,
    clock: Arc<dyn Clock>,
    lifecycle: Lifecycle,
    registered: futures::lock::Mutex<BTreeMap<String, ToolRegistration>>,
}

impl PageTools {
    pub fn new(
        executor: Arc<dyn Executor>,
        clock: Arc<dyn Clock>,
        lifecycle: Lifecycle,
    ) -> PageTools {
        PageTools {
            executor,
            clock,
            lifecycle,
            registered: futures::lock::Mutex::new(BTreeMap::new()),
        }
    }

    /// Register (or replace) the tool `spec` with the page's `execute`.
    pub async fn register(
        &self,
        tools: &agent_tools::ToolsHandle,
        spec: PageToolSpec,
        execute: js_sys::Function,
    ) -> Result<Registered, String> {
        let def = spec.definition()?;
        let fingerprint = def
            .fingerprint()
            .map_err(|e| format!("tool {:?} cannot be fingerprinted: {e}", def.name))?;
        let tool = PageTool {
            read_only: agent_capabilities::is_read_only(&def.effects),
            timeout: spec.timeout()?,
            trust: spec.trust.unwrap_or_default(),
            lifecycle: self.lifecycle.clone(),
            def,
            execute,
        };
        let (addr, def) = spawn_tool_with(
            self.executor.clone(),
            self.clock.clone(),
            tool,
            ToolOptions::default(),
        )
        .map_err(|e| e.to_string())?;
        let registration = ToolRegistration {
            modes: vec![RunMode::Agent],
            exposure: match spec.offer.unwrap_or_default() {
                Offer::Always => Exposure::AlwaysOn,
                Offer::Search => Exposure::Discoverable,
            },
            // The policy decides from the declared effects exactly as for
            // a plugin not marked trusted (S6.1): an external write asks.
            trusted_external: false,
            unknown_function: false,
            needs_grant: None,
            addr,
            definition: def,
        };
        let mut registered = self.registered.lock().await;
        let mut next = registered.clone();
        next.insert(spec.name.clone(), registration);
        tools
            .replace_provider(Origin::Page, next.values().cloned().collect())
            .await
            .map_err(|e| e.to_string())?;
        *registered = next;
        Ok(Registered {
            name: spec.name,
            fingerprint: fingerprint.to_string(),
        })
    }

    /// Forget the tool `name`; false when no page tool has that name.
    pub async fn unregister(
        &self,
        tools: &agent_tools::ToolsHandle,
        name: &str,
    ) -> Result<bool, String> {
        let mut registered = self.registered.lock().await;
        if !registered.contains_key(name) {
            return Ok(false);
        }
        let mut next = registered.clone();
        next.remove(name);
        let changed = if next.is_empty() {
            tools.remove_provider(Origin::Page).await.map(|_| ())
        } else {
            tools
                .replace_provider(Origin::Page, next.values().cloned().collect())
                .await
        };
        changed.map_err(|e| e.to_string())?;
        *registered = next;
        Ok(true)
    }
}
