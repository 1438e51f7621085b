//! `agentrt`: the command line of the native host. Runs agent turns over the
//! SQLite data directory (a session's runs are one conversation; the answer
//! is printed when a run ends), answers their pending requests, resumes
//! them, shows them, brings a person's files into sessions and lists,
//! copies and deletes sessions (the assembly's session actions), checks
//! URLs and workspace paths, and serves the gateway. With a shared store
//! (`--store postgres://…`) it also queues runs (`run --detach`, `resume
//! --detach`), executes them (`worker`) and reports on them (`queue`,
//! `workers`).
//!
//! Exit codes: 0 completed (or allowed); 2 usage error or unknown run;
//! 3 refused, or waiting for the person (approval, input, or a decision on an
//! `effect_unknown` call); 4 failed or cancelled (and internal failures);
//! 5 interrupted.

use std::process::ExitCode;
use std::time::Duration;

use agent_host_native::workers::worker::WorkerOptions;
use agent_host_native::{document_sandbox, script_sandbox};
use agent_kernel::{CallId, RequestId};
use agent_supervisor::{Choice, RunConfig};
use agent_tools::builtin::skill::Skill;
use clap::Parser;
use cli::args::{Action, Cli, Command, DecisionArg, PlanAction, SessionAction};
use cli::check::check;
use cli::exit::{code, code_of, usage};
use cli::model::{ModelFlags, model_setup};
use cli::open::{load_config, open_viewer, parse_run_id, parse_session, run_mode};
use cli::research::{ResearchAction, research_action, start_research};
use cli::runs::{RunPlace, continue_run, list_runs, session_busy, show, start_demo, start_run};
use cli::serve::serve;
#[cfg(feature = "sim")]
use cli::sim::simulate;
use cli::workers::{enqueue_resume_of, list_queue, list_workers, run_worker};

mod cli {
    pub(crate) mod args;
    pub(crate) mod check;
    pub(crate) mod elicit;
    pub(crate) mod exit;
    pub(crate) mod follow;
    pub(crate) mod knowledge_files;
    pub(crate) mod mcp_login;
    pub(crate) mod memory;
    pub(crate) mod model;
    pub(crate) mod open;
    pub(crate) mod parent;
    pub(crate) mod profiles;
    pub(crate) mod render;
    pub(crate) mod research;
    pub(crate) mod runs;
    pub(crate) mod serve;
    pub(crate) mod sessions;
    #[cfg(feature = "sim")]
    pub(crate) mod sim;
    pub(crate) mod workers;
}

fn main() -> ExitCode {
    // The sandbox child of `run_javascript`: before anything else, so that it
    // sets up no logging, runtime or panic hook of the command line.
    if std::env::args_os().nth(1).as_deref()
        == Some(std::ffi::OsStr::new(script_sandbox::SUBCOMMAND))
    {
        return script_sandbox::serve_stdio();
    }
    if std::env::args_os().nth(1).as_deref()
        == Some(std::ffi::OsStr::new(document_sandbox::SUBCOMMAND))
    {
        return document_sandbox::serve_stdio();
    }
    // Never a stack trace: a panic prints one line and exits 4.
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".into());
        eprintln!(
            "agentrt: internal error: {}",
            msg.lines().next().unwrap_or("")
        );
        std::process::exit(i32::from(code::FAILED));
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return ExitCode::from(
                    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                        code::USAGE
                    } else {
                        code::OK
                    },
                );
            }
            let text = e.render().to_string();
            let first = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid arguments");
            eprintln!("agentrt: {}", first.trim_start_matches("error: "));
            return ExitCode::from(code::USAGE);
        }
    };
    // A foreground command ends when its parent goes away (issue 38).
    let daemon = match &cli.command {
        Command::Serve { .. } | Command::Worker { .. } => true,
        Command::Run { detach, .. } | Command::Resume { detach, .. } => *detach,
        _ => false,
    };
    if !daemon {
        cli::parent::exit_with_parent(code::INTERRUPTED);
    }
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("agentrt: cannot start the async runtime: {e}");
            return ExitCode::from(code::FAILED);
        }
    };
    let result = runtime.block_on(dispatch(cli));
    let code = match result {
        Ok(code) => code,
        Err(e) => {
            let code = code_of(&e);
            let text = format!("{e:#}").replace('\n', " ");
            eprintln!("agentrt: {text}");
            code
        }
    };
    // Actors may still hold tasks; do not wait for them.
    runtime.shutdown_timeout(Duration::from_millis(100));
    ExitCode::from(code)
}

async fn dispatch(cli: Cli) -> anyhow::Result<u8> {
    match &cli.command {
        Command::Check { what } => check(&cli, what).await,
        Command::Mcp { action } => cli::mcp_login::run(&cli, load_config(&cli)?, action).await,
        Command::Serve {
            port,
            listen,
            allow_origins,
            relays,
            www,
            pkg,
        } => {
            let listen = listen.unwrap_or(std::net::SocketAddr::from((
                std::net::Ipv4Addr::LOCALHOST,
                *port,
            )));
            serve(
                &cli,
                listen,
                allow_origins,
                relays,
                www.clone(),
                pkg.clone(),
            )
            .await
        }
        Command::Runs => list_runs(&cli).await,
        Command::Show { run } => show(&cli, &parse_run_id(run)?).await,
        Command::Demo => start_demo(&cli).await,
        #[cfg(feature = "sim")]
        Command::Sim {
            scenario,
            seeds,
            report,
        } => tokio::task::block_in_place(|| simulate(scenario, *seeds, report.as_deref())),
        Command::Attach {
            session,
            file,
            as_path,
            mime,
        } => {
            let session = parse_session(session)?;
            let app = open_viewer(&cli).await?;
            let opened = app.open_session(&session).await.map_err(session_busy)?;
            let entry = cli::sessions::attach(
                &app,
                &opened.guard,
                file,
                as_path.as_deref(),
                mime.as_deref(),
            )
            .await?;
            cli::sessions::print_attached(&cli, &entry, false)?;
            Ok(code::OK)
        }
        Command::Session { action } => {
            let app = open_viewer(&cli).await?;
            match action {
                SessionAction::List => cli::sessions::list(&cli, &app).await?,
                SessionAction::Files { session } => {
                    cli::sessions::files(&cli, &app, &parse_session(session)?).await?
                }
                SessionAction::Copy { from, to } => {
                    let from = parse_session(from)?;
                    let to = parse_session(to)?;
                    let opened = app.open_session(&to).await.map_err(session_busy)?;
                    cli::sessions::copy(&cli, &app, &from, &opened.guard).await?
                }
                SessionAction::Delete { session } => {
                    let session = parse_session(session)?;
                    let opened = app.open_session(&session).await.map_err(session_busy)?;
                    cli::sessions::delete(&cli, &app, &opened.guard).await?
                }
            }
            Ok(code::OK)
        }
        Command::Run {
            prompt,
            scenario,
            provider,
            provider_name,
            base_url,
            model,
            temperature,
            mode,
            system,
            system_extension,
            budget,
            approval,
            session,
            skill,
            attach,
            detach,
            profile,
        } => {
            if *detach && provider.is_some() {
                // S14.2: a queued run never names an endpoint or a key's variable.
                return Err(usage(
                    "--detach queues the run for workers, which talk only to the providers of their own configuration: name one with --provider-name NAME ([providers.NAME] of the worker's --config; none: its [provider]), not --provider/--base-url",
                ));
            }
            let config = load_config(&cli)?;
            let (spec_source, mut run_config) = model_setup(
                &config,
                ModelFlags {
                    scenario,
                    provider,
                    provider_name: provider_name.as_deref(),
                    // Queued, with no model flag: the worker's configuration decides.
                    queued: *detach,
                    base_url,
                    model,
                    temperature: *temperature,
                    budget,
                    approval: *approval,
                },
            )?;
            if let Some(mode) = mode {
                run_config.mode = run_mode(*mode);
            }
            run_config.model.system_prompt = system.clone();
            run_config.model.system_extension = system_extension.clone();
            if let Some(path) = skill {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| usage(format!("cannot read the Skill {}: {e}", path.display())))?;
                let skill = Skill::parse(&text)
                    .map_err(|e| usage(format!("the Skill {} is refused: {e}", path.display())))?;
                run_config.skill = Some(skill.applied());
            }
            let prompt = prompt.clone().unwrap_or_else(|| "Run the scenario.".into());
            let session = match session {
                Some(s) => Some(parse_session(s)?),
                None => None,
            };
            start_run(
                &cli,
                config,
                spec_source,
                &prompt,
                run_config,
                RunPlace {
                    session,
                    attachments: attach,
                    detach: *detach,
                    profile: match profile {
                        Some(id) => Some(
                            agent_profiles::ProfileId::new(id.clone())
                                .map_err(|e| usage(e.to_string()))?,
                        ),
                        None => None,
                    },
                    flags: cli::runs::TurnFlags {
                        budget: Some(budget),
                        approval: approval.map(|a| match a {
                            cli::args::ApprovalArg::Permissive => {
                                agent_capabilities::ApprovalMode::Permissive
                            }
                            cli::args::ApprovalArg::Strict => {
                                agent_capabilities::ApprovalMode::Strict
                            }
                        }),
                    },
                },
                false,
            )
            .await
        }
        Command::Compact {
            session,
            scenario,
            provider,
            base_url,
            model,
            context_window,
        } => {
            let session = parse_session(session)?;
            let config = load_config(&cli)?;
            let (source, mut run_config) = model_setup(
                &config,
                ModelFlags {
                    scenario,
                    provider,
                    provider_name: None,
                    queued: false,
                    base_url,
                    model,
                    temperature: None,
                    budget: &Default::default(),
                    approval: None,
                },
            )?;
            run_config.model.context_window_tokens = *context_window;
            cli::runs::compact(&cli, config, source, &session, run_config).await
        }
        Command::Research {
            topic,
            resume,
            stop,
            scenario,
            provider,
            base_url,
            model,
            temperature,
            budget,
            approval,
            session,
        } => {
            if let Some(task) = stop {
                let task = cli::research::parse_task(task)?;
                return research_action(&cli, &task, ResearchAction::Stop).await;
            }
            if let Some(task) = resume {
                let task = cli::research::parse_task(task)?;
                return research_action(&cli, &task, ResearchAction::Resume).await;
            }
            let config = load_config(&cli)?;
            let (source, run_config) = model_setup(
                &config,
                ModelFlags {
                    scenario,
                    provider,
                    provider_name: None,
                    queued: false,
                    base_url,
                    model,
                    temperature: *temperature,
                    budget,
                    approval: *approval,
                },
            )?;
            let session = match session {
                Some(s) => Some(parse_session(s)?),
                None => None,
            };
            let topic = topic.clone().unwrap_or_default();
            start_research(&cli, config, source, &topic, run_config, session).await
        }
        Command::Profile { action } => {
            let config = load_config(&cli)?;
            // What this host allows an imported profile at most: its
            // defaults as the global layer (S10.3).
            let mut defaults = RunConfig::default();
            if let Some(b) = config.budget {
                defaults.budget = b;
            }
            if let Some(a) = config.approval {
                defaults.approval = a;
            }
            let mut ceiling = agent_assembly::profiles::global_layer(&defaults);
            // The configuration's `[ceiling]` lowers it further.
            if let Some(c) = &config.ceiling {
                ceiling.tools = match (ceiling.tools.take(), c.tools.clone()) {
                    (Some(host), Some(set)) => Some(host.intersection(&set).cloned().collect()),
                    (host, set) => set.or(host),
                };
                if c.memory.is_some() {
                    ceiling.memory = c.memory.clone();
                }
            }
            let app = open_viewer(&cli).await?;
            cli::profiles::profile(cli.json, &app, action, &ceiling).await
        }
        Command::Memory { action } => {
            let app = open_viewer(&cli).await?;
            cli::memory::memory(cli.json, &app, action).await
        }
        Command::Kb { action } => {
            let app = open_viewer(&cli).await?;
            cli::memory::kb(cli.json, &app, action).await
        }
        Command::Plan { action } => {
            let (task, action) = match action {
                PlanAction::Show { task } => (task, ResearchAction::Show),
                PlanAction::Approve { task } => (
                    task,
                    ResearchAction::Decide(cli::research::decision(None, false)?),
                ),
                PlanAction::Edit { task, file } => (
                    task,
                    ResearchAction::Decide(cli::research::decision(Some(file), false)?),
                ),
                PlanAction::Reject { task } => (
                    task,
                    ResearchAction::Decide(cli::research::decision(None, true)?),
                ),
            };
            research_action(&cli, &cli::research::parse_task(task)?, action).await
        }
        Command::Report { task } => {
            let app = open_viewer(&cli).await?;
            cli::research::print_report(cli.json, &app, &cli::research::parse_task(task)?).await
        }
        Command::Resume { run, detach } => {
            let run = parse_run_id(run)?;
            if *detach {
                return enqueue_resume_of(&cli, &run).await;
            }
            continue_run(&cli, &run, Action::Resume).await
        }
        Command::Worker {
            concurrency,
            poll_ms,
            drain_ms,
            status_file,
        } => {
            let options = WorkerOptions {
                concurrency: *concurrency,
                poll: Duration::from_millis((*poll_ms).max(10)),
                drain: Duration::from_millis(*drain_ms),
                status_file: status_file.clone(),
                ..WorkerOptions::default()
            };
            run_worker(&cli, options).await
        }
        Command::Queue => list_queue(&cli).await,
        Command::Workers => list_workers(&cli).await,
        Command::Approve { run, request } => {
            let run = parse_run_id(run)?;
            let request = RequestId::new(request.clone()).map_err(|e| usage(e.to_string()))?;
            continue_run(&cli, &run, Action::Approve(request)).await
        }
        Command::Deny { run, request } => {
            let run = parse_run_id(run)?;
            let request = RequestId::new(request.clone()).map_err(|e| usage(e.to_string()))?;
            continue_run(&cli, &run, Action::Deny(request)).await
        }
        Command::Respond { run, text } => {
            let run = parse_run_id(run)?;
            continue_run(&cli, &run, Action::Respond(text.clone())).await
        }
        Command::Decide {
            run,
            call,
            decision,
        } => {
            let run = parse_run_id(run)?;
            let call = CallId::new(call.clone()).map_err(|e| usage(e.to_string()))?;
            let choice = match decision {
                DecisionArg::Retry => Choice::RetryAnyway,
                DecisionArg::Done => Choice::MarkDone,
                DecisionArg::Abandon => Choice::Abandon,
            };
            continue_run(&cli, &run, Action::Decide(call, choice)).await
        }
        Command::Stop { run } => {
            let run = parse_run_id(run)?;
            continue_run(&cli, &run, Action::Stop).await
        }
    }
}
