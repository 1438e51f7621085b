//! The `ResearchTask` record (S9.1, S9.2, S9.5) and its phases as a typed,
//! pure state machine: [`ResearchTask::apply`] takes an [`Event`] and gives
//! the next record or a [`TransitionError`] naming the phase and the event.
//! No I/O here; `crate::store` makes each transition one fenced batch.
//!
//! ```text
//! Planning ──propose──▶ AwaitingPlanApproval ──approve──▶ Executing ──finish/stop──▶ Synthesizing
//!    │                        │        └──reject──▶ Rejected                         │
//!    │                        └──cancel──▶ Cancelled                        report ──┴─▶ Reported | Partial
//! Planning, Executing, Synthesizing ──interrupt──▶ Interrupted ──resume──▶ (the same phase)
//! ```
//!
//! Like runs (S2.2), the record holds hashes and references, never raw
//! text: the topic and the plans are blobs it names.

mod ids;
#[cfg(test)]
mod tests;
mod transition;

use agent_kernel::host::{BlobRef, Record, Table};
use agent_kernel::{RequestId, SessionId};
use serde::{Deserialize, Serialize};

pub use ids::{EvidenceId, IdError, MessageId, TaskId};
pub use transition::{Event, TransitionError};

/// The layout version of a stored task; another value is refused, typed.
pub const TASK_FORMAT: u32 = 1;

/// The prefix of every task key in [`Table::Meta`]: `research/<session>/<task>`.
pub const KEY_PREFIX: &str = "research/";

/// A phase a task can be interrupted in, and resumed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename = "ResearchActivePhase"))]
#[serde(rename_all = "snake_case")]
pub enum ActivePhase {
    Planning,
    Executing,
    Synthesizing,
}

/// Where a task is. `Reported`, `Partial`, `Rejected` and `Cancelled` are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Phase {
    /// The planning run works on a plan (bounded look-ups only, S9.4).
    Planning,
    /// The plan waits for the person: approve, edit (narrowing) or reject.
    AwaitingPlanApproval,
    /// Read-only execution over the frozen source snapshot.
    Executing,
    /// The report is written, without tools (S9.6).
    Synthesizing,
    /// A complete report exists.
    Reported,
    /// A report exists that lists its gaps (budget spent, stopped, a source failed).
    Partial,
    /// The person rejected the plan.
    Rejected,
    /// Stopped before any report existed.
    Cancelled,
    /// Interrupted (reload, offline, executor lost); continues only on Resume (S9.6).
    Interrupted { resume_to: ActivePhase },
}

impl Phase {
    /// A stable name for messages and logs.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Planning => "planning",
            Phase::AwaitingPlanApproval => "awaiting_plan_approval",
            Phase::Executing => "executing",
            Phase::Synthesizing => "synthesizing",
            Phase::Reported => "reported",
            Phase::Partial => "partial",
            Phase::Rejected => "rejected",
            Phase::Cancelled => "cancelled",
            Phase::Interrupted { .. } => "interrupted",
        }
    }

    /// True for phases nothing can leave.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Phase::Reported | Phase::Partial | Phase::Rejected | Phase::Cancelled
        )
    }
}

/// Look-ups planning may make to identify an unfamiliar subject (S9.4):
/// counted in the task, durably, before each one is dispatched.
pub const MAX_PLANNING_SEARCHES: u32 = 4;
pub const MAX_PLANNING_READS: u32 = 4;

/// A bounded planning look-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LookupKind {
    Search,
    Read,
}

/// How many look-ups planning has made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Lookups {
    pub searches: u32,
    pub reads: u32,
}

/// The plan waiting for the person, as a pending request (S6.4): shown
/// once, not again after a reload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct PlanRequest {
    pub id: RequestId,
    pub created_at_ms: u64,
    /// Set when a UI has shown it.
    #[serde(default)]
    pub presented: bool,
}

/// A source that was read: its evidence id, where the read ended, and the
/// hash of the stored text (a blob).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRead {
    pub evidence: EvidenceId,
    pub final_url: String,
    pub content: BlobRef,
    pub fetched_at_ms: u64,
    /// The publication date, when the source or its search result gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<String>,
}

/// One source of the frozen snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotSource {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<SourceRead>,
    /// Why the read failed, if it did (the source is then a gap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// The approved sources, frozen at approval (S9.4): execution reads only
/// these URLs; each read adds its content hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceSnapshot {
    pub frozen_at_ms: u64,
    pub sources: Vec<SnapshotSource>,
}

impl SourceSnapshot {
    /// The read behind `evidence`, if any.
    pub fn evidence(&self, evidence: &EvidenceId) -> Option<(&str, &SourceRead)> {
        self.sources.iter().find_map(|s| match &s.read {
            Some(read) if &read.evidence == evidence => Some((s.url.as_str(), read)),
            _ => None,
        })
    }

    fn reads(&self) -> usize {
        self.sources.iter().filter(|s| s.read.is_some()).count()
    }
}

/// Something a partial report could not cover (S9.6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename = "ResearchGap"))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Gap {
    /// A source of the snapshot could not be read.
    SourceFailed { url: String, reason: String },
    /// A budget dimension ran out.
    BudgetExhausted { dimension: String },
    /// The person stopped execution.
    Stopped,
    /// A question the report could not answer from its sources.
    Unanswered { question: String },
    /// Synthesis's draft had findings whose citations do not resolve to a
    /// source read for the task (or that cite none): `count` of them were
    /// moved to unverified material; `reason` is the first refusal.
    UnsupportedClaims { count: u32, reason: String },
}

/// The report Artifact a task produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ReportRef {
    /// The Artifact id: the SHA-256 of the report's bytes.
    pub artifact: String,
    pub size: u64,
}

/// One Deep Research task: durable like a run, keyed
/// `research/<session>/<task>` in [`Table::Meta`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResearchTask {
    pub v: u32,
    pub id: TaskId,
    /// Host-supplied (S9.5).
    pub session: SessionId,
    /// Host-supplied (S9.5): the chat message that keeps only this task's reference (S9.2).
    pub message: MessageId,
    /// The person's topic, as a blob.
    pub topic: BlobRef,
    /// The URLs the person gave with the topic (a JSON array blob), if any:
    /// planning may use them even without a search backend (S9.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seeds: Option<BlobRef>,
    pub phase: Phase,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
    /// The plan as proposed.
    /// Planning's look-ups so far (S9.4).
    #[serde(default)]
    pub lookups: Lookups,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<BlobRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_request: Option<PlanRequest>,
    /// The plan as approved (the proposal, or the person's narrowing edit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_plan: Option<BlobRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SourceSnapshot>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<ReportRef>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gaps: Vec<Gap>,
    /// Why the task is `Interrupted`, when a phase could not go on (its run
    /// failed, or its answer could not be used): shown with the task, and
    /// cleared by Resume. `None` after a reload or a lost executor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_because: Option<String>,
}

impl ResearchTask {
    /// The storage key of a task.
    pub fn key_for(session: &SessionId, id: &TaskId) -> String {
        format!("{KEY_PREFIX}{session}/{id}")
    }

    /// A new task in `Planning`.
    pub fn new(
        id: TaskId,
        session: SessionId,
        message: MessageId,
        topic: BlobRef,
        now_ms: u64,
    ) -> ResearchTask {
        ResearchTask {
            v: TASK_FORMAT,
            id,
            session,
            message,
            topic,
            seeds: None,
            phase: Phase::Planning,
            lookups: Lookups::default(),
            created_at_ms: now_ms,
            updated_at_ms: now_ms,
            plan: None,
            plan_request: None,
            approved_plan: None,
            snapshot: None,
            report: None,
            gaps: Vec::new(),
            interrupted_because: None,
        }
    }
}

impl Record for ResearchTask {
    const TABLE: Table = Table::Meta;
    fn key(&self) -> String {
        ResearchTask::key_for(&self.session, &self.id)
    }
}
