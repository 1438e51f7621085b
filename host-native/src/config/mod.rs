//! The `agentrt` configuration file (TOML, `--config FILE`): what a person
//! sets once — the model provider (`[provider]`) and named ones beside it
//! (`[providers.NAME]`, which runs and queued runs choose by name, S14.2),
//! HTTP plugins and the secret handles they use, the reader endpoint, a
//! custom budget (validated, S4.4), the approval mode and the lease
//! time-to-live. Secrets are never in the file: it names environment
//! variables, read when a request is about to be sent.
//!
//! It owns the rule of which key, if any, may go to a model endpoint
//! ([`Config::key_for_endpoint`], issue 32): a key variable is read only
//! for the endpoint (kind, scheme, host, port, path) a section of this
//! file names, or the provider's usual variable for its public endpoint;
//! any other endpoint (one typed after `--base-url`, or one a stored
//! launch record names) gets no key.
//!
//! See `host-native/agentrt.example.toml` for a documented example.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent_capabilities::ApprovalMode;
use agent_kernel::budget::{Budget, BudgetPreset};
use agent_mcp::McpServerConfig;
use agent_supervisor::ProviderKind;
use agent_supervisor::provider::capabilities::CapabilityOverrides;
use agent_tools::plugin::SecretError;
use agent_tools::{PluginManifest, SecretHandle, SecretResolver, SecretValue};
use serde::Deserialize;

use crate::host::{DEFAULT_LEASE_TTL, MIN_LEASE_TTL};

mod endpoint_key;

pub use endpoint_key::EndpointKey;

/// The configuration file could not be used. Each message names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("cannot read the config file {path}: {detail}")]
    Read { path: PathBuf, detail: String },
    #[error("the config file {path} is not valid: {detail}")]
    Parse { path: PathBuf, detail: String },
    #[error("the config file {path} has an invalid value: {detail}")]
    Invalid { path: PathBuf, detail: String },
}

/// The model provider section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// `openai-compatible`, `gemini` or `anthropic`.
    pub kind: ProviderKind,
    /// Default: the provider's public endpoint.
    #[serde(default)]
    pub base_url: Option<String>,
    pub model: String,
    /// The environment variable holding the API key (never the key itself);
    /// default: the provider's usual one (`OPENAI_API_KEY`,
    /// `GEMINI_API_KEY`, `ANTHROPIC_API_KEY`), which a keyless local server
    /// does not need.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// What the model can do, over the built-in table (`[provider.capabilities]`:
    /// `tool_calling`, `context_window_tokens`, `max_output_tokens`).
    #[serde(default)]
    pub capabilities: CapabilityOverrides,
}

/// The public web reader section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReaderConfig {
    /// A Jina-compatible reader endpoint, for example `https://r.jina.ai/`.
    pub endpoint: String,
    /// The environment variable holding the reader's API key, if any.
    #[serde(default)]
    pub api_key_env: Option<String>,
}

/// Where one secret handle's value comes from, and where it may go.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretConfig {
    /// The environment variable read at dispatch.
    pub env: String,
    /// The only origin (`scheme://host[:port]`) the secret may be sent to.
    pub origin: String,
}

/// The budget section: a preset, or custom limits validated as in S4.4.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetSection {
    #[serde(default)]
    preset: Option<String>,
    #[serde(default)]
    max_tool_rounds: Option<toml::Value>,
    #[serde(default)]
    max_tool_calls: Option<toml::Value>,
    #[serde(default)]
    max_tokens: Option<toml::Value>,
    #[serde(default)]
    max_duration_ms: Option<toml::Value>,
}

/// `[store]`: where runs are stored (S14). Without it, SQLite in the data
/// directory.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreSection {
    /// `postgres://USER@HOST:PORT/DATABASE`: a PostgreSQL database shared by
    /// every `agentrt` that names it.
    #[serde(default)]
    url: Option<String>,
}

/// `[search]`: where Deep Research planning searches the web (S9.4).
/// Without it planning uses only the topic and the person's URLs.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchSection {
    /// The base URL of a SearXNG instance with its JSON API enabled.
    #[serde(default)]
    searxng: Option<String>,
}

/// A provider a run named that this configuration does not have (S14.2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderNameError {
    #[error(
        "no [provider] section is configured, so a run that names no provider has no model here"
    )]
    NoDefault,
    #[error(
        "no provider named {name:?} is configured (no [providers.{name}] section; configured: {known})"
    )]
    Unknown { name: String, known: String },
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    store: Option<StoreSection>,
    #[serde(default)]
    search: Option<SearchSection>,
    #[serde(default)]
    approval: Option<String>,
    #[serde(default)]
    lease_ttl_ms: Option<u64>,
    #[serde(default)]
    provider: Option<ProviderConfig>,
    #[serde(default)]
    providers: BTreeMap<String, ProviderConfig>,
    #[serde(default)]
    reader: Option<ReaderConfig>,
    #[serde(default)]
    budget: Option<BudgetSection>,
    #[serde(default)]
    secrets: BTreeMap<String, SecretConfig>,
    #[serde(default)]
    plugins: Vec<PluginManifest>,
    #[serde(default)]
    always_on_plugins: Vec<String>,
    #[serde(default)]
    mcp: Vec<McpServerConfig>,
    #[serde(default)]
    ceiling: Option<Ceiling>,
}

/// `[ceiling]`: the most this host allows any profile (S10.2: the global
/// layer is the host's ceiling), applied to a profile's import (what it
/// may keep) and to every run under a profile (what it gets). A field left
/// out does not narrow.
///
/// ```toml
/// [ceiling]
/// tools = ["fetch_url", "workspace_read"]
/// memory = { read = ["session", "workspace"], write = ["session"] }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ceiling {
    /// The native tools a profile may allow at most.
    #[serde(default)]
    pub tools: Option<std::collections::BTreeSet<String>>,
    /// The Memory scopes a profile may read and write at most.
    #[serde(default)]
    pub memory: Option<agent_profiles::MemoryScopes>,
}

impl Ceiling {
    /// The ceiling as a layer that only narrows: its tools and Memory scopes.
    pub fn layer(&self) -> agent_profiles::Layer {
        agent_profiles::Layer {
            tools: self.tools.clone(),
            memory: self.memory.clone(),
            ..agent_profiles::Layer::default()
        }
    }
}

/// A checked configuration.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub approval: Option<ApprovalMode>,
    pub lease_ttl: Option<Duration>,
    /// `[store] url`: a PostgreSQL database instead of SQLite (S14).
    pub store: Option<String>,
    /// `[search] searxng`: the SearXNG instance Deep Research planning
    /// searches (S9.4), checked when the configuration is read.
    pub search: Option<String>,
    pub provider: Option<ProviderConfig>,
    /// `[providers.NAME]`: providers a run chooses by name (`run
    /// --provider-name NAME`); a queued run names only these (or none: the
    /// `[provider]`), resolved by the worker that executes it (S14.2).
    pub providers: BTreeMap<String, ProviderConfig>,
    pub reader: Option<ReaderConfig>,
    pub budget: Option<Budget>,
    /// The `[budget]` section as the JSON spec `budget` was read from
    /// (`Budget::from_spec`), so that command-line caps can replace its
    /// fields one by one.
    pub budget_spec: Option<serde_json::Value>,
    pub secrets: BTreeMap<String, SecretConfig>,
    pub plugins: Vec<PluginManifest>,
    /// Plugins whose functions are offered in every model request instead of
    /// through `search_tools` / `load_tools` (they count against the
    /// 64-schema limit of S5.2).
    pub always_on_plugins: Vec<String>,
    /// The `[[mcp]]` servers: offered to runs through `search_tools` /
    /// `load_tools`, and reached by `agentrt serve`'s gateway for its page.
    pub mcp: Vec<McpServerConfig>,
    /// Not from the file: how `[[mcp]]` servers that answer 401 are
    /// authorized (the credentials file of the data directory, the URL
    /// policy), set by the host once it knows its data directory
    /// ([`crate::mcp_auth::auth_env`]); None: such a server is not connected.
    pub mcp_auth: Option<agent_mcp::auth::AuthEnv>,
    /// `[ceiling]`: the tools and Memory scopes a profile gets at most.
    pub ceiling: Option<Ceiling>,
}

/// Parse a budget preset name (`light`, `standard`, `extended`); the
/// kernel's [`BudgetPreset::parse`] owns the names.
pub fn parse_preset(name: &str) -> Option<BudgetPreset> {
    BudgetPreset::parse(name).ok()
}

/// Parse an approval mode name (`permissive`, `strict`).
pub fn parse_approval(name: &str) -> Option<ApprovalMode> {
    match name {
        "permissive" => Some(ApprovalMode::Permissive),
        "strict" => Some(ApprovalMode::Strict),
        _ => None,
    }
}

fn toml_to_json(value: &toml::Value) -> serde_json::Value {
    match value {
        toml::Value::String(s) => serde_json::Value::String(s.clone()),
        toml::Value::Integer(i) => serde_json::Value::from(*i),
        toml::Value::Float(f) => serde_json::Value::from(*f),
        toml::Value::Boolean(b) => serde_json::Value::Bool(*b),
        toml::Value::Datetime(d) => serde_json::Value::String(d.to_string()),
        toml::Value::Array(a) => serde_json::Value::Array(a.iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => serde_json::Value::Object(
            t.iter()
                .map(|(k, v)| (k.clone(), toml_to_json(v)))
                .collect(),
        ),
    }
}

impl Config {
    /// Read and check `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_owned(),
            detail: e.to_string(),
        })?;
        Self::parse(&text, path)
    }

    /// Check configuration text; `path` only names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            detail: e.message().to_owned()
                + &e.span()
                    .map(|s| format!(" (at byte {})", s.start))
                    .unwrap_or_default(),
        })?;
        let invalid = |detail: String| ConfigError::Invalid {
            path: path.to_owned(),
            detail,
        };
        let approval = raw
            .approval
            .as_deref()
            .map(|a| {
                parse_approval(a).ok_or_else(|| {
                    invalid(format!(
                        "approval = {a:?}; use \"permissive\" or \"strict\""
                    ))
                })
            })
            .transpose()?;
        let lease_ttl = raw.lease_ttl_ms.map(Duration::from_millis);
        if let Some(ttl) = lease_ttl
            && ttl < MIN_LEASE_TTL
        {
            return Err(invalid(format!(
                "lease_ttl_ms = {}; use at least {} (default {})",
                ttl.as_millis(),
                MIN_LEASE_TTL.as_millis(),
                DEFAULT_LEASE_TTL.as_millis()
            )));
        }
        if let Some(p) = &raw.provider {
            check_provider("provider", p).map_err(invalid)?;
        }
        for (name, p) in &raw.providers {
            if !agent_supervisor::provider::set::valid_name(name) {
                return Err(invalid(format!(
                    "[providers.{name}]: a provider name is 1 to {} characters from A-Z a-z 0-9 - _ .",
                    agent_supervisor::provider::set::MAX_PROVIDER_NAME_BYTES
                )));
            }
            check_provider(&format!("providers.{name}"), p).map_err(invalid)?;
        }
        if let Some(r) = &raw.reader {
            check_http_url(&r.endpoint).map_err(|e| invalid(format!("reader.endpoint: {e}")))?;
        }
        let budget_spec = raw.budget.as_ref().map(budget_spec_of);
        let budget = budget_spec
            .as_ref()
            .map(|spec| budget_of(spec).map_err(invalid))
            .transpose()?;
        for (handle, secret) in &raw.secrets {
            if secret.env.is_empty() {
                return Err(invalid(format!("secrets.{handle}.env is empty")));
            }
            check_http_url(&secret.origin)
                .map_err(|e| invalid(format!("secrets.{handle}.origin: {e}")))?;
        }
        let mut ids = std::collections::BTreeSet::new();
        for plugin in &raw.plugins {
            if !ids.insert(plugin.id.clone()) {
                return Err(invalid(format!(
                    "plugin id {:?} appears twice; give each plugin its own id",
                    plugin.id
                )));
            }
            if let Some(auth) = &plugin.auth
                && !raw.secrets.contains_key(&auth.secret.0)
            {
                return Err(invalid(format!(
                    "plugin {:?} uses secret handle {:?}, which no [secrets.{}] section defines",
                    plugin.id, auth.secret.0, auth.secret.0
                )));
            }
        }
        for server in &raw.mcp {
            if ids.contains(&server.id) || raw.mcp.iter().filter(|m| m.id == server.id).count() > 1
            {
                return Err(invalid(format!(
                    "MCP server id {:?} appears twice (or is a plugin's id too); give each its own id",
                    server.id
                )));
            }
            for value in server.headers.values() {
                if let agent_mcp::HeaderValue::Secret { secret, .. } = value
                    && !raw.secrets.contains_key(&secret.0)
                {
                    return Err(invalid(format!(
                        "MCP server {:?} uses secret handle {:?}, which no [secrets.{}] section defines",
                        server.id, secret.0, secret.0
                    )));
                }
            }
        }
        // The rule is the assembly's (both hosts refuse such an id).
        agent_assembly::check_always_on(ids.iter().map(String::as_str), &raw.always_on_plugins)
            .map_err(|e| {
                invalid(format!(
                    "always_on_plugins: {e}; no [[plugins]] table defines it"
                ))
            })?;
        let search = raw.search.and_then(|s| s.searxng);
        if let Some(url) = &search {
            agent_research::plan::parse_source(url)
                .map_err(|e| invalid(format!("[search] searxng {url:?}: {e}")))?;
        }
        Ok(Config {
            search,
            always_on_plugins: raw.always_on_plugins,
            approval,
            lease_ttl,
            store: raw.store.and_then(|s| s.url),
            provider: raw.provider,
            providers: raw.providers,
            reader: raw.reader,
            budget,
            budget_spec,
            secrets: raw.secrets,
            plugins: raw.plugins,
            mcp: raw.mcp,
            mcp_auth: None,
            ceiling: raw.ceiling,
        })
    }

    /// The provider a run names (S14.2): `[providers.NAME]`, or the
    /// `[provider]` section when it names none.
    pub fn provider_named(&self, name: Option<&str>) -> Result<&ProviderConfig, ProviderNameError> {
        match name {
            None => self.provider.as_ref().ok_or(ProviderNameError::NoDefault),
            Some(name) => self
                .providers
                .get(name)
                .ok_or_else(|| ProviderNameError::Unknown {
                    name: name.to_owned(),
                    known: if self.providers.is_empty() {
                        "none".to_owned()
                    } else {
                        self.providers
                            .keys()
                            .map(String::as_str)
                            .collect::<Vec<_>>()
                            .join(", ")
                    },
                }),
        }
    }

    /// The secret resolver over this file's `[secrets]` and the environment.
    pub fn secret_resolver(&self) -> Arc<EnvSecrets> {
        Arc::new(EnvSecrets {
            secrets: self.secrets.clone(),
        })
    }
}

/// A provider section (`[provider]`, `[providers.NAME]`): an http(s)
/// endpoint without credentials, a model.
fn check_provider(section: &str, p: &ProviderConfig) -> Result<(), String> {
    if let Some(base_url) = &p.base_url {
        check_http_url(base_url).map_err(|e| format!("{section}.base_url: {e}"))?;
    }
    if p.model.trim().is_empty() {
        return Err(format!("{section}.model is empty; name the model"));
    }
    Ok(())
}

fn check_http_url(text: &str) -> Result<(), String> {
    let url = url::Url::parse(text).map_err(|e| format!("{text:?} is not a URL ({e})"))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(format!("{text:?} must start with http:// or https://"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{text:?} carries credentials; put secrets in the environment instead"
        ));
    }
    Ok(())
}

/// The `[budget]` section as a budget spec: a preset, limits, or a preset
/// whose limits the given ones replace.
fn budget_spec_of(b: &BudgetSection) -> serde_json::Value {
    let spec: serde_json::Map<String, serde_json::Value> = [
        ("max_tool_rounds", &b.max_tool_rounds),
        ("max_tool_calls", &b.max_tool_calls),
        ("max_tokens", &b.max_tokens),
        ("max_duration_ms", &b.max_duration_ms),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.as_ref().map(|v| (k.to_owned(), toml_to_json(v))))
    .chain(
        b.preset
            .as_ref()
            .map(|name| ("preset".to_owned(), serde_json::Value::from(name.as_str()))),
    )
    .collect();
    serde_json::Value::Object(spec)
}

/// The budget a spec gives (the kernel's [`Budget::from_spec`] reads it).
fn budget_of(spec: &serde_json::Value) -> Result<Budget, String> {
    if spec.as_object().is_some_and(|o| o.is_empty()) {
        return Err("the [budget] section is empty; give a preset or limits".into());
    }
    Budget::from_spec(spec).map_err(|e| format!("budget: {e}"))
}

/// Secret handles resolved from environment variables, each bound to one origin.
#[derive(Debug, Clone, Default)]
pub struct EnvSecrets {
    secrets: BTreeMap<String, SecretConfig>,
}

#[async_trait::async_trait]
impl SecretResolver for EnvSecrets {
    fn bound_origin(&self, handle: &SecretHandle) -> Option<String> {
        let origin = &self.secrets.get(&handle.0)?.origin;
        url::Url::parse(origin)
            .ok()
            .map(|u| u.origin().ascii_serialization())
    }

    async fn resolve(&self, handle: &SecretHandle) -> Result<SecretValue, SecretError> {
        let secret = self
            .secrets
            .get(&handle.0)
            .ok_or_else(|| SecretError::Unknown(handle.0.clone()))?;
        std::env::var(&secret.env)
            .map(SecretValue::new)
            .map_err(|_| {
                SecretError::Unavailable(format!(
                    "environment variable {} (for secret {:?}) is not set; export it and retry",
                    secret.env, handle.0
                ))
            })
    }
}

#[cfg(test)]
mod tests;
