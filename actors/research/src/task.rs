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

use agent_kernel::host::{BlobRef, Record, Table};
use agent_kernel::{RequestId, SessionId};
use serde::{Deserialize, Serialize};

/// The layout version of a stored task; another value is refused, typed.
pub const TASK_FORMAT: u32 = 1;

/// The prefix of every task key in [`Table::Meta`]: `research/<session>/<task>`.
pub const KEY_PREFIX: &str = "research/";

/// An identifier was empty, too long, or used characters outside `[A-Za-z0-9._:-]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} id {value:?}: use 1 to 128 characters from A-Z a-z 0-9 . _ : -")]
pub struct IdError {
    pub kind: &'static str,
    pub value: String,
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[cfg_attr(feature = "ts", derive(ts_rs::TS))]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Validate and wrap an identifier (the kernel's id rule).
            pub fn new(value: impl Into<String>) -> Result<Self, IdError> {
                let value = value.into();
                let ok = !value.is_empty()
                    && value.len() <= 128
                    && value
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
                if ok {
                    Ok(Self(value))
                } else {
                    Err(IdError { kind: $kind, value: value.chars().take(160).collect() })
                }
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(value: String) -> Result<Self, IdError> {
                Self::new(value)
            }
        }
        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

id_type!(
    /// One Deep Research task.
    TaskId, "research task"
);
id_type!(
    /// The chat message that refers to the task, supplied by the host out
    /// of band (S9.5), never by the model.
    MessageId, "message"
);
id_type!(
    /// One piece of evidence: a source read during execution (S9.6).
    EvidenceId, "evidence"
);

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
        }
    }
}

impl Record for ResearchTask {
    const TABLE: Table = Table::Meta;
    fn key(&self) -> String {
        ResearchTask::key_for(&self.session, &self.id)
    }
}

/// What happens to a task. Each is legal in some phases only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Planning is about to make a look-up; refused over its cap.
    CountLookup { kind: LookupKind },
    /// Planning produced a plan (a blob); it becomes a pending request.
    ProposePlan { plan: BlobRef, request: RequestId },
    /// A UI showed the plan request.
    PresentPlan,
    /// The person approved the plan (`approved` is the proposal or the
    /// narrowing edit); `sources` are its candidate sources, frozen now.
    ApprovePlan {
        approved: BlobRef,
        sources: Vec<String>,
    },
    /// The person rejected the plan.
    RejectPlan,
    /// A snapshot source was read; it gets the next evidence id.
    RecordRead {
        url: String,
        final_url: String,
        content: BlobRef,
        fetched_at_ms: u64,
        published: Option<String>,
    },
    /// A snapshot source could not be read: a gap.
    RecordFailure { url: String, reason: String },
    /// Execution is done; synthesis starts.
    FinishExecution,
    /// Execution stops early (budget spent, stopped by the person): synthesis
    /// of what was read, with the gap. Before execution: `Cancelled`.
    Stop { gap: Gap },
    /// Synthesis published the report; `gaps` are the report's own (the
    /// task's, plus questions it could not answer), kept on the task too.
    /// With any gap the task is `Partial`.
    Report { report: ReportRef, gaps: Vec<Gap> },
    /// Reload, offline, executor lost (S2.5).
    Interrupt,
    /// The person chose Resume.
    Resume,
}

impl Event {
    /// A stable name for messages and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Event::CountLookup { .. } => "count_lookup",
            Event::ProposePlan { .. } => "propose_plan",
            Event::PresentPlan => "present_plan",
            Event::ApprovePlan { .. } => "approve_plan",
            Event::RejectPlan => "reject_plan",
            Event::RecordRead { .. } => "record_read",
            Event::RecordFailure { .. } => "record_failure",
            Event::FinishExecution => "finish_execution",
            Event::Stop { .. } => "stop",
            Event::Report { .. } => "report",
            Event::Interrupt => "interrupt",
            Event::Resume => "resume",
        }
    }
}

/// A transition was refused; the stored task is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransitionError {
    #[error("research task in phase {phase} cannot take {event}")]
    Illegal {
        phase: &'static str,
        event: &'static str,
    },
    #[error(
        "{url:?} is not a source of the approved snapshot; execution reads only approved sources"
    )]
    NotInSnapshot { url: String },
    #[error("source {url:?} was already read or failed; its snapshot entry is final")]
    AlreadySettled { url: String },
    #[error("planning has made its {max} {kind:?} look-ups; propose the plan with what is known")]
    LookupsExhausted { kind: LookupKind, max: u32 },
    #[error("the plan request was already shown; it is shown once (S6.4)")]
    AlreadyPresented,
    #[error("publication date {date:?} is not a valid YYYY-MM-DD date")]
    BadDate { date: String },
    #[error("the approved plan has {count} sources, more than the {max} a snapshot holds")]
    SnapshotTooLarge { count: usize, max: usize },
}

impl ResearchTask {
    /// The task after `event` at `now_ms`, or why it cannot take it.
    pub fn apply(&self, event: Event, now_ms: u64) -> Result<ResearchTask, TransitionError> {
        let illegal = || TransitionError::Illegal {
            phase: self.phase.name(),
            event: event.name(),
        };
        let mut next = self.clone();
        next.updated_at_ms = now_ms.max(self.updated_at_ms);
        match (self.phase, &event) {
            (Phase::Planning, Event::CountLookup { kind }) => {
                let (count, max) = match kind {
                    LookupKind::Search => (&mut next.lookups.searches, MAX_PLANNING_SEARCHES),
                    LookupKind::Read => (&mut next.lookups.reads, MAX_PLANNING_READS),
                };
                if *count >= max {
                    return Err(TransitionError::LookupsExhausted { kind: *kind, max });
                }
                *count += 1;
            }
            (Phase::Planning, Event::ProposePlan { plan, request }) => {
                next.plan = Some(plan.clone());
                next.plan_request = Some(PlanRequest {
                    id: request.clone(),
                    created_at_ms: now_ms,
                    presented: false,
                });
                next.phase = Phase::AwaitingPlanApproval;
            }
            (Phase::AwaitingPlanApproval, Event::PresentPlan) => {
                let request = next.plan_request.as_mut().ok_or_else(illegal)?;
                if request.presented {
                    return Err(TransitionError::AlreadyPresented);
                }
                request.presented = true;
            }
            (Phase::AwaitingPlanApproval, Event::ApprovePlan { approved, sources }) => {
                if sources.len() > crate::plan::MAX_SOURCES {
                    return Err(TransitionError::SnapshotTooLarge {
                        count: sources.len(),
                        max: crate::plan::MAX_SOURCES,
                    });
                }
                next.approved_plan = Some(approved.clone());
                next.plan_request = None;
                let mut unique: Vec<SnapshotSource> = Vec::with_capacity(sources.len());
                for url in sources {
                    if !unique.iter().any(|s| &s.url == url) {
                        unique.push(SnapshotSource {
                            url: url.clone(),
                            read: None,
                            failed: None,
                        });
                    }
                }
                next.snapshot = Some(SourceSnapshot {
                    frozen_at_ms: now_ms,
                    sources: unique,
                });
                next.phase = Phase::Executing;
            }
            (Phase::AwaitingPlanApproval, Event::RejectPlan) => {
                next.plan_request = None;
                next.phase = Phase::Rejected;
            }
            (
                Phase::Executing,
                Event::RecordRead {
                    url,
                    final_url,
                    content,
                    fetched_at_ms,
                    published,
                },
            ) => {
                if let Some(date) = published {
                    let valid = agent_capabilities::TargetScope::Dates {
                        from: date.clone(),
                        to: date.clone(),
                    }
                    .covers(&agent_capabilities::Target::Date { date: date.clone() });
                    if !valid {
                        return Err(TransitionError::BadDate {
                            date: date.chars().take(40).collect(),
                        });
                    }
                }
                let snapshot = next.snapshot.as_mut().ok_or_else(illegal)?;
                let evidence = EvidenceId::new(format!("ev-{}", snapshot.reads() + 1))
                    .map_err(|_| illegal())?;
                let entry = source_mut(snapshot, url)?;
                entry.read = Some(SourceRead {
                    evidence,
                    final_url: final_url.clone(),
                    content: content.clone(),
                    fetched_at_ms: *fetched_at_ms,
                    published: published.clone(),
                });
            }
            (Phase::Executing, Event::RecordFailure { url, reason }) => {
                let snapshot = next.snapshot.as_mut().ok_or_else(illegal)?;
                let entry = source_mut(snapshot, url)?;
                entry.failed = Some(reason.clone());
                next.gaps.push(Gap::SourceFailed {
                    url: url.clone(),
                    reason: reason.clone(),
                });
            }
            (Phase::Executing, Event::FinishExecution) => next.phase = Phase::Synthesizing,
            (Phase::Executing, Event::Stop { gap }) => {
                next.gaps.push(gap.clone());
                next.phase = Phase::Synthesizing;
            }
            (Phase::Planning | Phase::AwaitingPlanApproval, Event::Stop { gap }) => {
                next.gaps.push(gap.clone());
                next.plan_request = None;
                next.phase = Phase::Cancelled;
            }
            (Phase::Interrupted { .. }, Event::Stop { gap }) => {
                // Stopping an interrupted task keeps what exists: before a
                // snapshot it is cancelled, after it synthesis may still run.
                next.gaps.push(gap.clone());
                next.phase = if self.snapshot.is_some() {
                    Phase::Synthesizing
                } else {
                    Phase::Cancelled
                };
            }
            (Phase::Synthesizing, Event::Report { report, gaps }) => {
                next.report = Some(report.clone());
                for gap in gaps {
                    if !next.gaps.contains(gap) {
                        next.gaps.push(gap.clone());
                    }
                }
                next.phase = if next.gaps.is_empty() {
                    Phase::Reported
                } else {
                    Phase::Partial
                };
            }
            (Phase::Planning, Event::Interrupt) => {
                next.phase = Phase::Interrupted {
                    resume_to: ActivePhase::Planning,
                }
            }
            (Phase::Executing, Event::Interrupt) => {
                next.phase = Phase::Interrupted {
                    resume_to: ActivePhase::Executing,
                }
            }
            (Phase::Synthesizing, Event::Interrupt) => {
                next.phase = Phase::Interrupted {
                    resume_to: ActivePhase::Synthesizing,
                }
            }
            (Phase::Interrupted { resume_to }, Event::Resume) => {
                next.phase = match resume_to {
                    ActivePhase::Planning => Phase::Planning,
                    ActivePhase::Executing => Phase::Executing,
                    ActivePhase::Synthesizing => Phase::Synthesizing,
                }
            }
            _ => return Err(illegal()),
        }
        Ok(next)
    }
}

fn source_mut<'a>(
    snapshot: &'a mut SourceSnapshot,
    url: &str,
) -> Result<&'a mut SnapshotSource, TransitionError> {
    let entry = snapshot
        .sources
        .iter_mut()
        .find(|s| s.url == url)
        .ok_or_else(|| TransitionError::NotInSnapshot {
            url: url.chars().take(200).collect(),
        })?;
    if entry.read.is_some() || entry.failed.is_some() {
        return Err(TransitionError::AlreadySettled {
            url: url.to_owned(),
        });
    }
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(s: &str) -> BlobRef {
        BlobRef::of(s.as_bytes())
    }

    fn task() -> ResearchTask {
        ResearchTask::new(
            TaskId::new("task-1").unwrap(),
            SessionId::new("s1").unwrap(),
            MessageId::new("m1").unwrap(),
            blob("topic"),
            1_000,
        )
    }

    fn propose() -> Event {
        Event::ProposePlan {
            plan: blob("plan"),
            request: RequestId::new("plan-1").unwrap(),
        }
    }

    fn approve() -> Event {
        Event::ApprovePlan {
            approved: blob("plan"),
            sources: vec![
                "https://a.example.com/1".into(),
                "https://b.example.com/2".into(),
            ],
        }
    }

    fn read(url: &str) -> Event {
        Event::RecordRead {
            url: url.into(),
            final_url: url.into(),
            content: blob(url),
            fetched_at_ms: 5,
            published: None,
        }
    }

    fn report() -> Event {
        Event::Report {
            report: ReportRef {
                artifact: "ab".repeat(32),
                size: 10,
            },
            gaps: vec![],
        }
    }

    fn at(phase: Phase) -> ResearchTask {
        let mut t = task();
        let steps: Vec<Event> = match phase {
            Phase::Planning => vec![],
            Phase::AwaitingPlanApproval => vec![propose()],
            Phase::Executing => vec![propose(), approve()],
            Phase::Synthesizing => vec![propose(), approve(), Event::FinishExecution],
            Phase::Reported => vec![propose(), approve(), Event::FinishExecution, report()],
            Phase::Partial => vec![
                propose(),
                approve(),
                Event::Stop { gap: Gap::Stopped },
                report(),
            ],
            Phase::Rejected => vec![propose(), Event::RejectPlan],
            Phase::Cancelled => vec![Event::Stop { gap: Gap::Stopped }],
            Phase::Interrupted { resume_to } => match resume_to {
                ActivePhase::Planning => vec![Event::Interrupt],
                ActivePhase::Executing => vec![propose(), approve(), Event::Interrupt],
                ActivePhase::Synthesizing => vec![
                    propose(),
                    approve(),
                    Event::FinishExecution,
                    Event::Interrupt,
                ],
            },
        };
        for e in steps {
            t = t.apply(e, 2_000).unwrap();
        }
        assert_eq!(t.phase, phase);
        t
    }

    const ALL: [Phase; 11] = [
        Phase::Planning,
        Phase::AwaitingPlanApproval,
        Phase::Executing,
        Phase::Synthesizing,
        Phase::Reported,
        Phase::Partial,
        Phase::Rejected,
        Phase::Cancelled,
        Phase::Interrupted {
            resume_to: ActivePhase::Planning,
        },
        Phase::Interrupted {
            resume_to: ActivePhase::Executing,
        },
        Phase::Interrupted {
            resume_to: ActivePhase::Synthesizing,
        },
    ];

    fn events() -> Vec<Event> {
        vec![
            Event::CountLookup {
                kind: LookupKind::Search,
            },
            propose(),
            Event::PresentPlan,
            approve(),
            Event::RejectPlan,
            read("https://a.example.com/1"),
            Event::RecordFailure {
                url: "https://a.example.com/1".into(),
                reason: "503".into(),
            },
            Event::FinishExecution,
            Event::Stop { gap: Gap::Stopped },
            report(),
            Event::Interrupt,
            Event::Resume,
        ]
    }

    /// The legal (phase, event) → phase table; everything else is `Illegal`.
    fn expected(phase: Phase, event: &Event) -> Option<Phase> {
        use ActivePhase as A;
        Some(match (phase, event) {
            (Phase::Planning, Event::CountLookup { .. }) => Phase::Planning,
            (Phase::Planning, Event::ProposePlan { .. }) => Phase::AwaitingPlanApproval,
            (Phase::AwaitingPlanApproval, Event::PresentPlan) => Phase::AwaitingPlanApproval,
            (Phase::AwaitingPlanApproval, Event::ApprovePlan { .. }) => Phase::Executing,
            (Phase::AwaitingPlanApproval, Event::RejectPlan) => Phase::Rejected,
            (Phase::Executing, Event::RecordRead { .. } | Event::RecordFailure { .. }) => {
                Phase::Executing
            }
            (Phase::Executing, Event::FinishExecution | Event::Stop { .. }) => Phase::Synthesizing,
            (Phase::Planning | Phase::AwaitingPlanApproval, Event::Stop { .. }) => Phase::Cancelled,
            (
                Phase::Interrupted {
                    resume_to: A::Planning,
                },
                Event::Stop { .. },
            ) => Phase::Cancelled,
            (Phase::Interrupted { .. }, Event::Stop { .. }) => Phase::Synthesizing,
            (Phase::Synthesizing, Event::Report { .. }) => Phase::Reported,
            (Phase::Planning, Event::Interrupt) => Phase::Interrupted {
                resume_to: A::Planning,
            },
            (Phase::Executing, Event::Interrupt) => Phase::Interrupted {
                resume_to: A::Executing,
            },
            (Phase::Synthesizing, Event::Interrupt) => Phase::Interrupted {
                resume_to: A::Synthesizing,
            },
            (
                Phase::Interrupted {
                    resume_to: A::Planning,
                },
                Event::Resume,
            ) => Phase::Planning,
            (
                Phase::Interrupted {
                    resume_to: A::Executing,
                },
                Event::Resume,
            ) => Phase::Executing,
            (
                Phase::Interrupted {
                    resume_to: A::Synthesizing,
                },
                Event::Resume,
            ) => Phase::Synthesizing,
            _ => return None,
        })
    }

    #[test]
    fn every_phase_and_event_follows_the_table() {
        let mut legal = 0;
        for phase in ALL {
            for event in events() {
                let name = event.name();
                let result = at(phase).apply(event.clone(), 3_000);
                match expected(phase, &event) {
                    Some(to) => {
                        let next = result.unwrap_or_else(|e| panic!("{phase:?} + {name}: {e}"));
                        assert_eq!(next.phase, to, "{phase:?} + {name}");
                        legal += 1;
                    }
                    None => assert_eq!(
                        result,
                        Err(TransitionError::Illegal {
                            phase: phase.name(),
                            event: name
                        }),
                        "{phase:?} + {name}"
                    ),
                }
            }
        }
        // The table is not vacuous: 21 legal moves out of 132.
        assert_eq!(legal, 21);
    }

    #[test]
    fn final_phases_take_nothing() {
        for phase in ALL.into_iter().filter(|p| p.is_final()) {
            for event in events() {
                assert!(at(phase).apply(event, 3_000).is_err(), "{phase:?}");
            }
        }
    }

    #[test]
    fn approval_freezes_the_snapshot_and_clears_the_request() {
        let t = at(Phase::AwaitingPlanApproval);
        assert_eq!(t.plan_request.as_ref().map(|r| r.presented), Some(false));
        let shown = t.apply(Event::PresentPlan, 2_500).unwrap();
        assert_eq!(shown.plan_request.as_ref().map(|r| r.presented), Some(true));
        // Shown once: a second presentation is refused, typed.
        assert_eq!(
            shown.apply(Event::PresentPlan, 2_600),
            Err(TransitionError::AlreadyPresented)
        );
        let t = shown.apply(approve(), 3_000).unwrap();
        assert!(t.plan_request.is_none());
        let snapshot = t.snapshot.as_ref().unwrap();
        assert_eq!(snapshot.frozen_at_ms, 3_000);
        assert_eq!(snapshot.sources.len(), 2);
    }

    #[test]
    fn reads_get_evidence_ids_and_stay_within_the_snapshot() {
        let t = at(Phase::Executing)
            .apply(read("https://a.example.com/1"), 3_000)
            .unwrap()
            .apply(read("https://b.example.com/2"), 3_001)
            .unwrap();
        let snapshot = t.snapshot.as_ref().unwrap();
        let (url, r) = snapshot
            .evidence(&EvidenceId::new("ev-2").unwrap())
            .unwrap();
        assert_eq!(url, "https://b.example.com/2");
        assert_eq!(r.content, blob("https://b.example.com/2"));
        assert!(matches!(
            t.apply(read("https://evil.example.net/"), 3_002),
            Err(TransitionError::NotInSnapshot { .. })
        ));
        let bad_date = Event::RecordRead {
            url: "https://a.example.com/1".into(),
            final_url: "https://a.example.com/1".into(),
            content: blob("x"),
            fetched_at_ms: 5,
            published: Some("2024-02-30".into()),
        };
        assert!(matches!(
            at(Phase::Executing).apply(bad_date, 3_002),
            Err(TransitionError::BadDate { .. })
        ));
        assert!(matches!(
            t.apply(read("https://a.example.com/1"), 3_002),
            Err(TransitionError::AlreadySettled { .. })
        ));
    }

    #[test]
    fn a_failed_source_makes_the_report_partial() {
        let t = at(Phase::Executing)
            .apply(
                Event::RecordFailure {
                    url: "https://a.example.com/1".into(),
                    reason: "HTTP 503".into(),
                },
                3_000,
            )
            .unwrap()
            .apply(Event::FinishExecution, 3_001)
            .unwrap()
            .apply(report(), 3_002)
            .unwrap();
        assert_eq!(t.phase, Phase::Partial);
        assert!(matches!(t.gaps[0], Gap::SourceFailed { .. }));
        assert!(t.report.is_some());
    }

    #[test]
    fn planning_look_ups_are_counted_and_capped() {
        let mut t = task();
        for _ in 0..MAX_PLANNING_SEARCHES {
            t = t
                .apply(
                    Event::CountLookup {
                        kind: LookupKind::Search,
                    },
                    2_000,
                )
                .unwrap();
        }
        assert_eq!(t.lookups.searches, MAX_PLANNING_SEARCHES);
        assert_eq!(
            t.apply(
                Event::CountLookup {
                    kind: LookupKind::Search
                },
                2_000
            ),
            Err(TransitionError::LookupsExhausted {
                kind: LookupKind::Search,
                max: MAX_PLANNING_SEARCHES
            })
        );
        // Reads have their own cap.
        let t = t
            .apply(
                Event::CountLookup {
                    kind: LookupKind::Read,
                },
                2_000,
            )
            .unwrap();
        assert_eq!(
            t.lookups,
            Lookups {
                searches: 4,
                reads: 1
            }
        );
    }

    #[test]
    fn ids_are_validated() {
        assert!(TaskId::new("").is_err());
        assert!(TaskId::new("a/b").is_err());
        assert!(MessageId::new("x".repeat(129)).is_err());
        assert!(serde_json::from_str::<TaskId>("\"../etc\"").is_err());
    }

    #[test]
    fn a_report_with_its_own_gaps_makes_the_task_partial() {
        let t = at(Phase::Synthesizing)
            .apply(
                Event::Report {
                    report: ReportRef {
                        artifact: "cd".repeat(32),
                        size: 1,
                    },
                    gaps: vec![Gap::Unanswered {
                        question: "Who?".into(),
                    }],
                },
                3_000,
            )
            .unwrap();
        assert_eq!(t.phase, Phase::Partial);
        assert_eq!(t.gaps.len(), 1);
    }

    #[test]
    fn time_never_goes_backwards() {
        let t = task().apply(propose(), 10).unwrap();
        assert_eq!(t.updated_at_ms, 1_000);
    }
}
