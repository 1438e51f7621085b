//! The embedder's configuration (`RuntimeConfig`, `RunOptions`) as parsed
//! from JavaScript, and what it makes: the storage (IndexedDB or memory),
//! the model provider, the default run configuration, budgets, and the
//! page's secrets.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use agent_assembly::McpServerSpec;
use agent_capabilities::ApprovalMode;
use agent_kernel::budget::Budget;
use agent_kernel::host::{Clock, Storage};
use agent_kernel::memory::MemoryStorage;
use agent_kernel::run::RunMode;
use agent_mcp::{GatewayRoute, McpServerConfig};
use agent_supervisor::conversation::{HistoryMessage, validate_history};
use agent_supervisor::provider::capabilities::CapabilityOverrides;
use agent_supervisor::provider::set::{NamedProvider, ProviderSet};
use agent_supervisor::{
    ModelProvider, ProviderKind, RemoteModel, RunConfig, Scenario, ScriptedProvider,
};
use agent_tools::PluginManifest;
use agent_tools::plugin::{SecretError, SecretHandle, SecretResolver, SecretValue};
use serde::Deserialize;
use serde_json::Value;
use wasm_bindgen::prelude::*;

use super::errors::{ErrorCode, js_error};
use crate::idb::IdbStorage;

#[derive(Debug, Deserialize)]
#[serde(tag = "provider", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum ModelConfig {
    Scripted {
        scenario: Value,
    },
    /// Chat Completions (OpenAI and compatible servers).
    #[serde(rename = "openai", alias = "openai-compatible")]
    Openai(RemoteModelConfig),
    Gemini(RemoteModelConfig),
    Anthropic(RemoteModelConfig),
}

/// A remote model: its endpoint (default: the provider's public one), the
/// model's name, the key (held in this tab's memory only, S13.3) and what
/// the model can do, over the built-in table.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RemoteModelConfig {
    #[serde(default)]
    base_url: Option<String>,
    model: String,
    #[serde(default)]
    api_key: Option<String>,
    #[serde(default)]
    capabilities: CapabilityOverrides,
}

impl ModelConfig {
    /// The model a run of this provider uses unless it names another.
    fn model_name(&self) -> &str {
        match self.remote() {
            Some((_, remote)) => &remote.model,
            None => "scripted",
        }
    }

    /// The remote model's kind and settings, unless it is scripted.
    fn remote(&self) -> Option<(ProviderKind, &RemoteModelConfig)> {
        match self {
            ModelConfig::Scripted { .. } => None,
            ModelConfig::Openai(c) => Some((ProviderKind::OpenaiCompatible, c)),
            ModelConfig::Gemini(c) => Some((ProviderKind::Gemini, c)),
            ModelConfig::Anthropic(c) => Some((ProviderKind::Anthropic, c)),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GatewayConfig {
    pub(crate) url: String,
    pub(crate) token: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SecretConfig {
    pub(crate) handle: String,
    pub(crate) origin: String,
    pub(crate) value: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RuntimeConfig {
    #[serde(default)]
    pub(crate) database_name: Option<String>,
    #[serde(default)]
    pub(crate) storage: Option<String>,
    #[serde(default)]
    pub(crate) model: Option<ModelConfig>,
    /// Providers a run may choose by name (`startRun`'s `model.provider`),
    /// each like `model`; keys stay in this tab's memory (S13.3).
    #[serde(default)]
    pub(crate) models: BTreeMap<String, ModelConfig>,
    #[serde(default)]
    pub(crate) gateway: Option<GatewayConfig>,
    #[serde(default)]
    pub(crate) plugins: Vec<PluginManifest>,
    #[serde(default)]
    pub(crate) secrets: Vec<SecretConfig>,
    #[serde(default)]
    pub(crate) budget: Option<Value>,
    #[serde(default)]
    pub(crate) approval_mode: Option<ApprovalMode>,
    /// The Worker module's wasm-bindgen glue (`agent_worker_module.js`).
    #[serde(default)]
    pub(crate) worker_glue_url: Option<String>,
    /// The Worker module's wasm; beside its glue when absent
    /// (`agent_worker_module_bg.wasm`), which a bundler that renames files
    /// does not keep.
    #[serde(default)]
    pub(crate) worker_wasm_url: Option<String>,
    #[serde(default)]
    pub(crate) lease_ttl_ms: Option<u64>,
    /// MCP servers (issue 16): each `McpServerConfig` (snake_case, as in
    /// `agentrt`'s `[[mcp]]`: `id`, `url`, `headers`, `timeout_ms`,
    /// `trusted_functions`), plus `via_gateway: true` to reach it through
    /// the `gateway` (a server that sends no CORS headers for this page).
    /// Read by [`mcp_servers`].
    #[serde(default)]
    pub(crate) mcp_servers: Vec<Value>,
    /// Ids of `plugins` offered in every request without `load_tools`
    /// (S5.2); checked by [`check_plugins`] and the assembly.
    #[serde(default)]
    pub(crate) always_on_plugins: Vec<String>,
    /// The base URL of a SearXNG instance (its JSON API, reachable from
    /// this page with CORS) where Deep Research planning searches the web
    /// (S9.4); without it planning uses only the topic and the person's URLs.
    #[serde(default)]
    pub(crate) search_url: Option<String>,
}

/// One run's options (`startRun`'s third argument), each replacing the
/// runtime's default for that run.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RunOptions {
    /// A preset name or an object, read by `Budget::from_spec` (S4.3, S4.4).
    #[serde(default)]
    pub(crate) budget: Option<Value>,
    #[serde(default)]
    pub(crate) approval_mode: Option<ApprovalMode>,
    #[serde(default)]
    pub(crate) allowlist: Option<std::collections::BTreeSet<String>>,
    #[serde(default)]
    pub(crate) skill: Option<Value>,
    #[serde(default)]
    pub(crate) model: Option<Value>,
    /// `"agent"` or `"chat"` (S9.1, S5.1): a chat run has no tools and no
    /// default Agent system prompt.
    #[serde(default)]
    pub(crate) mode: Option<String>,
    /// Replaces the default Agent system prompt.
    #[serde(default)]
    pub(crate) system: Option<String>,
    /// Added after the system prompt.
    #[serde(default)]
    pub(crate) system_extension: Option<String>,
    /// The embedder's own chat history, used instead of the session's
    /// conversation (S12); read by [`run_history`].
    #[serde(default)]
    pub(crate) history: Option<Value>,
    #[serde(default)]
    pub(crate) context_window_tokens: Option<u32>,
    /// Run under this Agent Profile (S10.2); the options above are the
    /// defaults beneath it.
    #[serde(default)]
    pub(crate) profile: Option<String>,
    /// The turn's own layer (S10.2: it may only narrow), in the profile
    /// layer's shape (`tools`, `budget`, `approval`, `model`, …).
    #[serde(default)]
    pub(crate) turn: Option<Value>,
}

/// A budget option (the runtime's or a run's) through the kernel's one
/// reader of budgets, `Budget::from_spec`; a bad one is `invalid_config`.
fn budget_option(spec: &Value) -> Result<Budget, JsValue> {
    Budget::from_spec(spec).map_err(|e| js_error(ErrorCode::InvalidConfig, format!("budget: {e}")))
}

/// The run mode named by `mode`: only the modes a page may start.
fn run_mode(mode: &str) -> Result<RunMode, JsValue> {
    match mode {
        "agent" => Ok(RunMode::Agent),
        "chat" => Ok(RunMode::Chat),
        other => Err(js_error(
            ErrorCode::InvalidArgument,
            format!("mode must be \"agent\" or \"chat\", not {other:?}"),
        )),
    }
}

/// The embedder's `history`, read and checked by the supervisor's rule
/// (`validate_history`): a malformed message, a role other than user or
/// assistant, too many messages or too many bytes are `invalid_argument`.
fn run_history(history: Value) -> Result<Vec<HistoryMessage>, JsValue> {
    let history: Vec<HistoryMessage> = serde_json::from_value(history)
        .map_err(|e| js_error(ErrorCode::InvalidArgument, format!("history: {e}")))?;
    validate_history(&history)
        .map_err(|e| js_error(ErrorCode::InvalidArgument, format!("history: {e}")))?;
    Ok(history)
}

/// The configuration of one run: the runtime's `defaults` with `options`
/// applied, checked by `RunConfig::validate`. Nothing is started here, so
/// a refused option starts nothing.
pub(crate) fn run_config_for(
    defaults: &RunConfig,
    named_models: &BTreeMap<String, String>,
    options: RunOptions,
) -> Result<RunConfig, JsValue> {
    let mut config = defaults.clone();
    if let Some(b) = &options.budget {
        config.budget = budget_option(b)?;
    }
    if let Some(mode) = options.approval_mode {
        config.approval = mode;
    }
    if options.allowlist.is_some() {
        config.allowlist = options.allowlist;
    }
    if let Some(manifest) = &options.skill {
        let skill = agent_tools::builtin::skill::Skill::from_json(manifest)
            .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("skill: {e}")))?;
        config.skill = Some(skill.applied());
    }
    if let Some(mut model) = options.model {
        // A run that chooses a named provider and no model gets that
        // provider's model, not the default provider's.
        if let Some(o) = model.as_object_mut()
            && !o.contains_key("model")
            && let Some(name) = o.get("provider").and_then(Value::as_str)
        {
            let default_model = named_models.get(name).ok_or_else(|| {
                js_error(
                    ErrorCode::InvalidConfig,
                    format!("model.provider: no provider named {name:?} was given in `models` when the runtime was created"),
                )
            })?;
            o.insert("model".into(), Value::String(default_model.clone()));
        }
        let mut merged = serde_json::to_value(&config.model)
            .map_err(|e| js_error(ErrorCode::RuntimeError, e))?;
        if let (Some(m), Some(o)) = (merged.as_object_mut(), model.as_object()) {
            for (k, v) in o {
                m.insert(k.clone(), v.clone());
            }
        }
        config.model = serde_json::from_value(merged)
            .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("model: {e}")))?;
    }
    if let Some(mode) = &options.mode {
        config.mode = run_mode(mode)?;
    }
    if options.system.is_some() {
        config.model.system_prompt = options.system;
    }
    if options.system_extension.is_some() {
        config.model.system_extension = options.system_extension;
    }
    if options.context_window_tokens.is_some() {
        config.model.context_window_tokens = options.context_window_tokens;
    }
    if let Some(history) = options.history {
        config.history = Some(run_history(history)?);
    }
    config
        .validate()
        .map_err(|e| js_error(ErrorCode::InvalidConfig, e))?;
    Ok(config)
}

/// Secrets given by the embedder: values in memory only, each bound to one origin.
pub(crate) struct PageSecrets {
    secrets: HashMap<String, (String, String)>,
}

impl PageSecrets {
    pub(crate) fn new(secrets: &[SecretConfig]) -> PageSecrets {
        PageSecrets {
            secrets: secrets
                .iter()
                .map(|s| (s.handle.clone(), (s.origin.clone(), s.value.clone())))
                .collect(),
        }
    }
}

#[async_trait::async_trait(?Send)]
impl SecretResolver for PageSecrets {
    fn bound_origin(&self, handle: &SecretHandle) -> Option<String> {
        self.secrets
            .get(&handle.0)
            .map(|(origin, _)| origin.clone())
    }
    async fn resolve(&self, handle: &SecretHandle) -> Result<SecretValue, SecretError> {
        self.secrets
            .get(&handle.0)
            .map(|(_, value)| SecretValue::new(value.clone()))
            .ok_or_else(|| SecretError::Unknown(handle.0.clone()))
    }
}

pub(crate) fn default_glue_url() -> Option<String> {
    // The demo and most embedders serve the package at ./pkg/, the Worker
    // module's glue and wasm beside the page's own.
    let href = web_sys::window()?.location().href().ok()?;
    web_sys::Url::new_with_base("pkg/agent_worker_module.js", &href)
        .ok()
        .map(|u| u.href())
}

pub(crate) async fn open_storage(
    config: &RuntimeConfig,
) -> Result<(Arc<dyn Storage>, Option<Arc<IdbStorage>>, bool), JsValue> {
    match config.storage.as_deref() {
        Some("memory") => Ok((Arc::new(MemoryStorage::new()), None, false)),
        None | Some("indexeddb") => {
            let name = config.database_name.as_deref().unwrap_or("agentrt");
            match IdbStorage::open(name).await {
                Ok(idb) => {
                    let idb = Arc::new(idb);
                    Ok((idb.clone() as Arc<dyn Storage>, Some(idb), true))
                }
                Err(e) => {
                    web_sys::console::warn_1(&JsValue::from_str(&format!(
                        "IndexedDB is unavailable ({e}); runs are kept in memory only and are lost on reload"
                    )));
                    Ok((Arc::new(MemoryStorage::new()), None, false))
                }
            }
        }
        Some(other) => Err(js_error(
            ErrorCode::InvalidConfig,
            format!("storage must be \"indexeddb\" or \"memory\", not {other:?}"),
        )),
    }
}

/// The runtime's provider: `model`, with the `models` a run may choose by
/// name beside it.
pub(crate) fn provider(
    config: &RuntimeConfig,
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn ModelProvider>, JsValue> {
    let default = match &config.model {
        None => {
            return Err(js_error(
                ErrorCode::InvalidConfig,
                "model is required: { provider: \"scripted\", scenario } or { provider: \"openai\", baseUrl, model }",
            ));
        }
        Some(model) => one_provider(model, "model", clock.clone())?,
    };
    if config.models.is_empty() {
        return Ok(default);
    }
    let mut named = BTreeMap::new();
    for (name, model) in &config.models {
        named.insert(
            name.clone(),
            NamedProvider {
                provider: one_provider(model, &format!("models.{name}"), clock.clone())?,
                default_model: model.model_name().to_owned(),
            },
        );
    }
    let set = ProviderSet::new(default, named)
        .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("models: {e}")))?;
    Ok(Arc::new(set))
}

/// The model each name of `models` runs by default.
pub(crate) fn named_models(config: &RuntimeConfig) -> BTreeMap<String, String> {
    config
        .models
        .iter()
        .map(|(name, m)| (name.clone(), m.model_name().to_owned()))
        .collect()
}

fn one_provider(
    model: &ModelConfig,
    field: &str,
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn ModelProvider>, JsValue> {
    match model {
        ModelConfig::Scripted { scenario } => {
            let scenario = Scenario::from_json(&scenario.to_string()).map_err(|e| {
                js_error(ErrorCode::InvalidConfig, format!("{field}.scenario: {e}"))
            })?;
            Ok(Arc::new(ScriptedProvider::new(scenario, clock)))
        }
        other => {
            let Some((kind, c)) = other.remote() else {
                return Err(js_error(
                    ErrorCode::InvalidConfig,
                    format!("{field}: no provider"),
                ));
            };
            RemoteModel {
                kind,
                base_url: c.base_url.clone(),
                api_key: c.api_key.clone(),
                capabilities: c.capabilities,
            }
            .provider(clock)
            .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("{field}: {e}")))
        }
    }
}

pub(crate) fn run_config(config: &RuntimeConfig) -> Result<RunConfig, JsValue> {
    let mut defaults = RunConfig::default();
    if let Some(b) = &config.budget {
        defaults.budget = budget_option(b)?;
    }
    if let Some(mode) = config.approval_mode {
        defaults.approval = mode;
    }
    if let Some((_, remote)) = config.model.as_ref().and_then(ModelConfig::remote) {
        defaults.model.model = remote.model.clone();
    }
    defaults
        .validate()
        .map_err(|e| js_error(ErrorCode::InvalidConfig, e))?;
    Ok(defaults)
}

/// The MCP servers of `mcpServers`: a malformed entry, a `command` (a
/// page cannot start processes) or `via_gateway` without a `gateway` is
/// `invalid_config`.
pub(crate) fn mcp_servers(config: &RuntimeConfig) -> Result<Vec<McpServerSpec>, JsValue> {
    let mut out = Vec::new();
    for (i, entry) in config.mcp_servers.iter().enumerate() {
        let field = format!("mcpServers[{i}]");
        let mut entry = entry.clone();
        let via_gateway = match entry.as_object_mut().map(|o| o.remove("via_gateway")) {
            None => {
                return Err(js_error(
                    ErrorCode::InvalidConfig,
                    format!("{field}: expected an object"),
                ));
            }
            Some(None) => false,
            Some(Some(Value::Bool(b))) => b,
            Some(Some(other)) => {
                return Err(js_error(
                    ErrorCode::InvalidConfig,
                    format!("{field}.via_gateway: expected true or false, not {other}"),
                ));
            }
        };
        let server: McpServerConfig = serde_json::from_value(entry)
            .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("{field}: {e}")))?;
        if server.command.is_some() {
            return Err(js_error(
                ErrorCode::InvalidConfig,
                format!(
                    "{field}: a page cannot start a process; give the server's url (stdio servers run in agentrt)"
                ),
            ));
        }
        let route = match (via_gateway, &config.gateway) {
            (false, _) => None,
            (true, Some(g)) => Some(GatewayRoute {
                url: g.url.clone(),
                token: g.token.clone(),
            }),
            (true, None) => {
                return Err(js_error(
                    ErrorCode::InvalidConfig,
                    format!(
                        "{field}.via_gateway: no gateway is configured; give gateway {{ url, token }}"
                    ),
                ));
            }
        };
        out.push(McpServerSpec {
            config: server,
            via_gateway: route,
            auth: None,
        });
    }
    Ok(out)
}

/// `alwaysOnPlugins` must name configured plugins (the assembly's rule,
/// checked here too so that a bad configuration opens no storage).
pub(crate) fn check_plugins(config: &RuntimeConfig) -> Result<(), JsValue> {
    agent_assembly::check_always_on(
        config.plugins.iter().map(|p| p.id.as_str()),
        &config.always_on_plugins,
    )
    .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("alwaysOnPlugins: {e}")))
}
