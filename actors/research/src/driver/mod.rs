//! The Deep Research driver (SPEC S9), one for every host, over the
//! kernel's [`ChildRuns`]: it starts and waits on runs without naming the
//! supervisor, and the assembly wires it to the supervisor's `Runtime`.
//! It owns:
//! - the start turn (S9.3): a `research` run whose only tool is
//!   `start_deep_research` and which ends with that call, the model's own
//!   or, when the model answered without it, the runtime's deterministic
//!   call through the same tool path ([`ResearchDriver::start`]);
//! - the phases after it, each driven from the stored task alone
//!   ([`ResearchDriver::advance`], in `phases`): planning and synthesis
//!   are child runs of the start run, labelled `research`, under the same
//!   reentrant lease (S3.2), named after their task so that a phase taken
//!   up again finds its run instead of starting a second; execution reads
//!   the frozen snapshot through the host's read tool with the
//!   capabilities minted at approval ([`crate::execute`]);
//! - the person's decisions: the plan request shown once
//!   ([`ResearchDriver::present_plan`]), approve / edit / reject
//!   ([`ResearchDriver::decide_plan`]), Resume ([`ResearchDriver::resume`])
//!   and stop ([`ResearchDriver::stop`]);
//! - what a reload does ([`ResearchDriver::interrupt`]): tasks mid-phase
//!   become `interrupted` and nothing starts until Resume (S9.6).
//!
//! Planning has no tools but bounded look-ups: `web_search` (when a search
//! backend is configured) and the read tool, at most
//! [`MAX_PLANNING_SEARCHES`](crate::task::MAX_PLANNING_SEARCHES) +
//! [`MAX_PLANNING_READS`](crate::task::MAX_PLANNING_READS) calls, enforced
//! as the planning run's tool-call budget, which the supervisor checks
//! before each dispatch (S9.4). Synthesis has none (S9.6). Neither shares
//! the Agent system prompt, Skills, Memory, JavaScript, workspace writes or
//! discovery (S9.1): a
//! [`ChildRunSpec`](agent_kernel::child_runs::ChildRunSpec) names only
//! their tools and cap.
//!
//! Each action that writes takes the session's [`Fence`] (the host's open
//! workspace tenure); each that may publish the report takes the
//! [`ArtifactSink`] it goes to.

mod phases;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agent_kernel::child_runs::{ChildRuns, TurnEnding};
use agent_kernel::host::{Entropy, Fence};
use agent_kernel::run::RunStatus;
use agent_kernel::tool::{CancelHandle, CancelToken};
use agent_kernel::{RequestId, RunId, SessionId};
use serde_json::Value;

use crate::ResearchPlan;
use crate::execute::{ExecutionError, ReadChannel};
use crate::report::ArtifactSink;
use crate::start::{START_DEEP_RESEARCH, fallback_arguments};
use crate::store::{PlanDecision, ResearchError, ResearchStore};
use crate::task::{Event, Gap, Phase, ResearchTask, TaskId};
use crate::view::{ResearchView, read_research};

/// The label of every run that belongs to a research task (S9.2): they are
/// `research` runs, never a chat generation's agent run.
pub const RESEARCH_LABEL: &str = "research";

/// At most this many sources are read in one execution step (the plan's own
/// bound is [`crate::plan::MAX_SOURCES`]).
pub const MAX_EXECUTION_READS: usize = crate::plan::MAX_SOURCES;

/// Why a source was not read on a host without a read tool.
pub const NO_READER: &str =
    "this host offers no fetch_url (a page needs the gateway), so the source was not read";

/// How many phase runs a task may make of one phase (each Resume after a
/// failed one is another attempt).
const MAX_ATTEMPTS: u32 = 20;

/// A Deep Research action could not be taken. `E` is the runtime's error
/// ([`ChildRuns::Error`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError<E: std::error::Error + 'static> {
    #[error(transparent)]
    Research(#[from] ResearchError),
    /// The runtime refused a command or query.
    #[error(transparent)]
    Run(E),
    /// The start turn ended without a task (its call failed, or the run
    /// was stopped or failed).
    #[error("the start turn {run} ended without a research task: {why}")]
    NotStarted { run: RunId, why: String },
    #[error(transparent)]
    Execution(#[from] ExecutionError),
    /// The host has no open workspace for the session (it reports this
    /// before asking the driver).
    #[error("the session {0} is not open here; open it first")]
    SessionClosed(SessionId),
}

/// What the driver's actions give, with the runtime `R`'s error.
pub type DriverResult<T, R> = Result<T, DriverError<<R as ChildRuns>::Error>>;

/// The start turn's outcome: its run (the chat message's generation) and
/// the task, the only thing the chat message keeps (S9.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResearchStart {
    pub run: RunId,
    pub task: TaskId,
}

/// What the driver reads and reads through, besides the runs.
#[derive(Clone)]
pub struct DriverParts {
    /// The task store (the same storage as the runs).
    pub store: ResearchStore,
    /// The host's read tool for execution, or `None`: every source is then
    /// a gap ([`NO_READER`]).
    pub reader: Option<ReadChannel>,
    /// The name of the read tool planning may call (`fetch_url`).
    pub read_tool: String,
    /// Whether a `web_search` backend is configured for planning.
    pub search_configured: bool,
    /// Where execution's capability keys come from.
    pub entropy: Arc<dyn Entropy>,
}

/// The driver: the runs `R` and what it reads through.
pub struct ResearchDriver<R> {
    runs: R,
    parts: DriverParts,
    /// The stop signal of each task being advanced here, by task: a Stop
    /// fires it and the advance turns it into the `stopped` gap wherever
    /// the task is (a planning run stopped, reads let go, synthesis run
    /// stopped).
    active: Arc<Mutex<HashMap<TaskId, CancelHandle>>>,
}

impl<R> std::fmt::Debug for ResearchDriver<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResearchDriver")
            .field("search_configured", &self.parts.search_configured)
            .field("reader", &self.parts.reader.is_some())
            .finish_non_exhaustive()
    }
}

/// A task being advanced here: its stop signal, registered for the
/// advance and removed when it ends.
struct Active<'a> {
    tasks: &'a Mutex<HashMap<TaskId, CancelHandle>>,
    task: TaskId,
    signal: CancelHandle,
}

impl<'a> Active<'a> {
    fn register(tasks: &'a Mutex<HashMap<TaskId, CancelHandle>>, task: &TaskId) -> Active<'a> {
        let signal = CancelHandle::new();
        if let Ok(mut tasks) = tasks.lock() {
            tasks.insert(task.clone(), signal.clone());
        }
        Active {
            tasks,
            task: task.clone(),
            signal,
        }
    }

    fn token(&self) -> CancelToken {
        self.signal.token()
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        if let Ok(mut tasks) = self.tasks.lock() {
            tasks.remove(&self.task);
        }
    }
}

/// The text of a tool result's JSON the runtime gave as a run's output.
fn task_of_output(output: &str) -> Result<TaskId, String> {
    let value: Value = serde_json::from_str(output).map_err(|e| e.to_string())?;
    if value["ok"] != Value::Bool(true) {
        let message = value["message"].as_str().unwrap_or("the call failed");
        return Err(message.chars().take(500).collect());
    }
    let id = value["content"]["research_task"]
        .as_str()
        .ok_or("the call's result names no research task")?;
    TaskId::new(id).map_err(|e| e.to_string())
}

/// A status's stable name, as runs store it.
fn status_name(status: RunStatus) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

impl<R: ChildRuns> ResearchDriver<R> {
    pub fn new(runs: R, parts: DriverParts) -> ResearchDriver<R> {
        ResearchDriver {
            runs,
            parts,
            active: Arc::default(),
        }
    }

    /// The same driver over other runs (the executions in flight kept).
    pub fn with_runs<S: ChildRuns>(self, runs: S) -> ResearchDriver<S> {
        ResearchDriver {
            runs,
            parts: self.parts,
            active: self.active,
        }
    }

    /// The research task store.
    pub fn store(&self) -> &ResearchStore {
        &self.parts.store
    }

    /// The start turn (S9.3): a `research` run offered only
    /// `start_deep_research`, which ends with that call. When the model
    /// answers without it the runtime makes it with `prompt` as the topic.
    /// The task's session and message are the host's (the run's session
    /// and id, S9.5). Waits for the turn and returns; the host then plans
    /// with [`ResearchDriver::advance`] (the page in the background, the
    /// command line at once).
    pub async fn start(
        &self,
        session: &SessionId,
        prompt: &str,
        settings: R::Settings,
    ) -> DriverResult<ResearchStart, R> {
        let ending = TurnEnding {
            tool: START_DEEP_RESEARCH.to_owned(),
            fallback_arguments: fallback_arguments(prompt),
        };
        let run = self
            .runs
            .start_turn(session, prompt, ending, settings)
            .await
            .map_err(DriverError::Run)?;
        let settled = self
            .runs
            .wait_settled(&run)
            .await
            .map_err(DriverError::Run)?;
        let not_started = |why: String| DriverError::NotStarted {
            run: run.clone(),
            why,
        };
        if settled != RunStatus::Completed {
            return Err(not_started(format!(
                "the turn ended {}",
                status_name(settled)
            )));
        }
        let output = self
            .runs
            .output(&run)
            .await
            .map_err(DriverError::Run)?
            .unwrap_or_default();
        let task = task_of_output(&output).map_err(not_started)?;
        Ok(ResearchStart { run, task })
    }

    /// Take the task as far as it goes without the person: planning up to
    /// the plan request, or after approval execution and synthesis up to
    /// the report, published to `sink`. Returns at once for a task waiting
    /// for the person (a plan request, `interrupted`, a final phase).
    /// Never called by a reload (S9.6): only by a start, a decision or
    /// Resume.
    pub async fn advance(
        &self,
        fence: &Fence,
        task: &TaskId,
        sink: &dyn ArtifactSink,
    ) -> DriverResult<ResearchView, R> {
        let store = &self.parts.store;
        let active = Active::register(&self.active, task);
        let stop = active.token();
        loop {
            let current = store.load(&fence.session, task).await?;
            self.announce(&current);
            let step = match current.phase {
                Phase::Planning => self.plan_phase(fence, task, &stop).await?,
                Phase::Executing => self.execute_phase(fence, task, &stop).await?,
                Phase::Synthesizing => self.synthesis_phase(fence, task, sink, &stop).await?,
                _ => false,
            };
            if !step {
                return Ok(read_research(store, &fence.session, task).await?);
            }
        }
    }

    /// A start turn cut after its call made the task (a reload between the
    /// call's result and the turn's end) is left `interrupted`; the
    /// person's decision or Resume on the task ends it too: its call is
    /// replayed from the journal, never made again (S2.3).
    async fn finish_start_turn(&self, task: &ResearchTask) -> DriverResult<(), R> {
        let Ok(start) = RunId::new(task.message.as_str()) else {
            return Ok(());
        };
        match self.runs.status(&start).await {
            Ok(Some(RunStatus::Interrupted)) => {
                self.runs.resume(&start).await.map_err(DriverError::Run)?;
                self.runs
                    .wait_settled(&start)
                    .await
                    .map_err(DriverError::Run)?;
                Ok(())
            }
            Ok(_) => Ok(()),
            Err(e) => Err(DriverError::Run(e)),
        }
    }

    /// Tell subscribers where `task` is now (on its start run's stream).
    fn announce(&self, task: &ResearchTask) {
        if let Ok(run) = RunId::new(task.message.as_str()) {
            self.runs
                .announce(&run, task.id.as_str(), task.phase.name());
        }
    }

    /// The plan request if it was not shown yet, marked shown (S6.4): of
    /// two tabs or a reload, one shows it.
    pub async fn present_plan(
        &self,
        fence: &Fence,
        task: &TaskId,
    ) -> DriverResult<Option<ResearchPlan>, R> {
        Ok(self.parts.store.present_plan(fence, task).await?)
    }

    /// The person's decision on the plan request; approval (or a narrowing
    /// edit) freezes the sources and research goes on to the report.
    pub async fn decide_plan(
        &self,
        fence: &Fence,
        task: &TaskId,
        request: &RequestId,
        decision: PlanDecision,
        sink: &dyn ArtifactSink,
    ) -> DriverResult<ResearchView, R> {
        let stored = self
            .parts
            .store
            .decide_plan(fence, task, request, decision)
            .await?;
        self.finish_start_turn(&stored).await?;
        self.advance(fence, task, sink).await
    }

    /// Resume an interrupted task (the person chose Resume): the phase it
    /// left goes on.
    pub async fn resume(
        &self,
        fence: &Fence,
        task: &TaskId,
        sink: &dyn ArtifactSink,
    ) -> DriverResult<ResearchView, R> {
        let stored = self.parts.store.load(&fence.session, task).await?;
        self.finish_start_turn(&stored).await?;
        if matches!(stored.phase, Phase::Interrupted { .. }) {
            self.parts.store.apply(fence, task, Event::Resume).await?;
        }
        self.advance(fence, task, sink).await
    }

    /// The person stops the task (S9.6): no read, planning or synthesis
    /// goes on after it. A task being advanced here is signalled and its
    /// advance ends it: a planning run is stopped (the task `cancelled`),
    /// reads in flight are let go, a synthesis run is stopped, and the
    /// report is made of what was read, without the model, with the gap
    /// `stopped`. A task not advanced here is ended at once the same way:
    /// its phase runs stopped, then `cancelled` before a snapshot, else its
    /// stopped report published to `sink`. A stopped task never resumes.
    pub async fn stop(
        &self,
        fence: &Fence,
        task: &TaskId,
        sink: &dyn ArtifactSink,
    ) -> DriverResult<ResearchView, R> {
        let session = &fence.session;
        let here = self.active.lock().ok().and_then(|a| a.get(task).cloned());
        if let Some(signal) = here {
            signal.cancel();
            return Ok(read_research(&self.parts.store, session, task).await?);
        }
        let stored = self.parts.store.load(session, task).await?;
        if stored.phase.is_final() {
            return Ok(read_research(&self.parts.store, session, task).await?);
        }
        for phase in ["plan", "synthesis"] {
            for attempt in 1..=MAX_ATTEMPTS {
                let id = phases::phase_run::<R>(task, phase, attempt)?;
                match self.runs.status(&id).await {
                    Ok(Some(status)) if !status.is_final() => {
                        let _ = self.runs.stop(&id).await;
                    }
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => break,
                }
            }
        }
        let stopped = self
            .parts
            .store
            .apply(fence, task, Event::Stop { gap: Gap::Stopped })
            .await?;
        if stopped.phase == Phase::Synthesizing {
            self.publish_stopped(fence, task, sink).await?;
        }
        Ok(read_research(&self.parts.store, session, task).await?)
    }

    /// After a reload or a take-over: every task of the session mid-phase
    /// becomes `interrupted`; nothing is started (S9.6).
    pub async fn interrupt(&self, fence: &Fence) -> DriverResult<Vec<TaskId>, R> {
        Ok(self.parts.store.interrupt_active(fence).await?)
    }

    /// A task as every host shows it; reads only.
    pub async fn view(&self, session: &SessionId, task: &TaskId) -> DriverResult<ResearchView, R> {
        Ok(read_research(&self.parts.store, session, task).await?)
    }

    /// The tasks of a session, newest first.
    pub async fn tasks(&self, session: &SessionId) -> DriverResult<Vec<ResearchView>, R> {
        let store = &self.parts.store;
        let mut tasks = store.list(session).await?;
        tasks.sort_by(|a, b| b.created_at_ms.cmp(&a.created_at_ms).then(a.id.cmp(&b.id)));
        let mut views = Vec::with_capacity(tasks.len());
        for task in tasks {
            views.push(read_research(store, session, &task.id).await?);
        }
        Ok(views)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_turns_output_names_its_task_or_says_why_not() {
        let ok = r#"{"ok":true,"content":{"research_task":"research-abc","phase":"planning"}}"#;
        assert_eq!(task_of_output(ok).unwrap().as_str(), "research-abc");
        let failed = r#"{"ok":false,"error":"invalid_topic","message":"the topic is empty"}"#;
        assert_eq!(task_of_output(failed).unwrap_err(), "the topic is empty");
        assert!(task_of_output("not json").is_err());
        assert!(task_of_output(r#"{"ok":true,"content":{}}"#).is_err());
    }
}
