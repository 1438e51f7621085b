//! Preparing and dispatching one call of the tools actor: resolve the name
//! against what the run may see, check the arguments, the target and the
//! capability (`Prepare`), then hand the checked invocation to its tool actor
//! and wrap what it answers (`Dispatch`, S5.2–S5.4).

#![allow(clippy::result_large_err)]

use std::collections::BTreeSet;

use futures::future::Either;

use agent_capabilities::{ApprovalIdentity, PolicyInput, decide};
use agent_kernel::actor::{ActorError, Reply};
use agent_kernel::ids::{RunId, SessionId};
use agent_kernel::journal::idempotency_key;
use agent_kernel::maybe_send::boxed;
use agent_kernel::protocol::{
    InvocationDraft, PreparedCall, RunToolConfig, ToolCall, ToolInvocation, ToolMsg, ToolResult,
};

use crate::codes;
use crate::envelope::{CallSite, wrap};
use crate::gate::{check_draft, precheck_capability, verify_capability};
use crate::registry::Exposure;
use crate::validate::{derive_target, parse_arguments};

use super::{Resolved, ToolsActor, error_for};

impl ToolsActor {
    pub(super) fn resolve(
        &self,
        name: &str,
        config: &RunToolConfig,
        loaded: &BTreeSet<String>,
    ) -> Result<Resolved<'_>, ToolResult> {
        if let Some(internal) = self.discovery.get(name) {
            if self.discovery_on(config) {
                return Ok(Resolved::Discovery(internal));
            }
            return Err(ToolResult::error(
                codes::TOOL_NOT_ALLOWED,
                format!(
                    "{name} is not available in this run (no loadable tools in this mode and allowlist)"
                ),
                name,
            ));
        }
        let Some(tool) = self.registry.get(name) else {
            return Err(ToolResult::error(
                codes::UNKNOWN_TOOL,
                format!(
                    "there is no tool named {name:?}; use one of the tools you were given, or search_tools to find more"
                ),
                name,
            ));
        };
        if !tool.offered_to(config) {
            return Err(ToolResult::error(
                codes::TOOL_NOT_ALLOWED,
                format!("tool {name} is not available in this run's mode, allowlist or grants"),
                name,
            ));
        }
        if tool.exposure == Exposure::Discoverable && !loaded.contains(name) {
            return Err(ToolResult::error(
                codes::TOOL_NOT_LOADED,
                format!("tool {name} is not loaded; call load_tools with [\"{name}\"] first"),
                name,
            ));
        }
        Ok(Resolved::Registered(tool))
    }

    pub(super) fn prepare(
        &mut self,
        run: &RunId,
        session: &SessionId,
        call: &ToolCall,
        attempt: u32,
        config: RunToolConfig,
    ) -> Result<PreparedCall, ToolResult> {
        let (loaded, shown) = {
            let state = self.run_state(run);
            state.config = config.clone();
            (state.loaded.clone(), state.shown.get(&call.name).cloned())
        };
        // The same cap and visibility rules as the schemas the model is shown
        // (a set restored from storage has not passed through Schemas yet).
        let loaded = self.schema_list(&config, &loaded).1;
        let (def, fingerprint, trusted_external, unknown_function, schema) = {
            let resolved = self.resolve(&call.name, &config, &loaded)?;
            (
                resolved.def().clone(),
                resolved.fingerprint().clone(),
                resolved.trusted_external(),
                resolved.unknown_function(),
                resolved.schema().clone(),
            )
        };

        // The model acts on the definition it was shown: if that changed
        // (a rug pull), refuse; the next Schemas shows the new definition,
        // whose new identity the policy asks about again (S6.2).
        if let Some(shown) = shown
            && shown != fingerprint
        {
            self.run_state(run)
                .shown
                .insert(call.name.clone(), fingerprint.clone());
            return Err(ToolResult::error(
                codes::DEFINITION_CHANGED,
                format!(
                    "the definition of {} changed after it was shown (fingerprint {shown} is now {fingerprint}); nothing ran. Its new definition needs approval again",
                    def.name
                ),
                &def.name,
            ));
        }

        let args = parse_arguments(&call.arguments).map_err(|e| error_for(&e, &def.name))?;
        schema
            .check(&args.value)
            .map_err(|e| error_for(&e, &def.name))?;
        let (target, scope) = derive_target(&def.target, &args.value)
            .map_err(|e| ToolResult::error(e.code(), e.to_string(), &def.name))?;
        let draft = InvocationDraft {
            run: run.clone(),
            session: session.clone(),
            call_id: call.call_id.clone(),
            tool: def.name.clone(),
            fingerprint: fingerprint.clone(),
            arguments: args.value,
            args_hash: args.hash,
            effects: def.effects.clone(),
            idempotency: def.idempotency,
            sensitivity: def.sensitivity,
            origin: def.origin.clone(),
            provider: def.provider.clone(),
            target: target.clone(),
            scope: scope.clone(),
            attempt,
            idempotency_key: idempotency_key(run, &call.call_id),
        };
        let identity = ApprovalIdentity {
            origin: def.origin.clone(),
            provider: def.provider.clone(),
            tool: def.name.clone(),
            fingerprint,
            effects: def.effects.clone(),
            scope,
        };
        let target_summary = target.summary();
        let decision = decide(
            config.approval,
            &PolicyInput {
                identity: identity.clone(),
                allowed: true,
                trusted_external,
                unknown_mcp_function: unknown_function,
                target_summary: target_summary.clone(),
            },
        );
        Ok(PreparedCall {
            draft,
            decision,
            identity,
            target_summary,
        })
    }

    pub(super) async fn dispatch(
        &mut self,
        invocation: ToolInvocation,
        reply: Reply<ToolResult>,
        span: tracing::Span,
    ) {
        let name = invocation.draft.tool.clone();
        let now = self.clock.wall_ms();
        let run_config = self
            .runs
            .get(&invocation.draft.run)
            .map(|r| r.config.clone())
            .unwrap_or_default();
        let kind = {
            let resolved = if let Some(internal) = self.discovery.get(&name) {
                Resolved::Discovery(internal)
            } else if let Some(tool) = self.registry.get(&name) {
                Resolved::Registered(tool)
            } else {
                reply.send(ToolResult::error(
                    codes::UNKNOWN_TOOL,
                    format!("tool {name:?} is no longer registered; nothing ran"),
                    &name,
                ));
                return;
            };
            if let Err(refusal) = check_draft(
                &invocation.draft,
                resolved.def(),
                resolved.fingerprint(),
                resolved.schema(),
            ) {
                reply.send(refusal);
                return;
            }
            match resolved {
                Resolved::Discovery(internal) => Either::Left(internal.def.clone()),
                Resolved::Registered(tool) => {
                    Either::Right((tool.addr.clone(), tool.definition.clone()))
                }
            }
        };
        let site = CallSite {
            session: invocation.draft.session.clone(),
            run: invocation.draft.run.clone(),
            call: invocation.draft.call_id.clone(),
        };
        match kind {
            Either::Left(def) => {
                // Executed here, so this is the authoritative verification.
                if let Err(refusal) = verify_capability(&invocation, now) {
                    reply.send(refusal);
                    return;
                }
                if let Err(e) = self.restore(&invocation.draft.run).await {
                    reply.send(ToolResult::error(
                        codes::LOADED_TOOLS_UNAVAILABLE,
                        format!("{e}; nothing was loaded"),
                        &def.name,
                    ));
                    return;
                }
                let raw = self.run_discovery(&invocation, &run_config).await;
                reply.send(wrap(raw, &def, &site, self.spill.as_ref()).await);
            }
            Either::Right((addr, def)) => {
                if let Err(refusal) = precheck_capability(&invocation, now) {
                    reply.send(refusal);
                    return;
                }
                let spill = self.spill.clone();
                let read_only = agent_capabilities::is_read_only(&def.effects);
                self.next_dispatch += 1;
                let dispatch = self.next_dispatch;
                let run = invocation.draft.run.clone();
                self.in_flight
                    .entry(run.clone())
                    .or_default()
                    .insert(dispatch, addr.clone());
                let ended = self.ended.clone();
                let task = async move {
                    let raw = match addr
                        .ask(|r| ToolMsg::Invoke {
                            invocation,
                            reply: r,
                        })
                        .await
                    {
                        Ok(result) => result,
                        Err(e) => {
                            let maybe = matches!(e, ActorError::NoReply { .. }) && !read_only;
                            let mut failure = ToolResult::error(
                                codes::TOOL_UNAVAILABLE,
                                format!(
                                    "{e}; {}",
                                    if maybe {
                                        "the effect may have happened"
                                    } else {
                                        "nothing ran"
                                    }
                                ),
                                &def.name,
                            );
                            if let ToolResult::Error(f) = &mut failure {
                                f.effect_may_have_happened = maybe;
                            }
                            failure
                        }
                    };
                    let wrapped = wrap(raw, &def, &site, spill.as_ref()).await;
                    tracing::debug!(success = wrapped.is_success(), "dispatched");
                    reply.send(wrapped);
                    // The actor may have stopped: then nothing tracks the call.
                    let _ = ended.send((run, dispatch)).await;
                };
                self.executor
                    .spawn(boxed(tracing::Instrument::instrument(task, span)));
            }
        }
    }
}
