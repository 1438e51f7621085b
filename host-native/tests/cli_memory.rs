//! `agentrt memory …` and `agentrt kb …` (S10.1), as separate processes
//! over one data directory: a memory saved, edited (a stale revision is
//! refused), deleted and restored; a run under a profile with the session
//! scope finds it through `memory_search`; a knowledge base built from
//! files answers a search with provenance; bad input is one clear line.

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
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn memories_and_knowledge_bases_on_the_command_line() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path();
    let saved = ok_json(&agentrt(
        dir,
        &[
            "--json",
            "memory",
            "save",
            "session:s1",
            "tea",
            "The person drinks green tea.",
        ],
    ));
    assert_eq!(saved["revision"], 1);
    let stale = agentrt(
        dir,
        &["memory", "edit", "session:s1", "tea", "7", "Coffee."],
    );
    assert_eq!(stale.status.code(), Some(2));
    let err = String::from_utf8_lossy(&stale.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let edited = ok_json(&agentrt(
        dir,
        &[
            "--json",
            "memory",
            "edit",
            "session:s1",
            "tea",
            "1",
            "The person drinks green tea, no sugar.",
        ],
    ));
    assert_eq!(edited["revision"], 2);
    ok_json(&agentrt(
        dir,
        &["--json", "memory", "delete", "session:s1", "tea", "2"],
    ));
    let listed = ok_json(&agentrt(dir, &["--json", "memory", "list", "session:s1"]));
    assert_eq!(listed["memories"], json!([]));
    let restored = ok_json(&agentrt(
        dir,
        &["--json", "memory", "restore", "session:s1", "tea"],
    ));
    assert_eq!(restored["revision"], 3);
    let bad = agentrt(dir, &["memory", "list", "nowhere:x"]);
    assert_eq!(bad.status.code(), Some(2));

    // A run under a profile with the session scope finds the memory.
    let profile = dir.join("p.json");
    std::fs::write(
        &profile,
        json!({"id": "keeper", "name": "Keeper", "memory": {"read": ["session"], "write": ["session"]}}).to_string(),
    )
    .unwrap();
    ok_json(&agentrt(
        dir,
        &["--json", "profile", "save", profile.to_str().unwrap()],
    ));
    let scenario = dir.join("recall.json");
    std::fs::write(
        &scenario,
        json!({"turns": [
            {"tool_calls": [{"name": "memory_search", "arguments": {"query": "tea"}}]},
            {"text": "Found it."}]})
        .to_string(),
    )
    .unwrap();
    let run = agentrt(
        dir,
        &[
            "--json",
            "run",
            "What do I drink?",
            "--scenario",
            scenario.to_str().unwrap(),
            "--profile",
            "keeper",
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
    // The run's id, from its JSON lines.
    let id = String::from_utf8_lossy(&run.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|v| {
            v["run"]
                .as_str()
                .map(str::to_owned)
                .or_else(|| v["run"]["id"].as_str().map(str::to_owned))
        })
        .expect("a run id");
    let shown = agentrt(dir, &["--json", "show", &id]);
    let shown: Value = serde_json::from_slice(&shown.stdout).expect("the run card");
    let evidence = &shown["evidence"][0];
    assert_eq!(evidence["tool"], "memory_search");
    // The person's own memory comes back as `user` text (a model-saved one
    // would be untrusted): the search found the restored memory.
    assert_eq!(evidence["trust"], "user", "{shown}");

    // Knowledge: files in, ranked passages with provenance out.
    let a = dir.join("cells.txt");
    let b = dir.join("plants.txt");
    std::fs::write(
        &a,
        "Solid-state cells reach a density of 500 Wh/kg in the lab.",
    )
    .unwrap();
    std::fs::write(&b, "The first factory opens in 2027 near the river.").unwrap();
    let added = ok_json(&agentrt(
        dir,
        &[
            "--json",
            "kb",
            "add",
            "docs",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
        ],
    ));
    assert_eq!(added["added"], 2);
    let found = ok_json(&agentrt(
        dir,
        &["--json", "kb", "search", "docs", "density of cells"],
    ));
    let first = &found["passages"][0];
    assert!(first.to_string().contains("500 Wh/kg"), "{found}");
    assert!(
        first.to_string().contains("cells.txt"),
        "provenance names the document: {found}"
    );
    let list = ok_json(&agentrt(dir, &["--json", "kb", "list"]));
    assert_eq!(list["bases"], json!(["docs"]));
}
