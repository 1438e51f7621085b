//! `RunConfig`: what one run may do and which model it talks to (budget,
//! approval mode, tool allowlist, an applied Skill, model settings). A later
//! Profiles issue fills it; today callers build it directly or take the
//! defaults.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use agent_capabilities::ApprovalMode;
use agent_kernel::budget::{Budget, BudgetError};
use agent_kernel::protocol::{AppliedSkill, RunToolConfig};
use agent_kernel::run::RunMode;

/// Which model, and how to ask it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSettings {
    pub model: String,
    /// Sent first in every request. Stored only in the run's config blob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
}

impl Default for ModelSettings {
    fn default() -> Self {
        Self {
            model: "default".into(),
            system_prompt: None,
            temperature: None,
            max_output_tokens: None,
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
}

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
        Ok(())
    }

    /// The tools the run may use, `None` meaning every tool of the mode:
    /// the allowlist, narrowed by the Skill to the intersection (S5.6). A
    /// Skill can only take tools away.
    pub fn allowed_tools(&self) -> Option<BTreeSet<String>> {
        match (&self.allowlist, &self.skill) {
            (allow, None) => allow.clone(),
            (None, Some(skill)) => Some(skill.tools.clone()),
            (Some(allow), Some(skill)) => Some(allow.intersection(&skill.tools).cloned().collect()),
        }
    }

    /// Whether the run may use `tool`.
    pub fn allows(&self, tool: &str) -> bool {
        self.allowlist.as_ref().is_none_or(|a| a.contains(tool))
            && self.skill.as_ref().is_none_or(|s| s.tools.contains(tool))
    }

    /// The system prompt the model is sent: the configured one, then the
    /// applied Skill's instructions under its name.
    pub fn system_prompt(&self) -> Option<String> {
        let skill = self
            .skill
            .as_ref()
            .map(|s| format!("Skill `{}`:\n{}", s.name, s.instructions));
        match (self.model.system_prompt.as_deref(), skill) {
            (None, skill) => skill,
            (Some(own), None) => Some(own.to_owned()),
            (Some(own), Some(skill)) => Some(format!("{own}\n\n{skill}")),
        }
    }

    /// The part the tools actor needs.
    pub fn tool_config(&self) -> RunToolConfig {
        RunToolConfig {
            mode: self.mode,
            approval: self.approval,
            allowlist: self.allowed_tools(),
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
