//! What a host shows of a task (the page's research view, `readResearch`,
//! `agentrt report`): its phase, topic, plan, plan request, sources with
//! their state and evidence, look-ups, gaps and report reference, as one
//! serialisable value. Reading a view only reads: it never marks the plan
//! request as shown (that is [`crate::ResearchStore::present_plan`], S6.4)
//! and never starts anything (S9.6).

use agent_kernel::SessionId;
use serde::Serialize;

use crate::plan::ResearchPlan;
use crate::store::{ResearchError, ResearchStore};
use crate::task::{
    ActivePhase, EvidenceId, Gap, Lookups, MessageId, Phase, PlanRequest, ReportRef, TaskId,
};

/// One snapshot source as shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename = "ResearchSource"))]
pub struct SourceView {
    pub url: String,
    /// `pending`, `read` or `failed`.
    #[cfg_attr(feature = "ts", ts(type = r#""pending" | "read" | "failed""#))]
    pub state: &'static str,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<EvidenceId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_url: Option<String>,
    /// SHA-256 of the stored text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A task as a host shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ResearchView {
    pub task: TaskId,
    pub session: SessionId,
    pub message: MessageId,
    /// [`Phase::name`](crate::task::Phase::name) of the task's phase.
    #[cfg_attr(feature = "ts", ts(type = "ResearchPhase"))]
    pub phase: &'static str,
    /// For an interrupted task: the phase Resume continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_to: Option<ActivePhase>,
    /// For an interrupted task whose phase could not go on: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_because: Option<String>,
    pub topic: String,
    pub urls: Vec<String>,
    /// The approved plan, else the proposed one, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<ResearchPlan>,
    pub plan_approved: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_request: Option<PlanRequest>,
    pub sources: Vec<SourceView>,
    pub lookups: Lookups,
    pub gaps: Vec<Gap>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<ReportRef>,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
}

/// The view of task `id` of `session`; reads only.
pub async fn read_research(
    store: &ResearchStore,
    session: &SessionId,
    id: &TaskId,
) -> Result<ResearchView, ResearchError> {
    let task = store.load(session, id).await?;
    let approved = store.approved_plan(&task).await?;
    let plan_approved = approved.is_some();
    let plan = match approved {
        Some(plan) => Some(plan),
        None => store.proposed_plan(&task).await?,
    };
    let sources = task
        .snapshot
        .iter()
        .flat_map(|s| &s.sources)
        .map(|s| SourceView {
            url: s.url.clone(),
            state: match (&s.read, &s.failed) {
                (Some(_), _) => "read",
                (None, Some(_)) => "failed",
                (None, None) => "pending",
            },
            evidence: s.read.as_ref().map(|r| r.evidence.clone()),
            final_url: s.read.as_ref().map(|r| r.final_url.clone()),
            content_hash: s.read.as_ref().map(|r| r.content.hash.clone()),
            reason: s.failed.clone(),
        })
        .collect();
    Ok(ResearchView {
        resume_to: match task.phase {
            Phase::Interrupted { resume_to } => Some(resume_to),
            _ => None,
        },
        interrupted_because: task.interrupted_because.clone(),
        phase: task.phase.name(),
        topic: store.topic(&task).await?,
        urls: store.seed_urls(&task).await?,
        plan,
        plan_approved,
        plan_request: task.plan_request.clone(),
        sources,
        lookups: task.lookups,
        gaps: task.gaps.clone(),
        report: task.report.clone(),
        created_at_ms: task.created_at_ms,
        updated_at_ms: task.updated_at_ms,
        task: task.id,
        session: task.session,
        message: task.message,
    })
}
