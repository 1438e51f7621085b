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

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use agent_assembly::NoModel;
use agent_host_native::app::{App, AppError, AppOptions, Launch, ProviderSpec, provider_for};
use agent_host_native::config::{Config, parse_approval};
use agent_host_native::host::{NativeHost, TokioExecutor};
#[cfg(feature = "test-hooks")]
use agent_host_native::pause;
use agent_host_native::{demo, document_sandbox, script_sandbox};
use agent_kernel::budget::Budget;
use agent_kernel::host::{LeaseError, Storage, StorageExt};
use agent_kernel::run::{AgentRun, PendingKind, RunMode};
use agent_kernel::{CallId, RequestId, RunId, SessionId};
use agent_supervisor::{Choice, RunConfig, RunError, Scenario};
use agent_tools::builtin::skill::Skill;
use anyhow::{Context, anyhow};
use clap::Parser;

use agent_host_native::queue::{
    NewRun, QueueError, QueuedProvider, StartRequest, enqueue_resume, enqueue_start, read_queue,
};
use agent_host_native::worker::{Worker, WorkerOptions, read_workers};
use cli::args::{
    Action, ApprovalArg, CheckWhat, Cli, Command, DecisionArg, ModeArg, PlanAction, SessionAction,
    Source,
};
use cli::exit::{Exit, code, code_of, usage};
use cli::follow::follow;
use cli::render::{format_time, hint, pending_text, print_card, status_text};

mod mcp_login;

mod cli {
    pub(crate) mod args;
    pub(crate) mod exit;
    pub(crate) mod follow;
    pub(crate) mod memory;
    pub(crate) mod profiles;
    pub(crate) mod render;
    pub(crate) mod research;
    pub(crate) mod sessions;
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

/// `agentrt sim`: play the scenario file over `seeds` seeds in a scratch
/// directory, print the summary line, write the report; exit 0 only with
/// no violations (4 otherwise).
#[cfg(feature = "sim")]
fn simulate(
    scenario: &std::path::Path,
    seeds: u64,
    report: Option<&std::path::Path>,
) -> anyhow::Result<u8> {
    use agent_host_native::tabs::{SimFile, SimReportFile, run_seeds};
    let (wiring, plan) = SimFile::load(scenario)
        .and_then(SimFile::into_parts)
        .map_err(|e| usage(format!("{}: {e}", scenario.display())))?;
    let scratch = tempfile_dir()?;
    let outcome = run_seeds(&scratch, 0..seeds, &wiring, &plan);
    let _ = std::fs::remove_dir_all(&scratch);
    let (summary, dispatches) = outcome?;
    println!("{summary}");
    for v in summary.violations.iter().take(20) {
        eprintln!("{v}");
    }
    if let Some(path) = report {
        let json = serde_json::to_vec_pretty(&SimReportFile::new(&summary, dispatches))?;
        std::fs::write(path, json)
            .with_context(|| format!("cannot write the report {}", path.display()))?;
    }
    Ok(if summary.violations.is_empty() {
        code::OK
    } else {
        code::FAILED
    })
}

/// A fresh scratch directory for the simulation's databases.
#[cfg(feature = "sim")]
fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| anyhow!("no randomness: {e}"))?;
    let dir = std::env::temp_dir().join(format!("agentrt-sim-{}", hex_of(&bytes)));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

#[cfg(feature = "sim")]
fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where runs are stored: `--store`, else `AGENTRT_STORE`, else the
/// config's `[store] url`, else (`None`) SQLite in the data directory.
fn store_url(cli: &Cli, config: &Config) -> Option<String> {
    cli.store
        .clone()
        .or_else(|| std::env::var("AGENTRT_STORE").ok())
        .filter(|s| !s.trim().is_empty())
        .or_else(|| config.store.clone())
}

/// Where data lives: `--data-dir`, else `AGENTRT_DATA_DIR`, else the platform's data directory.
fn data_dir(cli: &Cli) -> anyhow::Result<PathBuf> {
    if let Some(dir) = &cli.data_dir {
        return Ok(dir.clone());
    }
    if let Some(dir) = std::env::var_os("AGENTRT_DATA_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    dirs::data_dir().map(|d| d.join("agentrt")).ok_or_else(|| {
        usage("no platform data directory is known here; pass --data-dir or set AGENTRT_DATA_DIR")
    })
}

fn load_config(cli: &Cli) -> anyhow::Result<Config> {
    let mut config = match &cli.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    if !config.mcp.is_empty() {
        config.mcp_auth = Some(mcp_login::run_auth_env(cli)?);
    }
    Ok(config)
}

/// The run mode `--mode` names.
fn run_mode(mode: ModeArg) -> RunMode {
    match mode {
        ModeArg::Agent => RunMode::Agent,
        ModeArg::Chat => RunMode::Chat,
    }
}

fn parse_session(text: &str) -> anyhow::Result<SessionId> {
    SessionId::new(text).map_err(|e| usage(e.to_string()))
}

fn parse_run_id(text: &str) -> anyhow::Result<RunId> {
    RunId::new(text).map_err(|e| usage(e.to_string()))
}

async fn dispatch(cli: Cli) -> anyhow::Result<u8> {
    match &cli.command {
        Command::Check { what } => check(&cli, what).await,
        Command::Mcp { action } => mcp_login::run(&cli, load_config(&cli)?, action).await,
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
                },
                false,
            )
            .await
        }
        Command::Research {
            topic,
            resume,
            scenario,
            provider,
            base_url,
            model,
            temperature,
            budget,
            approval,
            session,
        } => {
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
            let ceiling = agent_assembly::profiles::global_layer(&defaults);
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

/// The model flags shared by `agentrt run` and `agentrt research`.
struct ModelFlags<'a> {
    scenario: &'a Option<PathBuf>,
    provider: &'a Option<cli::args::ProviderArg>,
    /// `--provider-name`: a provider of the configuration by name (S14.2).
    provider_name: Option<&'a str>,
    /// The run is queued (`--detach`): with no --scenario nor --provider it
    /// names a provider of the workers' configuration, which this process
    /// need not have.
    queued: bool,
    base_url: &'a Option<String>,
    model: &'a Option<String>,
    temperature: Option<f32>,
    budget: &'a cli::args::BudgetArgs,
    approval: Option<ApprovalArg>,
}

/// Where a run's model comes from and the run configuration the flags and
/// the config file give (budget, approval, model name, temperature).
fn model_setup(config: &Config, flags: ModelFlags<'_>) -> anyhow::Result<(Source, RunConfig)> {
    let ModelFlags {
        scenario,
        provider,
        provider_name,
        queued,
        base_url,
        model,
        temperature,
        budget,
        approval,
    } = flags;
    if let Some(name) = provider_name
        && !agent_supervisor::provider::set::valid_name(name)
    {
        return Err(usage(format!(
            "--provider-name {name:?}: a provider name is 1 to {} characters from A-Z a-z 0-9 - _ .",
            agent_supervisor::provider::set::MAX_PROVIDER_NAME_BYTES
        )));
    }
    let spec_source = match (scenario, provider) {
        // A provider of the configuration by name: the workers' when queued
        // (S14.2), this process's own otherwise, which must then have it.
        (None, None) if queued || provider_name.is_some() => {
            // Queued with no --model, the worker's configured model counts;
            // here, this configuration's.
            let configured_model = if queued {
                None
            } else {
                let p = config
                    .provider_named(provider_name)
                    .map_err(|e| usage(format!("--provider-name: {e}")))?;
                Some(p.model.clone())
            };
            Source::Provider(ProviderSpec::Configured {
                name: provider_name.map(str::to_owned),
                model: model.clone().or(configured_model),
            })
        }
        (Some(path), _) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("cannot read the scenario {}: {e}", path.display())))?;
            Scenario::from_json(&text)
                .map_err(|e| usage(format!("the scenario {} is invalid: {e}", path.display())))?;
            Source::Scenario(text)
        }
        (None, Some(p)) => {
            // The config file's provider section of the same provider still
            // gives its capabilities; its key goes only to the endpoint it
            // names (`Config::key_for_endpoint`, issue 32), chosen when the
            // provider is built.
            let same = config.provider.as_ref().filter(|c| c.kind == p.kind());
            Source::Provider(ProviderSpec::Remote {
                provider: p.kind(),
                base_url: base_url.clone(),
                model: model.clone().unwrap_or_default(),
                capabilities: same.map(|c| c.capabilities).unwrap_or_default(),
            })
        }
        (None, None) => match &config.provider {
            Some(p) => Source::Provider(ProviderSpec::Remote {
                provider: p.kind,
                base_url: p.base_url.clone(),
                model: p.model.clone(),
                capabilities: p.capabilities,
            }),
            None => {
                return Err(usage(
                    "no model to talk to: give --scenario FILE, --provider openai-compatible|gemini|anthropic --model NAME [--base-url URL], or a [provider] section in --config",
                ));
            }
        },
    };
    if let Source::Provider(ProviderSpec::Remote {
        base_url: Some(base_url),
        ..
    }) = &spec_source
        && !(base_url.starts_with("http://") || base_url.starts_with("https://"))
    {
        return Err(usage(format!(
            "--base-url {base_url:?} must be an http:// or https:// URL"
        )));
    }
    let mut run_config = RunConfig::default();
    if let Some(b) = config.budget {
        run_config.budget = b;
    }
    if let Some(spec) = budget.spec(config.budget_spec.as_ref()) {
        run_config.budget =
            Budget::from_spec(&spec).map_err(|e| usage(format!("the budget is refused: {e}")))?;
    }
    if let Some(a) = config.approval {
        run_config.approval = a;
    }
    if let Some(a) = approval {
        let name = match a {
            ApprovalArg::Permissive => "permissive",
            ApprovalArg::Strict => "strict",
        };
        run_config.approval = parse_approval(name).unwrap_or_default();
    }
    if let Source::Provider(spec) = &spec_source
        && let Some(model) = spec.model()
    {
        run_config.model.model = model.to_owned();
    }
    run_config.model.temperature = temperature;
    Ok((spec_source, run_config))
}

// ---------------------------------------------------------------------------
// check
// ---------------------------------------------------------------------------

async fn check(cli: &Cli, what: &CheckWhat) -> anyhow::Result<u8> {
    let (subject, verdict): (String, Result<String, String>) = match what {
        CheckWhat::Url { url } => {
            let executor = TokioExecutor::current().ok_or_else(|| anyhow!("no async runtime"))?;
            let policy = agent_fetch::UrlPolicy::public_web(Arc::new(
                agent_fetch::SystemResolver::new(Arc::new(executor)),
            ));
            let verdict = match policy.check(url).await {
                Ok(checked) => Ok(format!(
                    "public address; fetch_url may read {}",
                    checked.url()
                )),
                Err(e) => Err(e.to_string()),
            };
            (url.clone(), verdict)
        }
        CheckWhat::Path { path } => {
            let verdict = match agent_workspace::WorkspacePath::parse(path) {
                Ok(p) => Ok(format!("valid workspace path {:?}", p.as_str())),
                Err(e) => Err(e.to_string()),
            };
            (path.clone(), verdict)
        }
    };
    let kind = match what {
        CheckWhat::Url { .. } => "url",
        CheckWhat::Path { .. } => "path",
    };
    let allowed = verdict.is_ok();
    let reason = match &verdict {
        Ok(r) | Err(r) => r.clone(),
    };
    if cli.json {
        println!(
            "{}",
            serde_json::json!({"check": kind, "input": subject, "allowed": allowed, "reason": reason})
        );
    } else if allowed {
        println!("allowed: {subject}: {reason}");
    } else {
        println!("refused: {subject}: {reason}");
    }
    Ok(if allowed { code::OK } else { code::WAITING })
}

// ---------------------------------------------------------------------------
// serve
// ---------------------------------------------------------------------------

async fn serve(
    cli: &Cli,
    listen: std::net::SocketAddr,
    allow_origins: &[String],
    relays: &[String],
    www: Option<PathBuf>,
    pkg: Option<PathBuf>,
) -> anyhow::Result<u8> {
    use agent_host_native::{gateway, page, relay};
    let allowed = allow_origins
        .iter()
        .map(|o| gateway::AllowedOrigin::parse(o).map_err(|e| usage(e.to_string())))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let listen = gateway::ListenAddress::check(listen).map_err(|e| usage(e.to_string()))?;
    let relay = relays
        .iter()
        .map(|spec| relay::RelayTarget::parse(spec, |var| std::env::var(var).ok()))
        .collect::<Result<Vec<_>, _>>()
        .and_then(relay::Relay::new)
        .map_err(|e| usage(e.to_string()))?;
    let config = load_config(cli)?;
    let executor: Arc<dyn agent_kernel::host::Executor> =
        Arc::new(TokioExecutor::current().ok_or_else(|| anyhow!("no async runtime"))?);
    let clock = Arc::new(agent_host_native::host::SystemClock::new(
        tokio::runtime::Handle::current(),
    ));
    let policy = agent_fetch::UrlPolicy::public_web(Arc::new(agent_fetch::SystemResolver::new(
        executor.clone(),
    )));
    let reader_config = match &config.reader {
        Some(r) => agent_fetch::ReaderConfig {
            jina_base: Some(r.endpoint.trim_end_matches('/').to_owned()),
            jina_key: r.api_key_env.as_ref().and_then(|v| std::env::var(v).ok()),
        },
        None => agent_fetch::ReaderConfig::direct_only(),
    };
    // Pages the gateway reads for the browser are extracted in the
    // document sandbox too (capped, killed at the deadline).
    let documents = document_sandbox::DocumentSandbox::new(
        document_sandbox::DocumentSandbox::command(
            std::env::current_exe().context("cannot find the agentrt executable")?,
        ),
        agent_readable::ExtractionSlots::SHARED_SLOTS,
    )
    .context("cannot prepare the document sandbox")?;
    let reader = agent_fetch::WebReader::new(policy, reader_config, Default::default(), clock)
        .with_blocking(executor)
        .with_readable_extractor(Arc::new(documents));
    for (flag, dir) in [("--www", &www), ("--pkg", &pkg)] {
        if let Some(dir) = dir.as_ref().filter(|d| !d.is_dir()) {
            return Err(usage(format!(
                "{flag} {}: not a directory; give host-browser/www (--www) or the built bundle host-browser/pkg (--pkg)",
                dir.display()
            )));
        }
    }
    let dirs = page::PageDirs::resolve(www, pkg);
    let listener = listen.bind().await.map_err(|e| {
        usage(format!(
            "cannot listen on {}: {e}; choose another --port or --listen address",
            listen.addr()
        ))
    })?;
    let addr = listener.local_addr()?;
    if !listen.is_loopback() {
        eprintln!(
            "agentrt: listening beyond loopback on {addr} over plain HTTP: TLS belongs to a reverse proxy in front, which must send Host: {addr}"
        );
    }
    let entropy = agent_host_native::host::OsEntropy::probe()?;
    let token = gateway::random_token(&entropy);
    let origin = gateway::page_origin(addr);
    // The page's MCP requests: to the [[mcp]] servers with their own
    // credentials, anywhere else only through the public-address policy.
    let mcp_servers =
        agent_host_native::mcp_gateway::configured_servers(&config.mcp, &*config.secret_resolver())
            .await
            .map_err(|e| usage(format!("[[mcp]]: {e}")))?;
    let mcp_policy =
        agent_fetch::UrlPolicy::public_web(Arc::new(agent_fetch::SystemResolver::new(Arc::new(
            TokioExecutor::current().ok_or_else(|| anyhow!("no async runtime"))?,
        ))));
    let mcp =
        agent_host_native::mcp_gateway::McpGateway::new(mcp_servers, Some(Arc::new(mcp_policy)));
    let state = gateway::GatewayState::new(Arc::new(reader), token.clone(), [origin.clone()])
        .also_allowing(&allowed)
        .with_relay(relay.clone())
        .with_mcp(mcp);
    let page_url = dirs
        .as_ref()
        .map(|_| format!("{origin}/#gateway-token={token}"));
    if cli.json {
        println!(
            "{}",
            serde_json::json!({"event": "listening", "url": origin, "token": token, "page": page_url,
                "allowed_origins": allowed.iter().map(|o| o.as_str()).collect::<Vec<_>>(),
                "relay": relay.providers()})
        );
    } else {
        println!("gateway listening on {origin}");
        for o in &allowed {
            println!("also allowing pages of {}", o.as_str());
        }
        for p in relay.providers() {
            println!(
                "relaying {p} model requests at {origin}{}/{p} (the page sends the token as its key)",
                relay::RELAY_PREFIX
            );
        }
        println!("token: {token}");
        match (&page_url, &dirs) {
            (Some(url), Some(dirs)) => {
                println!("demo page: {url}");
                if !dirs.pkg.join("agent_host_browser.js").is_file() {
                    eprintln!(
                        "agentrt: the wasm bundle is not built in {}; run `cargo xtask demo` (or node host-browser/e2e/build.mjs)",
                        dirs.pkg.display()
                    );
                }
            }
            _ => eprintln!(
                "agentrt: no demo page directory found; pass --www DIR (host-browser/www) to serve the page"
            ),
        }
    }
    std::io::stdout().flush()?;
    // Host/Origin checks, framing headers and connection limits cover the page too.
    let app = match dirs {
        Some(dirs) => gateway::router_with_page(state, page::router(dirs)),
        None => gateway::router(state),
    };
    gateway::serve_app(listener, app, gateway::ServeLimits::default()).await?;
    Ok(code::OK)
}

// ---------------------------------------------------------------------------
// reads
// ---------------------------------------------------------------------------

async fn open_host(cli: &Cli) -> anyhow::Result<NativeHost> {
    let config = load_config(cli)?;
    let mut options = agent_host_native::host::NativeHostOptions::default();
    if let Some(ttl) = config.lease_ttl {
        options.lease_ttl = ttl;
    }
    options.store = store_url(cli, &config);
    Ok(NativeHost::open_with(data_dir(cli)?, options).await?)
}

async fn load_run(storage: &dyn Storage, run: &RunId) -> anyhow::Result<AgentRun> {
    storage
        .get_record::<AgentRun>(run.as_str())
        .await?
        .ok_or_else(|| anyhow::Error::new(RunError::NotFound(run.clone())))
}

async fn list_runs(cli: &Cli) -> anyhow::Result<u8> {
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

/// The runtime wired without a model ([`NoModel`]), for what never drives
/// a run: showing one, and a person's session actions.
async fn open_viewer(cli: &Cli) -> anyhow::Result<App> {
    let native = open_host(cli).await?;
    let options = AppOptions {
        config: load_config(cli)?,
        ..AppOptions::default()
    };
    Ok(App::on_host(native, options, Arc::new(NoModel)).await?)
}

/// The run card, from the assembly's run view (the one `readRun` shows):
/// the runtime is wired without a model ([`NoModel`]), since showing a run
/// never drives it.
async fn show(cli: &Cli, run: &RunId) -> anyhow::Result<u8> {
    let app = open_viewer(cli).await?;
    let view = app.run_view(run).await?;
    print_card(&view, cli.json)?;
    Ok(code::OK)
}

// ---------------------------------------------------------------------------
// running
// ---------------------------------------------------------------------------

async fn open_app(cli: &Cli, config: Config, spec: &ProviderSpec) -> anyhow::Result<App> {
    let mut host_options = agent_host_native::host::NativeHostOptions::default();
    if let Some(ttl) = config.lease_ttl {
        host_options.lease_ttl = ttl;
    }
    host_options.store = store_url(cli, &config);
    let native = NativeHost::open_with(data_dir(cli)?, host_options).await?;
    // Stopped by a signal, the run in progress is interrupted, not lost (S2.5).
    native.shut_down_on_signal();
    #[cfg(feature = "test-hooks")]
    if let Some(sqlite) = native.storage() {
        pause::install_from_env(sqlite);
    }
    let provider = provider_for(
        spec,
        &config,
        native.host().storage.as_ref(),
        native.host().clock.clone(),
    )
    .await?;
    let options = AppOptions {
        config,
        url_policy: None,
        script_sandbox: Some(
            script_sandbox::SandboxCommand::current_exe()
                .context("cannot find the agentrt executable for the script sandbox")?,
        ),
    };
    let app = App::on_host(native, options, provider).await?;
    // A server that cannot be reached leaves its tools out of this run;
    // the person is told why, and the next command tries again.
    for status in app.assembly().connect_mcp().await {
        if let Some(error) = &status.error {
            eprintln!("agentrt: MCP server {}: not connected: {error}", status.id);
        }
        for refused in &status.refused {
            eprintln!(
                "agentrt: MCP server {}: function {} not offered: {}",
                status.id, refused.name, refused.why
            );
        }
    }
    Ok(app)
}

async fn start_demo(cli: &Cli) -> anyhow::Result<u8> {
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
        },
        true,
    )
    .await
}

/// Where a new run goes: its session (default: a new one) and the files
/// brought into it first.
struct RunPlace<'a> {
    session: Option<SessionId>,
    attachments: &'a [PathBuf],
    /// Queue it for the workers instead of running it here.
    detach: bool,
    /// Run under this Agent Profile (S10.2).
    profile: Option<agent_profiles::ProfileId>,
}

async fn start_run(
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
    } = place;
    // Store the scenario first (through a host) so that the launch record can name it.
    let spec = match source {
        Source::Provider(spec) => spec,
        Source::Scenario(text) => {
            let host = open_host(cli).await?;
            let blob = agent_kernel::host::BlobRef::of(text.as_bytes());
            host.host()
                .storage
                .put_blob(&blob.hash, text.into_bytes())
                .await?;
            ProviderSpec::Scripted { scenario: blob }
        }
    };
    if detach {
        return enqueue_run(cli, spec, prompt, run_config, session, is_demo).await;
    }
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
        let entry = cli::sessions::attach(&app, &opened.guard, file, None, None).await?;
        cli::sessions::print_attached(cli, &entry, true)?;
    }
    app.runtime().recover().await?;
    let events = app.runtime().subscribe();
    let run = match profile {
        None => app.runtime().start(&session, prompt, run_config).await?,
        Some(profile) => {
            let choice = agent_assembly::ProfileChoice {
                profile: Some(profile),
                ..Default::default()
            };
            let (run, effective) = app
                .assembly()
                .start_with_profile(&session, prompt, run_config, &choice)
                .await
                .map_err(|e| match e {
                    agent_assembly::ProfileStartError::Profile(p) => usage(p.to_string()),
                    other => anyhow::Error::new(other),
                })?;
            for r in &effective.refused {
                hint(
                    cli,
                    &format!(
                        "the {} layer's {} was narrowed to {}",
                        r.layer, r.field, r.kept
                    ),
                );
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

fn session_busy(e: AppError) -> anyhow::Error {
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

async fn continue_run(cli: &Cli, run: &RunId, action: Action) -> anyhow::Result<u8> {
    let config = load_config(cli)?;
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

// ---------------------------------------------------------------------------
// research
// ---------------------------------------------------------------------------

enum ResearchAction {
    Show,
    Decide(agent_research::PlanDecision),
    Resume,
}

/// `agentrt research "topic"`: the start turn, then planning up to the
/// plan request. The start run gets a launch record, so that the later
/// commands reopen the task with the same model.
async fn start_research(
    cli: &Cli,
    config: Config,
    source: Source,
    topic: &str,
    run_config: RunConfig,
    session: Option<SessionId>,
) -> anyhow::Result<u8> {
    let spec = match source {
        Source::Provider(spec) => spec,
        Source::Scenario(text) => {
            let host = open_host(cli).await?;
            let blob = agent_kernel::host::BlobRef::of(text.as_bytes());
            host.host()
                .storage
                .put_blob(&blob.hash, text.into_bytes())
                .await?;
            ProviderSpec::Scripted { scenario: blob }
        }
    };
    let app = open_app(cli, config, &spec).await?;
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
    let view = a.advance_research(&session, &started.task).await?;
    // Shown here: the plan request is presented once (S6.4).
    let _ = a.present_plan(&session, &started.task).await?;
    cli::research::print_view(cli.json, &view)?;
    Ok(cli::research::exit_code(&view))
}

/// `agentrt plan show|approve|edit|reject TASK`, `agentrt research --resume TASK`.
async fn research_action(
    cli: &Cli,
    task: &agent_research::TaskId,
    action: ResearchAction,
) -> anyhow::Result<u8> {
    if let ResearchAction::Show = action {
        let app = open_viewer(cli).await?;
        let stored = cli::research::find(&app, task).await?;
        let view = app
            .assembly()
            .research_view(&cli::research::session_of(&stored), task)
            .await?;
        cli::research::print_view(cli.json, &view)?;
        return Ok(cli::research::exit_code(&view));
    }
    let config = load_config(cli)?;
    let (stored, launch) = {
        let viewer = open_viewer(cli).await?;
        let stored = cli::research::find(&viewer, task).await?;
        let start = RunId::new(stored.message.as_str())?;
        let launch = Launch::load(viewer.native().host().storage.as_ref(), &start)
            .await?
            .ok_or_else(|| anyhow::Error::new(AppError::NoLaunch(start.clone())))?;
        (stored, launch)
    };
    let app = open_app(cli, config, &launch.provider).await?;
    let session = cli::research::session_of(&stored);
    let _opened = app.open_session(&session).await.map_err(session_busy)?;
    let a = app.assembly();
    let view = match action {
        ResearchAction::Show => a.research_view(&session, task).await?,
        ResearchAction::Resume => a.resume_research(&session, task).await?,
        ResearchAction::Decide(decision) => {
            let current = a.research_view(&session, task).await?;
            let request = current.plan_request.map(|r| r.id).ok_or_else(|| {
                usage(format!(
                    "research task {task} has no plan waiting for a decision (it is {})",
                    current.phase
                ))
            })?;
            a.decide_plan(&session, task, &request, decision)
                .await
                .map_err(|e| match e {
                    agent_assembly::ResearchDeskError::Research(
                        agent_research::ResearchError::Plan(p),
                    ) => usage(format!("the edited plan is refused: {p}")),
                    other => anyhow::Error::new(other),
                })?
        }
    };
    cli::research::print_view(cli.json, &view)?;
    Ok(cli::research::exit_code(&view))
}

// ---------------------------------------------------------------------------
// workers
// ---------------------------------------------------------------------------

/// A queue refusal as the command line reports it.
fn queue_error(e: QueueError) -> anyhow::Error {
    match e {
        QueueError::NotFound(run) => anyhow::Error::new(RunError::NotFound(run)),
        QueueError::Storage(e) => anyhow::Error::new(e),
        other @ (QueueError::NotInterrupted { .. }
        | QueueError::NoLaunch(_)
        | QueueError::Config(_)
        | QueueError::ExplicitEndpoint(_)
        | QueueError::Provider(_)
        | QueueError::Encode(_)) => usage(other.to_string()),
        other => anyhow::Error::new(other),
    }
}

/// `agentrt run --detach`: queue the run for the workers, print its id.
async fn enqueue_run(
    cli: &Cli,
    spec: ProviderSpec,
    prompt: &str,
    run_config: RunConfig,
    session: Option<SessionId>,
    is_demo: bool,
) -> anyhow::Result<u8> {
    let host = open_host(cli).await?;
    let entropy = host.host().entropy.clone();
    let session = match session {
        Some(s) => s,
        None => SessionId::new(agent_kernel::host::random_id(entropy.as_ref(), "session-"))?,
    };
    let run = RunId::new(agent_kernel::host::random_id(entropy.as_ref(), "run-"))?;
    let provider = QueuedProvider::from_spec(&spec).map_err(|e| {
        usage(format!(
            "this run cannot be queued: {e}; give --scenario FILE or --provider-name NAME"
        ))
    })?;
    let request = StartRequest {
        config: run_config,
        history: None,
    };
    let entry = enqueue_start(
        host.host().storage.as_ref(),
        NewRun {
            run,
            session,
            prompt,
            request: &request,
            provider,
            demo: is_demo,
        },
        host.host().clock.wall_ms(),
    )
    .await
    .map_err(queue_error)?;
    print_queued(cli, &entry)?;
    Ok(code::OK)
}

/// `agentrt resume --detach`: queue the person's Resume for the workers.
async fn enqueue_resume_of(cli: &Cli, run: &RunId) -> anyhow::Result<u8> {
    let host = open_host(cli).await?;
    let entry = enqueue_resume(
        host.host().storage.as_ref(),
        run,
        host.host().clock.wall_ms(),
    )
    .await
    .map_err(queue_error)?;
    print_queued(cli, &entry)?;
    Ok(code::OK)
}

fn print_queued(cli: &Cli, entry: &agent_host_native::queue::QueuedRun) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if cli.json {
        writeln!(
            out,
            "{}",
            serde_json::json!({"event": "queued", "run": entry.run, "session": entry.session,
                "action": entry.action_name()})
        )?;
    } else {
        writeln!(out, "{}", entry.run)?;
        eprintln!(
            "run {} queued ({}) in session {}; an `agentrt worker` sharing this store executes it (see `agentrt queue`, `agentrt show {}`)",
            entry.run,
            entry.action_name(),
            entry.session,
            entry.run
        );
    }
    out.flush()?;
    Ok(())
}

/// `agentrt worker`: execute queued runs until SIGTERM or SIGINT; a second
/// signal exits at once (130).
async fn run_worker(cli: &Cli, options: WorkerOptions) -> anyhow::Result<u8> {
    let mut config = load_config(cli)?;
    config.store = store_url(cli, &config);
    let app_options = AppOptions {
        config,
        url_policy: None,
        script_sandbox: Some(
            script_sandbox::SandboxCommand::current_exe()
                .context("cannot find the agentrt executable for the script sandbox")?,
        ),
    };
    let worker = Worker::open(&data_dir(cli)?, app_options, options)
        .await
        .map_err(|e| match e {
            agent_host_native::worker::WorkerError::Concurrency => usage(e.to_string()),
            agent_host_native::worker::WorkerError::App(e) => anyhow::Error::new(e),
            other => anyhow::Error::new(other),
        })?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            return;
        };
        let mut stop_tx = Some(stop_tx);
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            match stop_tx.take() {
                Some(tx) => {
                    eprintln!(
                        "agentrt worker: stopping: no new runs; the runs held finish or are interrupted (signal again to exit at once)"
                    );
                    let _ = tx.send(());
                }
                None => std::process::exit(130),
            }
        }
    });
    if !cli.json {
        eprintln!(
            "agentrt worker {} (pid {}) executing queued runs; SIGTERM stops it",
            worker.status().owner,
            worker.status().pid
        );
    }
    let status = worker
        .run(async {
            let _ = stop_rx.await;
        })
        .await;
    if cli.json {
        println!("{}", serde_json::to_string(&status)?);
    } else {
        eprintln!(
            "agentrt worker stopped: {} completed, {} interrupted, {} waiting, {} failed, {} refused; {} stale writes refused by the fence",
            status.completed,
            status.interrupted,
            status.waiting,
            status.failed,
            status.refused,
            status.stale_refusals
        );
    }
    Ok(code::OK)
}

/// `agentrt queue`: the queued requests, oldest first.
async fn list_queue(cli: &Cli) -> anyhow::Result<u8> {
    let host = open_host(cli).await?;
    let queue = read_queue(host.host().storage.as_ref()).await?;
    let mut out = std::io::stdout().lock();
    for e in queue.runs() {
        if cli.json {
            writeln!(
                out,
                "{}",
                serde_json::json!({"run": e.run, "session": e.session, "action": e.action_name(),
                    "enqueued_at_ms": e.enqueued_at_ms})
            )?;
        } else {
            writeln!(
                out,
                "{}  {:<6} {}  {}",
                e.run,
                e.action_name(),
                e.session,
                format_time(e.enqueued_at_ms)
            )?;
        }
    }
    if !cli.json {
        writeln!(out, "{} queued", queue.runs().count())?;
    }
    for r in queue.refused() {
        // S14.2: a worker drops it without building any provider.
        eprintln!(
            "agentrt: the queued {} of run {} is refused: {}; a worker removes it",
            r.action, r.run, r.error
        );
    }
    for key in &queue.corrupt {
        eprintln!("agentrt: queue entry {key:?} does not decode; it is never taken (delete it)");
    }
    Ok(code::OK)
}

/// `agentrt workers`: every worker that reported to the store.
async fn list_workers(cli: &Cli) -> anyhow::Result<u8> {
    let host = open_host(cli).await?;
    let (workers, corrupt) = read_workers(host.host().storage.as_ref()).await?;
    let now = host.host().clock.wall_ms();
    let mut out = std::io::stdout().lock();
    for w in &workers {
        // A running worker writes its status every second.
        let fresh = now.saturating_sub(w.updated_at_ms) < 10_000;
        let state = match (w.state.as_str(), fresh) {
            ("stopped", _) => "stopped",
            (_, true) => w.state.as_str(),
            (_, false) => "silent",
        };
        if cli.json {
            let mut v = serde_json::to_value(w)?;
            v["seen"] = state.into();
            writeln!(out, "{v}")?;
        } else {
            writeln!(
                out,
                "pid {:<7} {:<8} held {:<3} completed {:<5} interrupted {:<4} waiting {:<4} failed {:<4} fence refusals {:<3} last seen {}  {}",
                w.pid,
                state,
                w.runs_held,
                w.completed,
                w.interrupted,
                w.waiting,
                w.failed,
                w.stale_refusals,
                format_time(w.updated_at_ms),
                w.owner
            )?;
        }
    }
    if workers.is_empty() && !cli.json {
        writeln!(out, "no worker has reported to this store")?;
    }
    for key in &corrupt {
        eprintln!("agentrt: worker record {key:?} does not decode (delete it)");
    }
    Ok(code::OK)
}
