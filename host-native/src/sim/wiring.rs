//! [`SimWiring`]: the parts a test host hands every tab (provider, its own
//! tools, plugins, secrets, run configuration), each tab wiring a full
//! assembly from them.

use std::sync::Arc;

use agent_kernel::host::Host;
use agent_supervisor::sim::tools::{SimToolsConfig, ToolLog, spawn_sim_tool_actors};
use agent_supervisor::{
    ModelProvider, RunConfig, RuntimeOptions, Sabotage, Scenario, ScriptedProvider,
};
use agent_tools::{
    PluginManifest, SecretHandle, SecretResolver, SecretValue, ToolRegistration,
    plugin::SecretError,
};

use super::error::SimError;

/// Makes the model of a tab, on the tab's host.
pub type ProviderFactory = Arc<dyn Fn(&Host) -> Arc<dyn ModelProvider> + Send + Sync>;
/// Spawns a test host's own tools on a tab's host (its executor and clock).
pub type ToolsFactory = Arc<dyn Fn(&Host) -> Vec<ToolRegistration> + Send + Sync>;

/// What a host wires into every tab: the assembly's parts that are not the
/// host itself. Clones share the factories.
#[derive(Clone)]
pub struct SimWiring {
    pub provider: ProviderFactory,
    /// The host's own tools (spawned on each tab's executor).
    pub tools: Option<ToolsFactory>,
    /// HTTP plugins (run on the simulation's tokio runtime).
    pub plugins: Vec<PluginManifest>,
    /// MCP servers (their clients run on the simulation's tokio runtime;
    /// each tab connects its own, as each page load does).
    pub mcp: Vec<agent_mcp::McpServerConfig>,
    pub always_on_plugins: Vec<String>,
    pub secrets: Arc<dyn SecretResolver>,
    /// What `fetch_url` (and Deep Research's execution) reads through, or
    /// `None` (not offered).
    pub fetch: Option<Arc<dyn agent_fetch::FetchBackend>>,
    /// What every run starts with: budget, approval mode, allowlist, Skill.
    pub run_config: RunConfig,
    pub runtime: RuntimeOptions,
    /// Deliberate faults of the supervisor, for a test proving that its
    /// simulation can fail (`Sabotage::default()`: none).
    pub sabotage: Sabotage,
}

impl std::fmt::Debug for SimWiring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimWiring")
            .field("plugins", &self.plugins.len())
            .field("own_tools", &self.tools.is_some())
            .finish_non_exhaustive()
    }
}

impl SimWiring {
    /// A scripted model playing `scenario` (the supervisor's scripted
    /// format), no tools of the host's own, no plugins.
    pub fn scripted(scenario: &str) -> Result<SimWiring, SimError> {
        let scenario =
            Scenario::from_json(scenario).map_err(|e| SimError::Scenario(e.to_string()))?;
        Ok(SimWiring {
            provider: Arc::new(move |host: &Host| {
                Arc::new(ScriptedProvider::new(scenario.clone(), host.clock.clone()))
                    as Arc<dyn ModelProvider>
            }),
            tools: None,
            plugins: Vec::new(),
            mcp: Vec::new(),
            always_on_plugins: Vec::new(),
            secrets: Arc::new(NoSecrets),
            fetch: None,
            run_config: RunConfig::default(),
            runtime: RuntimeOptions::default(),
            sabotage: Sabotage::default(),
        })
    }

    /// Read through `backend` (`fetch_url` and Deep Research's execution).
    pub fn with_fetch(mut self, backend: Arc<dyn agent_fetch::FetchBackend>) -> SimWiring {
        self.fetch = Some(backend);
        self
    }

    /// Add the host's own tools.
    pub fn with_tools(
        mut self,
        tools: impl Fn(&Host) -> Vec<ToolRegistration> + Send + Sync + 'static,
    ) -> SimWiring {
        self.tools = Some(Arc::new(tools));
        self
    }

    /// Add an HTTP plugin.
    pub fn with_plugin(mut self, manifest: PluginManifest) -> SimWiring {
        self.plugins.push(manifest);
        self
    }

    /// Add an MCP server (Streamable HTTP or stdio).
    pub fn with_mcp(mut self, server: agent_mcp::McpServerConfig) -> SimWiring {
        self.mcp.push(server);
        self
    }

    /// Runs start with `config`.
    pub fn with_run_config(mut self, config: RunConfig) -> SimWiring {
        self.run_config = config;
        self
    }

    /// The supervisor simulator's tools, logging to `log`.
    pub(crate) fn with_sim_tools(self, log: ToolLog) -> SimWiring {
        self.with_tools(move |host: &Host| {
            spawn_sim_tool_actors(
                host.executor.clone(),
                host.clock.clone(),
                log.clone(),
                SimToolsConfig {
                    storage: Some(host.storage.clone()),
                    ..SimToolsConfig::default()
                },
            )
            .into_iter()
            .map(|(def, addr)| ToolRegistration::builtin(def, addr))
            .collect()
        })
    }
}

/// Resolves no secret (a wiring without plugin credentials).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSecrets;

#[async_trait::async_trait]
impl SecretResolver for NoSecrets {
    fn bound_origin(&self, _: &SecretHandle) -> Option<String> {
        None
    }
    async fn resolve(&self, handle: &SecretHandle) -> Result<SecretValue, SecretError> {
        Err(SecretError::Unknown(handle.0.clone()))
    }
}
