//! A remote model provider from a host's settings, the one rule both hosts
//! use: which wire format ([`ProviderKind`]), its public base URL when none
//! is given, the environment variable its key is read from natively, and
//! when a key is required (the provider's own public endpoint; a local or
//! self-hosted server, such as llama.cpp or Ollama, needs none).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use agent_kernel::host::Clock;

use super::anthropic::{ANTHROPIC_BASE_URL, AnthropicConfig, AnthropicProvider};
use super::capabilities::CapabilityOverrides;
use super::gemini::{GEMINI_BASE_URL, GeminiConfig, GeminiProvider};
use super::openai::{OpenAiConfig, OpenAiProvider};
use super::{ModelProvider, ProviderError};

/// The public OpenAI endpoint.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// Which wire format a remote model speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    /// Chat Completions: OpenAI and the servers compatible with it.
    OpenaiCompatible,
    /// Gemini `streamGenerateContent`.
    Gemini,
    /// Anthropic Messages.
    Anthropic,
}

impl ProviderKind {
    pub const ALL: [ProviderKind; 3] = [
        ProviderKind::OpenaiCompatible,
        ProviderKind::Gemini,
        ProviderKind::Anthropic,
    ];

    /// The name hosts and configuration files use.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenaiCompatible => "openai-compatible",
            ProviderKind::Gemini => "gemini",
            ProviderKind::Anthropic => "anthropic",
        }
    }

    /// Read a name ([`ProviderKind::as_str`]).
    pub fn parse(name: &str) -> Result<ProviderKind, ProviderError> {
        ProviderKind::ALL
            .into_iter()
            .find(|k| k.as_str() == name)
            .ok_or_else(|| {
                ProviderError::Config(format!(
                    "unknown provider {name:?}; use openai-compatible, gemini or anthropic"
                ))
            })
    }

    /// The provider's public endpoint, used when no base URL is given.
    pub fn default_base_url(self) -> &'static str {
        match self {
            ProviderKind::OpenaiCompatible => OPENAI_BASE_URL,
            ProviderKind::Gemini => GEMINI_BASE_URL,
            ProviderKind::Anthropic => ANTHROPIC_BASE_URL,
        }
    }

    /// The environment variable a native host reads the key from by default.
    pub fn key_variable(self) -> &'static str {
        match self {
            ProviderKind::OpenaiCompatible => "OPENAI_API_KEY",
            ProviderKind::Gemini => "GEMINI_API_KEY",
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
        }
    }

    /// True when `base_url` is the provider's own public endpoint, which
    /// refuses requests without a key; any other server may be keyless.
    pub fn key_required(self, base_url: &str) -> bool {
        let host = |u: &str| {
            reqwest::Url::parse(u)
                .ok()
                .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
        };
        host(base_url).is_some_and(|h| Some(h) == host(self.default_base_url()))
    }
}

/// A remote model as a host configured it.
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteModel {
    pub kind: ProviderKind,
    /// `None`: the provider's public endpoint.
    pub base_url: Option<String>,
    /// Held in memory only; never stored, logged or sent anywhere but the
    /// provider's endpoint.
    pub api_key: Option<String>,
    pub capabilities: CapabilityOverrides,
}

impl std::fmt::Debug for RemoteModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteModel")
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("capabilities", &self.capabilities)
            .finish()
    }
}

impl RemoteModel {
    /// The base URL requests go to.
    pub fn base_url(&self) -> &str {
        self.base_url
            .as_deref()
            .unwrap_or(self.kind.default_base_url())
    }

    /// The provider, or why it cannot be built (a bad URL, or no key for
    /// the provider's public endpoint).
    pub fn provider(&self, clock: Arc<dyn Clock>) -> Result<Arc<dyn ModelProvider>, ProviderError> {
        let base = self.base_url().to_owned();
        if self.api_key.is_none() && self.kind.key_required(&base) {
            return Err(ProviderError::Config(format!(
                "{} needs an API key at {base}; set {} (or give a key), or point --base-url at a keyless server",
                self.kind.as_str(),
                self.kind.key_variable()
            )));
        }
        Ok(match self.kind {
            ProviderKind::OpenaiCompatible => {
                let mut c = OpenAiConfig::new(base);
                c.api_key = self.api_key.clone();
                c.capabilities = self.capabilities;
                Arc::new(OpenAiProvider::new(c, clock)?)
            }
            ProviderKind::Gemini => {
                let mut c = GeminiConfig::new(base);
                c.api_key = self.api_key.clone();
                c.capabilities = self.capabilities;
                Arc::new(GeminiProvider::new(c, clock)?)
            }
            ProviderKind::Anthropic => {
                let mut c = AnthropicConfig::new(base);
                c.api_key = self.api_key.clone();
                c.capabilities = self.capabilities;
                Arc::new(AnthropicProvider::new(c, clock)?)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_required_only_by_the_providers_own_endpoint() {
        for kind in ProviderKind::ALL {
            assert_eq!(ProviderKind::parse(kind.as_str()).unwrap(), kind);
            assert!(kind.key_required(kind.default_base_url()));
            assert!(!kind.key_required("http://127.0.0.1:8080/v1"));
            assert!(!kind.key_required("not a url"));
        }
        assert!(ProviderKind::parse("openai").is_err());
        let clock: Arc<dyn Clock> = Arc::new(agent_kernel::host::ManualClock::new(0));
        let keyless = RemoteModel {
            kind: ProviderKind::Gemini,
            base_url: None,
            api_key: None,
            capabilities: CapabilityOverrides::default(),
        };
        let Err(err) = keyless.provider(clock.clone()) else {
            panic!("a public endpoint without a key is refused");
        };
        assert!(err.to_string().contains("GEMINI_API_KEY"), "{err}");
        let local = RemoteModel {
            base_url: Some("http://127.0.0.1:11434/v1beta".into()),
            ..keyless.clone()
        };
        assert_eq!(local.provider(clock.clone()).unwrap().name(), "gemini");
        let keyed = RemoteModel {
            api_key: Some("secret-key".into()),
            ..keyless
        };
        assert!(!format!("{keyed:?}").contains("secret-key"));
    }
}
