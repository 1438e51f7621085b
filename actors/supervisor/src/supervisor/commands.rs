//! The supervisor's commands from the person: approve or deny a call,
//! respond to a question, decide about a call whose effect is unknown,
//! resume an interrupted run, stop a run; and the child links a parent run
//! records (S3.2). Each command checks the run's status first and answers
//! its caller; a refused command changes nothing.

use serde_json::json;
use tracing::Instrument;

use agent_capabilities::Trust;
use agent_kernel::host::{StorageExt, Table};
use agent_kernel::ids::{CallId, RequestId, RunId};
use agent_kernel::journal::JournalRecord;
use agent_kernel::protocol::ToolResult;
use agent_kernel::run::{ActivityKind, PendingKind, PendingRequest, RunStatus, StopReason};

use super::{Answer, Choice, Msg, Supervisor, arguments_value, call_id_for, pending_key};
use crate::builtin::{self, ask_user::AskUserRequest};
use crate::error::RunError;
use crate::message::{AssistantToolCall, Tail};
use crate::store::{RunWriter, decision_request, pending_of};

impl Supervisor {
    pub(super) async fn handle(&mut self, msg: Msg) -> Result<(), RunError> {
        let span = tracing::info_span!("command", run = %self.writer.run.id, command = msg.name());
        self.handle_inner(msg).instrument(span).await
    }

    async fn handle_inner(&mut self, msg: Msg) -> Result<(), RunError> {
        match msg {
            Msg::LinkChild { child, reply } => {
                let r = link_child(&mut self.writer, child).await;
                reply.send(r);
                Ok(())
            }
            Msg::Stop { reply } => self.stop(reply).await,
            Msg::Approve { request, reply } => self.approve(request, reply).await,
            Msg::Deny { request, reply } => self.deny(request, reply).await,
            Msg::Respond {
                request,
                text,
                reply,
            } => self.respond(request, text, reply).await,
            Msg::Decide {
                call: call_id,
                choice,
                reply,
            } => self.decide(call_id, choice, reply).await,
            Msg::Resume { reply } => self.resume(reply).await,
            // No call is in flight outside a wait: nothing can ask.
            Msg::Elicit { reply, .. } => {
                reply.send(Err(self.wrong_status("running a call", "elicit")));
                Ok(())
            }
        }
    }

    /// A command refused because the run's status is not `expected`.
    fn wrong_status(&self, expected: &'static str, action: &'static str) -> RunError {
        RunError::WrongStatus {
            run: self.id(),
            status: self.writer.run.status,
            expected,
            action,
        }
    }

    /// Stop the run: a run not final yet ends `cancelled` /
    /// `user_stopped` ([`Supervisor::cancel`]).
    async fn stop(&mut self, reply: Answer) -> Result<(), RunError> {
        if self.writer.run.status.is_final() {
            reply.send(Err(
                self.wrong_status("running, awaiting or interrupted", "stop")
            ));
        } else {
            self.cancel(reply, None).await?;
        }
        Ok(())
    }

    /// The person approves the call a pending approval names: the run
    /// runs on and the call is dispatched.
    async fn approve(&mut self, request: RequestId, reply: Answer) -> Result<(), RunError> {
        let status = self.writer.run.status;
        if status != RunStatus::AwaitingApproval {
            reply.send(Err(self.wrong_status("awaiting_approval", "approve")));
            return Ok(());
        }
        match self.find_pending(&request, "approval").await {
            Err(e) => reply.send(Err(e)),
            Ok((pending, call_id)) => {
                let mut tx = self.writer.begin();
                tx.delete(Table::Pending, pending_key(&pending));
                tx.activity(ActivityKind::ApprovalAnswered {
                    request,
                    approved: true,
                });
                tx.status(RunStatus::Running, None)?;
                self.writer.commit(tx).await?;
                self.approved.insert(call_id);
                reply.send(Ok(()));
            }
        }
        Ok(())
    }

    /// The person denies the call a pending approval names: it fails
    /// `approval_denied` and the model is told.
    async fn deny(&mut self, request: RequestId, reply: Answer) -> Result<(), RunError> {
        let status = self.writer.run.status;
        if status != RunStatus::AwaitingApproval {
            reply.send(Err(self.wrong_status("awaiting_approval", "deny")));
            return Ok(());
        }
        match self.find_pending(&request, "approval").await {
            Err(e) => reply.send(Err(e)),
            Ok((pending, call_id)) => {
                let (record, call) = self.record_and_call(&call_id).await?;
                let result = ToolResult::error(
                    "approval_denied",
                    "the person denied this call; do not try it again",
                    &record.tool,
                );
                self.outcome(Some(record), &call_id, &call, result, |tx| {
                    tx.delete(Table::Pending, pending_key(&pending));
                    tx.activity(ActivityKind::ApprovalAnswered {
                        request,
                        approved: false,
                    });
                    tx.status(RunStatus::Running, None)
                })
                .await?;
                reply.send(Ok(()));
            }
        }
        Ok(())
    }

    /// The person answers an `ask_user` question; an answer that does not
    /// fit the question is refused and the run keeps waiting.
    async fn respond(
        &mut self,
        request: RequestId,
        text: String,
        reply: Answer,
    ) -> Result<(), RunError> {
        let status = self.writer.run.status;
        let run = self.id();
        if status != RunStatus::AwaitingInput {
            reply.send(Err(self.wrong_status("awaiting_input", "respond")));
            return Ok(());
        }
        match self.find_pending(&request, "input").await {
            Err(e) => reply.send(Err(e)),
            Ok((pending, call_id)) => {
                let (record, call) = self.record_and_call(&call_id).await?;
                // The answer must fit the question; a refused answer
                // changes nothing and the run keeps waiting.
                let answered = AskUserRequest::from_arguments(&arguments_value(&call))
                    .map_err(|e| self.inconsistent(format!("the pending question is invalid: {e}")))
                    .and_then(|question| {
                        let answer = question.answer_from_text(&text).map_err(|e| {
                            RunError::InvalidAnswer {
                                run: run.clone(),
                                request: request.clone(),
                                reason: e.to_string(),
                            }
                        })?;
                        question
                            .answer_result(&answer)
                            .map_err(|e| RunError::InvalidAnswer {
                                run: run.clone(),
                                request: request.clone(),
                                reason: e.to_string(),
                            })
                    });
                let result = match answered {
                    Ok(result) => result,
                    Err(e) => {
                        reply.send(Err(e));
                        return Ok(());
                    }
                };
                // The `prepared` record becomes `running`, then
                // `committed`, with the outcome.
                self.outcome(Some(record), &call_id, &call, result, |tx| {
                    tx.delete(Table::Pending, pending_key(&pending));
                    tx.activity(ActivityKind::InputAnswered { request });
                    tx.status(RunStatus::Running, None)
                })
                .await?;
                reply.send(Ok(()));
            }
        }
        Ok(())
    }

    /// The person decides about a call whose effect is unknown (S2.3).
    async fn decide(
        &mut self,
        call_id: CallId,
        choice: Choice,
        reply: Answer,
    ) -> Result<(), RunError> {
        let status = self.writer.run.status;
        let run = self.id();
        if status != RunStatus::Interrupted {
            reply.send(Err(self.wrong_status("interrupted", "decide")));
            return Ok(());
        }
        let key = format!("{}/{}", run, decision_request(&call_id)?);
        let Some(pending) = self
            .ctx
            .host
            .storage
            .get_record::<PendingRequest>(&key)
            .await?
        else {
            reply.send(Err(RunError::NoSuchDecision { run, call: call_id }));
            return Ok(());
        };
        let taken = ActivityKind::DecisionTaken {
            request: pending.id.clone(),
            choice: choice.as_str().to_owned(),
        };
        match choice {
            Choice::Abandon => {
                let mut tx = self.writer.begin();
                tx.delete(Table::Pending, key);
                tx.activity(taken);
                self.set_output_so_far(&mut tx).await?;
                tx.status(
                    RunStatus::Failed,
                    Some(StopReason::EffectUnknown { call_id }),
                )?;
                self.writer.commit(tx).await?;
            }
            Choice::RetryAnyway => {
                let mut tx = self.writer.begin();
                tx.delete(Table::Pending, key);
                tx.activity(taken);
                tx.status(RunStatus::Running, None)?;
                self.writer.commit(tx).await?;
                self.retry_anyway.insert(call_id);
            }
            Choice::MarkDone => {
                let (record, call) = self.record_and_call(&call_id).await?;
                let result = builtin::success(
                    &record.tool,
                    "user",
                    Trust::User,
                    json!({"marked_done_by_person": true,
                           "note": "the effect of this call was uncertain; the person confirmed it happened"}),
                );
                self.outcome(Some(record), &call_id, &call, result, |tx| {
                    tx.delete(Table::Pending, key);
                    tx.activity(taken);
                    tx.status(RunStatus::Running, None)
                })
                .await?;
            }
        }
        reply.send(Ok(()));
        Ok(())
    }

    /// Resume an interrupted run, unless a decision is still pending.
    async fn resume(&mut self, reply: Answer) -> Result<(), RunError> {
        let status = self.writer.run.status;
        let run = self.id();
        if status != RunStatus::Interrupted {
            reply.send(Err(self.wrong_status("interrupted", "resume")));
            return Ok(());
        }
        let pending = pending_of(&*self.ctx.host.storage, &run).await?;
        if let Some(call) = pending.iter().find_map(|p| match &p.kind {
            PendingKind::Decision { call_id, .. } => Some(call_id.clone()),
            _ => None,
        }) {
            reply.send(Err(RunError::DecisionPending { run, call }));
            return Ok(());
        }
        let mut tx = self.writer.begin();
        tx.status(RunStatus::Running, None)?;
        self.writer.commit(tx).await?;
        reply.send(Ok(()));
        Ok(())
    }

    async fn find_pending(
        &self,
        request: &RequestId,
        expected: &'static str,
    ) -> Result<(PendingRequest, CallId), RunError> {
        let run = self.id();
        let pending: Option<PendingRequest> = self
            .ctx
            .host
            .storage
            .get_record(&format!("{run}/{request}"))
            .await?;
        let Some(pending) = pending else {
            return Err(RunError::NoSuchRequest {
                run,
                request: request.clone(),
            });
        };
        let (actual, call) = match &pending.kind {
            PendingKind::Approval { call_id, .. } => ("approval", call_id.clone()),
            PendingKind::Input { call_id, .. } => ("input", call_id.clone()),
            PendingKind::Decision { call_id, .. } => ("decision", call_id.clone()),
            PendingKind::Elicitation { call_id, .. } => ("elicitation", call_id.clone()),
        };
        if actual != expected {
            return Err(RunError::WrongRequestKind {
                run,
                request: request.clone(),
                actual,
                expected,
            });
        }
        Ok((pending, call))
    }

    /// The journal record of a pending call and its call in the conversation.
    async fn record_and_call(
        &self,
        call_id: &CallId,
    ) -> Result<(JournalRecord, AssistantToolCall), RunError> {
        let run = self.id();
        let record: JournalRecord = self
            .ctx
            .host
            .storage
            .get_record(&JournalRecord::key_for(&run, call_id))
            .await?
            .ok_or_else(|| self.inconsistent(format!("call {call_id} has no journal record")))?;
        let call = self.pending_call(call_id)?.ok_or_else(|| {
            self.inconsistent(format!("call {call_id} is not pending in the conversation"))
        })?;
        Ok((record, call))
    }

    pub(super) fn pending_call(
        &self,
        call_id: &CallId,
    ) -> Result<Option<AssistantToolCall>, RunError> {
        let Tail::ToolsPending {
            round_calls,
            pending,
        } = self.transcript.tail()
        else {
            return Ok(None);
        };
        let turn = self.transcript.assistant_turns();
        for index in pending {
            if &call_id_for(turn, index)? == call_id {
                return Ok(round_calls.get(index).cloned());
            }
        }
        Ok(None)
    }
}

/// Add a child to a parent's record (S3.2), with an activity.
pub(crate) async fn link_child(writer: &mut RunWriter, child: RunId) -> Result<(), RunError> {
    if writer.run.children.contains(&child) {
        return Ok(());
    }
    let mut tx = writer.begin();
    tx.run.children.push(child.clone());
    tx.activity(ActivityKind::ChildStarted { child });
    writer.commit(tx).await
}
