//! Legacy assistants (S10.3): the records of the application's assistants
//! before profiles (a name, a system prompt, a model), in the shapes they
//! were written in, and their conversion to chat-only profiles. The store
//! migrates one lazily, the first time it is read.
//!
//! Shapes read (any other field, such as `avatar` or `temperature`, is
//! ignored):
//!
//! - snake case: `{"name", "system_prompt", "model": "gpt-4o"}`;
//! - camel case: `{"name", "systemPrompt", "model": {"provider", "name"}}`,
//!   the model also as a plain string;
//! - `title` for `name`, `instructions` or `prompt` for the system prompt.

use serde_json::Value;

use crate::error::ProfileError;
use crate::profile::{
    AgentProfileV2, MAX_NAME_CHARS, MAX_PROMPT_ADDITION_BYTES, ModelChoice, ProfileId, ProfileMode,
};

/// The largest legacy record read, in bytes.
pub const MAX_LEGACY_BYTES: usize = 256 * 1024;

/// A legacy assistant, read from any of its shapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyAssistant {
    pub name: Option<String>,
    pub system_prompt: Option<String>,
    pub provider: Option<String>,
    pub model: Option<String>,
}

fn text(obj: &serde_json::Map<String, Value>, keys: &[&str]) -> Result<Option<String>, String> {
    for key in keys {
        match obj.get(*key) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => return Ok(Some(s.clone())),
            Some(_) => return Err(format!("field {key:?} is not a string")),
        }
    }
    Ok(None)
}

impl LegacyAssistant {
    /// Read a legacy record (at storage key `key`, for errors).
    pub fn parse(key: &str, bytes: &[u8]) -> Result<LegacyAssistant, ProfileError> {
        let fail = |why: String| ProfileError::Legacy {
            key: key.to_owned(),
            why,
        };
        if bytes.len() > MAX_LEGACY_BYTES {
            return Err(fail(format!(
                "it is {} bytes, over the {MAX_LEGACY_BYTES}-byte limit",
                bytes.len()
            )));
        }
        // serde_json bounds nesting (128 levels): no unbounded recursion.
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| fail(format!("not JSON: {e}")))?;
        let Value::Object(obj) = value else {
            return Err(fail("not a JSON object".to_owned()));
        };
        let name = text(&obj, &["name", "title"]).map_err(fail)?;
        let system_prompt = text(
            &obj,
            &["system_prompt", "systemPrompt", "instructions", "prompt"],
        )
        .map_err(fail)?;
        let (provider, model) = match obj.get("model") {
            None | Some(Value::Null) => (None, text(&obj, &["modelId", "model_id"]).map_err(fail)?),
            Some(Value::String(s)) => (None, Some(s.clone())),
            Some(Value::Object(m)) => (
                text(m, &["provider"]).map_err(fail)?,
                text(m, &["name", "id", "model"]).map_err(fail)?,
            ),
            Some(_) => {
                return Err(fail(
                    "field \"model\" is neither a string nor an object".into(),
                ));
            }
        };
        Ok(LegacyAssistant {
            name,
            system_prompt,
            provider,
            model,
        })
    }

    /// The chat-only profile this assistant becomes: mode chat, every
    /// allowlist empty, no web search, no Memory, its system prompt as the
    /// system prompt addition. A blank name becomes `Assistant <id>`; a
    /// name too long is shortened; anything else out of bounds is refused.
    pub fn to_profile(&self, key: &str, id: ProfileId) -> Result<AgentProfileV2, ProfileError> {
        let fail = |why: String| ProfileError::Legacy {
            key: key.to_owned(),
            why,
        };
        let name: String = match self.name.as_deref().map(str::trim) {
            Some(n) if !n.is_empty() => n
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .take(MAX_NAME_CHARS)
                .collect(),
            _ => format!("Assistant {id}"),
        };
        if let Some(p) = &self.system_prompt
            && p.len() > MAX_PROMPT_ADDITION_BYTES
        {
            return Err(fail(format!(
                "its system prompt is {} bytes, over the {MAX_PROMPT_ADDITION_BYTES}-byte limit",
                p.len()
            )));
        }
        let mut profile = AgentProfileV2::new(id, name);
        profile.mode = ProfileMode::Chat;
        profile.model = ModelChoice {
            provider: self.provider.clone().filter(|p| !p.trim().is_empty()),
            model: match self.model.as_deref().map(str::trim) {
                Some(m) if !m.is_empty() => m.to_owned(),
                _ => ModelChoice::default().model,
            },
            max_output_tokens: None,
        };
        profile.search.web_search = false;
        profile.plugins = Some(Default::default());
        profile.mcp_servers = Some(Default::default());
        profile.tools = Some(Default::default());
        profile.knowledge = Some(Default::default());
        profile.skills = Some(Default::default());
        profile.system_prompt_addition = self.system_prompt.clone().filter(|p| !p.is_empty());
        profile.validate().map_err(|e| fail(e.to_string()))?;
        Ok(profile)
    }
}
