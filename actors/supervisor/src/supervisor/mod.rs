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
//!
//! This module owns the actor's state, its messages and its loop (what a
//! `running` run does next); its parts live in submodules:
//!
//! - [`commands`]: the person's commands (approve, deny, respond, decide,
//!   resume, stop) and child links;
//! - [`waiting`]: waiting for work while listening for a stop, lifecycle
//!   events and the duration budget;
//! - [`model_round`]: one model round and the conversation's commits;
//! - [`compact`]: the summary a run makes of its session's oldest turns
//!   before its first round, when the context rule asks for one (S12.4);
//! - [`calls`]: a tool call processed or replayed: prepare, approval,
//!   dispatch, settle, outcome;
//! - [`own_tools`]: the tools the supervisor carries out itself (`ask_user`,
//!   `update_plan`);
//! - [`ending`]: how a run ends before its own course (stop, budget,
//!   interruption, runtime failure).
//!
//! The journal transitions themselves (a record advanced and put with its
//! activity) are methods of the storage transaction, [`crate::store::Tx`].

mod calls;
mod commands;
mod compact;
mod elicitation;
mod ending;
mod model_round;
mod own_tools;
mod waiting;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tracing::Instrument;

use agent_capabilities::Authority;
use agent_kernel::actor::{Inbox, Reply};
use agent_kernel::budget::BudgetDimension;
use agent_kernel::host::{BlobRef, Host, LeaseGuard, LifecycleEvent, StorageExt, random_key};
use agent_kernel::ids::{CallId, RequestId, RunId};
use agent_kernel::journal::JournalRecord;
use agent_kernel::protocol::{ModelToolSchema, ToolsAddr};
use agent_kernel::run::{PendingRequest, RunStatus, StopReason};

use crate::blob::json_blob;
use crate::config::{RunConfig, RuntimeOptions};
use crate::error::RunError;
use crate::message::{AssistantToolCall, Message, Tail};
use crate::provider::ModelProvider;
use crate::store::{EventBus, RunWriter, request_id};
use crate::transcript::TranscriptLog;

pub(crate) use commands::link_child;
pub(crate) use elicitation::ReplySlot;
pub use elicitation::{ElicitationAsk, ElicitationReply};

/// What the person decides about a call whose effect is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename = "DecisionChoice"))]
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
    #[cfg(feature = "sabotage")]
    pub sabotage: crate::sabotage::Sabotage,
}

impl Ctx {
    /// Whether recovery and replay retry an in-flight call that the replay
    /// rule marks `effect_unknown`: only ever under the crash simulator's
    /// sabotage (feature `sabotage`); never otherwise.
    pub(crate) fn retries_unsafely_on_resume(&self) -> bool {
        #[cfg(feature = "sabotage")]
        return self.sabotage.retries_unsafely_on_resume();
        #[cfg(not(feature = "sabotage"))]
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
    /// A server asks the person during the call in flight (the answer
    /// goes to `answer`); refused when no such call is in flight.
    Elicit {
        ask: ElicitationAsk,
        answer: ReplySlot,
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
            Msg::Elicit { .. } => "elicit",
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
            | Msg::LinkChild { reply, .. }
            | Msg::Elicit { reply, .. } => reply.send(Err(err)),
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
    Interrupt(Interruption),
    /// The duration budget ran out while waiting (S4.4).
    OutOfTime,
}

/// Why foreground work stops and waits for Resume (S2.5, S13.2): the host
/// went offline, the page was hidden, the executor running the run's work
/// was lost (a tool's task panicked, its Worker died, the page froze, the
/// host shut down; naming what was lost), or the model provider stayed
/// unavailable past its retry bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Interruption {
    Offline,
    PageHidden,
    ExecutorLost(String),
    ProviderUnavailable { provider: String, message: String },
}

impl Interruption {
    /// The stop reason the run records: S2.5 names `offline` and
    /// `page_interrupted`; a lost executor is the latter, with an
    /// `executor_lost` activity saying what was lost.
    pub(crate) fn reason(&self) -> StopReason {
        match self {
            Interruption::Offline => StopReason::Offline,
            Interruption::PageHidden | Interruption::ExecutorLost(_) => StopReason::PageInterrupted,
            Interruption::ProviderUnavailable { provider, message } => {
                StopReason::ProviderUnavailable {
                    provider: provider.clone(),
                    message: message.clone(),
                }
            }
        }
    }
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
/// How the message of a supervisor that stopped because its storage was
/// unreachable begins (see `Supervisor::fail_on_error`): the runtime
/// interrupts such a supervisor's run once the store answers again.
pub(crate) const STORAGE_LOST: &str = "storage lost: ";

const MIN_ACTIVE_TIME_FLUSH: Duration = Duration::from_secs(1);

/// The supervisor of one run.
pub(crate) struct Supervisor {
    ctx: Arc<Ctx>,
    writer: RunWriter,
    /// Held for the actor's life: the session's lease (reentrant for children).
    _lease: LeaseGuard,
    config: RunConfig,
    /// The system prompt each request carries (S12.2), unless the
    /// conversation carries it as its first message already (a run stored
    /// before the system prompt left the conversation).
    system: Option<Arc<str>>,
    /// The conversation and the chain of segment blobs that stores it.
    transcript: TranscriptLog,
    /// The newest segment: what the latest checkpoint names.
    transcript_ref: BlobRef,
    /// A model round whose request activity and checkpoint were already
    /// committed with the outcome that completed the previous round.
    request_announced: Option<u64>,
    /// Where the run's window begins (from its configuration record).
    window: crate::transcript::Window,
    /// The summary the run must make before its first round (S12.4);
    /// once made (or when stored already) its text is in `system`.
    summary_due: Option<crate::conversation::SummaryUse>,
    authority: Authority,
    lifecycle: async_channel::Receiver<LifecycleEvent>,
    schemas: Option<Arc<[ModelToolSchema]>>,
    /// Calls the person approved (or chose to retry) during this actor's life.
    approved: HashSet<CallId>,
    retry_anyway: HashSet<CallId>,
    /// The call whose dispatch is being waited on (elicitations belong to it).
    in_flight: Option<CallId>,
    /// Elicitations of the call in flight waiting for the person.
    elicitations: elicitation::LiveElicitations,
}

impl Supervisor {
    /// A supervisor for a stored run; `writer` is fenced with `lease`.
    pub(crate) async fn load(
        ctx: Arc<Ctx>,
        mut writer: RunWriter,
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
        let opened = writer.take_opened_checkpoint();
        let checkpoint = match opened {
            Some(checkpoint) => Some(checkpoint),
            None => crate::store::latest_checkpoint(&*storage, &run_id).await?,
        }
        .ok_or_else(|| RunError::Inconsistent {
            run: run_id.clone(),
            detail: "it has no checkpoint".into(),
        })?;
        // Only the current turn: what continuing needs, whatever the run's
        // length; the model round reads the rest (issue 18).
        let transcript =
            TranscriptLog::load_recent(&*storage, &run_id, &checkpoint.transcript, meta.window)
                .await?;
        let mut system = config.system_prompt().map(Arc::from);
        // The summary the run sends before its window: stored already, or
        // the run makes it first (S12.4).
        let mut summary_due = None;
        if let Some(summary) = meta.summary {
            let summaries =
                crate::compaction::SessionSummaries::load(&*storage, &writer.run.session).await?;
            match summaries.ending_at(summary.upto) {
                Some(stored) => {
                    let text = summary_text(&*storage, &run_id, &stored.text).await?;
                    system = Some(Arc::from(crate::compaction::system_with_summary(
                        system.as_deref(),
                        &text,
                        stored.turns,
                    )));
                }
                None if summary.folded_turns > 0 => summary_due = Some(summary),
                None => {
                    return Err(RunError::Inconsistent {
                        run: run_id.clone(),
                        detail: format!(
                            "the conversation summary ending at message {} is missing",
                            summary.upto
                        ),
                    });
                }
            }
        }
        let authority = Authority::new(run_id.to_string(), random_key(&*ctx.host.entropy));
        let lifecycle = ctx.host.lifecycle.subscribe();
        Ok(Supervisor {
            ctx,
            writer,
            _lease: lease,
            config,
            system,
            transcript,
            transcript_ref: checkpoint.transcript,
            request_announced: None,
            window: meta.window,
            summary_due,
            authority,
            lifecycle,
            schemas: None,
            approved: HashSet::new(),
            retry_anyway: HashSet::new(),
            in_flight: None,
            elicitations: Default::default(),
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
            // Elicitations left pending by a process that is gone cannot
            // be answered: withdrawn before anything else.
            if !self.writer.run.status.is_final()
                && let Err(e) = self.withdraw_elicitations(elicitation::Scan::Always).await
            {
                return Box::pin(self.fail_on_error(e)).await;
            }
            loop {
                let status = self.writer.run.status;
                match status {
                    s if s.is_final() => return Ok(()),
                    RunStatus::Running => {
                        // A stop already queued wins over the next step.
                        // Boxed, as the branches below: the loop itself stays small.
                        let stepped = match self.queued_stop(&inbox).await {
                            Some(reply) => Box::pin(self.cancel(reply, None)).await,
                            None => Box::pin(self.step(&inbox)).await,
                        };
                        if let Err(e) = stepped {
                            return Box::pin(self.fail_on_error(e)).await;
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
                        if let Err(e) = Box::pin(self.handle(msg)).await {
                            return Box::pin(self.fail_on_error(e)).await;
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
        if e.is_storage_unavailable() {
            // The store cannot be reached: writing `failed` would fail too,
            // or, should the store be back, fail a run that nothing is wrong
            // with. Stop without writing; the runtime interrupts the run
            // from what is durable once the store answers again.
            tracing::warn!(error = %e, "storage unreachable; supervisor stops, its run is interrupted when the store is back");
            return Err(RunError::Storage(
                agent_kernel::host::StorageError::Unavailable(format!("{}{e}", STORAGE_LOST)),
            ));
        }
        tracing::error!(error = %e, "supervisor failed");
        if !self.writer.run.status.is_final() {
            let _ = self.fail_runtime("supervisor", &e.to_string()).await;
        }
        Err(e)
    }

    fn inconsistent(&self, detail: String) -> RunError {
        RunError::Inconsistent {
            run: self.id(),
            detail,
        }
    }

    // ----------------------------------------------------------------- the loop

    /// What a `running` run does next, decided from durable state alone:
    /// the latest checkpoint's conversation and the journal.
    async fn next(&self) -> Result<Next, RunError> {
        Ok(match self.transcript.tail() {
            Tail::Answered { text } => Next::Finish { text },
            // A run with an ending call (S9.3) ends with its call's result.
            Tail::ModelNext if self.config.ending_call.is_some() => {
                match self.transcript.messages().last() {
                    Some(Message::Tool { content, .. }) => Next::Finish {
                        text: content.clone(),
                    },
                    _ => Next::ModelRound,
                }
            }
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
    /// Each branch is boxed: a run waiting (on the model, a tool, the
    /// person) holds only the state of the branch it is in, not the largest
    /// of them all (issue 18 item 6: memory per idle run).
    async fn step(&mut self, inbox: &Inbox<Msg>) -> Result<(), RunError> {
        match self.next().await? {
            Next::Finish { text } => Box::pin(self.complete(text)).await,
            Next::ModelRound => Box::pin(self.model_round(inbox)).await,
            Next::Call {
                call_id,
                call,
                journal,
            } => {
                let span = tracing::info_span!("call", run = %self.writer.run.id, call = %call_id);
                match journal {
                    CallMode::Processing => {
                        Box::pin(self.process_call(inbox, call_id, call).instrument(span)).await
                    }
                    CallMode::Replaying(record) => {
                        Box::pin(self.replay_call(inbox, *record, call).instrument(span)).await
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
}

/// A stored summary's text, checked against its reference.
async fn summary_text(
    storage: &dyn agent_kernel::host::Storage,
    run: &RunId,
    blob: &BlobRef,
) -> Result<String, RunError> {
    let bytes = crate::blob::verified_blob(storage, blob)
        .await?
        .ok_or_else(|| RunError::Inconsistent {
            run: run.clone(),
            detail: format!(
                "the conversation summary {} is missing or does not match its hash",
                blob.hash
            ),
        })?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

pub(crate) fn pending_key(p: &PendingRequest) -> String {
    format!("{}/{}", p.run, p.id)
}

fn call_id_for(turn: usize, index: usize) -> Result<CallId, RunError> {
    call_id(turn, index)
}
