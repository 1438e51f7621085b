//! Named providers beside the runtime's default (S13.3: a run may choose its
//! provider): [`ProviderSet`] is itself a [`ModelProvider`] whose default
//! answers every run that names none, and [`resolve`] is the one rule that
//! turns a run's `ModelSettings::provider` into the provider that serves it.
//! A run stores only the name, never an endpoint or a key, so a host that
//! opens again with the same names serves its resumed runs the same way.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::capabilities::ModelCapabilities;
use super::{ModelProvider, ModelRequest, ModelStream, ProviderError};

/// Longest provider name a run may give.
pub const MAX_PROVIDER_NAME_BYTES: usize = 64;

/// A named provider and the model a run that names it uses by default.
#[derive(Clone)]
pub struct NamedProvider {
    pub provider: Arc<dyn ModelProvider>,
    pub default_model: String,
}

/// The runtime's default provider plus named ones.
pub struct ProviderSet {
    default: Arc<dyn ModelProvider>,
    named: BTreeMap<String, NamedProvider>,
}

impl ProviderSet {
    /// `named` keys must be 1 to [`MAX_PROVIDER_NAME_BYTES`] bytes of
    /// `A-Z a-z 0-9 - _ .`.
    pub fn new(
        default: Arc<dyn ModelProvider>,
        named: BTreeMap<String, NamedProvider>,
    ) -> Result<ProviderSet, ProviderError> {
        if let Some(bad) = named.keys().find(|n| !valid_name(n)) {
            return Err(ProviderError::Config(format!(
                "provider name {bad:?} must be 1 to {MAX_PROVIDER_NAME_BYTES} characters from A-Z a-z 0-9 - _ ."
            )));
        }
        Ok(ProviderSet { default, named })
    }
}

/// Whether `name` may name a provider: 1 to [`MAX_PROVIDER_NAME_BYTES`]
/// bytes of `A-Z a-z 0-9 - _ .` (the one rule for every host's names: the
/// browser's `models`, the native `[providers.NAME]`, a queued run's name).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_PROVIDER_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The provider that serves a run naming `name` (None: the default). A name
/// the host did not configure is [`ProviderError::UnknownProvider`].
pub fn resolve(
    provider: &Arc<dyn ModelProvider>,
    name: Option<&str>,
) -> Result<Arc<dyn ModelProvider>, ProviderError> {
    match name {
        None => Ok(provider.clone()),
        Some(name) => provider
            .named(name)
            .map(|n| n.provider)
            .ok_or_else(|| ProviderError::UnknownProvider(name.to_owned())),
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl ModelProvider for ProviderSet {
    fn name(&self) -> &str {
        self.default.name()
    }

    fn capabilities(&self, model: &str) -> ModelCapabilities {
        self.default.capabilities(model)
    }

    fn named(&self, name: &str) -> Option<NamedProvider> {
        self.named.get(name).cloned()
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        self.default.stream(request).await
    }
}
