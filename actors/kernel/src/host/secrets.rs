//! Secrets the host keeps: a [`SecretHandle`] is configured, shown and
//! stored; its [`SecretValue`] is resolved by the host's [`SecretResolver`]
//! only at dispatch, by the actor that sends the request (plugins, MCP
//! servers). Each secret is bound to one origin: sending it anywhere else is
//! `credential_exposure`.

use serde::{Deserialize, Serialize};

use crate::{MaybeSend, MaybeSync};

/// A name for a secret the host keeps (a key-chain entry, an environment
/// variable, a browser credential store). Only the handle is configured,
/// shown or stored; the value is resolved at dispatch.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SecretHandle(pub String);

/// A resolved secret. No `Display`, no `Serialize`, and its `Debug` prints
/// nothing of the value, so it cannot reach logs or records by accident.
#[derive(Clone)]
pub struct SecretValue(String);

impl SecretValue {
    pub fn new(value: impl Into<String>) -> SecretValue {
        SecretValue(value.into())
    }
    /// The value, for putting into the request header. Do not log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretValue([redacted])")
    }
}

/// The host could not resolve a secret handle.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("no secret is stored under handle {0:?}; add it in the host's secret settings")]
    Unknown(String),
    #[error("the secret store is unavailable: {0}")]
    Unavailable(String),
}

/// Implemented by the host: resolves secret handles at dispatch.
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
pub trait SecretResolver: MaybeSend + MaybeSync {
    /// The origin (`scheme://host[:port]`) the secret is bound to, or None
    /// when no secret has this handle.
    fn bound_origin(&self, handle: &SecretHandle) -> Option<String>;
    /// The secret's value. Called only when a request is about to be sent.
    async fn resolve(&self, handle: &SecretHandle) -> Result<SecretValue, SecretError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_value_debug_hides_the_value() {
        let s = SecretValue::new("marker-123");
        assert!(!format!("{s:?}").contains("marker-123"));
    }
}
