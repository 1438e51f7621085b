//! Deep Research wired into the runtime (SPEC S9). The driver is
//! `agent_research::driver`; this module owns only the wiring:
//! - [`RuntimeRuns`]: the kernel's [`ChildRuns`] over the supervisor's
//!   [`Runtime`], which turns a [`ChildRunSpec`] into a phase run's
//!   configuration from the start turn's model settings alone (S9.1: no
//!   Agent prompt, no Skill, no allowlist of the Agent's tools);
//! - the report's sink: the session's Artifacts with the fence of the
//!   session's open workspace;
//! - the [`Assembly`] methods every host calls, each the session's fence
//!   (refused while the session is not open here) and one call of the
//!   driver.

use agent_capabilities::ApprovalMode;
use agent_kernel::RequestId;
use agent_kernel::child_runs::{ChildRunSpec, ChildRuns, TurnEnding};
use agent_kernel::host::Fence;
use agent_kernel::run::{RunMode, RunStatus};
use agent_kernel::{RunId, SessionId};
use agent_research::driver::{DriverError, ResearchDriver};
use agent_research::report::ArtifactSink;
use agent_research::view::ResearchView;
use agent_research::{PlanDecision, ResearchPlan, ResearchStore, TaskId};
use agent_supervisor::{EndingCall, ModelSettings, RunConfig, RunError, RunEvent, Runtime};
use agent_workspace::{Artifacts, Source};

use crate::Assembly;

pub use agent_research::driver::{RESEARCH_LABEL, ResearchStart};

/// A Deep Research action could not be taken; a refusal of the runtime is
/// its [`RunError`].
pub type ResearchDeskError = DriverError<RunError>;

/// The research configuration of a phase run, from the start turn's model
/// settings alone (S9.1: no Agent prompt, no Skill, no allowlist of the
/// Agent's tools).
fn phase_config(start: &RunConfig, spec: &ChildRunSpec) -> RunConfig {
    let mut config = RunConfig {
        mode: RunMode::Research,
        approval: start.approval,
        budget: start.budget,
        allowlist: Some(spec.tools.iter().cloned().collect()),
        model: ModelSettings {
            system_prompt: None,
            system_extension: None,
            ..start.model.clone()
        },
        ..RunConfig::default()
    };
    // At least 1: a budget of no calls is not a valid budget; a run with
    // no tools makes none anyway.
    config.budget.max_tool_calls = spec.max_tool_calls.min(start.budget.max_tool_calls).max(1);
    config
}

/// The supervisor's [`Runtime`] as the driver's [`ChildRuns`].
#[derive(Debug, Clone)]
pub struct RuntimeRuns(pub Runtime);

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl ChildRuns for RuntimeRuns {
    type Error = RunError;
    type Settings = RunConfig;

    async fn start_turn(
        &self,
        session: &SessionId,
        prompt: &str,
        ending: TurnEnding,
        config: RunConfig,
    ) -> Result<RunId, RunError> {
        let start = RunConfig {
            mode: RunMode::Research,
            allowlist: None,
            skill: None,
            history: None,
            ending_call: Some(EndingCall {
                tool: ending.tool,
                fallback_arguments: ending.fallback_arguments,
            }),
            model: ModelSettings {
                system_prompt: None,
                system_extension: None,
                ..config.model
            },
            ..config
        };
        self.0.start(session, prompt, start).await
    }

    async fn start_child(
        &self,
        id: RunId,
        parent: &RunId,
        prompt: &str,
        spec: ChildRunSpec,
    ) -> Result<RunId, RunError> {
        let config = phase_config(&self.0.config(parent).await?, &spec);
        match self.0.start_child_as(id, parent, prompt, config).await {
            Ok(run) | Err(RunError::AlreadyExists(run)) => Ok(run),
            Err(e) => Err(e),
        }
    }

    async fn status(&self, run: &RunId) -> Result<Option<RunStatus>, RunError> {
        match self.0.run(run).await {
            Ok(found) => Ok(Some(found.status)),
            Err(RunError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn wait_settled(&self, run: &RunId) -> Result<RunStatus, RunError> {
        Ok(self.0.wait_settled(run).await?.status)
    }

    async fn output(&self, run: &RunId) -> Result<Option<String>, RunError> {
        self.0.output(run).await
    }

    async fn resume(&self, run: &RunId) -> Result<(), RunError> {
        self.0.resume(run).await
    }

    async fn stop(&self, run: &RunId) -> Result<(), RunError> {
        self.0.stop(run).await
    }

    async fn approval(&self, run: &RunId) -> Result<ApprovalMode, RunError> {
        Ok(self.0.config(run).await?.approval)
    }

    fn announce(&self, run: &RunId, task: &str, phase: &str) {
        self.0.emit(RunEvent::Research {
            run: run.clone(),
            task: task.to_owned(),
            phase: phase.to_owned(),
        });
    }
}

/// The driver as the assembly holds it.
pub(crate) type Driver = ResearchDriver<RuntimeRuns>;

impl Assembly {
    /// The research task store (the same storage as the runs).
    pub fn research_store(&self) -> &ResearchStore {
        self.research.store()
    }

    fn fence_of(&self, session: &SessionId) -> Result<Fence, ResearchDeskError> {
        self.workspaces
            .get(session)
            .map(|open| open.fence.clone())
            .ok_or_else(|| ResearchDeskError::SessionClosed(session.clone()))
    }

    /// The report's sink for the session of `fence`.
    fn report_sink(&self, fence: Fence) -> SessionArtifacts<'_> {
        SessionArtifacts {
            assembly: self,
            fence,
        }
    }

    /// The start turn (S9.3); see [`ResearchDriver::start`]. Waits for
    /// the turn and returns; the host then plans with
    /// [`Assembly::advance_research`].
    pub async fn start_research(
        &self,
        session: &SessionId,
        prompt: &str,
        config: RunConfig,
    ) -> Result<ResearchStart, ResearchDeskError> {
        self.research.start(session, prompt, config).await
    }

    /// Take the task as far as it goes without the person; see
    /// [`ResearchDriver::advance`].
    pub async fn advance_research(
        &self,
        session: &SessionId,
        task: &TaskId,
    ) -> Result<ResearchView, ResearchDeskError> {
        let fence = self.fence_of(session)?;
        let sink = self.report_sink(fence.clone());
        self.research.advance(&fence, task, &sink).await
    }

    /// The plan request if it was not shown yet, marked shown (S6.4).
    pub async fn present_plan(
        &self,
        session: &SessionId,
        task: &TaskId,
    ) -> Result<Option<ResearchPlan>, ResearchDeskError> {
        let fence = self.fence_of(session)?;
        self.research.present_plan(&fence, task).await
    }

    /// The person's decision on the plan request; see
    /// [`ResearchDriver::decide_plan`].
    pub async fn decide_plan(
        &self,
        session: &SessionId,
        task: &TaskId,
        request: &RequestId,
        decision: PlanDecision,
    ) -> Result<ResearchView, ResearchDeskError> {
        let fence = self.fence_of(session)?;
        let sink = self.report_sink(fence.clone());
        self.research
            .decide_plan(&fence, task, request, decision, &sink)
            .await
    }

    /// Resume an interrupted task (the person chose Resume).
    pub async fn resume_research(
        &self,
        session: &SessionId,
        task: &TaskId,
    ) -> Result<ResearchView, ResearchDeskError> {
        let fence = self.fence_of(session)?;
        let sink = self.report_sink(fence.clone());
        self.research.resume(&fence, task, &sink).await
    }

    /// The person stops the task; see [`ResearchDriver::stop`].
    pub async fn stop_research(
        &self,
        session: &SessionId,
        task: &TaskId,
    ) -> Result<ResearchView, ResearchDeskError> {
        let fence = self.fence_of(session)?;
        let sink = self.report_sink(fence.clone());
        self.research.stop(&fence, task, &sink).await
    }

    /// The research task a run belongs to, with its session: the task's
    /// start turn, or one of its phase runs (`<task>-<phase>-<attempt>`);
    /// `None` for any other run. Both hosts stop such a run by stopping its
    /// task (S9.6), so that reads and synthesis end, not only the one run.
    pub async fn research_task_of(
        &self,
        run: &RunId,
    ) -> Result<Option<(SessionId, TaskId)>, ResearchDeskError> {
        let record = self.runtime().run(run).await.map_err(DriverError::Run)?;
        if record.mode != RunMode::Research {
            return Ok(None);
        }
        let tasks = self.research_store().list(&record.session).await?;
        Ok(tasks
            .into_iter()
            .find(|task| {
                task.message.as_str() == run.as_str()
                    || run
                        .as_str()
                        .strip_prefix(task.id.as_str())
                        .is_some_and(|rest| rest.starts_with('-'))
            })
            .map(|task| (record.session.clone(), task.id)))
    }

    /// After a reload or a take-over: every task of the session mid-phase
    /// becomes `interrupted`; nothing is started (S9.6).
    pub async fn interrupt_research(
        &self,
        session: &SessionId,
    ) -> Result<Vec<TaskId>, ResearchDeskError> {
        let fence = self.fence_of(session)?;
        self.research.interrupt(&fence).await
    }

    /// A task as every host shows it; reads only.
    pub async fn research_view(
        &self,
        session: &SessionId,
        task: &TaskId,
    ) -> Result<ResearchView, ResearchDeskError> {
        self.research.view(session, task).await
    }

    /// The tasks of a session, newest first.
    pub async fn research_tasks(
        &self,
        session: &SessionId,
    ) -> Result<Vec<ResearchView>, ResearchDeskError> {
        self.research.tasks(session).await
    }
}

/// The report's sink: the session's Artifacts, with the fence of the
/// session's open workspace.
struct SessionArtifacts<'a> {
    assembly: &'a Assembly,
    fence: Fence,
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl ArtifactSink for SessionArtifacts<'_> {
    async fn publish(
        &self,
        session: &SessionId,
        task: &TaskId,
        bytes: Vec<u8>,
        name: &str,
        mime: &str,
    ) -> Result<String, String> {
        if session != &self.fence.session {
            return Err("the report belongs to another session".into());
        }
        let host = &self.assembly.host;
        let artifacts = Artifacts::new(
            host.storage.clone(),
            host.clock.clone(),
            self.fence.clone(),
            self.assembly.quotas(),
        );
        artifacts
            .publish(
                bytes,
                name,
                mime,
                Source::Import {
                    from: format!("deep-research/{task}"),
                },
                None,
            )
            .await
            .map(|p| p.artifact.id)
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_research::search::WEB_SEARCH;

    #[test]
    fn phase_runs_share_none_of_the_agents_configuration() {
        let mut start = RunConfig::default();
        start.model.system_prompt = Some("You are the agent.".into());
        start.model.system_extension = Some("Use JavaScript.".into());
        start.approval = ApprovalMode::Strict;
        let spec = |tools: &[&str], max_tool_calls| ChildRunSpec {
            tools: tools.iter().map(|t| (*t).to_owned()).collect(),
            max_tool_calls,
        };
        let plan = phase_config(&start, &spec(&[WEB_SEARCH], 8));
        assert_eq!(plan.mode, RunMode::Research);
        assert_eq!(plan.system_prompt(), None);
        assert_eq!(plan.skill, None);
        assert_eq!(plan.approval, ApprovalMode::Strict);
        assert_eq!(plan.budget.max_tool_calls, 8);
        assert!(plan.allows(WEB_SEARCH));
        assert!(!plan.allows("run_javascript"));
        let synthesis = phase_config(&start, &spec(&[], 0));
        assert_eq!(synthesis.allowed_tools(), Some(Default::default()));
    }
}
