//! The `agentrt` binary against issue 8's acceptance items: the demo's
//! approval round trip (S6.1, S6.4), `check url` / `check path` (S8.1,
//! S7.1), exit codes, bad input giving one clear line and a non-zero exit,
//! and two real processes racing for one session (S3.1).

use std::path::Path;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");

fn agentrt(data: &Path, args: &[&str]) -> Output {
    // A temporary directory is 0755 under umask 022: make it private, so
    // that stderr holds only what the test looks at (an open data
    // directory is warned about: tests/file_modes.rs).
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

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited normally")
}

/// Exactly one non-empty line on stderr, no panic, no backtrace.
fn assert_one_clear_line(out: &Output, what: &str) {
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "{what}: stderr should be one line, got {err:?}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("backtrace") && !err.contains("RUST_BACKTRACE"),
        "{what}: {err}"
    );
    assert!(lines[0].starts_with("agentrt: "), "{what}: {err}");
}

#[test]
fn demo_waits_for_approval_then_the_printed_command_completes_it() {
    let dir = tempfile::tempdir().expect("dir");
    let out = agentrt(dir.path(), &["demo"]);
    let stdout = text(&out.stdout);
    assert_eq!(
        code(&out),
        3,
        "awaiting approval: {stdout}\n{}",
        text(&out.stderr)
    );
    assert!(stdout.contains("awaiting_approval"), "{stdout}");
    // The card: status, usage against budget, activities, journal, the refusal.
    for needle in [
        "usage:",
        "tool rounds",
        "activities:",
        "journal:",
        "url_refused",
        "publish_artifact",
    ] {
        assert!(stdout.contains(needle), "card lacks {needle}: {stdout}");
    }
    let line = stdout
        .lines()
        .find(|l| l.contains("agentrt approve "))
        .expect("prints the approve command");
    let command = &line[line.find("agentrt approve ").expect("command")..];
    let words: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(words.len(), 4, "agentrt approve RUN REQUEST: {command}");
    let (run, request) = (words[2], words[3]);

    // `show` of a waiting run reports it waiting.
    let shown = agentrt(dir.path(), &["show", run, "--json"]);
    assert_eq!(code(&shown), 0);
    let card: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("json");
    assert_eq!(card["status"], "awaiting_approval");

    let approved = agentrt(dir.path(), &[words[1], run, request]);
    assert_eq!(
        code(&approved),
        0,
        "{}{}",
        text(&approved.stdout),
        text(&approved.stderr)
    );
    let shown = agentrt(dir.path(), &["show", run, "--json"]);
    assert_eq!(code(&shown), 0);
    let card: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("json");
    assert_eq!(card["status"], "completed");
    assert_eq!(card["stop_reason"]["reason"], "completed");
    let journal = card["journal"].as_array().expect("journal");
    assert!(
        journal
            .iter()
            .any(|j| j["tool"] == "fetch_url" && j["state"] == "failed")
    );
    assert!(
        journal
            .iter()
            .any(|j| j["tool"] == "workspace_empty_trash" && j["state"] == "committed")
    );

    // Approving again: the request is gone — a usage error, one line.
    let again = agentrt(dir.path(), &["approve", run, request]);
    assert_eq!(code(&again), 2);
    assert_one_clear_line(&again, "approve twice");

    let runs = agentrt(dir.path(), &["runs"]);
    assert_eq!(code(&runs), 0);
    assert!(text(&runs.stdout).contains(run));
}

#[test]
fn demo_deny_continues_without_the_destructive_step() {
    let dir = tempfile::tempdir().expect("dir");
    let out = agentrt(dir.path(), &["demo"]);
    assert_eq!(code(&out), 3);
    let stdout = text(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains("agentrt deny "))
        .expect("deny command");
    let words: Vec<&str> = line[line.find("agentrt deny ").expect("cmd")..]
        .split_whitespace()
        .collect();
    let denied = agentrt(dir.path(), &["deny", words[2], words[3]]);
    assert_eq!(code(&denied), 0, "{}", text(&denied.stderr));
    let shown = agentrt(dir.path(), &["--json", "show", words[2]]);
    let card: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("json");
    let journal = card["journal"].as_array().expect("journal");
    assert!(
        !journal
            .iter()
            .any(|j| j["tool"] == "workspace_empty_trash" && j["state"] == "committed"),
        "denied step never ran: {journal:?}"
    );
}

#[test]
fn s8_1_check_url_exit_codes() {
    let dir = tempfile::tempdir().expect("dir");
    for (url, expected) in [
        ("http://127.0.0.1/", 3),
        ("http://10.0.0.1/", 3),
        ("http://[::1]/", 3),
        ("file:///etc/passwd", 3),
        ("http://user:pw@93.184.216.34/", 3),
        ("not a url", 3),
        ("http://93.184.216.34/", 0),
        ("https://93.184.216.34/path?q=1", 0),
    ] {
        let out = agentrt(dir.path(), &["check", "url", url]);
        assert_eq!(code(&out), expected, "{url}: {}", text(&out.stdout));
        let stdout = text(&out.stdout);
        assert!(
            stdout.starts_with(if expected == 0 {
                "allowed: "
            } else {
                "refused: "
            }),
            "{url}: {stdout}"
        );
    }
    let out = agentrt(dir.path(), &["check", "url", "http://127.0.0.1/", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["allowed"], false);
    assert!(v["reason"].as_str().is_some_and(|r| !r.is_empty()));
}

#[test]
fn s7_1_check_path_exit_codes() {
    let dir = tempfile::tempdir().expect("dir");
    for (path, expected) in [
        ("../x", 3),
        ("/etc/passwd", 3),
        ("a/../../b", 3),
        ("a\u{7}b", 3),
        ("", 3),
        ("notes/a.md", 0),
        ("deep/er/file.txt", 0),
    ] {
        let out = agentrt(dir.path(), &["check", "path", path]);
        assert_eq!(code(&out), expected, "{path:?}: {}", text(&out.stdout));
    }
    let out = agentrt(dir.path(), &["check", "path", "notes/a.md", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["allowed"], true);
}

#[test]
fn scenario_run_completes_with_exit_0_and_json_events() {
    let dir = tempfile::tempdir().expect("dir");
    let scenario = dir.path().join("s.json");
    std::fs::write(
        &scenario,
        r#"{"turns": [
            {"text": "writing", "tool_calls": [{"name": "workspace_write", "arguments": {"path": "a.txt", "content": "hi"}}]},
            {"text": "done"}]}"#,
    )
    .expect("write");
    let data = dir.path().join("data");
    let out = agentrt(
        &data,
        &[
            "--json",
            "run",
            "hello",
            "--scenario",
            scenario.to_str().expect("utf8"),
            "--budget",
            "light",
        ],
    );
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect();
    assert!(events.iter().any(|e| e["event"] == "activity"));
    // The settled event, then the answer as the last event (issue 14 item 4).
    let [.., last, answer] = events.as_slice() else {
        panic!("events: {events:?}");
    };
    assert_eq!(last["event"], "settled");
    assert_eq!(last["status"], "completed");
    assert_eq!(answer["event"], "answer");
    assert_eq!(answer["text"], "done");
}

/// S5.6: `run --skill FILE` applies a Skill: a tool outside it is refused
/// and never runs; without the Skill the same scenario writes.
#[test]
fn run_with_a_skill_may_use_only_the_tools_it_allows() {
    let dir = tempfile::tempdir().expect("dir");
    let scenario = dir.path().join("s.json");
    std::fs::write(
        &scenario,
        r#"{"turns": [
            {"text": "writing", "tool_calls": [{"name": "workspace_write", "arguments": {"path": "a.txt", "content": "hi"}}]},
            {"text": "done"}]}"#,
    )
    .expect("write");
    let skill = dir.path().join("reader.json");
    std::fs::write(
        &skill,
        r#"{"name": "reader", "description": "reads files", "instructions": "Only read.", "allowed_tools": ["workspace_read"]}"#,
    )
    .expect("write");
    let data = dir.path().join("data");
    let scenario_s = scenario.to_str().expect("utf8");
    let journal_tools = |extra: &[&str]| {
        let mut args = vec!["--json", "run", "hello", "--scenario", scenario_s];
        args.extend_from_slice(extra);
        let out = agentrt(&data, &args);
        assert_eq!(code(&out), 0, "{}", text(&out.stderr));
        let stdout = text(&out.stdout);
        // The settled event comes just before the answer, the last event.
        let settled: serde_json::Value =
            serde_json::from_str(stdout.lines().nth_back(1).expect("events")).expect("json");
        assert_eq!(settled["status"], "completed");
        let run = settled["run"].as_str().expect("run id").to_owned();
        let show = agentrt(&data, &["show", &run, "--json"]);
        let shown: serde_json::Value = serde_json::from_slice(&show.stdout).expect("json");
        shown["journal"]
            .as_array()
            .expect("journal")
            .iter()
            .map(|r| {
                format!(
                    "{} {}",
                    r["tool"].as_str().unwrap_or(""),
                    r["state"].as_str().unwrap_or("")
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        journal_tools(&["--skill", skill.to_str().expect("utf8")]),
        Vec::<String>::new(),
        "the write outside the Skill never ran"
    );
    assert_eq!(journal_tools(&[]), ["workspace_write committed"]);
}

#[test]
fn bad_input_gives_one_clear_line_and_a_non_zero_exit() {
    let dir = tempfile::tempdir().expect("dir");
    let data = dir.path().join("data");
    let bad_scenario = dir.path().join("bad.json");
    std::fs::write(&bad_scenario, "{\"turns\": [}").expect("write");
    let empty_scenario = dir.path().join("empty.json");
    std::fs::write(&empty_scenario, "{\"turns\": []}").expect("write");
    let bad_config = dir.path().join("bad.toml");
    std::fs::write(&bad_config, "approval = \"yolo\"\n").expect("write");
    let a_file = dir.path().join("plain-file");
    std::fs::write(&a_file, "x").expect("write");
    let bad_s = bad_scenario.to_str().expect("utf8");
    let empty_s = empty_scenario.to_str().expect("utf8");
    let bad_c = bad_config.to_str().expect("utf8");
    let file_s = a_file.to_str().expect("utf8");
    let under_file = a_file.join("sub");
    let under_file_s = under_file.to_str().expect("utf8");
    // A data directory whose database cannot be opened: the database's
    // name is taken by a folder (unreadable as a file even for root, where
    // permission bits do not bite).
    let blocked = dir.path().join("blocked");
    std::fs::create_dir_all(blocked.join(agent_host_native::host::DATABASE_FILE)).expect("mkdir");
    let blocked_s = blocked.to_str().expect("utf8");
    let secret_skill = dir.path().join("secret-skill.json");
    std::fs::write(
        &secret_skill,
        r#"{"name": "s", "description": "d", "instructions": "use sk-abcdefghijklmnopqrstuvwxyz0123456789", "allowed_tools": []}"#,
    )
    .expect("write");
    let secret_skill_s = secret_skill.to_str().expect("utf8");
    let cases: Vec<(Vec<&str>, i32)> = vec![
        (vec!["show", "run-unknown"], 2),
        (vec!["show", "bad id!"], 2),
        (vec!["resume", "run-unknown"], 2),
        (vec!["approve", "run-unknown", "req-1"], 2),
        (vec!["deny", "run-unknown", "req-1"], 2),
        (vec!["respond", "run-unknown", "yes"], 2),
        (vec!["decide", "run-unknown", "call-1", "retry"], 2),
        (vec!["decide", "run-unknown", "call-1", "maybe"], 2),
        (vec!["stop", "run-unknown"], 2),
        (vec!["run", "x", "--scenario", bad_s], 2),
        (vec!["run", "x", "--scenario", empty_s], 2),
        (
            vec!["run", "x", "--scenario", "/nonexistent/scenario.json"],
            2,
        ),
        (vec!["run", "x"], 2),
        (
            vec!["run", "x", "--scenario", empty_s, "--budget", "huge"],
            2,
        ),
        (vec!["run", "x", "--approval", "sometimes"], 2),
        (vec!["run", "x", "--provider", "openai-compatible"], 2),
        (
            vec![
                "run",
                "x",
                "--provider",
                "openai-compatible",
                "--base-url",
                "ftp://x",
                "--model",
                "m",
            ],
            2,
        ),
        (
            vec!["run", "x", "--session", "bad session", "--scenario", bad_s],
            2,
        ),
        (vec!["--config", bad_c, "runs"], 2),
        (vec!["--config", "/nonexistent.toml", "runs"], 2),
        (vec!["--data-dir", file_s, "runs"], 2),
        (vec!["--data-dir", under_file_s, "demo"], 2),
        (vec!["--data-dir", blocked_s, "runs"], 2),
        (vec!["--data-dir", blocked_s, "--json", "runs"], 2),
        (vec!["--data-dir", blocked_s, "show", "run-1"], 2),
        (vec!["check", "path"], 2),
        (
            vec!["run", "x", "--scenario", empty_s, "--skill", secret_skill_s],
            2,
        ),
        (
            vec![
                "run",
                "x",
                "--scenario",
                empty_s,
                "--skill",
                "/nonexistent/skill.json",
            ],
            2,
        ),
        (vec!["run", "x", "--scenario", empty_s, "--skill", bad_s], 2),
        (vec!["check", "url", "--json"], 2),
        (vec!["runs", "--limit"], 2),
        (vec!["serve", "--port", "notaport"], 2),
        (vec!["check", "url"], 2),
        (vec!["frobnicate"], 2),
        (vec!["show"], 2),
    ];
    for (args, expected) in cases {
        let out = agentrt(&data, &args);
        assert_eq!(code(&out), expected, "{args:?}: {}", text(&out.stderr));
        assert_one_clear_line(&out, &format!("{args:?}"));
    }
}

#[test]
fn a_corrupt_database_is_one_clear_line_and_kept() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join(agent_host_native::host::DATABASE_FILE);
    std::fs::write(&db, b"garbage garbage garbage".repeat(100)).expect("write");
    let out = agentrt(dir.path(), &["runs"]);
    assert_eq!(code(&out), 2);
    assert_one_clear_line(&out, "corrupt db");
    assert!(text(&out.stderr).contains("move it aside"));
    assert_eq!(
        std::fs::read(&db).expect("read").len(),
        2300,
        "left untouched"
    );
}

/// S3.1: two real processes race for one session; exactly one executes.
#[test]
fn s3_1_two_processes_racing_for_one_session_exactly_one_executes() {
    let dir = tempfile::tempdir().expect("dir");
    let scenario = dir.path().join("slow.json");
    std::fs::write(
        &scenario,
        r#"{"turns": [{"text": "thinking slowly", "delay_ms": 1500}]}"#,
    )
    .expect("write");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    let scenario_s = scenario.to_str().expect("utf8");
    let spawn = || {
        Command::new(BIN)
            .args([
                "run",
                "go",
                "--scenario",
                scenario_s,
                "--session",
                "shared-session",
            ])
            .env("AGENTRT_DATA_DIR", &data)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn")
    };
    let a = spawn();
    let b = spawn();
    let a = a.wait_with_output().expect("a");
    let b = b.wait_with_output().expect("b");
    let mut codes = [code(&a), code(&b)];
    codes.sort_unstable();
    assert_eq!(
        codes,
        [0, 3],
        "one completes, the other is refused:\nA: {}\nB: {}",
        text(&a.stderr),
        text(&b.stderr)
    );
    let loser = if code(&a) == 3 { &a } else { &b };
    assert!(
        text(&loser.stderr).contains("being executed"),
        "{}",
        text(&loser.stderr)
    );
    let runs = agentrt(&data, &["--json", "runs"]);
    assert_eq!(
        text(&runs.stdout).lines().count(),
        1,
        "exactly one run executed"
    );
}

#[test]
fn a_question_waits_with_exit_3_and_respond_completes_it() {
    let dir = tempfile::tempdir().expect("dir");
    let scenario = dir.path().join("ask.json");
    std::fs::write(
        &scenario,
        r#"{"turns": [
            {"text": "one question", "tool_calls": [{"name": "ask_user", "arguments": {"question": "Which colour?"}}]},
            {"text": "thanks"}]}"#,
    )
    .expect("write");
    let data = dir.path().join("data");
    let out = agentrt(
        &data,
        &[
            "run",
            "ask me",
            "--scenario",
            scenario.to_str().expect("utf8"),
        ],
    );
    assert_eq!(code(&out), 3, "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("agentrt respond "), "{stdout}");
    let runs = agentrt(&data, &["--json", "runs"]);
    let v: serde_json::Value =
        serde_json::from_str(text(&runs.stdout).lines().next().expect("a run")).expect("json");
    let run = v["run"].as_str().expect("id").to_owned();
    assert_eq!(v["status"], "awaiting_input");
    let answered = agentrt(&data, &["respond", &run, "blue"]);
    assert_eq!(code(&answered), 0, "{}", text(&answered.stderr));
    let again = agentrt(&data, &["respond", &run, "blue"]);
    assert_eq!(code(&again), 2, "nothing left to answer");
    assert_one_clear_line(&again, "respond twice");
}

#[test]
fn respond_refuses_an_answer_outside_the_choices_and_the_run_keeps_waiting() {
    let dir = tempfile::tempdir().expect("dir");
    let scenario = dir.path().join("pick.json");
    std::fs::write(
        &scenario,
        r#"{"turns": [
            {"text": "pick one", "tool_calls": [{"name": "ask_user", "arguments": {"question": "Which colour?", "choices": ["red", "blue"]}}]},
            {"text": "thanks"}]}"#,
    )
    .expect("write");
    let data = dir.path().join("data");
    let out = agentrt(
        &data,
        &[
            "run",
            "ask me",
            "--scenario",
            scenario.to_str().expect("utf8"),
        ],
    );
    assert_eq!(code(&out), 3, "{}", text(&out.stderr));
    let shown = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(shown.contains("one of: red, blue"), "{shown}");
    let runs = agentrt(&data, &["--json", "runs"]);
    let v: serde_json::Value =
        serde_json::from_str(text(&runs.stdout).lines().next().expect("a run")).expect("json");
    let run = v["run"].as_str().expect("id").to_owned();
    let refused = agentrt(&data, &["respond", &run, "green"]);
    assert_eq!(code(&refused), 2, "a refused answer is a usage error");
    assert_one_clear_line(&refused, "respond outside the choices");
    assert!(
        text(&refused.stderr).contains("one of the offered choices: red, blue"),
        "{}",
        text(&refused.stderr)
    );
    let shown = agentrt(&data, &["--json", "show", &run]);
    let card: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("json");
    assert_eq!(card["status"], "awaiting_input", "still waiting: {card}");
    let answered = agentrt(&data, &["respond", &run, "blue"]);
    assert_eq!(code(&answered), 0, "{}", text(&answered.stderr));
    let shown = agentrt(&data, &["--json", "show", &run]);
    let card: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("json");
    assert_eq!(card["status"], "completed", "{card}");
}

#[test]
fn stop_cancels_a_waiting_run_with_exit_4() {
    let dir = tempfile::tempdir().expect("dir");
    let out = agentrt(dir.path(), &["demo"]);
    assert_eq!(code(&out), 3);
    let runs = agentrt(dir.path(), &["--json", "runs"]);
    let v: serde_json::Value =
        serde_json::from_str(text(&runs.stdout).lines().next().expect("a run")).expect("json");
    let run = v["run"].as_str().expect("id").to_owned();
    let stopped = agentrt(dir.path(), &["stop", &run]);
    assert_eq!(code(&stopped), 4, "cancelled: {}", text(&stopped.stderr));
    let shown = agentrt(dir.path(), &["--json", "show", &run]);
    let card: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("json");
    assert_eq!(card["status"], "cancelled");
    assert_eq!(card["stop_reason"]["reason"], "user_stopped");
    // A final run cannot be resumed: a usage error.
    let resumed = agentrt(dir.path(), &["resume", &run]);
    assert_eq!(code(&resumed), 2);
    assert_one_clear_line(&resumed, "resume a cancelled run");
}

#[test]
fn serve_listens_on_loopback_and_refuses_a_busy_port() {
    let dir = tempfile::tempdir().expect("dir");
    let mut child = Command::new(BIN)
        .args(["--json", "serve", "--port", "0"])
        .env("AGENTRT_DATA_DIR", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).expect("line");
    let v: serde_json::Value = serde_json::from_str(&line).expect("json");
    let url = v["url"].as_str().expect("url").to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert_eq!(v["token"].as_str().map(str::len), Some(64));
    let port = url.rsplit(':').next().expect("port");
    let busy = agentrt(dir.path(), &["serve", "--port", port]);
    assert_eq!(code(&busy), 2);
    assert_one_clear_line(&busy, "busy port");
    child.kill().expect("kill");
    let _ = child.wait();
}
