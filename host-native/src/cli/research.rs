//! Deep Research on the command line (S9): `agentrt research "topic"`,
//! `agentrt research --resume TASK`, `agentrt research --stop TASK`,
//! `agentrt plan show|approve|edit|reject TASK` and `agentrt report TASK`.
//! It also owns how a command that advances a task is stopped: SIGTERM or
//! SIGINT, or a stop requested by another process through storage, stops
//! the task (S9.6) instead of interrupting it. Every rule (the start turn, the phases,
//! the plan's narrowing-only edit, the frozen snapshot, the report's
//! evidence) is the assembly's and the research crate's; this module finds
//! the task, opens its session with the model its start turn used, calls
//! the assembly and prints what it answered.
//!
//! Exit codes as for runs: 0 when the task is final (`reported`,
//! `partial`, `rejected`, `cancelled`), 3 while it waits for the person (a
//! plan to decide), 5 when it is interrupted (it continues only with
//! `--resume`).

use std::io::Write;

use agent_host_native::app::{App, AppError, Launch};
use agent_host_native::config::Config;
use agent_kernel::{RunId, SessionId};
use agent_research::report::Report;
use agent_research::view::ResearchView;
use agent_research::{PlanDecision, ResearchPlan, ResearchTask, TaskId};
use agent_supervisor::RunConfig;

use super::args::{Cli, Source};
use super::exit::{code, usage};
use super::open::{OnSignal, launch_spec, load_config, open_app_with, open_viewer};
use super::runs::session_busy;

/// Parse a task id given on the command line.
pub(crate) fn parse_task(text: &str) -> anyhow::Result<TaskId> {
    TaskId::new(text).map_err(|e| usage(e.to_string()))
}

/// The task `id` in whichever session holds it, or a usage error.
pub(crate) async fn find(app: &App, id: &TaskId) -> anyhow::Result<ResearchTask> {
    app.assembly()
        .research_store()
        .find(id)
        .await?
        .ok_or_else(|| usage(format!("no research task {id} is stored here")))
}

/// The exit code of a task in `view`'s phase.
pub(crate) fn exit_code(view: &ResearchView) -> u8 {
    match view.phase {
        "awaiting_plan_approval" => code::WAITING,
        "interrupted" => code::INTERRUPTED,
        "reported" | "partial" | "rejected" | "cancelled" => code::OK,
        _ => code::WAITING,
    }
}

/// Print the task: JSON with `--json`, else a few lines for a person.
pub(crate) fn print_view(json: bool, view: &ResearchView) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string(view)?)?;
        return Ok(());
    }
    writeln!(out, "research task {} ({})", view.task, view.phase)?;
    writeln!(out, "  topic: {}", view.topic)?;
    if let Some(plan) = &view.plan {
        let state = if view.plan_approved {
            "approved"
        } else {
            "proposed"
        };
        writeln!(out, "  plan ({state}):")?;
        for q in &plan.questions {
            writeln!(out, "    question: {q}")?;
        }
        for q in &plan.queries {
            writeln!(out, "    query:    {q}")?;
        }
        let domains: Vec<&str> = plan.domains.iter().map(String::as_str).collect();
        writeln!(out, "    domains:  {}", domains.join(", "))?;
        if let Some(dates) = &plan.dates {
            writeln!(out, "    dates:    {} to {}", dates.from, dates.to)?;
        }
        for note in &plan.notes {
            writeln!(out, "    note:     {note}")?;
        }
    }
    for source in &view.sources {
        writeln!(out, "  source {}: {}", source.state, source.url)?;
    }
    if view.sources.is_empty()
        && let Some(plan) = &view.plan
    {
        for source in &plan.sources {
            writeln!(out, "  source (candidate): {source}")?;
        }
    }
    for gap in &view.gaps {
        writeln!(out, "  gap: {}", serde_json::to_string(gap)?)?;
    }
    if let Some(report) = &view.report {
        writeln!(
            out,
            "  report: artifact {} ({} bytes); agentrt report {}",
            report.artifact, report.size, view.task
        )?;
    }
    match view.phase {
        "awaiting_plan_approval" => writeln!(
            out,
            "  waiting for your decision: agentrt plan approve|edit FILE|reject {}",
            view.task
        )?,
        "interrupted" => {
            if let Some(why) = &view.interrupted_because {
                writeln!(out, "  interrupted because: {why}")?;
            }
            writeln!(
                out,
                "  interrupted: agentrt research --resume {}",
                view.task
            )?
        }
        _ => {}
    }
    Ok(())
}

/// What the person decided about a plan, from the command line.
pub(crate) fn decision(
    edit: Option<&std::path::Path>,
    reject: bool,
) -> anyhow::Result<PlanDecision> {
    if reject {
        return Ok(PlanDecision::Reject);
    }
    let Some(path) = edit else {
        return Ok(PlanDecision::Approve);
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read the plan {}: {e}", path.display())))?;
    let plan: ResearchPlan = serde_json::from_str(&text)
        .map_err(|e| usage(format!("the plan {} is not a plan: {e}", path.display())))?;
    Ok(PlanDecision::Edit(plan))
}

/// `agentrt report TASK`: the report Artifact, its parts apart.
pub(crate) async fn print_report(json: bool, app: &App, task: &TaskId) -> anyhow::Result<u8> {
    let stored = find(app, task).await?;
    let Some(reference) = &stored.report else {
        return Err(usage(format!(
            "research task {task} has no report yet (it is {})",
            stored.phase.name()
        )));
    };
    let bytes = app
        .native()
        .host()
        .storage
        .get_blob(&reference.artifact)
        .await?
        .ok_or_else(|| anyhow::anyhow!("the report Artifact {} is missing", reference.artifact))?;
    let report = Report::from_bytes(&bytes)?;
    let mut out = std::io::stdout().lock();
    if json {
        out.write_all(&bytes)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", report.to_markdown())?;
    }
    Ok(code::OK)
}

/// The session of a task as the command line names it.
pub(crate) fn session_of(task: &ResearchTask) -> SessionId {
    task.session.clone()
}

pub(crate) enum ResearchAction {
    Show,
    Decide(agent_research::PlanDecision),
    Resume,
    Stop,
}

/// How often a process that advances a task looks for a stop requested by
/// another `agentrt` (`research --stop`).
const STOP_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// Completes at the first SIGTERM or SIGINT, or when a stop of `task` was
/// requested by another process (looked for every [`STOP_POLL`]).
async fn stop_wanted(
    app: &App,
    session: &SessionId,
    task: &TaskId,
    term: &mut tokio::signal::unix::Signal,
) {
    let store = app.assembly().research_store().clone();
    let requested = async {
        loop {
            if store.stop_requested(session, task).await.unwrap_or(false) {
                return;
            }
            tokio::time::sleep(STOP_POLL).await;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
        () = requested => {}
    }
}

/// Advance `task` with `work`, stopping it on the first SIGTERM or SIGINT
/// or on a stop requested by another process (S9.6): reads and synthesis
/// stop, the report is made of what was read with the gap `stopped`, and
/// the task never resumes by itself. A second signal exits at once (130).
async fn advance_stoppable(
    app: &App,
    session: &SessionId,
    task: &TaskId,
    work: impl std::future::Future<Output = Result<ResearchView, agent_assembly::ResearchDeskError>>,
) -> anyhow::Result<ResearchView> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::pin!(work);
    tokio::select! {
        done = &mut work => return Ok(done?),
        () = stop_wanted(app, session, task, &mut term) => {}
    }
    eprintln!(
        "stopping research task {task}: no more reads or synthesis; the report is what was read (signal again to exit at once)"
    );
    let a = app.assembly();
    let stopped = async {
        a.stop_research(session, task).await?;
        let _ = work.await;
        a.research_view(session, task).await
    };
    tokio::select! {
        view = stopped => Ok(view?),
        _ = tokio::signal::ctrl_c() => std::process::exit(130),
        _ = term.recv() => std::process::exit(130),
    }
}

/// `agentrt research --stop TASK` while another process executes the
/// task's session: the stop is requested there, and this waits (bounded)
/// until the task is final.
async fn stop_elsewhere(cli: &Cli, stored: &ResearchTask) -> anyhow::Result<u8> {
    let viewer = open_viewer(cli).await?;
    let a = viewer.assembly();
    a.research_store()
        .request_stop(&stored.session, &stored.id)
        .await?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let view = a.research_view(&stored.session, &stored.id).await?;
        if matches!(
            view.phase,
            "reported" | "partial" | "rejected" | "cancelled"
        ) || std::time::Instant::now() >= deadline
        {
            if !cli.json && std::time::Instant::now() >= deadline {
                eprintln!(
                    "agentrt: the stop of {} was requested; the process executing it has not ended it yet",
                    stored.id
                );
            }
            print_view(cli.json, &view)?;
            return Ok(exit_code(&view));
        }
        tokio::time::sleep(STOP_POLL).await;
    }
}

/// `agentrt research "topic"`: the start turn, then planning up to the
/// plan request. The start run gets a launch record, so that the later
/// commands reopen the task with the same model.
pub(crate) async fn start_research(
    cli: &Cli,
    config: Config,
    source: Source,
    topic: &str,
    run_config: RunConfig,
    session: Option<SessionId>,
) -> anyhow::Result<u8> {
    let spec = launch_spec(cli, source).await?;
    let app = open_app_with(cli, config, &spec, OnSignal::Command).await?;
    let session = match session {
        Some(s) => s,
        None => SessionId::new(agent_kernel::host::random_id(
            app.native().host().entropy.as_ref(),
            "session-",
        ))?,
    };
    let _opened = app.open_session(&session).await.map_err(session_busy)?;
    let a = app.assembly();
    let started = a.start_research(&session, topic, run_config).await?;
    app.record_launch(&Launch {
        run: started.run.clone(),
        provider: spec,
        demo: false,
    })
    .await?;
    if !cli.json {
        eprintln!(
            "research task {} started in session {session} (turn {})",
            started.task, started.run
        );
    }
    let view = advance_stoppable(
        &app,
        &session,
        &started.task,
        a.advance_research(&session, &started.task),
    )
    .await?;
    // Shown here: the plan request is presented once (S6.4).
    let _ = a.present_plan(&session, &started.task).await?;
    print_view(cli.json, &view)?;
    Ok(exit_code(&view))
}

/// `agentrt plan show|approve|edit|reject TASK`, `agentrt research --resume TASK`.
pub(crate) async fn research_action(
    cli: &Cli,
    task: &agent_research::TaskId,
    action: ResearchAction,
) -> anyhow::Result<u8> {
    if let ResearchAction::Show = action {
        let app = open_viewer(cli).await?;
        let stored = find(&app, task).await?;
        let view = app
            .assembly()
            .research_view(&session_of(&stored), task)
            .await?;
        print_view(cli.json, &view)?;
        return Ok(exit_code(&view));
    }
    let config = load_config(cli)?;
    let (stored, launch) = {
        let viewer = open_viewer(cli).await?;
        let stored = find(&viewer, task).await?;
        let start = RunId::new(stored.message.as_str())?;
        let launch = Launch::load(viewer.native().host().storage.as_ref(), &start)
            .await?
            .ok_or_else(|| anyhow::Error::new(AppError::NoLaunch(start.clone())))?;
        (stored, launch)
    };
    let app = open_app_with(cli, config, &launch.provider, OnSignal::Command).await?;
    let session = session_of(&stored);
    let _opened = match app.open_session(&session).await {
        Ok(opened) => opened,
        Err(AppError::Run(agent_supervisor::RunError::Lease(
            agent_kernel::host::LeaseError::Held { .. },
        ))) if matches!(action, ResearchAction::Stop) => {
            drop(app);
            return stop_elsewhere(cli, &stored).await;
        }
        Err(e) => return Err(session_busy(e)),
    };
    let a = app.assembly();
    let view = match action {
        ResearchAction::Show => a.research_view(&session, task).await?,
        ResearchAction::Stop => a.stop_research(&session, task).await?,
        ResearchAction::Resume => {
            advance_stoppable(&app, &session, task, a.resume_research(&session, task)).await?
        }
        ResearchAction::Decide(decision) => {
            let current = a.research_view(&session, task).await?;
            let request = current.plan_request.map(|r| r.id).ok_or_else(|| {
                usage(format!(
                    "research task {task} has no plan waiting for a decision (it is {})",
                    current.phase
                ))
            })?;
            advance_stoppable(
                &app,
                &session,
                task,
                a.decide_plan(&session, task, &request, decision),
            )
            .await
            .map_err(
                |e| match e.downcast::<agent_assembly::ResearchDeskError>() {
                    Ok(e) => match e {
                        agent_assembly::ResearchDeskError::Research(
                            agent_research::ResearchError::Plan(p),
                        ) => usage(format!("the edited plan is refused: {p}")),
                        other => anyhow::Error::new(other),
                    },
                    Err(e) => e,
                },
            )?
        }
    };
    print_view(cli.json, &view)?;
    Ok(exit_code(&view))
}
