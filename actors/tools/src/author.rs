//! The tool-author API (issue 4, item 7): implement [`Tool`] (a definition
//! and an `async fn call`) and [`spawn_tool`] turns it into a tool actor that
//! re-checks the draft against the definition, validates and decodes the
//! arguments, verifies (and consumes) the capability, runs the call inside a
//! tracing span, reports panics as errors and calls the journaling hooks.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;
use tracing::Instrument;

use agent_capabilities::{Fingerprint, Origin, Target, TargetScope, Trust, is_read_only};
use agent_kernel::host::{Clock, Executor};
use agent_kernel::ids::{CallId, RunId, SessionId};
use agent_kernel::maybe_send::boxed;
use agent_kernel::protocol::{
    EffectReceipt, InvocationDraft, Provenance, ToolAddr, ToolDefinition, ToolFailure, ToolMsg,
    ToolResult, ToolSuccess,
};
use agent_kernel::{MaybeSend, MaybeSync, spawn_actor};

use crate::codes;
use crate::gate::{check_draft, verify_capability};
use crate::validate::CompiledSchema;

/// What a tool's `call` knows about the invocation. Everything in it has been
/// checked: the capability verified, the arguments validated, the target
/// derived from them and covered by the granted scope.
#[derive(Clone)]
pub struct ToolContext {
    pub run: RunId,
    pub session: SessionId,
    pub call_id: CallId,
    /// 1 for the first attempt; higher for retries of the same call.
    pub attempt: u32,
    /// Stable across retries of this call: send it to idempotent endpoints.
    pub idempotency_key: String,
    pub target: Target,
    pub scope: TargetScope,
    /// The host's clock (never `SystemTime`: it panics on wasm32).
    pub clock: Arc<dyn Clock>,
    tool: String,
    origin: Origin,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("run", &self.run)
            .field("call_id", &self.call_id)
            .field("tool", &self.tool)
            .field("attempt", &self.attempt)
            .finish_non_exhaustive()
    }
}

impl ToolContext {
    fn from_draft(draft: &InvocationDraft, clock: Arc<dyn Clock>) -> ToolContext {
        ToolContext {
            run: draft.run.clone(),
            session: draft.session.clone(),
            call_id: draft.call_id.clone(),
            attempt: draft.attempt,
            idempotency_key: draft.idempotency_key.clone(),
            target: draft.target.clone(),
            scope: draft.scope.clone(),
            clock,
            tool: draft.tool.clone(),
            origin: draft.origin.clone(),
        }
    }

    /// The tool's name.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    fn provenance(&self) -> Provenance {
        Provenance {
            origin: self.origin.to_string(),
            tool: self.tool.clone(),
            ..Provenance::default()
        }
    }

    /// A success the runtime itself produced (`internal` trust).
    pub fn ok(&self, content: Value) -> ToolSuccess {
        ToolSuccess {
            content,
            trust: Trust::Internal,
            provenance: self.provenance(),
            references: Vec::new(),
            receipts: Vec::new(),
        }
    }

    /// A success carrying content from outside (web, files the person did not
    /// write): it is fenced as data before it reaches the model.
    pub fn ok_untrusted(&self, content: Value) -> ToolSuccess {
        ToolSuccess {
            trust: Trust::ExternalUntrusted,
            ..self.ok(content)
        }
    }

    /// A failure with a stable code (snake_case) that retrying will not fix.
    pub fn fail(&self, code: &str, message: impl Into<String>) -> ToolFailure {
        ToolFailure {
            code: code.to_owned(),
            message: message.into(),
            retryable: false,
            trust: Trust::Internal,
            provenance: self.provenance(),
            effect_may_have_happened: false,
        }
    }

    /// A failure that a later retry may fix (rate limits, a busy peer).
    pub fn fail_retryable(&self, code: &str, message: impl Into<String>) -> ToolFailure {
        ToolFailure {
            retryable: true,
            ..self.fail(code, message)
        }
    }
}

/// Attach a receipt to a success: what an effect did (never content).
pub fn with_receipt(mut success: ToolSuccess, receipt: EffectReceipt) -> ToolSuccess {
    success.receipts.push(receipt);
    success
}

/// A tool. Implement this, then `spawn_tool` it and register its address.
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
pub trait Tool: MaybeSend + MaybeSync + 'static {
    /// The decoded arguments (serde). Their JSON Schema is in the definition;
    /// both are checked before `call` runs.
    type Args: DeserializeOwned + MaybeSend;

    /// The definition: name, description, schema, effects, idempotency,
    /// sensitivity, target rule. Called once, when the actor is spawned.
    fn definition(&self) -> ToolDefinition;

    /// Do the work. Runs only after every check passed.
    async fn call(&self, ctx: &ToolContext, args: Self::Args) -> Result<ToolSuccess, ToolFailure>;
}

/// Observes calls for journaling or metrics. Receives drafts and results,
/// which carry hashes and references; hooks must not log raw arguments.
pub trait ToolHooks: MaybeSend + MaybeSync {
    /// After every check passed, immediately before `call`.
    fn before_call(&self, _draft: &InvocationDraft) {}
    /// After the call, with the result that goes back (also for refusals).
    fn after_call(&self, _draft: &InvocationDraft, _result: &ToolResult) {}
}

/// Hooks that do nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHooks;
impl ToolHooks for NoHooks {}

/// Options for [`spawn_tool_with`].
pub struct ToolOptions {
    pub hooks: Arc<dyn ToolHooks>,
    /// Mailbox capacity (back-pressure beyond it).
    pub mailbox: usize,
}

impl Default for ToolOptions {
    fn default() -> Self {
        ToolOptions {
            hooks: Arc::new(NoHooks),
            mailbox: 32,
        }
    }
}

/// The tool's definition could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpawnError {
    #[error("tool {name:?} has an invalid argument schema: {detail}")]
    InvalidSchema { name: String, detail: String },
    #[error("tool {name:?} cannot be fingerprinted: {detail}")]
    Fingerprint { name: String, detail: String },
}

/// Spawn `tool` as an actor with the default options. Returns its address
/// and the definition to register.
pub fn spawn_tool<T: Tool>(
    executor: Arc<dyn Executor>,
    clock: Arc<dyn Clock>,
    tool: T,
) -> Result<(ToolAddr, ToolDefinition), SpawnError> {
    spawn_tool_with(executor, clock, tool, ToolOptions::default())
}

struct Prepared<T> {
    tool: T,
    def: ToolDefinition,
    fingerprint: Fingerprint,
    schema: CompiledSchema,
    clock: Arc<dyn Clock>,
    hooks: Arc<dyn ToolHooks>,
}

/// Spawn `tool` as an actor. Every invocation is handled on its own task,
/// so a slow call does not hold up the next one.
pub fn spawn_tool_with<T: Tool>(
    executor: Arc<dyn Executor>,
    clock: Arc<dyn Clock>,
    tool: T,
    options: ToolOptions,
) -> Result<(ToolAddr, ToolDefinition), SpawnError> {
    let def = tool.definition();
    let schema =
        CompiledSchema::compile(&def.parameters).map_err(|detail| SpawnError::InvalidSchema {
            name: def.name.clone(),
            detail,
        })?;
    let fingerprint = def.fingerprint().map_err(|e| SpawnError::Fingerprint {
        name: def.name.clone(),
        detail: e.to_string(),
    })?;
    let shared = Arc::new(Prepared {
        tool,
        def: def.clone(),
        fingerprint,
        schema,
        clock,
        hooks: options.hooks,
    });
    let spawner = executor.clone();
    let addr = spawn_actor(
        &*executor,
        &format!("tool:{}", def.name),
        options.mailbox,
        None,
        move |inbox: agent_kernel::Inbox<ToolMsg>| async move {
            while let Ok(ToolMsg::Invoke { invocation, reply }) = inbox.recv().await {
                let shared = shared.clone();
                let span = tracing::info_span!(
                    "tool_call",
                    tool = %invocation.draft.tool,
                    run = %invocation.draft.run,
                    call = %invocation.draft.call_id,
                    attempt = invocation.draft.attempt,
                );
                spawner.spawn(boxed(
                    async move {
                        let result = handle(&shared, invocation.clone()).await;
                        shared.hooks.after_call(&invocation.draft, &result);
                        reply.send(result);
                    }
                    .instrument(span),
                ));
            }
            Ok::<(), std::convert::Infallible>(())
        },
    );
    Ok((addr, def))
}

async fn handle<T: Tool>(
    p: &Prepared<T>,
    inv: agent_kernel::protocol::ToolInvocation,
) -> ToolResult {
    if let Err(refusal) = check_draft(&inv.draft, &p.def, &p.fingerprint, &p.schema) {
        tracing::warn!(
            code = refusal_code(&refusal),
            "invocation refused before the call"
        );
        return refusal;
    }
    if let Err(refusal) = verify_capability(&inv, p.clock.wall_ms()) {
        tracing::warn!(code = refusal_code(&refusal), "capability refused");
        return refusal;
    }
    let args: T::Args = match serde_json::from_value(inv.draft.arguments.clone()) {
        Ok(a) => a,
        Err(e) => {
            return ToolResult::error(
                codes::INVALID_ARGUMENTS,
                format!("arguments passed the schema but do not decode: {e}"),
                &p.def.name,
            );
        }
    };
    let ctx = ToolContext::from_draft(&inv.draft, p.clock.clone());
    p.hooks.before_call(&inv.draft);
    tracing::debug!(args_hash = %inv.draft.args_hash, "calling tool");
    let outcome = call_guarded(&p.tool, &ctx, args).await;
    let result = match outcome {
        Ok(Ok(success)) => ToolResult::Success(success),
        Ok(Err(failure)) => ToolResult::Error(failure),
        Err(panic) => ToolResult::Error(ToolFailure {
            code: codes::TOOL_PANICKED.to_owned(),
            message: format!("the tool failed unexpectedly: {panic}"),
            retryable: false,
            trust: Trust::Internal,
            provenance: ctx.provenance(),
            effect_may_have_happened: !is_read_only(&inv.draft.effects),
        }),
    };
    tracing::debug!(success = result.is_success(), "tool returned");
    result
}

fn refusal_code(r: &ToolResult) -> &str {
    match r {
        ToolResult::Error(e) => &e.code,
        ToolResult::Success(_) => "",
    }
}

#[cfg(not(target_arch = "wasm32"))]
async fn call_guarded<T: Tool>(
    tool: &T,
    ctx: &ToolContext,
    args: T::Args,
) -> Result<Result<ToolSuccess, ToolFailure>, String> {
    use futures::FutureExt;
    std::panic::AssertUnwindSafe(tool.call(ctx, args))
        .catch_unwind()
        .await
        .map_err(|p| agent_kernel::actor::panic_message(p.as_ref()))
}

#[cfg(target_arch = "wasm32")]
async fn call_guarded<T: Tool>(
    tool: &T,
    ctx: &ToolContext,
    args: T::Args,
) -> Result<Result<ToolSuccess, ToolFailure>, String> {
    Ok(tool.call(ctx, args).await)
}
