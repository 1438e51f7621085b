//! The one rule of which key, if any, may go to a model endpoint (issue
//! 32): [`Config::key_for_endpoint`] compares endpoints (kind, scheme, host,
//! port, path, query) with the sections of the configuration, so that a key
//! variable is read only for the endpoint a section names, or the
//! provider's usual variable for its public endpoint.

use agent_supervisor::ProviderKind;

use super::{Config, ProviderConfig};

/// Which key, if any, may go to a model endpoint (issue 32).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointKey {
    /// Read from this environment variable; `required`: the configuration
    /// named it, so it must be set.
    Variable { variable: String, required: bool },
    /// No key: the endpoint is one no section of the configuration names.
    None,
}

impl ProviderConfig {
    /// The key this section sends to its own endpoint: the variable it
    /// names (which must then be set), else the provider's usual one.
    pub fn endpoint_key(&self) -> EndpointKey {
        match &self.api_key_env {
            Some(variable) => EndpointKey::Variable {
                variable: variable.clone(),
                required: true,
            },
            None => EndpointKey::Variable {
                variable: self.kind.key_variable().to_owned(),
                required: false,
            },
        }
    }
}

/// An endpoint as compared for [`Config::key_for_endpoint`]: scheme, host,
/// port (the scheme's default when none is written), path without trailing
/// slashes, and query; `None` for the provider's public endpoint. A URL that
/// does not parse is its own text, equal to nothing but itself.
fn endpoint_identity(kind: ProviderKind, base_url: Option<&str>) -> String {
    let text = base_url.unwrap_or(kind.default_base_url());
    match url::Url::parse(text) {
        Ok(url) => format!(
            "{}://{}:{}{}?{}",
            url.scheme(),
            url.host_str().unwrap_or(""),
            url.port_or_known_default()
                .map(|p| p.to_string())
                .unwrap_or_default(),
            url.path().trim_end_matches('/'),
            url.query().unwrap_or("")
        ),
        Err(_) => format!("unparsed:{text}"),
    }
}

impl Config {
    /// The one owner of "which key may go to this endpoint" (issue 32):
    /// the key of the first section (`[provider]`, then `[providers.NAME]`
    /// by name) of the same kind naming the same endpoint; else, for the
    /// provider's public endpoint, its usual variable; else none. Never a
    /// variable named anywhere but this process's configuration.
    pub fn key_for_endpoint(&self, kind: ProviderKind, base_url: Option<&str>) -> EndpointKey {
        let wanted = endpoint_identity(kind, base_url);
        let configured = self
            .provider
            .iter()
            .chain(self.providers.values())
            .find(|p| p.kind == kind && endpoint_identity(p.kind, p.base_url.as_deref()) == wanted);
        if let Some(section) = configured {
            return section.endpoint_key();
        }
        if wanted == endpoint_identity(kind, None) {
            return EndpointKey::Variable {
                variable: kind.key_variable().to_owned(),
                required: false,
            };
        }
        EndpointKey::None
    }
}
