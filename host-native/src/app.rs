//! The native runtime: a [`NativeHost`] and the [`Assembly`] over it (the
//! tools, the workspaces and the supervisor's [`Runtime`], wired in
//! `agent-assembly` as in every host), whose leases the host's heartbeat
//! renews. What stays here is native: the host, the script sandbox choice
//! for `run_javascript`, the URL policy and reader configuration that make
//! the `fetch_url` backend, and the launch records.
//!
//! A run's model provider is recorded beside it ([`Launch`], `Table::Meta`
//! key `agentrt/launch/<run>`), so that a later process (`approve`, `resume`)
//! talks to the same model. The record holds no secret and names no
//! environment variable: the key that goes to the recorded endpoint is the
//! one this process's own configuration gives that endpoint
//! ([`Config::key_for_endpoint`]), or none, so a record rewritten in a
//! shared store cannot send a person's variables elsewhere (issue 32). An
//! `api_key_env` field in a record written before that is ignored.

use std::path::Path;
use std::sync::Arc;

use agent_assembly::{Assembly, AssemblyError, OpenedSession, Parts, RunView, WorkspaceDirectory};
use agent_fetch::{ReaderConfig as FetchReaderConfig, SystemResolver, UrlPolicy, WebReader};
use agent_kernel::host::{BlobRef, Record, Storage, StorageError, StorageExt, Table};
use agent_kernel::{RunId, SessionId};
use agent_supervisor::provider::capabilities::CapabilityOverrides;
use agent_supervisor::{
    ModelProvider, ProviderKind, RemoteModel, RunError, Runtime, RuntimeOptions, Scenario,
    ScriptedProvider,
};
use agent_tools::ToolsHandle;
use agent_tools::builtin::javascript::{JavascriptTool, ScriptPlace};
use serde::{Deserialize, Serialize};

use crate::config::{Config, EndpointKey};
use crate::document_sandbox::{self, DocumentSandbox};
use crate::host::{HostError, NativeHost, NativeHostOptions};
use crate::script_sandbox::{SandboxCommand, ScriptSandbox};

/// Building the runtime failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AppError {
    #[error(transparent)]
    Host(#[from] HostError),
    #[error("cannot register the tools: {0}")]
    Tools(String),
    #[error("plugin {id}: {detail}")]
    Plugin { id: String, detail: String },
    #[error("model provider: {0}")]
    Provider(String),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Assembly(AssemblyError),
    #[error(
        "run {0} has no launch record (it was not started by agentrt); it cannot be continued from the command line"
    )]
    NoLaunch(RunId),
    /// A run names a provider this process's configuration lacks (S14.2).
    #[error("model provider: {0}")]
    ProviderName(#[from] crate::config::ProviderNameError),
}

impl From<AssemblyError> for AppError {
    fn from(e: AssemblyError) -> Self {
        match e {
            AssemblyError::Plugin { id, detail } => AppError::Plugin { id, detail },
            AssemblyError::UnknownAlwaysOn(id) => AppError::Plugin {
                detail: "always_on_plugins names it, but no [[plugins]] table defines it".into(),
                id,
            },
            AssemblyError::Run(e) => AppError::Run(e),
            other => AppError::Assembly(other),
        }
    }
}

/// Which model a run talks to, as recorded beside it (never a key, nor the
/// name of a variable holding one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ProviderSpec {
    /// A scripted scenario, stored as a blob.
    Scripted { scenario: BlobRef },
    /// A remote model: OpenAI-compatible, Gemini or Anthropic.
    Remote {
        provider: ProviderKind,
        /// `None`: the provider's public endpoint.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        base_url: Option<String>,
        /// The key, if any, is the one [`Config::key_for_endpoint`] gives
        /// this endpoint; an `api_key_env` in an old record is ignored.
        model: String,
        #[serde(default)]
        capabilities: CapabilityOverrides,
    },
    /// A provider of the executing process's own configuration, by name
    /// (S14.2): `[providers.NAME]`, or `[provider]` when `name` is none. The
    /// only remote kind a queued run may name ([`crate::workers::queue`]): the
    /// endpoint and the key's variable are the executor's, never the record's.
    Configured {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// The model the person chose; none: the configured provider's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// Launch records written before `Remote`: an OpenAI-compatible endpoint.
    OpenaiCompatible { base_url: String, model: String },
}

impl ProviderSpec {
    /// The model name a remote spec names.
    pub fn model(&self) -> Option<&str> {
        match self {
            ProviderSpec::Scripted { .. } => None,
            ProviderSpec::Configured { model, .. } => model.as_deref(),
            ProviderSpec::Remote { model, .. } | ProviderSpec::OpenaiCompatible { model, .. } => {
                Some(model)
            }
        }
    }
}

/// The launch record of a run started by agentrt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launch {
    pub run: RunId,
    pub provider: ProviderSpec,
    /// True for `agentrt demo` runs.
    #[serde(default)]
    pub demo: bool,
}

impl Record for Launch {
    const TABLE: Table = Table::Meta;
    fn key(&self) -> String {
        Launch::key_of(&self.run)
    }
}

impl Launch {
    pub fn key_of(run: &RunId) -> String {
        format!("agentrt/launch/{run}")
    }

    /// The launch record of `run`, if agentrt started it.
    pub async fn load(storage: &dyn Storage, run: &RunId) -> Result<Option<Launch>, StorageError> {
        storage.get_record(&Launch::key_of(run)).await
    }
}

/// Build the model provider a spec names; a [`ProviderSpec::Configured`]
/// one is looked up in `config` (this process's own configuration).
pub async fn provider_for(
    spec: &ProviderSpec,
    config: &Config,
    storage: &dyn Storage,
    clock: Arc<dyn agent_kernel::host::Clock>,
) -> Result<Arc<dyn ModelProvider>, AppError> {
    match spec {
        ProviderSpec::Configured { name, .. } => {
            let p = config.provider_named(name.as_deref())?;
            remote(
                p.kind,
                p.base_url.clone(),
                p.endpoint_key(),
                p.capabilities,
                clock,
            )
        }
        ProviderSpec::Scripted { scenario } => {
            let bytes = storage.get_blob(&scenario.hash).await?.ok_or_else(|| {
                AppError::Provider(format!("scenario blob {} is missing", scenario.hash))
            })?;
            let text = String::from_utf8(bytes)
                .map_err(|_| AppError::Provider("stored scenario is not UTF-8".into()))?;
            let scenario =
                Scenario::from_json(&text).map_err(|e| AppError::Provider(e.to_string()))?;
            Ok(Arc::new(ScriptedProvider::new(scenario, clock)))
        }
        ProviderSpec::Remote {
            provider,
            base_url,
            capabilities,
            ..
        } => remote(
            *provider,
            base_url.clone(),
            config.key_for_endpoint(*provider, base_url.as_deref()),
            *capabilities,
            clock,
        ),
        ProviderSpec::OpenaiCompatible { base_url, .. } => remote(
            ProviderKind::OpenaiCompatible,
            Some(base_url.clone()),
            config.key_for_endpoint(ProviderKind::OpenaiCompatible, Some(base_url)),
            CapabilityOverrides::default(),
            clock,
        ),
    }
}

/// A remote provider, its key from the environment variable
/// [`Config::key_for_endpoint`] chose for this endpoint (a required one must
/// be set; an optional one counts when set and not empty), or keyless.
fn remote(
    kind: ProviderKind,
    base_url: Option<String>,
    key: EndpointKey,
    capabilities: CapabilityOverrides,
    clock: Arc<dyn agent_kernel::host::Clock>,
) -> Result<Arc<dyn ModelProvider>, AppError> {
    let api_key = match key {
        EndpointKey::Variable {
            variable,
            required: true,
        } => Some(std::env::var(&variable).map_err(|_| {
            AppError::Provider(format!(
                "environment variable {variable} (the API key) is not set; export it and retry"
            ))
        })?),
        EndpointKey::Variable {
            variable,
            required: false,
        } => std::env::var(variable).ok().filter(|k| !k.is_empty()),
        EndpointKey::None => None,
    };
    RemoteModel {
        kind,
        base_url,
        api_key,
        capabilities,
    }
    .provider(clock)
    .map_err(|e| AppError::Provider(e.to_string()))
}

/// Options for [`App::open`].
#[derive(Clone, Default)]
pub struct AppOptions {
    pub config: Config,
    /// A URL policy replacing the public-web one (tests: loopback servers).
    pub url_policy: Option<UrlPolicy>,
    /// Run `run_javascript` scripts in sandbox processes started with this
    /// command, killed at their deadline (`agentrt` always does); `None`
    /// runs them on blocking threads of this process, bounded only by the
    /// engine's soft deadline (tests of other parts). When it is `agentrt
    /// __script-sandbox`, outside documents (HTML for `fetch_url` and
    /// `extract_document`, PDFs) are read in `agentrt __document-sandbox`
    /// of the same binary ([`crate::document_sandbox`]); otherwise in
    /// process.
    pub script_sandbox: Option<SandboxCommand>,
}

/// The native runtime, wired.
pub struct App {
    native: NativeHost,
    assembly: Assembly,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("native", &self.native)
            .finish_non_exhaustive()
    }
}

impl App {
    /// Open the host over `data_dir` and wire the runtime over it, talking
    /// to `provider`.
    pub async fn open(
        data_dir: &Path,
        options: AppOptions,
        provider: Arc<dyn ModelProvider>,
    ) -> Result<App, AppError> {
        let mut host_options = NativeHostOptions::default();
        if let Some(ttl) = options.config.lease_ttl {
            host_options.lease_ttl = ttl;
        }
        host_options.store = options.config.store.clone();
        let native = NativeHost::open_with(data_dir, host_options).await?;
        Self::on_host(native, options, provider).await
    }

    /// Like [`App::open`] over an already opened host.
    pub async fn on_host(
        native: NativeHost,
        options: AppOptions,
        provider: Arc<dyn ModelProvider>,
    ) -> Result<App, AppError> {
        let host = native.host().clone();
        let mut js = JavascriptTool::native(host.executor.clone(), host.clock.clone());
        if let Some(command) = &options.script_sandbox {
            let sandbox = ScriptSandbox::new(command.clone(), js.concurrency)
                .map_err(|e| AppError::Tools(format!("cannot prepare the script sandbox: {e}")))?;
            js = js.run_in(ScriptPlace::Runner(Arc::new(sandbox)));
        }
        let js = js.spawn(None).map_err(AppError::Tools)?;
        // Outside documents (HTML, PDF) are read in the document sandbox of
        // the same `agentrt` binary, capped and killed at the deadline.
        let documents = match options.script_sandbox.as_ref().and_then(|c| {
            c.sibling(
                crate::script_sandbox::SUBCOMMAND,
                document_sandbox::SUBCOMMAND,
            )
        }) {
            Some(command) => Some(
                DocumentSandbox::new(command, agent_readable::ExtractionSlots::SHARED_SLOTS)
                    .map_err(|e| {
                        AppError::Tools(format!("cannot prepare the document sandbox: {e}"))
                    })?,
            ),
            None => None,
        };
        let policy = options.url_policy.clone().unwrap_or_else(|| {
            UrlPolicy::public_web(Arc::new(SystemResolver::new(host.executor.clone())))
        });
        let reader_config = match &options.config.reader {
            Some(r) => FetchReaderConfig {
                jina_base: Some(r.endpoint.trim_end_matches('/').to_owned()),
                jina_key: r.api_key_env.as_ref().and_then(|v| std::env::var(v).ok()),
            },
            None => FetchReaderConfig::direct_only(),
        };
        // Readable-text extraction runs on the executor's blocking threads.
        let reader = WebReader::new(
            policy,
            reader_config,
            Default::default(),
            host.clock.clone(),
        )
        .with_blocking(host.executor.clone());
        let reader = match &documents {
            Some(sandbox) => reader.with_readable_extractor(Arc::new(sandbox.clone())),
            None => reader,
        };
        // Deep Research planning's `web_search` (S9.4), when configured.
        let search: Option<Arc<dyn agent_research::search::SearchBackend>> =
            match &options.config.search {
                Some(url) => Some(Arc::new(
                    agent_research::search::SearxngBackend::new(url, host.clock.clone())
                        .map_err(|e| AppError::Tools(format!("[search] searxng: {e}")))?,
                )),
                None => None,
            };
        let assembly = Assembly::build(Parts {
            host,
            owner: native.owner().clone(),
            provider,
            javascript: Some(js),
            pdf_reader: documents
                .clone()
                .map(|d| Arc::new(d) as Arc<dyn agent_tools::builtin::document::PdfReader>),
            html_extractor: documents
                .map(|d| Arc::new(d) as Arc<dyn agent_readable::ReadableExtractor>),
            fetch: Some(Arc::new(reader)),
            secrets: options.config.secret_resolver(),
            plugins: options.config.plugins.clone(),
            always_on_plugins: options.config.always_on_plugins.clone(),
            mcp: options
                .config
                .mcp
                .iter()
                .cloned()
                .map(|config| agent_assembly::McpServerSpec {
                    auth: options.config.mcp_auth.clone(),
                    ..agent_assembly::McpServerSpec::direct(config)
                })
                .collect(),
            search,
            runtime: RuntimeOptions {
                lease_ttl: native.lease_ttl(),
                ..RuntimeOptions::default()
            },
        })?;
        native.keep_renewed(assembly.runtime().leases());
        Ok(App { native, assembly })
    }

    pub fn native(&self) -> &NativeHost {
        &self.native
    }
    pub fn assembly(&self) -> &Assembly {
        &self.assembly
    }
    pub fn runtime(&self) -> &Runtime {
        self.assembly.runtime()
    }
    pub fn tools(&self) -> &ToolsHandle {
        self.assembly.tools()
    }
    pub fn workspaces(&self) -> &WorkspaceDirectory {
        self.assembly.workspaces()
    }

    /// A person stops `run` (`cancelled` / `user_stopped`), its `fetch_url`
    /// reads in flight cancelled: see [`Assembly::stop`].
    pub async fn stop(&self, run: &RunId) -> Result<(), AppError> {
        self.assembly.stop(run).await?;
        Ok(())
    }

    /// Take the session's lease for this process (refused with
    /// `LeaseError::Held` while another live process holds it), open its
    /// workspace with that lease's fence and recover what another process
    /// left `running` there: see [`Assembly::open_session`]. Keep the
    /// returned value (it holds the lease guard) while working.
    pub async fn open_session(&self, session: &SessionId) -> Result<OpenedSession, AppError> {
        Ok(self.assembly.open_session(session).await?)
    }

    /// The run as every host shows it: see [`Assembly::run_view`].
    pub async fn run_view(&self, run: &RunId) -> Result<RunView, RunError> {
        self.assembly.run_view(run).await
    }

    /// Record how `run` talks to its model.
    pub async fn record_launch(&self, launch: &Launch) -> Result<(), AppError> {
        let batch = agent_kernel::host::Batch::new().put_record(launch)?;
        self.native.host().storage.commit(batch).await?;
        Ok(())
    }
}
