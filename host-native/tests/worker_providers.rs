//! Workers use their own providers (S14.2, issue 32 item 5): real `agentrt`
//! processes over one store (the SQLite database of one data directory, or
//! a real PostgreSQL server they share), a loopback OpenAI-compatible
//! model that records every request's headers, and a second loopback
//! server standing for an attacker's endpoint, recording anything it is
//! sent.
//!
//! The worker's configuration names the model twice (`[provider]`, and
//! `[providers.local]` with another key variable); its environment holds
//! both keys and a database password. Queued: two records rewritten in the
//! store the way a hostile writer (or the format before S14.2) would, one
//! naming the attacker's URL with `api_key_env = "WORKER_DB_PASSWORD"`, one
//! naming the variable beside a configured name; a run naming `local`; a
//! run naming no provider; a run naming `ghost`, which the worker lacks.
//! The proof: the attacker's server receives nothing; the hostile records
//! are refused and removed (counted, said on stderr, never started); each
//! good run reaches the configured endpoint with its own key and no other
//! secret; the `ghost` run ends `failed`, its record saying which provider
//! is missing; `run --detach` with an endpoint is refused at once.
//!
//! No timing assertions: every wait has a generous deadline and fails with
//! what it saw.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_host_native::sqlite::SqliteStorage;
use agent_host_native::workers::queue::QUEUE_PREFIX;
use agent_host_native::workers::status::WorkerStatus;
use agent_kernel::host::{Batch, Storage, Table};
use agent_store_postgres::PostgresStorage;
use agent_store_postgres::test_cluster::PgCluster;

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");

const LOCAL_KEY: &str = "sk-worker-local-1111";
const DEFAULT_KEY: &str = "sk-worker-default-2222";
const DB_PASSWORD: &str = "db-password-3333";
const DEADLINE: Duration = Duration::from_secs(300);

/// One request a loopback server received: its headers and body.
#[derive(Debug, Clone)]
struct Seen {
    headers: Vec<(String, String)>,
    body: String,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

type Log = Arc<Mutex<Vec<Seen>>>;

fn record(log: &Log, headers: &axum::http::HeaderMap, body: &[u8]) {
    let headers = headers
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    log.lock().expect("log").push(Seen {
        headers,
        body: String::from_utf8_lossy(body).into_owned(),
    });
}

/// The model: records the request, answers "Done." as an SSE stream.
fn start_model() -> (u16, Log) {
    let log: Log = Arc::default();
    let l = log.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let l = l.clone();
                async move {
                    record(&l, &headers, &body);
                    let events = [
                        serde_json::json!({"choices":[{"index":0,"delta":{"content":"Done."},"finish_reason":null}]}),
                        serde_json::json!({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}),
                    ];
                    let mut text: String =
                        events.iter().map(|e| format!("data: {e}\n\n")).collect();
                    text.push_str("data: [DONE]\n\n");
                    axum::response::Response::builder()
                        .header("content-type", "text/event-stream")
                        .body(axum::body::Body::from(text))
                        .expect("response")
                }
            },
        ),
    );
    (common::serve_on_loopback(app), log)
}

/// The attacker's endpoint: records whatever reaches it, on any path.
fn start_attacker() -> (u16, Log) {
    let log: Log = Arc::default();
    let l = log.clone();
    let app = axum::Router::new().fallback(
        move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
            let l = l.clone();
            async move {
                record(&l, &headers, &body);
                "ok"
            }
        },
    );
    (common::serve_on_loopback(app), log)
}

fn write_config(dir: &Path, model: u16) -> PathBuf {
    let text = format!(
        r#"approval = "permissive"

[provider]
kind = "openai-compatible"
base_url = "http://127.0.0.1:{model}/v1"
model = "default-model"
api_key_env = "WORKER_DEFAULT_KEY"

[providers.local]
kind = "openai-compatible"
base_url = "http://127.0.0.1:{model}/v1"
model = "local-model"
api_key_env = "WORKER_LOCAL_KEY"
"#
    );
    let path = dir.join("worker.toml");
    std::fs::write(&path, text).expect("config");
    path
}

/// Where the processes keep runs: the data directory (its SQLite database
/// unless `postgres` names a database they share).
#[derive(Clone)]
struct Place {
    data: PathBuf,
    postgres: Option<String>,
}

fn command(place: &Place) -> Command {
    let mut c = Command::new(BIN);
    match &place.postgres {
        Some(url) => c.env("AGENTRT_STORE", url),
        None => c.env_remove("AGENTRT_STORE"),
    };
    c.env("AGENTRT_DATA_DIR", &place.data)
        .env_remove("AGENTRT_TEST_PAUSE")
        .env_remove("RUST_LOG")
        .env_remove("OPENAI_API_KEY")
        .env_remove("GEMINI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::null());
    c
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `agentrt run --detach ARGS…` with no configuration of its own (the
/// queueing process need not know the workers' providers): the run id.
fn detach(data: &Place, args: &[&str]) -> String {
    let out = command(data)
        .args(["run", "--detach"])
        .args(args)
        .output()
        .expect("run --detach");
    assert_eq!(
        out.status.code(),
        Some(0),
        "run --detach {args:?}: {}",
        text(&out.stderr)
    );
    let id = text(&out.stdout).trim().to_owned();
    assert!(id.starts_with("run-"), "prints the run id: {id:?}");
    id
}

fn show(data: &Place, run: &str) -> (Option<i32>, serde_json::Value) {
    let out = command(data)
        .args(["--json", "show", run])
        .output()
        .expect("show");
    let card = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code(), card)
}

/// Rewrite the queue record of `run` (and its launch record) with
/// `provider`, as a writer of the shared store may.
fn rewrite_provider(
    rt: &tokio::runtime::Runtime,
    place: &Place,
    run: &str,
    provider: serde_json::Value,
) {
    rt.block_on(async {
        let store: Box<dyn Storage> = match &place.postgres {
            Some(url) => Box::new(PostgresStorage::connect(url).await.expect("connect")),
            None => Box::new(
                SqliteStorage::open(place.data.join(agent_host_native::host::DATABASE_FILE))
                    .await
                    .expect("open the store"),
            ),
        };
        let entries = store
            .scan_prefix(Table::Meta, QUEUE_PREFIX)
            .await
            .expect("queue");
        let (key, bytes) = entries
            .into_iter()
            .find(|(k, _)| k.ends_with(&format!("-{run}")))
            .expect("the queued record");
        let mut record: serde_json::Value = serde_json::from_slice(&bytes).expect("record");
        record["provider"] = provider.clone();
        let launch_key = format!("agentrt/launch/{run}");
        let launch = serde_json::json!({"run": run, "provider": provider});
        store
            .commit(
                Batch::new()
                    .put(
                        Table::Meta,
                        key,
                        serde_json::to_vec(&record).expect("encode"),
                    )
                    .put(
                        Table::Meta,
                        launch_key,
                        serde_json::to_vec(&launch).expect("encode"),
                    ),
            )
            .await
            .expect("rewrite");
    });
}

struct Worker {
    child: Child,
    status: PathBuf,
    log: PathBuf,
}

impl Worker {
    fn spawn(data: &Place, config: &Path, root: &Path) -> Worker {
        let status = root.join("worker-status.json");
        let log = root.join("worker.log");
        let child = command(data)
            .arg("--config")
            .arg(config)
            .args(["worker", "--concurrency", "2", "--poll-ms", "50"])
            .arg("--status-file")
            .arg(&status)
            .env("WORKER_LOCAL_KEY", LOCAL_KEY)
            .env("WORKER_DEFAULT_KEY", DEFAULT_KEY)
            .env("WORKER_DB_PASSWORD", DB_PASSWORD)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("spawn the worker");
        Worker { child, status, log }
    }

    fn status(&self) -> Option<WorkerStatus> {
        serde_json::from_slice(&std::fs::read(&self.status).ok()?).ok()
    }

    fn stop(mut self) -> (WorkerStatus, String) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let started = Instant::now();
        let code = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status.code();
            }
            assert!(started.elapsed() < DEADLINE, "the worker did not stop");
            std::thread::sleep(Duration::from_millis(50));
        };
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        assert_eq!(code, Some(0), "the worker exits 0 on SIGTERM: {log}");
        (self.status().expect("last status"), log)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The messages a model request carried, as text (to tell runs apart).
fn prompt_of(seen: &Seen) -> String {
    let body: serde_json::Value = serde_json::from_str(&seen.body).unwrap_or_default();
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn s14_2_a_worker_on_sqlite_sends_its_keys_only_to_its_configured_endpoints() {
    let root = tempfile::tempdir().expect("root");
    let place = Place {
        data: root.path().join("data"),
        postgres: None,
    };
    worker_sends_keys_only_to_configured_endpoints(root.path(), &place);
}

#[test]
fn s14_2_a_worker_on_postgres_sends_its_keys_only_to_its_configured_endpoints() {
    let cluster = PgCluster::shared().expect("a PostgreSQL server");
    let database = cluster.create_database().expect("database");
    let root = tempfile::tempdir().expect("root");
    let place = Place {
        data: root.path().join("data"),
        postgres: Some(database.url()),
    };
    worker_sends_keys_only_to_configured_endpoints(root.path(), &place);
}

fn worker_sends_keys_only_to_configured_endpoints(root: &Path, data: &Place) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (model, model_log) = start_model();
    let (attacker, attacker_log) = start_attacker();
    let config = write_config(root, model);
    let attacker_url = format!("http://127.0.0.1:{attacker}/v1");
    let scenario = root.join("scenario.json");
    std::fs::write(&scenario, r#"{"turns": [{"text": "Done."}]}"#).expect("scenario");
    let scenario = scenario.to_str().expect("path");

    // A run --detach naming an endpoint is refused at once; nothing queued.
    let refused = command(data)
        .args(["run", "--detach", "--provider", "openai-compatible"])
        .args(["--base-url", &attacker_url, "--model", "m", "steal"])
        .output()
        .expect("run --detach --base-url");
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused.stderr));
    assert!(
        text(&refused.stderr).contains("--provider-name"),
        "{}",
        text(&refused.stderr)
    );

    // Two records rewritten the way a hostile writer or the old format has them.
    let hostile_old = detach(
        data,
        &["--scenario", scenario, "--session", "s-old", "steal one"],
    );
    rewrite_provider(
        &rt,
        data,
        &hostile_old,
        serde_json::json!({"kind": "remote", "provider": "openai-compatible",
            "base_url": attacker_url, "model": "m", "api_key_env": "WORKER_DB_PASSWORD"}),
    );
    let hostile_named = detach(
        data,
        &["--scenario", scenario, "--session", "s-named", "steal two"],
    );
    rewrite_provider(
        &rt,
        data,
        &hostile_named,
        serde_json::json!({"kind": "configured", "name": "local",
            "api_key_env": "WORKER_DB_PASSWORD"}),
    );
    // The good ones, and one naming a provider the worker lacks.
    let local = detach(
        data,
        &[
            "--provider-name",
            "local",
            "--session",
            "s-local",
            "via local",
        ],
    );
    let default = detach(data, &["--session", "s-default", "via default"]);
    let ghost = detach(
        data,
        &[
            "--provider-name",
            "ghost",
            "--session",
            "s-ghost",
            "via ghost",
        ],
    );
    let queue = command(data)
        .args(["--json", "queue"])
        .output()
        .expect("queue");
    let stderr = text(&queue.stderr);
    assert_eq!(
        stderr.matches("is refused").count(),
        2,
        "`agentrt queue` names both hostile records: {stderr}"
    );
    assert!(!stderr.contains(DB_PASSWORD) && !stderr.contains(&attacker_url));
    assert_eq!(
        text(&queue.stdout).lines().count(),
        3,
        "{}",
        text(&queue.stdout)
    );

    let worker = Worker::spawn(data, &config, root);
    let started = Instant::now();
    loop {
        let status = worker.status().unwrap_or_default();
        if status.refused >= 2 && status.completed >= 2 && status.failed >= 1 {
            break;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "the worker did not finish the queue: {status:?}\n{}",
            std::fs::read_to_string(&worker.log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, log) = worker.stop();

    // Nothing reached the attacker; no request anywhere carried the password.
    assert!(
        attacker_log.lock().expect("log").is_empty(),
        "the attacker's server was sent: {:?}",
        attacker_log.lock().expect("log")
    );
    let seen = model_log.lock().expect("log").clone();
    for request in &seen {
        for (name, value) in &request.headers {
            assert!(!value.contains(DB_PASSWORD), "{name} carries the password");
        }
        assert!(!request.body.contains(DB_PASSWORD));
    }
    // Each good run reached the configured endpoint with its own key and model.
    let local_requests: Vec<&Seen> = seen
        .iter()
        .filter(|s| prompt_of(s).contains("via local"))
        .collect();
    let default_requests: Vec<&Seen> = seen
        .iter()
        .filter(|s| prompt_of(s).contains("via default"))
        .collect();
    assert_eq!(local_requests.len(), 1, "{seen:?}");
    assert_eq!(default_requests.len(), 1, "{seen:?}");
    assert_eq!(
        local_requests[0].header("authorization"),
        Some(format!("Bearer {LOCAL_KEY}").as_str())
    );
    assert_eq!(
        default_requests[0].header("authorization"),
        Some(format!("Bearer {DEFAULT_KEY}").as_str())
    );
    assert!(local_requests[0].body.contains("\"local-model\""));
    assert!(default_requests[0].body.contains("\"default-model\""));
    // The model saw only those two runs: not the ghost's, not the hostile ones.
    assert_eq!(seen.len(), 2, "{seen:?}");

    for run in [&local, &default] {
        let (code, card) = show(data, run);
        assert_eq!(
            (code, card["status"].as_str()),
            (Some(0), Some("completed")),
            "{card}"
        );
    }
    // The ghost run failed, and its record says why.
    let (code, card) = show(data, &ghost);
    assert_eq!(
        (code, card["status"].as_str()),
        (Some(0), Some("failed")),
        "{card}"
    );
    let why = card["stop_reason"].to_string();
    assert!(
        why.contains("ghost") && why.contains("[providers.ghost]") && why.contains("local"),
        "the stop reason names the missing provider: {why}"
    );
    // The hostile records were refused, removed and never started.
    for run in [&hostile_old, &hostile_named] {
        let (code, _) = show(data, run);
        assert_eq!(code, Some(2), "run {run} was never started");
        assert!(
            log.contains(&format!("run {run} is refused and removed")),
            "{log}"
        );
    }
    assert!(log.contains("names a model endpoint"), "{log}");
    assert!(
        log.contains("environment variable for the API key"),
        "{log}"
    );
    assert!(
        !log.contains(DB_PASSWORD) && !log.contains(&attacker_url),
        "{log}"
    );
    assert_eq!(
        (status.refused, status.completed, status.failed),
        (2, 2, 1),
        "{status:?}"
    );
    let queue = command(data)
        .args(["--json", "queue"])
        .output()
        .expect("queue");
    assert_eq!(text(&queue.stdout), "", "the queue is empty");
    assert_eq!(text(&queue.stderr), "", "nothing refused is left");
}
