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
