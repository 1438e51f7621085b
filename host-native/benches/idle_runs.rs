//! Many idle runs in one process (issue 18 item 6): N runs of the native
//! runtime (`App`: SQLite, the assembly, an OpenAI-compatible provider), each
//! in its own session opened as `agentrt run` opens one, each waiting on a
//! slow model. Prints the memory per idle run (growth of the process's
//! resident set from `/proc/self/status`, divided by N) and the time to
//! start all of them.
//!
//! ```text
//! cargo bench -p agent-host-native --bench idle_runs            # 10,000 runs
//! BENCH_QUICK=1 cargo bench -p agent-host-native --bench idle_runs   # 1,000 runs
//! IDLE_RUNS=N ...          # any other number
//! BENCH_DIR=/some/disk ... # where the database goes (default: .)
//! BENCH_JSON=<file> ...    # also append the figures as JSON lines (common/mod.rs)
//! ```
//!
//! The slow model is a real HTTP server on 127.0.0.1 that this binary starts
//! as a child process of itself (so that its memory and sockets are not
//! counted): it answers each `POST …/chat/completions` with `200` and an
//! event stream, then sends nothing but an SSE comment every 20 s (so the
//! client's 60 s idle timeout never fires) until the bench ends. The child
//! prints one line per request; the bench counts them to know when every
//! run is waiting on its model.
//!
//! One run is started and left waiting before the first measure, so that
//! what every process pays once (the HTTP client, SQLite's cache, the tool
//! actors) is not counted per run.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agent_host_native::app::{App, AppOptions};
use agent_host_native::host::SystemClock;
use agent_kernel::SessionId;
use agent_kernel::run::RunStatus;
use agent_supervisor::{OpenAiConfig, OpenAiProvider, RunConfig};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod common;

/// Set in the child: be the slow model server instead of the bench.
const SERVER_ENV: &str = "AGENTRT_BENCH_SLOW_MODEL_SERVER";

fn main() {
    if std::env::var_os(SERVER_ENV).is_some() {
        slow_model_server();
        return;
    }
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let n: usize = std::env::var("IDLE_RUNS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(if quick { 1_000 } else { 10_000 });
    raise_open_files_limit();
    let dir = tempfile::tempdir_in(std::env::var_os("BENCH_DIR").unwrap_or_else(|| ".".into()))
        .expect("dir");
    // Private, as agentrt wants its data directory.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    let (mut child, port, requests) = start_server();
    rt.block_on(idle_runs(dir.path(), port, n, quick, &requests));
    let _ = child.kill();
    let _ = child.wait();
    drop(dir);
    // Ending the process ends the N runs; dropping them one by one first
    // would only take time.
    std::process::exit(0);
}

async fn idle_runs(
    data: &std::path::Path,
    port: u16,
    n: usize,
    quick: bool,
    requests: &AtomicUsize,
) {
    println!("== many idle runs: {n} runs, each waiting on a slow loopback model ==");
    let clock = Arc::new(SystemClock::new(tokio::runtime::Handle::current()));
    let provider = Arc::new(
        OpenAiProvider::new(
            OpenAiConfig::new(format!("http://127.0.0.1:{port}/v1")),
            clock,
        )
        .expect("provider"),
    );
    let app = App::open(data, AppOptions::default(), provider)
        .await
        .expect("app");
    let mut sessions = Vec::with_capacity(n + 1);
    // The warm-up run: what the process pays once.
    let warm = SessionId::new("idle-warm-up").expect("session");
    sessions.push(app.open_session(&warm).await.expect("open session"));
    app.runtime()
        .start(&warm, "wait for the model", RunConfig::default())
        .await
        .expect("start");
    wait_for(requests, 1, Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_kib();

    let t = Instant::now();
    for i in 0..n {
        let session = SessionId::new(format!("idle-{i:05}")).expect("session");
        sessions.push(app.open_session(&session).await.expect("open session"));
        app.runtime()
            .start(&session, "wait for the model", RunConfig::default())
            .await
            .expect("start");
    }
    let started = t.elapsed();
    let arrived = wait_for(requests, n + 1, Duration::from_secs(600)).await;
    let waiting = t.elapsed();
    // Let allocations settle (the heartbeat, the streams' first reads).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = rss_kib();
    // One heartbeat: every session lease the process holds, renewed in one
    // storage step (one SQLite commit; it was a commit per session).
    let renewing = Instant::now();
    let lost = app.runtime().leases().renew_all().await;
    let renewal = renewing.elapsed();
    assert!(lost.is_empty(), "leases lost at renewal: {lost:?}");
    let runs = app.runtime().runs().await.expect("runs");
    let running = runs
        .iter()
        .filter(|r| r.status == RunStatus::Running)
        .count();
    let seen = requests.load(Ordering::SeqCst);
    let per_run = (after as f64 - before as f64) / n as f64;
    println!(
        "resident set: {:.1} MiB before, {:.1} MiB after {n} idle runs = {per_run:.1} KiB per run",
        before as f64 / 1024.0,
        after as f64 / 1024.0
    );
    println!(
        "started {n} runs in {:.2} s ({:.2} ms per run); all {} model requests arrived after {:.2} s{}; {running} of {} runs are running; the server saw {seen} requests",
        started.as_secs_f64(),
        started.as_secs_f64() * 1e3 / n as f64,
        n + 1,
        waiting.as_secs_f64(),
        if arrived { "" } else { " (NOT ALL: timed out)" },
        runs.len(),
    );
    println!(
        "one heartbeat renewed the {} held session leases in {:.1} ms",
        n + 1,
        renewal.as_secs_f64() * 1e3
    );
    let scope = if quick {
        format!("{n} runs (quick; the full bench starts 10,000)")
    } else {
        format!("{n} runs")
    };
    let details = json!({
        "runs": n,
        "running": running,
        "requests": seen,
        "rss_before_mib": before as f64 / 1024.0,
        "rss_after_mib": after as f64 / 1024.0,
        "quick": quick,
    });
    common::emit(
        "idle_runs",
        "idle_run_memory",
        &format!(
            "memory per idle run (resident set growth / N), {scope} waiting on a slow loopback model"
        ),
        per_run,
        "KiB",
        details.clone(),
    );
    common::emit(
        "idle_runs",
        "idle_runs_start",
        &format!("time to start {scope} (open the session + start, one after another)"),
        started.as_secs_f64(),
        "s",
        json!({ "per_run_ms": started.as_secs_f64() * 1e3 / n as f64, "runs": n }),
    );
    common::emit(
        "idle_runs",
        "idle_runs_waiting",
        &format!("time until all {scope} wait on the model (every request arrived)"),
        waiting.as_secs_f64(),
        "s",
        json!({ "all_arrived": arrived, "runs": n }),
    );
    common::emit(
        "idle_runs",
        "idle_runs_lease_renewal",
        &format!("one heartbeat renewing the leases of {scope} (one SQLite commit)"),
        renewal.as_secs_f64() * 1e3,
        "ms",
        json!({ "leases": n + 1 }),
    );
    std::io::stdout().flush().ok();
    drop(sessions);
}

/// Waits until `count` reaches `want` (or `limit` passes); true when it did.
async fn wait_for(count: &AtomicUsize, want: usize, limit: Duration) -> bool {
    let t = Instant::now();
    while count.load(Ordering::SeqCst) < want {
        if t.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// This process's resident set, in KiB (`VmRSS` of `/proc/self/status`).
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// Each idle run holds one socket: raise the soft limit on open files to
/// the hard one (the child server inherits it).
#[allow(unsafe_code)]
fn raise_open_files_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write `limit`, a valid
    // rlimit owned by this frame.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

// ---------------------------------------------------------------------------
// the slow model server (the child process)
// ---------------------------------------------------------------------------

/// Starts this binary as the slow model server; returns the child, its port
/// and the count of requests it has received (read from its stdout).
fn start_server() -> (Child, u16, Arc<AtomicUsize>) {
    let mut child = Command::new(std::env::current_exe().expect("this binary"))
        .env(SERVER_ENV, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the slow model server");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = lines.next().expect("the port line").expect("read");
    let port: u16 = first
        .strip_prefix("port ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("the server said {first:?}"));
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if line == "request" {
                counted.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    (child, port, requests)
}

fn slow_model_server() {
    // The bench closes our stdin when it ends (or dies): then so do we.
    std::thread::spawn(|| {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
        std::process::exit(0);
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        println!("port {port}");
        std::io::stdout().flush().expect("flush");
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(hold(socket));
        }
    });
}

/// Reads one request, answers `200` with an event stream, then keeps it
/// open with a comment every 20 s.
async fn hold(mut socket: tokio::net::TcpStream) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let body_start = loop {
        let Ok(read) = socket.read(&mut chunk).await else {
            return;
        };
        if read == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..read]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..body_start]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < body_start + length {
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(read) => buf.extend_from_slice(&chunk[..read]),
        }
    }
    let answer = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                  cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n";
    if socket.write_all(answer.as_bytes()).await.is_err() {
        return;
    }
    println!("request");
    let comment = ": the model is thinking\n\n";
    let frame = format!("{:x}\r\n{comment}\r\n", comment.len());
    loop {
        tokio::time::sleep(Duration::from_secs(20)).await;
        if socket.write_all(frame.as_bytes()).await.is_err() {
            return;
        }
    }
}
