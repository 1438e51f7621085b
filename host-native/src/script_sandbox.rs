//! The sandbox process that runs `run_javascript` scripts natively (S5.7),
//! both its sides: [`ScriptSandbox`], the host's [`ScriptRunner`], and
//! [`serve_stdio`], the child's loop behind `agentrt __script-sandbox`.
//!
//! QuickJS checks its interrupt handler in the interpreter loop but not in
//! some built-ins' generic loops, and a Rust thread cannot be stopped from
//! outside. A child process can: the host SIGKILLs it at the script's time
//! limit plus [`HARD_STOP_GRACE`] and reaps it, so the CPU is idle again and
//! the call fails `js_time_limit` like any other overrun. One engine runs
//! either way (`agent_tools::builtin::javascript::run_script`); this module
//! only moves its input and outcome across a pipe.
//!
//! The process, its pipes, the kill and the reaping are
//! [`crate::sandbox`]'s, shared with the document readers.
//!
//! The protocol is one JSON line each way on the child's stdin and stdout:
//! a [`ScriptRequest`] (script, input, limits), then a [`ScriptReply`] (the
//! output or the engine's `JsError`). The host reads at most
//! [`reply_limit`] bytes of reply; a reply that is longer, unreadable or
//! missing (the child died) is [`ScriptRunError::Lost`], never a panic. The
//! child's stderr is discarded, never read.
//!
//! The child takes no authority from the host: an empty environment, no
//! file descriptors but the three pipes (Rust opens every other descriptor
//! close-on-exec), and an empty private working directory; the engine has no
//! network, file or host API of its own. It serves one script at a time and
//! is reused while it behaves (a warm call costs about 0.1 ms more than a
//! blocking thread, a cold start 16–23 ms in a debug build; see the
//! README); a killed child is replaced on the next call. It also ends
//! itself past a script's deadline plus [`CHILD_SELF_STOP_GRACE`], so that a
//! host that died (SIGKILL) leaves no spinning orphan behind, and it exits
//! when its stdin closes.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use agent_tools::builtin::javascript::{
    JsError, JsLimits, JsOutput, ScriptRunError, ScriptRunner, run_script,
};
use serde::{Deserialize, Serialize};

use crate::sandbox::{CallFailure, SandboxPool};
pub use crate::sandbox::{EXIT_BAD_REQUEST, EXIT_SELF_STOPPED, SandboxCommand};

/// The hidden `agentrt` subcommand that runs [`serve_stdio`].
pub const SUBCOMMAND: &str = "__script-sandbox";

/// Time allowed past a script's limit before the host kills its sandbox:
/// the engine checks its soft deadline every 10,000 interpreter ticks, and
/// a cold child must start before its clock does.
pub const HARD_STOP_GRACE: Duration = Duration::from_millis(1_000);

/// Time allowed past a script's limit before the child ends itself: later
/// than the host's kill, so that it acts only when the host is gone.
pub const CHILD_SELF_STOP_GRACE: Duration = Duration::from_millis(3_000);

/// The longest request line the child reads: the largest code and input the
/// engine accepts, each JSON-escaped (at most 6 bytes per byte), plus room
/// for the limits.
pub const MAX_REQUEST_BYTES: usize =
    6 * (JsLimits::DEFAULT.code_bytes + JsLimits::DEFAULT.input_bytes) + 64 * 1024;

/// The longest reply the host reads for a script run under `limits`: the
/// result (its JSON re-encoded, at most twice as long) or an error whose
/// script-chosen texts the engine clips to `ERROR_TEXT_BYTES` each (at
/// most 6 bytes per byte once escaped), with room to spare.
pub fn reply_limit(limits: &JsLimits) -> usize {
    2 * limits.output_bytes
        + 6 * 3 * agent_tools::builtin::javascript::limits::ERROR_TEXT_BYTES
        + 64 * 1024
}

/// One script for the sandbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptRequest {
    pub code: String,
    pub input: serde_json::Value,
    pub limits: JsLimits,
}

/// The sandbox's answer to one [`ScriptRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScriptReply {
    Ok {
        value: serde_json::Value,
        json_bytes: usize,
        elapsed_ms: u64,
    },
    Err(JsError),
}

impl From<Result<JsOutput, JsError>> for ScriptReply {
    fn from(outcome: Result<JsOutput, JsError>) -> Self {
        match outcome {
            Ok(out) => ScriptReply::Ok {
                value: out.value,
                json_bytes: out.json_bytes,
                elapsed_ms: u64::try_from(out.elapsed.as_millis()).unwrap_or(u64::MAX),
            },
            Err(e) => ScriptReply::Err(e),
        }
    }
}

impl From<ScriptReply> for Result<JsOutput, ScriptRunError> {
    fn from(reply: ScriptReply) -> Self {
        match reply {
            ScriptReply::Ok {
                value,
                json_bytes,
                elapsed_ms,
            } => Ok(JsOutput {
                value,
                json_bytes,
                elapsed: Duration::from_millis(elapsed_ms),
            }),
            ScriptReply::Err(e) => Err(ScriptRunError::Script(e)),
        }
    }
}

// ---------------------------------------------------------------------------
// the child
// ---------------------------------------------------------------------------

/// The child's loop: read one [`ScriptRequest`] line from stdin, run it,
/// write one [`ScriptReply`] line to stdout; exit 0 when stdin closes.
/// An unreadable or oversized request ends the child ([`EXIT_BAD_REQUEST`]).
pub fn serve_stdio() -> ExitCode {
    crate::sandbox::serve_requests(MAX_REQUEST_BYTES, |line, watchdog| {
        let request = serde_json::from_slice::<ScriptRequest>(line).ok()?;
        let origin = Instant::now();
        watchdog.arm(origin + request.limits.time() + CHILD_SELF_STOP_GRACE);
        let outcome = run_script(&request.code, &request.input, &request.limits, move || {
            origin.elapsed()
        });
        // A reply is JSON values, strings and numbers: it always serialises.
        serde_json::to_vec(&ScriptReply::from(outcome)).ok()
    })
}

// ---------------------------------------------------------------------------
// the host
// ---------------------------------------------------------------------------

impl SandboxCommand {
    /// `agentrt __script-sandbox` with the `agentrt` binary at `program`.
    pub fn agentrt(program: impl Into<PathBuf>) -> SandboxCommand {
        SandboxCommand::agentrt_serving(program, SUBCOMMAND)
    }

    /// This very executable, which must be `agentrt`.
    pub fn current_exe() -> std::io::Result<SandboxCommand> {
        Ok(SandboxCommand::agentrt(std::env::current_exe()?))
    }
}

/// Runs scripts in sandbox processes, at most `keep_idle` of them kept warm
/// between calls; each call has a process to itself.
#[derive(Debug)]
pub struct ScriptSandbox {
    pool: SandboxPool,
}

impl ScriptSandbox {
    /// A runner that starts `command` for scripts, keeping at most
    /// `keep_idle` processes warm. Creates its empty working directory.
    pub fn new(command: SandboxCommand, keep_idle: usize) -> std::io::Result<ScriptSandbox> {
        Ok(ScriptSandbox {
            pool: SandboxPool::new(command, keep_idle)?,
        })
    }

    /// The sandboxes' working directory (empty, private to this user).
    pub fn workdir(&self) -> &Path {
        self.pool.workdir()
    }
}

#[async_trait::async_trait]
impl ScriptRunner for ScriptSandbox {
    async fn run(
        &self,
        code: String,
        input: serde_json::Value,
        limits: JsLimits,
    ) -> Result<JsOutput, ScriptRunError> {
        let request = ScriptRequest {
            code,
            input,
            limits,
        };
        let mut line = serde_json::to_vec(&request).map_err(|e| {
            ScriptRunError::Script(JsError::Engine {
                message: format!("could not encode the script for its sandbox: {e}"),
            })
        })?;
        line.push(b'\n');
        let hard_stop = limits.time().saturating_add(HARD_STOP_GRACE);
        let replied = self
            .pool
            .call(&line, reply_limit(&limits), hard_stop, |reply| {
                serde_json::from_slice::<ScriptReply>(reply).map_err(|e| e.to_string())
            })
            .await;
        match replied {
            Ok(reply) => reply.into(),
            Err(CallFailure::PastHardStop { .. } | CallFailure::SelfStopped { .. }) => {
                Err(ScriptRunError::Script(JsError::TimeLimit {
                    limit_ms: limits.time_ms,
                }))
            }
            Err(lost) => Err(ScriptRunError::Lost(format!("the script sandbox {lost}"))),
        }
    }
}
