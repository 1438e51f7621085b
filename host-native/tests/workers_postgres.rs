//! `agentrt worker` against a real PostgreSQL server (issue 21, S14.1,
//! S2.5, S3): real `agentrt` processes, a loopback OpenAI-compatible model
//! that asks each run to file one ticket named after its prompt, and a
//! counting loopback server behind a trusted, non-idempotent plugin
//! (`write_external`).
//!
//! * Four workers share one database while runs are queued in sessions;
//!   workers are SIGKILLed and restarted, or SIGSTOPped past their lease
//!   and continued, at seeded random moments. Then every interrupted run is
//!   resumed through the queue (the person's Resume). At the end every run
//!   is `completed` or waits for a decision on an `effect_unknown` call; the
//!   server saw each ticket at most once (exactly once for a completed
//!   run); the database's own audit (triggers logging every lease row and
//!   every run record written, with the lease the writing transaction saw
//!   and the worker incarnation's role) shows no session with two
//!   executors at once ([`audit::check_one_executor_at_a_time`]); the fence
//!   refusals of stale writes, summed from the workers' status files, need
//!   a tenure that ended. It runs the issue's load, [`RUNS`] (500) runs in
//!   [`SESSIONS`] (100) sessions, in every test run.
//! * A forced take-over: a worker paused mid-run past its lease is taken
//!   over; continued, its write is refused (at least one refusal in its
//!   status) and the audit shows the session's tenures one after another.
//! * A database restart mid-load: the runs in flight become `interrupted`
//!   (never failed, never corrupted), the workers keep going, and every run
//!   completes after Resume (and, for a write whose outcome the restart hid,
//!   the person's decision).
//!
//! No timing assertions: every wait has a generous deadline and fails with
//! what it saw.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_host_native::workers::queue::{
    NewRun, QueuedProvider, StartRequest, enqueue_resume, enqueue_start, read_queue,
};
use agent_host_native::workers::status::WorkerStatus;
use agent_kernel::host::StorageExt;
use agent_kernel::run::{AgentRun, PendingKind, PendingRequest, RunStatus};
use agent_kernel::{RunId, SessionId};
use agent_store_postgres::PostgresStorage;
use agent_store_postgres::test_cluster::PgCluster;
use agent_supervisor::RunConfig;
use agent_tools::PluginManifest;

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");

/// Runs and sessions of the fleet test: the issue's acceptance load.
const RUNS: usize = 500;
const SESSIONS: usize = 100;
const WORKERS: usize = 4;
/// The chaos seed (`AGENTRT_CHAOS_SEED` overrides it).
const SEED: u64 = 0x5eed_0021;
/// Lease time-to-live of the workers.
const LEASE_TTL_MS: u64 = 3000;
/// The runs are queued in this many waves, this far apart.
const WAVES: usize = 10;
const WAVE_PAUSE: Duration = Duration::from_millis(1500);
/// The fewest SIGKILLs a fleet test must have dealt for it to count.
const MIN_KILLS: u64 = 3;
/// Every wait's deadline: generous, never a timing assertion.
const DEADLINE: Duration = Duration::from_secs(30 * 60);

// ------------------------------------------------------------------ helpers

/// splitmix64: a small seeded generator, so a failing run can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The counting server: every ticket title it was sent, and how often.
#[derive(Clone)]
struct Tickets {
    port: u16,
    seen: Arc<Mutex<HashMap<String, u64>>>,
}

fn start_tickets() -> Tickets {
    let seen: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let jitter = Arc::new(AtomicU64::new(SEED));
    let s = seen.clone();
    let app = axum::Router::new().route(
        "/tickets",
        axum::routing::post(move |axum::Json(body): axum::Json<serde_json::Value>| {
            let (seen, jitter) = (s.clone(), jitter.clone());
            async move {
                let title = body["title"].as_str().unwrap_or("").to_owned();
                let n = {
                    let mut seen = seen.lock().expect("tickets");
                    let n = seen.entry(title).or_insert(0);
                    *n += 1;
                    *n
                };
                // Hold the answer a little, so kills land during requests too.
                let wait = Rng(jitter.fetch_add(1, Ordering::SeqCst)).below(60);
                tokio::time::sleep(Duration::from_millis(wait)).await;
                axum::Json(serde_json::json!({"ticket": n}))
            }
        }),
    );
    Tickets {
        port: common::serve_on_loopback(app),
        seen,
    }
}

fn sse(events: &[serde_json::Value]) -> axum::response::Response {
    let mut body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .body(axum::body::Body::from(body))
        .expect("response")
}

/// A loopback OpenAI-compatible model: to a person's message it answers
/// with one `send_ticket` call titled with that message; after the tool's
/// result, with "Filed.". Each answer waits `delay_ms` first.
fn start_model(delay_ms: u64) -> u16 {
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(
            move |axum::Json(body): axum::Json<serde_json::Value>| async move {
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                model_answer(&body)
            },
        ),
    );
    common::serve_on_loopback(app)
}

/// The model's answer to `body`: one `send_ticket` call titled with the
/// person's message, or "Filed." after the tool's result.
fn model_answer(body: &serde_json::Value) -> axum::response::Response {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or_default();
    if last["role"] == "tool" {
        return sse(&[
            serde_json::json!({"choices":[{"index":0,"delta":{"content":"Filed."},"finish_reason":null}]}),
            serde_json::json!({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}),
        ]);
    }
    let title = match &last["content"] {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let arguments = serde_json::json!({ "title": title }).to_string();
    sse(&[
        serde_json::json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function",
            "function":{"name":"send_ticket","arguments":arguments}}]},"finish_reason":null}]}),
        serde_json::json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}),
    ])
}

fn private_dir(parent: &Path, name: &str) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod");
    dir
}

/// The config every process shares: permissive approval, the tickets
/// plugin (trusted, always on, non-idempotent `write_external`), and the
/// loopback model as the provider named `local` (S14.2: queued runs name
/// it, the workers' configuration says where it is).
fn write_config(dir: &Path, tickets: u16, model: u16) -> PathBuf {
    let manifest: PluginManifest = serde_json::from_value(serde_json::json!({
        "id": "tickets",
        "base_url": format!("http://127.0.0.1:{tickets}"),
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
lease_ttl_ms = {LEASE_TTL_MS}
always_on_plugins = ["tickets"]

[providers.local]
kind = "openai-compatible"
base_url = "http://127.0.0.1:{model}/v1"
model = "m"

[[plugins]]
id = "tickets"
base_url = "http://127.0.0.1:{tickets}"
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
    let path = dir.join("agentrt.toml");
    std::fs::write(&path, config).expect("config");
    path
}

/// Where the processes of a test meet: their folder, the database, the
/// config (which says where the model is).
#[derive(Debug, Clone)]
struct Place {
    root: PathBuf,
    url: String,
    config: PathBuf,
}

impl Place {
    fn logs_tail(&self) -> String {
        let mut out = String::new();
        if let Ok(dir) = std::fs::read_dir(self.root.join("logs")) {
            for entry in dir.flatten() {
                let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(5).collect();
                out.push_str(&format!("--- {}\n", entry.path().display()));
                for line in tail.into_iter().rev() {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        out
    }
}

fn agentrt(place: &Place, data: &Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .arg("--config")
        .arg(&place.config)
        .args(args)
        .env("AGENTRT_DATA_DIR", data)
        .env("AGENTRT_STORE", &place.url)
        .env_remove("RUST_LOG")
        .env_remove("AGENTRT_TEST_PAUSE")
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .output()
        .expect("run agentrt")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Worker processes sharing one database, each restartable.
struct Fleet {
    place: Place,
    workers: Vec<Option<Child>>,
    incarnations: usize,
    /// Each incarnation connects as a database role of its own (see
    /// [`audit`]), so that the audit tells its writes apart.
    audited: bool,
}

impl Fleet {
    fn new(place: Place, count: usize) -> Fleet {
        private_dir(&place.root, "status");
        private_dir(&place.root, "logs");
        Fleet {
            place,
            workers: (0..count).map(|_| None).collect(),
            incarnations: 0,
            audited: false,
        }
    }

    /// A fleet whose incarnations connect as roles of their own.
    fn audited(place: Place, count: usize) -> Fleet {
        let mut fleet = Fleet::new(place, count);
        fleet.audited = true;
        fleet
    }

    fn spawn(&mut self, i: usize) {
        self.incarnations += 1;
        let n = self.incarnations;
        let url = if self.audited {
            audit::role_url(&self.place.url, &format!("w{i}_{n}"))
        } else {
            self.place.url.clone()
        };
        let root = &self.place.root;
        let data = private_dir(root, &format!("worker-{i}"));
        let log = std::fs::File::create(root.join(format!("logs/w{i}-{n}.log"))).expect("log");
        let status = root.join(format!("status/w{i}-{n}.json"));
        let child = Command::new(BIN)
            .arg("--config")
            .arg(&self.place.config)
            .args([
                "worker",
                "--concurrency",
                "4",
                "--poll-ms",
                "100",
                "--drain-ms",
                "20000",
            ])
            .arg("--status-file")
            .arg(&status)
            .env("AGENTRT_DATA_DIR", data)
            .env("AGENTRT_STORE", &url)
            .env("RUST_LOG", "warn")
            .env_remove("AGENTRT_TEST_PAUSE")
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn worker");
        self.workers[i] = Some(child);
    }

    fn pid(&self, i: usize) -> Option<u32> {
        self.workers[i].as_ref().map(Child::id)
    }

    fn kill9(&mut self, i: usize) {
        if let Some(mut child) = self.workers[i].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn signal(&self, i: usize, signal: &str) {
        if let Some(pid) = self.pid(i) {
            let _ = Command::new("kill")
                .args([signal, &pid.to_string()])
                .status();
        }
    }

    /// SIGTERM every worker; each must exit 0 (drained) within the deadline.
    fn stop_all(&mut self) {
        for i in 0..self.workers.len() {
            self.signal(i, "-CONT");
            self.signal(i, "-TERM");
        }
        for (i, slot) in self.workers.iter_mut().enumerate() {
            let Some(child) = slot.as_mut() else { continue };
            let started = Instant::now();
            let status = loop {
                if let Some(status) = child.try_wait().expect("wait") {
                    break status;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(300),
                    "worker {i} did not stop after SIGTERM"
                );
                std::thread::sleep(Duration::from_millis(100));
            };
            assert_eq!(status.code(), Some(0), "worker {i} exits 0 on SIGTERM");
            *slot = None;
        }
    }

    /// The last status each worker incarnation wrote.
    fn statuses(&self) -> Vec<WorkerStatus> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(self.place.root.join("status")).expect("status dir") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "json")
                && let Ok(bytes) = std::fs::read(&path)
                && let Ok(status) = serde_json::from_slice::<WorkerStatus>(&bytes)
            {
                out.push(status);
            }
        }
        out
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for i in 0..self.workers.len() {
            self.signal(i, "-CONT");
            self.kill9(i);
        }
    }
}

/// The provider `agentrt run --detach --provider-name local --model m`
/// queues, so that library and command-line runs share one worker runtime.
fn model_spec() -> QueuedProvider {
    QueuedProvider::Configured {
        name: Some("local".into()),
        model: Some("m".into()),
    }
}

fn run_config() -> RunConfig {
    let mut config = RunConfig::default();
    config.approval = agent_host_native::config::parse_approval("permissive").expect("mode");
    config.model.model = "m".into();
    config
}

fn session_name(s: usize) -> String {
    format!("session-w{s:03}")
}

fn title(s: usize, r: usize) -> String {
    format!("ticket s{s:03} r{r:04}")
}

/// Queue `runs` runs round-robin over `sessions` sessions: the first three
/// through `agentrt run --detach`, the rest through the library call an
/// embedder makes. Returns run id → ticket title.
fn enqueue_all(
    rt: &tokio::runtime::Runtime,
    store: &PostgresStorage,
    place: &Place,
    runs: usize,
    sessions: usize,
    waves: usize,
) -> BTreeMap<String, String> {
    let mut titles = BTreeMap::new();
    let client = private_dir(&place.root, "client");
    let wave = runs.div_ceil(waves.max(1)).max(1);
    for k in 0..runs {
        if k > 0 && k % wave == 0 {
            // The load arrives in waves while the workers are being killed.
            std::thread::sleep(WAVE_PAUSE);
        }
        let (s, title) = (k % sessions, title(k % sessions, k));
        let session = session_name(s);
        let run = if k < 3 {
            let out = agentrt(
                place,
                &client,
                &[
                    "run",
                    "--detach",
                    "--provider-name",
                    "local",
                    "--model",
                    "m",
                    "--session",
                    &session,
                    &title,
                ],
            );
            assert_eq!(
                out.status.code(),
                Some(0),
                "run --detach: {}",
                text(&out.stderr)
            );
            let id = text(&out.stdout).trim().to_owned();
            assert!(id.starts_with("run-"), "prints the run id: {id:?}");
            id
        } else {
            let request = StartRequest {
                config: run_config(),
                history: None,
            };
            let id = format!("run-w{k:05}");
            rt.block_on(enqueue_start(
                store,
                NewRun {
                    run: RunId::new(id.clone()).expect("run id"),
                    session: SessionId::new(session).expect("session"),
                    prompt: &title,
                    request: &request,
                    provider: model_spec(),
                    demo: false,
                },
                now_ms(),
            ))
            .expect("enqueue");
            id
        };
        titles.insert(run, title);
    }
    titles
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64
}

/// Where the runs stand, read from the store.
#[derive(Debug, Default)]
struct Census {
    queued: usize,
    by_status: BTreeMap<String, usize>,
    running: usize,
    /// Interrupted runs without a pending decision: they wait for Resume.
    resumable: Vec<RunId>,
    /// Interrupted runs waiting for a decision on an `effect_unknown` call.
    deciding: Vec<RunId>,
    completed: Vec<RunId>,
    other: Vec<(RunId, String)>,
    found: usize,
}

fn census(rt: &tokio::runtime::Runtime, store: &PostgresStorage, ids: &[String]) -> Census {
    rt.block_on(async {
        let mut c = Census::default();
        let queue = read_queue(store).await.expect("queue");
        c.queued = queue.items.len();
        let runs: Vec<AgentRun> = store.scan_records("").await.expect("runs");
        let wanted: std::collections::HashSet<&str> = ids.iter().map(String::as_str).collect();
        for run in runs.into_iter().filter(|r| wanted.contains(r.id.as_str())) {
            c.found += 1;
            *c.by_status.entry(run.status.to_string()).or_default() += 1;
            match run.status {
                RunStatus::Running => c.running += 1,
                RunStatus::Completed => c.completed.push(run.id.clone()),
                RunStatus::Interrupted => {
                    let pending: Vec<PendingRequest> = store
                        .scan_records(&format!("{}/", run.id))
                        .await
                        .expect("pending");
                    if pending
                        .iter()
                        .any(|p| matches!(p.kind, PendingKind::Decision { .. }))
                    {
                        c.deciding.push(run.id.clone());
                    } else {
                        c.resumable.push(run.id.clone());
                    }
                }
                other => c.other.push((run.id.clone(), other.to_string())),
            }
        }
        c
    })
}

/// Wait until nothing is queued or running among `ids`.
fn wait_quiet(
    rt: &tokio::runtime::Runtime,
    store: &PostgresStorage,
    ids: &[String],
    place: &Place,
) -> Census {
    let started = Instant::now();
    loop {
        let c = census(rt, store, ids);
        if c.queued == 0 && c.running == 0 && c.found == ids.len() {
            return c;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "the workers did not finish: {c:?}\n{}",
            place.logs_tail()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

// ------------------------------------------------------------- the fleet test

fn workers_share_one_database_through_kills(runs: usize, sessions: usize) {
    let seed = std::env::var("AGENTRT_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEED);
    // A cluster of its own: killed workers leave connections behind until
    // the server notices, which must not starve other tests' connections.
    let cluster = PgCluster::start().expect("a PostgreSQL server");
    let database = cluster.create_database().expect("database");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let store = rt
        .block_on(PostgresStorage::connect(&database.url()))
        .expect("store");
    let tickets = start_tickets();
    let model = start_model(100);
    let root = tempfile::tempdir().expect("root");
    let place = Place {
        root: root.path().to_owned(),
        url: database.url(),
        config: write_config(root.path(), tickets.port, model),
    };
    audit::install(&database.url());
    let fleet = Arc::new(Mutex::new(Fleet::audited(place.clone(), WORKERS)));
    for i in 0..WORKERS {
        fleet.lock().expect("fleet").spawn(i);
    }
    // Chaos: SIGKILL and restart, or SIGSTOP past the lease and SIGCONT.
    let done = Arc::new(AtomicBool::new(false));
    let (kills, pauses) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let chaos = {
        let (fleet, done, kills, pauses) =
            (fleet.clone(), done.clone(), kills.clone(), pauses.clone());
        std::thread::spawn(move || {
            let mut rng = Rng(seed);
            while !done.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(200 + rng.below(800)));
                if done.load(Ordering::SeqCst) {
                    break;
                }
                let i = rng.below(WORKERS as u64) as usize;
                if rng.below(4) == 0 {
                    // Paused past its lease: others take its sessions over,
                    // and its writes after SIGCONT meet the fence.
                    fleet.lock().expect("fleet").signal(i, "-STOP");
                    pauses.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(3 * LEASE_TTL_MS));
                    fleet.lock().expect("fleet").signal(i, "-CONT");
                } else {
                    let mut f = fleet.lock().expect("fleet");
                    f.kill9(i);
                    kills.fetch_add(1, Ordering::SeqCst);
                    drop(f);
                    std::thread::sleep(Duration::from_millis(rng.below(500)));
                    fleet.lock().expect("fleet").spawn(i);
                }
            }
        })
    };
    let started = Instant::now();
    let titles = enqueue_all(&rt, &store, &place, runs, sessions, WAVES);
    let ids: Vec<String> = titles.keys().cloned().collect();

    let first = wait_quiet(&rt, &store, &ids, &place);
    done.store(true, Ordering::SeqCst);
    chaos.join().expect("chaos thread");
    let (kills, pauses) = (kills.load(Ordering::SeqCst), pauses.load(Ordering::SeqCst));
    eprintln!(
        "after the load: {:?}; {kills} SIGKILLs, {pauses} SIGSTOPs (seed {seed:#x})",
        first.by_status
    );
    assert!(
        kills >= MIN_KILLS,
        "the chaos killed {kills} workers, fewer than {MIN_KILLS}: too little was tested"
    );

    // The person resumes every interrupted run (through the queue; the
    // first via `agentrt resume --detach`), until none waits for Resume.
    let mut resumed = 0;
    let mut c = first;
    for round in 0..8 {
        if c.resumable.is_empty() {
            break;
        }
        for (n, run) in c.resumable.iter().enumerate() {
            if round == 0 && n == 0 {
                let client = place.root.join("client");
                let out = agentrt(&place, &client, &["resume", run.as_str(), "--detach"]);
                assert_eq!(
                    out.status.code(),
                    Some(0),
                    "resume --detach: {}",
                    text(&out.stderr)
                );
            } else {
                rt.block_on(enqueue_resume(&store, run, now_ms()))
                    .expect("queue a resume");
            }
            resumed += 1;
        }
        c = wait_quiet(&rt, &store, &ids, &place);
    }
    let elapsed = started.elapsed();

    // Every run ended completed, or waits for a decision on an effect_unknown call.
    assert!(c.resumable.is_empty(), "runs still wait for Resume: {c:?}");
    assert!(c.other.is_empty(), "runs in another state: {:?}", c.other);
    assert_eq!(c.completed.len() + c.deciding.len(), runs, "{c:?}");
    // The server saw each write at most once; a completed run's exactly once.
    let seen = tickets.seen.lock().expect("tickets").clone();
    for (title, n) in &seen {
        assert!(*n <= 1, "ticket {title:?} was sent {n} times");
    }
    for run in &c.completed {
        let title = &titles[run.as_str()];
        assert_eq!(
            seen.get(title),
            Some(&1),
            "completed run {run} sent its ticket once"
        );
    }
    for title in seen.keys() {
        assert!(
            titles.values().any(|t| t == title),
            "unknown ticket {title:?}"
        );
    }

    // The workers drain and exit 0 on SIGTERM; their counts.
    fleet.lock().expect("fleet").stop_all();
    let statuses = fleet.lock().expect("fleet").statuses();
    let fence: u64 = statuses.iter().map(|s| s.stale_refusals).sum();
    let recovered: u64 = statuses.iter().map(|s| s.recovered).sum();
    let completed: u64 = statuses.iter().map(|s| s.completed).sum();
    // Never two executors of a session at once, from the stored leases and
    // the fenced writes; a refused stale write needs a tenure that ended.
    let tenures = audit::check_one_executor_at_a_time(&database.url());
    assert!(
        tenures.run_writes >= runs as u64,
        "the audit saw {} run writes for {runs} runs",
        tenures.run_writes
    );
    assert!(
        fence == 0 || tenures.later_tenures > 0,
        "{fence} stale writes refused, but no session's lease ever changed hands: {tenures:?}"
    );
    eprintln!("executor audit: {tenures:?}");
    eprintln!(
        "{runs} runs in {sessions} sessions, {WORKERS} workers ({} incarnations): {} completed, {} waiting for a decision on an effect_unknown call, {} tickets sent, {resumed} resumes, {kills} SIGKILLs, {pauses} SIGSTOPs; fence refusals of stale writes: {fence}; runs left running by lost workers and interrupted: {recovered}; completions counted by workers: {completed}; {:.1} s",
        statuses.len(),
        c.completed.len(),
        c.deciding.len(),
        seen.len(),
        elapsed.as_secs_f64()
    );
    drop(store);
}

/// The issue's acceptance load: 500 runs in 100 sessions (about 25 s here).
#[test]
fn s14_four_workers_share_one_database_through_sigkills_and_pauses() {
    workers_share_one_database_through_kills(RUNS, SESSIONS);
}

// -------------------------------------------------------- a database restart

/// Runs and sessions of the restart test.
const RESTART_RUNS: usize = 40;
const RESTART_SESSIONS: usize = 10;
const RESTART_WORKERS: usize = 2;

#[test]
fn s14_a_database_restart_mid_load_interrupts_the_runs_in_flight_and_resume_completes_them() {
    // A cluster of its own: this test stops and starts it.
    let cluster = PgCluster::start().expect("a PostgreSQL server");
    let database = cluster.create_database().expect("database");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let store = rt
        .block_on(PostgresStorage::connect(&database.url()))
        .expect("store");
    let tickets = start_tickets();
    // Slow answers: runs are in flight when the server goes away.
    let model = start_model(300);
    let root = tempfile::tempdir().expect("root");
    let place = Place {
        root: root.path().to_owned(),
        url: database.url(),
        config: write_config(root.path(), tickets.port, model),
    };
    let mut fleet = Fleet::new(place.clone(), RESTART_WORKERS);
    for i in 0..RESTART_WORKERS {
        fleet.spawn(i);
    }
    let titles = enqueue_all(&rt, &store, &place, RESTART_RUNS, RESTART_SESSIONS, 1);
    let ids: Vec<String> = titles.keys().cloned().collect();

    // Some runs done, others in flight: stop the server, start it again.
    let started = Instant::now();
    loop {
        let c = census(&rt, &store, &ids);
        if c.completed.len() >= 4 {
            break;
        }
        assert!(started.elapsed() < DEADLINE, "no run completed: {c:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    cluster.stop().expect("stop the server");
    std::thread::sleep(Duration::from_secs(3));
    cluster.restart().expect("start the server again");
    for i in 0..RESTART_WORKERS {
        let alive = fleet.workers[i]
            .as_mut()
            .is_some_and(|c| c.try_wait().expect("wait").is_none());
        assert!(
            alive,
            "worker {i} survived the restart\n{}",
            place.logs_tail()
        );
    }

    // The workers carry on; the runs in flight were interrupted, none failed.
    let after = wait_quiet(&rt, &store, &ids, &place);
    eprintln!("after the restart: {:?}", after.by_status);
    assert!(
        after.other.is_empty(),
        "no run failed or was cancelled: {after:?}"
    );
    let hit = after.resumable.len() + after.deciding.len();
    assert!(
        hit > 0,
        "the restart interrupted no run in flight: nothing was tested"
    );

    // The person: Resume each interrupted run (through the queue); a write
    // whose outcome the restart hid is decided by what the ticket server
    // shows (done when it has the ticket, retry when it has not).
    let mut c = after;
    let mut decided = 0;
    for _round in 0..8 {
        if c.resumable.is_empty() && c.deciding.is_empty() {
            break;
        }
        for run in &c.resumable {
            rt.block_on(enqueue_resume(&store, run, now_ms()))
                .expect("queue a resume");
        }
        for run in &c.deciding {
            let journal: Vec<agent_kernel::journal::JournalRecord> = rt
                .block_on(store.scan_records(&format!("{run}/")))
                .expect("journal");
            let call = journal
                .iter()
                .find(|j| j.tool == "send_ticket")
                .expect("the ticket call")
                .call_id
                .to_string();
            let sent = tickets
                .seen
                .lock()
                .expect("tickets")
                .contains_key(&titles[run.as_str()]);
            let choice = if sent { "done" } else { "retry" };
            let out = agentrt(
                &place,
                &place.root.join("client"),
                &["decide", run.as_str(), &call, choice],
            );
            assert_eq!(
                out.status.code(),
                Some(0),
                "decide {run} {call} {choice}: {}{}",
                text(&out.stdout),
                text(&out.stderr)
            );
            decided += 1;
        }
        c = wait_quiet(&rt, &store, &ids, &place);
    }
    assert_eq!(
        c.completed.len(),
        RESTART_RUNS,
        "every run completed: {c:?}"
    );
    let seen = tickets.seen.lock().expect("tickets").clone();
    for title in titles.values() {
        assert_eq!(
            seen.get(title),
            Some(&1),
            "ticket {title:?} sent exactly once"
        );
    }
    fleet.stop_all();
    let statuses = fleet.statuses();
    let store_errors: u64 = statuses.iter().map(|s| s.store_errors).sum();
    eprintln!(
        "database restart: {hit} runs interrupted in flight, {decided} effect_unknown decisions, all {RESTART_RUNS} completed; the workers counted {store_errors} failed store operations and kept going"
    );
    drop(store);
}

// ----------------------------------------------------- a forced take-over

/// A loopback model like [`start_model`] (without delay) that holds every
/// answer until `open` is set, counting the requests that arrived.
fn start_gated_model(open: Arc<AtomicBool>, arrived: Arc<AtomicU64>) -> u16 {
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |axum::Json(body): axum::Json<serde_json::Value>| {
            let (open, arrived) = (open.clone(), arrived.clone());
            async move {
                arrived.fetch_add(1, Ordering::SeqCst);
                while !open.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                model_answer(&body)
            }
        }),
    );
    common::serve_on_loopback(app)
}

/// Poll `done` every 100 ms until it holds; fail with `what` after the deadline.
fn wait_for(what: &str, place: &Place, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < DEADLINE,
            "{what} never happened\n{}",
            place.logs_tail()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// S3.1, S3.3, S14.1: a worker paused mid-run past its lease is taken over
/// (another worker interrupts the run under a new epoch); once continued,
/// its write is refused by the fence (counted in its status), the run
/// completes after Resume with its ticket sent once, and the stored leases
/// and fenced writes show one executor of the session at a time.
#[test]
fn s14_a_worker_paused_past_its_lease_is_fenced_and_the_session_never_has_two_executors() {
    let cluster = PgCluster::start().expect("a PostgreSQL server");
    let database = cluster.create_database().expect("database");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let store = rt
        .block_on(PostgresStorage::connect(&database.url()))
        .expect("store");
    audit::install(&database.url());
    let tickets = start_tickets();
    let (open, arrived) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let model = start_gated_model(open.clone(), arrived.clone());
    let root = tempfile::tempdir().expect("root");
    let place = Place {
        root: root.path().to_owned(),
        url: database.url(),
        config: write_config(root.path(), tickets.port, model),
    };
    let mut fleet = Fleet::audited(place.clone(), 2);
    fleet.spawn(0);
    let titles = enqueue_all(&rt, &store, &place, 1, 1, 1);
    let ids: Vec<String> = titles.keys().cloned().collect();
    let run = RunId::new(ids[0].clone()).expect("run id");

    // Worker 0 runs it and waits for the model: pause it there, past its lease.
    wait_for("the model request of worker 0", &place, || {
        arrived.load(Ordering::SeqCst) >= 1
    });
    fleet.signal(0, "-STOP");
    fleet.spawn(1);
    wait_for(
        "worker 1 interrupting the run of the paused worker",
        &place,
        || census(&rt, &store, &ids).resumable.len() == 1,
    );
    // The model answers and worker 0 goes on: its next write meets the fence.
    open.store(true, Ordering::SeqCst);
    fleet.signal(0, "-CONT");
    let paused_status = place.root.join("status/w0-1.json");
    wait_for("worker 0 counting a refused stale write", &place, || {
        std::fs::read(&paused_status)
            .ok()
            .and_then(|b| serde_json::from_slice::<WorkerStatus>(&b).ok())
            .is_some_and(|s| s.stale_refusals >= 1)
    });

    // The person resumes the run; it completes and files its ticket once.
    rt.block_on(enqueue_resume(&store, &run, now_ms()))
        .expect("queue a resume");
    let c = wait_quiet(&rt, &store, &ids, &place);
    assert_eq!(c.completed, vec![run.clone()], "{c:?}");
    let seen = tickets.seen.lock().expect("tickets").clone();
    assert_eq!(seen.get(&titles[run.as_str()]), Some(&1), "{seen:?}");

    fleet.stop_all();
    let statuses = fleet.statuses();
    let paused: WorkerStatus =
        serde_json::from_slice(&std::fs::read(&paused_status).expect("status")).expect("status");
    assert!(paused.stale_refusals >= 1, "{paused:?}");
    let fence: u64 = statuses.iter().map(|s| s.stale_refusals).sum();
    let tenures = audit::check_one_executor_at_a_time(&database.url());
    eprintln!("forced take-over: {fence} stale writes refused; executor audit: {tenures:?}");
    assert!(
        tenures.later_tenures >= 1 && tenures.processes >= 2,
        "the session changed hands: {tenures:?}"
    );
    assert!(
        fence >= paused.stale_refusals,
        "the paused worker's refusals are among all: {fence}"
    );
    drop(store);
}

/// An audit of who executed each session, kept by the database itself:
/// triggers log every lease row written (owner, epoch) and every run
/// record written, with the session's lease as the writing transaction saw
/// it (the epoch its fence was checked against, in the same serializable
/// transaction) and the database role that wrote it (each worker
/// incarnation connects as its own role).
mod audit {
    use std::collections::{BTreeMap, BTreeSet};
    use std::process::Command;

    const SCHEMA: &str = r#"
CREATE TABLE audit_leases (
    seq BIGSERIAL PRIMARY KEY, session TEXT NOT NULL, owner TEXT NOT NULL,
    epoch BIGINT NOT NULL, writer TEXT NOT NULL);
CREATE TABLE audit_runs (
    seq BIGSERIAL PRIMARY KEY, run TEXT NOT NULL, session TEXT NOT NULL,
    lease_owner TEXT, lease_epoch BIGINT, writer TEXT NOT NULL);
CREATE FUNCTION audit_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO audit_leases (session, owner, epoch, writer)
        VALUES (NEW.session, NEW.owner, NEW.epoch, session_user);
    RETURN NEW;
END $$;
CREATE TRIGGER audit_lease AFTER INSERT OR UPDATE ON agentrt_leases
    FOR EACH ROW EXECUTE FUNCTION audit_lease();
CREATE FUNCTION audit_run() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    record jsonb;
    lease_owner TEXT;
    lease_epoch BIGINT;
BEGIN
    IF NEW.tbl = 'runs' THEN
        record := convert_from(NEW.value, 'UTF8')::jsonb;
        SELECT owner, epoch INTO lease_owner, lease_epoch
            FROM agentrt_leases WHERE session = record->>'session';
        INSERT INTO audit_runs (run, session, lease_owner, lease_epoch, writer)
            VALUES (record->>'id', record->>'session', lease_owner, lease_epoch, session_user);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER audit_run AFTER INSERT OR UPDATE ON agentrt_kv
    FOR EACH ROW EXECUTE FUNCTION audit_run();
"#;

    /// The database's URL with `role` (created here, a superuser of the
    /// throwaway cluster, which trusts loopback) as its user.
    pub fn role_url(url: &str, role: &str) -> String {
        psql(url, &format!("CREATE ROLE {role} LOGIN SUPERUSER"));
        url.replacen("postgres://postgres@", &format!("postgres://{role}@"), 1)
    }

    /// Install the audit's tables and triggers (after the store's schema).
    pub fn install(url: &str) {
        psql(url, SCHEMA);
    }

    /// Rows of `sql`, fields split at tabs.
    fn rows(url: &str, sql: &str) -> Vec<Vec<String>> {
        psql(url, sql)
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| l.split('\t').map(str::to_owned).collect())
            .collect()
    }

    fn psql(url: &str, sql: &str) -> String {
        let bin = agent_store_postgres::test_cluster::find_bin().expect("PostgreSQL binaries");
        let out = Command::new(bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1"])
            .args(["-d", url, "-c", sql])
            .output()
            .expect("run psql");
        assert!(
            out.status.success(),
            "psql {sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// What the audit saw.
    #[derive(Debug, Default)]
    pub struct Tenures {
        /// Distinct (session, epoch) tenures.
        pub tenures: u64,
        /// Tenures after a session's first (its lease taken again).
        pub later_tenures: u64,
        /// Distinct lease owners.
        pub owners: u64,
        /// Distinct worker incarnations that held leases.
        pub processes: u64,
        /// Run records written by workers.
        pub run_writes: u64,
    }

    /// Check from the audit that no session ever had two executors at once:
    /// - per session, lease epochs never go back, and each epoch has one
    ///   owner: a new owner comes with a higher epoch;
    /// - the leases of each owner (a runtime of one worker process) were
    ///   written by one database role (that worker incarnation);
    /// - every run record a worker wrote was written under the lease of its
    ///   session live in its transaction (the epoch its fence passed), and
    ///   that lease's owner is a runtime of the writing worker;
    /// - per session, in the order the writes were made, their epochs never
    ///   go back: the writes of one tenure do not interleave with another's.
    pub fn check_one_executor_at_a_time(url: &str) -> Tenures {
        let mut seen = Tenures::default();
        let mut role_of_owner: BTreeMap<String, String> = BTreeMap::new();
        let mut owner_of_tenure: BTreeMap<(String, i64), String> = BTreeMap::new();
        let mut last_epoch: BTreeMap<String, i64> = BTreeMap::new();
        let mut owners = BTreeSet::new();
        for row in rows(
            url,
            "SELECT session, owner, epoch, writer FROM audit_leases ORDER BY seq",
        ) {
            let [session, owner, epoch, writer] = <[String; 4]>::try_from(row).expect("4 fields");
            let epoch: i64 = epoch.parse().expect("epoch");
            if writer == "postgres" {
                continue;
            }
            let process = role_of_owner.entry(owner.clone()).or_insert(writer.clone());
            assert_eq!(
                process, &writer,
                "the leases of owner {owner} were written by two processes"
            );
            if let Some(last) = last_epoch.get(&session) {
                assert!(
                    epoch >= *last,
                    "session {session}: epoch {epoch} after {last}"
                );
            }
            let first_of_session = !last_epoch.contains_key(&session);
            last_epoch.insert(session.clone(), epoch);
            match owner_of_tenure.get(&(session.clone(), epoch)) {
                Some(holder) => assert_eq!(
                    holder, &owner,
                    "session {session}: epoch {epoch} held by {holder} and by {owner}"
                ),
                None => {
                    seen.tenures += 1;
                    if !first_of_session {
                        seen.later_tenures += 1;
                    }
                    owner_of_tenure.insert((session.clone(), epoch), owner.clone());
                }
            }
            owners.insert(owner);
        }
        seen.owners = owners.len() as u64;
        seen.processes = role_of_owner.values().collect::<BTreeSet<_>>().len() as u64;
        let mut last_write_epoch: BTreeMap<String, i64> = BTreeMap::new();
        for row in rows(
            url,
            "SELECT run, session, coalesce(lease_owner, ''), coalesce(lease_epoch, -1), writer \
             FROM audit_runs ORDER BY seq",
        ) {
            let [run, session, lease_owner, lease_epoch, writer] =
                <[String; 5]>::try_from(row).expect("5 fields");
            if writer == "postgres" {
                continue;
            }
            seen.run_writes += 1;
            let epoch: i64 = lease_epoch.parse().expect("epoch");
            assert_eq!(
                role_of_owner.get(&lease_owner),
                Some(&writer),
                "run {run} of session {session} written by {writer} under the lease of {lease_owner} (epoch {epoch})"
            );
            assert_eq!(
                owner_of_tenure.get(&(session.clone(), epoch)),
                Some(&lease_owner),
                "run {run}: epoch {epoch} of session {session} is not a tenure of {lease_owner}"
            );
            if let Some(last) = last_write_epoch.get(&session) {
                assert!(
                    epoch >= *last,
                    "session {session}: a write under epoch {epoch} after one under {last}"
                );
            }
            last_write_epoch.insert(session, epoch);
        }
        seen
    }
}
