//! `agentrt`: the command line of the native host. Runs agent turns over the
//! SQLite data directory, answers their pending requests, resumes them,
//! shows them, checks URLs and workspace paths, and serves the gateway.
//!
//! Exit codes: 0 completed (or allowed); 2 usage error or unknown run;
//! 3 refused, or waiting for the person (approval, input, or a decision on an
//! `effect_unknown` call); 4 failed or cancelled (and internal failures);
//! 5 interrupted.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use agent_host_native::app::{App, AppError, AppOptions, Launch, ProviderSpec, provider_for};
use agent_host_native::config::{Config, ConfigError, parse_approval, parse_preset};
use agent_host_native::host::{HostError, NativeHost, TokioExecutor};
#[cfg(feature = "test-hooks")]
use agent_host_native::pause;
use agent_host_native::sqlite::OpenError;
use agent_host_native::{demo, script_sandbox};
use agent_kernel::budget::Budget;
use agent_kernel::host::{LeaseError, Storage, StorageExt};
use agent_kernel::journal::{CallState, JournalRecord};
use agent_kernel::run::{
    Activity, ActivityKind, AgentRun, PendingKind, PendingRequest, RunStatus, StopReason,
};
use agent_kernel::{CallId, IdError, RequestId, RunId, SessionId};
use agent_supervisor::{Choice, RunConfig, RunError, RunEvent, Scenario};
use agent_tools::builtin::skill::Skill;
use anyhow::{Context, anyhow};
use clap::{Parser, Subcommand, ValueEnum};

/// Run and inspect trusted agent runs on this machine.
#[derive(Debug, Parser)]
#[command(name = "agentrt", version, about, long_about = None)]
struct Cli {
    /// Configuration file (TOML): provider, plugins and secrets, reader, budget, approval.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Data directory (default: the platform's data directory; AGENTRT_DATA_DIR overrides it).
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Print one JSON object per line instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum BudgetArg {
    Light,
    Standard,
    Extended,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ApprovalArg {
    Permissive,
    Strict,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ProviderArg {
    #[value(name = "openai-compatible")]
    OpenaiCompatible,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum DecisionArg {
    Retry,
    Done,
    Abandon,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the embedded demo scenario.
    Demo,
    /// Start a run.
    Run {
        /// The prompt (default: a fixed prompt when a scenario is given).
        prompt: Option<String>,
        /// A scripted scenario (JSON) instead of a model.
        #[arg(long, value_name = "FILE", conflicts_with = "provider")]
        scenario: Option<PathBuf>,
        /// A model provider (its API key comes from the variable named in
        /// the config file, or OPENAI_API_KEY).
        #[arg(long, value_enum, requires_all = ["base_url", "model"])]
        provider: Option<ProviderArg>,
        #[arg(long, value_name = "URL")]
        base_url: Option<String>,
        #[arg(long, value_name = "NAME")]
        model: Option<String>,
        #[arg(long, value_enum)]
        budget: Option<BudgetArg>,
        #[arg(long, value_enum)]
        approval: Option<ApprovalArg>,
        /// Run in this session (default: a new one).
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// Apply a Skill (a JSON manifest: name, description, instructions,
        /// allowed_tools): the run may use only the tools it allows, and its
        /// instructions join the system prompt.
        #[arg(long, value_name = "FILE")]
        skill: Option<PathBuf>,
    },
    /// List the stored runs.
    Runs,
    /// Show one run: status, usage, activities, journal, pending requests.
    Show { run: String },
    /// Continue an interrupted run (the only way one continues).
    Resume { run: String },
    /// Approve a pending approval request.
    Approve { run: String, request: String },
    /// Deny a pending approval request.
    Deny { run: String, request: String },
    /// Answer the run's pending question.
    Respond { run: String, text: String },
    /// Decide about a call whose effect is unknown.
    Decide {
        run: String,
        call: String,
        #[arg(value_enum)]
        decision: DecisionArg,
    },
    /// Stop (cancel) a run.
    Stop { run: String },
    /// Check a URL or a workspace path against the policies.
    Check {
        #[command(subcommand)]
        what: CheckWhat,
    },
    /// Serve the local gateway (fetch for the browser, the demo page).
    Serve {
        #[arg(long, default_value_t = 8787)]
        port: u16,
        /// The demo page's directory, served at `/` (default: $AGENTRT_WWW,
        /// else host-browser/www of the checkout).
        #[arg(long, value_name = "DIR")]
        www: Option<PathBuf>,
        /// The wasm bundle's directory, served at `/pkg/` (default:
        /// $AGENTRT_PKG, else host-browser/pkg of the checkout).
        #[arg(long, value_name = "DIR")]
        pkg: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum CheckWhat {
    /// Would `fetch_url` read this URL?
    Url { url: String },
    /// Is this a valid workspace path?
    Path { path: String },
}

/// Exit codes (documented in the README and the crate docs).
mod code {
    pub const OK: u8 = 0;
    pub const USAGE: u8 = 2;
    pub const WAITING: u8 = 3;
    pub const FAILED: u8 = 4;
    pub const INTERRUPTED: u8 = 5;
}

/// An error with the exit code it deserves.
#[derive(Debug)]
struct Exit {
    code: u8,
    message: String,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}
impl std::error::Error for Exit {}

fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Exit {
        code: code::USAGE,
        message: message.into(),
    })
}

/// The exit code for an error, by what it is.
fn code_of(err: &anyhow::Error) -> u8 {
    for cause in err.chain() {
        if let Some(e) = cause.downcast_ref::<Exit>() {
            return e.code;
        }
        if cause.is::<IdError>() || cause.is::<ConfigError>() || cause.is::<OpenError>() {
            return code::USAGE;
        }
        if let Some(e) = cause.downcast_ref::<HostError>() {
            return match e {
                HostError::DataDir { .. } | HostError::Open(_) | HostError::LeaseTtl(_) => {
                    code::USAGE
                }
                _ => code::FAILED,
            };
        }
        if let Some(e) = cause.downcast_ref::<RunError>() {
            return match e {
                RunError::NotFound(_)
                | RunError::NoSuchRequest { .. }
                | RunError::WrongRequestKind { .. }
                | RunError::InvalidAnswer { .. }
                | RunError::NoSuchDecision { .. }
                | RunError::WrongStatus { .. }
                | RunError::Id(_)
                | RunError::Config(_) => code::USAGE,
                RunError::DecisionPending { .. } | RunError::Lease(LeaseError::Held { .. }) => {
                    code::WAITING
                }
                _ => code::FAILED,
            };
        }
        if let Some(LeaseError::Held { .. }) = cause.downcast_ref::<LeaseError>() {
            return code::WAITING;
        }
        if let Some(e) = cause.downcast_ref::<AppError>() {
            match e {
                AppError::NoLaunch(_) | AppError::Plugin { .. } | AppError::Provider(_) => {
                    return code::USAGE;
                }
                AppError::Host(h) => {
                    return match h {
                        HostError::DataDir { .. } | HostError::Open(_) | HostError::LeaseTtl(_) => {
                            code::USAGE
                        }
                        _ => code::FAILED,
                    };
                }
                AppError::Run(_) => {}
                _ => return code::FAILED,
            }
        }
    }
    code::FAILED
}

/// The exit code for where a run stands.
fn code_for(run: &AgentRun) -> u8 {
    match run.status {
        RunStatus::Completed => code::OK,
        RunStatus::AwaitingApproval | RunStatus::AwaitingInput => code::WAITING,
        RunStatus::Interrupted => match run.stop_reason {
            Some(StopReason::EffectUnknown { .. }) => code::WAITING,
            _ => code::INTERRUPTED,
        },
        RunStatus::Failed | RunStatus::Cancelled => code::FAILED,
        RunStatus::Running => code::INTERRUPTED,
    }
}

fn main() -> ExitCode {
    // The sandbox child of `run_javascript`: before anything else, so that it
    // sets up no logging, runtime or panic hook of the command line.
    if std::env::args_os().nth(1).as_deref()
        == Some(std::ffi::OsStr::new(script_sandbox::SUBCOMMAND))
    {
        return script_sandbox::serve_stdio();
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
    match &cli.config {
        Some(path) => Ok(Config::load(path)?),
        None => Ok(Config::default()),
    }
}

fn parse_run_id(text: &str) -> anyhow::Result<RunId> {
    RunId::new(text).map_err(|e| usage(e.to_string()))
}

async fn dispatch(cli: Cli) -> anyhow::Result<u8> {
    match &cli.command {
        Command::Check { what } => check(&cli, what).await,
        Command::Serve { port, www, pkg } => serve(&cli, *port, www.clone(), pkg.clone()).await,
        Command::Runs => list_runs(&cli).await,
        Command::Show { run } => show(&cli, &parse_run_id(run)?).await,
        Command::Demo => start_demo(&cli).await,
        Command::Run {
            prompt,
            scenario,
            provider,
            base_url,
            model,
            budget,
            approval,
            session,
            skill,
        } => {
            let config = load_config(&cli)?;
            let spec_source = match (scenario, provider) {
                (Some(path), _) => {
                    let text = std::fs::read_to_string(path).map_err(|e| {
                        usage(format!("cannot read the scenario {}: {e}", path.display()))
                    })?;
                    Scenario::from_json(&text).map_err(|e| {
                        usage(format!("the scenario {} is invalid: {e}", path.display()))
                    })?;
                    Source::Scenario(text)
                }
                (None, Some(ProviderArg::OpenaiCompatible)) => {
                    Source::Provider(ProviderSpec::OpenaiCompatible {
                        base_url: base_url.clone().unwrap_or_default(),
                        model: model.clone().unwrap_or_default(),
                        api_key_env: Some(
                            config
                                .provider
                                .as_ref()
                                .and_then(|p| p.api_key_env.clone())
                                .unwrap_or_else(|| "OPENAI_API_KEY".into()),
                        ),
                    })
                }
                (None, None) => match &config.provider {
                    Some(p) => Source::Provider(ProviderSpec::OpenaiCompatible {
                        base_url: p.base_url.clone(),
                        model: p.model.clone(),
                        api_key_env: p.api_key_env.clone(),
                    }),
                    None => {
                        return Err(usage(
                            "no model to talk to: give --scenario FILE, --provider openai-compatible --base-url URL --model NAME, or a [provider] section in --config",
                        ));
                    }
                },
            };
            if let Source::Provider(ProviderSpec::OpenaiCompatible { base_url, .. }) = &spec_source
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
            if let Some(b) = budget {
                let name = match b {
                    BudgetArg::Light => "light",
                    BudgetArg::Standard => "standard",
                    BudgetArg::Extended => "extended",
                };
                run_config.budget = parse_preset(name).map(Budget::preset).unwrap_or_default();
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
            if let Source::Provider(ProviderSpec::OpenaiCompatible { model, .. }) = &spec_source {
                run_config.model.model = model.clone();
            }
            if let Some(path) = skill {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| usage(format!("cannot read the Skill {}: {e}", path.display())))?;
                let skill = Skill::parse(&text)
                    .map_err(|e| usage(format!("the Skill {} is refused: {e}", path.display())))?;
                run_config.skill = Some(skill.applied());
            }
            let prompt = prompt.clone().unwrap_or_else(|| "Run the scenario.".into());
            let session = match session {
                Some(s) => Some(SessionId::new(s.clone()).map_err(|e| usage(e.to_string()))?),
                None => None,
            };
            start_run(
                &cli,
                config,
                spec_source,
                &prompt,
                run_config,
                session,
                false,
            )
            .await
        }
        Command::Resume { run } => {
            let run = parse_run_id(run)?;
            continue_run(&cli, &run, Action::Resume).await
        }
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

enum Source {
    Scenario(String),
    Provider(ProviderSpec),
}

enum Action {
    Resume,
    Approve(RequestId),
    Deny(RequestId),
    Respond(String),
    Decide(CallId, Choice),
    Stop,
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
    port: u16,
    www: Option<PathBuf>,
    pkg: Option<PathBuf>,
) -> anyhow::Result<u8> {
    use agent_host_native::{gateway, page};
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
    let reader = agent_fetch::WebReader::new(policy, reader_config, Default::default(), clock)
        .with_blocking(executor);
    for (flag, dir) in [("--www", &www), ("--pkg", &pkg)] {
        if let Some(dir) = dir.as_ref().filter(|d| !d.is_dir()) {
            return Err(usage(format!(
                "{flag} {}: not a directory; give host-browser/www (--www) or the built bundle host-browser/pkg (--pkg)",
                dir.display()
            )));
        }
    }
    let dirs = page::PageDirs::resolve(www, pkg);
    let listener = gateway::bind(port).await.map_err(|e| {
        usage(format!(
            "cannot listen on 127.0.0.1:{port}: {e}; choose another --port"
        ))
    })?;
    let addr = listener.local_addr()?;
    let entropy = agent_host_native::host::OsEntropy::probe()?;
    let token = gateway::random_token(&entropy);
    let origin = gateway::page_origin(addr);
    let state = gateway::GatewayState::new(Arc::new(reader), token.clone(), [origin.clone()]);
    let page_url = dirs
        .as_ref()
        .map(|_| format!("{origin}/#gateway-token={token}"));
    if cli.json {
        println!(
            "{}",
            serde_json::json!({"event": "listening", "url": origin, "token": token, "page": page_url})
        );
    } else {
        println!("gateway listening on {origin}");
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
    let mut runs: Vec<AgentRun> = host.host().storage.scan_records("").await?;
    runs.sort_by_key(|r| r.created_at_ms);
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

fn status_text(run: &AgentRun) -> String {
    let status = serde_json::to_value(run.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    match &run.stop_reason {
        Some(reason) => format!("{status} ({})", reason_text(reason)),
        None => status,
    }
}

fn reason_text(reason: &StopReason) -> String {
    match reason {
        StopReason::Completed => "completed".into(),
        StopReason::UserStopped => "user_stopped".into(),
        StopReason::BudgetExhausted { dimension } => format!("budget_exhausted: {dimension:?}"),
        StopReason::Offline => "offline".into(),
        StopReason::PageInterrupted => "page_interrupted".into(),
        StopReason::EffectUnknown { call_id } => format!("effect_unknown: call {call_id}"),
        StopReason::RuntimeError { actor, message } => {
            format!("runtime_error in {actor}: {message}")
        }
    }
}

fn format_time(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

struct Card {
    run: AgentRun,
    activities: Vec<Activity>,
    journal: Vec<JournalRecord>,
    pending: Vec<PendingRequest>,
    output: Option<String>,
    /// Why each failed call failed (the tool's message, from its result blob).
    failures: Vec<(CallId, String)>,
}

async fn card(storage: &dyn Storage, run: &RunId) -> anyhow::Result<Card> {
    let record = load_run(storage, run).await?;
    let prefix = format!("{run}/");
    let activities: Vec<Activity> = storage.scan_records(&prefix).await?;
    let journal: Vec<JournalRecord> = storage.scan_records(&prefix).await?;
    let pending: Vec<PendingRequest> = storage.scan_records(&prefix).await?;
    let output = match &record.output {
        Some(blob) => storage
            .get_blob(&blob.hash)
            .await?
            .and_then(|b| String::from_utf8(b).ok()),
        None => None,
    };
    let mut failures = Vec::new();
    for j in &journal {
        let (CallState::Failed, Some(blob)) = (j.state, &j.result) else {
            continue;
        };
        let message = storage
            .get_blob(&blob.hash)
            .await?
            .and_then(|b| serde_json::from_slice::<agent_kernel::protocol::ToolResult>(&b).ok())
            .and_then(|r| match r {
                agent_kernel::protocol::ToolResult::Error(f) => {
                    Some(format!("{}: {}", f.code, f.message))
                }
                agent_kernel::protocol::ToolResult::Success(_) => None,
            });
        if let Some(m) = message.or_else(|| j.error.as_ref().map(|e| e.code.clone())) {
            failures.push((j.call_id.clone(), m));
        }
    }
    Ok(Card {
        run: record,
        activities,
        journal,
        pending,
        output,
        failures,
    })
}

fn state_text(state: CallState) -> String {
    serde_json::to_value(state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn print_card(card: &Card, json: bool) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let run = &card.run;
    if json {
        writeln!(
            out,
            "{}",
            serde_json::json!({
                "run": run.id, "session": run.session, "status": run.status,
                "stop_reason": run.stop_reason, "usage": run.usage, "budget": run.budget,
                "activities": card.activities, "journal": card.journal,
                "pending": card.pending, "output": card.output,
            })
        )?;
        return Ok(());
    }
    writeln!(out, "run {}  (session {})", run.id, run.session)?;
    writeln!(out, "  status:   {}", status_text(run))?;
    let b = &run.budget;
    let u = &run.usage;
    writeln!(
        out,
        "  usage:    {}/{} tool rounds, {}/{} tool calls, {} tokens{}, {:.1} s active{}",
        u.tool_rounds,
        b.max_tool_rounds,
        u.tool_calls,
        b.max_tool_calls,
        u.total_tokens(),
        b.max_tokens.map(|t| format!("/{t}")).unwrap_or_default(),
        u.active_ms as f64 / 1000.0,
        b.max_duration_ms
            .map(|d| format!("/{:.0} s", d as f64 / 1000.0))
            .unwrap_or_default()
    )?;
    writeln!(out, "  activities:")?;
    for a in &card.activities {
        writeln!(out, "    {:>3}  {}", a.seq, activity_text(&a.kind))?;
    }
    writeln!(out, "  journal:")?;
    for j in &card.journal {
        writeln!(
            out,
            "    {:<24} {:<22} {:<15} attempt {}",
            j.call_id.as_str(),
            j.tool,
            state_text(j.state),
            j.attempt
        )?;
    }
    for (call, why) in &card.failures {
        writeln!(out, "  refused:  {call}: {why}")?;
    }
    if let Some(text) = &card.output {
        writeln!(out, "  answer:   {}", text.lines().next().unwrap_or(""))?;
    }
    for p in &card.pending {
        writeln!(out, "  pending:  {}", pending_text(&run.id, p))?;
    }
    Ok(())
}

fn activity_text(kind: &ActivityKind) -> String {
    match kind {
        ActivityKind::StatusChanged { from, to, reason } => format!(
            "status {} -> {}{}",
            serde_json::to_value(from)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            serde_json::to_value(to)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            reason
                .as_ref()
                .map(|r| format!(" ({})", reason_text(r)))
                .unwrap_or_default()
        ),
        ActivityKind::ModelRequest { round } => format!("model request, round {round}"),
        ActivityKind::ModelResponse {
            round, tool_calls, ..
        } => {
            format!("model response, round {round}, {tool_calls} tool call(s)")
        }
        ActivityKind::ToolCall {
            call_id,
            tool,
            state,
        } => {
            format!("tool {tool} [{call_id}] {}", state_text(*state))
        }
        ActivityKind::ApprovalRequested { request, call_id } => {
            format!("approval requested: {request} for call {call_id}")
        }
        ActivityKind::ApprovalAnswered { request, approved } => format!(
            "approval {request} {}",
            if *approved { "granted" } else { "denied" }
        ),
        ActivityKind::InputRequested { request } => format!("question asked: {request}"),
        ActivityKind::InputAnswered { request } => format!("question answered: {request}"),
        ActivityKind::DecisionRequested { request, call_id } => {
            format!("decision needed: {request} for call {call_id} (effect unknown)")
        }
        ActivityKind::DecisionTaken { request, choice } => format!("decision {request}: {choice}"),
        ActivityKind::PlanUpdated { .. } => "plan updated".into(),
        ActivityKind::ChildStarted { child } => format!("child run {child} started"),
        ActivityKind::ConversationTrimmed {
            dropped_turns,
            kept_turns,
        } => format!(
            "conversation: {dropped_turns} oldest turn(s) left out to fit the context, {kept_turns} kept"
        ),
    }
}

/// A line telling the person what to type next: on stdout, or on stderr
/// with `--json` so that stdout stays one JSON object per line.
fn hint(cli: &Cli, line: &str) {
    if cli.json {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
}

fn pending_text(run: &RunId, p: &PendingRequest) -> String {
    match &p.kind {
        PendingKind::Approval {
            tool,
            target_summary,
            reason,
            ..
        } => format!(
            "approval {} for {tool} on {target_summary} ({reason})",
            p.id
        ),
        PendingKind::Input {
            choices: Some(choices),
            ..
        } => format!(
            "question {} (one of: {}); answer with `agentrt respond {run} TEXT`",
            p.id,
            choices.join(", ")
        ),
        PendingKind::Input {
            schema: Some(_), ..
        } => format!(
            "question {} (the answer must satisfy its JSON Schema); answer with `agentrt respond {run} JSON`",
            p.id
        ),
        PendingKind::Input { .. } => format!(
            "question {}; answer with `agentrt respond {run} TEXT`",
            p.id
        ),
        PendingKind::Decision { call_id, tool } => format!(
            "call {call_id} ({tool}) may or may not have happened; decide with `agentrt decide {run} {call_id} retry|done|abandon`"
        ),
    }
}

async fn show(cli: &Cli, run: &RunId) -> anyhow::Result<u8> {
    let host = open_host(cli).await?;
    let card = card(host.host().storage.as_ref(), run).await?;
    print_card(&card, cli.json)?;
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
    let native = NativeHost::open_with(data_dir(cli)?, host_options).await?;
    #[cfg(feature = "test-hooks")]
    pause::install_from_env(native.storage());
    let provider = provider_for(
        spec,
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
    Ok(App::on_host(native, options, provider).await?)
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
        None,
        true,
    )
    .await
}

async fn start_run(
    cli: &Cli,
    config: Config,
    source: Source,
    prompt: &str,
    run_config: RunConfig,
    session: Option<SessionId>,
    is_demo: bool,
) -> anyhow::Result<u8> {
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
    let app = open_app(cli, config, &spec).await?;
    let session = match session {
        Some(s) => s,
        None => SessionId::new(agent_kernel::host::random_id(
            app.native().host().entropy.as_ref(),
            "session-",
        ))?,
    };
    let _guard = app.open_session(&session).await.map_err(session_busy)?;
    app.runtime().recover().await?;
    let events = app.runtime().subscribe();
    let run = app.runtime().start(&session, prompt, run_config).await?;
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
                    let card = card(app.native().host().storage.as_ref(), run).await?;
                    for p in &card.pending {
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

/// Show progress until the run settles; on a terminal, ask for approvals;
/// otherwise print the commands that answer what the run waits for.
async fn follow(
    cli: &Cli,
    app: &App,
    run: &RunId,
    events: async_channel::Receiver<RunEvent>,
    show_card: bool,
) -> anyhow::Result<u8> {
    let interactive = std::io::stdin().is_terminal() && !cli.json;
    let fancy = std::io::stderr().is_terminal() && !cli.json;
    loop {
        let printer = Printer::new(fancy, cli.json, app.runtime().run(run).await.ok());
        let watcher = {
            let events = events.clone();
            let run = run.clone();
            async move {
                let mut printer = printer;
                while let Ok(event) = events.recv().await {
                    if event.run() == &run {
                        printer.event(&event);
                    }
                }
                printer
            }
        };
        let settled = {
            let waiter = app.runtime().wait_settled(run);
            futures::pin_mut!(waiter);
            let watcher = watcher;
            futures::pin_mut!(watcher);
            match futures::future::select(waiter, watcher).await {
                futures::future::Either::Left((settled, _)) => settled?,
                futures::future::Either::Right((_, waiter)) => waiter.await?,
            }
        };
        // Drain what is left of the events of this stretch.
        while let Ok(event) = events.try_recv() {
            if event.run() == run && cli.json {
                print_event(&event);
            }
        }
        if interactive && settled.status == RunStatus::AwaitingApproval {
            let pending = app.runtime().pending(run).await?;
            if let Some(p) = pending
                .iter()
                .find(|p| matches!(p.kind, PendingKind::Approval { .. }))
                && let PendingKind::Approval {
                    tool,
                    target_summary,
                    reason,
                    ..
                } = &p.kind
            {
                eprint!("{tool} on {target_summary}: {reason}. Approve? [y/N] ");
                let _ = std::io::stderr().flush();
                let mut answer = String::new();
                std::io::stdin()
                    .read_line(&mut answer)
                    .context("reading the answer")?;
                if answer.trim().eq_ignore_ascii_case("y")
                    || answer.trim().eq_ignore_ascii_case("yes")
                {
                    app.runtime().approve(run, &p.id).await?;
                } else {
                    app.runtime().deny(run, &p.id).await?;
                }
                continue;
            }
        }
        let card = card(app.native().host().storage.as_ref(), run).await?;
        if show_card && !cli.json {
            print_card(&card, false)?;
        } else if !cli.json {
            eprintln!("run {run}: {}", status_text(&card.run));
        }
        if cli.json {
            println!(
                "{}",
                serde_json::json!({"event": "settled", "run": run, "status": card.run.status,
                    "stop_reason": card.run.stop_reason, "usage": card.run.usage,
                    "pending": card.pending})
            );
        }
        for p in &card.pending {
            match &p.kind {
                PendingKind::Approval { .. } => {
                    hint(
                        cli,
                        &format!(
                            "awaiting approval; to approve run: agentrt approve {run} {}",
                            p.id
                        ),
                    );
                    hint(cli, &format!("to deny run: agentrt deny {run} {}", p.id));
                }
                _ => hint(cli, &pending_text(run, p)),
            }
        }
        return Ok(code_for(&card.run));
    }
}

fn print_event(event: &RunEvent) {
    match event {
        RunEvent::Activity(a) => println!(
            "{}",
            serde_json::json!({"event": "activity", "activity": a})
        ),
        RunEvent::TextDelta { run, text } => {
            println!(
                "{}",
                serde_json::json!({"event": "text", "run": run, "text": text})
            );
        }
    }
}

/// Live progress: indicatif on a terminal, plain lines otherwise, JSON lines with `--json`.
struct Printer {
    bar: Option<indicatif::ProgressBar>,
    json: bool,
    run: Option<AgentRun>,
    rounds: u64,
    calls: u64,
    tool: String,
}

impl Printer {
    fn new(fancy: bool, json: bool, run: Option<AgentRun>) -> Printer {
        let bar = fancy.then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} [{elapsed}] {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        let (rounds, calls) = run
            .as_ref()
            .map(|r| (r.usage.tool_rounds, r.usage.tool_calls))
            .unwrap_or((0, 0));
        Printer {
            bar,
            json,
            run,
            rounds,
            calls,
            tool: String::new(),
        }
    }

    fn event(&mut self, event: &RunEvent) {
        if self.json {
            print_event(event);
            return;
        }
        let RunEvent::Activity(activity) = event else {
            return;
        };
        match &activity.kind {
            ActivityKind::ModelResponse { tool_calls, .. } if *tool_calls > 0 => self.rounds += 1,
            ActivityKind::ToolCall { tool, state, .. } => {
                if *state == CallState::Running {
                    self.calls += 1;
                }
                self.tool = tool.clone();
            }
            _ => {}
        }
        let line = format!("{:>3}  {}", activity.seq, activity_text(&activity.kind));
        match &self.bar {
            Some(bar) => {
                let (max_rounds, max_calls) = self
                    .run
                    .as_ref()
                    .map(|r| (r.budget.max_tool_rounds, r.budget.max_tool_calls))
                    .unwrap_or((0, 0));
                bar.println(line);
                bar.set_message(format!(
                    "rounds {}/{max_rounds}  calls {}/{max_calls}  {}",
                    self.rounds, self.calls, self.tool
                ));
            }
            None => eprintln!("{line}"),
        }
    }
}

impl Drop for Printer {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
