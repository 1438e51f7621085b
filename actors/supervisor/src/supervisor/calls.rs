//! A tool call of the last assistant turn, processed (seen for the first
//! time) or replayed (found in the journal, the kernel's replay rule
//! decides): prepared and judged by the tools actor, approved by the person
//! when policy asks, dispatched with a one-time capability once `running` is
//! durable, and settled; the outcome goes durable with the conversation in
//! one batch. The journal steps are [`crate::store::Tx`]'s.

use agent_capabilities::{Caveat, Decision, Grant, Uses};
use agent_kernel::actor::{ActorError, Inbox};
use agent_kernel::budget::BudgetDimension;
use agent_kernel::host::timeout;
use agent_kernel::ids::CallId;
use agent_kernel::journal::{CallState, JournalRecord, ReplayDecision, replay_decision};
use agent_kernel::maybe_send::{BoxFuture, boxed};
use agent_kernel::protocol::{
    InvocationDraft, PreparedCall, ProgressSink, ToolCall, ToolInvocation, ToolResult, ToolsMsg,
};
use agent_kernel::run::{
    ActivityKind, CheckpointStage, Evidence, PendingKind, PendingRequest, RunStatus, StopReason,
};
use agent_kernel::tool::codes;

use super::{Ending, Interruption, Msg, Supervisor, Watched, approval_request};
use crate::blob::{json_blob, verified_blob};
use crate::builtin::{self, ASK_USER, UPDATE_PLAN};
use crate::error::RunError;
use crate::message::{AssistantToolCall, Message};
use crate::store::{EventBus, RunEvent, Tx};

impl Supervisor {
    /// Processing: a call never seen before.
    pub(super) async fn process_call(
        &mut self,
        inbox: &Inbox<Msg>,
        call_id: CallId,
        call: AssistantToolCall,
    ) -> Result<(), RunError> {
        if let Err(e) = self.config.validate() {
            return self.fail_runtime("supervisor", &e.to_string()).await;
        }
        if let Err(dim) = self.config.budget.check_new_call(&self.usage_now()) {
            return self.exhaust(dim).await;
        }
        let builtin = matches!(call.name.as_str(), ASK_USER | UPDATE_PLAN);
        if builtin && !self.config.allows(&call.name) {
            let result = ToolResult::error(
                "not_allowed",
                "this tool is not allowed in this run",
                &call.name,
            );
            return self
                .outcome(None, &call_id, &call, result, |_| Ok(()))
                .await;
        }
        match call.name.as_str() {
            ASK_USER => return self.ask_user(call_id, call).await,
            UPDATE_PLAN => return self.update_plan(call_id, call).await,
            _ => {}
        }
        let Some(prepared) = self.prepare(inbox, &call_id, &call, 1).await? else {
            return Ok(());
        };
        match prepared {
            Err(result) => {
                self.outcome(None, &call_id, &call, result, |_| Ok(()))
                    .await
            }
            Ok(p) => match p.decision.clone() {
                Decision::Automatic { .. } => self.dispatch(inbox, p, None, &call).await,
                Decision::AskOnce { reason, .. } => self.ask_approval(p, None, reason).await,
                Decision::Deny { reason } => {
                    // The record's arguments blob rides with the outcome's commit.
                    let mut tx = self.writer.begin();
                    let record = tx.new_record(&p)?;
                    self.writer.defer(tx)?;
                    let result = ToolResult::error("policy_denied", reason, &p.draft.tool);
                    self.outcome(Some(record), &call_id, &call, result, |_| Ok(()))
                        .await
                }
            },
        }
    }

    /// Replaying: the call has a journal record; the replay rule decides.
    pub(super) async fn replay_call(
        &mut self,
        inbox: &Inbox<Msg>,
        record: JournalRecord,
        call: AssistantToolCall,
    ) -> Result<(), RunError> {
        let call_id = record.call_id.clone();
        let storage = self.ctx.host.storage.clone();
        let verifies = match &record.result {
            Some(blob) => verified_blob(&*storage, blob).await?.is_some(),
            None => false,
        };
        let mut decision = replay_decision(&record, verifies);
        if record.state == CallState::EffectUnknown && self.retry_anyway.contains(&call_id) {
            decision = ReplayDecision::Retry {
                attempt: record.attempt.saturating_add(1),
            };
        }
        if decision == ReplayDecision::MarkEffectUnknown && self.ctx.retries_unsafely_on_resume() {
            decision = ReplayDecision::Retry {
                attempt: record.attempt.saturating_add(1),
            };
        }
        tracing::info!(state = ?record.state, ?decision, "replaying a journaled call");
        match decision {
            ReplayDecision::Reuse | ReplayDecision::KeepFailed => {
                let result: ToolResult = match &record.result {
                    Some(blob) if verifies => json_blob(&*storage, &self.id(), blob).await?,
                    _ => ToolResult::error(
                        record.error.as_ref().map_or("failed", |e| e.code.as_str()),
                        "the call failed",
                        &record.tool,
                    ),
                };
                let transcript = vec![Message::Tool {
                    tool_call_id: call.id.clone(),
                    content: builtin::model_content(&result),
                }];
                let tx = self.writer.begin();
                self.commit_transcript(tx, transcript, CheckpointStage::AfterOutcome { call_id })
                    .await
            }
            ReplayDecision::MarkEffectUnknown | ReplayDecision::Blocked => {
                self.block_on_unknown(record).await
            }
            ReplayDecision::Dispatch | ReplayDecision::Retry { .. } => {
                if record.tool == ASK_USER {
                    return self.ask_user_again(record).await;
                }
                if record.tool == UPDATE_PLAN {
                    // Local and idempotent: simply apply it again.
                    return self.update_plan_with(call_id, call, Some(record)).await;
                }
                let attempt = if record.state == CallState::Prepared {
                    record.attempt
                } else {
                    record.attempt.saturating_add(1)
                };
                let Some(prepared) = self.prepare(inbox, &call_id, &call, attempt).await? else {
                    return Ok(());
                };
                let p = match prepared {
                    Err(result) => {
                        return self
                            .outcome(Some(record), &call_id, &call, result, |_| Ok(()))
                            .await;
                    }
                    Ok(p) => p,
                };
                if record
                    .check_prepare_again(&p.draft.tool, &p.draft.fingerprint, &p.draft.args_hash)
                    .is_err()
                {
                    let result = ToolResult::error(
                        "definition_changed",
                        "the tool's definition or arguments changed since this call was journaled; it was not run",
                        &record.tool,
                    );
                    return self
                        .outcome(Some(record), &call_id, &call, result, |_| Ok(()))
                        .await;
                }
                let confirmed = self.approved.remove(&call_id) | self.retry_anyway.remove(&call_id);
                match p.decision.clone() {
                    Decision::Deny { reason } => {
                        let result = ToolResult::error("policy_denied", reason, &record.tool);
                        self.outcome(Some(record), &call_id, &call, result, |_| Ok(()))
                            .await
                    }
                    _ if confirmed => self.dispatch(inbox, p, Some(record), &call).await,
                    Decision::Automatic { .. } => {
                        self.dispatch(inbox, p, Some(record), &call).await
                    }
                    Decision::AskOnce { reason, .. } => {
                        self.ask_approval(p, Some(record), reason).await
                    }
                }
            }
        }
    }

    /// Ask the tools actor to parse, validate and judge a call. `None` when
    /// the run was stopped or interrupted meanwhile (already recorded).
    async fn prepare(
        &mut self,
        inbox: &Inbox<Msg>,
        call_id: &CallId,
        call: &AssistantToolCall,
        attempt: u32,
    ) -> Result<Option<Result<PreparedCall, ToolResult>>, RunError> {
        let tools = self.ctx.tools.clone();
        let run = self.id();
        let session = self.writer.run.session.clone();
        let config = self.config.tool_config();
        let tool_call = ToolCall {
            call_id: call_id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        };
        let mut fut: BoxFuture<'static, _> = boxed(async move {
            tools
                .ask(|reply| ToolsMsg::Prepare {
                    run,
                    session,
                    call: tool_call,
                    attempt,
                    config,
                    reply,
                })
                .await
        });
        match self.watch(inbox, &mut fut).await? {
            Watched::Done(Ok(prepared)) => Ok(Some(prepared)),
            Watched::Done(Err(e)) => {
                let actor = self.ctx.tools.name().to_owned();
                self.fail_runtime(&actor, &e.to_string()).await?;
                Ok(None)
            }
            Watched::Stop(reply) => {
                self.cancel(reply, None).await?;
                Ok(None)
            }
            Watched::Interrupt(reason) => {
                self.interrupt(reason).await?;
                Ok(None)
            }
            Watched::OutOfTime => {
                self.exhaust(BudgetDimension::Duration).await?;
                Ok(None)
            }
        }
    }
    async fn ask_approval(
        &mut self,
        p: PreparedCall,
        existing: Option<JournalRecord>,
        reason: String,
    ) -> Result<(), RunError> {
        let fresh = existing.is_none();
        let mut tx = self.writer.begin();
        let record = match existing {
            Some(r) => r,
            None => tx.new_record(&p)?,
        };
        let request = approval_request(&record.call_id)?;
        tx.put_prepared(&record, fresh);
        tx.put(&PendingRequest {
            run: self.id(),
            id: request.clone(),
            kind: PendingKind::Approval {
                call_id: record.call_id.clone(),
                tool: record.tool.clone(),
                effects: record.effects.clone(),
                target_summary: p.target_summary.clone(),
                reason,
                identity: p.identity.clone(),
            },
            created_at_ms: tx.now(),
            presented: false,
        });
        tx.activity(ActivityKind::ApprovalRequested {
            request,
            call_id: record.call_id.clone(),
        });
        tx.status(RunStatus::AwaitingApproval, None)?;
        self.writer.commit(tx).await
    }

    /// Mint a one-time capability, make `running` durable, dispatch, and
    /// record the outcome.
    async fn dispatch(
        &mut self,
        inbox: &Inbox<Msg>,
        p: PreparedCall,
        existing: Option<JournalRecord>,
        call: &AssistantToolCall,
    ) -> Result<(), RunError> {
        // Nothing is dispatched with no time left (an approval or a resume
        // can lead here without a new call's budget check).
        if let Err(dim) = self.config.budget.check_hard_limits(&self.usage_now()) {
            return self.exhaust(dim).await;
        }
        let fresh = existing.is_none();
        let mut tx = self.writer.begin();
        let mut record = match existing {
            Some(r) => r,
            None => tx.new_record(&p)?,
        };
        tx.mark_running(&mut record, fresh)?;
        let mut draft = p.draft.clone();
        draft.attempt = record.attempt;
        // The journal's copy is what every attempt sends: fixed when the call
        // was first recorded, so a retry after an upgrade keeps its key.
        draft.idempotency_key = record.idempotency_key.clone();
        let ttl = u64::try_from(self.ctx.options.capability_ttl.as_millis()).unwrap_or(u64::MAX);
        let mut capability = self.authority.mint(Grant {
            tool: draft.tool.clone(),
            fingerprint: draft.fingerprint.clone(),
            origin: draft.origin.clone(),
            effects: draft.effects.clone(),
            scope: draft.scope.clone(),
            uses: Uses::Once,
            expires_at_ms: self.ctx.host.clock.wall_ms().saturating_add(ttl),
        });
        if let Some(skill) = &self.config.skill {
            // S5.6: the Skill's narrowing is a caveat on the capability
            // itself, checked wherever it is verified, not only a flag here.
            capability = capability.attenuate(Caveat::Tools(skill.tools.clone()));
        }
        for caveat in &self.config.caveats {
            // S10.2: a profile's or a turn's narrowing, on the token too.
            capability = capability.attenuate(caveat.clone());
        }
        let progress = progress_events(&self.ctx.events, &draft);
        let invocation = ToolInvocation {
            draft,
            capability,
            verifier: self.authority.verifier(),
            progress,
        };
        tx.checkpoint(
            CheckpointStage::BeforeDispatch {
                call_id: record.call_id.clone(),
            },
            self.transcript_ref.clone(),
        );
        let tools = self.ctx.tools.clone();
        let fut: BoxFuture<'static, Result<ToolResult, ActorError>> = boxed(async move {
            tools
                .ask(|reply| ToolsMsg::Dispatch { invocation, reply })
                .await
        });
        // The crash simulator's own test only (feature `sabotage`): the
        // sabotage may carry the call out before `running` is durable.
        #[cfg(feature = "sabotage")]
        let fut = self.ctx.sabotage.dispatch_early(fut).await;
        let mut fut = fut;
        // Durability order: `running` is durable before the call is dispatched.
        self.writer.commit(tx).await?;
        self.in_flight = Some(record.call_id.clone());
        let watched = self.watch(inbox, &mut fut).await;
        self.in_flight = None;
        self.withdraw_elicitations(super::elicitation::Scan::IfAsked)
            .await?;
        match watched? {
            Watched::Done(Ok(result)) => self.settle(record, call, result).await,
            Watched::Done(Err(e)) => {
                let actor = self.ctx.tools.name().to_owned();
                self.tools_lost(record, &actor, &e.to_string()).await
            }
            Watched::Stop(reply) => {
                // Cancellation in the protocol: the tool actors holding this
                // run's calls hear of the stop (a read ends at once).
                let run = self.writer.run.id.clone();
                let _ = self.ctx.tools.send(ToolsMsg::CancelRun { run }).await;
                self.end_in_flight(Ending::Stop(reply), record, call, fut)
                    .await
            }
            Watched::OutOfTime => {
                let ending = Ending::Budget(BudgetDimension::Duration);
                self.end_in_flight(ending, record, call, fut).await
            }
            Watched::Interrupt(reason) => {
                let grace = self.ctx.options.stop_grace;
                if let Ok(Ok(result)) = timeout(&*self.ctx.host.clock, grace, fut).await {
                    self.settle(record, call, result).await?;
                }
                if self.writer.run.status == RunStatus::Running {
                    // A call still in flight stays `running`; resume settles it by the replay rule.
                    self.interrupt(reason).await?;
                }
                Ok(())
            }
        }
    }
    /// Record a dispatch's result: `effect_unknown` (and ask the person) when
    /// the tool says the effect may have happened, else committed or failed.
    pub(super) async fn settle(
        &mut self,
        mut record: JournalRecord,
        call: &AssistantToolCall,
        result: ToolResult,
    ) -> Result<(), RunError> {
        if let ToolResult::Error(f) = &result {
            if f.code == codes::EXECUTOR_LOST {
                // The call's task was lost, as if the tab had been (S2.5):
                // the record stays `running` for Resume's replay rule.
                let lost = Interruption::ExecutorLost(format!("tool:{}", record.tool));
                return self.interrupt(lost).await;
            }
            if f.effect_may_have_happened {
                return self.block_on_unknown_from(&mut record).await;
            }
        }
        let call_id = record.call_id.clone();
        self.outcome(Some(record), &call_id, call, result, |_| Ok(()))
            .await
    }

    async fn block_on_unknown(&mut self, mut record: JournalRecord) -> Result<(), RunError> {
        self.block_on_unknown_from(&mut record).await
    }

    /// `effect_unknown` durable, a pending decision, and the run interrupted.
    async fn block_on_unknown_from(&mut self, record: &mut JournalRecord) -> Result<(), RunError> {
        let mut tx = self.writer.begin();
        self.writer.mark_effect_unknown(&mut tx, record).await?;
        tx.status(
            RunStatus::Interrupted,
            Some(StopReason::EffectUnknown {
                call_id: record.call_id.clone(),
            }),
        )?;
        self.writer.commit(tx).await
    }
    /// Make an outcome durable in one batch: the result blob first, then the
    /// journal record (committed or failed), the evidence, the activity, and
    /// the conversation with the result message (the model sees the result
    /// only after this commit). `extra` adds what the caller needs in the same batch.
    pub(super) async fn outcome(
        &mut self,
        record: Option<JournalRecord>,
        call_id: &CallId,
        call: &AssistantToolCall,
        result: ToolResult,
        extra: impl FnOnce(&mut Tx) -> Result<(), RunError>,
    ) -> Result<(), RunError> {
        let mut tx = self.writer.begin();
        let blob = tx.json_blob(&result)?;
        let now = tx.now();
        let tool = record
            .as_ref()
            .map_or(call.name.clone(), |r| r.tool.clone());
        let state = match record {
            Some(mut record) => {
                tx.settle(&mut record, &result, blob.clone())?;
                record.state
            }
            None => {
                // Refused before it became an invocation (unknown tool, invalid
                // arguments): nothing ran, so there is no journal record.
                tx.run.usage.tool_calls += 1;
                CallState::Failed
            }
        };
        let (trust, provenance, references) = match &result {
            ToolResult::Success(s) => (s.trust, s.provenance.clone(), s.references.clone()),
            ToolResult::Error(f) => (f.trust, f.provenance.clone(), Vec::new()),
        };
        tx.evidence(Evidence {
            run: self.id(),
            call_id: call_id.clone(),
            tool: tool.clone(),
            trust,
            provenance,
            references,
            result: blob,
            at_ms: now,
        });
        tx.activity(ActivityKind::ToolCall {
            call_id: call_id.clone(),
            tool,
            state,
        });
        extra(&mut tx)?;
        let transcript = vec![Message::Tool {
            tool_call_id: call.id.clone(),
            content: builtin::model_content(&result),
        }];
        self.commit_transcript(
            tx,
            transcript,
            CheckpointStage::AfterOutcome {
                call_id: call_id.clone(),
            },
        )
        .await
    }
}

/// The sink a dispatched call reports progress into: each report becomes a
/// live [`RunEvent::ToolProgress`] of the call's run (never stored).
fn progress_events(events: &EventBus, draft: &InvocationDraft) -> ProgressSink {
    let events = events.clone();
    let (run, call_id, tool) = (draft.run.clone(), draft.call_id.clone(), draft.tool.clone());
    ProgressSink::new(move |progress| {
        events.emit(RunEvent::ToolProgress {
            run: run.clone(),
            call_id: call_id.clone(),
            tool: tool.clone(),
            progress,
        })
    })
}
