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
//!      warnings` natively and for `wasm32-unknown-unknown`, the book in
//!      `docs/` built with mdbook and its internal links checked
//!      ([`book`]), and `cargo doc --no-deps --workspace` with
//!      `RUSTDOCFLAGS="-D warnings"`;
//!   2. native: `cargo nextest run --workspace` (or `cargo test --workspace`
//!      when nextest is not installed) and `cargo test --workspace --doc`;
//!      then a release `agentrt` built without test features must contain
//!      none of `release_check::TEST_ONLY_MARKERS`, each found first in the `agentrt` the
//!      tests ran (`release_check::check_test_only_code_out_of_release`);
//!   3. wasm: `cargo build` for `wasm32-unknown-unknown`, then
//!      `cargo test --target wasm32-unknown-unknown -p <crate>` for every crate
//!      of [`WASM_TEST_CRATES`], in headless Chromium through
//!      `wasm-bindgen-test-runner`, ChromeDriver and the repository's
//!      `webdriver.json`;
//!   4. e2e: `npm test` in `host-browser/e2e` (Playwright), once that suite
//!      exists; it serves with the release `agentrt` of step 2 when that ran
//!      (`AGENTRT_BIN`);
//!   5. fuzz: the fuzz targets' seed corpora and regressions replayed under
//!      `cargo test`, then every target without an open finding for
//!      [`fuzz::CI_SECONDS`] seconds under AFL++ (see `cargo xtask fuzz`).
//!
//!   Flags: `--only lint|native|wasm|e2e|fuzz` runs one group, `--no-install` fails
//!   instead of installing a missing prerequisite, `--dry-run` checks the
//!   prerequisites (read only) and prints the plan without running it.
//!
//! * `cargo xtask demo [--dry-run] [--no-install] [--] [ARGS...]` — the
//!   browser demo: builds the wasm bundle (dev profile, `wasm-bindgen --target
//!   web` into `host-browser/pkg`), prints its raw and gzipped size, and
//!   serves the demo page with `agentrt serve` (dev profile) on
//!   127.0.0.1 — the page, the bundle at `/pkg/` and the fetch gateway on one
//!   origin; it prints the page URL carrying the gateway token. ARGS go to
//!   `agentrt serve` (a bare number is the port, default 8787). Its steps
//!   come from `demo::demo_steps`.
//!   The terminal demo stays `cargo run -p agent-host-native --bin agentrt -- demo`.
//!
//! * `cargo xtask pack [--dry-run] [--no-install]` — the npm package of the
//!   browser runtime for embedders ([`pack`](mod@pack)): the bundle built as for the
//!   demo, then `host-browser/npm/pack.mjs` packs it into `target/npm/`.
//!
//! * `cargo xtask bench [--quick] [--dry-run] [--no-install]` — every
//!   benchmark (native and in headless Chromium) and one table of their
//!   figures beside their aims and the machine's floors ([`bench`](mod@bench)).
//!
//! * `cargo xtask install [--dry-run]` — only the prerequisites step.
//!
//! * `cargo xtask layering` — only the layering check ([`layering`]).
//!
//! * `cargo xtask check-model [--deep] [--depth N] [--owners N] [--calls N]
//!   [--time N] [--crashes N] [--sabotage NAME|all]` — the lease and journal
//!   protocol model (`model-check/`, stateright), explored exhaustively
//!   within the bound: prints the state count, the time and every violation
//!   as a trace ([`check_model_step`]). The CI bound is the default; the
//!   native tests check it too.
//!
//! * `cargo xtask fuzz TARGET|--all [--time N]` — coverage-guided fuzzing
//!   of the targets of `fuzz/` with AFL++ (cargo-afl, installed when
//!   missing): N seconds per target (default 60), then each target's
//!   executions, coverage and crashes ([`fuzz`]). `cargo xtask test` runs
//!   every target briefly in its `fuzz` group.
//!
//! # Prerequisites
//!
//! Each is checked first and installed only when missing, printing the
//! command it runs: the `wasm32-unknown-unknown` target, `wasm-bindgen-cli`
//! [`WASM_BINDGEN_VERSION`] (must equal the `wasm-bindgen` version in
//! `Cargo.lock`), `/usr/bin/chromium`, `/usr/bin/chromedriver` and `clang`
//! (apt, with `sudo` unless root), the `rustfmt` and `clippy` components,
//! mdbook (`book::MDBOOK_VERSION`, `cargo install --locked`),
//! the npm packages of `host-browser/e2e` when that suite exists, and
//! Debian's `postgresql` (for the native tests: agent-store-postgres starts
//! throwaway clusters on loopback as the `postgres` user). A missing
//! prerequisite that cannot be installed stops everything with a loud message
//! and a non-zero exit code; nothing is skipped silently.
//!
//! `RUSTFLAGS` is never set: it would replace the rustflags of
//! `.cargo/config.toml`, among them `--cfg=web_sys_unstable_apis`.

use std::env;
use std::process::ExitCode;

mod bench;
mod book;
mod demo;
mod fuzz;
mod layering;
mod mcp_conformance;
mod pack;
mod prerequisites;
mod release_check;
mod runner;
mod scratch;
mod test_plan;
mod workspace;

use demo::demo;
use pack::pack;
use prerequisites::{Prereq, ensure_prerequisites};
use runner::{Failure, Runner};
use test_plan::{Group, test};

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
    "agent-http",
    "agent-research",
    "agent-profiles",
    "agent-memory",
    "agent-knowledge",
    "agent-store-indexeddb",
    "agent-host-browser",
];

/// Crates that never build for wasm32.
const NATIVE_ONLY_CRATES: &[&str] = &[
    "agent-host-native",
    "agent-store-postgres",
    "agent-store-sqlite",
    "agent-test-support",
    "agent-model-check",
    "xtask",
];

/// The `wasm-bindgen-cli` version; it must equal the `wasm-bindgen` library
/// version pinned in the workspace (`wasm-bindgen = "=0.2.130"`).
const WASM_BINDGEN_VERSION: &str = "0.2.130";

const WASM_TARGET: &str = "wasm32-unknown-unknown";
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// Debian's packages of the browser tests and benches.
const BROWSER_APT_PACKAGES: &[&str] = &["chromium", "chromium-driver"];
/// Debian's package whose wasm32 target compiles QuickJS's C: every wasm
/// build needs it (the demo, the pack, the wasm tests, clippy for wasm32).
const CLANG_APT_PACKAGE: &str = "clang";
const RUST_COMPONENTS: &[&str] = &["rustfmt", "clippy"];
/// The Playwright end-to-end suite (written separately).
const E2E_DIR: &str = "host-browser/e2e";
/// Seconds a wasm-bindgen test binary may run in the browser.
const WASM_TEST_TIMEOUT_SECS: &str = "120";

const USAGE: &str = "\
Project automation. Usage:

  cargo xtask test [--only lint|native|wasm|e2e|fuzz] [--no-install] [--dry-run]
      Prerequisites, then fmt --check, the layering check, clippy -D warnings
      (native and wasm32), the book (mdbook, internal links), cargo doc with
      -D warnings, native tests (nextest or cargo test) and doctests, a release agentrt
      checked to contain no test-only code, the wasm32 build,
      wasm tests in headless Chromium, the Playwright e2e suite, and each
      fuzz target for a few seconds.
      This is exactly what CI runs (.ci/run).

  cargo xtask demo [--no-install] [--dry-run] [--] [PORT | SERVE-ARGS...]
      Builds the browser bundle (prints its raw and gzipped wasm size) and
      serves the demo page with `agentrt serve` on 127.0.0.1:PORT (default
      8787); open the printed http://127.0.0.1:PORT/#gateway-token=... URL.
      The terminal demo: cargo run -p agent-host-native --bin agentrt -- demo

  cargo xtask pack [--no-install] [--dry-run]
      Builds the browser bundle and packs it as an npm package for embedders:
      target/npm/agent-runtime-browser-<version>.tgz (npm install ./that.tgz).

  cargo xtask bench [--quick] [--no-install] [--dry-run]
      Builds and runs every benchmark (native: the runtime, idle runs,
      run_javascript, readable text, the PostgreSQL round on a throwaway
      server; in headless Chromium: IndexedDB rounds,
      the demo page's readiness, the bundle size) and prints one table, each
      figure beside its aim and the machine's floors measured in the same run;
      writes it as JSON to target/bench/. --quick: smaller runs (minutes).

  cargo xtask install [--dry-run]
      Checks every prerequisite and installs the missing ones.

  cargo xtask check-model [--deep] [--depth N] [--owners 2|3] [--calls 1|2]
                          [--time N] [--crashes N] [--sabotage NAME|all]
      Explores every interleaving of the lease and journal protocol model
      within the bound (default: the CI bound; --deep: three owners, more
      time) and prints the state count and each violation as a trace.
      --sabotage swaps in a faulty rule; it passes only if it is caught.

  cargo xtask check-links
      Checks every internal link of the book in docs/ (a missing page or
      #anchor fails) and the README's links into it; the lint group runs it
      after `mdbook build docs`.

  cargo xtask fuzz TARGET|--all [--time N] [--skip-open-findings]
      Coverage-guided fuzzing (AFL++ through cargo-afl, installed when
      missing) of one target of fuzz/ or all of them, N seconds each
      (default 60); prints executions, coverage and crashes, and fails on a
      crash. The targets are the folders of fuzz/corpus/. --skip-open-findings
      (what CI passes) leaves out targets with inputs in fuzz/findings/.

  cargo xtask mcp-conformance [--no-install] [--dry-run]
      Installs the pinned official MCP conformance suite and a Node >= 22,
      runs each client scenario against agent-mcp's client and prints
      pass/fail per scenario (part of the native group of `test`).

  cargo xtask layering
      Fails when an actor crate depends on another (only agent-assembly may),
      or agent-capabilities / agent-kernel on tokio, rusqlite or web-sys.

Flags:
  --only GROUP   run one group of steps: lint, native, wasm, e2e or fuzz
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
        Cmd::Pack => pack(&mut runner),
        Cmd::Bench { quick } => bench::bench(&mut runner, *quick),
        Cmd::Install => ensure_prerequisites(&mut runner, &Prereq::ALL),
        Cmd::CheckModel { args } => runner.run_step(&check_model_step(args)),
        Cmd::CheckLinks => check_book_links(&runner.root),
        Cmd::Fuzz { args } => fuzz::fuzz(&mut runner, args),
        Cmd::McpConformance => ensure_prerequisites(&mut runner, &[Prereq::McpConformance])
            .and_then(|()| mcp_conformance::run(&mut runner)),
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
    Pack,
    Bench { quick: bool },
    Install,
    Layering,
    CheckLinks,
    McpConformance,
    CheckModel { args: Vec<String> },
    Fuzz { args: fuzz::FuzzArgs },
}

/// `cargo xtask check-links`: the book's internal links ([`book::check_links`]).
fn check_book_links(root: &std::path::Path) -> runner::Result<()> {
    let src = root.join(book::BOOK_DIR).join("src");
    let failure = |status: String| Failure::Step {
        name: "book links".to_string(),
        status,
    };
    let mut broken = book::check_links(&src).map_err(failure)?;
    broken.extend(book::check_readme_links(&root.join("README.md")).map_err(failure)?);
    if broken.is_empty() {
        println!(
            "book links: every internal link of {} and the README resolves",
            src.display()
        );
        return Ok(());
    }
    let list: Vec<String> = broken.iter().map(|b| format!("  {b}")).collect();
    Err(failure(format!(
        "{} broken internal link(s):\n{}",
        broken.len(),
        list.join("\n")
    )))
}

/// `cargo xtask check-model ARGS`: the model checker, optimised (an
/// exploration is CPU bound; the debug build is about ten times slower).
fn check_model_step(args: &[String]) -> runner::Step {
    let mut step = runner::Step::cargo(
        "check-model",
        &[
            "run",
            "--release",
            "-p",
            "agent-model-check",
            "--bin",
            "agent-model-check",
            "--",
        ],
    );
    for arg in args {
        step = step.arg(arg.clone());
    }
    step
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
    let mut quick = false;
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
                    .ok_or("--only needs a value: lint, native, wasm, e2e or fuzz")?;
                only = Some(Group::parse(value)?);
            }
            "--quick" if sub == "bench" => quick = true,
            "--" if sub == "demo" => forwarded.extend(iter.by_ref().cloned()),
            _ if sub == "check-model" && arg != "--dry-run" => forwarded.push(arg.clone()),
            _ if sub == "demo" => forwarded.push(arg.clone()),
            _ if sub == "fuzz" => forwarded.push(arg.clone()),
            other => return Err(format!("unknown argument `{other}` for `{sub}`")),
        }
    }
    cli.command = match sub.as_str() {
        "-h" | "--help" | "help" => Cmd::Help,
        "test" => Cmd::Test { only },
        "demo" => Cmd::Demo { args: forwarded },
        "pack" => Cmd::Pack,
        "bench" => Cmd::Bench { quick },
        "install" => Cmd::Install,
        "layering" => Cmd::Layering,
        "check-links" => Cmd::CheckLinks,
        "mcp-conformance" => Cmd::McpConformance,
        "check-model" => Cmd::CheckModel { args: forwarded },
        "fuzz" => Cmd::Fuzz {
            args: fuzz::parse(&forwarded)?,
        },
        other => return Err(format!("unknown subcommand `{other}`")),
    };
    Ok(cli)
}
