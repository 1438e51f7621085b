//! Usage and budgets (SPEC S4): the [`Usage`] a run accumulates, the
//! presets, the fallback, validation of custom values, and the checks made
//! before each new round or call.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Usage accumulated across model rounds (S4.1). Never decreases.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Usage {
    pub tool_rounds: u64,
    pub tool_calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Milliseconds spent `running`.
    pub active_ms: u64,
    /// Input tokens read from the provider's prompt cache, as each
    /// provider reports them (OpenAI and Gemini count them inside
    /// `input_tokens`; Anthropic's `input_tokens` leaves them out).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
    /// Input tokens written to the provider's prompt cache (Anthropic).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// Of the output, tokens the model spent reasoning (S13.4).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
    /// The size of the conversation at the run's latest model request, as
    /// the provider counted it: that request's input plus its output. Not
    /// accumulated (each round replaces it); the context rule reads it
    /// (S12.4).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub context_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
    /// True when no counter of `self` is below the one in `earlier`.
    pub fn dominates(&self, earlier: &Usage) -> bool {
        self.tool_rounds >= earlier.tool_rounds
            && self.tool_calls >= earlier.tool_calls
            && self.input_tokens >= earlier.input_tokens
            && self.output_tokens >= earlier.output_tokens
            && self.active_ms >= earlier.active_ms
            && self.cached_input_tokens >= earlier.cached_input_tokens
            && self.cache_write_tokens >= earlier.cache_write_tokens
            && self.reasoning_tokens >= earlier.reasoning_tokens
    }
}

/// Which limit ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum BudgetDimension {
    ToolRounds,
    ToolCalls,
    Tokens,
    Duration,
}

impl std::fmt::Display for BudgetDimension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BudgetDimension::ToolRounds => "tool_rounds",
            BudgetDimension::ToolCalls => "tool_calls",
            BudgetDimension::Tokens => "tokens",
            BudgetDimension::Duration => "duration",
        })
    }
}

/// The named presets of S4.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum BudgetPreset {
    Light,
    Standard,
    Extended,
}

impl BudgetPreset {
    /// The preset a name (`light`, `standard`, `extended`) stands for: the
    /// one reading of preset names, for every host's options and flags.
    pub fn parse(name: &str) -> Result<BudgetPreset, BudgetError> {
        match name {
            "light" => Ok(BudgetPreset::Light),
            "standard" => Ok(BudgetPreset::Standard),
            "extended" => Ok(BudgetPreset::Extended),
            other => Err(BudgetError {
                field: "preset",
                problem: format!("must be light, standard or extended, got {other:?}"),
            }),
        }
    }
}

/// The effective limits of a run. Token and duration limits are optional.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Budget {
    pub max_tool_rounds: u32,
    pub max_tool_calls: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Active wall time (time spent `running`), in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration_ms: Option<u64>,
}

/// Upper bounds for custom values: anything larger is a mistake, not a budget.
pub const MAX_TOOL_ROUNDS: u64 = 1_000;
pub const MAX_TOOL_CALLS: u64 = 10_000;
pub const MAX_TOKENS: u64 = 100_000_000;
pub const MAX_DURATION_MS: u64 = 24 * 60 * 60 * 1000;

const MINUTE_MS: u64 = 60_000;

impl Default for Budget {
    fn default() -> Self {
        Budget::fallback()
    }
}

impl Budget {
    /// Without a profile or chat override: 20 tool rounds, 100 tool calls (S4.2).
    pub const fn fallback() -> Budget {
        Budget {
            max_tool_rounds: 20,
            max_tool_calls: 100,
            max_tokens: None,
            max_duration_ms: None,
        }
    }

    /// Light 8/30/10 min, Standard 16/75/25 min, Extended 24/150/45 min (S4.3).
    pub const fn preset(preset: BudgetPreset) -> Budget {
        let (rounds, calls, minutes) = match preset {
            BudgetPreset::Light => (8, 30, 10),
            BudgetPreset::Standard => (16, 75, 25),
            BudgetPreset::Extended => (24, 150, 45),
        };
        Budget {
            max_tool_rounds: rounds,
            max_tool_calls: calls,
            max_tokens: None,
            max_duration_ms: Some(minutes * MINUTE_MS),
        }
    }

    /// Read a budget from the JSON a person or an embedder writes: a preset
    /// name (`"light"`), or an object such as
    /// `{"max_tool_rounds": 10, "max_tool_calls": 40, "max_tokens": 200000, "max_duration_ms": 600000}`,
    /// optionally naming a `"preset"` whose limits the given fields then
    /// replace one by one (`{"preset": "light", "max_tokens": 50000}` keeps
    /// light's rounds, calls and duration and adds the token cap). Without a
    /// preset, missing rounds and calls take the fallback (S4.2). Unknown
    /// fields are refused.
    pub fn from_spec(value: &Value) -> Result<Budget, BudgetError> {
        match value {
            Value::String(name) => Ok(Budget::preset(BudgetPreset::parse(name)?)),
            other => Budget::from_json(other),
        }
    }

    /// Read a budget object (see [`Budget::from_spec`], which also takes a
    /// bare preset name).
    pub fn from_json(value: &Value) -> Result<Budget, BudgetError> {
        let obj = value.as_object().ok_or(BudgetError {
            field: "budget",
            problem: "must be a preset name or a JSON object".into(),
        })?;
        for key in obj.keys() {
            if !matches!(
                key.as_str(),
                "preset" | "max_tool_rounds" | "max_tool_calls" | "max_tokens" | "max_duration_ms"
            ) {
                return Err(BudgetError {
                    field: "budget",
                    problem: format!(
                        "unknown field {key:?}; expected preset, max_tool_rounds, max_tool_calls, max_tokens or max_duration_ms"
                    ),
                });
            }
        }
        let base = match obj.get("preset") {
            None | Some(Value::Null) => Budget::fallback(),
            Some(Value::String(name)) => Budget::preset(BudgetPreset::parse(name)?),
            Some(other) => {
                return Err(BudgetError {
                    field: "preset",
                    problem: format!("must be a preset name, got {}", kind_of(other)),
                });
            }
        };
        let rounds = field(
            obj.get("max_tool_rounds"),
            "max_tool_rounds",
            MAX_TOOL_ROUNDS,
        )?
        .unwrap_or(u64::from(base.max_tool_rounds));
        let calls = field(obj.get("max_tool_calls"), "max_tool_calls", MAX_TOOL_CALLS)?
            .unwrap_or(u64::from(base.max_tool_calls));
        let budget = Budget {
            max_tool_rounds: u32::try_from(rounds).unwrap_or(u32::MAX),
            max_tool_calls: u32::try_from(calls).unwrap_or(u32::MAX),
            max_tokens: field(obj.get("max_tokens"), "max_tokens", MAX_TOKENS)?.or(base.max_tokens),
            max_duration_ms: field(
                obj.get("max_duration_ms"),
                "max_duration_ms",
                MAX_DURATION_MS,
            )?
            .or(base.max_duration_ms),
        };
        budget.validate()?;
        Ok(budget)
    }

    /// Check every value is positive and not absurdly large.
    pub fn validate(&self) -> Result<(), BudgetError> {
        check_range(
            "max_tool_rounds",
            u64::from(self.max_tool_rounds),
            MAX_TOOL_ROUNDS,
        )?;
        check_range(
            "max_tool_calls",
            u64::from(self.max_tool_calls),
            MAX_TOOL_CALLS,
        )?;
        if let Some(t) = self.max_tokens {
            check_range("max_tokens", t, MAX_TOKENS)?;
        }
        if let Some(d) = self.max_duration_ms {
            check_range("max_duration_ms", d, MAX_DURATION_MS)?;
        }
        Ok(())
    }

    /// May another tool round start, given the usage so far?
    pub fn check_new_round(&self, usage: &Usage) -> Result<(), BudgetDimension> {
        if usage.tool_rounds >= u64::from(self.max_tool_rounds) {
            return Err(BudgetDimension::ToolRounds);
        }
        self.check_hard_limits(usage)
    }

    /// May another tool call be dispatched, given the usage so far?
    pub fn check_new_call(&self, usage: &Usage) -> Result<(), BudgetDimension> {
        if usage.tool_calls >= u64::from(self.max_tool_calls) {
            return Err(BudgetDimension::ToolCalls);
        }
        self.check_hard_limits(usage)
    }

    /// The optional hard token and duration limits.
    pub fn check_hard_limits(&self, usage: &Usage) -> Result<(), BudgetDimension> {
        if let Some(max) = self.max_tokens
            && usage.total_tokens() >= max
        {
            return Err(BudgetDimension::Tokens);
        }
        if self.duration_left_ms(usage) == Some(0) {
            return Err(BudgetDimension::Duration);
        }
        Ok(())
    }

    /// Active time left before the duration limit, in milliseconds; `None`
    /// without a limit. Zero means the duration is exhausted: the one rule
    /// behind both [`Budget::check_hard_limits`] and the supervisor's timer
    /// while it waits on a model stream or a call in flight.
    pub fn duration_left_ms(&self, usage: &Usage) -> Option<u64> {
        self.max_duration_ms
            .map(|max| max.saturating_sub(usage.active_ms))
    }
}

fn field(v: Option<&Value>, name: &'static str, max: u64) -> Result<Option<u64>, BudgetError> {
    let Some(v) = v else { return Ok(None) };
    if v.is_null() {
        return Ok(None);
    }
    let n = match v {
        Value::Number(n) => n,
        other => {
            return Err(BudgetError {
                field: name,
                problem: format!("must be a whole number, got {}", kind_of(other)),
            });
        }
    };
    let Some(n) = n.as_u64() else {
        return Err(BudgetError {
            field: name,
            problem: match n.as_f64() {
                Some(f) if f < 0.0 => "must be positive, got a negative number".into(),
                Some(f) if f > max as f64 => format!("must be at most {max}, got {f}"),
                _ => "must be a whole number, got a fraction".into(),
            },
        });
    };
    check_range(name, n, max)?;
    Ok(Some(n))
}

fn check_range(name: &'static str, n: u64, max: u64) -> Result<(), BudgetError> {
    if n == 0 {
        return Err(BudgetError {
            field: name,
            problem: "must be at least 1, got 0".into(),
        });
    }
    if n > max {
        return Err(BudgetError {
            field: name,
            problem: format!("must be at most {max}, got {n}"),
        });
    }
    Ok(())
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A custom budget value was invalid; names the field and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid budget: {field} {problem}")]
pub struct BudgetError {
    pub field: &'static str,
    pub problem: String,
}
