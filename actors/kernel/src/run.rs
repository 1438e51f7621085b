//! The run model of SPEC S1 as plain data and pure functions: statuses, the
//! transition table, stop reasons by status, the `AgentRun` record,
//! activities, evidence, pending requests and checkpoints. A run's
//! [`Usage`] is owned by [`crate::budget`] (S4) and its [`RunMode`] by
//! [`crate::mode`]; both are re-exported here.

use serde::{Deserialize, Serialize};

use agent_capabilities::{ApprovalIdentity, EffectSet, Trust};

use crate::budget::{Budget, BudgetDimension};
use crate::host::storage::{BlobRef, Record, Table};
use crate::ids::{CallId, RequestId, RunId, SessionId};
use crate::protocol::{Provenance, Reference};

pub use crate::budget::Usage;
pub use crate::mode::RunMode;

/// Where a run is in its life (S1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Running,
    AwaitingInput,
    AwaitingApproval,
    Interrupted,
    Completed,
    Failed,
    Cancelled,
}

impl RunStatus {
    pub const ALL: [RunStatus; 7] = [
        RunStatus::Running,
        RunStatus::AwaitingInput,
        RunStatus::AwaitingApproval,
        RunStatus::Interrupted,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ];

    /// `completed`, `failed` and `cancelled` never change again.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }

    /// The transition table of DESIGN.md. A status never "moves" to itself.
    pub fn can_transition_to(self, to: RunStatus) -> bool {
        use RunStatus::*;
        if self == to {
            return false;
        }
        match self {
            Running => true,
            AwaitingInput | AwaitingApproval => {
                matches!(to, Running | Interrupted | Failed | Cancelled)
            }
            Interrupted => matches!(to, Running | Failed | Cancelled),
            Completed | Failed | Cancelled => false,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::AwaitingInput => "awaiting_input",
            RunStatus::AwaitingApproval => "awaiting_approval",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a run stopped (S1.3). Messages never contain prompt or result text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum StopReason {
    Completed,
    UserStopped,
    BudgetExhausted {
        dimension: BudgetDimension,
    },
    Offline,
    PageInterrupted,
    EffectUnknown {
        call_id: CallId,
    },
    RuntimeError {
        actor: String,
        message: String,
    },
    /// The model provider stayed unreachable, overloaded or failing past
    /// its retry bound (S13.2); the run continues on Resume.
    ProviderUnavailable {
        provider: String,
        message: String,
    },
    /// The answer is complete as far as it goes: the model stopped at its
    /// output limit (a `length` / `MAX_TOKENS` / `max_tokens` finish).
    OutputLimit,
    /// The provider withheld the answer (a safety or content filter, a
    /// refusal).
    ContentFiltered {
        provider: String,
    },
}

impl StopReason {
    /// Stop reasons by status (DESIGN.md): which statuses may carry this reason.
    pub fn allowed_with(&self, status: RunStatus) -> bool {
        use RunStatus::*;
        match self {
            StopReason::Completed | StopReason::OutputLimit => status == Completed,
            StopReason::UserStopped => status == Cancelled,
            StopReason::BudgetExhausted { .. }
            | StopReason::RuntimeError { .. }
            | StopReason::ContentFiltered { .. } => status == Failed,
            StopReason::Offline
            | StopReason::PageInterrupted
            | StopReason::ProviderUnavailable { .. } => status == Interrupted,
            StopReason::EffectUnknown { .. } => matches!(status, Interrupted | Failed),
        }
    }
}

/// A status change that the table or the stop-reason rules refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    #[error("a run cannot go from {from} to {to}")]
    Illegal { from: RunStatus, to: RunStatus },
    #[error("status {to} needs a stop reason")]
    MissingReason { to: RunStatus },
    #[error("stop reason {reason:?} is not allowed with status {to}")]
    ReasonNotAllowed { to: RunStatus, reason: StopReason },
}

/// Check a transition and the stop reason it carries. Statuses `running`,
/// `awaiting_input` and `awaiting_approval` carry no reason; the others need one.
pub fn check_transition(
    from: RunStatus,
    to: RunStatus,
    reason: Option<&StopReason>,
) -> Result<(), TransitionError> {
    if !from.can_transition_to(to) {
        return Err(TransitionError::Illegal { from, to });
    }
    let needs_reason = matches!(
        to,
        RunStatus::Interrupted | RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
    );
    match (needs_reason, reason) {
        (true, None) => Err(TransitionError::MissingReason { to }),
        (false, Some(r)) => Err(TransitionError::ReasonNotAllowed {
            to,
            reason: r.clone(),
        }),
        (true, Some(r)) if !r.allowed_with(to) => Err(TransitionError::ReasonNotAllowed {
            to,
            reason: r.clone(),
        }),
        _ => Ok(()),
    }
}

/// The persisted `AgentRun` (S1.1): hashes and references only, never raw text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct AgentRun {
    pub id: RunId,
    pub session: SessionId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<RunId>,
    #[serde(default)]
    pub children: Vec<RunId>,
    pub mode: RunMode,
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    pub usage: Usage,
    pub budget: Budget,
    /// The prompt, stored as a blob.
    pub prompt: BlobRef,
    /// The final assistant output, stored as a blob, once there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<BlobRef>,
    /// The latest plan (`update_plan`), stored as a blob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<BlobRef>,
    /// Number of activities written; the next one gets this sequence number.
    pub next_activity: u64,
    /// Every status the run has had, in order (for audits and the simulator).
    pub status_history: Vec<RunStatus>,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
}

impl Record for AgentRun {
    const TABLE: Table = Table::Runs;
    fn key(&self) -> String {
        self.id.to_string()
    }
}

/// What an activity records. Text lives in blobs; only references appear here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ActivityKind {
    StatusChanged {
        from: RunStatus,
        to: RunStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<StopReason>,
    },
    ModelRequest {
        round: u64,
    },
    ModelResponse {
        round: u64,
        text: Option<BlobRef>,
        tool_calls: u32,
        /// The reasoning the model streamed apart from its answer (S13.4),
        /// stored as its own blob: never the answer, never the history.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<BlobRef>,
        /// True when the answer was cut off by a Stop mid-stream: `text`
        /// is what had streamed before it, kept as the run's output and
        /// shown marked incomplete (issue 37 part 6).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        #[cfg_attr(feature = "ts", ts(as = "Option<bool>", optional))]
        incomplete: bool,
    },
    ToolCall {
        call_id: CallId,
        tool: String,
        state: crate::journal::CallState,
    },
    ApprovalRequested {
        request: RequestId,
        call_id: CallId,
    },
    ApprovalAnswered {
        request: RequestId,
        approved: bool,
    },
    InputRequested {
        request: RequestId,
    },
    InputAnswered {
        request: RequestId,
    },
    DecisionRequested {
        request: RequestId,
        call_id: CallId,
    },
    DecisionTaken {
        request: RequestId,
        /// One of the supervisor's choices, by name.
        #[cfg_attr(feature = "ts", ts(type = "DecisionChoice"))]
        choice: String,
    },
    PlanUpdated {
        plan: BlobRef,
    },
    ChildStarted {
        child: RunId,
    },
    /// The run started from its session's conversation without its oldest
    /// turns: they did not fit the model's context budget (S12).
    ConversationTrimmed {
        dropped_turns: u64,
        kept_turns: u64,
    },
    /// The session's oldest turns were summarised by the model into a
    /// stored summary (`summary`) that this run and later ones send in
    /// their place (S12.4): it covers the conversation's first
    /// `turns_covered` turns; its size before and after, in tokens (the
    /// provider's counts where it reported them).
    ConversationCompacted {
        turns_covered: u64,
        tokens_before: u64,
        tokens_after: u64,
        summary: BlobRef,
    },
    /// The executor running the run's work was lost (S2.5): `executor` names
    /// it (`tool:<name>`, `supervisor`, `host`, `javascript worker`, ...);
    /// the run is interrupted and continues only on Resume.
    ExecutorLost {
        executor: String,
    },
}

/// One entry of a run's gap-free activity sequence (S1.4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Activity {
    pub run: RunId,
    pub seq: u64,
    /// Never earlier than the previous activity's timestamp, even if the clock stepped back.
    pub at_ms: u64,
    pub kind: ActivityKind,
}

impl Activity {
    pub fn key_for(run: &RunId, seq: u64) -> String {
        format!("{run}/{seq:016}")
    }
}

impl Record for Activity {
    const TABLE: Table = Table::Activities;
    fn key(&self) -> String {
        Activity::key_for(&self.run, self.seq)
    }
}

/// The provenance and references of one result, kept for the run card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Evidence {
    pub run: RunId,
    pub call_id: CallId,
    pub tool: String,
    pub trust: Trust,
    pub provenance: Provenance,
    pub references: Vec<Reference>,
    pub result: BlobRef,
    pub at_ms: u64,
}

impl Record for Evidence {
    const TABLE: Table = Table::Evidence;
    fn key(&self) -> String {
        format!("{}/{}", self.run, self.call_id)
    }
}

/// What the person is asked for.
// Boxing the large variant would change a public shape others build on; the
// size is irrelevant here (one message per tool call / one record per request).
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
// The page sees it with the question resolved (`PendingKind` there, the
// assembly's `PendingView`), so its TypeScript name is the record's.
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename = "PendingRecordKind"))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PendingKind {
    /// Approve or deny one tool call. Never persisted as a grant: only the request.
    Approval {
        call_id: CallId,
        tool: String,
        effects: EffectSet,
        target_summary: String,
        reason: String,
        identity: ApprovalIdentity,
    },
    /// Answer an `ask_user` question (question text is in the blob; the
    /// answer must satisfy the JSON Schema in `schema`, or be one of
    /// `choices`, when the question has one).
    Input {
        call_id: CallId,
        question: BlobRef,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        schema: Option<BlobRef>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        choices: Option<Vec<String>>,
    },
    /// Decide about a call whose effect is unknown: retry anyway, mark as done, or abandon.
    Decision { call_id: CallId, tool: String },
    /// Answer a server's request for input during call `call_id` (MCP
    /// `elicitation/create`, form mode): accept with content that satisfies
    /// the requested schema in `schema`, decline, or cancel. The server's
    /// message is in the blob `message`, `external_untrusted` text; the
    /// request lives only as long as the call that asked.
    Elicitation {
        call_id: CallId,
        /// The configured id of the server that asks.
        server: String,
        message: BlobRef,
        schema: BlobRef,
    },
}

/// A persisted request waiting for the person (S6.4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename = "PendingRecord"))]
pub struct PendingRequest {
    pub run: RunId,
    pub id: RequestId,
    pub kind: PendingKind,
    pub created_at_ms: u64,
    /// Set when a UI has shown it, so that a reload presents it once, not twice.
    #[serde(default)]
    pub presented: bool,
}

impl Record for PendingRequest {
    const TABLE: Table = Table::Pending;
    fn key(&self) -> String {
        format!("{}/{}", self.run, self.id)
    }
}

/// Where in its loop a run was when the checkpoint was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "at", rename_all = "snake_case")]
pub enum CheckpointStage {
    BeforeModelRequest { round: u64 },
    AfterModelResponse { round: u64 },
    BeforeDispatch { call_id: CallId },
    AfterOutcome { call_id: CallId },
    Interrupted,
}

/// The model conversation so far (as a blob of messages) at a stage of the
/// loop. A run keeps one: each batch that reaches a new stage overwrites it
/// (`seq` counts every checkpoint the run has taken), so the stored bytes do
/// not grow with rounds; the activities are the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub run: RunId,
    pub seq: u64,
    pub stage: CheckpointStage,
    /// The conversation transcript, stored as a blob (never inline).
    pub transcript: BlobRef,
    pub usage: Usage,
    pub at_ms: u64,
}

impl Checkpoint {
    /// The key of `run`'s checkpoint.
    pub fn key_for(run: &RunId) -> String {
        format!("{run}/latest")
    }
}

impl Record for Checkpoint {
    const TABLE: Table = Table::Checkpoints;
    fn key(&self) -> String {
        Checkpoint::key_for(&self.run)
    }
}
