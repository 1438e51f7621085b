//! The plan of `cargo xtask test`: its groups (lint, native, wasm, e2e, fuzz) in
//! order, what each needs installed, the steps of each, and running them with
//! the release check after the native group. The e2e group starts with the
//! browser API's type check ([`typecheck_steps`]).

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::book::book_steps;
use crate::prerequisites::{
    DISK_NEEDED_FOR_ALL_GROUPS_GIB, Prereq, TYPECHECK_DIR, ensure_free_disk, ensure_prerequisites,
};
use crate::release_check::check_test_only_code_out_of_release;
use crate::runner::{Result, Runner, Step, loud_prereq_failure};
use crate::scratch::ScratchTmp;
use crate::workspace::{warn_about_rustflags, workspace_members};
use crate::{
    CHROMEDRIVER, E2E_DIR, NATIVE_ONLY_CRATES, WASM_TARGET, WASM_TEST_CRATES,
    WASM_TEST_TIMEOUT_SECS,
};

/// The groups of `cargo xtask test`, in the order they run.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Group {
    Lint,
    Native,
    Wasm,
    E2e,
    /// The fuzz targets' corpus replay, then each target briefly under
    /// AFL++ ([`crate::fuzz::ci_steps`]).
    Fuzz,
}

impl Group {
    pub(crate) const ALL: [Group; 5] = [
        Group::Lint,
        Group::Native,
        Group::Wasm,
        Group::E2e,
        Group::Fuzz,
    ];

    pub(crate) fn parse(value: &str) -> Result<Group, String> {
        match value {
            "lint" => Ok(Group::Lint),
            "native" => Ok(Group::Native),
            "wasm" => Ok(Group::Wasm),
            "e2e" => Ok(Group::E2e),
            "fuzz" => Ok(Group::Fuzz),
            other => Err(format!(
                "unknown group `{other}`: expected lint, native, wasm, e2e or fuzz"
            )),
        }
    }

    /// What the group needs installed.
    pub(crate) fn prerequisites(self) -> &'static [Prereq] {
        match self {
            // clippy for wasm32 runs build scripts, and QuickJS's C needs clang.
            // mdbook builds the book in docs/.
            Group::Lint => &[
                Prereq::RustComponents,
                Prereq::WasmTarget,
                Prereq::Clang,
                Prereq::Mdbook,
            ],
            // agent-mcp's interop tests start the MCP reference server;
            // agent-store-postgres's tests start PostgreSQL clusters;
            // host-native's relay test drives the provider SDKs in Node.
            Group::Native => &[
                Prereq::McpReferenceNodeModules,
                Prereq::RelaySdkNodeModules,
                Prereq::Postgres,
                Prereq::McpConformance,
            ],
            Group::Wasm => &[
                Prereq::WasmTarget,
                Prereq::WasmBindgen,
                Prereq::Clang,
                Prereq::Browser,
            ],
            Group::E2e => &[
                Prereq::WasmTarget,
                Prereq::WasmBindgen,
                Prereq::Clang,
                Prereq::Browser,
                Prereq::E2eNodeModules,
                Prereq::TypecheckNodeModules,
                // tests/mcp.test.mjs runs the MCP reference server.
                Prereq::McpReferenceNodeModules,
            ],
            // `cargo xtask fuzz` installs cargo-afl itself (pinned version).
            Group::Fuzz => &[],
        }
    }
}

pub(crate) fn test(runner: &mut Runner, only: Option<Group>) -> Result<()> {
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
    if only.is_none() {
        ensure_free_disk(runner, DISK_NEEDED_FOR_ALL_GROUPS_GIB)?;
    }
    ensure_prerequisites(runner, &prereqs)?;
    // Whatever the steps leave in the temporary directory goes with the run.
    let scratch = if runner.dry_run {
        None
    } else {
        let scratch = ScratchTmp::create().map_err(|error| {
            loud_prereq_failure("a scratch temporary directory", &error.to_string())
        })?;
        println!(
            "\nxtask: TMPDIR for every step is {}",
            scratch.path().display()
        );
        runner.env_for_every_step("TMPDIR", scratch.path().display().to_string());
        Some(scratch)
    };
    let outcome = run_groups(runner, groups);
    drop(scratch);
    outcome
}

/// Runs `groups` in order, stopping at the first failure.
fn run_groups(runner: &mut Runner, groups: Vec<Group>) -> Result<()> {
    let workspace = workspace_members(runner);
    // The release `agentrt` checked after the native tests; the e2e suite
    // then serves with it instead of building a debug one of its own.
    let mut release_agentrt: Option<PathBuf> = None;
    let fuzz_planned = groups.contains(&Group::Fuzz);
    let mut fuzz_builds = Vec::new();
    for group in groups {
        if group == Group::E2e && fuzz_planned {
            fuzz_builds = crate::fuzz::start_builds(runner)?;
        }
        if group == Group::Fuzz {
            for build in fuzz_builds.drain(..) {
                runner.finish_step(build)?;
            }
        }
        for mut step in test_steps(runner, group, &workspace) {
            if let (Group::E2e, Some(agentrt)) = (group, &release_agentrt) {
                step = step.env("AGENTRT_BIN", agentrt.display().to_string());
            }
            // A one-off gate gains nothing from incremental caches, which
            // would take gigabytes of target/ on top of the build itself.
            runner.run_step(&step.env("CARGO_INCREMENTAL", "0"))?;
        }
        if group == Group::Native {
            // The official MCP conformance suite against agent-mcp's client.
            crate::mcp_conformance::run(runner)?;
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
        ]
        .into_iter()
        // The book (mdbook, its internal links) and the API docs.
        .chain(book_steps())
        .collect(),
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
                // The TypeScript generator's unit tests: the `ts` feature is
                // off in the workspace runs above.
                Step::cargo(
                    "typescript declarations (agent-assembly, ts feature)",
                    &[
                        "test",
                        "-p",
                        "agent-assembly",
                        "--features",
                        "ts",
                        "--lib",
                        "typescript",
                    ],
                ),
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
            // The type check first: it builds the bundle the suite then serves.
            let mut steps = typecheck_steps();
            if runner.root.join(E2E_DIR).join("package.json").is_file() {
                steps.push(Step::new("e2e (playwright)", "npm", &["test"]).in_dir(E2E_DIR));
            } else {
                println!(
                    "\n[e2e] {E2E_DIR}/package.json does not exist: the Playwright e2e suite does \
                     not exist yet, so no e2e test ran"
                );
            }
            steps
        }
        Group::Fuzz => crate::fuzz::ci_steps(),
    }
}

/// Where the generator writes the values `tsc` checks, from the repository root.
const GENERATED_VALUES: &str = "host-browser/typecheck/generated/values.ts";

/// The browser API's declarations generated from the Rust types (committed;
/// the bundle's `.d.ts` includes them), from the repository root.
const GENERATED_TYPES: &str = "host-browser/src/api/generated.d.ts";

/// The browser API's type check (issue 14 item 7, issue 33 part 5): the
/// declarations generated from the Rust types must be the committed ones
/// (a field renamed in Rust and not written again fails here); the wasm
/// bundle (for its `host-browser/pkg/agent_host_browser.d.ts`, which
/// includes them; the e2e suite's own build after it is then a no-op), the
/// values generated from real runs on the Rust side, `tsc --strict
/// --noEmit` over the `.d.ts`, the values and the typed example embedder,
/// the AI SDK transport's types against the `ai` package's, then proof
/// that the check fails when a value loses a field or gains one the types
/// do not have.
fn typecheck_steps() -> Vec<Step> {
    let tsc = "node_modules/typescript/bin/tsc";
    vec![
        Step::cargo(
            "types: the generated .d.ts matches the Rust types",
            &[
                "run",
                "-p",
                "agent-assembly",
                "--features",
                "ts",
                "--example",
                "ts_types",
                "--",
                "--check",
                GENERATED_TYPES,
            ],
        ),
        Step::new("types: build the wasm bundle", "node", &["build.mjs"]).in_dir(E2E_DIR),
        Step::cargo(
            "types: values from real runs",
            &[
                "run",
                "-p",
                "agent-assembly",
                "--example",
                "ts_values",
                "--",
                GENERATED_VALUES,
            ],
        ),
        Step::new(
            "types: tsc --strict",
            "node",
            &[tsc, "--strict", "--noEmit", "-p", "."],
        )
        .in_dir(TYPECHECK_DIR),
        // The AI SDK transport against the `ai` package's own types (its
        // library files unchecked: they assume Node's types).
        Step::new(
            "types: the AI SDK transport under tsc --strict",
            "node",
            &[tsc, "--strict", "--noEmit", "-p", "tsconfig.ai.json"],
        )
        .in_dir(TYPECHECK_DIR),
        Step::new(
            "types: a changed value fails tsc",
            "node",
            &["must_fail.mjs"],
        )
        .in_dir(TYPECHECK_DIR),
    ]
}

#[cfg(test)]
mod typecheck_tests {
    use super::*;

    #[test]
    fn the_type_check_compares_the_declarations_builds_generates_checks_then_proves_it_can_fail() {
        let steps = typecheck_steps();
        let commands: Vec<(&str, &str)> = steps
            .iter()
            .map(|s| (s.program.as_str(), s.args[0].as_str()))
            .collect();
        assert_eq!(
            commands,
            [
                ("cargo", "run"),
                ("node", "build.mjs"),
                ("cargo", "run"),
                ("node", "node_modules/typescript/bin/tsc"),
                ("node", "node_modules/typescript/bin/tsc"),
                ("node", "must_fail.mjs")
            ]
        );
        assert!(steps[0].args.iter().any(|a| a == "--check"));
        assert_eq!(
            steps[0].args.last().map(String::as_str),
            Some(GENERATED_TYPES)
        );
        assert_eq!(
            steps[2].args.last().map(String::as_str),
            Some(GENERATED_VALUES)
        );
        assert!(steps[3].args.iter().any(|a| a == "--strict"));
        assert!(steps[3].args.iter().any(|a| a == "--noEmit"));
        assert_eq!(
            steps[4].args.last().map(String::as_str),
            Some("tsconfig.ai.json")
        );
    }
}
