//! Test-only code stays out of release builds, and what a test host needs
//! is in them: the markers that only test code puts in a binary, the check
//! that a release `agentrt` holds none of them while the `agentrt` the tests
//! ran holds every one, and the check that the release `agentrt sim` (the
//! test host's simulator, shipped in the default build) plays a scenario
//! and prints its summary line.

use std::path::PathBuf;
use std::time::Instant;

use crate::runner::{Failure, Result, Runner, Step};

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
        "test hook between wait_settled's steps",
        "the settle hook (agent-supervisor feature `test-hooks`, \
         actors/supervisor/src/runtime/reads.rs SETTLE_HOOK_MARKER)",
    ),
    (
        "crash-sim sabotage",
        "the sabotaged supervisor (agent-supervisor feature `sabotage`, turned on by \
         agent-host-native feature `test-hooks`; actors/supervisor/src/sabotage.rs MARKER)",
    ),
];

/// Test-only code stays out of release builds (issue 13 item 5): builds a
/// release `agentrt` without any test feature and searches it for every
/// [`TEST_ONLY_MARKERS`] string, after finding each in the `agentrt` the
/// tests ran (fresh after the native tests: the same `cargo test --workspace`
/// build). Returns the checked release binary (`None` in a dry run).
pub(crate) fn check_test_only_code_out_of_release(runner: &mut Runner) -> Result<Option<PathBuf>> {
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
    let release = outcome.map_err(|status| Failure::Step {
        name: NAME.to_string(),
        status,
    })?;
    check_release_sim(runner, &release)?;
    Ok(Some(release))
}

/// Seeds the release `agentrt sim` plays: enough for crash points (the
/// seeds are fixed, so the count is too: 3), few enough to take a second.
const RELEASE_SIM_SEEDS: u64 = 5;

/// The scenario the release `agentrt sim` plays: a scripted model that asks
/// the person once and then answers, three prompts in two sessions, no
/// plugins (nothing to serve).
const RELEASE_SIM_SCENARIO: &str = r#"{"model": {"turns": [
   {"text": "Asking.", "tool_calls": [{"name": "ask_user", "arguments": {"question": "more?"}}]},
   {"text": "Done."}]},
 "sessions": [{"session": "release-a", "prompts": ["one", "two"]},
              {"session": "release-b", "prompts": ["three"]}],
 "person": {"answers": ["no"]}}"#;

/// `agentrt sim` is in the release `agentrt` (issue 32 item 8): it plays
/// [`RELEASE_SIM_SCENARIO`] over [`RELEASE_SIM_SEEDS`] seeds, exits 0 and
/// prints the summary line with no violations.
fn check_release_sim(runner: &mut Runner, release: &std::path::Path) -> Result<()> {
    const NAME: &str = "release agentrt sim";
    let dir = std::env::temp_dir().join(format!("xtask-release-sim-{}", std::process::id()));
    let scenario = dir.join("scenario.json");
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&scenario, RELEASE_SIM_SCENARIO))
        .map_err(|e| Failure::Step {
            name: NAME.to_string(),
            status: format!("cannot write {}: {e}", scenario.display()),
        })?;
    let seeds = RELEASE_SIM_SEEDS.to_string();
    let step = Step::new(
        NAME,
        &release.display().to_string(),
        &["sim", &scenario.display().to_string(), "--seeds", &seeds],
    );
    let stdout = runner.run_step_stdout(&step);
    let _ = std::fs::remove_dir_all(&dir);
    let Some(stdout) = stdout? else {
        return Ok(());
    };
    match sim_summary(&stdout, RELEASE_SIM_SEEDS) {
        Ok(points) => {
            println!(
                "    release agentrt sim: {RELEASE_SIM_SEEDS} seeds, {points} crash points, 0 violations"
            );
            Ok(())
        }
        Err(status) => Err(Failure::Step {
            name: NAME.to_string(),
            status,
        }),
    }
}

/// The crash points of the summary line `agentrt sim` prints first
/// (`crash-sim: <seeds> seeds, <points> crash points, <n> violations`),
/// checked to name `seeds` seeds, at least one crash point and no
/// violation.
fn sim_summary(stdout: &str, seeds: u64) -> Result<u64, String> {
    let line = stdout.lines().next().unwrap_or_default();
    let fields = line
        .strip_prefix("crash-sim: ")
        .and_then(|rest| {
            let mut parts = rest.split(", ");
            let seen = parts.next()?.strip_suffix(" seeds")?.parse::<u64>().ok()?;
            let points = parts
                .next()?
                .strip_suffix(" crash points")?
                .parse::<u64>()
                .ok()?;
            let violations = parts
                .next()?
                .strip_suffix(" violations")?
                .parse::<u64>()
                .ok()?;
            parts.next().is_none().then_some((seen, points, violations))
        })
        .ok_or_else(|| format!("`agentrt sim` printed no summary line first: {line:?}"))?;
    match fields {
        (seen, points, 0) if seen == seeds && points > 0 => Ok(points),
        _ => Err(format!(
            "`agentrt sim` should play {seeds} seeds with crash points and no violation: {line:?}"
        )),
    }
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
    fn the_sim_summary_line_is_read_and_checked() {
        let ok = "crash-sim: 3 seeds, 17 crash points, 0 violations\nmore\n";
        assert_eq!(sim_summary(ok, 3), Ok(17));
        for bad in [
            "",
            "crash-sim: 3 seeds, 17 crash points, 1 violations",
            "crash-sim: 2 seeds, 17 crash points, 0 violations",
            "crash-sim: 3 seeds, 0 crash points, 0 violations",
            "crash-sim: 3 seeds, 17 crash points, 0 violations, extra",
            "crash-sim: three seeds, 17 crash points, 0 violations",
            "notes first\ncrash-sim: 3 seeds, 17 crash points, 0 violations",
        ] {
            assert!(sim_summary(bad, 3).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn every_marker_names_what_it_stands_for() {
        for (marker, what) in TEST_ONLY_MARKERS {
            assert!(!marker.is_empty() && what.contains("feature"), "{marker}");
        }
    }
}
