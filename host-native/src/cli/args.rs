//! The command line's argument types (clap) and what the dispatcher makes
//! of them: where a run's model comes from ([`Source`]) and what a person
//! does to a stored run ([`Action`]).

use std::path::PathBuf;

use agent_host_native::app::ProviderSpec;
use agent_kernel::{CallId, RequestId};
use agent_supervisor::Choice;
use clap::{Parser, Subcommand, ValueEnum};

/// Run and inspect trusted agent runs on this machine.
#[derive(Debug, Parser)]
#[command(name = "agentrt", version, about, long_about = None)]
pub(crate) struct Cli {
    /// Configuration file (TOML): provider, plugins and secrets, reader, budget, approval.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Data directory (default: the platform's data directory; AGENTRT_DATA_DIR overrides it).
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) data_dir: Option<PathBuf>,
    /// Print one JSON object per line instead of text.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum BudgetArg {
    Light,
    Standard,
    Extended,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ApprovalArg {
    Permissive,
    Strict,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ProviderArg {
    #[value(name = "openai-compatible")]
    OpenaiCompatible,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum DecisionArg {
    Retry,
    Done,
    Abandon,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
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
pub(crate) enum CheckWhat {
    /// Would `fetch_url` read this URL?
    Url { url: String },
    /// Is this a valid workspace path?
    Path { path: String },
}

pub(crate) enum Source {
    Scenario(String),
    Provider(ProviderSpec),
}

pub(crate) enum Action {
    Resume,
    Approve(RequestId),
    Deny(RequestId),
    Respond(String),
    Decide(CallId, Choice),
    Stop,
}
