//! HTTP plugins end to end through the real `agentrt` process, SQLite on
//! disk and a recording server on loopback started here (issue 4; S5.3,
//! S2.3):
//!
//! - a secret marker reaches the server in its header and nowhere else: not
//!   in any byte of the data directory (database, WAL, blobs, transcript),
//!   not in the trace-level log, not in the JSON events or the run card;
//! - an idempotent write whose answer never came is retried only by the
//!   person's decision, and both attempts carry the same `Idempotency-Key`:
//!   the one `agent_kernel::journal::idempotency_key` derives for the call.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");
const MARKER: &str = "SECRET-MARKER-7f3a9c21e5";
const TOKEN_ENV: &str = "AGENTRT_TEST_TICKETS_TOKEN";

/// What the server saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    api_key: Option<String>,
    idempotency_key: Option<String>,
}

/// A loopback server recording `POST /tickets`; the first `hold_first`
/// requests get their answer only after `hold` (past the plugin's timeout).
struct Recorder {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

fn start_recorder(hold_first: u64, hold: Duration) -> Recorder {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let count = Arc::new(AtomicU64::new(0));
    let s = seen.clone();
    let app = axum::Router::new().route(
        "/tickets",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let (s, count) = (s.clone(), count.clone());
            async move {
                let header = |name: &str| {
                    headers
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned)
                };
                s.lock().expect("seen").push(Seen {
                    api_key: header("x-api-key"),
                    idempotency_key: header("idempotency-key"),
                });
                let n = count.fetch_add(1, Ordering::SeqCst) + 1;
                if n <= hold_first {
                    tokio::time::sleep(hold).await;
                }
                axum::Json(serde_json::json!({"ticket": n}))
            }
        }),
    );
    Recorder {
        port: common::serve_on_loopback(app),
        seen,
    }
}

/// Config: a secret handle bound to the recorder's origin, and a trusted
/// plugin whose one function writes a ticket with the given idempotency.
fn setup(dir: &Path, port: u16, idempotency: &str, timeout_ms: u64) {
    // The fingerprint the person approved: the same plugin as the TOML below.
    let manifest: agent_tools::PluginManifest = serde_json::from_value(serde_json::json!({
        "id": "tickets",
        "base_url": format!("http://127.0.0.1:{port}"),
        "auth": {"header": "X-Api-Key", "secret": "tickets_token"},
        "functions": [{
            "name": "file_ticket",
            "description": "File a ticket.",
            "method": "POST",
            "path": "/tickets",
            "parameters": {"type": "object", "properties": {"title": {"type": "string"}},
                           "required": ["title"], "additionalProperties": false},
            "effects": ["write_external"],
            "idempotency": idempotency
        }]
    }))
    .expect("manifest");
    let fingerprint = manifest.fingerprint().expect("fingerprint");
    let config = format!(
        r#"approval = "permissive"

[secrets.tickets_token]
env = "{TOKEN_ENV}"
origin = "http://127.0.0.1:{port}"

[[plugins]]
id = "tickets"
base_url = "http://127.0.0.1:{port}"
trusted = true
expected_fingerprint = "{fingerprint}"
timeout_ms = {timeout_ms}

[plugins.auth]
header = "X-Api-Key"
secret = "tickets_token"

[[plugins.functions]]
name = "file_ticket"
description = "File a ticket."
method = "POST"
path = "/tickets"
effects = ["write_external"]
idempotency = "{idempotency}"
parameters = {{ type = "object", properties = {{ title = {{ type = "string" }} }}, required = ["title"], additionalProperties = false }}
"#
    );
    std::fs::write(dir.join("agentrt.toml"), config).expect("config");
    std::fs::write(
        dir.join("scenario.json"),
        r#"{"turns": [
  {"text": "Loading.", "tool_calls": [{"name": "load_tools", "arguments": {"names": ["file_ticket"]}}]},
  {"text": "Filing.", "tool_calls": [{"name": "file_ticket", "arguments": {"title": "disk full"}}]},
  {"text": "Filed."}
]}"#,
    )
    .expect("scenario");
}

fn agentrt(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--config")
        .arg(dir.join("agentrt.toml"))
        .args(args)
        .env("AGENTRT_DATA_DIR", dir.join("data"))
        .env(TOKEN_ENV, MARKER)
        // Everything the runtime and its HTTP stack trace, to search it.
        .env("RUST_LOG", "trace")
        .env_remove("AGENTRT_TEST_PAUSE")
        .stdin(Stdio::null())
        .output()
        .expect("agentrt")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn start(dir: &Path) -> Output {
    let scenario = dir.join("scenario.json");
    agentrt(
        dir,
        &[
            "--json",
            "run",
            "file a ticket",
            "--scenario",
            scenario.to_str().expect("utf8"),
        ],
    )
}

/// The `settled` event; with `--json` every line of stdout is JSON, the
/// hints for the person included (they go to stderr).
fn settled(out: &Output) -> serde_json::Value {
    let stdout = text(&out.stdout);
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{e}: a stdout line is not JSON: {line:?}"))
        })
        .collect();
    // The last event, or the one before the answer of an ended run (issue 14 item 4).
    let last = match events.as_slice() {
        [.., settled, answer] if answer["event"] == "answer" => settled.clone(),
        [.., last] => last.clone(),
        [] => panic!("no events"),
    };
    assert_eq!(last["event"], "settled", "{stdout}");
    last
}

/// Every byte of every file under `dir`, as found on disk.
fn all_files(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            all_files(&path, out);
        } else {
            let bytes = std::fs::read(&path).expect("read");
            out.push((path.display().to_string(), bytes));
        }
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
fn s5_3_a_plugin_secret_reaches_the_server_and_nothing_else() {
    let server = start_recorder(0, Duration::ZERO);
    let dir = tempfile::tempdir().expect("dir");
    setup(dir.path(), server.port, "non_idempotent", 20_000);
    let out = start(dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let run = settled(&out)["run"].as_str().expect("run").to_owned();
    let card = agentrt(dir.path(), &["--json", "show", &run]);
    assert_eq!(card.status.code(), Some(0), "{}", text(&card.stderr));

    let seen = server.seen.lock().expect("seen").clone();
    assert_eq!(seen.len(), 1, "one write");
    assert_eq!(
        seen[0].api_key.as_deref(),
        Some(MARKER),
        "the server got it"
    );

    // The trace-level log was captured: prove it is not empty, then search.
    let log = text(&out.stderr);
    assert!(log.lines().count() > 10, "trace output was captured: {log}");
    for (what, bytes) in [
        ("the run's stdout (JSON events)", &out.stdout),
        ("the run's trace-level log", &out.stderr),
        ("the run card", &card.stdout),
        ("the run card's log", &card.stderr),
    ] {
        assert!(!contains(bytes, MARKER), "the secret leaked into {what}");
    }
    let mut files = Vec::new();
    all_files(&dir.path().join("data"), &mut files);
    assert!(
        files.iter().any(|(p, _)| p.ends_with("agentrt.sqlite3")),
        "{:?}",
        files.iter().map(|(p, _)| p).collect::<Vec<_>>()
    );
    // The transcript (the model context) is stored: the tool's result text
    // is there, so a leak into it would be found here too.
    assert!(
        files.iter().any(|(_, b)| contains(b, "ticket")),
        "stored bytes hold the run's content"
    );
    for (path, bytes) in &files {
        assert!(!contains(bytes, MARKER), "the secret leaked into {path}");
    }
}

#[test]
fn s5_3_an_idempotent_retry_chosen_by_the_person_carries_the_same_key() {
    // The first request is answered after 30 s, far past the plugin's 1 s timeout.
    let server = start_recorder(1, Duration::from_secs(30));
    let dir = tempfile::tempdir().expect("dir");
    setup(dir.path(), server.port, "idempotent", 1_000);
    let out = start(dir.path());
    let card = settled(&out);
    let run = card["run"].as_str().expect("run").to_owned();
    assert_eq!(
        (
            card["status"].as_str(),
            card["stop_reason"]["reason"].as_str()
        ),
        (Some("interrupted"), Some("effect_unknown")),
        "an unanswered write waits for the person: {card}\n{}",
        text(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(3), "waiting for a decision");
    let call = card["stop_reason"]["call_id"]
        .as_str()
        .expect("call")
        .to_owned();
    assert_eq!(
        server.seen.lock().expect("seen").len(),
        1,
        "not retried by itself"
    );

    let decided = agentrt(dir.path(), &["--json", "decide", &run, &call, "retry"]);
    assert_eq!(decided.status.code(), Some(0), "{}", text(&decided.stderr));
    assert_eq!(settled(&decided)["status"], "completed");

    let seen = server.seen.lock().expect("seen").clone();
    assert_eq!(seen.len(), 2, "the person's retry reached the server once");
    let first = seen[0].idempotency_key.clone().expect("a key on the first");
    assert!(!first.is_empty());
    assert_eq!(
        seen[1].idempotency_key.as_deref(),
        Some(first.as_str()),
        "the retry carries the same Idempotency-Key"
    );
    // It is the kernel's one derivation for this run and call id, the
    // identity the person's retry keeps (S2.3).
    let expected = agent_kernel::journal::idempotency_key(
        &agent_kernel::ids::RunId::new(run.as_str()).expect("run id"),
        &agent_kernel::ids::CallId::new(call.as_str()).expect("call id"),
    );
    assert_eq!(
        first, expected,
        "the server got the kernel's key for {run}/{call}"
    );
}
