//! [`NoModel`]: the provider of a runtime that only reads runs (`agentrt
//! show`): every request is refused with a typed error, so a run can never
//! be driven by it by mistake.

use agent_supervisor::ModelProvider;
use agent_supervisor::provider::{ModelRequest, ModelStream, ProviderError};

/// A model provider that refuses every request.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoModel;

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl ModelProvider for NoModel {
    fn name(&self) -> &str {
        "none"
    }
    async fn stream(&self, _request: ModelRequest) -> Result<ModelStream, ProviderError> {
        Err(ProviderError::Config(
            "this runtime reads runs only; it has no model to talk to".into(),
        ))
    }
}
