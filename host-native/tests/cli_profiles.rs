//! `agentrt profile …` and `agentrt run --profile` (S10), as separate
//! processes over one data directory: save (a new profile, then a second
//! revision), list, show, diff, rollback, fork, export without the
//! credentials' marker, import under another id; a run under a profile
//! that allows only reads has its write refused before it runs, and a bad
//! profile file is one clear line with exit 2.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");

fn agentrt(data: &Path, args: &[&str]) -> Output {
    std::fs::set_permissions(data, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod data dir");
    Command::new(BIN)
        .args(args)
        .env("AGENTRT_DATA_DIR", data)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run agentrt")
}

fn ok_json(out: &Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stdout));
    })
}

const MARKER: &str = "MARKER-7f3a-handle";

fn profile(budget_calls: u32) -> Value {
    json!({
        "id": "reader",
        "name": "Reader",
        "mode": "agent",
        "model": {"model": "default"},
        "reasoning": {},
        "search": {"web_search": false},
        "approval": "strict",
        "budget": {"max_tool_rounds": 5, "max_tool_calls": budget_calls},
        "tools": ["workspace_read", "workspace_list"],
        "memory": {"read": [], "write": []},
        "credentials": {"handles": {"openai": MARKER}},
    })
}

#[test]
fn profiles_on_the_command_line_and_a_run_under_one() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path();
    let file = dir.join("reader.json");
    std::fs::write(&file, profile(10).to_string()).unwrap();
    let saved = ok_json(&agentrt(
        dir,
        &["--json", "profile", "save", file.to_str().unwrap()],
    ));
    assert_eq!(saved["revision"], 1);
    std::fs::write(&file, profile(20).to_string()).unwrap();
    let saved = ok_json(&agentrt(
        dir,
        &["--json", "profile", "save", file.to_str().unwrap()],
    ));
    assert_eq!(saved["revision"], 2);

    let list = ok_json(&agentrt(dir, &["--json", "profile", "list"]));
    assert_eq!(list["profiles"][0]["id"], "reader");
    assert_eq!(list["profiles"][0]["latest"], 2);
    let diff = ok_json(&agentrt(
        dir,
        &["--json", "profile", "diff", "reader", "1", "2"],
    ));
    assert_eq!(diff["changes"][0]["path"], "budget.max_tool_calls");
    assert_eq!(diff["changes"][0]["before"], 10);
    assert_eq!(diff["changes"][0]["after"], 20);
    let rolled = ok_json(&agentrt(
        dir,
        &["--json", "profile", "rollback", "reader", "1"],
    ));
    assert_eq!(rolled["revision"], 3);
    let shown = ok_json(&agentrt(dir, &["--json", "profile", "show", "reader"]));
    assert_eq!(shown["profile"]["budget"]["max_tool_calls"], 10);
    let forked = ok_json(&agentrt(
        dir,
        &["--json", "profile", "fork", "reader", "reader-2"],
    ));
    assert_eq!(forked["forked_from"], "reader");

    // S10.3: the export carries no credential.
    let export = agentrt(dir, &["profile", "export", "reader"]);
    assert_eq!(export.status.code(), Some(0));
    assert!(
        !export
            .stdout
            .windows(MARKER.len())
            .any(|w| w == MARKER.as_bytes()),
        "the export must not contain the credential handle"
    );
    let exported = dir.join("export.json");
    std::fs::write(&exported, &export.stdout).unwrap();
    let imported = ok_json(&agentrt(
        dir,
        &[
            "--json",
            "profile",
            "import",
            exported.to_str().unwrap(),
            "--as",
            "shared",
        ],
    ));
    assert_eq!(imported["profile"], "shared");

    // A bad profile: one clear line, exit 2.
    std::fs::write(&file, r#"{"id": "x"}"#).unwrap();
    let bad = agentrt(dir, &["profile", "save", file.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    // S10.2: a run under the reader profile cannot write.
    let scenario = dir.join("write.json");
    std::fs::write(
        &scenario,
        json!({"turns": [
            {"tool_calls": [{"name": "workspace_write", "arguments": {"path": "x.txt", "content": "no"}}]},
            {"text": "done"}]})
        .to_string(),
    )
    .unwrap();
    let run = agentrt(
        dir,
        &[
            "run",
            "Write x.",
            "--scenario",
            scenario.to_str().unwrap(),
            "--profile",
            "reader",
            "--session",
            "s1",
        ],
    );
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let files = agentrt(dir, &["--json", "session", "files", "s1"]);
    assert!(
        !String::from_utf8_lossy(&files.stdout).contains("x.txt"),
        "the write was refused: {}",
        String::from_utf8_lossy(&files.stdout)
    );
    let unknown = agentrt(
        dir,
        &[
            "run",
            "Hi.",
            "--scenario",
            scenario.to_str().unwrap(),
            "--profile",
            "nope",
        ],
    );
    assert_eq!(unknown.status.code(), Some(2));
}

/// A profile allowing JavaScript, workspace writes and global Memory.
fn wide_profile() -> Value {
    json!({
        "id": "wide",
        "name": "Wide",
        "mode": "agent",
        "model": {"model": "default"},
        "reasoning": {},
        "search": {"web_search": false},
        "approval": "permissive",
        "budget": {"max_tool_rounds": 5, "max_tool_calls": 4},
        "tools": ["run_javascript", "workspace_write", "workspace_read"],
        "memory": {"read": ["global", "session"], "write": ["global"]},
    })
}

#[test]
fn the_configurations_ceiling_narrows_imports_and_profile_runs() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path();
    let config = dir.join("agentrt.toml");
    std::fs::write(
        &config,
        "[ceiling]\ntools = [\"workspace_read\", \"workspace_list\"]\nmemory = { read = [\"session\"], write = [\"session\"] }\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let file = dir.join("wide.json");
    std::fs::write(&file, wide_profile().to_string()).unwrap();
    // Saved without the ceiling, then exported.
    ok_json(&agentrt(
        dir,
        &["--json", "profile", "save", file.to_str().unwrap()],
    ));
    let export = agentrt(dir, &["profile", "export", "wide"]);
    assert_eq!(export.status.code(), Some(0));
    let exported = dir.join("wide.export.json");
    std::fs::write(&exported, &export.stdout).unwrap();
    // S10.3: an import keeps at most the host's ceiling.
    let imported = ok_json(&agentrt(
        dir,
        &[
            "--json",
            "--config",
            config,
            "profile",
            "import",
            exported.to_str().unwrap(),
            "--as",
            "imported",
        ],
    ));
    assert_eq!(imported["profile"], "imported");
    let shown = ok_json(&agentrt(dir, &["--json", "profile", "show", "imported"]));
    assert_eq!(shown["profile"]["tools"], json!(["workspace_read"]));
    assert_eq!(shown["profile"]["memory"]["read"], json!(["session"]));
    assert_eq!(shown["profile"]["memory"]["write"], json!([]));

    // S10.2: the profile saved without the ceiling still runs under it.
    let scenario = dir.join("write.json");
    std::fs::write(
        &scenario,
        json!({"turns": [
            {"tool_calls": [{"name": "workspace_write", "arguments": {"path": "x.txt", "content": "no"}}]},
            {"text": "done"}]})
        .to_string(),
    )
    .unwrap();
    let run = agentrt(
        dir,
        &[
            "--config",
            config,
            "run",
            "Write x.",
            "--scenario",
            scenario.to_str().unwrap(),
            "--profile",
            "wide",
            "--session",
            "s1",
        ],
    );
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // The narrowing is said, not silent.
    let said = String::from_utf8_lossy(&run.stdout);
    assert!(said.contains("tools was narrowed"), "{said}");
    let files = agentrt(dir, &["--json", "session", "files", "s1"]);
    assert!(
        !String::from_utf8_lossy(&files.stdout).contains("x.txt"),
        "the write was refused: {}",
        String::from_utf8_lossy(&files.stdout)
    );
}

/// The stored budget of the run of `session` (the only one there).
fn budget_of_run(dir: &Path, session: &str) -> Value {
    let runs = agentrt(dir, &["--json", "runs"]);
    let stdout = String::from_utf8_lossy(&runs.stdout);
    let run = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["session"] == session)
        .unwrap_or_else(|| panic!("no run in {session}: {stdout}"));
    let shown = agentrt(dir, &["--json", "show", run["run"].as_str().unwrap()]);
    let card: Value = serde_json::from_slice(&shown.stdout).unwrap();
    card["budget"].clone()
}

#[test]
fn s10_2_run_flags_under_a_profile_narrow_or_are_refused_with_a_line() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path();
    let file = dir.join("reader.json");
    // The profile allows 4 tool calls and strict approval.
    std::fs::write(&file, profile(4).to_string()).unwrap();
    ok_json(&agentrt(
        dir,
        &["--json", "profile", "save", file.to_str().unwrap()],
    ));
    let scenario = dir.join("hello.json");
    std::fs::write(&scenario, json!({"turns": [{"text": "hello"}]}).to_string()).unwrap();
    let run = |session: &str, flags: &[&str]| {
        let mut args = vec![
            "run",
            "Hi.",
            "--scenario",
            scenario.to_str().unwrap(),
            "--profile",
            "reader",
            "--session",
            session,
        ];
        args.extend_from_slice(flags);
        let out = agentrt(dir, &args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // Narrower: applied, and stored with the run.
    let said = run("narrow", &["--max-tool-calls", "2"]);
    assert!(!said.contains("refused"), "{said}");
    assert_eq!(budget_of_run(dir, "narrow")["max_tool_calls"], 2);
    // Wider: refused with a line; the profile's value stays.
    let said = run(
        "wide",
        &["--max-tool-calls", "40", "--approval", "permissive"],
    );
    assert!(
        said.contains("budget.max_tool_calls asked 40") && said.contains("refused, kept 4"),
        "{said}"
    );
    assert!(said.contains("the flag for approval"), "{said}");
    assert_eq!(budget_of_run(dir, "wide")["max_tool_calls"], 4);
    // No flag: the profile's budget.
    run("plain", &[]);
    assert_eq!(budget_of_run(dir, "plain")["max_tool_calls"], 4);

    // What the run does, not only what it stores: a model that asks for
    // three calls in turn runs out of the narrowed budget at the third,
    // and completes under the profile's four.
    let three_calls = dir.join("three_calls.json");
    let mut turns: Vec<Value> = (0..3)
        .map(|i| {
            json!({"text": format!("call {i}"),
                   "tool_calls": [{"name": "workspace_list", "arguments": {}}]})
        })
        .collect();
    turns.push(json!({"text": "All done."}));
    std::fs::write(&three_calls, json!({ "turns": turns }).to_string()).unwrap();
    let settled = |session: &str, flags: &[&str]| -> Value {
        let mut args = vec![
            "--json",
            "run",
            "List.",
            "--scenario",
            three_calls.to_str().unwrap(),
            "--profile",
            "reader",
            "--session",
            session,
        ];
        args.extend_from_slice(flags);
        let out = agentrt(dir, &args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .rfind(|e| e["event"] == "settled")
            .unwrap_or_else(|| panic!("no settled run in: {stdout}"))
    };
    let narrowed = settled("narrow-calls", &["--max-tool-calls", "2"]);
    assert_eq!(
        narrowed["stop_reason"]["reason"], "budget_exhausted",
        "{narrowed}"
    );
    assert_eq!(
        narrowed["stop_reason"]["dimension"], "tool_calls",
        "{narrowed}"
    );
    let whole = settled("profile-calls", &[]);
    assert_eq!(whole["status"], "completed", "{whole}");
}
