//! Runs per second through `agentrt worker` processes sharing one
//! PostgreSQL database (issue 21), with 1, 2 and 4 workers, on a throwaway
//! server that writes as production does (fsync on), started by the bench.
//!
//! ```text
//! cargo bench -p agent-host-native --bench workers
//! BENCH_QUICK=1 cargo bench -p agent-host-native --bench workers   # fewer runs
//! ```
//!
//! Each run is queued through the library (`queue::enqueue_start`, what
//! `agentrt run --detach` calls), talks to a scripted model and makes one
//! non-idempotent plugin write to a loopback server; the figure is the
//! number of runs divided by the time from the first enqueue until every
//! run is `completed`. The workers are real `agentrt worker` processes
//! (concurrency 4 each) on a fresh database per worker count.
//!
//! With `BENCH_JSON=<file>` every figure is appended to that file as one
//! JSON line (`workers_runs_per_s_<n>`), which `cargo xtask bench` collects.

#[path = "../tests/common/mod.rs"]
mod loopback;

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent_host_native::workers::queue::QueuedProvider;
use agent_host_native::workers::queue::{NewRun, StartRequest, enqueue_start};
use agent_kernel::host::{BlobRef, Storage, StorageExt};
use agent_kernel::run::{AgentRun, RunStatus};
use agent_kernel::{RunId, SessionId};
use agent_store_postgres::PostgresStorage;
use agent_store_postgres::test_cluster::PgCluster;
use agent_supervisor::RunConfig;
use agent_tools::PluginManifest;
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");

const SCENARIO: &str = r#"{"turns": [
  {"text": "Filing.", "tool_calls": [{"name": "send_ticket", "arguments": {"title": "bench"}}]},
  {"text": "Filed."}
]}"#;

fn emit(name: &str, label: &str, value: f64, unit: &str, extra: serde_json::Value) {
    let Some(path) = std::env::var_os("BENCH_JSON") else {
        return;
    };
    let mut line =
        json!({"bench": "workers", "name": name, "label": label, "value": value, "unit": unit});
    if let (Some(line), serde_json::Value::Object(extra)) = (line.as_object_mut(), extra) {
        for (k, v) in extra {
            line.entry(k).or_insert(v);
        }
    }
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| writeln!(f, "{line}"));
    if let Err(e) = written {
        eprintln!(
            "BENCH_JSON: cannot append to {}: {e}",
            path.to_string_lossy()
        );
    }
}

fn start_tickets() -> u16 {
    let app = axum::Router::new().route(
        "/tickets",
        axum::routing::post(|| async { axum::Json(json!({"ticket": 1})) }),
    );
    loopback::serve_on_loopback(app)
}

fn write_config(dir: &Path, port: u16) -> std::path::PathBuf {
    let manifest: PluginManifest = serde_json::from_value(json!({
        "id": "tickets",
        "base_url": format!("http://127.0.0.1:{port}"),
        "trusted": true,
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
always_on_plugins = ["tickets"]

[[plugins]]
id = "tickets"
base_url = "http://127.0.0.1:{port}"
trusted = true
expected_fingerprint = "{fingerprint}"

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
    let path = dir.join("agentrt.toml");
    std::fs::write(&path, config).expect("config");
    path
}

fn private_dir(parent: &Path, name: &str) -> std::path::PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod");
    dir
}

fn spawn_worker(root: &Path, config: &Path, url: &str, i: usize) -> Child {
    let data = private_dir(root, &format!("worker-{i}"));
    Command::new(BIN)
        .arg("--config")
        .arg(config)
        .args(["worker", "--concurrency", "4", "--poll-ms", "50"])
        .env("AGENTRT_DATA_DIR", data)
        .env("AGENTRT_STORE", url)
        .env_remove("RUST_LOG")
        .env_remove("AGENTRT_TEST_PAUSE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn worker")
}

/// Runs per second with `workers` workers over `runs` runs in `sessions` sessions.
fn measure(
    rt: &tokio::runtime::Runtime,
    cluster: &PgCluster,
    config: &Path,
    root: &Path,
    workers: usize,
    runs: usize,
    sessions: usize,
) -> f64 {
    let database = cluster.create_database().expect("database");
    let url = database.url();
    let store = rt.block_on(PostgresStorage::connect(&url)).expect("store");
    let scenario = rt
        .block_on(store.put_blob(
            &BlobRef::of(SCENARIO.as_bytes()).hash,
            SCENARIO.as_bytes().to_vec(),
        ))
        .expect("scenario");
    let mut children: Vec<Child> = (0..workers)
        .map(|i| spawn_worker(root, config, &url, i))
        .collect();
    // Let the workers open the store before the clock starts.
    std::thread::sleep(Duration::from_secs(2));
    let request = StartRequest {
        config: RunConfig {
            approval: agent_host_native::config::parse_approval("permissive").expect("mode"),
            ..RunConfig::default()
        },
        history: None,
    };
    let started = Instant::now();
    let ids: Vec<String> = (0..runs)
        .map(|k| format!("run-b{workers}-{k:05}"))
        .collect();
    for (k, id) in ids.iter().enumerate() {
        rt.block_on(enqueue_start(
            &store,
            NewRun {
                run: RunId::new(id.clone()).expect("id"),
                session: SessionId::new(format!("bench-{workers}-{:03}", k % sessions))
                    .expect("session"),
                prompt: "file a ticket",
                request: &request,
                provider: QueuedProvider::Scripted {
                    scenario: scenario.clone(),
                },
                demo: false,
            },
            0,
        ))
        .expect("enqueue");
    }
    loop {
        let done = rt.block_on(async {
            let all: Vec<AgentRun> = store.scan_records("").await.expect("runs");
            all.iter()
                .filter(|r| r.status == RunStatus::Completed)
                .count()
        });
        if done >= runs {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "only {done} of {runs} runs completed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let elapsed = started.elapsed();
    for child in &mut children {
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
    }
    for child in &mut children {
        let _ = child.wait();
    }
    drop(store);
    runs as f64 / elapsed.as_secs_f64()
}

fn main() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let cluster = match PgCluster::start_durable() {
        Ok(cluster) => cluster,
        Err(e) => {
            eprintln!("the workers bench cannot run: {e}");
            std::process::exit(1);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    let root = tempfile::tempdir().expect("root");
    let config = write_config(root.path(), start_tickets());
    let (runs, sessions) = if quick { (60, 30) } else { (200, 50) };
    println!(
        "== agentrt workers on PostgreSQL: {runs} runs in {sessions} sessions, one plugin write each (fsync on) =="
    );
    for workers in [1, 2, 4] {
        let per_s = measure(&rt, &cluster, &config, root.path(), workers, runs, sessions);
        println!("{workers} worker(s): {per_s:.1} runs/s");
        emit(
            &format!("workers_runs_per_s_{workers}"),
            &format!("runs per second, {workers} worker(s) on PostgreSQL"),
            per_s,
            "runs/s",
            json!({"runs": runs, "sessions": sessions, "workers": workers}),
        );
    }
}
