//! `agentrt` with `--store postgres://…`, `AGENTRT_STORE` and `[store] url`
//! against a real PostgreSQL server on loopback (S14.1): a run started by
//! one process in one data directory is seen, approved and completed by
//! other processes in other data directories through the shared database,
//! and never lands in SQLite; a store address agentrt does not know is one
//! clear line and the usage exit code.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use agent_store_postgres::test_cluster::PgCluster;

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");

fn private_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod data dir");
    dir
}

fn agentrt(data: &Path, store_env: Option<&str>, args: &[&str]) -> Output {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .env("AGENTRT_DATA_DIR", data)
        .env_remove("AGENTRT_STORE")
        .env_remove("RUST_LOG")
        .env_remove("AGENTRT_TEST_PAUSE")
        .stdin(Stdio::null());
    if let Some(url) = store_env {
        command.env("AGENTRT_STORE", url);
    }
    command.output().expect("run agentrt")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn show(data: &Path, store_env: Option<&str>, args: &[&str]) -> serde_json::Value {
    let out = agentrt(data, store_env, args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

#[test]
fn s14_a_run_started_in_one_process_is_approved_and_completed_by_others_through_postgres() {
    let cluster = PgCluster::shared().expect("a PostgreSQL server");
    let database = cluster.create_database().expect("database");
    let url = database.url();
    let (first, second, third) = (private_dir(), private_dir(), private_dir());

    // `--store`: the demo waits for approval.
    let out = agentrt(first.path(), None, &["--store", &url, "demo"]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(3),
        "awaiting approval: {stdout}\n{}",
        text(&out.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.contains("agentrt approve "))
        .expect("prints the approve command");
    let words: Vec<&str> = line[line.find("agentrt approve ").expect("command")..]
        .split_whitespace()
        .collect();
    let (run, request) = (words[2], words[3]);
    assert!(
        !first.path().join("agentrt.sqlite3").exists(),
        "nothing went to SQLite"
    );

    // Another process in another data directory sees it through `AGENTRT_STORE`.
    let card = show(second.path(), Some(&url), &["show", run, "--json"]);
    assert_eq!(card["status"], "awaiting_approval");
    // Without the store it is not there: it lives in PostgreSQL only.
    let out = agentrt(second.path(), None, &["show", run, "--json"]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out.stdout));

    // A third, configured with `[store] url`, approves it; the run completes.
    let config = third.path().join("agentrt.toml");
    std::fs::write(&config, format!("[store]\nurl = \"{url}\"\n")).expect("config");
    let config = config.display().to_string();
    let out = agentrt(
        third.path(),
        None,
        &["--config", &config, "approve", run, request],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let card = show(
        first.path(),
        None,
        &["--store", &url, "show", run, "--json"],
    );
    assert_eq!(card["status"], "completed");
    assert_eq!(card["stop_reason"]["reason"], "completed");
}

#[test]
fn an_unknown_store_address_is_one_clear_line_and_a_usage_error() {
    let data = private_dir();
    for store in ["mysql://root@127.0.0.1/agentrt", "sqlite:///tmp/x.db"] {
        let out = agentrt(data.path(), None, &["--store", store, "runs"]);
        assert_eq!(out.status.code(), Some(2), "{store}: {}", text(&out.stderr));
        let err = text(&out.stderr);
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{store}: {err}");
        assert!(lines[0].starts_with("agentrt: "), "{err}");
        assert!(lines[0].contains("postgres://"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
