//! The phases after the start turn, each a step of
//! [`ResearchDriver::advance`](super::ResearchDriver::advance) driven from
//! the stored task alone: planning and synthesis as child runs named after
//! their task (`<task>-<phase>-<attempt>`), execution as reads through the
//! host's read tool with the capabilities minted from the approved plan,
//! and parking a phase that cannot go on now.

use agent_capabilities::Authority;
use agent_kernel::RequestId;
use agent_kernel::child_runs::{ChildRunSpec, ChildRuns};
use agent_kernel::host::{Fence, random_key};
use agent_kernel::run::RunStatus;
use agent_kernel::tool::CancelToken;
use agent_kernel::{RunId, SessionId};

use super::{
    DriverError, DriverResult, MAX_ATTEMPTS, MAX_EXECUTION_READS, NO_READER, ResearchDriver,
    status_name,
};
use crate::ResearchPlan;
use crate::answers::{
    AnswerError, parse_draft_answer, parse_plan_answer, planning_prompt, synthesis_prompt,
    synthesis_sources,
};
use crate::execute::{Execution, ExecutionError, Outcome};
use crate::report::{
    ArtifactSink, PublishError, ReportDraft, Statement, publish_draft, publish_report,
};
use crate::scope::{ExecutionScope, ReadTool};
use crate::search::WEB_SEARCH;
use crate::store::ResearchError;
use crate::task::{Event, Gap, MAX_PLANNING_READS, MAX_PLANNING_SEARCHES, TaskId, TransitionError};

/// Why a phase did not finish: its run waits for the person.
const WAITS_FOR_PERSON: &str = "the phase run waits for the person";

/// Why a phase did not finish: the person stopped the task.
const STOPPED: &str = "the task was stopped";

/// The phase runs of a task, named after it: `<task>-<phase>-<attempt>`.
pub(super) fn phase_run<R: ChildRuns>(
    task: &TaskId,
    phase: &str,
    attempt: u32,
) -> DriverResult<RunId, R> {
    RunId::new(format!("{task}-{phase}-{attempt}")).map_err(|e| DriverError::Run(R::Error::from(e)))
}

/// A phase's child run: its name, prompt, tools and tool-call cap.
struct PhaseRun<'a> {
    phase: &'a str,
    prompt: &'a str,
    tools: Vec<String>,
    max_tool_calls: u32,
}

impl<R: ChildRuns> ResearchDriver<R> {
    /// The start run of a task: the parent of its phase runs.
    async fn start_run(&self, session: &SessionId, task: &TaskId) -> DriverResult<RunId, R> {
        let stored = self.parts.store.load(session, task).await?;
        RunId::new(stored.message.as_str()).map_err(|e| DriverError::NotStarted {
            run: RunId::new("research").unwrap_or_else(|_| unreachable!("a valid id")),
            why: e.to_string(),
        })
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
        stop: &CancelToken,
        accept: impl Fn(&str) -> Result<T, String>,
    ) -> DriverResult<Result<T, String>, R> {
        let PhaseRun {
            phase,
            prompt,
            tools,
            max_tool_calls,
        } = run;
        let start = self.start_run(session, task).await?;
        let runs = &self.runs;
        let mut attempt = 1;
        let run = loop {
            let id = phase_run::<R>(task, phase, attempt)?;
            match runs.status(&id).await.map_err(DriverError::Run)? {
                None => {
                    let spec = ChildRunSpec {
                        tools,
                        max_tool_calls,
                    };
                    break runs
                        .start_child(id, &start, prompt, spec)
                        .await
                        .map_err(DriverError::Run)?;
                }
                // A finished attempt whose answer is usable is the answer;
                // one whose answer was not (a malformed plan or draft) is
                // followed by a new attempt.
                Some(RunStatus::Completed) => {
                    let output = runs
                        .output(&id)
                        .await
                        .map_err(DriverError::Run)?
                        .unwrap_or_default();
                    if let Ok(value) = accept(&output) {
                        return Ok(Ok(value));
                    }
                    if attempt >= MAX_ATTEMPTS {
                        return Ok(Err(format!("{phase} failed {MAX_ATTEMPTS} times")));
                    }
                    attempt += 1;
                }
                Some(RunStatus::Failed | RunStatus::Cancelled) => {
                    if attempt >= MAX_ATTEMPTS {
                        return Ok(Err(format!("{phase} failed {MAX_ATTEMPTS} times")));
                    }
                    attempt += 1;
                }
                Some(status) => {
                    if status == RunStatus::Interrupted {
                        runs.resume(&id).await.map_err(DriverError::Run)?;
                    }
                    break id;
                }
            }
        };
        // A stop ends the phase run at once (S9.6): the run is stopped and
        // its answer, if one comes, is not used.
        let settled = {
            let waiting = runs.wait_settled(&run);
            let stopped = stop.cancelled();
            futures::pin_mut!(waiting, stopped);
            match futures::future::select(waiting, stopped).await {
                futures::future::Either::Left((settled, _)) => settled.map_err(DriverError::Run)?,
                futures::future::Either::Right(((), _)) => {
                    let _ = runs.stop(&run).await;
                    return Ok(Err(STOPPED.to_owned()));
                }
            }
        };
        if stop.is_cancelled() {
            return Ok(Err(STOPPED.to_owned()));
        }
        match settled {
            RunStatus::Completed => Ok(accept(
                &runs
                    .output(&run)
                    .await
                    .map_err(DriverError::Run)?
                    .unwrap_or_default(),
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
                status_name(other)
            ))),
        }
    }

    /// Planning: the planning run's answer becomes the plan request.
    /// Returns true when the task moved on.
    pub(super) async fn plan_phase(
        &self,
        fence: &Fence,
        task: &TaskId,
        stop: &CancelToken,
    ) -> DriverResult<bool, R> {
        let store = &self.parts.store;
        let stored = store.load(&fence.session, task).await?;
        let topic = store.topic(&stored).await?;
        let urls = store.seed_urls(&stored).await?;
        let search = self.parts.search_configured;
        let prompt = planning_prompt(&topic, &urls, search);
        let tools = if search {
            vec![WEB_SEARCH.to_owned(), self.parts.read_tool.clone()]
        } else {
            Vec::new()
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
                stop,
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
            Err(why) if why == STOPPED => {
                store
                    .apply(fence, task, Event::Stop { gap: Gap::Stopped })
                    .await?;
                Ok(false)
            }
            Err(why) => {
                self.park(fence, task, &why).await?;
                Ok(false)
            }
        }
    }

    /// A phase that cannot go on now (its run interrupted or failed): the
    /// task is interrupted and waits for Resume, with `why` kept on it for
    /// the person to see (an empty `why`, an interrupted run, keeps none).
    /// A phase run waiting for the person leaves the task in its phase.
    async fn park(&self, fence: &Fence, task: &TaskId, why: &str) -> DriverResult<(), R> {
        if why == WAITS_FOR_PERSON {
            return Ok(());
        }
        let event = if why.is_empty() {
            Event::Interrupt
        } else {
            tracing::warn!(%task, why, "research phase did not finish");
            Event::Park {
                reason: why.to_owned(),
            }
        };
        self.parts.store.apply(fence, task, event).await?;
        Ok(())
    }

    /// The report of a stopped task, made without the model (S9.6): the
    /// sources read before the stop listed as unverified material (nothing
    /// was synthesised from them), the task's gaps with `stopped`.
    pub(super) async fn publish_stopped(
        &self,
        fence: &Fence,
        task: &TaskId,
        sink: &dyn ArtifactSink,
    ) -> DriverResult<(), R> {
        let store = &self.parts.store;
        let stored = store.load(&fence.session, task).await?;
        let topic = store.topic(&stored).await?;
        let title: String = format!(
            "Stopped: {}",
            topic.split_whitespace().collect::<Vec<_>>().join(" ")
        )
        .chars()
        .take(crate::report::MAX_TITLE_CHARS)
        .collect();
        let unverified = stored
            .snapshot
            .iter()
            .flat_map(|s| &s.sources)
            .filter_map(|s| {
                let read = s.read.as_ref()?;
                Some(Statement {
                    text: format!(
                        "read before the stop, not synthesised: {} ({}, sha256 {})",
                        s.url.chars().take(2_000).collect::<String>(),
                        read.evidence,
                        read.content.hash
                    ),
                })
            })
            .take(crate::report::MAX_ITEMS)
            .collect();
        let draft = ReportDraft {
            title,
            unverified,
            ..ReportDraft::default()
        };
        match publish_report(store, sink, fence, task, draft).await {
            Ok(_) => Ok(()),
            Err(PublishError::Research(e)) => Err(e.into()),
            Err(PublishError::Report(e)) => {
                self.park(fence, task, &e.to_string()).await?;
                Ok(())
            }
        }
    }

    /// Execution: read the frozen snapshot through the read tool with the
    /// capabilities minted from the approved plan.
    pub(super) async fn execute_phase(
        &self,
        fence: &Fence,
        task: &TaskId,
        stop: &CancelToken,
    ) -> DriverResult<bool, R> {
        let store = &self.parts.store;
        let stored = store.load(&fence.session, task).await?;
        let Some(reader) = self.parts.reader.clone() else {
            // A host without a read tool (a page without a gateway) reads
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
                .ok_or(ResearchError::Transition(TransitionError::Illegal {
                    phase: "executing",
                    event: "execute",
                }))?;
        let start = self.start_run(&fence.session, task).await?;
        let mode = self.runs.approval(&start).await.map_err(DriverError::Run)?;
        let run = phase_run::<R>(task, "execute", 1)?;
        let authority = Authority::new(run.to_string(), random_key(&*self.parts.entropy));
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
            cancel: stop.clone(),
        }
        .run()
        .await?;
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

    /// Synthesis after a stop: the `stopped` gap recorded (once) and the
    /// stopped report published. Returns true: the task moved on.
    async fn stop_synthesis(
        &self,
        fence: &Fence,
        task: &TaskId,
        sink: &dyn ArtifactSink,
    ) -> DriverResult<bool, R> {
        self.parts
            .store
            .apply(fence, task, Event::Stop { gap: Gap::Stopped })
            .await?;
        self.publish_stopped(fence, task, sink).await?;
        Ok(true)
    }

    /// Synthesis: a run without tools over the read sources; its draft
    /// becomes the report Artifact (S9.6), published to `sink`.
    pub(super) async fn synthesis_phase(
        &self,
        fence: &Fence,
        task: &TaskId,
        sink: &dyn ArtifactSink,
        stop: &CancelToken,
    ) -> DriverResult<bool, R> {
        let store = &self.parts.store;
        let stored = store.load(&fence.session, task).await?;
        // A stopped task is not synthesised: its report is what was read.
        if stop.is_cancelled() || stored.gaps.contains(&Gap::Stopped) {
            return self.stop_synthesis(fence, task, sink).await;
        }
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
                    tools: Vec::new(),
                    max_tool_calls: 0,
                },
                stop,
                |text| parse_draft_answer(text).map_err(|e: AnswerError| e.to_string()),
            )
            .await?;
        let draft = match draft {
            Ok(draft) => draft,
            Err(why) if why == STOPPED => return self.stop_synthesis(fence, task, sink).await,
            Err(why) => {
                self.park(fence, task, &why).await?;
                return Ok(false);
            }
        };
        match publish_draft(store, sink, fence, task, draft).await {
            Ok(_) => Ok(true),
            Err(PublishError::Report(e)) => {
                self.park(fence, task, &e.to_string()).await?;
                Ok(false)
            }
            Err(e) => Err(DriverError::NotStarted {
                run: phase_run::<R>(task, "synthesis", 1)?,
                why: e.to_string(),
            }),
        }
    }
}
