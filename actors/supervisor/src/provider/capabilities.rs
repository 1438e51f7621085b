//! What a model can do (S13.1): whether it calls tools, its context window
//! and its output limit. Each provider answers for its models from a small
//! built-in table by model-name prefix ([`lookup`]), which a host's
//! configuration may override field by field ([`CapabilityOverrides`]). A
//! model that does not call tools runs chat only: the runtime refuses to
//! start an Agent or Research run on it (S9.1). The conversation's context
//! rule uses the window when the run sets none.

use serde::{Deserialize, Serialize};

/// What one model can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelCapabilities {
    /// The model calls tools (function calling).
    pub tool_calling: bool,
    /// Tokens the model reads in one request.
    pub context_window_tokens: u32,
    /// Tokens the model writes in one answer at most.
    pub max_output_tokens: u32,
}

impl ModelCapabilities {
    /// What is assumed of a model nobody described: it calls tools, with a
    /// modest window, so a run works and the conversation stays small.
    pub const ASSUMED: ModelCapabilities = ModelCapabilities {
        tool_calling: true,
        context_window_tokens: 32_768,
        max_output_tokens: 4_096,
    };

    /// These capabilities with `overrides` applied.
    pub fn with(self, overrides: &CapabilityOverrides) -> ModelCapabilities {
        ModelCapabilities {
            tool_calling: overrides.tool_calling.unwrap_or(self.tool_calling),
            context_window_tokens: overrides
                .context_window_tokens
                .unwrap_or(self.context_window_tokens),
            max_output_tokens: overrides
                .max_output_tokens
                .unwrap_or(self.max_output_tokens),
        }
    }
}

/// A host's statements about its model, each replacing the table's value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapabilityOverrides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calling: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
}

/// The built-in table: the first row whose prefix the model name (lower
/// case, without a `models/` or vendor `…/` prefix) starts with.
const TABLE: &[(&str, ModelCapabilities)] = &[
    ("gemini-", caps(true, 1_048_576, 65_536)),
    ("gemma-", caps(false, 32_768, 8_192)),
    ("claude-", caps(true, 200_000, 64_000)),
    ("gpt-4o", caps(true, 128_000, 16_384)),
    ("gpt-4.1", caps(true, 1_047_576, 32_768)),
    ("gpt-5", caps(true, 400_000, 128_000)),
    ("o3", caps(true, 200_000, 100_000)),
    ("o4-", caps(true, 200_000, 100_000)),
    ("gpt-3.5-turbo-instruct", caps(false, 4_096, 4_096)),
    ("llama-3.1", caps(true, 131_072, 8_192)),
    ("llama3.1", caps(true, 131_072, 8_192)),
    ("qwen", caps(true, 32_768, 8_192)),
    ("mistral", caps(true, 32_768, 8_192)),
    ("phi", caps(false, 16_384, 4_096)),
];

const fn caps(tool_calling: bool, window: u32, output: u32) -> ModelCapabilities {
    ModelCapabilities {
        tool_calling,
        context_window_tokens: window,
        max_output_tokens: output,
    }
}

/// The table's capabilities of `model`, or [`ModelCapabilities::ASSUMED`].
pub fn lookup(model: &str) -> ModelCapabilities {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    TABLE
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|(_, c)| *c)
        .unwrap_or(ModelCapabilities::ASSUMED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_matches_by_prefix_and_overrides_replace_field_by_field() {
        assert!(lookup("gemini-2.5-flash").tool_calling);
        assert_eq!(
            lookup("models/gemini-2.5-pro").context_window_tokens,
            1_048_576
        );
        assert_eq!(lookup("claude-sonnet-4-5").context_window_tokens, 200_000);
        assert!(!lookup("google/gemma-3-27b").tool_calling);
        assert_eq!(lookup("my-local-model"), ModelCapabilities::ASSUMED);
        let o = CapabilityOverrides {
            tool_calling: Some(false),
            context_window_tokens: None,
            max_output_tokens: Some(100),
        };
        let c = lookup("gpt-4o-mini").with(&o);
        assert!(!c.tool_calling);
        assert_eq!(c.context_window_tokens, 128_000);
        assert_eq!(c.max_output_tokens, 100);
    }
}
