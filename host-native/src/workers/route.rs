//! Where a claimed request goes in this worker (S14.2): the runtime of the
//! provider a queued run names, or, for a name this worker's configuration
//! lacks, a provider that fails every request and says which is missing.

use std::sync::Arc;

use agent_kernel::{RunId, SessionId};

use agent_supervisor::provider::capabilities::ModelCapabilities;
use agent_supervisor::provider::set::NamedProvider;
use agent_supervisor::{ModelProvider, ProviderError};

use crate::app::App;
use crate::config::ProviderNameError;
use crate::workers::queue::{QueuedRun, RefusedEntry};

/// The `apps` key of the runtime whose provider stands for every name this
/// worker's configuration lacks.
pub(super) const UNCONFIGURED: &str = "unconfigured";

/// Where a queued run goes in this worker (S14.2).
pub(super) struct Route {
    pub(super) app: Arc<App>,
    /// The model a start is given: the person's choice, else the
    /// configured provider's (none for a scripted scenario).
    pub(super) model: Option<String>,
    /// The run names a provider this worker's configuration lacks.
    pub(super) missing: Option<Missing>,
}

/// A provider name this worker's configuration lacks, and why.
pub(super) struct Missing {
    pub(super) name: Option<String>,
    pub(super) error: ProviderNameError,
}

/// One claimed request: a run with its route, or a refused record (dropped
/// with the base runtime, no provider built).
pub(super) enum Job {
    Run(QueuedRun, Route),
    Refused(RefusedEntry, Arc<App>),
}

impl Job {
    pub(super) fn names(&self) -> (SessionId, RunId) {
        match self {
            Job::Run(e, _) => (e.session.clone(), e.run.clone()),
            Job::Refused(r, _) => (r.session.clone(), r.run.clone()),
        }
    }
    pub(super) fn app(&self) -> &App {
        match self {
            Job::Run(_, route) => &route.app,
            Job::Refused(_, app) => app,
        }
    }
}

/// The provider of runs naming a provider this worker's configuration
/// lacks: every request fails at once (not an outage, so the run ends
/// `failed`, its stop reason naming the missing provider), and nothing is
/// sent anywhere. A run naming `[providers.NAME]` reaches it through
/// [`ModelProvider::named`]; one naming none (no `[provider]` here) through
/// the default.
pub(super) struct Unconfigured {
    /// The names this worker does configure, for the message.
    pub(super) known: Vec<String>,
}

impl Unconfigured {
    pub(super) fn failing(error: ProviderNameError) -> Arc<dyn ModelProvider> {
        Arc::new(Failing(error))
    }
}

/// Fails every request, saying which provider is missing.
pub(super) struct Failing(ProviderNameError);

#[async_trait::async_trait]
impl ModelProvider for Failing {
    fn name(&self) -> &str {
        UNCONFIGURED
    }
    fn capabilities(&self, _model: &str) -> ModelCapabilities {
        // The run starts, so that its record can say why it failed.
        ModelCapabilities::ASSUMED
    }
    async fn stream(
        &self,
        _request: agent_supervisor::provider::ModelRequest,
    ) -> Result<agent_supervisor::provider::ModelStream, ProviderError> {
        Err(ProviderError::Config(format!(
            "this worker: {} (S14.2: a queued run names a provider of the workers' own configuration)",
            self.0
        )))
    }
}

#[async_trait::async_trait]
impl ModelProvider for Unconfigured {
    fn name(&self) -> &str {
        UNCONFIGURED
    }
    fn capabilities(&self, _model: &str) -> ModelCapabilities {
        ModelCapabilities::ASSUMED
    }
    fn named(&self, name: &str) -> Option<NamedProvider> {
        let known = if self.known.is_empty() {
            "none".to_owned()
        } else {
            self.known.join(", ")
        };
        Some(NamedProvider {
            provider: Unconfigured::failing(ProviderNameError::Unknown {
                name: name.to_owned(),
                known,
            }),
            default_model: UNCONFIGURED.to_owned(),
        })
    }
    async fn stream(
        &self,
        request: agent_supervisor::provider::ModelRequest,
    ) -> Result<agent_supervisor::provider::ModelStream, ProviderError> {
        Failing(ProviderNameError::NoDefault).stream(request).await
    }
}
