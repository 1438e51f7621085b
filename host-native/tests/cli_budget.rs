//! Budgets as users expect (issue 14 item 5, S4): `agentrt run --budget
//! PRESET` with `--max-tokens`, `--max-tool-rounds`, `--max-tool-calls` and
//! `--max-duration-ms` keeps the preset's other limits, each limit tested
//! at, below and above through the binary with scripted scenarios that make
//! a known number of tool rounds, calls and tokens; the config file's
//! `[budget]` combines with the flags the same way.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");

/// Light: 8 rounds, 30 calls, 10 minutes, no token limit (S4.3).
const LIGHT_ROUNDS: u64 = 8;
const LIGHT_CALLS: u64 = 30;
const LIGHT_DURATION_MS: u64 = 10 * 60 * 1000;

/// Every model answer reports this many tokens.
const TOKENS_PER_ROUND: u64 = 1000;

fn agentrt(data: &Path, args: &[&str]) -> Output {
    if data.is_dir() {
        std::fs::set_permissions(data, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .expect("chmod data dir");
    }
    Command::new(BIN)
        .args(args)
        .env("AGENTRT_DATA_DIR", data)
        .env_remove("RUST_LOG")
        .env_remove("AGENTRT_TEST_PAUSE")
        .stdin(Stdio::null())
        .output()
        .expect("run agentrt")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `rounds` tool rounds of `calls_per_round` read-only calls each, then an
/// answer; every turn reports [`TOKENS_PER_ROUND`] tokens and takes `delay_ms`.
fn scenario(rounds: usize, calls_per_round: usize, delay_ms: u64) -> String {
    let usage = json!({"input_tokens": TOKENS_PER_ROUND, "output_tokens": 0});
    let mut turns: Vec<Value> = (0..rounds)
        .map(|_| {
            json!({
                "text": "Looking.",
                "usage": usage,
                "delay_ms": delay_ms,
                "tool_calls": (0..calls_per_round)
                    .map(|_| json!({"name": "workspace_list", "arguments": {}}))
                    .collect::<Vec<_>>(),
            })
        })
        .collect();
    turns.push(json!({"text": "All done.", "usage": usage, "delay_ms": delay_ms}));
    json!({ "turns": turns }).to_string()
}

/// What a run ended with and the budget it ran under.
struct Ended {
    code: i32,
    status: String,
    exhausted: Option<String>,
    usage: Value,
    budget: Value,
}

/// `agentrt --json [global…] run --scenario … flags…`, then `show --json`.
fn run_with(global: &[&str], scenario_json: &str, flags: &[&str]) -> Ended {
    let dir = tempfile::tempdir().expect("dir");
    let scenario = dir.path().join("s.json");
    std::fs::write(&scenario, scenario_json).expect("write");
    let data = dir.path().join("data");
    let mut args: Vec<&str> = vec!["--json"];
    args.extend(global);
    args.extend(["run", "go", "--scenario", scenario.to_str().expect("utf8")]);
    args.extend(flags);
    let out = agentrt(&data, &args);
    let stdout = text(&out.stdout);
    let settled: Value = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("every line is JSON"))
        .rfind(|e| e["event"] == "settled")
        .unwrap_or_else(|| panic!("no settled event; stderr {}", text(&out.stderr)));
    let run = settled["run"].as_str().expect("run").to_owned();
    let show = agentrt(&data, &["--json", "show", &run]);
    let card: Value = serde_json::from_slice(&show.stdout).expect("card");
    Ended {
        code: out.status.code().expect("exit"),
        status: settled["status"].as_str().expect("status").to_owned(),
        exhausted: (settled["stop_reason"]["reason"] == "budget_exhausted")
            .then(|| settled["stop_reason"]["dimension"].as_str())
            .flatten()
            .map(str::to_owned),
        usage: settled["usage"].clone(),
        budget: card["budget"].clone(),
    }
}

fn light_with(field: &str, value: u64) -> Value {
    let mut budget = json!({
        "max_tool_rounds": LIGHT_ROUNDS,
        "max_tool_calls": LIGHT_CALLS,
        "max_duration_ms": LIGHT_DURATION_MS,
    });
    budget[field] = json!(value);
    budget
}

#[track_caller]
fn assert_completed(e: &Ended, what: &str) {
    assert_eq!(
        (e.code, e.status.as_str(), e.exhausted.as_deref()),
        (0, "completed", None),
        "{what}: usage {}",
        e.usage
    );
}

#[track_caller]
fn assert_exhausted(e: &Ended, dimension: &str, what: &str) {
    assert_eq!(
        (e.code, e.status.as_str(), e.exhausted.as_deref()),
        (4, "failed", Some(dimension)),
        "{what}: usage {}",
        e.usage
    );
}

/// S4.2/S4.3: `--max-tool-rounds N` allows N rounds with tool calls; the
/// preset's calls and duration stay.
#[test]
fn max_tool_rounds_at_below_and_above() {
    let three_rounds = scenario(3, 1, 0);
    for (limit, completes) in [(3, true), (2, false), (4, true)] {
        let flag = limit.to_string();
        let e = run_with(
            &[],
            &three_rounds,
            &["--budget", "light", "--max-tool-rounds", &flag],
        );
        let what = format!("3 rounds, --max-tool-rounds {limit}");
        if completes {
            assert_completed(&e, &what);
            assert_eq!(e.usage["tool_rounds"], 3);
        } else {
            assert_exhausted(&e, "tool_rounds", &what);
            assert_eq!(e.usage["tool_rounds"], limit);
        }
        assert_eq!(e.budget, light_with("max_tool_rounds", limit), "{what}");
    }
}

/// `--max-tool-calls N` allows N calls; the preset's rounds and duration stay.
#[test]
fn max_tool_calls_at_below_and_above() {
    // Two rounds of two calls: four calls.
    let four_calls = scenario(2, 2, 0);
    for (limit, completes) in [(4, true), (3, false), (5, true)] {
        let flag = limit.to_string();
        let e = run_with(
            &[],
            &four_calls,
            &["--budget", "light", "--max-tool-calls", &flag],
        );
        let what = format!("4 calls, --max-tool-calls {limit}");
        if completes {
            assert_completed(&e, &what);
            assert_eq!(e.usage["tool_calls"], 4);
        } else {
            assert_exhausted(&e, "tool_calls", &what);
            assert_eq!(e.usage["tool_calls"], limit);
        }
        assert_eq!(e.budget, light_with("max_tool_calls", limit), "{what}");
    }
}

/// `--max-tokens N` is a hard limit: the run goes on only while it has used
/// fewer than N tokens. The two tool rounds have used 2000 tokens when the
/// second answers: a limit of 2000 ends the run there, 1999 too, 2001 lets
/// it answer.
#[test]
fn max_tokens_at_below_and_above() {
    let two_rounds = scenario(2, 1, 0);
    let before_answer = 2 * TOKENS_PER_ROUND;
    for (limit, completes) in [
        (before_answer, false),
        (before_answer - 1, false),
        (before_answer + 1, true),
    ] {
        let flag = limit.to_string();
        let e = run_with(
            &[],
            &two_rounds,
            &["--budget", "light", "--max-tokens", &flag],
        );
        let what = format!("--max-tokens {limit}");
        if completes {
            assert_completed(&e, &what);
        } else {
            assert_exhausted(&e, "tokens", &what);
        }
        assert_eq!(e.budget, light_with("max_tokens", limit), "{what}");
    }
}

/// `--max-duration-ms N` bounds the run's active time: a round that takes
/// 1.5 s ends a run allowed 500 ms; one allowed a minute completes. The
/// bound of the flag itself is tested at, below and above in
/// `budget_flags_are_checked_at_their_bounds`.
#[test]
fn max_duration_below_and_above() {
    let slow = scenario(1, 1, 1500);
    let e = run_with(
        &[],
        &slow,
        &["--budget", "light", "--max-duration-ms", "500"],
    );
    assert_exhausted(&e, "duration", "1.5 s rounds, --max-duration-ms 500");
    assert_eq!(e.budget, light_with("max_duration_ms", 500));
    let e = run_with(
        &[],
        &slow,
        &["--budget", "light", "--max-duration-ms", "60000"],
    );
    assert_completed(&e, "1.5 s rounds, --max-duration-ms 60000");
    assert_eq!(e.budget, light_with("max_duration_ms", 60_000));
}

/// Issue 14 item 5: `--budget light --max-tokens 50000` keeps light's
/// rounds: a scenario of nine tool rounds stops at light's eight.
#[test]
fn a_preset_with_a_cap_keeps_the_presets_other_limits() {
    let e = run_with(
        &[],
        &scenario(9, 1, 0),
        &["--budget", "light", "--max-tokens", "50000"],
    );
    assert_exhausted(&e, "tool_rounds", "nine rounds under light + 50000 tokens");
    assert_eq!(e.usage["tool_rounds"], LIGHT_ROUNDS);
    assert_eq!(e.budget, light_with("max_tokens", 50_000));
    // A cap alone starts from the fallback budget (S4.2: 20 rounds, 100 calls).
    let e = run_with(&[], &scenario(1, 1, 0), &["--max-tool-calls", "7"]);
    assert_completed(&e, "--max-tool-calls 7 alone");
    assert_eq!(
        e.budget,
        json!({"max_tool_rounds": 20, "max_tool_calls": 7})
    );
}

/// The config file's `[budget]` combines with the flags: a cap replaces its
/// one field, `--budget` replaces the section as a whole.
#[test]
fn the_config_budget_combines_with_the_flags() {
    let dir = tempfile::tempdir().expect("dir");
    let config = dir.path().join("agentrt.toml");
    std::fs::write(
        &config,
        "[budget]\npreset = \"light\"\nmax_tokens = 90000\n",
    )
    .expect("write");
    let config = config.to_str().expect("utf8");
    let e = run_with(
        &["--config", config],
        &scenario(3, 1, 0),
        &["--max-tool-rounds", "2"],
    );
    assert_exhausted(&e, "tool_rounds", "config light + --max-tool-rounds 2");
    let mut expected = light_with("max_tool_rounds", 2);
    expected["max_tokens"] = json!(90_000);
    assert_eq!(e.budget, expected);
    let e = run_with(
        &["--config", config],
        &scenario(1, 1, 0),
        &["--budget", "standard"],
    );
    assert_completed(&e, "config light, --budget standard");
    assert_eq!(
        e.budget,
        json!({"max_tool_rounds": 16, "max_tool_calls": 75, "max_duration_ms": 25 * 60 * 1000})
    );
}

/// The flags' own bounds (S4.4) are the kernel's: at the bound a run
/// starts, above it or at zero the command is a usage error (exit 2, one
/// line naming the field) and no run is stored.
#[test]
fn budget_flags_are_checked_at_their_bounds() {
    use agent_kernel::budget::{MAX_DURATION_MS, MAX_TOKENS, MAX_TOOL_CALLS, MAX_TOOL_ROUNDS};
    let one_round = scenario(1, 1, 0);
    for (flag, max) in [
        ("--max-tool-rounds", MAX_TOOL_ROUNDS),
        ("--max-tool-calls", MAX_TOOL_CALLS),
        ("--max-tokens", MAX_TOKENS),
        ("--max-duration-ms", MAX_DURATION_MS),
    ] {
        let e = run_with(
            &[],
            &one_round,
            &["--budget", "light", flag, &max.to_string()],
        );
        assert_completed(&e, &format!("{flag} {max}"));
        for bad in [max + 1, 0] {
            let dir = tempfile::tempdir().expect("dir");
            let path = dir.path().join("s.json");
            std::fs::write(&path, &one_round).expect("write");
            let data = dir.path().join("data");
            let out = agentrt(
                &data,
                &[
                    "run",
                    "go",
                    "--scenario",
                    path.to_str().expect("utf8"),
                    "--budget",
                    "light",
                    flag,
                    &bad.to_string(),
                ],
            );
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{flag} {bad}: {err}");
            assert_eq!(err.lines().count(), 1, "{flag} {bad}: {err}");
            assert!(
                err.contains(flag.trim_start_matches("--").replace('-', "_").as_str()),
                "{flag} {bad}: {err}"
            );
            let runs = agentrt(&data, &["--json", "runs"]);
            assert_eq!(text(&runs.stdout), "", "{flag} {bad}: no run is stored");
        }
    }
}
