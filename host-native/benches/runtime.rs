//! Benchmarks of issue 8 item 7, printing medians (a bench binary, not
//! criterion: most figures are per-round distributions and counts, not one
//! timed closure).
//!
//! ```text
//! cargo bench -p agent-host-native --bench runtime
//! BENCH_QUICK=1 cargo bench -p agent-host-native --bench runtime   # smaller runs
//! BENCH_ONLY=2 cargo bench -p agent-host-native --bench runtime     # sections 2 and 3
//! BENCH_DIR=/some/disk cargo bench ...   # where the databases go (default: .)
//! BENCH_ROUNDS=100,1000 cargo bench ...  # run lengths of section 1
//! BENCH_HOSTS=memory cargo bench ...      # section 1 on one host (memory|sqlite)
//! ```
//!
//! 1. Runtime overhead per tool round (scripted model, trivial read-only
//!    tool) on the memory host and on SQLite, runs of 100 and 1,000 rounds;
//!    the median round of the last tenth against the first tenth.
//! 2. Durable commits per effectful tool round on SQLite, and the SQLite
//!    round time as a multiple of one `fsync` and of one bare SQLite commit
//!    measured on the same disk in the same run.
//! 3. Stored bytes per tool round (tables only, no blobs).
//! 4. Resume time for runs with 10, 100, 1,000 and 10,000 journal records,
//!    and for a true 1,000-round run (999 rounds of one call + the question).
//! 5. Session take-over with 0, 1,000 and 10,000 runs stored in other
//!    sessions: a fresh runtime recovers one session (`recover_session`,
//!    which interrupts the run a crashed owner left `running` there) and
//!    starts a run in it.
//!
//! With `BENCH_JSON=<file>` every figure is also appended to that file as a
//! JSON line (see `common/mod.rs`); `cargo xtask bench` runs this bench that
//! way and puts the figures beside their aims.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_host_native::host::{SystemClock, TokioExecutor};
use agent_host_native::process::Liveness;
use agent_host_native::sqlite::SqliteStorage;
use agent_kernel::budget::Budget;
use agent_kernel::host::{Batch, Host, Lifecycle, SeededEntropy, Storage, Table};
use agent_kernel::memory::MemoryHost;
use agent_kernel::run::{ActivityKind, PendingKind, RunStatus};
use agent_kernel::{OwnerId, RunId, SessionId};
use agent_supervisor::sim::tools::{SimToolsConfig, ToolLog, spawn_sim_tools};
use agent_supervisor::{RunConfig, RunEvent, Runtime, RuntimeOptions, Scenario, ScriptedProvider};
use serde_json::json;

mod common;

/// One figure of this bench for `BENCH_JSON` (see `common::emit`).
fn emit(name: &str, label: &str, value: f64, unit: &str, extra: serde_json::Value) {
    common::emit("runtime", name, label, value, unit, extra);
}

fn median(mut v: Vec<Duration>) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A scenario of `rounds` tool rounds, each with `calls` calls of `tool`,
/// optionally ending with a question (so that the run waits, for resume).
fn scenario(rounds: usize, calls: usize, tool: &str, ask_at_end: bool) -> Scenario {
    let mut turns = Vec::with_capacity(rounds + 2);
    for r in 0..rounds {
        let calls: Vec<_> = (0..calls)
            .map(|c| {
                let args = if tool == "write_note" {
                    json!({"path": format!("notes/n{}.txt", (r * 7 + c) % 50), "text": "x"})
                } else {
                    json!({"path": "notes/a.txt"})
                };
                json!({"name": tool, "arguments": args})
            })
            .collect();
        turns.push(json!({"text": "", "tool_calls": calls, "usage": {"input_tokens": 10, "output_tokens": 2}}));
    }
    if ask_at_end {
        turns.push(json!({"text": "", "tool_calls": [{"name": "ask_user", "arguments": {"question": "go on?"}}],
            "usage": {"input_tokens": 10, "output_tokens": 2}}));
    }
    turns.push(json!({"text": "done", "usage": {"input_tokens": 10, "output_tokens": 2}}));
    Scenario::from_json(&json!({ "turns": turns }).to_string()).expect("scenario")
}

fn config(rounds: usize, calls: usize) -> RunConfig {
    RunConfig {
        budget: Budget {
            max_tool_rounds: u32::try_from(rounds + 1).unwrap_or(1000).min(1000),
            max_tool_calls: u32::try_from(rounds * calls + 1)
                .unwrap_or(10_000)
                .min(10_000),
            max_tokens: None,
            max_duration_ms: None,
        },
        ..RunConfig::default()
    }
}

/// Per-round durations from the instants of successive model requests.
fn rounds_from(stamps: &[Instant]) -> Vec<Duration> {
    stamps.windows(2).map(|w| w[1] - w[0]).collect()
}

struct Measured {
    per_round: Vec<Duration>,
    total: Duration,
}

/// Prints a run's per-round figures and emits its median as `name`, in µs
/// per round divided by `per` (10 for rounds of 10 calls: µs per call).
fn report_rounds(label: &str, name: &str, per: usize, m: &Measured) {
    let n = m.per_round.len();
    if n == 0 {
        println!("{label}: no rounds measured");
        return;
    }
    let tenth = (n / 10).max(1);
    let first = median(m.per_round[..tenth].to_vec());
    let last = median(m.per_round[n - tenth..].to_vec());
    let all = median(m.per_round.clone());
    let per = per.max(1) as f64;
    emit(
        name,
        label,
        us(all) / per,
        "us",
        json!({
            "rounds": n,
            "first_tenth": us(first) / per,
            "last_tenth": us(last) / per,
            "mean": us(m.total) / n as f64 / per,
        }),
    );
    println!(
        "{label:<34} rounds {n:>5}  median {:>9.1} µs  first tenth {:>9.1} µs  last tenth {:>9.1} µs  (last/first {:.2})  mean {:>9.1} µs",
        us(all) / per,
        us(first) / per,
        us(last) / per,
        us(last) / us(first).max(1e-9),
        us(m.total) / n as f64 / per
    );
}

// ---------------------------------------------------------------------------
// memory host
// ---------------------------------------------------------------------------

fn run_memory(rounds: usize, calls: usize, tool: &str, ask: bool) -> (MemoryHost, RunId, Measured) {
    let mem = MemoryHost::fifo(1);
    let host = mem.host();
    let tools = spawn_sim_tools(
        Arc::new(mem.executor().clone()),
        host.clock.clone(),
        ToolLog::default(),
        SimToolsConfig::default(),
    );
    let provider = Arc::new(ScriptedProvider::new(
        scenario(rounds, calls, tool, ask),
        host.clock.clone(),
    ));
    let runtime = Runtime::new(
        host.clone(),
        OwnerId::new("bench").expect("owner"),
        tools,
        provider,
        RuntimeOptions::default(),
    );
    let stamps = Arc::new(Mutex::new(Vec::new()));
    let events = runtime.subscribe();
    {
        let stamps = stamps.clone();
        agent_kernel::host::Executor::spawn(
            mem.executor(),
            Box::pin(async move {
                while let Ok(e) = events.recv().await {
                    if let RunEvent::Activity(a) = e
                        && matches!(a.kind, ActivityKind::ModelRequest { .. })
                    {
                        stamps.lock().expect("stamps").push(Instant::now());
                    }
                }
            }),
        );
    }
    let session = SessionId::new("bench-session").expect("session");
    let start = Instant::now();
    let run = mem
        .block_on_advancing(async {
            let run = runtime
                .start(&session, "bench", config(rounds, calls))
                .await?;
            runtime.wait_settled(&run).await?;
            Ok::<_, agent_supervisor::RunError>(run)
        })
        .expect("settled")
        .expect("run");
    let total = start.elapsed();
    let per_round = rounds_from(&stamps.lock().expect("stamps"));
    (mem, run, Measured { per_round, total })
}

// ---------------------------------------------------------------------------
// SQLite on tokio
// ---------------------------------------------------------------------------

async fn sqlite_runtime(
    path: &Path,
    rounds: usize,
    calls: usize,
    tool: &str,
    ask: bool,
) -> (Runtime, Arc<SqliteStorage>) {
    let storage = Arc::new(
        SqliteStorage::open_with_liveness(path, Arc::new(|_: &OwnerId| Liveness::Unknown))
            .await
            .expect("open"),
    );
    let handle = tokio::runtime::Handle::current();
    let executor = Arc::new(TokioExecutor::new(handle.clone()));
    let host = Host {
        storage: storage.clone(),
        clock: Arc::new(SystemClock::new(handle)),
        executor: executor.clone(),
        entropy: Arc::new(SeededEntropy::new(2)),
        lifecycle: Lifecycle::new(),
        durable: true,
    };
    let tools = spawn_sim_tools(
        executor.clone(),
        host.clock.clone(),
        ToolLog::default(),
        SimToolsConfig::default(),
    );
    let provider = Arc::new(ScriptedProvider::new(
        scenario(rounds, calls, tool, ask),
        host.clock.clone(),
    ));
    let runtime = Runtime::new(
        host,
        OwnerId::new("bench").expect("owner"),
        tools,
        provider,
        RuntimeOptions::default(),
    );
    (runtime, storage)
}

async fn run_sqlite(
    path: &Path,
    rounds: usize,
    calls: usize,
    tool: &str,
) -> (Arc<SqliteStorage>, Measured, (u64, u64)) {
    let (runtime, storage) = sqlite_runtime(path, rounds, calls, tool, false).await;
    let stamps = Arc::new(Mutex::new(Vec::new()));
    let events = runtime.subscribe();
    {
        let stamps = stamps.clone();
        tokio::spawn(async move {
            while let Ok(e) = events.recv().await {
                if let RunEvent::Activity(a) = e
                    && matches!(a.kind, ActivityKind::ModelRequest { .. })
                {
                    stamps.lock().expect("stamps").push(Instant::now());
                }
            }
        });
    }
    let session = SessionId::new("bench-session").expect("session");
    let (before, blobs_before) = (storage.commit_count(), storage.blob_write_count());
    let start = Instant::now();
    let run = runtime
        .start(&session, "bench", config(rounds, calls))
        .await
        .expect("start");
    let settled = runtime.wait_settled(&run).await.expect("settled");
    let total = start.elapsed();
    assert_eq!(
        settled.status,
        RunStatus::Completed,
        "{:?}",
        settled.stop_reason
    );
    let commits = storage.commit_count() - before;
    let blob_writes = storage.blob_write_count() - blobs_before;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let per_round = rounds_from(&stamps.lock().expect("stamps"));
    (
        storage,
        Measured { per_round, total },
        (commits, blob_writes),
    )
}

/// Samples of one `write` + `fsync` of 4 KiB in `dir`, and of one bare
/// SQLite commit (one row, WAL, synchronous=FULL), `n` of each.
fn disk_baselines(dir: &Path, n: usize) -> (Vec<Duration>, Vec<Duration>) {
    use std::io::Write;
    let mut fsyncs = Vec::new();
    let mut f = std::fs::File::create(dir.join("fsync.bin")).expect("file");
    for _ in 0..n {
        let t = Instant::now();
        f.write_all(&[7u8; 4096]).expect("write");
        f.sync_all().expect("fsync");
        fsyncs.push(t.elapsed());
    }
    let conn = rusqlite::Connection::open(dir.join("bare.sqlite3")).expect("open");
    conn.pragma_update(None, "journal_mode", "WAL")
        .expect("wal");
    conn.pragma_update(None, "synchronous", "FULL")
        .expect("full");
    conn.execute(
        "CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v BLOB)",
        [],
    )
    .expect("table");
    let mut commits = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        conn.execute(
            "INSERT INTO t (v) VALUES (?1)",
            rusqlite::params![vec![1u8; 200]],
        )
        .expect("insert");
        commits.push(t.elapsed());
    }
    (fsyncs, commits)
}

/// Copy everything of a memory store into SQLite (tables and blobs), in
/// batches of a few thousand rows or a few hundred blobs.
async fn copy_into(from: &dyn Storage, to: &SqliteStorage) {
    let hashes = from.list_blobs().await.expect("blobs");
    for chunk in hashes.chunks(500) {
        let mut batch = Batch::new();
        for hash in chunk {
            let bytes = from.get_blob(hash).await.expect("get").expect("blob");
            batch.add_blob(bytes);
        }
        to.commit(batch).await.expect("commit blobs");
    }
    for table in Table::ALL {
        let rows = from.scan_prefix(table, "").await.expect("scan");
        for chunk in rows.chunks(2000) {
            let mut batch = Batch::new();
            for (k, v) in chunk {
                batch = batch.put(table, k.clone(), v.clone());
            }
            to.commit(batch).await.expect("commit");
        }
    }
}

/// Writes everything of the memory stores `mems` into a new SQLite file at
/// `path` and closes it, so that the file alone (no `-wal`) holds it and
/// can be copied.
fn sqlite_template(rt: &tokio::runtime::Runtime, mems: &[MemoryHost], path: &Path) {
    let target = SqliteStorage::open_inline(path, Arc::new(|_: &OwnerId| Liveness::Unknown))
        .expect("open template");
    for mem in mems {
        rt.block_on(copy_into(mem.storage().as_ref(), &target));
    }
    drop(target);
    for suffix in ["-wal", "-shm"] {
        let side = format!("{}{suffix}", path.display());
        if let Ok(meta) = std::fs::metadata(&side) {
            assert_eq!(meta.len(), 0, "{side} is left after closing the template");
        }
    }
}

/// A fresh copy of the template at `to` (the template stays untouched),
/// flushed to the disk before it is used: a database a runtime opens has
/// long been written back, while the pages of a file just copied are still
/// dirty in the page cache, and the first `fsync` of its WAL would pay for
/// writing back all of them (the larger the database, the longer).
fn copy_database(template: &Path, to: &Path) {
    remove_database(to);
    std::fs::copy(template, to).expect("copy the template");
    std::fs::File::open(to)
        .and_then(|f| f.sync_all())
        .expect("flush the copy");
}

fn remove_database(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

// ---------------------------------------------------------------------------
// 5. session take-over
// ---------------------------------------------------------------------------

/// A scenario of `n` one-line answers: the `k`-th run of a session plays
/// turn `k` (the turn played is the number of earlier assistant messages).
fn answers(n: usize) -> Scenario {
    let turns: Vec<_> = (0..n)
        .map(|_| json!({"text": "done", "usage": {"input_tokens": 10, "output_tokens": 2}}))
        .collect();
    Scenario::from_json(&json!({ "turns": turns }).to_string()).expect("scenario")
}

const RUNS_PER_OTHER_SESSION: usize = 10;

/// Runs stored by one memory host: starting a run there costs time in the
/// number of runs it already holds, so the other sessions' runs are made
/// by several hosts (each its own seed, so that their ids differ) and
/// copied into one database.
const RUNS_PER_STORE: usize = 500;

/// Memory stores holding `others` completed runs in other sessions
/// (`RUNS_PER_OTHER_SESSION` each) and, in session `target`, one run a
/// crashed owner left `running` (it waits on a model answer an hour away
/// on the memory host's clock).
fn takeover_stores(others: usize, target: &SessionId) -> Vec<MemoryHost> {
    let runtime = |mem: &MemoryHost, owner: &str, scenario: Scenario| {
        let host = mem.host();
        let tools = spawn_sim_tools(
            Arc::new(mem.executor().clone()),
            host.clock.clone(),
            ToolLog::default(),
            SimToolsConfig::default(),
        );
        let provider = Arc::new(ScriptedProvider::new(scenario, host.clock.clone()));
        Runtime::new(
            host,
            OwnerId::new(owner).expect("owner"),
            tools,
            provider,
            RuntimeOptions::default(),
        )
    };
    let mut stores = Vec::new();
    let mut made = 0;
    while made < others {
        let mem = MemoryHost::fifo(100 + stores.len() as u64);
        let earlier = runtime(&mem, "bench-earlier", answers(RUNS_PER_OTHER_SESSION + 1));
        let upto = (made + RUNS_PER_STORE).min(others);
        for i in made..upto {
            let session = SessionId::new(format!("other-{:05}", i / RUNS_PER_OTHER_SESSION))
                .expect("session");
            let settled = mem
                .block_on_advancing(async {
                    let run = earlier
                        .start(&session, "an earlier turn", RunConfig::default())
                        .await?;
                    earlier.wait_settled(&run).await
                })
                .expect("settled")
                .expect("run");
            assert_eq!(settled.status, RunStatus::Completed);
        }
        made = upto;
        stores.push(mem);
    }
    let mem = MemoryHost::fifo(5);
    let slow = Scenario::from_json(
        &json!({"turns": [{"text": "late", "delay_ms": 3_600_000}]}).to_string(),
    )
    .expect("scenario");
    let crashed = runtime(&mem, "bench-crashed", slow);
    mem.block_on(crashed.start(target, "left running", RunConfig::default()))
        .expect("started")
        .expect("run");
    mem.executor().run_until_stalled();
    stores.push(mem);
    stores
}

/// One take-over on a fresh copy of `template`: a new runtime recovers
/// `target` and starts a run there. Returns (recover, recover + start).
fn takeover_once(
    rt: &tokio::runtime::Runtime,
    template: &Path,
    copy: &Path,
    target: &SessionId,
) -> (Duration, Duration) {
    copy_database(template, copy);
    let sample = rt.block_on(async {
        let (runtime, _storage) = sqlite_runtime(copy, 0, 0, "read_note", false).await;
        let t = Instant::now();
        let recovered = runtime.recover_session(target).await.expect("recover");
        let recover = t.elapsed();
        let run = runtime
            .start(target, "a new turn", RunConfig::default())
            .await
            .expect("start in the taken-over session");
        let total = t.elapsed();
        assert_eq!(recovered.len(), 1, "the crashed run is recovered");
        runtime.wait_settled(&run).await.expect("settled");
        (recover, total)
    });
    remove_database(copy);
    sample
}

fn main() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let dir = tempfile::tempdir_in(std::env::var_os("BENCH_DIR").unwrap_or_else(|| ".".into()))
        .expect("dir");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    // BENCH_ROUNDS=100,1000 overrides the run lengths of section 1.
    let sizes: Vec<usize> = match std::env::var("BENCH_ROUNDS") {
        Ok(list) => list
            .split(',')
            .filter_map(|n| n.trim().parse().ok())
            .collect(),
        Err(_) => vec![100, 1000],
    };
    // BENCH_ONLY=1,2,3,4,5 picks sections (3 needs 2).
    let only = std::env::var("BENCH_ONLY").unwrap_or_else(|_| "1,2,3,4,5".into());
    let on = |n: &str| only.split(',').any(|s| s.trim() == n);
    let hosts = std::env::var("BENCH_HOSTS").unwrap_or_else(|_| "memory,sqlite".into());
    let host_on = |h: &str| hosts.split(',').any(|s| s.trim() == h);

    if on("1") {
        section_1(&rt, dir.path(), &sizes, &host_on);
    }
    if on("2") {
        section_2_3(&rt, dir.path(), quick);
    }
    if on("4") {
        section_4(&rt, dir.path(), quick);
    }
    if on("5") {
        section_5(&rt, dir.path(), quick);
    }
}

fn section_1(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    sizes: &[usize],
    host_on: &dyn Fn(&str) -> bool,
) {
    println!("== 1. runtime overhead per tool round (scripted model, read-only tool) ==");
    if host_on("memory") {
        for &n in sizes {
            let (_, _, m) = run_memory(n, 1, "read_note", false);
            report_rounds(
                &format!("memory host, {n} rounds"),
                &format!("round_memory_{n}"),
                1,
                &m,
            );
        }
        // The budget caps a run at 1,000 rounds and 10,000 calls: the
        // 10,000-call run is 1,000 rounds of 10 calls, reported per call.
        let (_, _, m) = run_memory(1000, 10, "read_note", false);
        report_rounds(
            "memory host, 1,000 rounds x 10 calls, per call",
            "call_memory_10000",
            10,
            &m,
        );
    }
    if host_on("sqlite") {
        for &n in sizes {
            let path = dir.join(format!("overhead-{n}.sqlite3"));
            let (_, m, _) = rt.block_on(run_sqlite(&path, n, 1, "read_note"));
            report_rounds(
                &format!("sqlite (tokio), {n} rounds"),
                &format!("round_sqlite_{n}"),
                1,
                &m,
            );
            remove_database(&path);
        }
    }
}

fn section_2_3(rt: &tokio::runtime::Runtime, dir: &Path, quick: bool) {
    println!("\n== 2. durable commits per effectful tool round (write_note, SQLite) ==");
    let n = if quick { 50 } else { 200 };
    let path = dir.join("effects.sqlite3");
    // Baselines before and after the run, so that all three share the disk's mood.
    let samples = if quick { 30 } else { 100 };
    let (mut fsyncs, mut bares) = disk_baselines(dir, samples);
    let (storage, m, commits) = rt.block_on(run_sqlite(&path, n, 1, "write_note"));
    let (f2, b2) = disk_baselines(dir, samples);
    // What every run stores once (its start, the final answer): a run of no
    // tool round, so that the figures per round leave it out.
    let base_path = dir.join("effects-0.sqlite3");
    let (base_storage, _, base_commits) = rt.block_on(run_sqlite(&base_path, 0, 1, "write_note"));
    let (_, base_bytes) = rt
        .block_on(base_storage.table_footprint())
        .expect("footprint");
    drop(base_storage);
    remove_database(&base_path);
    let fixed_commits = base_commits.0 + base_commits.1;
    fsyncs.extend(f2);
    bares.extend(b2);
    let (fsync, bare) = (median(fsyncs), median(bares));
    let round = median(m.per_round.clone());
    println!(
        "effectful rounds {n}: {} fenced batch commits = {:.2} per round, plus {} blob writes = {:.2} per round (each its own SQLite transaction; incl. start and final answer)",
        commits.0,
        commits.0 as f64 / n as f64,
        commits.1,
        commits.1 as f64 / n as f64
    );
    println!(
        "one fsync (4 KiB) on this disk: {:.1} µs; one bare SQLite commit (WAL, FULL): {:.1} µs",
        us(fsync),
        us(bare)
    );
    println!(
        "median effectful round on SQLite: {:.1} µs = {:.1} x fsync = {:.1} x bare commit",
        us(round),
        us(round) / us(fsync).max(1e-9),
        us(round) / us(bare).max(1e-9),
    );
    let baselines = json!({ "samples": 2 * samples });
    emit(
        "floor_fsync_4k",
        "floor: one 4 KiB write + fsync",
        us(fsync),
        "us",
        baselines.clone(),
    );
    emit(
        "floor_sqlite_commit",
        "floor: one bare SQLite commit (WAL, synchronous=FULL, one row)",
        us(bare),
        "us",
        baselines,
    );
    emit(
        "round_sqlite_effectful",
        &format!("one effectful round on SQLite (write_note, {n} rounds)"),
        us(round),
        "us",
        json!({ "rounds": m.per_round.len(), "fsync_ratio": us(round) / us(fsync).max(1e-9) }),
    );
    let per_round_commits = (commits.0 + commits.1).saturating_sub(fixed_commits) as f64 / n as f64;
    println!(
        "a run of no tool round makes {fixed_commits} commits: {per_round_commits:.2} commits per effectful round beyond those"
    );
    emit(
        "commits_per_effectful_round",
        &format!(
            "durable commits per effectful round (fenced batches + blob writes, SQLite, {n} rounds, beyond the {fixed_commits} of a run of no round)"
        ),
        per_round_commits,
        "commits",
        json!({ "batches": commits.0, "blob_writes": commits.1, "rounds": n, "fixed": fixed_commits }),
    );

    println!("\n== 3. stored bytes per tool round (tables only, no blobs) ==");
    let (rows, bytes) = rt.block_on(storage.table_footprint()).expect("footprint");
    println!(
        "after {n} effectful rounds: {rows} rows, {bytes} bytes = {:.0} bytes per round (incl. the run's fixed records)",
        bytes as f64 / n as f64
    );
    let raw = rusqlite::Connection::open(storage.path()).expect("raw");
    let (blobs, blob_bytes): (i64, i64) = raw
        .query_row(
            "SELECT count(*), coalesce(sum(size), 0) FROM blobs",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("blobs");
    println!(
        "(for reference, blobs: {blobs} blobs, {blob_bytes} bytes = {:.0} bytes per round)",
        blob_bytes as f64 / n as f64
    );
    let per_round_bytes = (bytes as f64 - base_bytes as f64) / n as f64;
    println!(
        "beyond the {base_bytes} bytes of a run of no tool round: {per_round_bytes:.0} bytes per round"
    );
    emit(
        "bytes_per_round",
        &format!(
            "stored bytes per effectful round, tables only ({n} rounds, beyond the {base_bytes} B of a run of no round)"
        ),
        per_round_bytes,
        "B",
        json!({ "rows": rows, "bytes": bytes, "fixed": base_bytes, "blob_bytes_per_round": blob_bytes as f64 / n as f64 }),
    );
    drop(raw);
    drop(storage);
    if !quick {
        let small = dir.join("bytes-100.sqlite3");
        let large = dir.join("bytes-1000.sqlite3");
        let (s, _, _) = rt.block_on(run_sqlite(&small, 100, 1, "write_note"));
        let (l, _, _) = rt.block_on(run_sqlite(&large, 1000, 1, "write_note"));
        let (_, sb) = rt.block_on(s.table_footprint()).expect("fp");
        let (_, lb) = rt.block_on(l.table_footprint()).expect("fp");
        let marginal = (lb as f64 - sb as f64) / 900.0;
        println!(
            "marginal: (bytes at 1000 rounds - bytes at 100 rounds) / 900 = {marginal:.0} bytes per round"
        );
        emit(
            "bytes_per_round_marginal",
            "stored bytes per round, marginal ((1,000 rounds - 100 rounds) / 900)",
            marginal,
            "B",
            json!(null),
        );
    }
}

fn section_4(rt: &tokio::runtime::Runtime, dir: &Path, quick: bool) {
    println!(
        "\n== 4. resume time by journal length (SQLite; a fresh runtime answers the pending question) =="
    );
    // (tool rounds, calls per round); the run then asks its question in
    // one more round. The budget allows at most 1,000 rounds and 10,000
    // calls: 999 rounds of one call is a true 1,000-round run, and 10,000
    // records are approximated by 555 rounds of 18 calls (9,991 records).
    let cases: &[(usize, usize)] = if quick {
        &[(10, 1), (999, 1), (555, 18)]
    } else {
        &[(10, 1), (100, 1), (100, 10), (999, 1), (555, 18)]
    };
    for &(rounds, calls) in cases {
        let records = rounds * calls;
        let (mem, run, _) = run_memory(rounds, calls, "read_note", true);
        let journal = rt
            .block_on(
                mem.storage()
                    .scan_prefix(Table::Journal, &format!("{run}/")),
            )
            .expect("journal")
            .len();
        let template = dir.join(format!("resume-{records}-template.sqlite3"));
        sqlite_template(rt, std::slice::from_ref(&mem), &template);
        drop(mem);
        let size = std::fs::metadata(&template).map(|m| m.len()).unwrap_or(0);
        println!(
            "       (database of the {records}-record run: {:.1} MiB)",
            size as f64 / 1048576.0
        );
        let reps = match (quick, records >= 5_000) {
            (true, true) => 3,
            (true, false) => 5,
            (false, true) => 5,
            (false, false) => 9,
        };
        let mut samples = Vec::new();
        for rep in 0..reps {
            let path = dir.join(format!("resume-{records}-{rep}.sqlite3"));
            copy_database(&template, &path);
            let sample = rt.block_on(async {
                let (runtime, _storage) =
                    sqlite_runtime(&path, rounds, calls, "read_note", true).await;
                let pending = runtime.pending(&run).await.expect("pending");
                let request = pending
                    .iter()
                    .find(|p| matches!(p.kind, PendingKind::Input { .. }))
                    .expect("question pending")
                    .id
                    .clone();
                let t = Instant::now();
                runtime
                    .respond(&run, &request, "yes")
                    .await
                    .expect("respond");
                let loaded = t.elapsed();
                let done = runtime.wait_settled(&run).await.expect("settled");
                assert_eq!(done.status, RunStatus::Completed);
                (loaded, t.elapsed())
            });
            samples.push(sample);
            remove_database(&path);
        }
        remove_database(&template);
        let loaded = median(samples.iter().map(|s| s.0).collect());
        let total = median(samples.iter().map(|s| s.1).collect());
        println!(
            "{journal:>6} journal records, {:>4} rounds: resume (load + accept the answer) {:>9.2} ms; to completion {:>9.2} ms  ({reps} repetitions)",
            rounds + 1,
            loaded.as_secs_f64() * 1e3,
            total.as_secs_f64() * 1e3
        );
        let (name, label) = match (rounds, calls) {
            (999, 1) => (
                "resume_1000_rounds".to_owned(),
                "resume of a 1,000-round run (999 rounds of one call + the question; SQLite)"
                    .to_owned(),
            ),
            (555, 18) => (
                "resume_10000_records".to_owned(),
                "resume of a 10,000-record run (555 rounds of 18 calls + the question = 9,991 records; SQLite)"
                    .to_owned(),
            ),
            _ => (
                format!("resume_{records}_records"),
                format!(
                    "resume of a run of {journal} journal records in {} rounds (SQLite)",
                    rounds + 1
                ),
            ),
        };
        emit(
            &name,
            &label,
            loaded.as_secs_f64() * 1e3,
            "ms",
            json!({
                "records": journal,
                "rounds": rounds + 1,
                "repetitions": reps,
                "to_completion_ms": total.as_secs_f64() * 1e3,
                "database_mib": size as f64 / 1048576.0,
            }),
        );
    }
}

fn section_5(rt: &tokio::runtime::Runtime, dir: &Path, quick: bool) {
    println!(
        "\n== 5. session take-over by the number of runs in other sessions (SQLite; recover_session + a run start) =="
    );
    let target = SessionId::new("taken-over").expect("session");
    let reps = if quick { 5 } else { 11 };
    for others in [0, 1_000, 10_000] {
        let built = Instant::now();
        let stores = takeover_stores(others, &target);
        let template = dir.join(format!("takeover-{others}-template.sqlite3"));
        sqlite_template(rt, &stores, &template);
        drop(stores);
        let size = std::fs::metadata(&template).map(|m| m.len()).unwrap_or(0);
        let copy = dir.join(format!("takeover-{others}.sqlite3"));
        let samples: Vec<(Duration, Duration)> = (0..reps)
            .map(|_| takeover_once(rt, &template, &copy, &target))
            .collect();
        remove_database(&template);
        let recover = median(samples.iter().map(|s| s.0).collect());
        let total = median(samples.iter().map(|s| s.1).collect());
        println!(
            "{others:>6} runs in other sessions: take-over {:>8.2} ms (recover_session {:>8.2} ms, then the start)  (database {:.1} MiB, built in {:.1} s, {reps} repetitions)",
            total.as_secs_f64() * 1e3,
            recover.as_secs_f64() * 1e3,
            size as f64 / 1048576.0,
            built.elapsed().as_secs_f64()
        );
        emit(
            &format!("takeover_{others}"),
            &format!(
                "session take-over (recover_session + a run start), {others} runs in other sessions (SQLite)"
            ),
            total.as_secs_f64() * 1e3,
            "ms",
            json!({
                "other_runs": others,
                "recover_ms": recover.as_secs_f64() * 1e3,
                "repetitions": reps,
                "database_mib": size as f64 / 1048576.0,
            }),
        );
    }
}
