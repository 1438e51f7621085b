//! The command line's argument types (clap) and what the dispatcher makes
//! of them: where a run's model comes from ([`Source`]) and what a person
//! does to a stored run ([`Action`]).
//!
//! The doc comments of the argument types are clap's `--help` text, written
//! for a terminal: `[provider]` names a TOML section and a bare URL is an
//! example, not rustdoc links.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::bare_urls)]

use std::path::PathBuf;

use agent_host_native::app::ProviderSpec;
use agent_kernel::{CallId, RequestId};
use agent_supervisor::{Choice, ProviderKind};
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
    /// Store runs in this PostgreSQL database (postgres://USER@HOST:PORT/DB),
    /// shared with other agentrt processes, instead of SQLite in the data
    /// directory; AGENTRT_STORE and the config's [store] url say the same.
    #[arg(long, global = true, value_name = "URL")]
    pub(crate) store: Option<String>,
    /// Print one JSON object per line instead of text.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// Keep MCP servers' login tokens in memory only, never in the data
    /// directory's credentials file.
    #[arg(long, global = true)]
    pub(crate) no_store_credentials: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum BudgetArg {
    Light,
    Standard,
    Extended,
}

/// `--mode`: Agent mode (tools, the default Agent system prompt) or Chat
/// mode (no tools at all, no default system prompt; S9.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ModeArg {
    Agent,
    Chat,
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
    Gemini,
    Anthropic,
}

impl ProviderArg {
    pub(crate) fn kind(self) -> ProviderKind {
        match self {
            ProviderArg::OpenaiCompatible => ProviderKind::OpenaiCompatible,
            ProviderArg::Gemini => ProviderKind::Gemini,
            ProviderArg::Anthropic => ProviderKind::Anthropic,
        }
    }
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
    /// Simulate tab loss on a scenario file (a scripted model, plugins on
    /// your own servers, sessions, the person's answers) over many seeds;
    /// prints the summary line, exits 0 only with no violations. In every
    /// default build (the feature `sim`).
    #[cfg(feature = "sim")]
    Sim {
        /// The scenario file (JSON, or TOML when it ends in `.toml`).
        scenario: PathBuf,
        /// How many seeds to play (0..N).
        #[arg(long, default_value_t = 100)]
        seeds: u64,
        /// Write the JSON report here.
        #[arg(long, value_name = "PATH")]
        report: Option<PathBuf>,
    },
    /// Start a run.
    Run {
        /// The prompt (default: a fixed prompt when a scenario is given).
        prompt: Option<String>,
        /// A scripted scenario (JSON) instead of a model.
        #[arg(long, value_name = "FILE", conflicts_with = "provider")]
        scenario: Option<PathBuf>,
        /// A model provider. Its API key comes from the variable the config
        /// section naming the same endpoint names, else OPENAI_API_KEY,
        /// GEMINI_API_KEY or ANTHROPIC_API_KEY; a keyless server (llama.cpp,
        /// Ollama) at --base-url needs none. Not with --detach (S14.2).
        #[arg(long, value_enum, requires = "model")]
        provider: Option<ProviderArg>,
        /// A provider of the configuration by name ([providers.NAME]); with
        /// --detach, of the configuration of the worker that executes the
        /// run (without it: the worker's [provider]). Its endpoint and key
        /// are the configuration's, never the queue's.
        #[arg(long, value_name = "NAME", conflicts_with_all = ["scenario", "provider"])]
        provider_name: Option<String>,
        /// The provider's endpoint (default: its public one). A key goes
        /// only to an endpoint a config section names (its base_url), or
        /// the usual variable to the public endpoint; any other URL gets
        /// no key: name it in [providers.NAME] if it needs one.
        #[arg(long, value_name = "URL", requires = "provider")]
        base_url: Option<String>,
        #[arg(long, value_name = "NAME")]
        model: Option<String>,
        /// Sampling temperature, 0 to 2.
        #[arg(long, value_name = "T")]
        temperature: Option<f32>,
        /// Agent mode (the default: tools and the default Agent system
        /// prompt) or Chat mode (no tools, no default system prompt).
        #[arg(long, value_enum)]
        mode: Option<ModeArg>,
        /// Replaces the default Agent system prompt.
        #[arg(long, value_name = "TEXT")]
        system: Option<String>,
        /// Added after the system prompt (the default one or --system).
        #[arg(long, value_name = "TEXT")]
        system_extension: Option<String>,
        #[command(flatten)]
        budget: BudgetArgs,
        #[arg(long, value_enum)]
        approval: Option<ApprovalArg>,
        /// Run in this session (default: a new one); a session's runs are
        /// one conversation.
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// Apply a Skill (a JSON manifest: name, description, instructions,
        /// allowed_tools): the run may use only the tools it allows, and its
        /// instructions join the system prompt.
        #[arg(long, value_name = "FILE")]
        skill: Option<PathBuf>,
        /// Bring this file into the run's session before it starts, at its
        /// base name (repeatable; as `agentrt attach`).
        #[arg(long = "attach", value_name = "FILE")]
        attach: Vec<PathBuf>,
        /// Queue the run for `agentrt worker` processes sharing the store
        /// and print its id at once, instead of running it here. It names
        /// its model only by --scenario or a provider name of the workers'
        /// configuration (--provider-name NAME, --model to choose another
        /// model of it), never an endpoint or a key's variable (S14.2).
        #[arg(long, conflicts_with = "attach")]
        detach: bool,
        /// Run under this Agent Profile (S10): its model, tools, budget
        /// and approval mode; the flags above may only narrow it.
        #[arg(long, value_name = "ID", conflicts_with = "detach")]
        profile: Option<String>,
    },
    /// Start Deep Research on a topic (S9): a research turn starts the task,
    /// planning proposes a plan, and the command waits for your decision
    /// (`agentrt plan approve|edit|reject TASK`); exit 3 while it waits.
    /// With --resume TASK, continue an interrupted task instead.
    Research {
        /// The topic, in your words (URLs in it are only text; give sources
        /// to read in the plan).
        #[arg(required_unless_present_any = ["resume", "stop"])]
        topic: Option<String>,
        /// Continue this interrupted task (the only way one continues).
        #[arg(long, value_name = "TASK", conflicts_with = "topic")]
        resume: Option<String>,
        /// Stop this task (S9.6): reads and synthesis stop, the report is
        /// what was read with the gap `stopped`, and it never resumes. Works
        /// also while another agentrt executes it. SIGTERM or Ctrl-C of the
        /// command that advances a task stops it the same way.
        #[arg(long, value_name = "TASK", conflicts_with_all = ["topic", "resume"])]
        stop: Option<String>,
        /// A scripted scenario (JSON) instead of a model.
        #[arg(long, value_name = "FILE", conflicts_with = "provider")]
        scenario: Option<PathBuf>,
        #[arg(long, value_enum, requires = "model")]
        provider: Option<ProviderArg>,
        #[arg(long, value_name = "URL", requires = "provider")]
        base_url: Option<String>,
        #[arg(long, value_name = "NAME")]
        model: Option<String>,
        #[arg(long, value_name = "T")]
        temperature: Option<f32>,
        #[command(flatten)]
        budget: BudgetArgs,
        #[arg(long, value_enum)]
        approval: Option<ApprovalArg>,
        /// The chat session (default: a new one).
        #[arg(long, value_name = "ID")]
        session: Option<String>,
    },
    /// Compact a session's conversation now (S12.4): every turn not yet
    /// summarised but the newest is summarised by the model into a stored
    /// summary that later runs send in their place; the raw turns stay.
    /// Prints the summary's turns and tokens; exit 0 with nothing to fold.
    Compact {
        /// The chat session.
        session: String,
        /// A scripted scenario (JSON) instead of a model.
        #[arg(long, value_name = "FILE", conflicts_with = "provider")]
        scenario: Option<PathBuf>,
        #[arg(long, value_enum, requires = "model")]
        provider: Option<ProviderArg>,
        #[arg(long, value_name = "URL", requires = "provider")]
        base_url: Option<String>,
        #[arg(long, value_name = "NAME")]
        model: Option<String>,
        /// The model's context window in tokens (default: the model's).
        #[arg(long, value_name = "TOKENS")]
        context_window: Option<u32>,
    },
    /// Agent Profiles (S10): list, show, save, diff, roll back, fork,
    /// export (no credentials, no run history) and import (narrowed to
    /// what this host allows).
    Profile {
        #[command(subcommand)]
        action: ProfileAction,
    },
    /// The memories agents may keep (S10.1), by scope (global,
    /// workspace:ID, profile:ID, session:ID): list, save, edit, delete and
    /// restore them.
    Memory {
        #[command(subcommand)]
        action: MemoryAction,
    },
    /// Knowledge bases: add text documents, search, list (S10.1).
    Kb {
        #[command(subcommand)]
        action: KbAction,
    },
    /// Show, approve, edit or reject a research task's plan (S9.4).
    Plan {
        #[command(subcommand)]
        action: PlanAction,
    },
    /// Print a research task's report: findings with their sources,
    /// unverified material and model knowledge, each apart (S9.6).
    Report { task: String },
    /// Bring a file into a session's workspace (an attachment: its content
    /// is external and untrusted to every tool that reads it).
    Attach {
        session: String,
        file: PathBuf,
        /// The workspace path (default: the file's base name).
        #[arg(long = "as", value_name = "PATH")]
        as_path: Option<String>,
        /// The MIME type (default: guessed from the name).
        #[arg(long, value_name = "TYPE")]
        mime: Option<String>,
    },
    /// List, inspect, copy and delete sessions.
    Session {
        #[command(subcommand)]
        action: SessionAction,
    },
    /// List the stored runs.
    Runs,
    /// Show one run: status, usage, activities, journal, pending requests.
    Show { run: String },
    /// Continue an interrupted run (the only way one continues).
    Resume {
        run: String,
        /// Queue the Resume for `agentrt worker` processes and return at once.
        #[arg(long)]
        detach: bool,
    },
    /// Execute queued runs (`run --detach`) until SIGTERM, many workers
    /// sharing one store (--store postgres://…). A worker never resumes a
    /// run by itself: an interrupted run waits for `resume`. Each run talks
    /// to a provider of this worker's --config ([provider], or the
    /// [providers.NAME] the run names); a run naming one it lacks fails,
    /// saying so.
    Worker {
        /// Most runs executed at once (each in its own session).
        #[arg(long, default_value_t = 4, value_name = "N")]
        concurrency: usize,
        /// How often the queue is read when idle, in milliseconds.
        #[arg(long, default_value_t = 250, value_name = "MS")]
        poll_ms: u64,
        /// On SIGTERM, how long held runs may go on before they are
        /// interrupted, in milliseconds.
        #[arg(long, default_value_t = 10_000, value_name = "MS")]
        drain_ms: u64,
        /// Keep this file updated with the worker's health as JSON (runs
        /// held, queue length, completed and interrupted counts).
        #[arg(long, value_name = "PATH")]
        status_file: Option<PathBuf>,
    },
    /// List the queued requests (oldest first).
    Queue,
    /// List the workers that report to the store, with their counts.
    Workers,
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
    /// Log in to an [[mcp]] server that needs authorization, or log out.
    Mcp {
        #[command(subcommand)]
        action: crate::cli::mcp_login::McpAction,
    },
    /// Check a URL or a workspace path against the policies.
    Check {
        #[command(subcommand)]
        what: CheckWhat,
    },
    /// Serve the local gateway (fetch for the browser, the demo page).
    Serve {
        /// The port on 127.0.0.1.
        #[arg(long, default_value_t = 8787, conflicts_with = "listen")]
        port: u16,
        /// Listen on this exact address (`IP:PORT`) instead of
        /// 127.0.0.1:PORT; beyond loopback only when given. TLS belongs to
        /// a reverse proxy in front.
        #[arg(long, value_name = "ADDR")]
        listen: Option<std::net::SocketAddr>,
        /// Also accept calls (with the token) from a page of this exact
        /// origin, e.g. https://chat.example (repeatable; no wildcards).
        #[arg(long = "allow-origin", value_name = "ORIGIN")]
        allow_origins: Vec<String>,
        /// Relay the page's model requests to this provider (repeatable):
        /// PROVIDER or PROVIDER=BASE_URL; the key comes from the server's
        /// environment (OPENAI_API_KEY, GEMINI_API_KEY, ANTHROPIC_API_KEY)
        /// and the page sends the gateway token in its place.
        #[arg(long = "relay", value_name = "PROVIDER[=URL]")]
        relays: Vec<String>,
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

/// A run's budget on the command line: a preset, and hard caps that replace
/// the preset's limits one by one (read by `Budget::from_spec`).
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct BudgetArgs {
    #[arg(long, value_enum)]
    pub(crate) budget: Option<BudgetArg>,
    /// At most this many tokens (prompt and completion) in the run.
    #[arg(long, value_name = "N")]
    pub(crate) max_tokens: Option<u64>,
    /// At most this many model rounds with tool calls.
    #[arg(long, value_name = "N")]
    pub(crate) max_tool_rounds: Option<u64>,
    /// At most this many tool calls.
    #[arg(long, value_name = "N")]
    pub(crate) max_tool_calls: Option<u64>,
    /// At most this much active time, in milliseconds.
    #[arg(long, value_name = "N")]
    pub(crate) max_duration_ms: Option<u64>,
}

impl BudgetArgs {
    /// The budget spec these flags give over `base` (the config file's
    /// `[budget]` spec, if any), or `None` when no budget flag is given:
    /// `--budget PRESET` replaces the base as a whole, each `--max-*` flag
    /// replaces its one field. What the spec means (a preset keeps its other
    /// limits, the bounds of each limit) is `Budget::from_spec`'s rule.
    pub(crate) fn spec(&self, base: Option<&serde_json::Value>) -> Option<serde_json::Value> {
        let caps = [
            ("max_tokens", self.max_tokens),
            ("max_tool_rounds", self.max_tool_rounds),
            ("max_tool_calls", self.max_tool_calls),
            ("max_duration_ms", self.max_duration_ms),
        ];
        if self.budget.is_none() && caps.iter().all(|(_, v)| v.is_none()) {
            return None;
        }
        let mut spec = match (self.budget, base) {
            (Some(preset), _) => {
                let mut spec = serde_json::Map::new();
                spec.insert("preset".into(), preset.name().into());
                spec
            }
            (None, Some(serde_json::Value::Object(base))) => base.clone(),
            (None, Some(serde_json::Value::String(name))) => {
                let mut spec = serde_json::Map::new();
                spec.insert("preset".into(), name.clone().into());
                spec
            }
            (None, _) => serde_json::Map::new(),
        };
        for (field, value) in caps {
            if let Some(value) = value {
                spec.insert(field.into(), value.into());
            }
        }
        Some(serde_json::Value::Object(spec))
    }
}

impl BudgetArg {
    /// The preset's name as `Budget::from_spec` reads it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            BudgetArg::Light => "light",
            BudgetArg::Standard => "standard",
            BudgetArg::Extended => "extended",
        }
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum SessionAction {
    /// Every session: its runs, files and Artifacts.
    List,
    /// The files of a session's workspace.
    Files { session: String },
    /// Copy a session's workspace, trash and Artifacts into a new session.
    Copy { from: String, to: String },
    /// Delete a session's workspace, trash and Artifact references (a
    /// copy's Artifacts stay readable); its runs stay, as history.
    Delete { session: String },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ProfileAction {
    /// Every profile: id, name, mode, latest revision, fork origin.
    List,
    /// One profile (its latest revision, or --revision N).
    Show {
        id: String,
        #[arg(long, value_name = "N")]
        revision: Option<u64>,
    },
    /// Save a profile from a JSON file (AgentProfileV2): a new profile, or
    /// a new revision of an existing one.
    Save { file: PathBuf },
    /// What changed between two revisions, field by field.
    Diff { id: String, a: u64, b: u64 },
    /// A new revision equal to revision TO.
    Rollback { id: String, to: u64 },
    /// A new profile NEW_ID from ID's latest revision, with fork metadata.
    Fork {
        id: String,
        new_id: String,
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
    },
    /// The shareable export (JSON on stdout): no credentials, no secret
    /// values, no run history.
    Export { id: String },
    /// Import an export; it never grants more than this host allows.
    Import {
        file: PathBuf,
        #[arg(long = "as", value_name = "ID")]
        as_id: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum MemoryAction {
    /// The memories of a scope (--forgotten: the deleted ones, restorable).
    List {
        scope: String,
        #[arg(long)]
        forgotten: bool,
    },
    /// Save a new memory.
    Save {
        scope: String,
        id: String,
        text: String,
    },
    /// Replace a memory's text; REVISION must be its current revision.
    Edit {
        scope: String,
        id: String,
        revision: u64,
        text: String,
    },
    /// Delete a memory at its current REVISION (kept, restorable).
    Delete {
        scope: String,
        id: String,
        revision: u64,
    },
    /// Bring a deleted or forgotten memory back as a new revision.
    Restore { scope: String, id: String },
}

#[derive(Debug, Subcommand)]
pub(crate) enum KbAction {
    /// The knowledge bases.
    List,
    /// Add UTF-8 text files to BASE (created when new), each a document
    /// named after the file; with `--file`, documents of any format
    /// `extract_document` reads (PDF included), read through its bounded
    /// readers.
    Add {
        base: String,
        #[arg(required_unless_present_any = ["documents", "workspace", "artifacts"])]
        files: Vec<PathBuf>,
        /// A document (PDF, HTML, Markdown, text, JSON, CSV) whose text
        /// `extract_document`'s readers extract; repeatable.
        #[arg(long = "file", value_name = "PATH")]
        documents: Vec<PathBuf>,
        /// The session whose workspace files and Artifacts are added.
        #[arg(long)]
        session: Option<String>,
        /// A workspace file of `--session`, read like `--file`; repeatable.
        #[arg(long = "workspace", value_name = "PATH", requires = "session")]
        workspace: Vec<String>,
        /// An Artifact of `--session`, read like `--file`; repeatable.
        #[arg(long = "artifact", value_name = "ID", requires = "session")]
        artifacts: Vec<String>,
    },
    /// The best passages of BASE for QUERY, with their provenance.
    Search { base: String, query: String },
}

#[derive(Debug, Subcommand)]
pub(crate) enum PlanAction {
    /// The task: its phase, plan, sources and gaps.
    Show { task: String },
    /// Approve the proposed plan: its sources are frozen and read, then
    /// the report is written.
    Approve { task: String },
    /// Approve a narrower plan: a JSON file with the plan's fields
    /// (questions, queries, sources, domains, dates) keeping only what you
    /// want; anything wider than proposed is refused.
    Edit { task: String, file: PathBuf },
    /// Reject the plan: nothing is read.
    Reject { task: String },
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
