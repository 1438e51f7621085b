//! The real kill test (issue 8 item 6; S2.1, S2.3, S3.3): `agentrt run` on
//! a scenario whose non-idempotent external write goes to an HTTP plugin —
//! a counting server on loopback started here — is killed with SIGKILL
//! before dispatch, during the request and after the commit; then
//! `agentrt resume`. The server sees the write at most once, committed
//! results are reused, and an uncertain write surfaces as `effect_unknown`
//! with the decision the person must take.
//!
//! The kills land deterministically: `AGENTRT_TEST_PAUSE` (a hidden,
//! test-only variable) parks the process at a named journal boundary, and
//! "during the request" is the moment the server has received the write and
//! holds its answer.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use agent_tools::PluginManifest;

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");

/// A loopback server counting `POST /tickets`; optionally holds its answer.
struct Counter {
    port: u16,
    count: Arc<AtomicU64>,
    hold: Arc<AtomicBool>,
    received: mpsc::Receiver<()>,
}

fn start_counter() -> Counter {
    let count = Arc::new(AtomicU64::new(0));
    let hold = Arc::new(AtomicBool::new(false));
    let (tx, received) = mpsc::channel();
    let (c, h) = (count.clone(), hold.clone());
    let app = axum::Router::new().route(
        "/tickets",
        axum::routing::post(move || {
            let (c, h, tx) = (c.clone(), h.clone(), tx.clone());
            async move {
                let n = c.fetch_add(1, Ordering::SeqCst) + 1;
                let _ = tx.send(());
                if h.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                }
                axum::Json(serde_json::json!({"ticket": n}))
            }
        }),
    );
    Counter {
        port: common::serve_on_loopback(app),
        count,
        hold,
        received,
    }
}

// The plugin is discoverable: the model loads it with `load_tools` first.
// The loaded set is stored (S5.2), so the process that resumes after the
// kill still resolves `send_ticket`.
const SCENARIO: &str = r#"{"turns": [
  {"text": "Loading the ticket tool.", "tool_calls": [{"name": "load_tools", "arguments": {"names": ["send_ticket"]}}]},
  {"text": "Filing the ticket.", "tool_calls": [{"name": "send_ticket", "arguments": {"title": "disk full"}}]},
  {"text": "Filed."}
]}"#;

/// A data directory, config (a trusted plugin pointing at the counter) and scenario.
fn setup(dir: &Path, port: u16) {
    let manifest: PluginManifest = serde_json::from_value(serde_json::json!({
        "id": "tickets",
        "base_url": format!("http://127.0.0.1:{port}"),
        "trusted": true,
        "timeout_ms": 120000,
        "functions": [{
            "name": "send_ticket",
            "description": "File a ticket.",
            "method": "POST",
            "path": "/tickets",
            "parameters": {"type": "object", "properties": {"title": {"type": "string"}},
                           "required": ["title"], "additionalProperties": false},
            "effects": ["write_external"],
            "idempotency": "non_idempotent"
        }]
    }))
    .expect("manifest");
    let fingerprint = manifest.fingerprint().expect("fingerprint");
    let config = format!(
        r#"approval = "permissive"
lease_ttl_ms = 60000

[[plugins]]
id = "tickets"
base_url = "http://127.0.0.1:{port}"
trusted = true
expected_fingerprint = "{fingerprint}"
timeout_ms = 120000

[[plugins.functions]]
name = "send_ticket"
description = "File a ticket."
method = "POST"
path = "/tickets"
effects = ["write_external"]
idempotency = "non_idempotent"
parameters = {{ type = "object", properties = {{ title = {{ type = "string" }} }}, required = ["title"], additionalProperties = false }}
"#
    );
    std::fs::write(dir.join("agentrt.toml"), config).expect("config");
    std::fs::write(dir.join("scenario.json"), SCENARIO).expect("scenario");
}

fn command(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("--config")
        .arg(dir.join("agentrt.toml"))
        .args(args)
        .env("AGENTRT_DATA_DIR", dir.join("data"))
        .env_remove("AGENTRT_TEST_PAUSE")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    cmd
}

fn run_to_end(dir: &Path, args: &[&str]) -> Output {
    command(dir, args).output().expect("agentrt")
}

fn start_run(dir: &Path, pause: Option<&str>) -> Child {
    let scenario = dir.join("scenario.json");
    let mut cmd = command(
        dir,
        &[
            "run",
            "file a ticket",
            "--scenario",
            scenario.to_str().expect("utf8"),
        ],
    );
    if let Some(p) = pause {
        cmd.env("AGENTRT_TEST_PAUSE", p);
    }
    cmd.stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}

/// Wait until the child prints the pause marker on stderr.
fn wait_paused(child: &mut Child) {
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.starts_with("agentrt-test-paused") {
                let _ = tx.send(line);
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the run reached the pause boundary");
}

/// SIGKILL and reap.
fn kill9(child: &mut Child) {
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("reap");
    assert!(!status.success());
}

fn only_run(dir: &Path) -> String {
    let out = run_to_end(dir, &["--json", "runs"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "one run: {text}");
    let v: serde_json::Value = serde_json::from_str(lines[0]).expect("json");
    v["run"].as_str().expect("run id").to_owned()
}

fn show(dir: &Path, run: &str) -> serde_json::Value {
    let out = run_to_end(dir, &["--json", "show", run]);
    serde_json::from_slice(&out.stdout).expect("show json")
}

fn ticket_state(card: &serde_json::Value) -> Option<(String, u64)> {
    card["journal"]
        .as_array()?
        .iter()
        .find(|j| j["tool"] == "send_ticket")
        .map(|j| {
            (
                j["state"].as_str().unwrap_or_default().to_owned(),
                j["attempt"].as_u64().unwrap_or(0),
            )
        })
}

/// Killed before dispatch (the `running` record not yet durable): the write
/// never left; resume dispatches it once.
#[test]
fn s2_3_sigkill_before_dispatch_then_resume_writes_once() {
    let dir = tempfile::tempdir().expect("dir");
    let counter = start_counter();
    setup(dir.path(), counter.port);
    let mut child = start_run(dir.path(), Some("before:running:send_ticket"));
    wait_paused(&mut child);
    kill9(&mut child);
    assert_eq!(counter.count.load(Ordering::SeqCst), 0, "nothing was sent");
    let run = only_run(dir.path());
    let resumed = run_to_end(dir.path(), &["resume", &run]);
    assert_eq!(
        resumed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    assert_eq!(
        counter.count.load(Ordering::SeqCst),
        1,
        "written exactly once"
    );
    let card = show(dir.path(), &run);
    assert_eq!(card["status"], "completed");
    assert_eq!(
        ticket_state(&card).map(|s| s.0).as_deref(),
        Some("committed")
    );
}

/// Killed while the server holds the request: the write happened but was
/// never committed; resume must not repeat it and asks the person instead.
#[test]
fn s2_3_sigkill_during_the_request_gives_effect_unknown_and_a_decision() {
    let dir = tempfile::tempdir().expect("dir");
    let counter = start_counter();
    counter.hold.store(true, Ordering::SeqCst);
    setup(dir.path(), counter.port);
    let mut child = start_run(dir.path(), None);
    counter
        .received
        .recv_timeout(Duration::from_secs(60))
        .expect("the write reached the server");
    kill9(&mut child);
    counter.hold.store(false, Ordering::SeqCst);
    let run = only_run(dir.path());
    let resumed = run_to_end(dir.path(), &["resume", &run]);
    let stdout = String::from_utf8_lossy(&resumed.stdout).into_owned();
    assert_eq!(
        resumed.status.code(),
        Some(3),
        "waiting for a decision: {stdout}{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let card = show(dir.path(), &run);
    assert_eq!(card["status"], "interrupted");
    assert_eq!(
        ticket_state(&card).map(|s| s.0).as_deref(),
        Some("effect_unknown")
    );
    assert_eq!(counter.count.load(Ordering::SeqCst), 1, "never replayed");
    let decision = card["pending"]
        .as_array()
        .and_then(|p| {
            p.iter()
                .find(|p| p["kind"]["kind"] == "decision" || p["kind"].get("decision").is_some())
        })
        .unwrap_or_else(|| panic!("a pending decision: {}", card["pending"]));
    let call = decision["kind"]["call_id"]
        .as_str()
        .or_else(|| decision["kind"]["decision"]["call_id"].as_str())
        .expect("call id")
        .to_owned();
    assert!(
        stdout.contains(&format!("agentrt decide {run} {call} retry|done|abandon")),
        "the decision to take is printed: {stdout}"
    );
    // Resuming again without a decision stays blocked and writes nothing.
    let again = run_to_end(dir.path(), &["resume", &run]);
    assert_ne!(again.status.code(), Some(0));
    assert_eq!(counter.count.load(Ordering::SeqCst), 1);
    // The person checked: it happened. Mark it done; the run completes.
    let decided = run_to_end(dir.path(), &["decide", &run, &call, "done"]);
    assert_eq!(
        decided.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&decided.stderr)
    );
    assert_eq!(
        counter.count.load(Ordering::SeqCst),
        1,
        "still exactly one write"
    );
    assert_eq!(show(dir.path(), &run)["status"], "completed");
}

/// Killed right after the commit: resume reuses the committed result.
#[test]
fn s2_3_sigkill_after_the_commit_reuses_the_result() {
    let dir = tempfile::tempdir().expect("dir");
    let counter = start_counter();
    setup(dir.path(), counter.port);
    let mut child = start_run(dir.path(), Some("after:committed:send_ticket"));
    wait_paused(&mut child);
    kill9(&mut child);
    assert_eq!(counter.count.load(Ordering::SeqCst), 1);
    let run = only_run(dir.path());
    let before = show(dir.path(), &run);
    assert_eq!(
        ticket_state(&before).map(|s| s.0).as_deref(),
        Some("committed")
    );
    let resumed = run_to_end(dir.path(), &["resume", &run]);
    assert_eq!(
        resumed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    assert_eq!(
        counter.count.load(Ordering::SeqCst),
        1,
        "the committed result was reused"
    );
    let card = show(dir.path(), &run);
    assert_eq!(card["status"], "completed");
    assert_eq!(ticket_state(&card), Some(("committed".into(), 1)));
}

/// SIGTERM while the server holds the request (issue 17 item 4, S2.5): the
/// process raises `ExecutorLost` itself, so the run is `interrupted` /
/// `page_interrupted` with an `executor_lost` activity naming the host, and
/// the process exits on its own. Resume then never repeats the write: it
/// asks the person.
#[test]
fn s2_5_sigterm_interrupts_the_run_in_flight_and_resume_asks_the_person() {
    let dir = tempfile::tempdir().expect("dir");
    let counter = start_counter();
    counter.hold.store(true, Ordering::SeqCst);
    setup(dir.path(), counter.port);
    let mut child = start_run(dir.path(), None);
    counter
        .received
        .recv_timeout(Duration::from_secs(60))
        .expect("the write reached the server");
    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(term.success());
    // It ends by itself: the run is interrupted after the stop grace.
    let mut exited = None;
    for _ in 0..600 {
        if let Some(status) = child.try_wait().expect("wait") {
            exited = Some(status);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let Some(status) = exited else {
        kill9(&mut child);
        panic!("agentrt did not end after SIGTERM");
    };
    assert!(status.code().is_some(), "it exited, not killed: {status}");
    counter.hold.store(false, Ordering::SeqCst);
    let run = only_run(dir.path());
    let card = show(dir.path(), &run);
    assert_eq!(card["status"], "interrupted", "{card}");
    assert_eq!(card["stop_reason"]["reason"], "page_interrupted", "{card}");
    let lost: Vec<&serde_json::Value> = card["activities"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["kind"]["kind"] == "executor_lost")
        .collect();
    assert_eq!(lost.len(), 1, "{card}");
    assert_eq!(lost[0]["kind"]["executor"], "host");
    let resumed = run_to_end(dir.path(), &["resume", &run]);
    assert_eq!(resumed.status.code(), Some(3), "waiting for a decision");
    assert_eq!(
        ticket_state(&show(dir.path(), &run))
            .map(|s| s.0)
            .as_deref(),
        Some("effect_unknown")
    );
    assert_eq!(counter.count.load(Ordering::SeqCst), 1, "never replayed");
}
