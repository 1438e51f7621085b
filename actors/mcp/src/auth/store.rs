//! [`CredentialStore`]: where the tokens of MCP servers live, keyed by the
//! server's configured id. Tokens are credentials (S5.10): a host keeps
//! them in a store of their own (natively a file of mode 0600 in the data
//! directory, or nowhere), never in run records, events, logs or exports.
//! [`MemoryCredentialStore`] keeps them for the life of the process.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use agent_kernel::{MaybeSend, MaybeSync};

/// What a login left for one server. `Debug` never shows a token or secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredCredentials {
    /// The server URL the login was for: credentials of another URL under
    /// the same id are not used.
    pub server_url: String,
    /// The `resource` the tokens were issued for (RFC 8707).
    pub resource: String,
    /// The authorization server's token endpoint (refresh goes there only).
    pub token_endpoint: String,
    pub client_id: String,
    /// A secret the registration issued (Dynamic Client Registration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// `client_secret_basic`, `client_secret_post` or `none`.
    pub token_endpoint_auth_method: String,
    pub access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token expires, in Unix milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    /// The scopes asked for (or granted, when the server said).
    #[serde(default)]
    pub scopes: Vec<String>,
}

impl std::fmt::Debug for StoredCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredCredentials")
            .field("server_url", &self.server_url)
            .field("resource", &self.resource)
            .field("token_endpoint", &self.token_endpoint)
            .field("client_id", &self.client_id)
            .field("scopes", &self.scopes)
            .field("expires_at_ms", &self.expires_at_ms)
            .finish_non_exhaustive()
    }
}

/// A credential store failed (the file is unreadable, the disk is full).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the MCP credential store failed: {0}")]
pub struct StoreError(pub String);

/// The credentials of MCP servers, by server id.
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
pub trait CredentialStore: MaybeSend + MaybeSync {
    async fn load(&self, server_id: &str) -> Result<Option<StoredCredentials>, StoreError>;
    async fn save(
        &self,
        server_id: &str,
        credentials: &StoredCredentials,
    ) -> Result<(), StoreError>;
    /// Forget a server's credentials; true when there were some.
    async fn remove(&self, server_id: &str) -> Result<bool, StoreError>;
}

/// Credentials kept in memory only (`--no-store-credentials`, tests).
#[derive(Default)]
pub struct MemoryCredentialStore {
    entries: Mutex<BTreeMap<String, StoredCredentials>>,
}

impl MemoryCredentialStore {
    pub fn new() -> MemoryCredentialStore {
        MemoryCredentialStore::default()
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, StoredCredentials>> {
        match self.entries.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl CredentialStore for MemoryCredentialStore {
    async fn load(&self, server_id: &str) -> Result<Option<StoredCredentials>, StoreError> {
        Ok(self.entries().get(server_id).cloned())
    }
    async fn save(
        &self,
        server_id: &str,
        credentials: &StoredCredentials,
    ) -> Result<(), StoreError> {
        self.entries()
            .insert(server_id.to_owned(), credentials.clone());
        Ok(())
    }
    async fn remove(&self, server_id: &str) -> Result<bool, StoreError> {
        Ok(self.entries().remove(server_id).is_some())
    }
}
