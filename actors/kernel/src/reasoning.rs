//! A run's reasoning setting (S10.1, S13.4): how hard a thinking model is
//! asked to reason (`effort`) and, for formats that take one, a token budget
//! for its thinking. Owned here because the profiles (which resolve it) and
//! the supervisor's providers (which send it) share no other crate. The
//! bounds of the budget and the budget an effort stands for are this
//! module's one rule; each wire format decides only where the value goes.

use serde::{Deserialize, Serialize};

/// How hard the model is asked to reason, for models that take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum ReasoningEffort {
    Minimal,
    Low,
    Medium,
    High,
}

impl ReasoningEffort {
    /// The wire name (`minimal`, `low`, `medium`, `high`), as OpenAI's
    /// `reasoning_effort` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::Minimal => "minimal",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }

    /// The thinking budget this effort stands for where a format takes a
    /// budget and the run set none.
    pub fn thinking_budget(self) -> u32 {
        match self {
            ReasoningEffort::Minimal => MIN_THINKING_BUDGET_TOKENS,
            ReasoningEffort::Low => 4_096,
            ReasoningEffort::Medium => 10_240,
            ReasoningEffort::High => 24_576,
        }
    }
}

/// The smallest thinking budget (Anthropic refuses a `budget_tokens`
/// below 1,024).
pub const MIN_THINKING_BUDGET_TOKENS: u32 = 1_024;
/// The largest thinking budget a run may ask for.
pub const MAX_THINKING_BUDGET_TOKENS: u32 = 128_000;

/// What a run asks of a thinking model. The default asks nothing: the
/// request carries no reasoning field and the model keeps its own default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reasoning {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<ReasoningEffort>,
    /// Tokens the model may spend thinking, for formats that take a budget
    /// (Anthropic `budget_tokens`, Gemini `thinkingBudget`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_tokens: Option<u32>,
}

/// A reasoning setting out of its bounds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the thinking budget must be {MIN_THINKING_BUDGET_TOKENS} to {MAX_THINKING_BUDGET_TOKENS} tokens, got {0}"
)]
pub struct ReasoningError(pub u32);

impl Reasoning {
    /// True when the run asks nothing of the model's reasoning.
    pub fn is_unset(&self) -> bool {
        self.effort.is_none() && self.budget_tokens.is_none()
    }

    /// Check the budget against its bounds.
    pub fn validate(&self) -> Result<(), ReasoningError> {
        match self.budget_tokens {
            Some(n) if !(MIN_THINKING_BUDGET_TOKENS..=MAX_THINKING_BUDGET_TOKENS).contains(&n) => {
                Err(ReasoningError(n))
            }
            _ => Ok(()),
        }
    }

    /// The thinking budget to send: the run's own, else its effort's;
    /// `None` when the run asks for no reasoning.
    pub fn thinking_budget(&self) -> Option<u32> {
        self.budget_tokens
            .or_else(|| self.effort.map(ReasoningEffort::thinking_budget))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_checked_at_below_and_above_its_bounds() {
        let with = |n| Reasoning {
            effort: None,
            budget_tokens: Some(n),
        };
        for ok in [MIN_THINKING_BUDGET_TOKENS, MAX_THINKING_BUDGET_TOKENS] {
            assert_eq!(with(ok).validate(), Ok(()));
        }
        for bad in [
            0,
            MIN_THINKING_BUDGET_TOKENS - 1,
            MAX_THINKING_BUDGET_TOKENS + 1,
        ] {
            assert_eq!(with(bad).validate(), Err(ReasoningError(bad)));
        }
        assert_eq!(Reasoning::default().validate(), Ok(()));
    }

    #[test]
    fn the_budget_sent_is_the_runs_own_else_its_efforts() {
        assert_eq!(Reasoning::default().thinking_budget(), None);
        let effort = Reasoning {
            effort: Some(ReasoningEffort::Low),
            budget_tokens: None,
        };
        assert_eq!(effort.thinking_budget(), Some(4_096));
        let both = Reasoning {
            budget_tokens: Some(2_000),
            ..effort
        };
        assert_eq!(both.thinking_budget(), Some(2_000));
        for e in [
            ReasoningEffort::Minimal,
            ReasoningEffort::Low,
            ReasoningEffort::Medium,
            ReasoningEffort::High,
        ] {
            let r = Reasoning {
                effort: Some(e),
                budget_tokens: None,
            };
            assert_eq!(r.validate(), Ok(()));
            assert!(r.thinking_budget().unwrap() >= MIN_THINKING_BUDGET_TOKENS);
        }
    }
}
