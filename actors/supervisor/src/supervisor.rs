//! The supervisor actor: one per `AgentRun`. It owns the run's `Authority`
//! and drives the loop. What happens next is read from durable state alone —
//! the status, the conversation of the latest checkpoint and the journal —
//! so a fresh supervisor after a reload continues exactly where the old one
//! stopped. For each tool call of the last assistant turn the supervisor is
//! either *processing* it (no journal record yet: prepare, policy, approval,
//! `running` durable, dispatch, outcome durable) or *replaying* it (a record
//! exists: the replay rule of the kernel's journal decides). It enforces the
//! budgets (S4) before each round and call, and the duration limit also
//! while it waits on a model stream or a call in flight.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::{Either, Fuse, FusedFuture};
use serde_json::{Value, json};
use tracing::Instrument;

use agent_capabilities::{Authority, Caveat, Decision, Grant, Trust, Uses};
use agent_kernel::actor::{ActorError, Inbox, Reply};
use agent_kernel::budget::BudgetDimension;
use agent_kernel::host::{
    BlobRef, Host, LeaseGuard, LifecycleEvent, StorageExt, Table, random_key, timeout,
};
use agent_kernel::ids::{CallId, RequestId, RunId};
use agent_kernel::journal::{
    CallError, CallState, JournalRecord, ReplayDecision, idempotency_key, replay_decision,
};
use agent_kernel::maybe_send::{BoxFuture, boxed};
use agent_kernel::protocol::{
    InvocationDraft, ModelToolSchema, PreparedCall, ToolCall, ToolInvocation, ToolResult,
    ToolsAddr, ToolsMsg,
};
use agent_kernel::run::{
    ActivityKind, CheckpointStage, Evidence, PendingKind, PendingRequest, RunStatus, StopReason,
};

use crate::builtin::ask_user::AskUserRequest;
use crate::builtin::plan::Plan;
use crate::builtin::{self, ASK_USER, UPDATE_PLAN};
use crate::config::{RunConfig, RuntimeOptions};
use crate::error::RunError;
use crate::provider::{ModelProvider, ModelRequest, collect_response};
use crate::store::{
    EventBus, RunEvent, RunWriter, Tx, advance_to_effect_unknown, decision_request, json_blob,
    pending_of, put_blob, put_json_blob, request_id, verified_blob,
};
use crate::transcript::{AssistantToolCall, Message, Tail, TranscriptLog};

/// What the person decides about a call whose effect is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Choice {
    /// Run it again (the person checked it did not happen, or accepts a repeat).
    RetryAnyway,
    /// Treat it as done; the model is told the person marked it done.
    MarkDone,
    /// End the run `failed` / `effect_unknown`.
    Abandon,
}

impl Choice {
    pub fn as_str(self) -> &'static str {
        match self {
            Choice::RetryAnyway => "retry_anyway",
            Choice::MarkDone => "mark_done",
            Choice::Abandon => "abandon",
        }
    }
}

/// Everything a supervisor shares with its runtime.
pub(crate) struct Ctx {
    pub host: Host,
    pub tools: ToolsAddr,
    pub provider: Arc<dyn ModelProvider>,
    pub options: RuntimeOptions,
    pub events: EventBus,
    #[cfg(feature = "sim")]
    pub sabotage: crate::sabotage::Sabotage,
}

impl Ctx {
    /// Whether recovery and replay retry an in-flight call that the replay
    /// rule marks `effect_unknown`: only ever under the crash simulator's
    /// sabotage (feature `sim`); never otherwise.
    pub(crate) fn retries_unsafely_on_resume(&self) -> bool {
        #[cfg(feature = "sim")]
        return self.sabotage.retries_unsafely_on_resume();
        #[cfg(not(feature = "sim"))]
        false
    }
}

type Answer = Reply<Result<(), RunError>>;

/// Commands for a supervisor.
#[derive(Debug)]
pub(crate) enum Msg {
    Approve {
        request: RequestId,
        reply: Answer,
    },
    Deny {
        request: RequestId,
        reply: Answer,
    },
    Respond {
        request: RequestId,
        text: String,
        reply: Answer,
    },
    Decide {
        call: CallId,
        choice: Choice,
        reply: Answer,
    },
    Resume {
        reply: Answer,
    },
    Stop {
        reply: Answer,
    },
    LinkChild {
        child: RunId,
        reply: Answer,
    },
}

impl Msg {
    fn name(&self) -> &'static str {
        match self {
            Msg::Approve { .. } => "approve",
            Msg::Deny { .. } => "deny",
            Msg::Respond { .. } => "respond",
            Msg::Decide { .. } => "decide",
            Msg::Resume { .. } => "resume",
            Msg::Stop { .. } => "stop",
            Msg::LinkChild { .. } => "link_child",
        }
    }

    fn reject(self, err: RunError) {
        match self {
            Msg::Approve { reply, .. }
            | Msg::Deny { reply, .. }
            | Msg::Respond { reply, .. }
            | Msg::Decide { reply, .. }
            | Msg::Resume { reply }
            | Msg::Stop { reply }
            | Msg::LinkChild { reply, .. } => reply.send(Err(err)),
        }
    }
}

/// Deterministic ids, so that a replay names the same things.
pub(crate) fn call_id(turn: usize, index: usize) -> Result<CallId, RunError> {
    Ok(CallId::new(format!("t{turn}-c{index}"))?)
}

pub(crate) fn approval_request(call: &CallId) -> Result<RequestId, RunError> {
    request_id("approve", call)
}
/// A tool call's arguments as JSON; text that is not JSON reads as `null`,
/// which every tool refuses as not an object.
fn arguments_value(call: &AssistantToolCall) -> Value {
    serde_json::from_str(&call.arguments).unwrap_or(Value::Null)
}

/// What an `ask_user` pending request names, its blobs already stored.
struct InputBlobs {
    question: BlobRef,
    schema: Option<BlobRef>,
    choices: Option<Vec<String>>,
}

pub(crate) fn input_request(call: &CallId) -> Result<RequestId, RunError> {
    request_id("input", call)
}

/// What a running run does next. Replay is a state of the machine, not a
/// flag: a call with a journal record is replayed by the kernel's rule, a
/// call without one is processed.
enum Next {
    /// The last answer had no tool calls: the run completes with it.
    Finish { text: String },
    /// The model speaks next.
    ModelRound,
    /// The first call of the last assistant turn that has no result yet.
    Call {
        call_id: CallId,
        call: AssistantToolCall,
        journal: CallMode,
    },
}

/// Whether a call is seen for the first time or found in the journal.
enum CallMode {
    Processing,
    Replaying(Box<JournalRecord>),
}

/// How a wait for work ended.
enum Watched<T> {
    Done(T),
    Stop(Answer),
    Interrupt(StopReason),
    /// The duration budget ran out while waiting (S4.4).
    OutOfTime,
}

/// Why a run ends before its own course: a person's stop, or a budget that
/// ran out. Both take one path ([`Supervisor::end_early`]): a call in flight
/// gets the stop grace to finish, else it is settled as unfinished.
enum Ending {
    Stop(Answer),
    Budget(BudgetDimension),
}

impl Ending {
    /// The journal code of a call that will not finish (when it was safe to repeat).
    fn unfinished_code(&self) -> &'static str {
        match self {
            Ending::Stop(_) => "cancelled",
            Ending::Budget(_) => "budget_exhausted",
        }
    }

    fn final_status(&self) -> (RunStatus, StopReason) {
        match self {
            Ending::Stop(_) => (RunStatus::Cancelled, StopReason::UserStopped),
            Ending::Budget(dimension) => (
                RunStatus::Failed,
                StopReason::BudgetExhausted {
                    dimension: *dimension,
                },
            ),
        }
    }

    /// Answer the person who asked for the stop, if anyone did.
    fn answer(self, result: Result<(), RunError>) {
        if let Ending::Stop(reply) = self {
            reply.send(result);
        }
    }
}

/// The shortest interval between two writes of the active time during one
/// wait, whatever `RuntimeOptions::active_time_flush` says (a zero interval
/// would write without pause).
const MIN_ACTIVE_TIME_FLUSH: Duration = Duration::from_secs(1);

/// The supervisor of one run.
pub(crate) struct Supervisor {
    ctx: Arc<Ctx>,
    writer: RunWriter,
    /// Held for the actor's life: the session's lease (reentrant for children).
    _lease: LeaseGuard,
    config: RunConfig,
    /// The conversation and the chain of segment blobs that stores it.
    transcript: TranscriptLog,
    /// The newest segment: what the latest checkpoint names.
    transcript_ref: BlobRef,
    /// A model round whose request activity and checkpoint were already
    /// committed with the outcome that completed the previous round.
    request_announced: Option<u64>,
    authority: Authority,
    lifecycle: async_channel::Receiver<LifecycleEvent>,
    schemas: Option<Arc<[ModelToolSchema]>>,
    /// Calls the person approved (or chose to retry) during this actor's life.
    approved: HashSet<CallId>,
    retry_anyway: HashSet<CallId>,
}

impl Supervisor {
    /// A supervisor for a stored run; `writer` is fenced with `lease`.
    pub(crate) async fn load(
        ctx: Arc<Ctx>,
        writer: RunWriter,
        lease: LeaseGuard,
    ) -> Result<Supervisor, RunError> {
        let run_id = writer.run.id.clone();
        let storage = ctx.host.storage.clone();
        let meta = storage
            .get_record::<crate::store::RunMeta>(&format!("run_config/{run_id}"))
            .await?
            .ok_or_else(|| RunError::Inconsistent {
                run: run_id.clone(),
                detail: "its configuration record is missing".into(),
            })?;
        let config: RunConfig = json_blob(&*storage, &run_id, &meta.config).await?;
        let checkpoint = crate::store::latest_checkpoint(&*storage, &run_id)
            .await?
            .ok_or_else(|| RunError::Inconsistent {
                run: run_id.clone(),
                detail: "it has no checkpoint".into(),
            })?;
        let transcript = TranscriptLog::load(&*storage, &run_id, &checkpoint.transcript).await?;
        let authority = Authority::new(run_id.to_string(), random_key(&*ctx.host.entropy));
        let lifecycle = ctx.host.lifecycle.subscribe();
        Ok(Supervisor {
            ctx,
            writer,
            _lease: lease,
            config,
            transcript,
            transcript_ref: checkpoint.transcript,
            request_announced: None,
            authority,
            lifecycle,
            schemas: None,
            approved: HashSet::new(),
            retry_anyway: HashSet::new(),
        })
    }

    fn id(&self) -> RunId {
        self.writer.run.id.clone()
    }

    /// The run's usage with the active time up to now (S4.1).
    fn usage_now(&self) -> agent_kernel::run::Usage {
        self.writer.live_usage(self.writer.run.usage)
    }

    /// The actor's loop. Returns when the run is final or interrupted (after
    /// the command that found it interrupted), or when every handle is gone.
    pub(crate) async fn run(mut self, inbox: Inbox<Msg>) -> Result<(), RunError> {
        let span = tracing::info_span!("supervisor", run = %self.writer.run.id);
        async move {
            let mut interrupted_commands = 0u32;
            loop {
                let status = self.writer.run.status;
                match status {
                    s if s.is_final() => return Ok(()),
                    RunStatus::Running => {
                        // A stop already queued wins over the next step.
                        let stepped = match self.queued_stop(&inbox).await {
                            Some(reply) => self.cancel(reply, None).await,
                            None => self.step(&inbox).await,
                        };
                        if let Err(e) = stepped {
                            return self.fail_on_error(e).await;
                        }
                    }
                    RunStatus::Interrupted if interrupted_commands > 0 => return Ok(()),
                    _ => {
                        if status == RunStatus::Interrupted {
                            interrupted_commands += 1;
                        }
                        let Ok(msg) = inbox.recv().await else {
                            return Ok(());
                        };
                        if let Err(e) = self.handle(msg).await {
                            return self.fail_on_error(e).await;
                        }
                    }
                }
            }
        }
        .instrument(span)
        .await
    }

    /// An unexpected error: a lost lease ends the actor without writing
    /// (another tab owns the run now); anything else fails the run.
    async fn fail_on_error(&mut self, e: RunError) -> Result<(), RunError> {
        if matches!(
            e,
            RunError::Storage(agent_kernel::host::StorageError::StaleEpoch { .. })
                | RunError::Storage(agent_kernel::host::StorageError::ConditionFailed { .. })
        ) {
            tracing::warn!(error = %e, "lease lost or run changed elsewhere; supervisor stops without writing");
            return Err(e);
        }
        tracing::error!(error = %e, "supervisor failed");
        if !self.writer.run.status.is_final() {
            let _ = self.fail_runtime("supervisor", &e.to_string()).await;
        }
        Err(e)
    }

    // ----------------------------------------------------------------- commands

    async fn handle(&mut self, msg: Msg) -> Result<(), RunError> {
        let span = tracing::info_span!("command", run = %self.writer.run.id, command = msg.name());
        self.handle_inner(msg).instrument(span).await
    }

    async fn handle_inner(&mut self, msg: Msg) -> Result<(), RunError> {
        let status = self.writer.run.status;
        let run = self.id();
        let wrong = |expected: &'static str, action: &'static str| RunError::WrongStatus {
            run: run.clone(),
            status,
            expected,
            action,
        };
        match msg {
            Msg::LinkChild { child, reply } => {
                let r = link_child(&mut self.writer, child).await;
                reply.send(r);
            }
            Msg::Stop { reply } => {
                if status.is_final() {
                    reply.send(Err(wrong("running, awaiting or interrupted", "stop")));
                } else {
                    self.cancel(reply, None).await?;
                }
            }
            Msg::Approve { request, reply } => {
                if status != RunStatus::AwaitingApproval {
                    reply.send(Err(wrong("awaiting_approval", "approve")));
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
            }
            Msg::Deny { request, reply } => {
                if status != RunStatus::AwaitingApproval {
                    reply.send(Err(wrong("awaiting_approval", "deny")));
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
            }
            Msg::Respond {
                request,
                text,
                reply,
            } => {
                if status != RunStatus::AwaitingInput {
                    reply.send(Err(wrong("awaiting_input", "respond")));
                    return Ok(());
                }
                match self.find_pending(&request, "input").await {
                    Err(e) => reply.send(Err(e)),
                    Ok((pending, call_id)) => {
                        let (mut record, call) = self.record_and_call(&call_id).await?;
                        // The answer must fit the question; a refused answer
                        // changes nothing and the run keeps waiting.
                        let answered = AskUserRequest::from_arguments(&arguments_value(&call))
                            .map_err(|e| {
                                self.inconsistent(format!("the pending question is invalid: {e}"))
                            })
                            .and_then(|question| {
                                let answer = question.answer_from_text(&text).map_err(|e| {
                                    RunError::InvalidAnswer {
                                        run: run.clone(),
                                        request: request.clone(),
                                        reason: e.to_string(),
                                    }
                                })?;
                                question.answer_result(&answer).map_err(|e| {
                                    RunError::InvalidAnswer {
                                        run: run.clone(),
                                        request: request.clone(),
                                        reason: e.to_string(),
                                    }
                                })
                            });
                        let result = match answered {
                            Ok(result) => result,
                            Err(e) => {
                                reply.send(Err(e));
                                return Ok(());
                            }
                        };
                        let now = self.writer.now();
                        record
                            .advance(CallState::Running, now)
                            .map_err(|e| self.inconsistent(e.to_string()))?;
                        self.outcome(Some(record), &call_id, &call, result, |tx| {
                            tx.delete(Table::Pending, pending_key(&pending));
                            tx.activity(ActivityKind::InputAnswered { request });
                            tx.status(RunStatus::Running, None)
                        })
                        .await?;
                        reply.send(Ok(()));
                    }
                }
            }
            Msg::Decide {
                call: call_id,
                choice,
                reply,
            } => {
                if status != RunStatus::Interrupted {
                    reply.send(Err(wrong("interrupted", "decide")));
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
            }
            Msg::Resume { reply } => {
                if status != RunStatus::Interrupted {
                    reply.send(Err(wrong("interrupted", "resume")));
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
            }
        }
        Ok(())
    }

    fn inconsistent(&self, detail: String) -> RunError {
        RunError::Inconsistent {
            run: self.id(),
            detail,
        }
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

    fn pending_call(&self, call_id: &CallId) -> Result<Option<AssistantToolCall>, RunError> {
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

    // ----------------------------------------------------------------- the loop

    /// What a `running` run does next, decided from durable state alone:
    /// the latest checkpoint's conversation and the journal.
    async fn next(&self) -> Result<Next, RunError> {
        Ok(match self.transcript.tail() {
            Tail::Answered { text } => Next::Finish { text },
            Tail::ModelNext => Next::ModelRound,
            Tail::ToolsPending {
                round_calls,
                pending,
            } => {
                let index = pending[0];
                let call_id = call_id_for(self.transcript.assistant_turns(), index)?;
                let key = JournalRecord::key_for(&self.writer.run.id, &call_id);
                let journal = match self.ctx.host.storage.get_record(&key).await? {
                    None => CallMode::Processing,
                    Some(record) => CallMode::Replaying(Box::new(record)),
                };
                Next::Call {
                    call_id,
                    call: round_calls[index].clone(),
                    journal,
                }
            }
        })
    }

    /// One step of a `running` run.
    async fn step(&mut self, inbox: &Inbox<Msg>) -> Result<(), RunError> {
        match self.next().await? {
            Next::Finish { text } => self.complete(text).await,
            Next::ModelRound => self.model_round(inbox).await,
            Next::Call {
                call_id,
                call,
                journal,
            } => {
                let span = tracing::info_span!("call", run = %self.writer.run.id, call = %call_id);
                match journal {
                    CallMode::Processing => {
                        self.process_call(inbox, call_id, call)
                            .instrument(span)
                            .await
                    }
                    CallMode::Replaying(record) => {
                        self.replay_call(inbox, *record, call)
                            .instrument(span)
                            .await
                    }
                }
            }
        }
    }

    async fn complete(&mut self, text: String) -> Result<(), RunError> {
        let mut tx = self.writer.begin();
        tx.run.output = Some(tx.blob(text.into_bytes()));
        tx.status(RunStatus::Completed, Some(StopReason::Completed))?;
        self.writer.commit(tx).await
    }

    /// Take the commands queued while the run was busy between two waits:
    /// child links are written, others refused as busy, and a stop is
    /// returned for the caller to carry out.
    async fn queued_stop(&mut self, inbox: &Inbox<Msg>) -> Option<Answer> {
        let run = self.id();
        while let Ok(msg) = inbox.try_recv() {
            match msg {
                Msg::Stop { reply } => return Some(reply),
                Msg::LinkChild { child, reply } => {
                    let r = link_child(&mut self.writer, child).await;
                    reply.send(r);
                }
                other => other.reject(RunError::Busy { run: run.clone() }),
            }
        }
        None
    }

    /// Wait for `fut` while listening for stop and lifecycle events; other
    /// commands are refused as busy, child links are written at once. A
    /// stop that arrives as `fut` finishes is taken before the next step
    /// ([`Supervisor::queued_stop`]).
    ///
    /// The run is `running` throughout, so the wait is active time (S4.1):
    /// a timer on the host clock ends the wait when the duration budget runs
    /// out (S4.4), and the active time so far is made durable at least every
    /// `RuntimeOptions::active_time_flush`, so a crash in a long wait loses
    /// at most that much of it.
    async fn watch<T>(
        &mut self,
        inbox: &Inbox<Msg>,
        fut: &mut BoxFuture<'static, T>,
    ) -> Result<Watched<T>, RunError> {
        let run = self.id();
        let clock = self.ctx.host.clock.clone();
        let flush_every = self
            .ctx
            .options
            .active_time_flush
            .max(MIN_ACTIVE_TIME_FLUSH);
        let out_of_time_at = self
            .config
            .budget
            .duration_left_ms(&self.usage_now())
            .map(|left| {
                clock
                    .monotonic()
                    .saturating_add(Duration::from_millis(left))
            });
        let mut timer: Fuse<BoxFuture<'static, ()>> = Fuse::terminated();
        let mut inbox_open = true;
        let mut life_open = true;
        loop {
            let now = clock.monotonic();
            if out_of_time_at.is_some_and(|at| now >= at) {
                return Ok(Watched::OutOfTime);
            }
            if timer.is_terminated() {
                let wait = out_of_time_at
                    .map_or(flush_every, |at| at.saturating_sub(now).min(flush_every));
                timer = clock.sleep(wait).fuse();
            }
            let recv = if inbox_open {
                Either::Left(inbox.recv())
            } else {
                Either::Right(futures::future::pending())
            };
            let life = if life_open {
                Either::Left(self.lifecycle.recv())
            } else {
                Either::Right(futures::future::pending())
            };
            let recv = recv.fuse();
            let life = life.fuse();
            let work = (&mut *fut).fuse();
            futures::pin_mut!(recv, life, work);
            futures::select_biased! {
                out = work => return Ok(Watched::Done(out)),
                msg = recv => match msg {
                    Ok(Msg::Stop { reply }) => return Ok(Watched::Stop(reply)),
                    Ok(Msg::LinkChild { child, reply }) => {
                        let r = link_child(&mut self.writer, child).await;
                        reply.send(r);
                    }
                    Ok(other) => other.reject(RunError::Busy { run: run.clone() }),
                    Err(_) => inbox_open = false,
                },
                event = life => match event {
                    Ok(LifecycleEvent::Offline) => return Ok(Watched::Interrupt(StopReason::Offline)),
                    Ok(LifecycleEvent::PageHidden | LifecycleEvent::ExecutorLost) => {
                        return Ok(Watched::Interrupt(StopReason::PageInterrupted));
                    }
                    Ok(LifecycleEvent::Online) => {}
                    Err(_) => life_open = false,
                },
                () = timer => {
                    // Out of time is seen at the top of the loop; otherwise
                    // the flush interval passed.
                    if out_of_time_at.is_none_or(|at| clock.monotonic() < at) {
                        self.writer.flush_active_time().await?;
                    }
                }
            }
        }
    }

    async fn model_round(&mut self, inbox: &Inbox<Msg>) -> Result<(), RunError> {
        let round = self.transcript.assistant_turns() as u64 + 1;
        if let Err(e) = self.config.validate() {
            return self.fail_runtime("supervisor", &e.to_string()).await;
        }
        if let Err(dim) = self.config.budget.check_hard_limits(&self.usage_now()) {
            return self.exhaust(dim).await;
        }
        if !self.ctx.host.lifecycle.is_online() {
            return self.interrupt(StopReason::Offline).await;
        }
        let tools = match self.schemas().await {
            Ok(t) => t,
            Err(e) => {
                let actor = self.ctx.tools.name().to_owned();
                return self.fail_runtime(&actor, &e.to_string()).await;
            }
        };
        if self.request_announced.take() != Some(round) {
            let mut tx = self.writer.begin();
            tx.activity(ActivityKind::ModelRequest { round });
            tx.checkpoint(
                CheckpointStage::BeforeModelRequest { round },
                self.transcript_ref.clone(),
            );
            self.writer.commit(tx).await?;
        }

        let request = ModelRequest {
            model: self.config.model.model.clone(),
            messages: self.transcript.messages().clone(),
            tools,
            temperature: self.config.model.temperature,
            max_output_tokens: self.config.model.max_output_tokens,
        };
        let mut repeats = 0u32;
        let response = loop {
            let provider = self.ctx.provider.clone();
            let events = self.ctx.events.clone();
            let run = self.id();
            let req = request.clone();
            let mut fut: BoxFuture<'static, _> = boxed(async move {
                let stream = provider.stream(req).await?;
                collect_response(stream, |text| {
                    events.emit(RunEvent::TextDelta {
                        run: run.clone(),
                        text: text.to_owned(),
                    });
                })
                .await
            });
            match self.watch(inbox, &mut fut).await? {
                Watched::Done(Ok(response)) => break response,
                // Nothing of a broken round was committed (the response becomes
                // durable only once complete), so it may simply be repeated.
                Watched::Done(Err(e))
                    if e.round_may_repeat() && repeats < self.ctx.options.model_round_repeats =>
                {
                    repeats += 1;
                    tracing::warn!(
                        round,
                        repeats,
                        "model stream broke off; repeating the round"
                    );
                }
                Watched::Done(Err(e)) => return self.fail_runtime("model", &e.to_string()).await,
                Watched::Stop(reply) => return self.cancel(reply, None).await,
                Watched::Interrupt(reason) => return self.interrupt(reason).await,
                // Nothing of the round was committed: it simply ends with the run.
                Watched::OutOfTime => return self.exhaust(BudgetDimension::Duration).await,
            }
        };

        // The request shares the conversation: let it go, so that appending
        // to the conversation copies nothing.
        drop(request);
        let mut tx = self.writer.begin();
        let text_blob =
            (!response.text.is_empty()).then(|| tx.blob(response.text.clone().into_bytes()));
        let transcript = vec![Message::Assistant {
            content: (!response.text.is_empty()).then(|| response.text.clone()),
            tool_calls: response.tool_calls.clone(),
        }];
        tx.run.usage.input_tokens = tx
            .run
            .usage
            .input_tokens
            .saturating_add(response.usage.input_tokens);
        tx.run.usage.output_tokens = tx
            .run
            .usage
            .output_tokens
            .saturating_add(response.usage.output_tokens);
        tx.activity(ActivityKind::ModelResponse {
            round,
            text: text_blob.clone(),
            tool_calls: u32::try_from(response.tool_calls.len()).unwrap_or(u32::MAX),
        });
        if !response.tool_calls.is_empty() {
            if let Err(dim) = self
                .config
                .budget
                .check_new_round(&self.writer.live_usage(tx.run.usage))
            {
                if text_blob.is_some() {
                    tx.run.output = text_blob;
                } else {
                    self.set_output_so_far(&mut tx).await?;
                }
                tx.status(
                    RunStatus::Failed,
                    Some(StopReason::BudgetExhausted { dimension: dim }),
                )?;
                return self
                    .commit_transcript(
                        tx,
                        transcript,
                        CheckpointStage::AfterModelResponse { round },
                    )
                    .await;
            }
            tx.run.usage.tool_rounds += 1;
            // The response goes durable with the round's first call
            // (`running` before dispatch, an approval request, an outcome
            // ...): a crash before then repeats the round, as a crash during
            // the request does.
            let staged = self.transcript.stage(transcript, |b| tx.blob(b))?;
            let blob = staged.head().clone();
            tx.checkpoint(CheckpointStage::AfterModelResponse { round }, blob.clone());
            self.writer.defer(tx)?;
            self.transcript.apply(staged);
            self.transcript_ref = blob;
            return Ok(());
        }
        self.commit_transcript(
            tx,
            transcript,
            CheckpointStage::AfterModelResponse { round },
        )
        .await
    }

    async fn schemas(&mut self) -> Result<Arc<[ModelToolSchema]>, ActorError> {
        if let Some(s) = &self.schemas {
            return Ok(s.clone());
        }
        let run = self.id();
        let config = self.config.tool_config();
        let mut schemas = self
            .ctx
            .tools
            .ask(|reply| ToolsMsg::Schemas { run, config, reply })
            .await?;
        builtin::add_schemas(&mut schemas);
        schemas.retain(|s| self.config.allows(&s.name));
        let schemas: Arc<[ModelToolSchema]> = schemas.into();
        self.schemas = Some(schemas.clone());
        Ok(schemas)
    }

    /// Store the messages added to the conversation as its new newest
    /// segment (the blob durable before the checkpoint naming it), checkpoint
    /// it in `tx`, and commit; only then does the conversation in memory grow.
    async fn commit_transcript(
        &mut self,
        mut tx: Tx,
        added: Vec<Message>,
        stage: CheckpointStage,
    ) -> Result<(), RunError> {
        // When this append answers the last of the round's calls and the
        // next model round would start (the same checks as `model_round`),
        // its request activity and checkpoint go in this batch: one commit
        // less per round, and the result is still durable before the model
        // sees it.
        let announce = (tx.run.status == RunStatus::Running
            && self.transcript.tail_after(&added) == Tail::ModelNext
            && self.schemas.is_some()
            && self.config.validate().is_ok()
            && self
                .config
                .budget
                .check_hard_limits(&self.writer.live_usage(tx.run.usage))
                .is_ok()
            && self.ctx.host.lifecycle.is_online())
        .then(|| self.transcript.assistant_turns() as u64 + 1);
        let staged = self.transcript.stage(added, |b| tx.blob(b))?;
        let blob = staged.head().clone();
        tx.checkpoint(stage, blob.clone());
        if let Some(round) = announce {
            tx.activity(ActivityKind::ModelRequest { round });
            tx.checkpoint(CheckpointStage::BeforeModelRequest { round }, blob.clone());
        }
        self.writer.commit(tx).await?;
        self.transcript.apply(staged);
        self.transcript_ref = blob;
        self.request_announced = announce;
        Ok(())
    }

    // ------------------------------------------------------------- tool calls

    /// Processing: a call never seen before.
    async fn process_call(
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
                    let record = self.new_record(&mut tx, &p.draft)?;
                    self.writer.defer(tx)?;
                    let result = ToolResult::error("policy_denied", reason, &p.draft.tool);
                    self.outcome(Some(record), &call_id, &call, result, |_| Ok(()))
                        .await
                }
            },
        }
    }

    /// Replaying: the call has a journal record; the replay rule decides.
    async fn replay_call(
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

    /// A fresh `prepared` record for a draft; its arguments blob goes in
    /// `tx`, with the record.
    fn new_record(&self, tx: &mut Tx, draft: &InvocationDraft) -> Result<JournalRecord, RunError> {
        let args = tx.blob(
            agent_capabilities::canonical_json(&draft.arguments)
                .map_err(|e| self.inconsistent(format!("arguments are not canonical JSON ({e})")))?
                .into_bytes(),
        );
        Ok(JournalRecord {
            run: self.id(),
            call_id: draft.call_id.clone(),
            tool: draft.tool.clone(),
            fingerprint: draft.fingerprint.clone(),
            args,
            effects: draft.effects.clone(),
            idempotency: draft.idempotency,
            attempt: draft.attempt.max(1),
            state: CallState::Prepared,
            idempotency_key: idempotency_key(&self.writer.run.id, &draft.call_id),
            result: None,
            receipts: Vec::new(),
            error: None,
            updated_at_ms: tx.now(),
        })
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
            None => self.new_record(&mut tx, &p.draft)?,
        };
        let request = approval_request(&record.call_id)?;
        if fresh {
            tx.run.usage.tool_calls += 1;
            tx.activity(ActivityKind::ToolCall {
                call_id: record.call_id.clone(),
                tool: record.tool.clone(),
                state: record.state,
            });
        }
        tx.put(&record);
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
            None => self.new_record(&mut tx, &p.draft)?,
        };
        let now = tx.now();
        if record.state != CallState::Prepared {
            record.attempt = record.attempt.saturating_add(1);
        }
        record
            .advance(CallState::Running, now)
            .map_err(|e| self.inconsistent(e.to_string()))?;
        if fresh {
            tx.run.usage.tool_calls += 1;
        }
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
        let invocation = ToolInvocation {
            draft,
            capability,
            verifier: self.authority.verifier(),
        };
        tx.put(&record);
        tx.activity(ActivityKind::ToolCall {
            call_id: record.call_id.clone(),
            tool: record.tool.clone(),
            state: CallState::Running,
        });
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
        // The crash simulator's own test only (feature `sim`): the sabotage
        // may carry the call out before `running` is durable.
        #[cfg(feature = "sim")]
        let fut = self.ctx.sabotage.dispatch_early(fut).await;
        let mut fut = fut;
        // Durability order: `running` is durable before the call is dispatched.
        self.writer.commit(tx).await?;
        match self.watch(inbox, &mut fut).await? {
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

    /// End the run while a call is in flight (a stop, or the duration budget
    /// run out): the call gets `RuntimeOptions::stop_grace` to finish and its
    /// outcome is recorded; past the grace it is settled as unfinished
    /// (`failed` when safe to repeat, else `effect_unknown`: never replayed,
    /// S2.3).
    async fn end_in_flight(
        &mut self,
        ending: Ending,
        record: JournalRecord,
        call: &AssistantToolCall,
        fut: BoxFuture<'static, Result<ToolResult, ActorError>>,
    ) -> Result<(), RunError> {
        let grace = self.ctx.options.stop_grace;
        match timeout(&*self.ctx.host.clock, grace, fut).await {
            Ok(Ok(result)) => {
                self.settle(record, call, result).await?;
                if self.writer.run.status.is_final() {
                    ending.answer(Ok(()));
                    return Ok(());
                }
                self.end_early(ending, None).await
            }
            _ => self.end_early(ending, Some(record)).await,
        }
    }

    /// Record a dispatch's result: `effect_unknown` (and ask the person) when
    /// the tool says the effect may have happened, else committed or failed.
    async fn settle(
        &mut self,
        mut record: JournalRecord,
        call: &AssistantToolCall,
        result: ToolResult,
    ) -> Result<(), RunError> {
        if let ToolResult::Error(f) = &result
            && f.effect_may_have_happened
        {
            return self.block_on_unknown_from(&mut record).await;
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

    /// The tools actor went away mid-dispatch: the effect is uncertain unless
    /// the call was safe to repeat; the run fails naming the actor.
    async fn tools_lost(
        &mut self,
        mut record: JournalRecord,
        actor: &str,
        message: &str,
    ) -> Result<(), RunError> {
        let mut tx = self.writer.begin();
        self.settle_unfinished(&mut tx, &mut record, "tools_actor_lost")?;
        self.set_output_so_far(&mut tx).await?;
        tx.status(
            RunStatus::Failed,
            Some(StopReason::RuntimeError {
                actor: actor.to_owned(),
                message: message.to_owned(),
            }),
        )?;
        self.writer.commit(tx).await
    }

    /// Settle, in `tx`, a call that will not finish (its run ends): `failed`
    /// with `code` when repeating it is safe, else `effect_unknown`.
    fn settle_unfinished(
        &self,
        tx: &mut Tx,
        record: &mut JournalRecord,
        code: &str,
    ) -> Result<(), RunError> {
        let now = tx.now();
        if record.retry_is_safe() {
            record
                .advance(CallState::Failed, now)
                .map_err(|e| self.inconsistent(e.to_string()))?;
            record.error = Some(CallError {
                code: code.into(),
                retryable: true,
            });
        } else {
            advance_to_effect_unknown(record, now)?;
        }
        tx.put(&*record);
        tx.activity(ActivityKind::ToolCall {
            call_id: record.call_id.clone(),
            tool: record.tool.clone(),
            state: record.state,
        });
        Ok(())
    }

    /// Make an outcome durable in one batch: the result blob first, then the
    /// journal record (committed or failed), the evidence, the activity, and
    /// the conversation with the result message (the model sees the result
    /// only after this commit). `extra` adds what the caller needs in the same batch.
    async fn outcome(
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
                match &result {
                    ToolResult::Success(s) => {
                        if record.state == CallState::Prepared {
                            record
                                .advance(CallState::Running, now)
                                .map_err(|e| self.inconsistent(e.to_string()))?;
                        }
                        record
                            .advance(CallState::Committed, now)
                            .map_err(|e| self.inconsistent(e.to_string()))?;
                        record.receipts = s.receipts.clone();
                    }
                    ToolResult::Error(f) => {
                        record
                            .advance(CallState::Failed, now)
                            .map_err(|e| self.inconsistent(e.to_string()))?;
                        record.error = Some(CallError {
                            code: f.code.clone(),
                            retryable: f.retryable,
                        });
                    }
                }
                record.result = Some(blob.clone());
                tx.put(&record);
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

    // ------------------------------------------------- the supervisor's tools

    async fn ask_user(&mut self, call_id: CallId, call: AssistantToolCall) -> Result<(), RunError> {
        let question = match AskUserRequest::from_arguments(&arguments_value(&call)) {
            Ok(question) => question,
            Err(e) => {
                let result = ToolResult::error("invalid_arguments", e.to_string(), ASK_USER);
                return self
                    .outcome(None, &call_id, &call, result, |_| Ok(()))
                    .await;
            }
        };
        let record = self
            .builtin_record(&call_id, ASK_USER, &call.arguments)
            .await?;
        let pending = self.input_request_blobs(&question).await?;
        let mut tx = self.writer.begin();
        tx.run.usage.tool_calls += 1;
        tx.activity(ActivityKind::ToolCall {
            call_id: call_id.clone(),
            tool: ASK_USER.into(),
            state: CallState::Prepared,
        });
        tx.put(&record);
        self.request_input(&mut tx, &call_id, pending)?;
        self.writer.commit(tx).await
    }

    /// The question's text and answer schema stored as blobs (durable before
    /// the pending request that names them), with its choices.
    async fn input_request_blobs(&self, question: &AskUserRequest) -> Result<InputBlobs, RunError> {
        let storage = self.ctx.host.storage.clone();
        let text = put_blob(&*storage, question.question.clone().into_bytes()).await?;
        let schema = match &question.answer_schema {
            Some(schema) => Some(put_json_blob(&*storage, schema).await?),
            None => None,
        };
        Ok(InputBlobs {
            question: text,
            schema,
            choices: question.choices.clone(),
        })
    }

    fn request_input(
        &self,
        tx: &mut Tx,
        call_id: &CallId,
        blobs: InputBlobs,
    ) -> Result<(), RunError> {
        let request = input_request(call_id)?;
        tx.put(&PendingRequest {
            run: self.id(),
            id: request.clone(),
            kind: PendingKind::Input {
                call_id: call_id.clone(),
                question: blobs.question,
                schema: blobs.schema,
                choices: blobs.choices,
            },
            created_at_ms: tx.now(),
            presented: false,
        });
        tx.activity(ActivityKind::InputRequested { request });
        tx.status(RunStatus::AwaitingInput, None)
    }

    /// A `prepared` ask_user record found while running: wait for the answer
    /// again, asking the same question (choices and schema included).
    async fn ask_user_again(&mut self, record: JournalRecord) -> Result<(), RunError> {
        let request = input_request(&record.call_id)?;
        let run = self.id();
        let existing: Option<PendingRequest> = self
            .ctx
            .host
            .storage
            .get_record(&format!("{run}/{request}"))
            .await?;
        if existing.is_some() {
            let mut tx = self.writer.begin();
            tx.status(RunStatus::AwaitingInput, None)?;
            return self.writer.commit(tx).await;
        }
        let call = self
            .pending_call(&record.call_id)?
            .ok_or_else(|| self.inconsistent("ask_user call is not pending".into()))?;
        let question = match AskUserRequest::from_arguments(&arguments_value(&call)) {
            Ok(question) => question,
            Err(e) => {
                let call_id = record.call_id.clone();
                let result = ToolResult::error("invalid_arguments", e.to_string(), ASK_USER);
                return self
                    .outcome(Some(record), &call_id, &call, result, |_| Ok(()))
                    .await;
            }
        };
        let pending = self.input_request_blobs(&question).await?;
        let mut tx = self.writer.begin();
        self.request_input(&mut tx, &record.call_id, pending)?;
        self.writer.commit(tx).await
    }

    async fn update_plan(
        &mut self,
        call_id: CallId,
        call: AssistantToolCall,
    ) -> Result<(), RunError> {
        self.update_plan_with(call_id, call, None).await
    }

    async fn update_plan_with(
        &mut self,
        call_id: CallId,
        call: AssistantToolCall,
        existing: Option<JournalRecord>,
    ) -> Result<(), RunError> {
        let plan = match Plan::from_arguments(&arguments_value(&call)) {
            Ok(plan) => plan,
            Err(e) => {
                let result = ToolResult::error("invalid_arguments", e.to_string(), UPDATE_PLAN);
                return self
                    .outcome(existing, &call_id, &call, result, |_| Ok(()))
                    .await;
            }
        };
        let fresh = existing.is_none();
        let mut record = match existing {
            Some(r) => r,
            None => {
                self.builtin_record(&call_id, UPDATE_PLAN, &call.arguments)
                    .await?
            }
        };
        let now = self.writer.now();
        if record.state == CallState::Prepared {
            record
                .advance(CallState::Running, now)
                .map_err(|e| self.inconsistent(e.to_string()))?;
        }
        let plan_blob = put_json_blob(&*self.ctx.host.storage, &plan).await?;
        let result = builtin::success(
            UPDATE_PLAN,
            "builtin",
            Trust::Internal,
            json!({"plan_updated": true}),
        );
        self.outcome(Some(record), &call_id, &call, result, |tx| {
            if fresh {
                tx.run.usage.tool_calls += 1;
            }
            tx.run.plan = Some(plan_blob.clone());
            tx.activity(ActivityKind::PlanUpdated { plan: plan_blob });
            Ok(())
        })
        .await
    }

    async fn builtin_record(
        &self,
        call_id: &CallId,
        tool: &str,
        arguments: &str,
    ) -> Result<JournalRecord, RunError> {
        let fingerprint = builtin::fingerprint(tool)
            .ok_or_else(|| self.inconsistent(format!("no definition for {tool}")))?;
        let value: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
        let canonical = agent_capabilities::canonical_json(&value)
            .map_err(|e| self.inconsistent(format!("arguments are not canonical JSON ({e})")))?;
        let args = put_blob(&*self.ctx.host.storage, canonical.into_bytes()).await?;
        Ok(JournalRecord {
            run: self.id(),
            call_id: call_id.clone(),
            tool: tool.to_owned(),
            fingerprint,
            args,
            effects: Default::default(),
            idempotency: agent_capabilities::Idempotency::Idempotent,
            attempt: 1,
            state: CallState::Prepared,
            idempotency_key: idempotency_key(&self.writer.run.id, call_id),
            result: None,
            receipts: Vec::new(),
            error: None,
            updated_at_ms: self.writer.now(),
        })
    }

    // --------------------------------------------------------------- endings

    /// The latest assistant text becomes the run's readable output.
    async fn set_output_so_far(&self, tx: &mut Tx) -> Result<(), RunError> {
        if tx.run.output.is_some() {
            return Ok(());
        }
        let last = self
            .transcript
            .messages()
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::Assistant {
                    content: Some(text),
                    ..
                } if !text.is_empty() => Some(text.clone()),
                _ => None,
            });
        if let Some(text) = last {
            tx.run.output = Some(tx.blob(text.into_bytes()));
        }
        Ok(())
    }

    /// End the run `failed` / `budget_exhausted` naming `dimension` (S4.4).
    async fn exhaust(&mut self, dimension: BudgetDimension) -> Result<(), RunError> {
        tracing::info!(%dimension, "budget exhausted");
        self.end_early(Ending::Budget(dimension), None).await
    }

    async fn fail_runtime(&mut self, actor: &str, message: &str) -> Result<(), RunError> {
        let mut tx = self.writer.begin();
        self.set_output_so_far(&mut tx).await?;
        tx.status(
            RunStatus::Failed,
            Some(StopReason::RuntimeError {
                actor: actor.to_owned(),
                message: message.to_owned(),
            }),
        )?;
        self.writer.commit(tx).await
    }

    async fn interrupt(&mut self, reason: StopReason) -> Result<(), RunError> {
        tracing::info!(?reason, "run interrupted");
        let mut tx = self.writer.begin();
        tx.checkpoint(CheckpointStage::Interrupted, self.transcript_ref.clone());
        tx.status(RunStatus::Interrupted, Some(reason))?;
        self.writer.commit(tx).await
    }

    /// End the run `cancelled` / `user_stopped`; a call whose effect did not
    /// finish within the grace period is recorded `effect_unknown`.
    async fn cancel(
        &mut self,
        reply: Answer,
        in_flight: Option<JournalRecord>,
    ) -> Result<(), RunError> {
        self.end_early(Ending::Stop(reply), in_flight).await
    }

    /// End the run as `ending` says. Records still `running` (the call in
    /// flight, or one left by an interruption) are settled as unfinished,
    /// pending requests are withdrawn, and the output so far stays readable.
    async fn end_early(
        &mut self,
        ending: Ending,
        in_flight: Option<JournalRecord>,
    ) -> Result<(), RunError> {
        let run = self.id();
        let storage = self.ctx.host.storage.clone();
        let pending = pending_of(&*storage, &run).await?;
        let mut tx = self.writer.begin();
        // Records still `running` (the call in flight now, or one left by an
        // interruption) are settled: a final run has nothing in flight.
        let mut running: Vec<JournalRecord> = crate::store::journal_of(&*storage, &run)
            .await?
            .into_iter()
            .filter(|r| r.state == CallState::Running)
            .collect();
        if let Some(record) = in_flight {
            running.retain(|r| r.call_id != record.call_id);
            running.push(record);
        }
        for mut record in running {
            self.settle_unfinished(&mut tx, &mut record, ending.unfinished_code())?;
        }
        for p in &pending {
            tx.delete(Table::Pending, pending_key(p));
        }
        self.set_output_so_far(&mut tx).await?;
        let (status, reason) = ending.final_status();
        tx.status(status, Some(reason))?;
        let result = self.writer.commit(tx).await;
        ending.answer(result.clone());
        result
    }
}

pub(crate) fn pending_key(p: &PendingRequest) -> String {
    format!("{}/{}", p.run, p.id)
}

fn call_id_for(turn: usize, index: usize) -> Result<CallId, RunError> {
    call_id(turn, index)
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
