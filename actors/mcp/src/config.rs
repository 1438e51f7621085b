//! [`McpServerConfig`]: one MCP server as the person configures it (the
//! `[[mcp]]` table of `agentrt`'s config, `mcpServers` in the browser): its
//! id, how to reach it (a Streamable HTTP `url`, or natively a `command`
//! with `args` and an environment allowlist), request headers (literal or
//! from secret handles bound to the server's origin), the per-request
//! timeout, and the functions the person declares (effects, idempotency,
//! optionally a pinned fingerprint that makes a write trusted).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use agent_capabilities::{EffectSet, Fingerprint, Idempotency};
use agent_kernel::host::secrets::{SecretHandle, SecretResolver};
use agent_kernel::tool::names::check_provider_id;
use agent_kernel::tool::validate::url_origin;

use crate::error::McpError;

/// Default per-request deadline (30 s).
pub const DEFAULT_MCP_TIMEOUT_MS: u64 = 30_000;
/// Longest per-request deadline accepted (10 min: long-running tools).
pub const MAX_MCP_TIMEOUT_MS: u64 = 600_000;

fn default_timeout() -> u64 {
    DEFAULT_MCP_TIMEOUT_MS
}

/// A header value: literal text (never a credential), or a secret handle
/// resolved at each request, optionally after a prefix (`Bearer `).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum HeaderValue {
    Secret {
        secret: SecretHandle,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        prefix: String,
    },
    Literal(String),
}

/// A function the person declares: its effects and idempotency replace the
/// conservative assumption for unknown functions; a pinned fingerprint equal
/// to the current definition's makes its writes trusted (S6.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustedFunction {
    /// The function's name as the server lists it.
    pub name: String,
    pub effects: EffectSet,
    pub idempotency: Idempotency,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<Fingerprint>,
}

/// One MCP server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The provider id: origin `mcp:<id>`; reserved ids are refused.
    pub id: String,
    /// A Streamable HTTP endpoint (`http(s)://host[:port]/path`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Natively: the program to start (no shell), speaking stdio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Names of environment variables passed to the command; every other
    /// variable is cleared.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_allow: Vec<String>,
    /// HTTP headers sent with every request (HTTP only).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, HeaderValue>,
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trusted_functions: Vec<TrustedFunction>,
    /// How the client authorizes itself to a server that answers 401
    /// (HTTP only; `[mcp.auth]`). Without it, discovery decides everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<crate::auth::McpAuthConfig>,
}

/// How a checked configuration reaches its server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Http {
        url: url::Url,
        /// `scheme://host[:port]`, lowercase.
        origin: String,
    },
    Stdio {
        command: String,
        args: Vec<String>,
        env_allow: Vec<String>,
    },
}

/// Headers whose values must never be configured literally: they carry
/// credentials, so they come from secret handles.
const CREDENTIAL_HEADERS: [&str; 4] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
];
/// Headers the transport owns.
const TRANSPORT_HEADERS: [&str; 7] = [
    "host",
    "content-length",
    "content-type",
    "accept",
    "transfer-encoding",
    "mcp-session-id",
    "mcp-protocol-version",
];

impl McpServerConfig {
    /// A server at a Streamable HTTP `url`, with defaults.
    pub fn http(id: impl Into<String>, url: impl Into<String>) -> McpServerConfig {
        McpServerConfig {
            id: id.into(),
            url: Some(url.into()),
            command: None,
            args: Vec::new(),
            env_allow: Vec::new(),
            headers: BTreeMap::new(),
            timeout_ms: DEFAULT_MCP_TIMEOUT_MS,
            trusted_functions: Vec::new(),
            auth: None,
        }
    }

    /// A server started as `command args...` speaking stdio, with defaults.
    pub fn stdio(
        id: impl Into<String>,
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> McpServerConfig {
        McpServerConfig {
            url: None,
            command: Some(command.into()),
            args: args.into_iter().map(Into::into).collect(),
            ..McpServerConfig::http(id, "")
        }
    }

    fn invalid(&self, why: impl Into<String>) -> McpError {
        McpError::Config {
            id: self.id.clone(),
            why: why.into(),
        }
    }

    /// Check everything that can be checked without contacting the server:
    /// the id (valid, not reserved), `url` xor `command`, the timeout, the
    /// headers (names usable, credentials only from secret handles bound to
    /// the server's origin), declared functions unique and with effects.
    pub fn check(&self, secrets: &dyn SecretResolver) -> Result<Endpoint, McpError> {
        check_provider_id(&self.id).map_err(|e| self.invalid(e.to_string()))?;
        if self.timeout_ms == 0 || self.timeout_ms > MAX_MCP_TIMEOUT_MS {
            return Err(self.invalid(format!(
                "timeout_ms must be between 1 and {MAX_MCP_TIMEOUT_MS}"
            )));
        }
        let mut seen = std::collections::BTreeSet::new();
        for f in &self.trusted_functions {
            if !seen.insert(f.name.as_str()) {
                return Err(self.invalid(format!("trusted_functions names {:?} twice", f.name)));
            }
            if f.effects.is_empty() {
                return Err(self.invalid(format!(
                    "trusted function {:?}: declare its effects (at least read_network)",
                    f.name
                )));
            }
        }
        match (&self.url, &self.command) {
            (Some(url), None) => {
                let parsed = url::Url::parse(url)
                    .map_err(|e| self.invalid(format!("url {url:?} is not a URL: {e}")))?;
                if !parsed.username().is_empty() || parsed.password().is_some() {
                    return Err(self.invalid(
                        "url must not contain credentials; use headers with a secret handle",
                    ));
                }
                if parsed.fragment().is_some() {
                    return Err(self.invalid("url must not have a fragment"));
                }
                let (origin, _host) = url_origin(&parsed)
                    .ok_or_else(|| self.invalid("url must be an http or https URL with a host"))?;
                if !self.args.is_empty() || !self.env_allow.is_empty() {
                    return Err(self.invalid("args and env_allow belong to a command, not a url"));
                }
                for (name, value) in &self.headers {
                    self.check_header(name, value, &origin, secrets)?;
                }
                if let Some(auth) = &self.auth {
                    self.check_auth(auth)?;
                }
                Ok(Endpoint::Http {
                    url: parsed,
                    origin,
                })
            }
            (None, Some(command)) => {
                if cfg!(target_arch = "wasm32") {
                    return Err(self.invalid(
                        "a command (stdio) server cannot run in the browser; give a url",
                    ));
                }
                if command.trim().is_empty() {
                    return Err(self.invalid("command is empty"));
                }
                if !self.headers.is_empty() {
                    return Err(self.invalid("headers belong to a url server, not a command"));
                }
                if self.auth.is_some() {
                    return Err(self.invalid(
                        "auth belongs to a url server; a command server takes its credentials from its environment",
                    ));
                }
                for name in &self.env_allow {
                    if name.is_empty() || name.contains('=') || name.contains('\0') {
                        return Err(self.invalid(format!(
                            "env_allow entry {name:?} is not an environment variable name"
                        )));
                    }
                }
                Ok(Endpoint::Stdio {
                    command: command.clone(),
                    args: self.args.clone(),
                    env_allow: self.env_allow.clone(),
                })
            }
            (Some(_), Some(_)) => Err(self.invalid("give either url or command, not both")),
            (None, None) => Err(self.invalid("give a url (Streamable HTTP) or a command (stdio)")),
        }
    }

    fn check_header(
        &self,
        name: &str,
        value: &HeaderValue,
        origin: &str,
        secrets: &dyn SecretResolver,
    ) -> Result<(), McpError> {
        let lower = name.to_ascii_lowercase();
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err()
            || TRANSPORT_HEADERS.contains(&lower.as_str())
        {
            return Err(self.invalid(format!("header {name:?} is not a usable header name")));
        }
        match value {
            HeaderValue::Literal(text) => {
                if CREDENTIAL_HEADERS.contains(&lower.as_str()) {
                    return Err(self.invalid(format!(
                        "header {name:?} carries a credential: give it as {{ secret = \"handle\" }}, never literally"
                    )));
                }
                if reqwest::header::HeaderValue::from_str(text).is_err() {
                    return Err(self.invalid(format!("header {name:?} has an unusable value")));
                }
            }
            HeaderValue::Secret { secret, .. } => {
                let bound = secrets.bound_origin(secret).ok_or_else(|| {
                    self.invalid(format!(
                        "header {name:?} uses secret handle {:?}, which the host does not know; add the secret first",
                        secret.0
                    ))
                })?;
                // Sending a secret to another origin than its own is
                // credential exposure: refused here, and again per request.
                if bound != origin {
                    return Err(self.invalid(format!(
                        "header {name:?}: secret {:?} is bound to {bound}, not to the server's origin {origin}; sending it there would expose the credential",
                        secret.0
                    )));
                }
            }
        }
        Ok(())
    }

    fn check_auth(&self, auth: &crate::auth::McpAuthConfig) -> Result<(), McpError> {
        if auth.client_secret.is_some() && auth.client_id.is_none() {
            return Err(self.invalid("auth.client_secret needs auth.client_id"));
        }
        if auth.grant == crate::auth::AuthGrant::ClientCredentials
            && (auth.client_id.is_none() || auth.client_secret.is_none())
        {
            return Err(self.invalid(
                "auth.grant = \"client_credentials\" needs auth.client_id and auth.client_secret",
            ));
        }
        if let Some(document) = &auth.client_metadata_url {
            let ok = url::Url::parse(document)
                .map(|u| u.scheme() == "https" && u.path() != "/" && u.fragment().is_none())
                .unwrap_or(false);
            if !ok {
                return Err(self.invalid(format!(
                    "auth.client_metadata_url {document:?} must be an https URL with a path (a Client ID Metadata Document)"
                )));
            }
        }
        Ok(())
    }

    /// The declared function named `name` (as the server lists it).
    pub fn declared(&self, name: &str) -> Option<&TrustedFunction> {
        self.trusted_functions.iter().find(|f| f.name == name)
    }
}
