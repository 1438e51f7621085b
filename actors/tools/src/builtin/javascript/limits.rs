//! What one `run_javascript` call is bounded by and what it answers: the
//! limits, the typed errors and the output. Plain data, with no engine in
//! it, so a host whose engine runs elsewhere (the browser's Worker module)
//! speaks the same types as the engine.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The bounds one `run_javascript` call runs under.
///
/// Defaults ([`JsLimits::DEFAULT`]): 2 s of monotonic time, 64 MiB of heap,
/// 256 KiB of stack, 64 KiB of result JSON, 64 KiB of source code and 1 MiB
/// of input JSON. A profile may lower any of them with [`JsLimits::lower_to`]
/// but never raise them, nor go under [`JsLimits::FLOOR`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JsLimits {
    /// Wall time on the host's monotonic clock, checked by the interrupt handler.
    pub time_ms: u64,
    /// The QuickJS heap (`JS_SetMemoryLimit`): every object, string and buffer.
    pub heap_bytes: usize,
    /// The stack the interpreter may use (`JS_SetMaxStackSize`).
    pub stack_bytes: usize,
    /// The result, as UTF-8 JSON text.
    pub output_bytes: usize,
    /// The script's source text.
    pub code_bytes: usize,
    /// The input, as UTF-8 JSON text.
    pub input_bytes: usize,
}

impl JsLimits {
    /// The documented defaults.
    pub const DEFAULT: JsLimits = JsLimits {
        time_ms: 2_000,
        heap_bytes: 64 * 1024 * 1024,
        stack_bytes: 256 * 1024,
        output_bytes: 64 * 1024,
        code_bytes: 64 * 1024,
        input_bytes: 1024 * 1024,
    };

    /// The smallest values a profile may set: below them a context cannot
    /// even be created, or no useful script could run.
    pub const FLOOR: JsLimits = JsLimits {
        time_ms: 10,
        heap_bytes: 2 * 1024 * 1024,
        stack_bytes: 64 * 1024,
        output_bytes: 16,
        code_bytes: 16,
        input_bytes: 16,
    };

    /// The time limit as a `Duration`.
    pub fn time(&self) -> Duration {
        Duration::from_millis(self.time_ms)
    }

    /// These limits lowered to `requested` (a profile's values). Raising a
    /// limit, or lowering one under [`JsLimits::FLOOR`], is refused and
    /// names the limit.
    pub fn lower_to(&self, requested: &JsLimits) -> Result<JsLimits, JsLimitError> {
        let check = |name: &'static str, current: u64, wanted: u64, floor: u64| {
            if wanted > current {
                Err(JsLimitError::Raised {
                    limit: name,
                    current,
                    requested: wanted,
                })
            } else if wanted < floor {
                Err(JsLimitError::BelowFloor {
                    limit: name,
                    floor,
                    requested: wanted,
                })
            } else {
                Ok(())
            }
        };
        let f = &JsLimits::FLOOR;
        check("time_ms", self.time_ms, requested.time_ms, f.time_ms)?;
        check(
            "heap_bytes",
            self.heap_bytes as u64,
            requested.heap_bytes as u64,
            f.heap_bytes as u64,
        )?;
        check(
            "stack_bytes",
            self.stack_bytes as u64,
            requested.stack_bytes as u64,
            f.stack_bytes as u64,
        )?;
        check(
            "output_bytes",
            self.output_bytes as u64,
            requested.output_bytes as u64,
            f.output_bytes as u64,
        )?;
        check(
            "code_bytes",
            self.code_bytes as u64,
            requested.code_bytes as u64,
            f.code_bytes as u64,
        )?;
        check(
            "input_bytes",
            self.input_bytes as u64,
            requested.input_bytes as u64,
            f.input_bytes as u64,
        )?;
        Ok(*requested)
    }
}

impl Default for JsLimits {
    fn default() -> Self {
        JsLimits::DEFAULT
    }
}

/// A profile asked for limits the engine does not accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsLimitError {
    /// Profiles may only lower limits.
    #[error(
        "run_javascript limit {limit} may only be lowered: {requested} is above the current {current}"
    )]
    Raised {
        limit: &'static str,
        current: u64,
        requested: u64,
    },
    /// Too low to run anything.
    #[error("run_javascript limit {limit} = {requested} is below the minimum of {floor}")]
    BelowFloor {
        limit: &'static str,
        floor: u64,
        requested: u64,
    },
}

/// Why a script produced no result. Each exceeded limit is its own variant
/// and its message names the limit. Serialisable, so that a sandbox process
/// can hand it back to the host unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JsError {
    /// The source text is longer than allowed.
    #[error("the script is {len} bytes, over the limit of {limit} bytes; send a shorter script")]
    CodeTooLarge { len: usize, limit: usize },
    /// The input JSON is longer than allowed.
    #[error(
        "the input is {len} bytes of JSON, over the limit of {limit} bytes; pass less data (store large data in the workspace)"
    )]
    InputTooLarge { len: usize, limit: usize },
    /// The script was still running at its deadline and was interrupted.
    #[error(
        "the script ran past the time limit of {limit_ms} ms and was stopped; do less work per call"
    )]
    TimeLimit { limit_ms: u64 },
    /// The script needed more heap than allowed.
    #[error(
        "the script exceeded the memory limit of {limit_bytes} bytes and was stopped; use less data"
    )]
    MemoryLimit { limit_bytes: usize },
    /// The script recursed (or nested) deeper than the stack allows.
    #[error(
        "the script exceeded the stack limit of {limit_bytes} bytes (too deep recursion or nesting); use iteration instead"
    )]
    StackLimit { limit_bytes: usize },
    /// The result's JSON is longer than allowed.
    #[error(
        "the result is {len} bytes of JSON, over the output limit of {limit} bytes; return a smaller summary"
    )]
    OutputTooLarge { len: usize, limit: usize },
    /// The source text does not parse.
    #[error("the script has a syntax error: {message}")]
    Syntax { message: String },
    /// The script threw and did not catch it.
    #[error("the script threw an uncaught {name}: {message}")]
    Thrown {
        name: String,
        message: String,
        stack: Option<String>,
    },
    /// The script's value cannot be returned as JSON.
    #[error("the script's result cannot be returned as JSON: {reason}")]
    NotJson { reason: String },
    /// QuickJS itself failed (for example it could not create a context).
    #[error("the JavaScript engine failed: {message}")]
    Engine { message: String },
}

impl JsError {
    /// A stable code for the result envelope.
    pub fn code(&self) -> &'static str {
        match self {
            JsError::CodeTooLarge { .. } => "js_code_too_large",
            JsError::InputTooLarge { .. } => "js_input_too_large",
            JsError::TimeLimit { .. } => "js_time_limit",
            JsError::MemoryLimit { .. } => "js_memory_limit",
            JsError::StackLimit { .. } => "js_stack_limit",
            JsError::OutputTooLarge { .. } => "js_output_too_large",
            JsError::Syntax { .. } => "js_syntax_error",
            JsError::Thrown { .. } => "js_uncaught_exception",
            JsError::NotJson { .. } => "js_result_not_json",
            JsError::Engine { .. } => "js_engine_error",
        }
    }
}

/// The longest text taken from a script's error (its name, message or
/// stack, or a thrown non-Error value), in bytes; longer text is cut and
/// ends with `…`. A script decides these strings, so they are bounded like
/// its result is.
pub const ERROR_TEXT_BYTES: usize = 4 * 1024;

/// What a successful call returns.
#[derive(Debug, Clone, PartialEq)]
pub struct JsOutput {
    /// The script's completion value (or the value its promise fulfilled
    /// with), as JSON. `undefined` becomes `null`.
    pub value: serde_json::Value,
    /// Length of the result's JSON text in bytes.
    pub json_bytes: usize,
    /// Time the call took on the supplied clock.
    pub elapsed: Duration,
}

impl fmt::Display for JsOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.value)
    }
}
