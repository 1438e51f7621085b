//! Runs on this machine: `agentrt run` and `demo` start one and follow it
//! to its end, `runs` and `show` read them, and `approve`, `deny`,
//! `respond`, `decide`, `stop` and `resume` continue one.

use std::io::Write;
use std::path::PathBuf;

use agent_host_native::app::{AppError, Launch};
use agent_host_native::config::Config;
use agent_host_native::demo;
use agent_kernel::host::LeaseError;
use agent_kernel::run::PendingKind;
use agent_kernel::{RunId, SessionId};
use agent_supervisor::{RunConfig, RunError};

use super::args::{Action, Cli, Source};
use super::exit::{Exit, code, usage};
use super::follow::follow;
use super::open::{launch_spec, load_config, load_run, open_app, open_host, open_viewer};
use super::render::{format_time, hint, pending_text, print_card, status_text};
use super::workers::enqueue_run;

pub(crate) async fn list_runs(cli: &Cli) -> anyhow::Result<u8> {
    let host = open_host(cli).await?;
    let runs = agent_supervisor::store::list_runs(&*host.host().storage, None).await?;
    let mut out = std::io::stdout().lock();
    for run in &runs {
        if cli.json {
            writeln!(
                out,
                "{}",
                serde_json::json!({"run": run.id, "session": run.session, "status": run.status,
                    "stop_reason": run.stop_reason, "created_at_ms": run.created_at_ms})
            )?;
        } else {
            writeln!(
                out,
                "{}  {:<18} {}  {}",
                run.id,
                status_text(run),
                run.session,
                format_time(run.created_at_ms)
            )?;
        }
    }
    if runs.is_empty() && !cli.json {
        writeln!(out, "no runs yet (try `agentrt demo`)")?;
    }
    Ok(code::OK)
}

/// The run card, from the assembly's run view (the one `readRun` shows):
/// the runtime is wired without a model ([`NoModel`](agent_assembly::NoModel)), since showing a run
/// never drives it.
pub(crate) async fn show(cli: &Cli, run: &RunId) -> anyhow::Result<u8> {
    let app = open_viewer(cli).await?;
    let view = app.run_view(run).await?;
    print_card(&view, cli.json)?;
    Ok(code::OK)
}

pub(crate) async fn start_demo(cli: &Cli) -> anyhow::Result<u8> {
    let config = load_config(cli)?;
    let mut run_config = RunConfig::default();
    if let Some(a) = config.approval {
        run_config.approval = a;
    }
    start_run(
        cli,
        config,
        Source::Scenario(demo::SCENARIO.to_owned()),
        demo::PROMPT,
        run_config,
        RunPlace {
            session: None,
            attachments: &[],
            detach: false,
            profile: None,
            flags: TurnFlags::default(),
        },
        true,
    )
    .await
}

/// Where a new run goes: its session (default: a new one) and the files
/// brought into it first.
pub(crate) struct RunPlace<'a> {
    pub(crate) session: Option<SessionId>,
    pub(crate) attachments: &'a [PathBuf],
    /// Queue it for the workers instead of running it here.
    pub(crate) detach: bool,
    /// Run under this Agent Profile (S10.2).
    pub(crate) profile: Option<agent_profiles::ProfileId>,
    /// The run flags the person gave, which under a profile are the turn's
    /// layer: they only narrow, and a wider one is refused with a line.
    pub(crate) flags: TurnFlags<'a>,
}

/// The run flags that, under a profile, narrow it (S10.2).
#[derive(Default)]
pub(crate) struct TurnFlags<'a> {
    pub(crate) budget: Option<&'a super::args::BudgetArgs>,
    pub(crate) approval: Option<agent_capabilities::ApprovalMode>,
}

/// The turn layer of `flags` over `effective` (the profile's resolution
/// without them): each budget flag replaces its one dimension of the
/// effective budget (a `--budget` preset replaces it whole), the approval
/// flag asks for its mode; resolving then keeps the narrower and lists
/// the wider as refused.
fn turn_layer(
    flags: &TurnFlags<'_>,
    effective: &agent_profiles::Effective,
) -> anyhow::Result<agent_profiles::Layer> {
    let mut layer = agent_profiles::Layer {
        approval: flags.approval,
        ..Default::default()
    };
    if let Some(args) = flags.budget {
        let base = serde_json::to_value(effective.budget)?;
        if let Some(spec) = args.spec(Some(&base)) {
            // Checked as a whole (the bounds are the budget's), kept only
            // in the dimensions the flags name.
            let asked = agent_kernel::budget::Budget::from_spec(&spec)
                .map_err(|e| usage(format!("the budget flags are refused: {e}")))?;
            let mut budget = effective.budget;
            if args.budget.is_some() {
                budget = asked;
            }
            if args.max_tool_rounds.is_some() {
                budget.max_tool_rounds = asked.max_tool_rounds;
            }
            if args.max_tool_calls.is_some() {
                budget.max_tool_calls = asked.max_tool_calls;
            }
            if args.max_tokens.is_some() {
                budget.max_tokens = asked.max_tokens;
            }
            if args.max_duration_ms.is_some() {
                budget.max_duration_ms = asked.max_duration_ms;
            }
            layer.budget = Some(budget);
        }
    }
    Ok(layer)
}

pub(crate) async fn start_run(
    cli: &Cli,
    config: Config,
    source: Source,
    prompt: &str,
    run_config: RunConfig,
    place: RunPlace<'_>,
    is_demo: bool,
) -> anyhow::Result<u8> {
    let RunPlace {
        session,
        attachments,
        detach,
        profile,
        flags,
    } = place;
    let spec = launch_spec(cli, source).await?;
    if detach {
        return enqueue_run(cli, spec, prompt, run_config, session, is_demo).await;
    }
    // The configuration's `[ceiling]` narrows every run under a profile.
    let ceiling = config.ceiling.as_ref().map(|c| c.layer());
    let app = open_app(cli, config, &spec).await?;
    let session = match session {
        Some(s) => s,
        None => SessionId::new(agent_kernel::host::random_id(
            app.native().host().entropy.as_ref(),
            "session-",
        ))?,
    };
    let opened = app.open_session(&session).await.map_err(session_busy)?;
    for file in attachments {
        let entry = super::sessions::attach(&app, &opened.guard, file, None, None).await?;
        super::sessions::print_attached(cli, &entry, true)?;
    }
    app.runtime().recover().await?;
    let events = app.runtime().subscribe();
    let run = match profile {
        None => app.runtime().start(&session, prompt, run_config).await?,
        Some(profile) => {
            let mut choice = agent_assembly::ProfileChoice {
                profile: Some(profile),
                workspace: ceiling,
                ..Default::default()
            };
            let to_usage = |e: agent_profiles::ProfileError| usage(e.to_string());
            let (_, without_flags) = app
                .assembly()
                .profile_config(run_config.clone(), &choice)
                .await
                .map_err(to_usage)?;
            choice.turn = Some(turn_layer(&flags, &without_flags)?);
            let (run, effective) = app
                .assembly()
                .start_with_profile(&session, prompt, run_config, &choice)
                .await
                .map_err(|e| match e {
                    agent_assembly::ProfileStartError::Profile(p) => usage(p.to_string()),
                    other => anyhow::Error::new(other),
                })?;
            for r in &effective.refused {
                let line = if r.layer == agent_profiles::LayerName::Turn {
                    format!(
                        "the flag for {} asked {}, wider than the profile allows; refused, kept {}",
                        r.field, r.asked, r.kept
                    )
                } else {
                    format!(
                        "the {} layer's {} was narrowed to {}",
                        r.layer, r.field, r.kept
                    )
                };
                hint(cli, &line);
            }
            run
        }
    };
    app.record_launch(&Launch {
        run: run.clone(),
        provider: spec,
        demo: is_demo,
    })
    .await?;
    if !cli.json {
        eprintln!("run {run} started in session {session}");
    }
    follow(cli, &app, &run, events, is_demo).await
}

pub(crate) fn session_busy(e: AppError) -> anyhow::Error {
    match e {
        AppError::Run(RunError::Lease(LeaseError::Held { session, owner, .. })) => {
            anyhow::Error::new(Exit {
                code: code::WAITING,
                message: format!(
                    "session {session} is being executed by another agentrt process ({owner}); wait for it or stop it there"
                ),
            })
        }
        other => anyhow::Error::new(other),
    }
}

/// The research task `run` belongs to, if it is one of a task's runs
/// (the assembly owns the rule: [`agent_assembly::Assembly::research_task_of`]).
async fn research_task_of(
    cli: &Cli,
    run: &RunId,
) -> anyhow::Result<Option<agent_research::TaskId>> {
    let viewer = super::open::open_viewer(cli).await?;
    match viewer.assembly().research_task_of(run).await {
        Ok(found) => Ok(found.map(|(_session, task)| task)),
        // The runtime's own error, so that an unknown run exits as one.
        Err(agent_research::driver::DriverError::Run(e)) => Err(anyhow::Error::new(e)),
        Err(e) => Err(e.into()),
    }
}

pub(crate) async fn continue_run(cli: &Cli, run: &RunId, action: Action) -> anyhow::Result<u8> {
    let config = load_config(cli)?;
    if let Action::Stop = action
        && let Some(task) = research_task_of(cli, run).await?
    {
        // A research run is stopped as its task is (S9.6), also while
        // another process executes the session.
        return super::research::research_action(cli, &task, super::research::ResearchAction::Stop)
            .await;
    }
    let launch = {
        let host = open_host(cli).await?;
        let storage = host.host().storage.clone();
        load_run(storage.as_ref(), run).await?;
        Launch::load(storage.as_ref(), run)
            .await?
            .ok_or_else(|| anyhow::Error::new(AppError::NoLaunch(run.clone())))?
    };
    let (spec, is_demo) = (launch.provider, launch.demo);
    let app = open_app(cli, config, &spec).await?;
    let record = load_run(app.native().host().storage.as_ref(), run).await?;
    let _guard = app
        .open_session(&record.session)
        .await
        .map_err(session_busy)?;
    app.runtime().recover().await?;
    let events = app.runtime().subscribe();
    let rt = app.runtime();
    match action {
        Action::Resume => {
            if let Err(e) = rt.resume(run).await {
                if matches!(e, RunError::DecisionPending { .. }) {
                    eprintln!("agentrt: {e}");
                    let card = app.run_view(run).await?;
                    for p in card.pending_requests() {
                        hint(cli, &pending_text(run, p));
                    }
                    return Ok(code::WAITING);
                }
                return Err(e.into());
            }
        }
        Action::Approve(request) => rt.approve(run, &request).await?,
        Action::Deny(request) => rt.deny(run, &request).await?,
        Action::Respond(text) => {
            let pending = rt.pending(run).await?;
            let request = pending
                .iter()
                .find(|p| matches!(p.kind, PendingKind::Input { .. }))
                .ok_or_else(|| usage(format!("run {run} has no pending question to answer")))?;
            rt.respond(run, &request.id, &text).await?
        }
        Action::Decide(call, choice) => rt.decide(run, &call, choice).await?,
        Action::Stop => app.stop(run).await?,
    }
    follow(cli, &app, run, events, is_demo).await
}

/// `agentrt compact SESSION`: the session's turns but the newest
/// summarised now ([`agent_supervisor::Runtime::compact`], S12.4), under
/// the session's lease; one line (or JSON object) says what was folded.
pub(crate) async fn compact(
    cli: &Cli,
    config: Config,
    source: Source,
    session: &SessionId,
    run_config: RunConfig,
) -> anyhow::Result<u8> {
    let spec = launch_spec(cli, source).await?;
    let app = open_app(cli, config, &spec).await?;
    let _opened = app.open_session(session).await.map_err(session_busy)?;
    let made = app.runtime().compact(session, run_config).await?;
    let mut out = std::io::stdout().lock();
    match (&made, cli.json) {
        (Some(s), true) => writeln!(
            out,
            "{}",
            serde_json::json!({"event": "conversation_compacted", "session": session,
                "turns_covered": s.turns, "tokens_before": s.tokens_before,
                "tokens_after": s.tokens_after, "prompt_version": s.prompt_version})
        )?,
        (Some(s), false) => writeln!(
            out,
            "session {session}: the first {} turn(s) summarised, {} -> {} tokens",
            s.turns, s.tokens_before, s.tokens_after
        )?,
        (None, true) => writeln!(
            out,
            "{}",
            serde_json::json!({"event": "nothing_to_compact", "session": session})
        )?,
        (None, false) => writeln!(
            out,
            "session {session}: nothing to compact (fewer than two turns after the latest summary)"
        )?,
    }
    Ok(code::OK)
}
