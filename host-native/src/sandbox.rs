//! The one mechanism of this host's sandbox processes: a child `agentrt`
//! started with a hidden subcommand that serves one JSON line of request
//! and one of reply at a time on its stdin and stdout, and the host's pool
//! of such children. Two kinds use it: `run_javascript` scripts
//! ([`crate::script_sandbox`]) and the readers of outside documents, HTML
//! and PDF ([`crate::document_sandbox`]). It owns, for both:
//!
//! - starting a child with an empty environment, no descriptor but its
//!   three pipes (the child closes any it inherited), stderr discarded, in
//!   an empty private working directory that is removed as soon as the
//!   child stands in it ([`SandboxPool::new`]): the child can create
//!   nothing there, and a host that is killed leaves nothing behind;
//! - the framing: a request line, then a reply line of at most a given
//!   length; a reply that is longer, missing or cut off, or a child that
//!   died, is a [`CallFailure`], never a panic;
//! - the hard stop: past the call's deadline the host SIGKILLs the child
//!   and reaps it, so the CPU is idle again at once; a child that answered
//!   is kept warm for the next call (at most `keep_idle`), any other is
//!   ended and replaced on the next call;
//! - the child's side ([`serve_requests`]): its loop, and a [`Watchdog`]
//!   that ends it past a deadline should the host be gone.

use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{ExitCode, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The child's exit code when it ended itself at its hard deadline.
pub const EXIT_SELF_STOPPED: u8 = 124;
/// The child's exit code when its request was unreadable or too long.
pub const EXIT_BAD_REQUEST: u8 = 65;

// ---------------------------------------------------------------------------
// the child
// ---------------------------------------------------------------------------

/// The child's loop: read one request line (at most `max_request_bytes`)
/// from stdin, hand it to `handle` (with the [`Watchdog`] to arm for its
/// deadline), write the reply line it returns to stdout; exit 0 when stdin
/// closes. An unreadable or oversized request (or `handle` answering
/// `None`) ends the child with [`EXIT_BAD_REQUEST`].
pub fn serve_requests(
    max_request_bytes: usize,
    mut handle: impl FnMut(&[u8], &Watchdog) -> Option<Vec<u8>>,
) -> ExitCode {
    close_inherited_descriptors();
    let watchdog = Watchdog::start();
    let mut stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    loop {
        let line = match read_line_within(&mut stdin, max_request_bytes) {
            Ok(Some(line)) => line,
            Ok(None) => return ExitCode::SUCCESS,
            Err(_) => return ExitCode::from(EXIT_BAD_REQUEST),
        };
        let Some(mut reply) = handle(&line, &watchdog) else {
            return ExitCode::from(EXIT_BAD_REQUEST);
        };
        watchdog.disarm();
        reply.push(b'\n');
        if stdout
            .write_all(&reply)
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

/// Ends the child when a request outlives its deadline (armed with the
/// deadline plus a grace later than the host's kill): the host normally
/// kills it first; this is for a host that died without closing the
/// pipe's far end in time.
pub struct Watchdog {
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

    /// End the process at `at` unless disarmed first.
    pub fn arm(&self, at: Instant) {
        self.set(Some(at));
    }

    /// Forget the armed deadline.
    pub fn disarm(&self) {
        self.set(None);
    }
}

// ---------------------------------------------------------------------------
// the host
// ---------------------------------------------------------------------------

/// The program (and arguments) that serves a sandbox protocol on stdio.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxCommand {
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

impl SandboxCommand {
    /// `agentrt <subcommand>` with the `agentrt` binary at `program`.
    pub fn agentrt_serving(program: impl Into<PathBuf>, subcommand: &str) -> SandboxCommand {
        SandboxCommand {
            program: program.into(),
            args: vec![subcommand.into()],
        }
    }

    /// The same `agentrt` binary serving `subcommand` instead, when this
    /// command is `agentrt` serving `from` (and not some other program).
    pub fn sibling(&self, from: &str, subcommand: &str) -> Option<SandboxCommand> {
        (self.args.len() == 1 && self.args[0] == *from)
            .then(|| SandboxCommand::agentrt_serving(self.program.clone(), subcommand))
    }
}

/// Why a call to a sandbox has no reply. The child is ended (killed if
/// need be) and reaped before the failure is returned.
#[derive(Debug)]
pub enum CallFailure {
    /// No child could start.
    Spawn(String),
    /// The deadline passed: the child was killed and reaped.
    PastHardStop { pid: u32 },
    /// The child ended itself at its own deadline ([`EXIT_SELF_STOPPED`]).
    SelfStopped { pid: u32 },
    /// The reply line was longer than allowed.
    TooLong { pid: u32, limit: usize },
    /// The reply was not what the protocol allows.
    Unreadable { pid: u32, detail: String },
    /// The child ended (or its pipe broke) before a whole reply line.
    Ended {
        pid: u32,
        status: Option<ExitStatus>,
        pipe: Option<String>,
    },
}

impl CallFailure {
    /// The signal that ended the child, when one did.
    pub fn signal(&self) -> Option<i32> {
        match self {
            CallFailure::Ended {
                status: Some(status),
                ..
            } => {
                #[cfg(unix)]
                {
                    std::os::unix::process::ExitStatusExt::signal(status)
                }
                #[cfg(not(unix))]
                {
                    let _ = status;
                    None
                }
            }
            _ => None,
        }
    }
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallFailure::Spawn(detail) => write!(f, "could not start: {detail}"),
            CallFailure::PastHardStop { pid } => {
                write!(f, "(pid {pid}) was killed at its deadline")
            }
            CallFailure::SelfStopped { pid } => {
                write!(f, "(pid {pid}) ended itself at its deadline")
            }
            CallFailure::TooLong { pid, limit } => {
                write!(f, "(pid {pid}) answered more than {limit} bytes")
            }
            CallFailure::Unreadable { pid, detail } => {
                write!(f, "(pid {pid}) answered something unreadable: {detail}")
            }
            CallFailure::Ended { pid, status, pipe } => {
                write!(f, "(pid {pid}) ended")?;
                if let Some(status) = status {
                    write!(f, " ({status})")?;
                }
                write!(f, " before it answered")?;
                if let Some(pipe) = pipe {
                    write!(f, ": {pipe}")?;
                }
                Ok(())
            }
        }
    }
}

/// Why an exchange has no reply line.
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

/// Sandbox processes started with one command, at most `keep_idle` kept
/// warm between calls; each call has a process to itself.
pub struct SandboxPool {
    command: SandboxCommand,
    /// Where each child is started: created for the spawn, removed once
    /// the child stands in it.
    workdir: PathBuf,
    /// Spawns take turns at making and removing `workdir`.
    spawning: Mutex<()>,
    idle: Mutex<Vec<Sandbox>>,
    keep_idle: usize,
}

impl std::fmt::Debug for SandboxPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxPool")
            .field("command", &self.command)
            .field("workdir", &self.workdir)
            .field("keep_idle", &self.keep_idle)
            .finish_non_exhaustive()
    }
}

impl SandboxPool {
    /// A pool that starts `command`, keeping at most `keep_idle` processes
    /// warm. Chooses the name of its private working directory (checking
    /// that it can be made), which exists only while a child is started.
    pub fn new(command: SandboxCommand, keep_idle: usize) -> std::io::Result<SandboxPool> {
        let workdir = PrivateDir::create()?.0.clone();
        Ok(SandboxPool {
            command,
            workdir,
            spawning: Mutex::new(()),
            idle: Mutex::new(Vec::new()),
            keep_idle,
        })
    }

    /// The command the pool starts.
    pub fn command(&self) -> &SandboxCommand {
        &self.command
    }

    /// The path of the sandboxes' working directory: empty, private to
    /// this user, and already removed while they run (`/proc/PID/cwd` of a
    /// child reads this path with ` (deleted)` after it).
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// Start a child in a freshly made private directory, then remove the
    /// directory: `spawn` returns once the child has changed into it and
    /// exec'd, and a process may stand in a removed directory.
    fn spawn(&self) -> Result<Sandbox, CallFailure> {
        let turn = self.spawning.lock().unwrap_or_else(PoisonError::into_inner);
        let dir = PrivateDir::create_at(self.workdir.clone())
            .map_err(|e| CallFailure::Spawn(format!("{}: {e}", self.workdir.display())))?;
        let spawned = Command::new(&self.command.program)
            .args(&self.command.args)
            .env_clear()
            .current_dir(&dir.0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn();
        drop(dir);
        drop(turn);
        let mut child = spawned
            .map_err(|e| CallFailure::Spawn(format!("{}: {e}", self.command.program.display())))?;
        let pid = child.id().unwrap_or(0);
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(CallFailure::Spawn("it started without its pipes".into()));
        };
        Ok(Sandbox {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            pid,
        })
    }

    /// A warm sandbox that is still running, or a new one.
    fn take(&self) -> Result<Sandbox, CallFailure> {
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

    /// Send `request` (one line, its `\n` included) to a sandbox and
    /// `decode` its reply line of at most `reply_limit` bytes, within
    /// `hard_stop`. A decoded reply keeps the sandbox warm; anything else
    /// ends it. Should the caller stop waiting, dropping the call kills
    /// the child too (`kill_on_drop`).
    pub async fn call<T>(
        &self,
        request: &[u8],
        reply_limit: usize,
        hard_stop: Duration,
        decode: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<T, CallFailure> {
        let mut sandbox = self.take()?;
        let pid = sandbox.pid;
        let exchanged =
            tokio::time::timeout(hard_stop, sandbox.exchange(request, reply_limit)).await;
        match exchanged {
            Err(_past_hard_stop) => {
                sandbox.end().await;
                Err(CallFailure::PastHardStop { pid })
            }
            Ok(Ok(reply)) => match decode(&reply) {
                Ok(value) => {
                    self.put_back(sandbox);
                    Ok(value)
                }
                Err(detail) => {
                    sandbox.end().await;
                    Err(CallFailure::Unreadable { pid, detail })
                }
            },
            Ok(Err(Broken::TooLong(limit))) => {
                sandbox.end().await;
                Err(CallFailure::TooLong { pid, limit })
            }
            Ok(Err(broken @ (Broken::Ended | Broken::Io(_)))) => {
                let status = sandbox.ended().await;
                if status.and_then(|s| s.code()) == Some(i32::from(EXIT_SELF_STOPPED)) {
                    return Err(CallFailure::SelfStopped { pid });
                }
                let pipe = match broken {
                    Broken::Io(e) => Some(e.to_string()),
                    _ => None,
                };
                Err(CallFailure::Ended { pid, status, pipe })
            }
        }
    }
}

/// An empty directory only this user may enter, removed when dropped.
struct PrivateDir(PathBuf);

impl PrivateDir {
    /// A new directory of a random name in the temporary directory.
    fn create() -> std::io::Result<PrivateDir> {
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).map_err(|e| std::io::Error::other(e.to_string()))?;
        let name: String = random.iter().map(|b| format!("{b:02x}")).collect();
        PrivateDir::create_at(std::env::temp_dir().join(format!("agentrt-sandbox-{name}")))
    }

    /// A new directory at `path` (which must not exist), mode 0700.
    fn create_at(path: PathBuf) -> std::io::Result<PrivateDir> {
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&path)?;
        Ok(PrivateDir(path))
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        // Only ever empty: it is removed the moment its child stands in it,
        // before the child is given any request.
        let _ = std::fs::remove_dir(&self.0);
    }
}
