//! The live follow of `agentrt run --json` (S1.1, S1.4): the activity
//! events it prints are the run's activities in order, each once, without
//! a gap, through the one that settled the run — although a commit's
//! activities are announced after the commit is durable, so the record the
//! follow reads may be ahead of the live stream (the follow then prints the
//! stored activities after the last one shown).

use std::path::Path;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");

fn agentrt(data: &Path, args: &[&str]) -> Output {
    std::fs::create_dir_all(data).expect("data dir");
    std::fs::set_permissions(data, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod data dir");
    Command::new(BIN)
        .args(args)
        .env("AGENTRT_DATA_DIR", data)
        .env_remove("RUST_LOG")
        .env_remove("AGENTRT_TEST_PAUSE")
        .stdin(Stdio::null())
        .output()
        .expect("run agentrt")
}

#[test]
fn run_json_prints_every_activity_once_in_order_through_the_settling_one() {
    let dir = tempfile::tempdir().expect("dir");
    let scenario = dir.path().join("s.json");
    std::fs::write(
        &scenario,
        r#"{"turns": [
            {"text": "writing", "tool_calls": [{"name": "workspace_write", "arguments": {"path": "a.txt", "content": "hi"}}]},
            {"text": "reading", "tool_calls": [{"name": "workspace_read", "arguments": {"path": "a.txt"}}]},
            {"text": "done"}]}"#,
    )
    .expect("write");
    let data = dir.path().join("data");
    let scenario = scenario.to_str().expect("utf8");
    let out = agentrt(&data, &["--json", "run", "hello", "--scenario", scenario]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect();
    let settled = events
        .iter()
        .find(|e| e["event"] == "settled")
        .expect("a settled event");
    assert_eq!(settled["status"], "completed", "{settled}");
    let run = settled["run"].as_str().expect("run id");
    let activities: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["event"] == "activity" && e["activity"]["run"] == run)
        .map(|e| &e["activity"])
        .collect();
    let seqs: Vec<u64> = activities
        .iter()
        .map(|a| a["seq"].as_u64().expect("seq"))
        .collect();
    assert!(seqs.len() > 5, "{seqs:?}");
    for pair in seqs.windows(2) {
        assert_eq!(
            pair[1],
            pair[0] + 1,
            "each activity once, in order: {seqs:?}"
        );
    }
    let last = activities.last().expect("activities");
    assert_eq!(last["kind"]["kind"], "status_changed", "{last}");
    assert_eq!(last["kind"]["to"], "completed", "{last}");
    // Nothing of the run is printed after it settled but its answer.
    let settled_at = events
        .iter()
        .position(|e| e["event"] == "settled")
        .expect("settled");
    assert!(
        events[settled_at + 1..]
            .iter()
            .all(|e| e["event"] == "answer"),
        "{events:?}"
    );
}
