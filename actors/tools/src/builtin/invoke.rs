//! What every built-in tool actor does before and after running: verify the
//! invocation's capability against the tool's own definition, and build the
//! result envelope (S5.3, S5.4).

use std::collections::BTreeMap;

use agent_capabilities::{EffectRequest, Fingerprint, Target, Trust};
use agent_kernel::protocol::{
    Provenance, Reference, ToolDefinition, ToolFailure, ToolInvocation, ToolResult, ToolSuccess,
};
use serde_json::Value;

use std::future::Future;

use agent_kernel::actor::{ParentLink, spawn_actor};
use agent_kernel::host::Executor;
use agent_kernel::protocol::{ToolAddr, ToolMsg};
use agent_kernel::{MaybeSend, MaybeSync};
use futures::StreamExt;
use tracing::Instrument;

/// Spawn a built-in tool's actor: up to `concurrency` invocations at once
/// (mailbox of four times that), each handled by `handle` inside a tracing
/// span carrying the tool, run and call ids.
pub(crate) fn spawn_invoke_actor<F, Fut>(
    executor: &dyn Executor,
    tool: &'static str,
    concurrency: usize,
    parent: Option<ParentLink>,
    handle: F,
) -> ToolAddr
where
    F: Fn(ToolInvocation) -> Fut + MaybeSend + MaybeSync + 'static,
    Fut: Future<Output = ToolResult> + MaybeSend + 'static,
{
    let concurrency = concurrency.max(1);
    spawn_actor(
        executor,
        tool,
        concurrency * 4,
        parent,
        move |inbox| async move {
            inbox
                .for_each_concurrent(concurrency, |msg| {
                    let ToolMsg::Invoke { invocation, reply } = msg;
                    let span = tracing::info_span!(
                        "tool",
                        tool,
                        run = %invocation.draft.run,
                        call = %invocation.draft.call_id
                    );
                    let result = handle(invocation).instrument(span);
                    async move { reply.send(result.await) }
                })
                .await;
            Ok::<(), String>(())
        },
    )
}

/// Why an invocation's capability was refused (becomes `capability_refused`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused(pub(crate) String);

/// A definition together with its fingerprint, computed once when the actor starts.
#[derive(Debug, Clone)]
pub(crate) struct Definition {
    pub(crate) def: ToolDefinition,
    pub(crate) fingerprint: Fingerprint,
}

impl Definition {
    /// Fingerprint `def`. Built-in definitions are plain data that always
    /// serialise; an error here is a programming error reported by the caller.
    pub(crate) fn new(def: ToolDefinition) -> Result<Definition, String> {
        let fingerprint = def
            .fingerprint()
            .map_err(|e| format!("built-in tool {} has no fingerprint: {e}", def.name))?;
        Ok(Definition { def, fingerprint })
    }

    fn name(&self) -> &str {
        &self.def.name
    }

    /// Check `invocation` before anything runs: it must name this tool and
    /// this definition, and its capability must verify for this tool's
    /// effects and `target` at `now_ms`. The request is built from what the
    /// actor knows, not from what the draft claims, so a capability for
    /// another tool, definition or target grants nothing here.
    pub(crate) fn authorise(
        &self,
        invocation: &ToolInvocation,
        target: Target,
        now_ms: u64,
    ) -> Result<(), Refused> {
        let draft = &invocation.draft;
        if draft.tool != self.def.name {
            return Err(Refused(format!(
                "this actor runs {}, but the invocation is for {}",
                self.def.name, draft.tool
            )));
        }
        if draft.fingerprint != self.fingerprint {
            return Err(Refused(format!(
                "the invocation was prepared for definition {} of {}, but the current definition is {}; \
                 load the tool again",
                draft.fingerprint.as_str(),
                self.def.name,
                self.fingerprint.as_str()
            )));
        }
        let request = EffectRequest {
            run_id: draft.run.to_string(),
            tool: self.def.name.clone(),
            fingerprint: self.fingerprint.clone(),
            effects: self.def.effects.clone(),
            target,
        };
        invocation
            .verifier
            .verify(&invocation.capability, &request, now_ms)
            .map(|_| ())
            .map_err(|e| Refused(e.to_string()))
    }

    /// The envelope for a refused capability: nothing ran.
    pub(crate) fn refused(&self, Refused(message): Refused) -> ToolResult {
        ToolResult::error(
            "capability_refused",
            format!("{} was not run: {message}", self.def.name),
            self.name(),
        )
    }

    /// A failure with a stable `code`; nothing happened outside the run.
    pub(crate) fn failure(&self, code: &str, message: String, retryable: bool) -> ToolResult {
        ToolResult::Error(ToolFailure {
            code: code.to_owned(),
            message,
            retryable,
            trust: Trust::Internal,
            provenance: self.provenance(BTreeMap::new(), None),
            effect_may_have_happened: false,
        })
    }

    /// The arguments did not have the shape the definition declares.
    pub(crate) fn invalid_arguments(&self, message: String) -> ToolResult {
        self.failure("invalid_arguments", message, false)
    }

    /// A success with `content` of the given `trust`.
    pub(crate) fn success(
        &self,
        content: Value,
        trust: Trust,
        detail: BTreeMap<String, Value>,
        content_hash: Option<String>,
        references: Vec<Reference>,
    ) -> ToolResult {
        ToolResult::Success(ToolSuccess {
            content,
            trust,
            provenance: self.provenance(detail, content_hash),
            references,
            receipts: Vec::new(),
        })
    }

    fn provenance(
        &self,
        detail: BTreeMap<String, Value>,
        content_hash: Option<String>,
    ) -> Provenance {
        Provenance {
            origin: self.def.origin.to_string(),
            tool: self.def.name.clone(),
            content_hash,
            detail,
            ..Provenance::default()
        }
    }
}
