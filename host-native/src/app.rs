//! The wired native runtime: a [`NativeHost`], the tools actor with every
//! tool actor registered (JavaScript, document extraction, workspace and
//! Artifacts, `fetch_url`, configured HTTP plugins), and the supervisor's
//! [`Runtime`] whose leases the host's heartbeat renews.
//!
//! A run's model provider is recorded beside it ([`Launch`], `Table::Meta`
//! key `agentrt/launch/<run>`), so that a later process (`approve`, `resume`)
//! talks to the same model. The record holds no secret: an API key is named
//! by its environment variable and read again by that process.

use std::path::Path;
use std::sync::Arc;

use agent_fetch::{
    FetchActor, ReaderConfig as FetchReaderConfig, SystemResolver, UrlPolicy, WebReader,
};
use agent_kernel::host::{BlobRef, LeaseGuard, Record, Storage, StorageError, StorageExt, Table};
use agent_kernel::{RunId, SessionId};
use agent_supervisor::{
    ModelProvider, OpenAiConfig, OpenAiProvider, RunError, Runtime, RuntimeOptions, Scenario,
    ScriptedProvider,
};
use agent_tools::builtin::document::DocumentTool;
use agent_tools::builtin::javascript::{JavascriptTool, ScriptPlace};
use agent_tools::{Registry, ToolRegistration, ToolsHandle, ToolsOptions, spawn_tools};
use agent_workspace::{
    Quotas, SpillTarget, WorkspaceDirectory, WorkspaceDocuments, WorkspaceSpill,
};
use serde::{Deserialize, Serialize};

use crate::config::Config;
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
    #[error(
        "run {0} has no launch record (it was not started by agentrt); it cannot be continued from the command line"
    )]
    NoLaunch(RunId),
}

/// Which model a run talks to, as recorded beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ProviderSpec {
    /// A scripted scenario, stored as a blob.
    Scripted { scenario: BlobRef },
    /// An OpenAI-compatible endpoint; the key is read from `api_key_env`.
    OpenaiCompatible {
        base_url: String,
        model: String,
        #[serde(default)]
        api_key_env: Option<String>,
    },
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

/// Build the model provider a spec names.
pub async fn provider_for(
    spec: &ProviderSpec,
    storage: &dyn Storage,
    clock: Arc<dyn agent_kernel::host::Clock>,
) -> Result<Arc<dyn ModelProvider>, AppError> {
    match spec {
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
        ProviderSpec::OpenaiCompatible {
            base_url,
            api_key_env,
            ..
        } => {
            let mut config = OpenAiConfig::new(base_url.clone());
            if let Some(var) = api_key_env {
                config.api_key = Some(std::env::var(var).map_err(|_| {
                    AppError::Provider(format!(
                        "environment variable {var} (the API key) is not set; export it and retry"
                    ))
                })?);
            }
            Ok(Arc::new(
                OpenAiProvider::new(config, clock)
                    .map_err(|e| AppError::Provider(e.to_string()))?,
            ))
        }
    }
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
    /// engine's soft deadline (tests of other parts).
    pub script_sandbox: Option<SandboxCommand>,
}

/// The native runtime, wired.
pub struct App {
    native: NativeHost,
    runtime: Runtime,
    tools: ToolsHandle,
    workspaces: WorkspaceDirectory,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("native", &self.native)
            .finish_non_exhaustive()
    }
}

impl App {
    /// Open the host over `data_dir`, spawn and register every tool actor,
    /// and build the runtime talking to `provider`.
    pub async fn open(
        data_dir: &Path,
        options: AppOptions,
        provider: Arc<dyn ModelProvider>,
    ) -> Result<App, AppError> {
        let mut host_options = NativeHostOptions::default();
        if let Some(ttl) = options.config.lease_ttl {
            host_options.lease_ttl = ttl;
        }
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
        let workspaces = WorkspaceDirectory::new();
        let mut tools: Vec<ToolRegistration> = Vec::new();

        let mut js = JavascriptTool::native(host.executor.clone(), host.clock.clone());
        if let Some(command) = &options.script_sandbox {
            let sandbox = ScriptSandbox::new(command.clone(), js.concurrency)
                .map_err(|e| AppError::Tools(format!("cannot prepare the script sandbox: {e}")))?;
            js = js.run_in(ScriptPlace::Runner(Arc::new(sandbox)));
        }
        let js = js.spawn(None).map_err(AppError::Tools)?;
        tools.push(ToolRegistration::builtin(
            agent_tools::builtin::javascript::definition(),
            js,
        ));
        let documents = DocumentTool::new(
            host.executor.clone(),
            host.clock.clone(),
            Arc::new(WorkspaceDocuments::new(workspaces.clone())),
        )
        .spawn(None)
        .map_err(AppError::Tools)?;
        tools.push(ToolRegistration::builtin(
            agent_tools::builtin::document::definition(),
            documents,
        ));
        for (definition, addr) in agent_workspace::tool_registrations(&host, workspaces.clone())
            .map_err(|e| AppError::Tools(e.to_string()))?
        {
            tools.push(ToolRegistration::builtin(definition, addr));
        }
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
        let fetch = FetchActor::new(Arc::new(reader), host.storage.clone(), host.clock.clone())
            .spawn(host.executor.clone(), None);
        tools.push(ToolRegistration::builtin(
            agent_fetch::fetch_url_definition(),
            fetch,
        ));
        let secrets = options.config.secret_resolver();
        for manifest in &options.config.plugins {
            let regs = agent_tools::spawn_plugin(
                host.executor.clone(),
                host.clock.clone(),
                manifest,
                secrets.clone(),
            )
            .map_err(|e| AppError::Plugin {
                id: manifest.id.clone(),
                detail: e.to_string(),
            })?;
            let always_on = options.config.always_on_plugins.contains(&manifest.id);
            tools.extend(regs.into_iter().map(|mut r| {
                if always_on {
                    r.exposure = agent_tools::registry::Exposure::AlwaysOn;
                }
                r
            }));
        }
        let mut registry = Registry::new();
        registry
            .register_all(tools)
            .map_err(|e| AppError::Tools(e.to_string()))?;
        let spill = WorkspaceSpill::new(workspaces.clone(), SpillTarget::Workspace);
        let tools = spawn_tools(
            host.executor.clone(),
            host.clock.clone(),
            registry,
            ToolsOptions {
                spill: Some(Arc::new(spill)),
                // A run's loaded tools survive a restart (S5.2).
                storage: Some(host.storage.clone()),
                ..ToolsOptions::default()
            },
        );
        let runtime_options = RuntimeOptions {
            lease_ttl: native.lease_ttl(),
            ..RuntimeOptions::default()
        };
        let runtime = Runtime::new(
            host,
            native.owner().clone(),
            tools.addr.clone(),
            provider,
            runtime_options,
        );
        native.keep_renewed(runtime.leases());
        Ok(App {
            native,
            runtime,
            tools,
            workspaces,
        })
    }

    pub fn native(&self) -> &NativeHost {
        &self.native
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

    /// A person stops `run` (`cancelled` / `user_stopped`). The supervisor
    /// tells the tools actor, which cancels the run's calls in flight (a
    /// `fetch_url` read ends at once): `Runtime::stop` is the only stop.
    pub async fn stop(&self, run: &RunId) -> Result<(), AppError> {
        self.runtime.stop(run).await?;
        Ok(())
    }

    /// Take the session's lease for this process (refused with
    /// `LeaseError::Held` while another live process holds it) and open its
    /// workspace with that lease's fence. Keep the guard while working.
    pub async fn open_session(&self, session: &SessionId) -> Result<LeaseGuard, AppError> {
        let guard = self
            .runtime
            .leases()
            .acquire(session)
            .await
            .map_err(RunError::from)?;
        if self.workspaces.get(session).is_none() {
            self.workspaces
                .open(self.native.host(), guard.fence(), Quotas::default());
        }
        Ok(guard)
    }

    /// Record how `run` talks to its model.
    pub async fn record_launch(&self, launch: &Launch) -> Result<(), AppError> {
        let batch = agent_kernel::host::Batch::new().put_record(launch)?;
        self.native.host().storage.commit(batch).await?;
        Ok(())
    }
}
