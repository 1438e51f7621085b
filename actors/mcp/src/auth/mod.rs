//! Authorization of Streamable HTTP servers, as the MCP specification's
//! Authorization section (revision 2025-11-25) says. This module owns the
//! host-facing pieces; its submodules own one step each:
//!
//! - [`challenge`]: reading a `WWW-Authenticate: Bearer` challenge
//!   (`resource_metadata`, `scope`, `error`);
//! - [`discovery`]: protected resource metadata (RFC 9728: the challenge's
//!   URL, then the well-known URLs), the check that it names this server,
//!   and authorization server metadata (RFC 8414 and OpenID Connect
//!   discovery, in the specification's order; the 2025-03-26 fallbacks);
//! - [`flow`]: PKCE S256, the authorization request with `state` and
//!   `resource` (RFC 8707), client identity (pre-registered, then a Client
//!   ID Metadata Document, then Dynamic Client Registration, RFC 7591), the
//!   token requests (authorization code, refresh, client credentials) and
//!   client authentication at the token endpoint;
//! - `session`: the per-connection state the transport consults (the
//!   bearer to send, what to do on a 401 and on a 403 `insufficient_scope`);
//! - [`store`]: [`CredentialStore`] and the credentials it holds.
//!
//! What a host provides ([`AuthEnv`]): where credentials live
//! ([`CredentialStore`]; tokens are credentials, S5.10: they never enter run
//! records, events or logs), the URL policy every metadata fetch and
//! redirect target goes through ([`UrlGuard`]), random bytes, and, when a
//! person is there to log in, the browser step ([`UserAgent`]). Without a
//! user agent (a run), a server that needs a login the store cannot satisfy
//! (no token, no refresh) is [`McpError::AuthRequired`].

pub mod challenge;
pub mod discovery;
pub mod flow;
pub(crate) mod http;
pub(crate) mod session;
pub mod store;

use std::net::SocketAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use agent_kernel::host::Entropy;
use agent_kernel::host::secrets::SecretHandle;
use agent_kernel::{MaybeSend, MaybeSync};

pub use store::{CredentialStore, MemoryCredentialStore, StoredCredentials};

use crate::error::McpError;

/// How many authorizations one request may start (a first login, then
/// step-ups): a server that keeps refusing is not asked forever.
pub const MAX_AUTHORIZATIONS_PER_REQUEST: u32 = 2;
/// The largest metadata document or token answer read, in bytes.
pub const MAX_AUTH_DOCUMENT_BYTES: usize = 256 * 1024;

/// The grant a server's client uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthGrant {
    /// A person logs in (`agentrt mcp login ID`): authorization code + PKCE.
    #[default]
    AuthorizationCode,
    /// A machine client: its own pre-registered id and secret.
    ClientCredentials,
}

/// The `auth` table of a server's configuration (`[mcp.auth]`). Every
/// field is optional: a server that answers 401 is authorized with what
/// discovery finds.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpAuthConfig {
    #[serde(default)]
    pub grant: AuthGrant,
    /// A pre-registered client id (used first when given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The pre-registered client's secret, a secret handle bound to the
    /// authorization server's token endpoint origin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<SecretHandle>,
    /// An `https` URL of this client's metadata document (a Client ID
    /// Metadata Document), used as the client id where the authorization
    /// server supports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    /// Scopes to ask for when neither the server's challenge nor its
    /// metadata names any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// Let metadata, authorization and token URLs on loopback addresses
    /// (`localhost`, 127.0.0.0/8, ::1) through the URL policy: for a
    /// server and authorization server the person runs on this machine.
    /// Other private addresses stay refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_loopback: bool,
}

/// The URL policy for everything authorization reaches: metadata
/// documents, registration, token and authorization endpoints. The host
/// implements it with its URL policy (natively `agent_fetch::UrlPolicy`).
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
pub trait UrlGuard: MaybeSend + MaybeSync {
    /// Check `url` before anything is sent to it. Returns the only
    /// addresses a connection may use (empty when the host cannot pin
    /// them, as in a page), or why the URL is refused.
    async fn check(&self, url: &url::Url, allow_loopback: bool) -> Result<Vec<SocketAddr>, String>;
}

/// What the user agent brought back to the redirect URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Callback {
    /// The redirect URI's query parameters (`code`, `state`, `error`, ...).
    pub params: Vec<(String, String)>,
}

impl Callback {
    /// The first value of parameter `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The browser step of the authorization code flow: natively a printed URL
/// and a loopback listener; in a page, a popup the embedder opens.
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
pub trait UserAgent: MaybeSend + MaybeSync {
    /// The redirect URI this user agent receives the answer at (natively
    /// the loopback listener's `http://127.0.0.1:PORT/callback`).
    async fn redirect_uri(&self) -> Result<String, McpError>;
    /// Send the person to `authorization_url` (already checked by the URL
    /// policy) and return what arrived at the redirect URI.
    async fn authorize(&self, authorization_url: &url::Url) -> Result<Callback, McpError>;
}

/// What a host gives authorization.
#[derive(Clone)]
pub struct AuthEnv {
    pub store: Arc<dyn CredentialStore>,
    pub guard: Arc<dyn UrlGuard>,
    pub entropy: Arc<dyn Entropy>,
    /// Present only where a person can log in now (`agentrt mcp login`).
    pub user_agent: Option<Arc<dyn UserAgent>>,
}

impl std::fmt::Debug for AuthEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthEnv")
            .field("user_agent", &self.user_agent.is_some())
            .finish_non_exhaustive()
    }
}
