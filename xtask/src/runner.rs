//! The step runner: a [`Step`] (a program, its arguments, environment and
//! directory), the [`Runner`] that runs steps from the repository root (or only
//! prints them in a dry run), times each and prints the summary, and
//! [`Failure`], why `xtask` stopped.

use std::env;
use std::fmt;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Instant;

use crate::workspace::{is_root, repo_root};

/// One command to run: a program, its arguments, extra environment variables
/// and the directory (relative to the repository root) it runs in.
pub(crate) struct Step {
    name: String,
    pub(crate) program: String,
    pub(crate) args: Vec<String>,
    pub(crate) envs: Vec<(String, String)>,
    dir: Option<PathBuf>,
}

impl Step {
    pub(crate) fn new(name: impl Into<String>, program: &str, args: &[&str]) -> Step {
        Step {
            name: name.into(),
            program: program.to_string(),
            args: args.iter().map(|a| a.to_string()).collect(),
            envs: Vec::new(),
            dir: None,
        }
    }

    pub(crate) fn cargo(name: impl Into<String>, args: &[&str]) -> Step {
        Step::new(name, "cargo", args)
    }

    pub(crate) fn arg(mut self, arg: impl Into<String>) -> Step {
        self.args.push(arg.into());
        self
    }

    pub(crate) fn env(mut self, key: &str, value: impl Into<String>) -> Step {
        self.envs.push((key.to_string(), value.into()));
        self
    }

    pub(crate) fn in_dir(mut self, dir: impl Into<PathBuf>) -> Step {
        self.dir = Some(dir.into());
        self
    }

    /// Prefixes the command with `sudo` unless we are root.
    pub(crate) fn with_sudo(mut self) -> Step {
        if !is_root() {
            self.args
                .insert(0, std::mem::replace(&mut self.program, "sudo".to_string()));
        }
        self
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(dir) = &self.dir {
            write!(f, "(cd {} && ", dir.display())?;
        }
        for (key, value) in &self.envs {
            write!(f, "{key}={value} ")?;
        }
        write!(f, "{}", self.program)?;
        for arg in &self.args {
            if arg.is_empty() || arg.contains([' ', '"', '\'', '$']) {
                write!(f, " '{arg}'")?;
            } else {
                write!(f, " {arg}")?;
            }
        }
        if self.dir.is_some() {
            write!(f, ")")?;
        }
        Ok(())
    }
}

/// Why `xtask` stopped.
pub(crate) enum Failure {
    Step { name: String, status: String },
    Prerequisite { name: String, detail: String },
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Step { name, status } => write!(f, "step `{name}` failed ({status})"),
            Failure::Prerequisite { name, detail } => {
                write!(f, "prerequisite `{name}` is missing: {detail}")
            }
        }
    }
}

pub(crate) type Result<T, E = Failure> = std::result::Result<T, E>;

struct Record {
    name: String,
    seconds: f64,
    ok: bool,
}

/// A step running in the background ([`Runner::start_step`]). Dropped
/// before [`Runner::finish_step`] (an earlier step failed), it kills the
/// process: nothing of a failed run goes on building behind it.
pub(crate) struct Started {
    name: String,
    child: Option<Child>,
    started: Instant,
    /// Where its output goes, when not to the terminal.
    log: Option<PathBuf>,
}

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child
            && matches!(child.try_wait(), Ok(None))
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs steps from the repository root and remembers how each went.
pub(crate) struct Runner {
    pub(crate) root: PathBuf,
    pub(crate) dry_run: bool,
    pub(crate) no_install: bool,
    color: bool,
    records: Vec<Record>,
    /// Variables every step gets (the scratch `TMPDIR` of `cargo xtask test`).
    every_step_env: Vec<(String, String)>,
}

impl Runner {
    pub(crate) fn new(dry_run: bool, no_install: bool) -> Runner {
        Runner {
            root: repo_root(),
            dry_run,
            no_install,
            color: std::io::stdout().is_terminal(),
            records: Vec::new(),
            every_step_env: Vec::new(),
        }
    }

    /// Prints `==> <command>`, runs it with inherited stdio, and records its
    /// elapsed time. A non-zero exit is a [`Failure::Step`].
    pub(crate) fn run_step(&mut self, step: &Step) -> Result<()> {
        self.run_step_with(step, false).map(drop)
    }

    /// [`Runner::run_step`], but stdout is captured and returned (`None` in a
    /// dry run); stderr stays inherited.
    pub(crate) fn run_step_stdout(&mut self, step: &Step) -> Result<Option<String>> {
        self.run_step_with(step, true)
    }

    pub(crate) fn run_step_with(
        &mut self,
        step: &Step,
        capture_stdout: bool,
    ) -> Result<Option<String>> {
        println!("\n==> {step}");
        if self.dry_run {
            return Ok(None);
        }
        let mut command = self.command(step);
        if capture_stdout {
            command.stdout(Stdio::piped());
        }
        let started = Instant::now();
        let output = command.spawn().and_then(|child| child.wait_with_output());
        let seconds = started.elapsed().as_secs_f64();
        let outcome = match output {
            Ok(output) if output.status.success() => {
                Ok(Some(String::from_utf8_lossy(&output.stdout).into_owned()))
            }
            Ok(Output { status, .. }) => Err(Failure::Step {
                name: step.name.clone(),
                status: status.to_string(),
            }),
            Err(error) => Err(Failure::Step {
                name: step.name.clone(),
                status: format!("could not start `{}`: {error}", step.program),
            }),
        };
        self.record(&step.name, seconds, outcome.is_ok());
        outcome
    }

    /// Starts `step` and returns at once: it runs beside the steps that
    /// follow until [`Runner::finish_step`] waits for it (nothing is started
    /// in a dry run).
    pub(crate) fn start_step(&mut self, step: &Step) -> Result<Started> {
        self.start_step_with(step, None)
    }

    /// [`Runner::start_step`] with stdout and stderr written to `log`
    /// instead of the terminal (so that they do not interleave with the
    /// steps in the foreground); [`Runner::finish_step`] prints its end if
    /// the step fails.
    pub(crate) fn start_step_logged(&mut self, step: &Step, log: &Path) -> Result<Started> {
        self.start_step_with(step, Some(log))
    }

    fn start_step_with(&mut self, step: &Step, log: Option<&Path>) -> Result<Started> {
        match log {
            None => println!("\n==> {step} (in the background)"),
            Some(log) => println!(
                "\n==> {step} (in the background, output in {})",
                log.display()
            ),
        }
        let could_not_start = |error: std::io::Error| Failure::Step {
            name: step.name.clone(),
            status: format!("could not start `{}`: {error}", step.program),
        };
        let child = if self.dry_run {
            None
        } else {
            let mut command = self.command(step);
            if let Some(log) = log {
                let file = std::fs::File::create(log).map_err(could_not_start)?;
                command
                    .stdout(file.try_clone().map_err(could_not_start)?)
                    .stderr(file);
            }
            Some(command.spawn().map_err(could_not_start)?)
        };
        Ok(Started {
            name: step.name.clone(),
            child,
            started: Instant::now(),
            log: log.map(Path::to_path_buf),
        })
    }

    /// Waits for a step [`Runner::start_step`] started, records it, and
    /// fails as [`Runner::run_step`] does.
    pub(crate) fn finish_step(&mut self, mut started: Started) -> Result<()> {
        let Some(mut child) = started.child.take() else {
            return Ok(());
        };
        let status = child.wait();
        let seconds = started.started.elapsed().as_secs_f64();
        let outcome = match status {
            Ok(status) if status.success() => Ok(()),
            Ok(status) => Err(Failure::Step {
                name: started.name.clone(),
                status: status.to_string(),
            }),
            Err(error) => Err(Failure::Step {
                name: started.name.clone(),
                status: format!("could not wait for it: {error}"),
            }),
        };
        if let (Err(_), Some(log)) = (&outcome, &started.log) {
            print_end_of_log(&started.name, log);
        }
        self.record(&started.name, seconds, outcome.is_ok());
        outcome
    }

    /// Prints how a step went and remembers it for the summary.
    pub(crate) fn record(&mut self, name: &str, seconds: f64, ok: bool) {
        println!(
            "<== {name} {} in {seconds:.1} s",
            if ok { "ok" } else { "FAILED" }
        );
        self.records.push(Record {
            name: name.to_string(),
            seconds,
            ok,
        });
    }

    /// Every step from now on runs with `key=value` (a step's own value for
    /// the same key wins).
    pub(crate) fn env_for_every_step(&mut self, key: &str, value: impl Into<String>) {
        self.every_step_env.push((key.to_string(), value.into()));
    }

    pub(crate) fn command(&self, step: &Step) -> Command {
        let program = match step.program.as_str() {
            // The cargo that runs xtask, so that the toolchain stays the same.
            "cargo" => env::var("CARGO").unwrap_or_else(|_| "cargo".to_string()),
            other => other.to_string(),
        };
        let mut command = Command::new(program);
        // `cargo run` (the `cargo xtask` alias) gives xtask the variables of
        // its own package; a child cargo inheriting them would rebuild every
        // build script that watches one (ring's watches `CARGO_MANIFEST_DIR`)
        // whenever a build from a shell came between: minutes each time.
        for key in own_package_env() {
            command.env_remove(key);
        }
        command
            .args(&step.args)
            .envs(self.every_step_env.iter().map(|(k, v)| (k, v)))
            .envs(step.envs.iter().map(|(k, v)| (k, v)));
        command.current_dir(match &step.dir {
            Some(dir) => self.root.join(dir),
            None => self.root.clone(),
        });
        if self.color {
            command.env("CARGO_TERM_COLOR", "always");
        }
        command
    }

    /// Runs a check command quietly and returns its stdout if it succeeded.
    pub(crate) fn query(&self, program: &str, args: &[&str]) -> Option<String> {
        let output = Command::new(program)
            .args(args)
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Runs the steps that install a missing prerequisite, unless
    /// `--no-install` forbids it, then re-checks it with `still_missing`.
    pub(crate) fn install(
        &mut self,
        name: &str,
        missing: &str,
        steps: &[Step],
        still_missing: impl Fn(&Runner) -> Option<String>,
    ) -> Result<()> {
        println!("[prereq] {name}: missing ({missing})");
        let commands: Vec<String> = steps.iter().map(Step::to_string).collect();
        if self.no_install {
            return Err(loud_prereq_failure(
                name,
                &format!(
                    "{missing}; --no-install was given. Install it with: {}",
                    commands.join(" && ")
                ),
            ));
        }
        if self.dry_run {
            println!(
                "[prereq] {name}: dry run, would install with: {}",
                commands.join(" && ")
            );
            return Ok(());
        }
        println!("[prereq] {name}: installing");
        for step in steps {
            if let Err(failure) = self.run_step(step) {
                return Err(loud_prereq_failure(
                    name,
                    &format!("installing it failed: {failure}"),
                ));
            }
        }
        match still_missing(self) {
            None => {
                println!("[prereq] {name}: installed");
                Ok(())
            }
            Some(detail) => Err(loud_prereq_failure(
                name,
                &format!("still missing after installing: {detail}"),
            )),
        }
    }

    pub(crate) fn print_summary(&self) {
        if self.records.is_empty() {
            return;
        }
        let width = self
            .records
            .iter()
            .map(|r| r.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        println!("\n{:-<1$}", "", width + 22);
        println!("{:<width$}  {:>9}  result", "step", "seconds");
        println!("{:-<1$}", "", width + 22);
        for record in &self.records {
            let result = if record.ok { "ok" } else { "FAILED" };
            println!("{:<width$}  {:>9.1}  {result}", record.name, record.seconds);
        }
        let total: f64 = self.records.iter().map(|r| r.seconds).sum();
        println!("{:-<1$}", "", width + 22);
        println!("{:<width$}  {total:>9.1}", "total");
    }
}

/// The last lines of a failed background step's log.
fn print_end_of_log(name: &str, log: &Path) {
    const LINES: usize = 80;
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    eprintln!(
        "\n[{name}] the last {} lines of {}:",
        LINES.min(lines.len()),
        log.display()
    );
    for line in &lines[lines.len().saturating_sub(LINES)..] {
        eprintln!("{line}");
    }
}

pub(crate) fn loud_prereq_failure(name: &str, detail: &str) -> Failure {
    eprintln!();
    eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
    eprintln!("!! PREREQUISITE MISSING: {name}");
    eprintln!("!! {detail}");
    eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
    Failure::Prerequisite {
        name: name.to_string(),
        detail: detail.to_string(),
    }
}

/// The variables `cargo run` sets for xtask's own package, which its
/// children must not inherit (see [`Runner::command`]).
fn own_package_env() -> Vec<std::ffi::OsString> {
    env::vars_os()
        .map(|(key, _)| key)
        .filter(|key| {
            key.to_str().is_some_and(|k| {
                k == "CARGO_MANIFEST_DIR"
                    || k == "CARGO_MANIFEST_PATH"
                    || k.starts_with("CARGO_PKG_")
            })
        })
        .collect()
}
