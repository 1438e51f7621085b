//! The one tool-actor shell: implement [`Tool`] (a definition and an
//! `async fn call`) and [`spawn_tool`] turns it into a tool actor. The shell
//! re-checks each draft against the definition, verifies (and consumes) the
//! capability, decodes the arguments, runs each call on its own task inside a
//! tracing span (at most `ToolOptions::concurrency` at once), reports panics
//! as errors, calls the journaling hooks, and fires a call's cancellation
//! signal when `ToolMsg::Cancel` names its run: a read-only call then ends at
//! once with `cancelled`; an effectful one observes `ToolContext::cancelled`.
//! No other code verifies a capability for a tool call.
use std::collections::BTreeMap;
use std::sync::Arc;

use futures::FutureExt;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tracing::Instrument;

use agent_capabilities::{
    Capability, Fingerprint, Origin, Target, TargetScope, Trust, Verified, is_read_only,
};

use super::cancel::{CancelHandle, CancelToken};
use super::codes;
use super::gate::{check_draft, verify_capability_for};
use super::validate::CompiledSchema;
use crate::host::{Clock, Executor};
use crate::ids::{CallId, RunId, SessionId};
use crate::maybe_send::boxed;
use crate::protocol::{
    EffectReceipt, InvocationDraft, ProgressSink, Provenance, ToolAddr, ToolDefinition,
    ToolFailure, ToolInvocation, ToolMsg, ToolProgress, ToolResult, ToolSuccess,
};
use crate::{MaybeSend, MaybeSync, ParentLink, spawn_actor};

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
    arguments: Value,
    capability: Capability,
    verified: Verified,
    cancel: CancelToken,
    progress: ProgressSink,
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
    fn from_invocation(
        inv: &ToolInvocation,
        target: Target,
        verified: Verified,
        clock: Arc<dyn Clock>,
        cancel: CancelToken,
    ) -> Self {
        let draft = &inv.draft;
        ToolContext {
            run: draft.run.clone(),
            session: draft.session.clone(),
            call_id: draft.call_id.clone(),
            attempt: draft.attempt,
            idempotency_key: draft.idempotency_key.clone(),
            target,
            scope: draft.scope.clone(),
            clock,
            tool: draft.tool.clone(),
            origin: draft.origin.clone(),
            arguments: draft.arguments.clone(),
            capability: inv.capability.clone(),
            verified,
            cancel,
            progress: inv.progress.clone(),
        }
    }

    /// The tool's name.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The invocation's canonical, schema-checked arguments as JSON (for a
    /// tool whose `Args` is not enough, or that forwards them as they are).
    pub fn arguments(&self) -> &Value {
        &self.arguments
    }

    /// The capability the shell verified for this call (its caveats say how
    /// it was narrowed). Holding it grants nothing more: it was consumed.
    pub fn capability(&self) -> &Capability {
        &self.capability
    }

    /// What the verified capability grants after its caveats (tool, effects,
    /// scope): the proof an effect that re-checks its authority asks for.
    pub fn verified(&self) -> &Verified {
        &self.verified
    }

    /// Completes when the call's run is stopped (`ToolMsg::Cancel`); pending
    /// otherwise. An effectful tool awaits it beside its work and decides
    /// what a stop means for its effect; a read-only call is ended by the
    /// shell without its help.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    /// True once the call's run was stopped.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// The cancellation signal itself, to hand to code below the tool.
    pub fn cancel_token(&self) -> CancelToken {
        self.cancel.clone()
    }

    /// Tell whoever watches the run how far this call has come (live only,
    /// never journaled; see [`ToolProgress`]). Cheap, never blocks.
    pub fn report_progress(&self, progress: ToolProgress) {
        self.progress.report(progress);
    }

    /// Provenance naming this call's origin and tool; add detail to it.
    pub fn provenance(&self) -> Provenance {
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

    /// The failure of a call ended by its cancellation signal, before its
    /// effect (a read-only call has none).
    pub fn cancelled_failure(&self) -> ToolFailure {
        self.fail(
            codes::CANCELLED,
            format!(
                "{} was cancelled because the run was stopped; nothing was changed",
                self.tool
            ),
        )
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
    /// both are checked before `call` runs. Use `serde_json::Value` to get
    /// the arguments as they are.
    type Args: DeserializeOwned + MaybeSend;

    /// The definition: name, description, schema, effects, idempotency,
    /// sensitivity, target rule. Called once, when the actor is spawned.
    fn definition(&self) -> ToolDefinition;

    /// The exact target the effect will touch, when the tool knows it more
    /// precisely than the definition's target rule (the two paths of a move
    /// under a whole-workspace rule). The shell verifies the capability
    /// against it instead of the draft's target; `Ok(None)` (the default)
    /// keeps the draft's target. An `Err` ends the call before any effect.
    // The failure goes to the model as it is, like `call`'s.
    #[allow(clippy::result_large_err)]
    fn effect_target(&self, _args: &Self::Args) -> Result<Option<Target>, ToolFailure> {
        Ok(None)
    }

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
    /// Calls that run at once at most (None: no limit). Further calls wait
    /// for a place; a call cancelled while waiting ends `cancelled`.
    pub concurrency: Option<usize>,
    /// Where the actor reports its end (its parent), if anywhere.
    pub parent: Option<ParentLink>,
}

impl Default for ToolOptions {
    fn default() -> Self {
        ToolOptions {
            hooks: Arc::new(NoHooks),
            mailbox: 32,
            concurrency: None,
            parent: None,
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
    read_only: bool,
    clock: Arc<dyn Clock>,
    hooks: Arc<dyn ToolHooks>,
    /// Places of running calls: a call holds one by having sent into it.
    places: Option<(async_channel::Sender<()>, async_channel::Receiver<()>)>,
}

/// Spawn `tool` as an actor. Every invocation is handled on its own task,
/// so a slow call does not hold up the next one; the actor's loop keeps the
/// cancellation handle of every call in flight, by run.
pub fn spawn_tool_with<T: Tool>(
    executor: Arc<dyn Executor>,
    clock: Arc<dyn Clock>,
    tool: T,
    options: ToolOptions,
) -> Result<(ToolAddr, ToolDefinition), SpawnError> {
    let def = tool.definition();
    // The runtime's own tools compile their schema at their first call.
    let schema = if def.origin == Origin::Builtin {
        CompiledSchema::builtin(&def.parameters)
    } else {
        CompiledSchema::compile(&def.parameters)
    }
    .map_err(|detail| SpawnError::InvalidSchema {
        name: def.name.clone(),
        detail,
    })?;
    let fingerprint = def.fingerprint().map_err(|e| SpawnError::Fingerprint {
        name: def.name.clone(),
        detail: e.to_string(),
    })?;
    #[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
    let shared = Arc::new(Prepared {
        tool,
        read_only: is_read_only(&def.effects),
        def: def.clone(),
        fingerprint,
        schema,
        clock,
        hooks: options.hooks,
        places: options
            .concurrency
            .map(|n| async_channel::bounded(n.max(1))),
    });
    let spawner = executor.clone();
    let addr = spawn_actor(
        &*executor,
        &def.name,
        options.mailbox,
        options.parent,
        move |inbox: crate::Inbox<ToolMsg>| run_shell(inbox, shared, spawner),
    );
    Ok((addr, def))
}

/// The actor's loop: start each call on its own task, fire the signals of a
/// cancelled run's calls, forget calls that ended.
async fn run_shell<T: Tool>(
    inbox: crate::Inbox<ToolMsg>,
    shared: Arc<Prepared<T>>,
    spawner: Arc<dyn Executor>,
) -> Result<(), std::convert::Infallible> {
    let (ended_tx, ended_rx) = async_channel::unbounded::<u64>();
    let mut in_flight: BTreeMap<u64, (RunId, CancelHandle)> = BTreeMap::new();
    let mut next_id = 0u64;
    loop {
        futures::select! {
            msg = inbox.recv().fuse() => match msg {
                Ok(ToolMsg::Invoke { invocation, reply }) => {
                    next_id += 1;
                    let id = next_id;
                    let cancel = CancelHandle::new();
                    in_flight.insert(id, (invocation.draft.run.clone(), cancel.clone()));
                    let shared = shared.clone();
                    let ended = ended_tx.clone();
                    let span = tracing::info_span!(
                        "tool_call",
                        tool = %invocation.draft.tool,
                        run = %invocation.draft.run,
                        call = %invocation.draft.call_id,
                        attempt = invocation.draft.attempt,
                    );
                    spawner.spawn(boxed(
                        async move {
                            let draft = invocation.draft.clone();
                            let result = handle(&shared, invocation, cancel.token()).await;
                            shared.hooks.after_call(&draft, &result);
                            reply.send(result);
                            // The loop may have stopped: then nobody tracks the call.
                            let _ = ended.send(id).await;
                        }
                        .instrument(span),
                    ));
                }
                Ok(ToolMsg::Cancel { run }) => {
                    let mut fired = 0usize;
                    for (call_run, cancel) in in_flight.values() {
                        if *call_run == run {
                            cancel.cancel();
                            fired += 1;
                        }
                    }
                    tracing::debug!(tool = %shared.def.name, run = %run, calls = fired, "run cancelled");
                }
                // Every address is gone: calls in flight finish on their own tasks.
                Err(_) => return Ok(()),
            },
            ended = ended_rx.recv().fuse() => if let Ok(id) = ended {
                in_flight.remove(&id);
            },
        }
    }
}

async fn handle<T: Tool>(p: &Prepared<T>, inv: ToolInvocation, cancel: CancelToken) -> ToolResult {
    if let Err(refusal) = check_draft(&inv.draft, &p.def, &p.fingerprint, &p.schema) {
        tracing::warn!(
            code = refusal_code(&refusal),
            "invocation refused before the call"
        );
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
    let target = match p.tool.effect_target(&args) {
        Ok(Some(target)) => target,
        Ok(None) => inv.draft.target.clone(),
        Err(failure) => return ToolResult::Error(failure),
    };
    let verified = match verify_capability_for(&inv, &target, p.clock.wall_ms()) {
        Ok(verified) => verified,
        Err(refusal) => {
            tracing::warn!(code = refusal_code(&refusal), "capability refused");
            return refusal;
        }
    };
    let ctx = ToolContext::from_invocation(&inv, target, verified, p.clock.clone(), cancel);
    // Wait for a place (when the tool limits its concurrency); a stop while
    // waiting ends the call before anything ran.
    let _place = match &p.places {
        Some((tx, rx)) => {
            let acquired = futures::select! {
                sent = tx.send(()).fuse() => sent.is_ok(),
                () = ctx.cancelled().fuse() => false,
            };
            if !acquired {
                return ToolResult::Error(ctx.cancelled_failure());
            }
            Some(Place(rx.clone()))
        }
        None => None,
    };
    if ctx.is_cancelled() {
        return ToolResult::Error(ctx.cancelled_failure());
    }
    p.hooks.before_call(&inv.draft);
    tracing::debug!(args_hash = %inv.draft.args_hash, "calling tool");
    let call = call_guarded(&p.tool, &ctx, args);
    let outcome = if p.read_only {
        // Nothing to undo: a stop ends a read at once.
        futures::select! {
            outcome = call.fuse() => outcome,
            () = ctx.cancelled().fuse() => Ok(Err(ctx.cancelled_failure())),
        }
    } else {
        call.await
    };
    let result = match outcome {
        Ok(Ok(success)) => ToolResult::Success(success),
        Ok(Err(failure)) => ToolResult::Error(failure),
        Err(panic) => ToolResult::Error(ToolFailure {
            code: codes::EXECUTOR_LOST.to_owned(),
            message: format!("the tool's task panicked: {panic}"),
            retryable: false,
            trust: Trust::Internal,
            provenance: ctx.provenance(),
            effect_may_have_happened: !p.read_only,
        }),
    };
    tracing::debug!(success = result.is_success(), "tool returned");
    result
}

/// A place among the calls running at once; given back when dropped.
struct Place(async_channel::Receiver<()>);

impl Drop for Place {
    fn drop(&mut self) {
        // Frees the place this call's send took.
        let _ = self.0.try_recv();
    }
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
    std::panic::AssertUnwindSafe(tool.call(ctx, args))
        .catch_unwind()
        .await
        .map_err(|p| crate::actor::panic_message(p.as_ref()))
}

#[cfg(target_arch = "wasm32")]
async fn call_guarded<T: Tool>(
    tool: &T,
    ctx: &ToolContext,
    args: T::Args,
) -> Result<Result<ToolSuccess, ToolFailure>, String> {
    Ok(tool.call(ctx, args).await)
}
