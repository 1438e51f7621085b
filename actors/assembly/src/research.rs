//! Deep Research wired into the runtime (SPEC S9), one driver for every
//! host. It owns:
//! - the start turn (S9.3): a `research` run whose only tool is
//!   `start_deep_research` and which ends with that call, the model's own
//!   or, when the model answered without it, the runtime's deterministic
//!   call through the same tool path ([`Assembly::start_research`]);
//! - the phases after it, each driven from the stored task alone
//!   ([`Assembly::advance_research`]): planning and synthesis are child runs
//!   of the start run, labelled `research`, under the same reentrant lease
//!   (S3.2), named after their task so that a phase taken up again finds
//!   its run instead of starting a second; execution reads the frozen
//!   snapshot through `fetch_url`'s actor with the capabilities minted at
//!   approval ([`agent_research::execute`]);
//! - the person's decisions: the plan request shown once
//!   ([`Assembly::present_plan`]), approve / edit / reject
//!   ([`Assembly::decide_plan`]), Resume ([`Assembly::resume_research`])
//!   and stop ([`Assembly::stop_research`]);
//! - what a reload does ([`Assembly::interrupt_research`]): tasks mid-phase
//!   become `interrupted` and nothing starts until Resume (S9.6).
//!
//! Planning has no tools but bounded look-ups: `web_search` (when a search
//! backend is configured) and `fetch_url`, at most
//! [`MAX_PLANNING_SEARCHES`] + [`MAX_PLANNING_READS`] calls, enforced as the
//! planning run's tool-call budget, which the supervisor checks before each
//! dispatch (S9.4). Synthesis has none (S9.6). Neither shares the Agent
//! system prompt, Skills, Memory, JavaScript, workspace writes or discovery
//! (S9.1): their configuration is built here from the model settings of
//! the start turn only.

use agent_capabilities::{ApprovalMode, Authority};
use agent_kernel::RequestId;
use agent_kernel::host::{Fence, random_key};
use agent_kernel::run::{RunMode, RunStatus};
use agent_kernel::tool::CancelHandle;
use agent_kernel::{RunId, SessionId};
use agent_research::answers::{
    AnswerError, parse_draft_answer, parse_plan_answer, planning_prompt, synthesis_prompt,
    synthesis_sources,
};
use agent_research::execute::{Execution, ExecutionError, Outcome, ReadChannel};
use agent_research::report::{ArtifactSink, PublishError, publish_report};
use agent_research::scope::{ExecutionScope, ReadTool};
use agent_research::search::WEB_SEARCH;
use agent_research::start::{START_DEEP_RESEARCH, fallback_arguments};
use agent_research::task::{MAX_PLANNING_READS, MAX_PLANNING_SEARCHES};
use agent_research::view::{ResearchView, read_research};
use agent_research::{
    Event, Gap, Phase, PlanDecision, ResearchError, ResearchPlan, ResearchStore, TaskId,
};
use agent_supervisor::{EndingCall, ModelSettings, RunConfig, RunError};
use agent_workspace::{Artifacts, Source};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::Assembly;

/// The label of every run that belongs to a research task (S9.2): they are
/// `research` runs, never a chat generation's agent run.
pub const RESEARCH_LABEL: &str = "research";

/// At most this many sources are read in one execution step (the plan's own
/// bound is [`agent_research::plan::MAX_SOURCES`]).
pub const MAX_EXECUTION_READS: usize = agent_research::plan::MAX_SOURCES;

/// Why a source was not read on a host without `fetch_url`.
pub const NO_READER: &str =
    "this host offers no fetch_url (a page needs the gateway), so the source was not read";

/// A Deep Research action could not be taken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResearchDeskError {
    #[error(transparent)]
    Research(#[from] ResearchError),
    #[error(transparent)]
    Run(#[from] RunError),
    /// The start turn ended without a task (its call failed, or the run
    /// was stopped or failed).
    #[error("the start turn {run} ended without a research task: {why}")]
    NotStarted { run: RunId, why: String },
    #[error(transparent)]
    Execution(#[from] ExecutionError),
    #[error("the session {0} is not open here; open it first")]
    SessionClosed(SessionId),
}

/// The start turn's outcome: its run (the chat message's generation) and
/// the task, the only thing the chat message keeps (S9.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResearchStart {
    pub run: RunId,
    pub task: TaskId,
}

/// Research that the assembly wires: the task store, the reader, and
/// whether planning can search.
#[derive(Clone)]
pub(crate) struct ResearchWiring {
    pub(crate) store: ResearchStore,
    pub(crate) reader: Option<ReadChannel>,
    pub(crate) search_configured: bool,
    /// The cancellation of each execution in flight here, by task.
    pub(crate) executing: Arc<Mutex<HashMap<TaskId, CancelHandle>>>,
}

/// The phase runs of a task, named after it: `<task>-<phase>-<attempt>`.
fn phase_run(task: &TaskId, phase: &str, attempt: u32) -> Result<RunId, RunError> {
    RunId::new(format!("{task}-{phase}-{attempt}")).map_err(|e| RunError::Inconsistent {
        run: RunId::new("research").unwrap_or_else(|_| unreachable!("a valid id")),
        detail: e.to_string(),
    })
}

/// A phase's child run: its name, prompt, tools and tool-call cap.
struct PhaseRun<'a> {
    phase: &'a str,
    prompt: &'a str,
    tools: &'a [&'a str],
    max_tool_calls: u32,
}

/// Why a phase did not finish: its run waits for the person.
const WAITS_FOR_PERSON: &str = "the phase run waits for the person";

/// How many phase runs a task may make of one phase (each Resume after a
/// failed one is another attempt).
const MAX_ATTEMPTS: u32 = 20;

/// The research configuration of a phase run, from the start turn's model
/// settings alone (S9.1: no Agent prompt, no Skill, no allowlist of the
/// Agent's tools).
fn phase_config(start: &RunConfig, tools: &[&str], max_tool_calls: u32) -> RunConfig {
    let mut config = RunConfig {
        mode: RunMode::Research,
        approval: start.approval,
        budget: start.budget,
        allowlist: Some(tools.iter().map(|t| (*t).to_owned()).collect()),
        model: ModelSettings {
            system_prompt: None,
            system_extension: None,
            ..start.model.clone()
        },
        ..RunConfig::default()
    };
    // At least 1: a budget of no calls is not a valid budget; a run with
    // no tools makes none anyway.
    config.budget.max_tool_calls = max_tool_calls.min(start.budget.max_tool_calls).max(1);
    config
}

/// The text of a tool result's JSON the supervisor gave as a run's output.
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

impl Assembly {
    /// The research task store (the same storage as the runs).
    pub fn research_store(&self) -> &ResearchStore {
        &self.research.store
    }

    fn fence_of(&self, session: &SessionId) -> Result<Fence, ResearchDeskError> {
        self.workspaces
            .get(session)
            .map(|open| open.fence.clone())
            .ok_or_else(|| ResearchDeskError::SessionClosed(session.clone()))
    }

    /// The start turn (S9.3): a `research` run offered only
    /// `start_deep_research`, which ends with that call. When the model
    /// answers without it the runtime makes it with `prompt` as the topic.
    /// The task's session and message are the host's (the run's session
    /// and id, S9.5). Waits for the turn and returns; the host then plans
    /// with [`Assembly::advance_research`] (the page in the background, the
    /// command line at once).
    pub async fn start_research(
        &self,
        session: &SessionId,
        prompt: &str,
        config: RunConfig,
    ) -> Result<ResearchStart, ResearchDeskError> {
        let start = RunConfig {
            mode: RunMode::Research,
            allowlist: None,
            skill: None,
            history: None,
            ending_call: Some(EndingCall {
                tool: START_DEEP_RESEARCH.to_owned(),
                fallback_arguments: fallback_arguments(prompt),
            }),
            model: ModelSettings {
                system_prompt: None,
                system_extension: None,
                ..config.model
            },
            ..config
        };
        let run = self.runtime.start(session, prompt, start).await?;
        let settled = self.runtime.wait_settled(&run).await?;
        let not_started = |why: String| ResearchDeskError::NotStarted {
            run: run.clone(),
            why,
        };
        if settled.status != RunStatus::Completed {
            return Err(not_started(format!(
                "the turn ended {}",
                serde_json::to_value(settled.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            )));
        }
        let output = self.runtime.output(&run).await?.unwrap_or_default();
        let task = task_of_output(&output).map_err(not_started)?;
        Ok(ResearchStart { run, task })
    }

    /// Take the task as far as it goes without the person: planning up to
    /// the plan request, or after approval execution and synthesis up to
    /// the report. Returns at once for a task waiting for the person
    /// (a plan request, `interrupted`, a final phase). Never called by a
    /// reload (S9.6): only by a start, a decision or Resume.
    pub async fn advance_research(
        &self,
        session: &SessionId,
        task: &TaskId,
    ) -> Result<ResearchView, ResearchDeskError> {
        let fence = self.fence_of(session)?;
        let store = &self.research.store;
        loop {
            let current = store.load(session, task).await?;
            self.announce(&current);
            let step = match current.phase {
                Phase::Planning => self.plan_phase(&fence, task).await?,
                Phase::Executing => self.execute_phase(&fence, task).await?,
                Phase::Synthesizing => self.synthesis_phase(&fence, task).await?,
                _ => false,
            };
            if !step {
                return Ok(read_research(store, session, task).await?);
            }
        }
    }

    /// A start turn cut after its call made the task (a reload between the
    /// call's result and the turn's end) is left `interrupted`; the
    /// person's decision or Resume on the task ends it too: its call is
    /// replayed from the journal, never made again (S2.3).
    async fn finish_start_turn(
        &self,
        task: &agent_research::ResearchTask,
    ) -> Result<(), ResearchDeskError> {
        let Ok(start) = RunId::new(task.message.as_str()) else {
            return Ok(());
        };
        match self.runtime.run(&start).await {
            Ok(run) if run.status == RunStatus::Interrupted => {
                self.runtime.resume(&start).await?;
                self.runtime.wait_settled(&start).await?;
                Ok(())
            }
            Ok(_) | Err(RunError::NotFound(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Tell subscribers where `task` is now (`RunEvent::Research`).
    fn announce(&self, task: &agent_research::ResearchTask) {
        if let Ok(run) = RunId::new(task.message.as_str()) {
            self.runtime.emit(agent_supervisor::RunEvent::Research {
                run,
                task: task.id.to_string(),
                phase: task.phase.name().to_owned(),
            });
        }
    }

    /// The start run of a task: the parent of its phase runs.
    async fn start_config(
        &self,
        session: &SessionId,
        task: &TaskId,
    ) -> Result<(RunId, RunConfig), ResearchDeskError> {
        let stored = self.research.store.load(session, task).await?;
        let start =
            RunId::new(stored.message.as_str()).map_err(|e| ResearchDeskError::NotStarted {
                run: RunId::new("research").unwrap_or_else(|_| unreachable!("a valid id")),
                why: e.to_string(),
            })?;
        let config = self.runtime.config(&start).await?;
        Ok((start, config))
    }

    /// Run the phase's child run to its end and read its answer with
    /// `accept`: the newest attempt that exists, resumed when interrupted,
    /// or a new attempt after a failed one or one whose answer `accept`
    /// refused. `Err(why)` when the phase cannot go on now (its run
    /// interrupted, waiting for the person, or its answer refused): the
    /// task then waits for Resume.
    async fn phase_answer<T>(
        &self,
        session: &SessionId,
        task: &TaskId,
        run: PhaseRun<'_>,
        accept: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Result<T, String>, ResearchDeskError> {
        let PhaseRun {
            phase,
            prompt,
            tools,
            max_tool_calls,
        } = run;
        let (start, start_config) = self.start_config(session, task).await?;
        let mut attempt = 1;
        let run = loop {
            let id = phase_run(task, phase, attempt)?;
            match self.runtime.run(&id).await {
                Err(RunError::NotFound(_)) => {
                    let config = phase_config(&start_config, tools, max_tool_calls);
                    match self
                        .runtime
                        .start_child_as(id.clone(), &start, prompt, config)
                        .await
                    {
                        Ok(run) | Err(RunError::AlreadyExists(run)) => break run,
                        Err(e) => return Err(e.into()),
                    }
                }
                Err(e) => return Err(e.into()),
                // A finished attempt whose answer is usable is the answer;
                // one whose answer was not (a malformed plan or draft) is
                // followed by a new attempt.
                Ok(run) if run.status == RunStatus::Completed => {
                    let output = self.runtime.output(&id).await?.unwrap_or_default();
                    if let Ok(value) = accept(&output) {
                        return Ok(Ok(value));
                    }
                    if attempt >= MAX_ATTEMPTS {
                        return Ok(Err(format!("{phase} failed {MAX_ATTEMPTS} times")));
                    }
                    attempt += 1;
                }
                Ok(run)
                    if run.status == RunStatus::Failed || run.status == RunStatus::Cancelled =>
                {
                    if attempt >= MAX_ATTEMPTS {
                        return Ok(Err(format!("{phase} failed {MAX_ATTEMPTS} times")));
                    }
                    attempt += 1;
                }
                Ok(run) => {
                    if run.status == RunStatus::Interrupted {
                        self.runtime.resume(&id).await?;
                    }
                    break id;
                }
            }
        };
        let settled = self.runtime.wait_settled(&run).await?;
        match settled.status {
            RunStatus::Completed => Ok(accept(
                &self.runtime.output(&run).await?.unwrap_or_default(),
            )),
            RunStatus::Interrupted => Ok(Err(String::new())),
            // The phase run waits for the person (an approval of a planning
            // read in strict mode): the task stays in its phase; once they
            // answer, the next step (Resume) takes the answer up.
            RunStatus::AwaitingApproval | RunStatus::AwaitingInput => {
                Ok(Err(WAITS_FOR_PERSON.to_owned()))
            }
            other => Ok(Err(format!(
                "the {phase} run {run} ended {}",
                serde_json::to_value(other)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            ))),
        }
    }

    /// Planning: the planning run's answer becomes the plan request.
    /// Returns true when the task moved on.
    async fn plan_phase(&self, fence: &Fence, task: &TaskId) -> Result<bool, ResearchDeskError> {
        let store = &self.research.store;
        let stored = store.load(&fence.session, task).await?;
        let topic = store.topic(&stored).await?;
        let urls = store.seed_urls(&stored).await?;
        let search = self.research.search_configured;
        let prompt = planning_prompt(&topic, &urls, search);
        let tools: &[&str] = if search {
            &[WEB_SEARCH, agent_fetch::FETCH_URL]
        } else {
            &[]
        };
        let max = MAX_PLANNING_SEARCHES + MAX_PLANNING_READS;
        let plan = self
            .phase_answer(
                &fence.session,
                task,
                PhaseRun {
                    phase: "plan",
                    prompt: &prompt,
                    tools,
                    max_tool_calls: max,
                },
                |text| parse_plan_answer(text, search).map_err(|e| e.to_string()),
            )
            .await?;
        match plan {
            Ok(plan) => {
                // Invariant: `plan-` and a task id is a valid request id.
                let request = RequestId::new(format!("plan-{task}"))
                    .unwrap_or_else(|_| unreachable!("plan- and a task id is a valid id"));
                store.propose_plan(fence, task, &plan, request).await?;
                Ok(true)
            }
            Err(why) => {
                self.park(fence, task, &why).await?;
                Ok(false)
            }
        }
    }

    /// A phase that cannot go on now (its run interrupted or failed): the
    /// task is interrupted and waits for Resume. A phase run waiting for
    /// the person leaves the task in its phase.
    async fn park(&self, fence: &Fence, task: &TaskId, why: &str) -> Result<(), ResearchDeskError> {
        if why == WAITS_FOR_PERSON {
            return Ok(());
        }
        if !why.is_empty() {
            tracing::warn!(%task, why, "research phase did not finish");
        }
        self.research
            .store
            .apply(fence, task, Event::Interrupt)
            .await?;
        Ok(())
    }

    /// Execution: read the frozen snapshot through `fetch_url` with the
    /// capabilities minted from the approved plan.
    async fn execute_phase(&self, fence: &Fence, task: &TaskId) -> Result<bool, ResearchDeskError> {
        let store = &self.research.store;
        let stored = store.load(&fence.session, task).await?;
        let Some(reader) = self.research.reader.clone() else {
            // A host without `fetch_url` (a page without a gateway) reads
            // nothing: every source is a gap, and the report says so.
            let pending: Vec<String> = stored
                .snapshot
                .iter()
                .flat_map(|s| &s.sources)
                .filter(|s| s.read.is_none() && s.failed.is_none())
                .map(|s| s.url.clone())
                .collect();
            for url in pending {
                let reason = NO_READER.to_owned();
                store
                    .apply(fence, task, Event::RecordFailure { url, reason })
                    .await?;
            }
            store.apply(fence, task, Event::FinishExecution).await?;
            return Ok(true);
        };
        let plan: ResearchPlan =
            store
                .approved_plan(&stored)
                .await?
                .ok_or(ResearchError::Transition(
                    agent_research::TransitionError::Illegal {
                        phase: "executing",
                        event: "execute",
                    },
                ))?;
        let (_, start_config) = self.start_config(&fence.session, task).await?;
        let run = phase_run(task, "execute", 1)?;
        let authority = Authority::new(run.to_string(), random_key(&*self.host.entropy));
        let fingerprint = reader
            .definition
            .fingerprint()
            .map_err(|e| ExecutionError::Definition(e.to_string()))?;
        let tool = ReadTool {
            name: reader.definition.name.clone(),
            fingerprint,
            origin: reader.definition.origin.clone(),
        };
        let expires = store.now_ms().saturating_add(24 * 3600 * 1000);
        let scope = ExecutionScope::mint(&authority, &plan, &tool, expires);
        let mode: ApprovalMode = start_config.approval;
        let cancel = CancelHandle::new();
        if let Ok(mut executing) = self.research.executing.lock() {
            executing.insert(task.clone(), cancel.clone());
        }
        let outcome = Execution {
            store,
            fence,
            task,
            run: &run,
            scope: &scope,
            verifier: &authority.verifier(),
            read: &reader,
            mode,
            max_reads: MAX_EXECUTION_READS,
            cancel: cancel.token(),
        }
        .run()
        .await;
        if let Ok(mut executing) = self.research.executing.lock() {
            executing.remove(task);
        }
        let outcome = outcome?;
        match outcome {
            Outcome::Finished => {}
            Outcome::BudgetSpent { .. } => {
                store
                    .apply(
                        fence,
                        task,
                        Event::Stop {
                            gap: Gap::BudgetExhausted {
                                dimension: "reads".into(),
                            },
                        },
                    )
                    .await?;
            }
            Outcome::Cancelled { .. } => {
                store
                    .apply(fence, task, Event::Stop { gap: Gap::Stopped })
                    .await?;
            }
        }
        Ok(true)
    }

    /// Synthesis: a run without tools over the read sources; its draft
    /// becomes the report Artifact (S9.6).
    async fn synthesis_phase(
        &self,
        fence: &Fence,
        task: &TaskId,
    ) -> Result<bool, ResearchDeskError> {
        let store = &self.research.store;
        let stored = store.load(&fence.session, task).await?;
        let Some(plan) = store.approved_plan(&stored).await? else {
            self.park(fence, task, "no approved plan is stored").await?;
            return Ok(false);
        };
        let sources = synthesis_sources(store, &stored).await?;
        let prompt = synthesis_prompt(&plan, &sources);
        let draft = self
            .phase_answer(
                &fence.session,
                task,
                PhaseRun {
                    phase: "synthesis",
                    prompt: &prompt,
                    tools: &[],
                    max_tool_calls: 0,
                },
                |text| parse_draft_answer(text).map_err(|e: AnswerError| e.to_string()),
            )
            .await?;
        let draft = match draft {
            Ok(draft) => draft,
            Err(why) => {
                self.park(fence, task, &why).await?;
                return Ok(false);
            }
        };
        let sink = SessionArtifacts {
            assembly: self,
            fence: fence.clone(),
        };
        match publish_report(store, &sink, fence, task, draft).await {
            Ok(_) => Ok(true),
            Err(PublishError::Report(e)) => {
                self.park(fence, task, &e.to_string()).await?;
                Ok(false)
            }
            Err(e) => Err(ResearchDeskError::NotStarted {
                run: phase_run(task, "synthesis", 1)?,
                why: e.to_string(),
            }),
        }
    }

    /// The plan request if it was not shown yet, marked shown (S6.4): of
    /// two tabs or a reload, one shows it.
    pub async fn present_plan(
        &self,
        session: &SessionId,
        task: &TaskId,
    ) -> Result<Option<ResearchPlan>, ResearchDeskError> {
        let fence = self.fence_of(session)?;
        Ok(self.research.store.present_plan(&fence, task).await?)
    }

    /// The person's decision on the plan request; approval (or a narrowing
    /// edit) freezes the sources and research goes on to the report.
    pub async fn decide_plan(
        &self,
        session: &SessionId,
        task: &TaskId,
        request: &RequestId,
        decision: PlanDecision,
    ) -> Result<ResearchView, ResearchDeskError> {
        let fence = self.fence_of(session)?;
        let stored = self
            .research
            .store
            .decide_plan(&fence, task, request, decision)
            .await?;
        self.finish_start_turn(&stored).await?;
        self.advance_research(session, task).await
    }

    /// Resume an interrupted task (the person chose Resume): the phase it
    /// left goes on.
    pub async fn resume_research(
        &self,
        session: &SessionId,
        task: &TaskId,
    ) -> Result<ResearchView, ResearchDeskError> {
        let fence = self.fence_of(session)?;
        let stored = self.research.store.load(session, task).await?;
        self.finish_start_turn(&stored).await?;
        if matches!(stored.phase, Phase::Interrupted { .. }) {
            self.research
                .store
                .apply(&fence, task, Event::Resume)
                .await?;
        }
        self.advance_research(session, task).await
    }

    /// The person stops the task: before a snapshot it is cancelled (its
    /// phase runs stopped); during execution the reads stop between two
    /// sources and what was read is synthesised with the gap `stopped`.
    pub async fn stop_research(
        &self,
        session: &SessionId,
        task: &TaskId,
    ) -> Result<ResearchView, ResearchDeskError> {
        let fence = self.fence_of(session)?;
        let executing = self
            .research
            .executing
            .lock()
            .ok()
            .and_then(|e| e.get(task).cloned());
        if let Some(execution) = executing {
            // Execution stops between reads and records the gap itself.
            execution.cancel();
            return Ok(read_research(&self.research.store, session, task).await?);
        }
        let stored = self.research.store.load(session, task).await?;
        for phase in ["plan", "synthesis"] {
            for attempt in 1..=MAX_ATTEMPTS {
                let id = phase_run(task, phase, attempt)?;
                match self.runtime.run(&id).await {
                    Ok(run) if !run.status.is_final() => {
                        let _ = self.runtime.stop(&id).await;
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        }
        if !stored.phase.is_final() && stored.phase != Phase::Synthesizing {
            self.research
                .store
                .apply(&fence, task, Event::Stop { gap: Gap::Stopped })
                .await?;
        }
        Ok(read_research(&self.research.store, session, task).await?)
    }

    /// After a reload or a take-over: every task of the session mid-phase
    /// becomes `interrupted`; nothing is started (S9.6).
    pub async fn interrupt_research(
        &self,
        session: &SessionId,
    ) -> Result<Vec<TaskId>, ResearchDeskError> {
        let fence = self.fence_of(session)?;
        Ok(self.research.store.interrupt_active(&fence).await?)
    }

    /// A task as every host shows it; reads only.
    pub async fn research_view(
        &self,
        session: &SessionId,
        task: &TaskId,
    ) -> Result<ResearchView, ResearchDeskError> {
        Ok(read_research(&self.research.store, session, task).await?)
    }

    /// The tasks of a session, newest first.
    pub async fn research_tasks(
        &self,
        session: &SessionId,
    ) -> Result<Vec<ResearchView>, ResearchDeskError> {
        let mut tasks = self.research.store.list(session).await?;
        tasks.sort_by(|a, b| b.created_at_ms.cmp(&a.created_at_ms).then(a.id.cmp(&b.id)));
        let mut views = Vec::with_capacity(tasks.len());
        for task in tasks {
            views.push(read_research(&self.research.store, session, &task.id).await?);
        }
        Ok(views)
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

    #[test]
    fn the_start_turns_output_names_its_task_or_says_why_not() {
        let ok = r#"{"ok":true,"content":{"research_task":"research-abc","phase":"planning"}}"#;
        assert_eq!(task_of_output(ok).unwrap().as_str(), "research-abc");
        let failed = r#"{"ok":false,"error":"invalid_topic","message":"the topic is empty"}"#;
        assert_eq!(task_of_output(failed).unwrap_err(), "the topic is empty");
        assert!(task_of_output("not json").is_err());
        assert!(task_of_output(r#"{"ok":true,"content":{}}"#).is_err());
    }

    #[test]
    fn phase_runs_share_none_of_the_agents_configuration() {
        let mut start = RunConfig::default();
        start.model.system_prompt = Some("You are the agent.".into());
        start.model.system_extension = Some("Use JavaScript.".into());
        start.approval = ApprovalMode::Strict;
        let plan = phase_config(&start, &[WEB_SEARCH], 8);
        assert_eq!(plan.mode, RunMode::Research);
        assert_eq!(plan.system_prompt(), None);
        assert_eq!(plan.skill, None);
        assert_eq!(plan.approval, ApprovalMode::Strict);
        assert_eq!(plan.budget.max_tool_calls, 8);
        assert!(plan.allows(WEB_SEARCH));
        assert!(!plan.allows("run_javascript"));
        let synthesis = phase_config(&start, &[], 0);
        assert_eq!(synthesis.allowed_tools(), Some(Default::default()));
    }
}
