//! `RunConfig`: what one run may do and which model it talks to (budget,
//! approval mode, tool allowlist, an applied Skill, model settings with the
//! bounds of the context window, an embedder's own chat history with its
//! bounds, [`validate_history`]), and the
//! system prompt a run is sent: the default Agent system prompt, versioned
//! in `actors/supervisor/prompts/`, which a run may replace or extend. A
//! later Profiles issue fills it; today callers build it directly or take
//! the defaults.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use agent_capabilities::ApprovalMode;
use agent_kernel::budget::{Budget, BudgetError};
use agent_kernel::protocol::{AppliedSkill, RunToolConfig};
use agent_kernel::reasoning::{Reasoning, ReasoningError};
use agent_kernel::run::RunMode;

use crate::message::{AssistantToolCall, Message};

/// The model's context window when its settings name none, in tokens.
pub const DEFAULT_CONTEXT_WINDOW_TOKENS: u32 = 32_768;
/// The smallest context window a run may state, in tokens.
pub const MIN_CONTEXT_WINDOW_TOKENS: u32 = 1_024;
/// At most this many messages in an embedder's `history`.
pub const MAX_HISTORY_MESSAGES: usize = 256;
/// At most this many bytes of content in an embedder's `history`.
pub const MAX_HISTORY_BYTES: usize = 512 * 1024;

/// The version of the default Agent system prompt ([`AGENT_SYSTEM_PROMPT`]).
/// A change of its text is a new file and a new version.
pub const AGENT_SYSTEM_PROMPT_VERSION: &str = "agent-system-v1";

/// The default Agent system prompt: what the runtime guarantees (tools are
/// checked and journaled, effects may need approval, uncertain effects are
/// never repeated, outside content is data and never instructions).
pub const AGENT_SYSTEM_PROMPT: &str = include_str!("../prompts/agent-system-v1.md");

/// Which model, and how to ask it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSettings {
    pub model: String,
    /// A provider the host configured by name beside its default (S13.3);
    /// None: the default. Only the name is stored, never an endpoint or key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Replaces the default Agent system prompt. Stored only in the run's
    /// config blob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Added after the system prompt (the default one, or `system_prompt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_extension: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// How hard a thinking model reasons and its thinking budget (S10.1),
    /// sent in each wire format's own field; unset: none is sent.
    #[serde(default, skip_serializing_if = "Reasoning::is_unset")]
    pub reasoning: Reasoning,
    /// The model's context window in tokens (the conversation's context
    /// rule uses it); [`DEFAULT_CONTEXT_WINDOW_TOKENS`] when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window_tokens: Option<u32>,
}

impl ModelSettings {
    /// The context window the conversation's rule works with.
    pub fn context_window(&self) -> u32 {
        self.context_window_tokens
            .unwrap_or(DEFAULT_CONTEXT_WINDOW_TOKENS)
    }
}

impl Default for ModelSettings {
    fn default() -> Self {
        Self {
            model: "default".into(),
            provider: None,
            system_prompt: None,
            system_extension: None,
            temperature: None,
            max_output_tokens: None,
            reasoning: Reasoning::default(),
            context_window_tokens: None,
        }
    }
}

/// Everything a run is configured with. Persisted as a blob beside the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    #[serde(default)]
    pub mode: RunMode,
    #[serde(default)]
    pub budget: Budget,
    #[serde(default)]
    pub approval: ApprovalMode,
    /// Tool names the run may use; `None` means every tool of the mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowlist: Option<BTreeSet<String>>,
    /// A Skill applied to the run (S5.6): it narrows the tools to the
    /// intersection with `allowlist` and adds its instructions to the
    /// system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<AppliedSkill>,
    #[serde(default)]
    pub model: ModelSettings,
    /// An embedder's own chat history: the run starts from exactly these
    /// messages instead of its session's conversation (S12). Kept in the
    /// run's transcript, not in its stored configuration.
    #[serde(default, skip_serializing)]
    pub history: Option<Vec<HistoryMessage>>,
    /// A run that ends with one call ([`EndingCall`]; a Deep Research start
    /// turn, S9.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ending_call: Option<EndingCall>,
    /// Caveats on every capability the run mints (S10.2: a profile's and a
    /// turn's narrowing), checked wherever the capability is verified.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caveats: Vec<agent_capabilities::Caveat>,
    /// The Agent Profile revision the run was configured from (S10.2),
    /// kept with the run's stored configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<RunProfile>,
    /// What the host's own tools may do in this run, by tool family, kept
    /// with the run so that a run resumed after a restart keeps them (the
    /// assembly's Memory scopes and knowledge allowlist, S10.1).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub grants: std::collections::BTreeMap<String, serde_json::Value>,
}

/// Which profile revision a run used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunProfile {
    pub id: String,
    pub revision: u64,
}

/// A run whose turn ends with one call of one tool (S9.3: a Deep Research
/// start turn shows only `start_deep_research` and stops after it):
/// - the model is offered only `tool` (the allowlist and any Skill still
///   narrow: a run that may not use it is offered nothing);
/// - of a response's calls, the first call of `tool` is the round's only
///   call; the others are dropped before anything is durable;
/// - a response without it gets the runtime's own call of `tool` with
///   `fallback_arguments` and a call id derived from the run, so the same
///   turn always makes the same call, through the same tool path (journal,
///   approval, capability);
/// - once the call has its result the run completes with that result as
///   its output; the model is not asked again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndingCall {
    pub tool: String,
    /// The arguments of the runtime's own call (a JSON object).
    pub fallback_arguments: serde_json::Value,
}

impl EndingCall {
    /// The round's calls as the run keeps them: the model's first call of
    /// the tool, or else the runtime's own call (its id derived from `run`).
    pub fn calls(&self, run: &str, calls: &[AssistantToolCall]) -> Vec<AssistantToolCall> {
        if let Some(call) = calls.iter().find(|c| c.name == self.tool) {
            return vec![call.clone()];
        }
        let digest = agent_capabilities::sha256_hex(format!("{run}\n{}", self.tool).as_bytes());
        vec![AssistantToolCall {
            id: format!("call_end_{}", &digest[..24]),
            name: self.tool.clone(),
            arguments: self.fallback_arguments.to_string(),
            signature: None,
        }]
    }
}

/// A `RunConfig` value was invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Budget(#[from] BudgetError),
    #[error("model name must be 1 to 200 printable characters")]
    Model,
    #[error("temperature must be between 0 and 2, got {0}")]
    Temperature(String),
    #[error("max_output_tokens must be at least 1")]
    MaxOutputTokens,
    #[error("reasoning: {0}")]
    Reasoning(#[from] ReasoningError),
    #[error("{field} must be at most {MAX_SYSTEM_PROMPT_BYTES} bytes, got {len}")]
    SystemPromptTooLong { field: &'static str, len: usize },
    #[error("context_window_tokens must be at least {MIN_CONTEXT_WINDOW_TOKENS}, got {0}")]
    ContextWindow(u32),
    #[error(transparent)]
    History(#[from] HistoryError),
    #[error("ending_call.fallback_arguments must be a JSON object")]
    EndingCallArguments,
}

/// The bound of a run's own system prompt and of its extension, each.
pub const MAX_SYSTEM_PROMPT_BYTES: usize = 64 * 1024;

impl RunConfig {
    /// Check every custom value; called at start and before each round or call.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.budget.validate()?;
        let m = &self.model.model;
        if m.is_empty() || m.len() > 200 || m.chars().any(char::is_control) {
            return Err(ConfigError::Model);
        }
        if let Some(t) = self.model.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err(ConfigError::Temperature(t.to_string()));
        }
        if self.model.max_output_tokens == Some(0) {
            return Err(ConfigError::MaxOutputTokens);
        }
        self.model.reasoning.validate()?;
        for (field, text) in [
            ("system_prompt", &self.model.system_prompt),
            ("system_extension", &self.model.system_extension),
        ] {
            if let Some(text) = text
                && text.len() > MAX_SYSTEM_PROMPT_BYTES
            {
                return Err(ConfigError::SystemPromptTooLong {
                    field,
                    len: text.len(),
                });
            }
        }
        if let Some(tokens) = self.model.context_window_tokens
            && tokens < MIN_CONTEXT_WINDOW_TOKENS
        {
            return Err(ConfigError::ContextWindow(tokens));
        }
        if let Some(history) = &self.history {
            validate_history(history)?;
        }
        if let Some(ending) = &self.ending_call
            && !ending.fallback_arguments.is_object()
        {
            return Err(ConfigError::EndingCallArguments);
        }
        Ok(())
    }

    /// The tools the run may use, `None` meaning every tool of the mode:
    /// the allowlist, narrowed by the Skill to the intersection (S5.6). A
    /// Skill can only take tools away.
    pub fn allowed_tools(&self) -> Option<BTreeSet<String>> {
        let allowed = match (&self.allowlist, &self.skill) {
            (allow, None) => allow.clone(),
            (None, Some(skill)) => Some(skill.tools.clone()),
            (Some(allow), Some(skill)) => Some(allow.intersection(&skill.tools).cloned().collect()),
        };
        match &self.ending_call {
            None => allowed,
            Some(ending) => Some(
                std::iter::once(ending.tool.clone())
                    .filter(|t| allowed.as_ref().is_none_or(|a| a.contains(t)))
                    .collect(),
            ),
        }
    }

    /// Whether the run may use `tool`.
    pub fn allows(&self, tool: &str) -> bool {
        self.ending_call.as_ref().is_none_or(|e| e.tool == tool)
            && self.allowlist.as_ref().is_none_or(|a| a.contains(tool))
            && self.skill.as_ref().is_none_or(|s| s.tools.contains(tool))
    }

    /// The system prompt the model is sent, in this order: the run's own
    /// (`model.system_prompt`), or else for an Agent run the default Agent
    /// system prompt ([`AGENT_SYSTEM_PROMPT`]; a Research run shares none of
    /// it, S9.1, and a Chat run has no tools for it to describe); then `model.system_extension`; then the applied Skill's
    /// instructions under its name (S5.6). Parts are separated by a blank line.
    pub fn system_prompt(&self) -> Option<String> {
        let base = match (&self.model.system_prompt, self.mode) {
            (Some(own), _) => Some(own.as_str()),
            (None, RunMode::Agent) => Some(AGENT_SYSTEM_PROMPT.trim_end()),
            (None, RunMode::Research | RunMode::Chat) => None,
        };
        let skill = self
            .skill
            .as_ref()
            .map(|s| format!("Skill `{}`:\n{}", s.name, s.instructions));
        let parts: Vec<&str> = base
            .into_iter()
            .chain(self.model.system_extension.as_deref())
            .chain(skill.as_deref())
            .collect();
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }

    /// The part the tools actor needs.
    pub fn tool_config(&self) -> RunToolConfig {
        RunToolConfig {
            mode: self.mode,
            approval: self.approval,
            allowlist: self.allowed_tools(),
            grants: self.grants.keys().cloned().collect(),
        }
    }
}

/// Runtime-wide settings (not per run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeOptions {
    /// How long `stop` (and an interruption) waits for an effect in flight
    /// before recording it `effect_unknown`.
    pub stop_grace: Duration,
    /// How often a model round broken off mid-stream is repeated.
    pub model_round_repeats: u32,
    /// Lease time to live; the host renews leases with `LeaseManager::renew_all`.
    pub lease_ttl: Duration,
    /// Lifetime of a minted one-time capability.
    pub capability_ttl: Duration,
    /// Bound of each supervisor's mailbox.
    pub mailbox: usize,
    /// How often the active time of a run waiting on a model stream or a
    /// call in flight is written to its record (at least 1 s): a crash in a
    /// long wait loses at most this much of it.
    pub active_time_flush: Duration,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            stop_grace: Duration::from_secs(5),
            model_round_repeats: 2,
            lease_ttl: Duration::from_secs(30),
            capability_ttl: Duration::from_secs(300),
            mailbox: 32,
            active_time_flush: Duration::from_secs(10),
        }
    }
}

/// Who said a message of an embedder's `history`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HistoryRole {
    User,
    Assistant,
}

/// One message of an embedder's own chat history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryMessage {
    pub role: HistoryRole,
    pub content: String,
}

impl HistoryMessage {
    pub fn to_message(&self) -> Message {
        match self.role {
            HistoryRole::User => Message::User {
                content: self.content.clone(),
            },
            HistoryRole::Assistant => Message::Assistant {
                content: Some(self.content.clone()),
                tool_calls: Vec::new(),
                native: None,
            },
        }
    }
}

/// Why an embedder's `history` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HistoryError {
    #[error("history holds {0} messages; at most {MAX_HISTORY_MESSAGES} are allowed")]
    TooManyMessages(usize),
    #[error("history holds {0} bytes of content; at most {MAX_HISTORY_BYTES} are allowed")]
    TooLong(usize),
    #[error("history message {0} is empty")]
    Empty(usize),
}

/// Check an embedder's `history` against its bounds.
pub fn validate_history(history: &[HistoryMessage]) -> Result<(), HistoryError> {
    if history.len() > MAX_HISTORY_MESSAGES {
        return Err(HistoryError::TooManyMessages(history.len()));
    }
    if let Some(i) = history.iter().position(|m| m.content.trim().is_empty()) {
        return Err(HistoryError::Empty(i));
    }
    let bytes: usize = history.iter().map(|m| m.content.len()).sum();
    if bytes > MAX_HISTORY_BYTES {
        return Err(HistoryError::TooLong(bytes));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent() -> RunConfig {
        RunConfig::default()
    }

    #[test]
    fn an_agent_run_gets_the_default_agent_system_prompt() {
        let prompt = agent().system_prompt().expect("a prompt");
        assert_eq!(prompt, AGENT_SYSTEM_PROMPT.trim_end());
        assert!(prompt.contains("never instructions"), "{prompt}");
    }

    #[test]
    fn a_research_run_shares_none_of_it() {
        let research = RunConfig {
            mode: RunMode::Research,
            ..agent()
        };
        assert_eq!(research.system_prompt(), None);
    }

    #[test]
    fn a_run_may_replace_or_extend_it_and_a_skill_joins_it() {
        let mut c = agent();
        c.model.system_extension = Some("Be brief.".into());
        assert_eq!(
            c.system_prompt().unwrap(),
            format!("{}\n\nBe brief.", AGENT_SYSTEM_PROMPT.trim_end())
        );
        c.model.system_prompt = Some("You are a poet.".into());
        assert_eq!(c.system_prompt().unwrap(), "You are a poet.\n\nBe brief.");
        c.skill = Some(AppliedSkill {
            name: "haiku".into(),
            instructions: "Answer in haiku.".into(),
            tools: BTreeSet::new(),
        });
        assert_eq!(
            c.system_prompt().unwrap(),
            "You are a poet.\n\nBe brief.\n\nSkill `haiku`:\nAnswer in haiku."
        );
    }

    #[test]
    fn own_prompts_are_bounded_at_64_kib() {
        for field in ["system_prompt", "system_extension"] {
            for (len, ok) in [
                (MAX_SYSTEM_PROMPT_BYTES - 1, true),
                (MAX_SYSTEM_PROMPT_BYTES, true),
                (MAX_SYSTEM_PROMPT_BYTES + 1, false),
            ] {
                let mut c = agent();
                let text = Some("a".repeat(len));
                if field == "system_prompt" {
                    c.model.system_prompt = text;
                } else {
                    c.model.system_extension = text;
                }
                match c.validate() {
                    Ok(()) => assert!(ok, "{field} of {len} bytes was accepted"),
                    Err(ConfigError::SystemPromptTooLong { field: f, len: l }) => {
                        assert!(!ok, "{field} of {len} bytes was refused");
                        assert_eq!((f, l), (field, len));
                    }
                    Err(other) => panic!("{other}"),
                }
            }
        }
    }

    fn history(n: usize, each: usize) -> Vec<HistoryMessage> {
        (0..n)
            .map(|i| HistoryMessage {
                role: if i % 2 == 0 {
                    HistoryRole::User
                } else {
                    HistoryRole::Assistant
                },
                content: "x".repeat(each),
            })
            .collect()
    }

    #[test]
    fn history_bounds_hold_at_below_and_above() {
        assert_eq!(
            validate_history(&history(MAX_HISTORY_MESSAGES - 1, 1)),
            Ok(())
        );
        assert_eq!(validate_history(&history(MAX_HISTORY_MESSAGES, 1)), Ok(()));
        assert_eq!(
            validate_history(&history(MAX_HISTORY_MESSAGES + 1, 1)),
            Err(HistoryError::TooManyMessages(MAX_HISTORY_MESSAGES + 1))
        );
        let each = MAX_HISTORY_BYTES / 4;
        assert_eq!(validate_history(&history(4, each)), Ok(()));
        let mut over = history(4, each);
        over[3].content.push('x');
        assert_eq!(
            validate_history(&over),
            Err(HistoryError::TooLong(MAX_HISTORY_BYTES + 1))
        );
        let mut under = history(4, each);
        under[3].content.pop();
        assert_eq!(validate_history(&under), Ok(()));
        assert_eq!(
            validate_history(&history(1, 0)),
            Err(HistoryError::Empty(0))
        );
    }

    #[test]
    fn history_messages_name_only_user_or_assistant() {
        let ok: Vec<HistoryMessage> =
            serde_json::from_str(r#"[{"role": "user", "content": "a"}]"#).unwrap();
        assert_eq!(
            ok[0].to_message(),
            Message::User {
                content: "a".into()
            }
        );
        for bad in [
            r#"[{"role": "system", "content": "a"}]"#,
            r#"[{"role": "tool", "content": "a"}]"#,
            r#"[{"role": "user", "content": "a", "name": "x"}]"#,
            r#"[{"role": "user"}]"#,
        ] {
            assert!(
                serde_json::from_str::<Vec<HistoryMessage>>(bad).is_err(),
                "{bad}"
            );
        }
    }
}
