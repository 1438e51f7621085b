//! The task's transitions: the [`Event`]s that move a [`ResearchTask`]
//! from phase to phase, the pure [`ResearchTask::apply`] that takes them,
//! and the [`TransitionError`] that names the phase and the event refused.

use agent_kernel::RequestId;
use agent_kernel::host::BlobRef;

use super::{
    ActivePhase, EvidenceId, Gap, LookupKind, MAX_PLANNING_READS, MAX_PLANNING_SEARCHES, Phase,
    PlanRequest, ReportRef, ResearchTask, SnapshotSource, SourceRead, SourceSnapshot,
};

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
    /// A phase could not go on (its run failed or its answer was unusable):
    /// interrupted like [`Event::Interrupt`], with the reason kept on the
    /// task so that the person sees why.
    Park { reason: String },
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
            Event::Park { .. } => "park",
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
            (Phase::Executing | Phase::Synthesizing, Event::Stop { gap }) => {
                // Stopping during synthesis records the gap once; the
                // report is then made from what was read, without the model.
                if !next.gaps.contains(gap) {
                    next.gaps.push(gap.clone());
                }
                next.phase = Phase::Synthesizing;
            }
            (Phase::Planning | Phase::AwaitingPlanApproval, Event::Stop { gap }) => {
                next.gaps.push(gap.clone());
                next.plan_request = None;
                next.phase = Phase::Cancelled;
            }
            (Phase::Interrupted { .. }, Event::Stop { gap }) => {
                // Stopping an interrupted task keeps what exists: before a
                // snapshot it is cancelled, after it the report is made of
                // what was read.
                next.interrupted_because = None;
                if !next.gaps.contains(gap) {
                    next.gaps.push(gap.clone());
                }
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
            (
                Phase::Planning | Phase::Executing | Phase::Synthesizing,
                Event::Interrupt | Event::Park { .. },
            ) => {
                next.interrupted_because = match &event {
                    Event::Park { reason } => Some(reason.chars().take(1_000).collect()),
                    _ => None,
                };
                next.phase = Phase::Interrupted {
                    resume_to: match self.phase {
                        Phase::Planning => ActivePhase::Planning,
                        Phase::Executing => ActivePhase::Executing,
                        _ => ActivePhase::Synthesizing,
                    },
                };
            }
            (Phase::Interrupted { resume_to }, Event::Resume) => {
                next.interrupted_because = None;
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
