//! `agent-assembly`: the one place that wires the runtime, for every host.
//!
//! It owns:
//! - which tool actors a runtime offers and how they are registered: each
//!   tool crate's built-in tools through its one registration function
//!   `builtin_tools(&host, ToolDeps { .. })` (`run_javascript` as the host
//!   spawned it and `extract_document`, workspace and Artifacts, Deep
//!   Research, `fetch_url` over the host's [`FetchBackend`], Memory,
//!   knowledge), and the configured HTTP plugins ([`Parts`]);
//! - which plugins are always on (the rule that an always-on id must name a
//!   configured plugin: [`check_always_on`]);
//! - Deep Research's wiring ([`research`]): the driver
//!   (`agent_research::driver`) over the supervisor's runtime as the
//!   kernel's `ChildRuns`, and the report's sink in the session's Artifacts;
//! - the tools actor (with workspace spill and stored loaded tools, S5.2),
//!   the [`WorkspaceDirectory`], and the supervisor's [`Runtime`];
//! - opening a session ([`Assembly::open_session`]: the stored lease, the
//!   session's workspace with that lease's fence, recovery of a run another
//!   owner left `running`);
//! - stopping a run ([`Assembly::stop`]; its calls in flight are cancelled
//!   through the protocol, `ToolsMsg::CancelRun`);
//! - the one view of a run that every host shows ([`view::RunView`]);
//! - what a person does to a session besides running turns: attachments,
//!   listing, reading files and Artifacts, copy and delete ([`sessions`]).
//!
//! A host passes in only what is host-specific ([`Parts`]): its `Host`
//! (storage, clock, executor, entropy, lifecycle), lease owner, model
//! provider, JavaScript engine, fetch backend, secrets and plugins, and the
//! runtime options (the lease TTL among them). It keeps what only it has:
//! process or tab leases, heartbeats, launch records, its command line or
//! JavaScript API.
//!
//! Where things are wired:
//! - a new **built-in tool**: give its crate a `builtin_tools(host: &Host,
//!   deps: ToolDeps) -> Result<Vec<BuiltinTool>, SpawnError>`
//!   ([`agent_kernel::tool::builtin`]) and extend the tools with it in
//!   [`Assembly::build`]; both hosts then offer it;
//! - a new **model provider**: implement `agent_supervisor::ModelProvider`
//!   and have the host build it (it reaches the assembly as
//!   [`Parts::provider`]);
//! - a new **host**: implement the kernel's host traits (`Storage`, `Clock`,
//!   `Executor`, `Entropy`), build a `Host`, fill [`Parts`] and call
//!   [`Assembly::build`];
//! - a new **storage backend**: implement `agent_kernel::host::Storage`
//!   (and pass the kernel's conformance cases); it reaches the assembly
//!   inside [`Parts::host`].
//!
//! Builds for native and `wasm32-unknown-unknown`; it depends on no host
//! runtime (tokio, web-sys).
//!
//! # Example
//!
//! A whole run on the kernel's in-memory host: build the assembly from a
//! host's parts, open the session (its lease), start a run, wait for it to
//! settle and read the run card every host shows:
//!
//! ```
//! use std::sync::Arc;
//!
//! use agent_assembly::{Assembly, Parts};
//! use agent_kernel::memory::MemoryHost;
//! use agent_kernel::run::RunStatus;
//! use agent_kernel::{OwnerId, SessionId};
//! use agent_supervisor::{RunConfig, RuntimeOptions, Scenario, ScriptedProvider};
//! use agent_tools::plugin::{SecretError, SecretHandle, SecretResolver, SecretValue};
//!
//! /// This host configures no secrets.
//! struct NoSecrets;
//!
//! #[async_trait::async_trait]
//! impl SecretResolver for NoSecrets {
//!     fn bound_origin(&self, _: &SecretHandle) -> Option<String> {
//!         None
//!     }
//!     async fn resolve(&self, handle: &SecretHandle) -> Result<SecretValue, SecretError> {
//!         Err(SecretError::Unknown(handle.0.clone()))
//!     }
//! }
//!
//! let mem = MemoryHost::fifo(7);
//! let scenario = Scenario::from_json(
//!     r#"{"turns": [
//!         {"tool_calls": [{"name": "workspace_write",
//!                          "arguments": {"path": "notes/a.md", "content": "Hello."}}]},
//!         {"text": "Written."}
//!     ]}"#,
//! )
//! .unwrap();
//! let assembly = Assembly::build(Parts {
//!     host: mem.host(),
//!     owner: OwnerId::new("tab-1").unwrap(),
//!     provider: Arc::new(ScriptedProvider::new(scenario, mem.host().clock)),
//!     javascript: None,
//!     pdf_reader: None,
//!     html_extractor: None,
//!     fetch: None,
//!     secrets: Arc::new(NoSecrets),
//!     plugins: Vec::new(),
//!     always_on_plugins: Vec::new(),
//!     mcp: Vec::new(),
//!     search: None,
//!     runtime: RuntimeOptions::default(),
//! })
//! .unwrap();
//! let session = SessionId::new("example").unwrap();
//! let view = mem
//!     .block_on_advancing(async {
//!         let _opened = assembly.open_session(&session).await.unwrap();
//!         let run = assembly
//!             .runtime()
//!             .start(&session, "Write a note.", RunConfig::default())
//!             .await
//!             .unwrap();
//!         assembly.runtime().wait_settled(&run).await.unwrap();
//!         assembly.run_view(&run).await.unwrap()
//!     })
//!     .unwrap();
//! assert_eq!(view.run.status, RunStatus::Completed);
//! assert_eq!(view.output.as_deref(), Some("Written."));
//! assert_eq!(view.journal.len(), 1); // the workspace write, committed
//! ```

use std::sync::Arc;

use agent_fetch::FetchBackend;
use agent_kernel::host::{Host, LeaseGuard, LeaseManager};
use agent_kernel::protocol::ToolAddr;
use agent_kernel::tool::{BuiltinTool, SpawnError};
use agent_kernel::{OwnerId, RunId, SessionId};
use agent_research::ResearchStore;
use agent_research::driver::{DriverParts, ResearchDriver};
use agent_research::execute::ReadChannel;
use agent_research::search::SearchBackend;
use agent_supervisor::{ModelProvider, RunError, Runtime, RuntimeOptions};
use agent_tools::builtin::document::{PdfReader, ReadableExtractor};
use agent_tools::registry::Exposure;
use agent_tools::{
    PluginManifest, Registry, RegistryError, SecretResolver, ToolRegistration, ToolsHandle,
    ToolsOptions, spawn_tools,
};
use agent_workspace::{SpillTarget, WorkspaceDocuments, WorkspaceSpill};

pub mod knowledge_files;
pub mod mcp;
mod mcp_elicitation;
pub mod memory;
pub mod no_model;
pub mod profiles;
pub mod research;
pub mod sessions;
#[cfg(feature = "ts")]
pub mod typescript;
pub mod view;

pub use agent_workspace::WorkspaceDirectory;
pub use mcp::{McpServerSpec, McpServerStatus, RefusedFunction};
pub use no_model::NoModel;
pub use profiles::{ProfileChoice, ProfileStartError};
pub use research::{RESEARCH_LABEL, ResearchDeskError, ResearchStart};
pub use sessions::{Attachment, SessionActionError, SessionSummary};
pub use view::{CallFailure, PendingView, RoundReasoning, RunView};

/// Building the runtime or opening a session failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AssemblyError {
    /// A built-in tool actor could not be spawned.
    #[error("cannot start the tool {tool}: {detail}")]
    Spawn { tool: &'static str, detail: String },
    /// A plugin manifest was refused.
    #[error("plugin {id}: {detail}")]
    Plugin { id: String, detail: String },
    /// An MCP server's configuration was refused (`detail` names it).
    #[error("{detail}")]
    Mcp { id: String, detail: String },
    /// `always_on_plugins` names an id no configured plugin has.
    #[error("always-on plugin {0:?} is not one of the configured plugins")]
    UnknownAlwaysOn(String),
    /// The registry refused the tools (a name taken twice, a bad schema).
    #[error("cannot register the tools: {0}")]
    Registry(#[from] RegistryError),
    /// Taking the lease or recovering the session failed.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The session's Deep Research tasks could not be read or interrupted.
    #[error("deep research: {0}")]
    Research(String),
}

impl AssemblyError {
    /// True when the error is in what the embedder or person configured
    /// (plugins, always-on ids, tool names), not in the runtime.
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            AssemblyError::Plugin { .. }
                | AssemblyError::Mcp { .. }
                | AssemblyError::UnknownAlwaysOn(_)
                | AssemblyError::Registry(_)
        )
    }
}

/// Refuse an always-on id that names no configured plugin (S5.2: an
/// always-on plugin's functions are in every request without `load_tools`).
/// Both hosts' configuration parsers and [`Assembly::build`] use this rule.
pub fn check_always_on<'a>(
    plugins: impl IntoIterator<Item = &'a str>,
    always_on: &[String],
) -> Result<(), AssemblyError> {
    let ids: Vec<&str> = plugins.into_iter().collect();
    match always_on.iter().find(|id| !ids.contains(&id.as_str())) {
        Some(id) => Err(AssemblyError::UnknownAlwaysOn(id.clone())),
        None => Ok(()),
    }
}

/// Spawn the actors of one configured plugin on `executor` and return their
/// registrations, always on when `always_on` names the plugin. What
/// [`Assembly::build`] does for each of [`Parts::plugins`]; a host that runs
/// plugins on another executor (the native `TabSim` runs them on tokio
/// beside its simulated tabs) registers them with
/// [`Assembly::build_with_tools`].
pub fn plugin_registrations(
    executor: Arc<dyn agent_kernel::host::Executor>,
    clock: Arc<dyn agent_kernel::host::Clock>,
    manifest: &PluginManifest,
    secrets: Arc<dyn SecretResolver>,
    always_on: &[String],
) -> Result<Vec<ToolRegistration>, AssemblyError> {
    let registrations =
        agent_tools::spawn_plugin(executor, clock, manifest, secrets).map_err(|e| {
            AssemblyError::Plugin {
                id: manifest.id.clone(),
                detail: e.to_string(),
            }
        })?;
    let always_on = always_on.contains(&manifest.id);
    Ok(registrations
        .into_iter()
        .map(|mut r| {
            if always_on {
                r.exposure = Exposure::AlwaysOn;
            }
            r
        })
        .collect())
}

/// A tool crate's built-in tools (its `builtin_tools(host, deps)`, the one
/// registration shape, [`agent_kernel::tool::builtin`]) as registry
/// entries: built-in, always on, trusted, for the modes the crate names.
/// `tool` names the crate's tools in the error when one cannot be spawned.
fn registrations(
    tool: &'static str,
    spawned: Result<Vec<BuiltinTool>, SpawnError>,
) -> Result<Vec<ToolRegistration>, AssemblyError> {
    let spawned = spawned.map_err(|e| AssemblyError::Spawn {
        tool,
        detail: e.to_string(),
    })?;
    Ok(spawned
        .into_iter()
        .map(|t| ToolRegistration::builtin(t.definition, t.addr).in_modes(&t.modes))
        .collect())
}

/// What a host passes in: only what is host-specific.
pub struct Parts {
    /// Storage, clock, executor, entropy and lifecycle of this host.
    pub host: Host,
    /// The lease owner: this process or tab.
    pub owner: OwnerId,
    /// The model every run of this runtime talks to.
    pub provider: Arc<dyn ModelProvider>,
    /// The already spawned `run_javascript` actor, or `None` (not offered).
    pub javascript: Option<ToolAddr>,
    /// Where `extract_document` reads PDFs: in process when `None` (the
    /// native host); the browser's Worker module in a tab.
    pub pdf_reader: Option<Arc<dyn PdfReader>>,
    /// Where `extract_document` extracts HTML's readable text: in process
    /// when `None`; natively the document sandbox process, in a tab the
    /// Worker module.
    pub html_extractor: Option<Arc<dyn ReadableExtractor>>,
    /// What `fetch_url` reads through, or `None` (not offered).
    pub fetch: Option<Arc<dyn FetchBackend>>,
    /// Resolves the secret handles plugins name.
    pub secrets: Arc<dyn SecretResolver>,
    /// The HTTP plugins to offer.
    pub plugins: Vec<PluginManifest>,
    /// Ids of `plugins` whose functions are always on (no `load_tools`).
    pub always_on_plugins: Vec<String>,
    /// The MCP servers to offer; connected by [`Assembly::connect_mcp`].
    pub mcp: Vec<McpServerSpec>,
    /// Where Deep Research planning searches the web (`web_search`, S9.4),
    /// or `None`: planning then uses only the topic and the person's URLs,
    /// and its plan says so.
    pub search: Option<Arc<dyn SearchBackend>>,
    /// The runtime's options; `lease_ttl` is the TTL of the stored leases.
    pub runtime: RuntimeOptions,
}

/// A session opened by [`Assembly::open_session`].
#[derive(Debug)]
pub struct OpenedSession {
    /// The stored lease of this owner; keep it while working.
    pub guard: LeaseGuard,
    /// Runs of the session another owner had left `running`, now
    /// `interrupted` / `page_interrupted` (S2.5).
    pub recovered: Vec<RunId>,
}

/// The wired runtime: the [`Runtime`], the tools actor and the workspaces.
pub struct Assembly {
    host: Host,
    runtime: Runtime,
    tools: ToolsHandle,
    workspaces: WorkspaceDirectory,
    /// Resolves the secret handles plugins and MCP servers name.
    secrets: Arc<dyn SecretResolver>,
    mcp: Arc<mcp::McpServers>,
    /// The Deep Research driver, over this runtime.
    research: research::Driver,
    /// Each run's Memory scopes and knowledge allowlist (S10.1).
    grants: memory::SharedGrants,
    /// `extract_document`'s bounded readers, for knowledge from files.
    documents: agent_tools::builtin::document::DocumentTool,
}

impl std::fmt::Debug for Assembly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Assembly")
            .field("runtime", &self.runtime)
            .finish_non_exhaustive()
    }
}

impl Assembly {
    /// Spawn every tool actor, register them, spawn the tools actor and
    /// build the runtime. Nothing here awaits.
    pub fn build(parts: Parts) -> Result<Assembly, AssemblyError> {
        Self::build_with_tools(parts, Vec::new())
    }

    /// [`Assembly::build`], registering also `own_tools`: tools a host or a
    /// test host spawned itself (the native `TabSim` wires a test host's
    /// tools here), beside the built-ins and plugins.
    pub fn build_with_tools(
        parts: Parts,
        own_tools: Vec<ToolRegistration>,
    ) -> Result<Assembly, AssemblyError> {
        check_always_on(
            parts.plugins.iter().map(|p| p.id.as_str()),
            &parts.always_on_plugins,
        )?;
        let plugin_ids: Vec<&str> = parts.plugins.iter().map(|p| p.id.as_str()).collect();
        // On wasm32 nothing here is Send, and nothing needs to be.
        #[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
        let mcp = Arc::new(mcp::McpServers::new(
            parts.mcp,
            &plugin_ids,
            &*parts.secrets,
        )?);
        let host = parts.host;
        let workspaces = WorkspaceDirectory::new();
        let document_source = Arc::new(WorkspaceDocuments::new(workspaces.clone()));
        let documents = knowledge_files::knowledge_reader(
            agent_tools::builtin::document::DocumentTool::new(
                host.executor.clone(),
                host.clock.clone(),
                document_source.clone(),
            )
            .read_pdfs_with(parts.pdf_reader.clone())
            .extract_html_with(parts.html_extractor.clone()),
        );
        let mut tools: Vec<ToolRegistration> = Vec::new();
        tools.extend(registrations(
            "run_javascript and extract_document",
            agent_tools::builtin::builtin_tools(
                &host,
                agent_tools::builtin::ToolDeps {
                    documents: document_source,
                    pdf_reader: parts.pdf_reader,
                    html_extractor: parts.html_extractor,
                    javascript: parts.javascript,
                },
            ),
        )?);
        tools.extend(registrations(
            "workspace",
            agent_workspace::builtin_tools(
                &host,
                agent_workspace::ToolDeps {
                    directory: workspaces.clone(),
                },
            ),
        )?);
        // Deep Research (S9): `start_deep_research` for its start turn and,
        // with a search backend, `web_search` for planning; only `research`
        // runs see them. `fetch_url` serves both modes.
        let leases = LeaseManager::new(
            host.storage.clone(),
            host.clock.clone(),
            host.executor.clone(),
            parts.owner.clone(),
            parts.runtime.lease_ttl,
        );
        let research_store = ResearchStore::new(host.storage.clone(), host.clock.clone());
        tools.extend(registrations(
            "deep research",
            agent_research::builtin_tools(
                &host,
                agent_research::ToolDeps {
                    store: research_store.clone(),
                    leases: leases.clone(),
                    search: parts.search.clone(),
                },
            ),
        )?);
        let mut reader = None;
        if let Some(backend) = parts.fetch {
            let fetch = registrations(
                agent_fetch::FETCH_URL,
                agent_fetch::builtin_tools(&host, agent_fetch::ToolDeps { backend }),
            )?;
            reader = fetch
                .iter()
                .find(|t| t.definition.name == agent_fetch::FETCH_URL)
                .map(|t| ReadChannel {
                    addr: t.addr.clone(),
                    definition: t.definition.clone(),
                });
            tools.extend(fetch);
        }
        for manifest in &parts.plugins {
            tools.extend(plugin_registrations(
                host.executor.clone(),
                host.clock.clone(),
                manifest,
                parts.secrets.clone(),
                &parts.always_on_plugins,
            )?);
        }
        // Memory and knowledge (S10.1): Agent runs only; what each run may
        // do is its grant (`memory::RunGrants`).
        #[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
        let grants = Arc::new(memory::RunGrants::new(
            agent_knowledge::KnowledgeBases::unloaded(agent_knowledge::KnowledgeStore::new(
                host.storage.clone(),
                host.clock.clone(),
            )),
            workspaces.clone(),
        ));
        // Offered only to runs granted a Memory scope or a knowledge base:
        // a tool that could only refuse wastes the model's rounds.
        tools.extend(
            registrations(
                "memory",
                agent_memory::builtin_tools(
                    &host,
                    agent_memory::ToolDeps {
                        store: agent_memory::MemoryStore::new(
                            host.storage.clone(),
                            host.clock.clone(),
                        ),
                        access: grants.clone(),
                    },
                ),
            )?
            .into_iter()
            .map(|t| t.only_with_grant(memory::MEMORY_GRANT)),
        );
        tools.extend(
            registrations(
                "knowledge_search",
                agent_knowledge::builtin_tools(
                    &host,
                    agent_knowledge::ToolDeps {
                        bases: grants.bases_handle(),
                        access: grants.clone(),
                    },
                ),
            )?
            .into_iter()
            .map(|t| t.only_with_grant(memory::KNOWLEDGE_GRANT)),
        );
        tools.extend(own_tools);
        let mut registry = Registry::new();
        registry.register_all(tools)?;
        let spill = WorkspaceSpill::new(workspaces.clone(), SpillTarget::Workspace);
        let tools = spawn_tools(
            host.executor.clone(),
            host.clock.clone(),
            registry,
            ToolsOptions {
                spill: Some(Arc::new(spill)),
                // A run's loaded tools survive a restart or reload (S5.2).
                storage: Some(host.storage.clone()),
                ..ToolsOptions::default()
            },
        );
        let runtime = Runtime::with_leases(
            host.clone(),
            leases,
            tools.addr.clone(),
            parts.provider,
            parts.runtime,
        );
        grants.set_runtime(runtime.clone());
        Ok(Assembly {
            research: ResearchDriver::new(
                research::RuntimeRuns(runtime.clone()),
                DriverParts {
                    store: research_store,
                    reader,
                    read_tool: agent_fetch::FETCH_URL.to_owned(),
                    search_configured: parts.search.is_some(),
                    entropy: host.entropy.clone(),
                },
            ),
            host,
            runtime,
            tools,
            workspaces,
            documents,
            secrets: parts.secrets,
            mcp,
            grants,
        })
    }

    /// The same assembly with its runtime replaced by `wrap(runtime)`, before
    /// any run started (the native `TabSim` applies a test's sabotage here).
    pub fn map_runtime(mut self, wrap: impl FnOnce(Runtime) -> Runtime) -> Assembly {
        self.runtime = wrap(self.runtime);
        self.research = self
            .research
            .with_runs(research::RuntimeRuns(self.runtime.clone()));
        self
    }

    pub fn host(&self) -> &Host {
        &self.host
    }
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }
    pub fn tools(&self) -> &ToolsHandle {
        &self.tools
    }
    pub fn workspaces(&self) -> &WorkspaceDirectory {
        &self.workspaces
    }

    /// Take the session's stored lease for this owner (refused with
    /// `LeaseError::Held` while another live owner holds it), open the
    /// session's workspace with that lease's fence, and recover the runs of
    /// the session another owner left `running` (S2.5): now that this owner
    /// holds the session, nobody else executes them. Keep the guard while
    /// working; on an error nothing stays open.
    pub async fn open_session(&self, session: &SessionId) -> Result<OpenedSession, AssemblyError> {
        let guard = self
            .runtime
            .leases()
            .acquire(session)
            .await
            .map_err(RunError::from)?;
        // The workspace actors write with this tenure's fence: actors left
        // open from an earlier tenure (its lease released, then taken
        // again with a newer epoch) are replaced, or every write would be
        // refused as stale.
        let fence = guard.fence();
        let opened_here = self
            .workspaces
            .get(session)
            .is_none_or(|open| open.fence != fence);
        if opened_here {
            self.workspaces.open(&self.host, fence, self.quotas());
        }
        let recovered = match self.runtime.recover_session(session).await {
            // A new tenure (a reload, a take-over, another process): Deep
            // Research tasks left mid-phase wait for Resume (S9.6).
            Ok(recovered) if opened_here => self
                .research
                .store()
                .interrupt_active(&guard.fence())
                .await
                .map(|_| recovered)
                .map_err(|e| AssemblyError::Research(e.to_string())),
            Ok(recovered) => Ok(recovered),
            Err(e) => Err(e.into()),
        };
        match recovered {
            Ok(recovered) => Ok(OpenedSession { guard, recovered }),
            Err(e) => {
                if opened_here {
                    self.workspaces.close(session);
                }
                Err(e)
            }
        }
    }

    /// A person stops `run` (`cancelled` / `user_stopped`). The supervisor
    /// tells the tools actor (`ToolsMsg::CancelRun`), which cancels the
    /// run's calls in flight: a `fetch_url` read ends at once.
    pub async fn stop(&self, run: &RunId) -> Result<(), RunError> {
        self.runtime.stop(run).await
    }

    /// The tools `run` waits on that this runtime does not offer as they
    /// were (S5.9): a call journaled `prepared`, `running` or
    /// `effect_unknown`, or a pending approval, whose tool is not
    /// registered with the fingerprint it was journaled under. A page tool
    /// lives only while its page has it registered, so after a reload
    /// Resume must name what is missing and change nothing; the runtime's
    /// own tools (reserved names) are always there.
    pub async fn missing_tools(&self, run: &RunId) -> Result<Vec<String>, RunError> {
        use agent_kernel::journal::CallState;
        use agent_kernel::run::PendingKind;
        let record = self.runtime.journal(run).await?;
        let pending = self.runtime.pending(run).await?;
        let registered = self
            .tools
            .snapshot()
            .await
            .map_err(|e| RunError::Inconsistent {
                run: run.clone(),
                detail: format!("the tools actor did not answer: {e}"),
            })?;
        let waiting = record
            .iter()
            .filter(|r| {
                matches!(
                    r.state,
                    CallState::Prepared | CallState::Running | CallState::EffectUnknown
                )
            })
            .map(|r| (r.tool.clone(), r.fingerprint.clone()))
            .chain(pending.iter().filter_map(|p| match &p.kind {
                PendingKind::Approval { tool, identity, .. } => {
                    Some((tool.clone(), identity.fingerprint.clone()))
                }
                _ => None,
            }));
        let mut missing: Vec<String> = Vec::new();
        for (tool, fingerprint) in waiting {
            let reserved = agent_kernel::tool::names::RESERVED_TOOL_NAMES.contains(&tool.as_str());
            let present = registered
                .get(&tool)
                .is_some_and(|(_, registered)| *registered == fingerprint);
            if !reserved && !present && !missing.contains(&tool) {
                missing.push(tool);
            }
        }
        Ok(missing)
    }

    /// The run as every host shows it (`agentrt show`, `readRun`).
    pub async fn run_view(&self, run: &RunId) -> Result<RunView, RunError> {
        RunView::read(&self.runtime, run).await
    }

    /// One pending request as every host shows it.
    pub async fn pending_view(&self, request: agent_kernel::run::PendingRequest) -> PendingView {
        PendingView::read(&self.runtime, request).await
    }
}
