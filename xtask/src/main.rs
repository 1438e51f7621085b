//! Project automation for the agent runtime workspace (`cargo xtask ...`).
//!
//! Standard library only: this crate must build on a fresh machine before
//! anything else is installed.
//!
//! # Subcommands
//!
//! * `cargo xtask test` — the whole gate that CI runs (`.ci/run` is exactly
//!   this). First the prerequisites (see below), then, stopping at the first
//!   failure:
//!   1. lint: `cargo fmt --all --check`, the dependency direction (`cargo
//!      xtask layering`, see [`layering`]: no actor crate depends on another
//!      but through `agent-assembly`, and agent-capabilities and agent-kernel
//!      reach no tokio, rusqlite or web-sys), `cargo clippy` with `-D
//!      warnings` natively and for `wasm32-unknown-unknown`;
//!   2. native: `cargo nextest run --workspace` (or `cargo test --workspace`
//!      when nextest is not installed) and `cargo test --workspace --doc`;
//!      then a release `agentrt` built without test features must contain
//!      none of [`TEST_ONLY_MARKERS`], each found first in the `agentrt` the
//!      tests ran ([`check_test_only_code_out_of_release`]);
//!   3. wasm: `cargo build` for `wasm32-unknown-unknown`, then
//!      `cargo test --target wasm32-unknown-unknown -p <crate>` for every crate
//!      of [`WASM_TEST_CRATES`], in headless Chromium through
//!      `wasm-bindgen-test-runner`, ChromeDriver and the repository's
//!      `webdriver.json`;
//!   4. e2e: `npm test` in `host-browser/e2e` (Playwright), once that suite
//!      exists; it serves with the release `agentrt` of step 2 when that ran
//!      (`AGENTRT_BIN`).
//!
//!   Flags: `--only lint|native|wasm|e2e` runs one group, `--no-install` fails
//!   instead of installing a missing prerequisite, `--dry-run` checks the
//!   prerequisites (read only) and prints the plan without running it.
//!
//! * `cargo xtask demo [--dry-run] [--no-install] [--] [ARGS...]` — the
//!   browser demo: builds the wasm bundle (release, `wasm-bindgen --target
//!   web` into `host-browser/pkg`), prints its raw and gzipped size, and
//!   serves the demo page with `agentrt serve` (release build) on
//!   127.0.0.1 — the page, the bundle at `/pkg/` and the fetch gateway on one
//!   origin; it prints the page URL carrying the gateway token. ARGS go to
//!   `agentrt serve` (a bare number is the port, default 8787). Its steps
//!   come from [`demo_steps`].
//!   The terminal demo stays `cargo run -p agent-host-native --bin agentrt -- demo`.
//!
//! * `cargo xtask install [--dry-run]` — only the prerequisites step.
//!
//! * `cargo xtask layering` — only the layering check ([`layering`]).
//!
//! # Prerequisites
//!
//! Each is checked first and installed only when missing, printing the
//! command it runs: the `wasm32-unknown-unknown` target, `wasm-bindgen-cli`
//! [`WASM_BINDGEN_VERSION`] (must equal the `wasm-bindgen` version in
//! `Cargo.lock`), `/usr/bin/chromium`, `/usr/bin/chromedriver` and `clang`
//! (apt, with `sudo` unless root), the `rustfmt` and `clippy` components, and
//! the npm packages of `host-browser/e2e` when that suite exists. A missing
//! prerequisite that cannot be installed stops everything with a loud message
//! and a non-zero exit code; nothing is skipped silently.
//!
//! `RUSTFLAGS` is never set: it would replace the rustflags of
//! `.cargo/config.toml`, among them `--cfg=web_sys_unstable_apis`.

use std::collections::BTreeSet;
use std::env;
use std::fmt;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Output, Stdio};
use std::time::Instant;

mod layering;

/// Crates whose tests also run on `wasm32-unknown-unknown` in headless
/// Chromium. Crates not (yet) in the workspace are left out with a note; a
/// crate without wasm tests simply runs zero tests.
const WASM_TEST_CRATES: &[&str] = &[
    "agent-capabilities",
    "agent-kernel",
    "agent-supervisor",
    "agent-tools",
    "agent-workspace",
    "agent-readable",
    "agent-host-browser",
];

/// Crates that never build for wasm32.
const NATIVE_ONLY_CRATES: &[&str] = &["agent-host-native", "xtask"];

/// The `wasm-bindgen-cli` version; it must equal the `wasm-bindgen` library
/// version pinned in the workspace (`wasm-bindgen = "=0.2.130"`).
const WASM_BINDGEN_VERSION: &str = "0.2.130";

const WASM_TARGET: &str = "wasm32-unknown-unknown";
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const APT_PACKAGES: &[&str] = &["chromium", "chromium-driver", "clang"];
const RUST_COMPONENTS: &[&str] = &["rustfmt", "clippy"];
/// The Playwright end-to-end suite (written separately).
const E2E_DIR: &str = "host-browser/e2e";
/// Seconds a wasm-bindgen test binary may run in the browser.
const WASM_TEST_TIMEOUT_SECS: &str = "120";

const USAGE: &str = "\
Project automation. Usage:

  cargo xtask test [--only lint|native|wasm|e2e] [--no-install] [--dry-run]
      Prerequisites, then fmt --check, clippy -D warnings (native and wasm32),
      native tests (nextest or cargo test) and doctests, a release agentrt
      checked to contain no test-only code, the wasm32 build,
      wasm tests in headless Chromium, and the Playwright e2e suite.
      This is exactly what CI runs (.ci/run).

  cargo xtask demo [--no-install] [--dry-run] [--] [PORT | SERVE-ARGS...]
      Builds the browser bundle (prints its raw and gzipped wasm size) and
      serves the demo page with `agentrt serve` on 127.0.0.1:PORT (default
      8787); open the printed http://127.0.0.1:PORT/#gateway-token=... URL.
      The terminal demo: cargo run -p agent-host-native --bin agentrt -- demo

  cargo xtask install [--dry-run]
      Checks every prerequisite and installs the missing ones.

  cargo xtask layering
      Fails when an actor crate depends on another (only agent-assembly may),
      or agent-capabilities / agent-kernel on tokio, rusqlite or web-sys.

Flags:
  --only GROUP   run one group of steps: lint, native, wasm or e2e
  --no-install   fail instead of installing a missing prerequisite
  --dry-run      check prerequisites (read only) and print the plan, run nothing
  -h, --help     this text
";

// ---------------------------------------------------------------------------
// Entry point and argument parsing
// ---------------------------------------------------------------------------

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let cli = match parse_args(&args) {
        Ok(cli) => cli,
        Err(message) => {
            eprintln!("xtask: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut runner = Runner::new(cli.dry_run, cli.no_install);
    let result = match &cli.command {
        Cmd::Help => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Cmd::Test { only } => test(&mut runner, *only),
        Cmd::Demo { args } => demo(&mut runner, args),
        Cmd::Install => ensure_prerequisites(&mut runner, &Prereq::ALL),
        Cmd::Layering => layering::check(&runner.root).map_err(|violations| Failure::Step {
            name: "layering".to_string(),
            status: format!("the layering is broken (DESIGN.md):\n{violations}"),
        }),
    };
    runner.print_summary();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("\nxtask: FAILED: {failure}");
            ExitCode::FAILURE
        }
    }
}

struct Cli {
    command: Cmd,
    dry_run: bool,
    no_install: bool,
}

enum Cmd {
    Help,
    Test { only: Option<Group> },
    Demo { args: Vec<String> },
    Install,
    Layering,
}

fn parse_args(args: &[String]) -> Result<Cli, String> {
    let Some((sub, rest)) = args.split_first() else {
        return Ok(Cli {
            command: Cmd::Help,
            dry_run: false,
            no_install: false,
        });
    };
    let mut cli = Cli {
        command: Cmd::Help,
        dry_run: false,
        no_install: false,
    };
    let mut only = None;
    let mut forwarded = Vec::new();
    let mut iter = rest.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(cli),
            "--dry-run" => cli.dry_run = true,
            "--no-install" if sub != "install" => cli.no_install = true,
            "--only" if sub == "test" => {
                let value = iter
                    .next()
                    .ok_or("--only needs a value: lint, native, wasm or e2e")?;
                only = Some(Group::parse(value)?);
            }
            "--" if sub == "demo" => forwarded.extend(iter.by_ref().cloned()),
            _ if sub == "demo" => forwarded.push(arg.clone()),
            other => return Err(format!("unknown argument `{other}` for `{sub}`")),
        }
    }
    cli.command = match sub.as_str() {
        "-h" | "--help" | "help" => Cmd::Help,
        "test" => Cmd::Test { only },
        "demo" => Cmd::Demo { args: forwarded },
        "install" => Cmd::Install,
        "layering" => Cmd::Layering,
        other => return Err(format!("unknown subcommand `{other}`")),
    };
    Ok(cli)
}

// ---------------------------------------------------------------------------
// Steps and the runner
// ---------------------------------------------------------------------------

/// The groups of `cargo xtask test`, in the order they run.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Group {
    Lint,
    Native,
    Wasm,
    E2e,
}

impl Group {
    const ALL: [Group; 4] = [Group::Lint, Group::Native, Group::Wasm, Group::E2e];

    fn parse(value: &str) -> Result<Group, String> {
        match value {
            "lint" => Ok(Group::Lint),
            "native" => Ok(Group::Native),
            "wasm" => Ok(Group::Wasm),
            "e2e" => Ok(Group::E2e),
            other => Err(format!(
                "unknown group `{other}`: expected lint, native, wasm or e2e"
            )),
        }
    }

    /// What the group needs installed.
    fn prerequisites(self) -> &'static [Prereq] {
        match self {
            // clippy for wasm32 runs build scripts, and QuickJS's C needs clang.
            Group::Lint => &[
                Prereq::RustComponents,
                Prereq::WasmTarget,
                Prereq::SystemPackages,
            ],
            Group::Native => &[],
            Group::Wasm => &[
                Prereq::WasmTarget,
                Prereq::WasmBindgen,
                Prereq::SystemPackages,
            ],
            Group::E2e => &[
                Prereq::WasmTarget,
                Prereq::WasmBindgen,
                Prereq::SystemPackages,
                Prereq::E2eNodeModules,
            ],
        }
    }
}

/// One command to run: a program, its arguments, extra environment variables
/// and the directory (relative to the repository root) it runs in.
struct Step {
    name: String,
    program: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    dir: Option<PathBuf>,
}

impl Step {
    fn new(name: impl Into<String>, program: &str, args: &[&str]) -> Step {
        Step {
            name: name.into(),
            program: program.to_string(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: Vec::new(),
            dir: None,
        }
    }

    fn cargo(name: impl Into<String>, args: &[&str]) -> Step {
        Step::new(name, "cargo", args)
    }

    fn arg(mut self, arg: impl Into<String>) -> Step {
        self.args.push(arg.into());
        self
    }

    fn env(mut self, key: &str, value: impl Into<String>) -> Step {
        self.env.push((key.to_string(), value.into()));
        self
    }

    fn in_dir(mut self, dir: impl Into<PathBuf>) -> Step {
        self.dir = Some(dir.into());
        self
    }

    /// Prefixes the command with `sudo` unless we are root.
    fn with_sudo(mut self) -> Step {
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
        for (key, value) in &self.env {
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
enum Failure {
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

type Result<T, E = Failure> = std::result::Result<T, E>;

struct Record {
    name: String,
    seconds: f64,
    ok: bool,
}

/// Runs steps from the repository root and remembers how each went.
struct Runner {
    root: PathBuf,
    dry_run: bool,
    no_install: bool,
    color: bool,
    records: Vec<Record>,
}

impl Runner {
    fn new(dry_run: bool, no_install: bool) -> Runner {
        Runner {
            root: repo_root(),
            dry_run,
            no_install,
            color: std::io::stdout().is_terminal(),
            records: Vec::new(),
        }
    }

    /// Prints `==> <command>`, runs it with inherited stdio, and records its
    /// elapsed time. A non-zero exit is a [`Failure::Step`].
    fn run_step(&mut self, step: &Step) -> Result<()> {
        self.run_step_with(step, false).map(drop)
    }

    /// [`Runner::run_step`], but stdout is captured and returned (`None` in a
    /// dry run); stderr stays inherited.
    fn run_step_stdout(&mut self, step: &Step) -> Result<Option<String>> {
        self.run_step_with(step, true)
    }

    fn run_step_with(&mut self, step: &Step, capture_stdout: bool) -> Result<Option<String>> {
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

    /// Prints how a step went and remembers it for the summary.
    fn record(&mut self, name: &str, seconds: f64, ok: bool) {
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

    fn command(&self, step: &Step) -> Command {
        let program = match step.program.as_str() {
            // The cargo that runs xtask, so that the toolchain stays the same.
            "cargo" => env::var("CARGO").unwrap_or_else(|_| "cargo".to_string()),
            other => other.to_string(),
        };
        let mut command = Command::new(program);
        command
            .args(&step.args)
            .envs(step.env.iter().map(|(k, v)| (k, v)));
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
    fn query(&self, program: &str, args: &[&str]) -> Option<String> {
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
    fn install(
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

    fn print_summary(&self) {
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

fn loud_prereq_failure(name: &str, detail: &str) -> Failure {
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

// ---------------------------------------------------------------------------
// Subcommands
// ---------------------------------------------------------------------------

fn test(runner: &mut Runner, only: Option<Group>) -> Result<()> {
    let groups: Vec<Group> = match only {
        Some(group) => vec![group],
        None => Group::ALL.to_vec(),
    };
    warn_about_rustflags();
    let mut prereqs = Vec::new();
    for group in &groups {
        for prereq in group.prerequisites() {
            if !prereqs.contains(prereq) {
                prereqs.push(*prereq);
            }
        }
    }
    ensure_prerequisites(runner, &prereqs)?;
    let workspace = workspace_members(runner);
    // The release `agentrt` checked after the native tests; the e2e suite
    // then serves with it instead of building a debug one of its own.
    let mut release_agentrt: Option<PathBuf> = None;
    for group in groups {
        for mut step in test_steps(runner, group, &workspace) {
            if let (Group::E2e, Some(agentrt)) = (group, &release_agentrt) {
                step = step.env("AGENTRT_BIN", agentrt.display().to_string());
            }
            // A one-off gate gains nothing from incremental caches, which
            // would take gigabytes of target/ on top of the build itself.
            runner.run_step(&step.env("CARGO_INCREMENTAL", "0"))?;
        }
        if group == Group::Native {
            release_agentrt = check_test_only_code_out_of_release(runner)?;
        }
    }
    if runner.dry_run {
        println!("\n(dry run: nothing was run)");
    } else {
        println!("\nxtask: all steps passed");
    }
    Ok(())
}

/// The steps of one group of `cargo xtask test`.
fn test_steps(runner: &Runner, group: Group, workspace: &BTreeSet<String>) -> Vec<Step> {
    let excludes: Vec<&str> = NATIVE_ONLY_CRATES
        .iter()
        .flat_map(|c| ["--exclude", *c])
        .collect();
    match group {
        Group::Lint => vec![
            Step::cargo("fmt", &["fmt", "--all", "--check"]),
            // DESIGN.md's dependency direction, for every target (web-sys
            // would come in for wasm32 only) and feature: see `layering`.
            Step::cargo("dependency direction", &["xtask", "layering"]),
            Step::cargo(
                "clippy native",
                &[
                    "clippy",
                    "--workspace",
                    "--all-targets",
                    "--",
                    "-D",
                    "warnings",
                ],
            ),
            Step::cargo(
                "clippy wasm32",
                &[
                    &["clippy", "--target", WASM_TARGET, "--workspace"][..],
                    &excludes,
                    &["--all-targets", "--", "-D", "warnings"],
                ]
                .concat(),
            ),
        ],
        Group::Native => {
            let tests = if runner.query("cargo", &["nextest", "--version"]).is_some() {
                Step::cargo("native tests (nextest)", &["nextest", "run", "--workspace"])
            } else {
                println!("[note] cargo-nextest is not installed: using `cargo test`");
                Step::cargo("native tests", &["test", "--workspace"])
            };
            vec![
                tests,
                Step::cargo("doctests", &["test", "--workspace", "--doc"]),
            ]
        }
        Group::Wasm => {
            let mut steps = vec![Step::cargo(
                "build wasm32",
                &[
                    &["build", "--target", WASM_TARGET, "--workspace"][..],
                    &excludes,
                ]
                .concat(),
            )];
            let webdriver_json = runner.root.join("webdriver.json");
            for krate in WASM_TEST_CRATES {
                if !workspace.is_empty() && !workspace.contains(*krate) {
                    println!("[note] {krate} is not in the workspace: no wasm tests for it");
                    continue;
                }
                steps.push(
                    Step::cargo(
                        format!("wasm tests {krate}"),
                        &["test", "--target", WASM_TARGET, "-p", krate],
                    )
                    .env("CHROMEDRIVER", CHROMEDRIVER)
                    .env(
                        "WASM_BINDGEN_TEST_WEBDRIVER_JSON",
                        webdriver_json.display().to_string(),
                    )
                    .env("WASM_BINDGEN_TEST_TIMEOUT", WASM_TEST_TIMEOUT_SECS)
                    // Test binaries without `run_in_browser` run in Chromium too, not Node.
                    .env("WASM_BINDGEN_USE_BROWSER", "1"),
                );
            }
            steps
        }
        Group::E2e => {
            if runner.root.join(E2E_DIR).join("package.json").is_file() {
                vec![Step::new("e2e (playwright)", "npm", &["test"]).in_dir(E2E_DIR)]
            } else {
                println!(
                    "\n[e2e] {E2E_DIR}/package.json does not exist: the Playwright e2e suite does \
                     not exist yet, so no e2e test ran"
                );
                Vec::new()
            }
        }
    }
}

/// Test-only code, each by a string that only it puts in a binary, and
/// where it lives. A release `agentrt` must contain none of them; the
/// `agentrt` the tests ran must contain every one, or the search could not
/// fail. Each must equal the constant named (xtask depends on no crate).
const TEST_ONLY_MARKERS: &[(&str, &str)] = &[
    (
        "AGENTRT_TEST_PAUSE",
        "the SIGKILL tests' pause hook (agent-host-native feature `test-hooks`, \
         host-native/src/pause.rs PAUSE_VAR)",
    ),
    (
        "crash-sim sabotage",
        "the sabotaged supervisor (agent-supervisor feature `sim`, \
         actors/supervisor/src/sabotage.rs MARKER)",
    ),
];

/// Test-only code stays out of release builds (issue 13 item 5): builds a
/// release `agentrt` without any test feature and searches it for every
/// [`TEST_ONLY_MARKERS`] string, after finding each in the `agentrt` the
/// tests ran (fresh after the native tests: the same `cargo test --workspace`
/// build). Returns the checked release binary (`None` in a dry run).
fn check_test_only_code_out_of_release(runner: &mut Runner) -> Result<Option<PathBuf>> {
    const NAME: &str = "test-only code out of release agentrt";
    let json = "--message-format=json-render-diagnostics";
    let tested = runner.run_step_stdout(
        &Step::cargo(
            "agentrt as tested",
            &["test", "--workspace", "--no-run", json],
        )
        .env("CARGO_INCREMENTAL", "0"),
    )?;
    let release = runner.run_step_stdout(
        &Step::cargo(
            "release agentrt",
            &[
                "build",
                "--release",
                "-p",
                "agent-host-native",
                "--bin",
                "agentrt",
                json,
            ],
        )
        .env("CARGO_INCREMENTAL", "0"),
    )?;
    println!("\n==> {NAME}: search both binaries for the markers of test-only code");
    let (Some(tested), Some(release)) = (tested, release) else {
        return Ok(None);
    };
    let started = Instant::now();
    let outcome = (|| {
        let tested = read_agentrt(&tested, "cargo test --workspace --no-run")?;
        let release = read_agentrt(&release, "cargo build --release")?;
        let mut problems = Vec::new();
        for (marker, what) in TEST_ONLY_MARKERS {
            match (
                contains_bytes(&tested.1, marker.as_bytes()),
                contains_bytes(&release.1, marker.as_bytes()),
            ) {
                (true, false) => println!("    {marker:?}: in the tested agentrt, not in release"),
                (false, _) => problems.push(format!(
                    "{marker:?} is not in the tested agentrt {}, so the search could not \
                     find {what}: the marker and the code no longer agree",
                    tested.0.display()
                )),
                (true, true) => problems.push(format!(
                    "{marker:?} is in the release agentrt {}: {what} was built into it",
                    release.0.display()
                )),
            }
        }
        if problems.is_empty() {
            Ok(release.0)
        } else {
            Err(problems.join("; "))
        }
    })();
    runner.record(NAME, started.elapsed().as_secs_f64(), outcome.is_ok());
    outcome.map(Some).map_err(|status| Failure::Step {
        name: NAME.to_string(),
        status,
    })
}

/// The `agentrt` executable named in cargo's JSON messages, and its bytes.
fn read_agentrt(messages: &str, built_by: &str) -> Result<(PathBuf, Vec<u8>), String> {
    let path = agentrt_executable(messages)
        .ok_or_else(|| format!("`{built_by}` named no agentrt executable"))?;
    let bytes = std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    Ok((path, bytes))
}

/// The `agentrt` binary among cargo's `--message-format=json` lines (the
/// binary itself, not the test harness of its unit tests).
fn agentrt_executable(messages: &str) -> Option<PathBuf> {
    const EXECUTABLE: &str = "\"executable\":\"";
    messages
        .lines()
        .filter(|line| {
            line.contains("\"reason\":\"compiler-artifact\"")
                && line.contains("\"kind\":[\"bin\"]")
                && line.contains("\"name\":\"agentrt\"")
                && line.contains("\"test\":false")
        })
        .find_map(|line| {
            let start = line.find(EXECUTABLE)? + EXECUTABLE.len();
            let len = line[start..].find('"')?;
            Some(PathBuf::from(&line[start..start + len]))
        })
}

/// Whether `needle` occurs in `haystack`.
fn contains_bytes(haystack: &[u8], needle: &[u8]) -> bool {
    let Some((&first, _)) = needle.split_first() else {
        return true;
    };
    haystack
        .windows(needle.len())
        .any(|window| window[0] == first && window == needle)
}

#[cfg(test)]
mod release_check_tests {
    use super::*;

    /// Two lines of `cargo test --no-run --message-format=json` for the
    /// package (abridged): the bin's unit-test harness, then the bin.
    const MESSAGES: &str = concat!(
        r#"{"reason":"compiler-artifact","package_id":"path+file:///w/host-native#agent-host-native@0.1.0","target":{"kind":["bin"],"crate_types":["bin"],"name":"agentrt","src_path":"/w/host-native/src/main.rs"},"profile":{"opt_level":"0","test":true},"features":["sim","test-hooks"],"filenames":["/w/target/debug/deps/agentrt-1"],"executable":"/w/target/debug/deps/agentrt-1","fresh":true}"#,
        "\n",
        r#"{"reason":"compiler-artifact","package_id":"path+file:///w/host-native#agent-host-native@0.1.0","target":{"kind":["bin"],"crate_types":["bin"],"name":"agentrt","src_path":"/w/host-native/src/main.rs"},"profile":{"opt_level":"0","test":false},"features":["sim","test-hooks"],"filenames":["/w/target/debug/agentrt"],"executable":"/w/target/debug/agentrt","fresh":true}"#,
        "\n",
        r#"{"reason":"build-finished","success":true}"#,
    );

    #[test]
    fn the_agentrt_binary_is_found_not_its_test_harness() {
        assert_eq!(
            agentrt_executable(MESSAGES),
            Some(PathBuf::from("/w/target/debug/agentrt"))
        );
        let harness_only = MESSAGES.lines().next().unwrap_or_default();
        assert_eq!(agentrt_executable(harness_only), None);
        assert_eq!(agentrt_executable(""), None);
    }

    #[test]
    fn markers_are_found_anywhere_in_the_bytes_and_only_whole() {
        let binary = b"\x7fELF\0\0AGENTRT_TEST_PAUSE\0crash-sim sabotage";
        assert!(contains_bytes(binary, b"AGENTRT_TEST_PAUSE"));
        assert!(contains_bytes(binary, b"crash-sim sabotage"));
        assert!(contains_bytes(binary, b"\x7fELF"));
        assert!(!contains_bytes(binary, b"AGENTRT_TEST_PAUSED"));
        assert!(!contains_bytes(b"AGENTRT_TEST_PAUS", b"AGENTRT_TEST_PAUSE"));
        assert!(!contains_bytes(b"", b"x"));
    }

    #[test]
    fn every_marker_names_what_it_stands_for() {
        for (marker, what) in TEST_ONLY_MARKERS {
            assert!(!marker.is_empty() && what.contains("feature"), "{marker}");
        }
    }
}

fn demo(runner: &mut Runner, args: &[String]) -> Result<()> {
    warn_about_rustflags();
    ensure_prerequisites(runner, DEMO_PREREQUISITES)?;
    for step in demo_steps(args) {
        runner.run_step(&step)?;
    }
    Ok(())
}

/// What `cargo xtask demo` needs installed: the wasm target and wasm-bindgen
/// (Node.js runs the build script; it has no packages to install).
const DEMO_PREREQUISITES: &[Prereq] = &[Prereq::WasmTarget, Prereq::WasmBindgen];

/// The steps of `cargo xtask demo`, in order: build the bundle (the script
/// runs cargo and wasm-bindgen and prints the raw and gzipped wasm size),
/// then serve it with `agentrt serve` (release), which serves the page, the
/// bundle and the fetch gateway on one origin and prints the page URL with
/// the gateway token. `args` go to `agentrt serve`; a lone number is the port.
fn demo_steps(args: &[String]) -> Vec<Step> {
    let build = Step::new("demo: build the wasm bundle", "node", &["build.mjs"]).in_dir(E2E_DIR);
    let mut serve = Step::cargo(
        "demo: agentrt serve on 127.0.0.1",
        &[
            "run",
            "--release",
            "-p",
            "agent-host-native",
            "--bin",
            "agentrt",
            "--",
            "serve",
            "--www",
            "host-browser/www",
            "--pkg",
            "host-browser/pkg",
        ],
    );
    match args {
        [port] if port.parse::<u16>().is_ok() => serve = serve.arg("--port").arg(port.clone()),
        _ => {
            for arg in args {
                serve = serve.arg(arg.clone());
            }
        }
    }
    vec![build, serve]
}

#[cfg(test)]
mod demo_tests {
    use super::*;

    #[test]
    fn demo_builds_the_bundle_then_runs_agentrt_serve() {
        let steps = demo_steps(&[]);
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].program, "node");
        assert_eq!(steps[0].args, ["build.mjs"]);
        assert_eq!(steps[1].program, "cargo");
        let serve = steps[1].args.join(" ");
        assert_eq!(
            serve,
            "run --release -p agent-host-native --bin agentrt -- serve \
             --www host-browser/www --pkg host-browser/pkg"
        );
        assert!(
            steps
                .iter()
                .all(|s| !s.args.iter().any(|a| a.contains("serve.mjs")))
        );
    }

    #[test]
    fn demo_forwards_the_port_and_other_serve_arguments() {
        let port = demo_steps(&["9000".to_string()]);
        assert!(
            port[1]
                .args
                .ends_with(&["--port".to_string(), "9000".to_string()])
        );
        let given: Vec<String> = ["--port", "0"].iter().map(|s| s.to_string()).collect();
        assert!(demo_steps(&given)[1].args.ends_with(&given));
    }
}

// ---------------------------------------------------------------------------
// Prerequisites
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Prereq {
    WasmTarget,
    WasmBindgen,
    SystemPackages,
    RustComponents,
    E2eNodeModules,
}

impl Prereq {
    const ALL: [Prereq; 5] = [
        Prereq::WasmTarget,
        Prereq::WasmBindgen,
        Prereq::SystemPackages,
        Prereq::RustComponents,
        Prereq::E2eNodeModules,
    ];
}

fn ensure_prerequisites(runner: &mut Runner, prereqs: &[Prereq]) -> Result<()> {
    if prereqs.is_empty() {
        return Ok(());
    }
    println!(
        "==> prerequisites{}",
        if runner.no_install {
            " (--no-install)"
        } else {
            ""
        }
    );
    for prereq in prereqs {
        match prereq {
            Prereq::WasmTarget => ensure_wasm_target(runner)?,
            Prereq::WasmBindgen => ensure_wasm_bindgen(runner)?,
            Prereq::SystemPackages => ensure_system_packages(runner)?,
            Prereq::RustComponents => ensure_rust_components(runner)?,
            Prereq::E2eNodeModules => ensure_e2e_node_modules(runner)?,
        }
    }
    Ok(())
}

fn ensure_wasm_target(runner: &mut Runner) -> Result<()> {
    let name = "rust target wasm32-unknown-unknown";
    let missing = |runner: &Runner| match runner.query("rustup", &["target", "list", "--installed"])
    {
        None => Some("`rustup target list --installed` failed (is rustup installed?)".to_string()),
        Some(list) if list.lines().any(|l| l.trim() == WASM_TARGET) => None,
        Some(_) => Some(format!("{WASM_TARGET} is not installed")),
    };
    match missing(runner) {
        None => {
            println!("[prereq] {name}: ok");
            Ok(())
        }
        Some(why) => {
            let steps = [Step::new(
                "install wasm32 target",
                "rustup",
                &["target", "add", WASM_TARGET],
            )];
            runner.install(name, &why, &steps, missing)
        }
    }
}

fn ensure_wasm_bindgen(runner: &mut Runner) -> Result<()> {
    let name = "wasm-bindgen-cli";
    // The CLI must equal the library version that Cargo.lock resolved.
    if let Some(locked) = locked_version(&runner.root, "wasm-bindgen")
        && locked != WASM_BINDGEN_VERSION
    {
        return Err(loud_prereq_failure(
            name,
            &format!(
                "Cargo.lock resolves wasm-bindgen {locked} but xtask installs the CLI \
                 {WASM_BINDGEN_VERSION}; they must match. Pin `wasm-bindgen = \"={WASM_BINDGEN_VERSION}\"` \
                 or update WASM_BINDGEN_VERSION in xtask/src/main.rs"
            ),
        ));
    }
    let missing = |runner: &Runner| match runner.query("wasm-bindgen", &["--version"]) {
        None => Some("`wasm-bindgen --version` failed: not installed".to_string()),
        Some(version)
            if version
                .split_whitespace()
                .any(|w| w == WASM_BINDGEN_VERSION) =>
        {
            None
        }
        Some(version) => Some(format!(
            "`wasm-bindgen --version` printed `{}`, expected {WASM_BINDGEN_VERSION}",
            version.trim()
        )),
    };
    match missing(runner) {
        None => {
            println!("[prereq] {name} {WASM_BINDGEN_VERSION}: ok");
            Ok(())
        }
        Some(why) => {
            // No `--locked`: the registry lacks one of its pinned transitive versions.
            let steps = [Step::new(
                "install wasm-bindgen-cli",
                "cargo",
                &[
                    "install",
                    "wasm-bindgen-cli",
                    "--version",
                    WASM_BINDGEN_VERSION,
                ],
            )];
            runner.install(name, &why, &steps, missing)
        }
    }
}

fn ensure_system_packages(runner: &mut Runner) -> Result<()> {
    let name = "chromium, chromedriver, clang (apt)";
    let missing = |runner: &Runner| {
        let mut absent = Vec::new();
        for path in [CHROMIUM, CHROMEDRIVER] {
            if !Path::new(path).is_file() {
                absent.push(path.to_string());
            }
        }
        if runner.query("clang", &["--version"]).is_none() {
            absent.push("clang".to_string());
        }
        (!absent.is_empty()).then(|| format!("not found: {}", absent.join(", ")))
    };
    match missing(runner) {
        None => {
            println!("[prereq] {name}: ok");
            Ok(())
        }
        Some(why) => {
            if !is_root() && runner.query("sudo", &["-n", "true"]).is_none() && !runner.dry_run {
                println!("[prereq] note: not root; sudo may ask for a password");
            }
            let install = [&["install", "-y"][..], APT_PACKAGES].concat();
            let steps = [
                Step::new("apt-get update", "apt-get", &["update"]).with_sudo(),
                Step::new("apt-get install", "apt-get", &install)
                    .env("DEBIAN_FRONTEND", "noninteractive")
                    .with_sudo(),
            ];
            runner.install(name, &why, &steps, missing)
        }
    }
}

fn ensure_rust_components(runner: &mut Runner) -> Result<()> {
    let name = "rustup components rustfmt, clippy";
    let missing =
        |runner: &Runner| match runner.query("rustup", &["component", "list", "--installed"]) {
            None => Some(
                "`rustup component list --installed` failed (is rustup installed?)".to_string(),
            ),
            Some(list) => {
                let absent: Vec<&str> = RUST_COMPONENTS
                    .iter()
                    .copied()
                    .filter(|c| {
                        !list
                            .lines()
                            .any(|l| l.trim() == *c || l.starts_with(&format!("{c}-")))
                    })
                    .collect();
                (!absent.is_empty()).then(|| format!("not installed: {}", absent.join(", ")))
            }
        };
    match missing(runner) {
        None => {
            println!("[prereq] {name}: ok");
            Ok(())
        }
        Some(why) => {
            let args = [&["component", "add"][..], RUST_COMPONENTS].concat();
            let steps = [Step::new("install rustfmt, clippy", "rustup", &args)];
            runner.install(name, &why, &steps, missing)
        }
    }
}

fn ensure_e2e_node_modules(runner: &mut Runner) -> Result<()> {
    let dir = runner.root.join(E2E_DIR);
    if !dir.join("package.json").is_file() {
        println!(
            "[prereq] e2e npm packages: {E2E_DIR}/package.json does not exist yet, nothing to install"
        );
        return Ok(());
    }
    if runner.query("npm", &["--version"]).is_none() {
        return Err(loud_prereq_failure(
            "npm (Node.js)",
            &format!("`npm --version` failed; the e2e suite in {E2E_DIR} needs Node.js and npm"),
        ));
    }
    let name = "e2e npm packages";
    let missing = |runner: &Runner| {
        let modules = runner.root.join(E2E_DIR).join("node_modules");
        (!modules.is_dir()).then(|| format!("{E2E_DIR}/node_modules does not exist"))
    };
    match missing(runner) {
        None => {
            println!("[prereq] {name}: ok");
            Ok(())
        }
        Some(why) => {
            let args: &[&str] = if dir.join("package-lock.json").is_file() {
                &["ci"]
            } else {
                &["install"]
            };
            let steps = [Step::new("npm install (e2e)", "npm", args).in_dir(E2E_DIR)];
            runner.install(name, &why, &steps, missing)
        }
    }
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// The repository root: the parent of this crate's directory.
fn repo_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
        .unwrap_or(false)
}

fn warn_about_rustflags() {
    for var in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS"] {
        if env::var_os(var).is_some() {
            eprintln!(
                "[warning] {var} is set: it replaces the rustflags of .cargo/config.toml \
                 (--cfg=web_sys_unstable_apis, getrandom_backend) and wasm32 builds will likely fail"
            );
        }
    }
}

/// The names of the workspace members, from `cargo metadata --no-deps`.
/// Empty if cargo metadata fails (then every crate of the list is tried).
fn workspace_members(runner: &Runner) -> BTreeSet<String> {
    let Some(json) = runner.query("cargo", &["metadata", "--no-deps", "--format-version", "1"])
    else {
        println!("[note] `cargo metadata` failed; trying every crate of WASM_TEST_CRATES");
        return BTreeSet::new();
    };
    let Some(start) = json.find("\"workspace_members\":[") else {
        return BTreeSet::new();
    };
    let list = &json[start + "\"workspace_members\":[".len()..];
    let list = &list[..list.find(']').unwrap_or(list.len())];
    list.split(',')
        .map(|id| id.trim().trim_matches('"'))
        .filter(|id| !id.is_empty())
        .map(package_name_from_id)
        .collect()
}

/// The package name of a cargo package id: `path+file:///a/b#name@0.1.0`,
/// `path+file:///a/name#0.1.0`, or the old `name 0.1.0 (path+file:///...)`.
fn package_name_from_id(id: &str) -> String {
    if let Some((name, _)) = id.split_once(' ') {
        return name.to_string();
    }
    match id.rsplit_once('#') {
        Some((_, fragment)) if fragment.contains('@') => {
            fragment.split('@').next().unwrap_or(fragment).to_string()
        }
        Some((url, _)) => url.rsplit('/').next().unwrap_or(url).to_string(),
        None => id.to_string(),
    }
}

/// The version `Cargo.lock` resolves for `package` (the first one listed).
fn locked_version(root: &Path, package: &str) -> Option<String> {
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).ok()?;
    let needle = format!("name = \"{package}\"\nversion = \"");
    let start = lock.find(&needle)? + needle.len();
    let rest = &lock[start..];
    Some(rest[..rest.find('"')?].to_string())
}
