//! The embedder's configuration (`RuntimeConfig`, `RunOptions`) as parsed
//! from JavaScript, and what it makes: the storage (IndexedDB or memory),
//! the model provider, the default run configuration, budgets, and the
//! page's secrets.

use std::collections::HashMap;
use std::sync::Arc;

use agent_capabilities::ApprovalMode;
use agent_kernel::budget::{Budget, BudgetPreset};
use agent_kernel::host::{Clock, Storage};
use agent_kernel::memory::MemoryStorage;
use agent_supervisor::{
    ModelProvider, OpenAiConfig, OpenAiProvider, RunConfig, Scenario, ScriptedProvider,
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
    #[serde(rename_all = "camelCase")]
    Openai {
        base_url: String,
        model: String,
        #[serde(default)]
        api_key: Option<String>,
    },
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
    #[serde(default)]
    pub(crate) worker_glue_url: Option<String>,
    #[serde(default)]
    pub(crate) lease_ttl_ms: Option<u64>,
    /// Ids of `plugins` offered in every request without `load_tools`
    /// (S5.2); checked by [`check_plugins`] and the assembly.
    #[serde(default)]
    pub(crate) always_on_plugins: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RunOptions {
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
}

/// A budget from a preset name or a custom object (S4.3, S4.4).
pub fn budget_from(value: &Value) -> Result<Budget, String> {
    match value {
        Value::String(name) => match name.as_str() {
            "light" => Ok(Budget::preset(BudgetPreset::Light)),
            "standard" => Ok(Budget::preset(BudgetPreset::Standard)),
            "extended" => Ok(Budget::preset(BudgetPreset::Extended)),
            other => Err(format!(
                "unknown budget preset {other:?}; use light, standard, extended or an object"
            )),
        },
        other => Budget::from_json(other).map_err(|e| e.to_string()),
    }
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
    // The demo and most embedders serve the package at ./pkg/.
    let href = web_sys::window()?.location().href().ok()?;
    web_sys::Url::new_with_base("pkg/agent_host_browser.js", &href)
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

pub(crate) fn provider(
    config: &RuntimeConfig,
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn ModelProvider>, JsValue> {
    match &config.model {
        None => Err(js_error(
            ErrorCode::InvalidConfig,
            "model is required: { provider: \"scripted\", scenario } or { provider: \"openai\", baseUrl, model }",
        )),
        Some(ModelConfig::Scripted { scenario }) => {
            let scenario = Scenario::from_json(&scenario.to_string())
                .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("model.scenario: {e}")))?;
            Ok(Arc::new(ScriptedProvider::new(scenario, clock)))
        }
        Some(ModelConfig::Openai {
            base_url, api_key, ..
        }) => {
            let mut c = OpenAiConfig::new(base_url.clone());
            c.api_key = api_key.clone();
            OpenAiProvider::new(c, clock)
                .map(|p| Arc::new(p) as Arc<dyn ModelProvider>)
                .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("model: {e}")))
        }
    }
}

pub(crate) fn run_config(config: &RuntimeConfig) -> Result<RunConfig, JsValue> {
    let mut defaults = RunConfig::default();
    if let Some(b) = &config.budget {
        defaults.budget = budget_from(b)
            .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("budget: {e}")))?;
    }
    if let Some(mode) = config.approval_mode {
        defaults.approval = mode;
    }
    if let Some(ModelConfig::Openai { model, .. }) = &config.model {
        defaults.model.model = model.clone();
    }
    defaults
        .validate()
        .map_err(|e| js_error(ErrorCode::InvalidConfig, e))?;
    Ok(defaults)
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
