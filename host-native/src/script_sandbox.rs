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

use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{ExitCode, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agent_tools::builtin::javascript::{
    JsError, JsLimits, JsOutput, ScriptRunError, ScriptRunner, run_script,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The hidden `agentrt` subcommand that runs [`serve_stdio`].
pub const SUBCOMMAND: &str = "__script-sandbox";

/// Time allowed past a script's limit before the host kills its sandbox:
/// the engine checks its soft deadline every 10,000 interpreter ticks, and
/// a cold child must start before its clock does.
pub const HARD_STOP_GRACE: Duration = Duration::from_millis(1_000);

/// Time allowed past a script's limit before the child ends itself: later
/// than the host's kill, so that it acts only when the host is gone.
pub const CHILD_SELF_STOP_GRACE: Duration = Duration::from_millis(3_000);

/// The child's exit code when it ended itself at its hard deadline.
pub const EXIT_SELF_STOPPED: u8 = 124;
/// The child's exit code when its request was unreadable or too long.
pub const EXIT_BAD_REQUEST: u8 = 65;

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
    close_inherited_descriptors();
    let watchdog = Watchdog::start();
    let mut stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    loop {
        let line = match read_line_within(&mut stdin, MAX_REQUEST_BYTES) {
            Ok(Some(line)) => line,
            Ok(None) => return ExitCode::SUCCESS,
            Err(_) => return ExitCode::from(EXIT_BAD_REQUEST),
        };
        let Ok(request) = serde_json::from_slice::<ScriptRequest>(&line) else {
            return ExitCode::from(EXIT_BAD_REQUEST);
        };
        let origin = Instant::now();
        watchdog.arm(origin + request.limits.time() + CHILD_SELF_STOP_GRACE);
        let outcome = run_script(&request.code, &request.input, &request.limits, move || {
            origin.elapsed()
        });
        watchdog.disarm();
        let reply = ScriptReply::from(outcome);
        // A reply is JSON values, strings and numbers: it always serialises.
        let Ok(mut text) = serde_json::to_vec(&reply) else {
            return ExitCode::from(EXIT_BAD_REQUEST);
        };
        text.push(b'\n');
        if stdout
            .write_all(&text)
            .and_then(|()| stdout.flush())
            .is_err()
        {
            // The host is gone.
            return ExitCode::SUCCESS;
        }
    }
}

/// Close every descriptor above stderr that the child inherited: whatever
/// started the host may have left some open without close-on-exec, and
/// they are authority a script's process must not hold. Runs first, while
/// the child is one thread and owns no descriptor of its own above 2.
fn close_inherited_descriptors() {
    #[cfg(unix)]
    {
        let listed = if cfg!(target_os = "linux") {
            "/proc/self/fd"
        } else {
            "/dev/fd"
        };
        let Ok(entries) = std::fs::read_dir(listed) else {
            return;
        };
        let inherited: Vec<i32> = entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|fd| *fd > 2)
            .collect();
        // The listing's own descriptor is among them and closed with it by
        // now; closing it again fails harmlessly with EBADF.
        for fd in inherited {
            close_descriptor(fd);
        }
    }
}

/// `close(2)`. Unsafe only because closing a descriptor that a Rust value
/// owns would leave that value dangling; [`close_inherited_descriptors`]
/// calls it before anything in this process owns a descriptor above 2.
#[cfg(unix)]
#[allow(unsafe_code)]
fn close_descriptor(fd: i32) {
    // SAFETY: `fd` is an inherited descriptor no Rust value owns (see above).
    unsafe {
        libc::close(fd);
    }
}

/// One line (without its `\n`) of at most `max` bytes; `None` at the end of
/// input; an error for a longer line or one cut off by the end of input.
fn read_line_within<R: BufRead>(input: &mut R, max: usize) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    std::io::Read::take(&mut *input, limit).read_until(b'\n', &mut line)?;
    if line.is_empty() {
        return Ok(None);
    }
    if line.pop() != Some(b'\n') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "request line too long or unterminated",
        ));
    }
    Ok(Some(line))
}

/// Ends the child when a script outlives its deadline by
/// [`CHILD_SELF_STOP_GRACE`]: the host normally kills it first; this is for
/// a host that died without closing the pipe's far end in time.
struct Watchdog {
    deadline: Arc<(Mutex<Option<Instant>>, Condvar)>,
}

impl Watchdog {
    fn start() -> Watchdog {
        let deadline: Arc<(Mutex<Option<Instant>>, Condvar)> =
            Arc::new((Mutex::new(None), Condvar::new()));
        let shared = deadline.clone();
        std::thread::spawn(move || {
            let (lock, wake) = &*shared;
            let mut armed = lock.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                armed = match *armed {
                    None => wake.wait(armed).unwrap_or_else(PoisonError::into_inner),
                    Some(at) => {
                        let now = Instant::now();
                        if now >= at {
                            std::process::exit(i32::from(EXIT_SELF_STOPPED));
                        }
                        wake.wait_timeout(armed, at - now)
                            .unwrap_or_else(PoisonError::into_inner)
                            .0
                    }
                };
            }
        });
        Watchdog { deadline }
    }

    fn set(&self, at: Option<Instant>) {
        let (lock, wake) = &*self.deadline;
        *lock.lock().unwrap_or_else(PoisonError::into_inner) = at;
        wake.notify_one();
    }

    fn arm(&self, at: Instant) {
        self.set(Some(at));
    }

    fn disarm(&self) {
        self.set(None);
    }
}

// ---------------------------------------------------------------------------
// the host
// ---------------------------------------------------------------------------

/// The program (and arguments) that serves the protocol on stdio.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxCommand {
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

impl SandboxCommand {
    /// `agentrt __script-sandbox` with the `agentrt` binary at `program`.
    pub fn agentrt(program: impl Into<PathBuf>) -> SandboxCommand {
        SandboxCommand {
            program: program.into(),
            args: vec![SUBCOMMAND.into()],
        }
    }

    /// This very executable, which must be `agentrt`.
    pub fn current_exe() -> std::io::Result<SandboxCommand> {
        Ok(SandboxCommand::agentrt(std::env::current_exe()?))
    }
}

/// Runs scripts in sandbox processes, at most `keep_idle` of them kept warm
/// between calls; each call has a process to itself.
pub struct ScriptSandbox {
    command: SandboxCommand,
    workdir: PrivateDir,
    idle: Mutex<Vec<Sandbox>>,
    keep_idle: usize,
}

impl std::fmt::Debug for ScriptSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptSandbox")
            .field("command", &self.command)
            .field("workdir", &self.workdir.0)
            .field("keep_idle", &self.keep_idle)
            .finish_non_exhaustive()
    }
}

/// Why a sandbox has no reply.
enum Broken {
    /// Writing the request or reading the reply failed (a dead pipe).
    Io(std::io::Error),
    /// Stdout closed before a whole reply line.
    Ended,
    /// The reply line is longer than allowed.
    TooLong(usize),
}

/// One live sandbox process and its pipes.
struct Sandbox {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pid: u32,
}

impl Sandbox {
    async fn exchange(&mut self, request: &[u8], limit: usize) -> Result<Vec<u8>, Broken> {
        self.stdin.write_all(request).await.map_err(Broken::Io)?;
        self.stdin.flush().await.map_err(Broken::Io)?;
        let mut line = Vec::new();
        let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
        (&mut self.stdout)
            .take(cap)
            .read_until(b'\n', &mut line)
            .await
            .map_err(Broken::Io)?;
        if line.last() == Some(&b'\n') {
            line.pop();
            Ok(line)
        } else if line.len() > limit {
            Err(Broken::TooLong(limit))
        } else {
            Err(Broken::Ended)
        }
    }

    /// SIGKILL (if still running) and reap; the exit status when known.
    async fn end(mut self) -> Option<ExitStatus> {
        if let Ok(Some(status)) = self.child.try_wait() {
            return Some(status);
        }
        let _ = self.child.start_kill();
        // A killed process is reaped at once; should the kernel keep it
        // (uninterruptible sleep), `kill_on_drop` and tokio's reaper finish.
        tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// Reap a child that closed its stdout (it exits by itself, or is killed).
    async fn ended(mut self) -> Option<ExitStatus> {
        match tokio::time::timeout(Duration::from_millis(500), self.child.wait()).await {
            Ok(Ok(status)) => Some(status),
            _ => self.end().await,
        }
    }
}

impl ScriptSandbox {
    /// A runner that starts `command` for scripts, keeping at most
    /// `keep_idle` processes warm. Creates its empty working directory.
    pub fn new(command: SandboxCommand, keep_idle: usize) -> std::io::Result<ScriptSandbox> {
        Ok(ScriptSandbox {
            command,
            workdir: PrivateDir::create()?,
            idle: Mutex::new(Vec::new()),
            keep_idle,
        })
    }

    /// The sandboxes' working directory (empty, private to this user).
    pub fn workdir(&self) -> &Path {
        &self.workdir.0
    }

    fn spawn(&self) -> Result<Sandbox, ScriptRunError> {
        let mut child = Command::new(&self.command.program)
            .args(&self.command.args)
            .env_clear()
            .current_dir(&self.workdir.0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                ScriptRunError::Lost(format!(
                    "the script sandbox {} could not start: {e}",
                    self.command.program.display()
                ))
            })?;
        let pid = child.id().unwrap_or(0);
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(ScriptRunError::Lost(
                "the script sandbox started without its pipes".into(),
            ));
        };
        Ok(Sandbox {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            pid,
        })
    }

    /// A warm sandbox that is still running, or a new one.
    fn take(&self) -> Result<Sandbox, ScriptRunError> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(mut sandbox) = idle.pop() {
            if let Ok(None) = sandbox.child.try_wait() {
                return Ok(sandbox);
            }
            // It died while idle: dropping it reaps it in the background.
        }
        drop(idle);
        self.spawn()
    }

    /// Keep a sandbox that answered for the next call, if there is room;
    /// otherwise dropping it closes its stdin (it exits) and kills it.
    fn put_back(&self, sandbox: Sandbox) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < self.keep_idle {
            idle.push(sandbox);
        }
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
        let mut sandbox = self.take()?;
        let pid = sandbox.pid;
        let hard_stop = limits.time().saturating_add(HARD_STOP_GRACE);
        let exchanged =
            tokio::time::timeout(hard_stop, sandbox.exchange(&line, reply_limit(&limits))).await;
        let lost =
            |what: String| ScriptRunError::Lost(format!("the script sandbox (pid {pid}) {what}"));
        match exchanged {
            Err(_past_hard_stop) => {
                sandbox.end().await;
                Err(ScriptRunError::Script(JsError::TimeLimit {
                    limit_ms: limits.time_ms,
                }))
            }
            Ok(Ok(reply)) => match serde_json::from_slice::<ScriptReply>(&reply) {
                Ok(reply) => {
                    self.put_back(sandbox);
                    reply.into()
                }
                Err(e) => {
                    sandbox.end().await;
                    Err(lost(format!("answered something unreadable: {e}")))
                }
            },
            Ok(Err(Broken::TooLong(limit))) => {
                sandbox.end().await;
                Err(lost(format!("answered more than {limit} bytes")))
            }
            Ok(Err(broken @ (Broken::Ended | Broken::Io(_)))) => {
                let status = sandbox.ended().await;
                if status.and_then(|s| s.code()) == Some(i32::from(EXIT_SELF_STOPPED)) {
                    return Err(ScriptRunError::Script(JsError::TimeLimit {
                        limit_ms: limits.time_ms,
                    }));
                }
                let how = match status {
                    Some(status) => format!("ended ({status})"),
                    None => "ended".to_owned(),
                };
                let pipe = match broken {
                    Broken::Io(e) => format!(": {e}"),
                    _ => String::new(),
                };
                Err(lost(format!("{how} before it answered{pipe}")))
            }
        }
    }
}

/// An empty directory only this user may enter, removed when dropped.
struct PrivateDir(PathBuf);

impl PrivateDir {
    fn create() -> std::io::Result<PrivateDir> {
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).map_err(|e| std::io::Error::other(e.to_string()))?;
        let name: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let path = std::env::temp_dir().join(format!("agentrt-script-sandbox-{name}"));
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&path)?;
        Ok(PrivateDir(path))
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        // Empty unless a sandbox wrote into it; then it is left for the
        // person to see rather than removed with unknown contents.
        let _ = std::fs::remove_dir(&self.0);
    }
}
