//! The PostgreSQL round beside one bare PostgreSQL commit (issue 21), on a
//! throwaway server that writes as production does (fsync and synchronous
//! commit on), started by the bench itself on loopback.
//!
//! ```text
//! cargo bench -p agent-store-postgres --bench postgres
//! BENCH_QUICK=1 cargo bench -p agent-store-postgres --bench postgres   # smaller runs
//! ```
//!
//! 1. One bare commit: a one-row `INSERT` (200 bytes) in its own
//!    transaction over one connection, sampled before and after the run so
//!    that both share the disk's mood: the floor of any durable write here.
//! 2. One effectful round on PostgreSQL: the supervisor's run loop with
//!    `write_note` in every round (its fenced journal batches, each one
//!    serializable transaction), the median time between model requests;
//!    as a multiple of the bare commit, and the commits per round.
//!
//! With `BENCH_JSON=<file>` every figure is appended to that file as one
//! JSON line, in the format of `host-native/benches/common/mod.rs`, which
//! `cargo xtask bench` collects. Without PostgreSQL installed the bench
//! fails loudly (it never reports nothing silently).

#[path = "../tests/common/mod.rs"]
mod common;

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_kernel::run::RunStatus;
use agent_store_postgres::PostgresStorage;
use agent_store_postgres::test_cluster::PgCluster;
use serde_json::{Value, json};

fn emit(name: &str, label: &str, value: f64, unit: &str, extra: Value) {
    let Some(path) = std::env::var_os("BENCH_JSON") else {
        return;
    };
    let mut line =
        json!({"bench": "postgres", "name": name, "label": label, "value": value, "unit": unit});
    if let (Some(line), Value::Object(extra)) = (line.as_object_mut(), extra) {
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

/// `n` bare one-row commits over one connection.
async fn bare_commits(url: &str, n: usize) -> Vec<Duration> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("bare connection");
    tokio::spawn(connection);
    client
        .batch_execute("CREATE TABLE IF NOT EXISTS bare (k BIGSERIAL PRIMARY KEY, v BYTEA)")
        .await
        .expect("table");
    let insert = client
        .prepare("INSERT INTO bare (v) VALUES ($1)")
        .await
        .expect("prepare");
    let value = vec![1u8; 200];
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        client.execute(&insert, &[&value]).await.expect("insert");
        samples.push(t.elapsed());
    }
    samples
}

fn main() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let cluster = match PgCluster::start_durable() {
        Ok(cluster) => cluster,
        Err(e) => {
            eprintln!("the PostgreSQL bench cannot run: {e}");
            std::process::exit(1);
        }
    };
    let database = cluster.create_database().expect("database");
    let url = database.url();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    let rounds = if quick { 50 } else { 200 };
    let samples = if quick { 30 } else { 100 };

    println!("== PostgreSQL: an effectful round beside one bare commit (fsync on) ==");
    let (bare, measured, counts) = rt.block_on(async {
        let mut bare = bare_commits(&url, samples).await;
        let storage = Arc::new(PostgresStorage::connect(&url).await.expect("connect"));
        let measured =
            common::run_effectful(storage.clone(), "bench", "bench-session", rounds).await;
        bare.extend(bare_commits(&url, samples).await);
        (bare, measured, storage.counts())
    });
    assert_eq!(
        measured.run.status,
        RunStatus::Completed,
        "{:?}",
        measured.run.stop_reason
    );
    let bare = median(bare);
    let round = median(measured.per_round.clone());
    let ratio = us(round) / us(bare).max(1e-9);
    let per_round = measured.commits as f64 / rounds as f64;
    let retries = counts.retries;
    let reads_per_round = counts.reads as f64 / rounds as f64;
    println!(
        "one bare PostgreSQL commit (one row, fsync): {:.1} µs",
        us(bare)
    );
    println!(
        "median effectful round on PostgreSQL ({rounds} rounds): {:.1} µs = {ratio:.1} x bare commit; {} fenced batch commits = {per_round:.2} per round (incl. start and final answer); {reads_per_round:.1} reads per round (one round trip each); {retries} serialization retries",
        us(round),
        measured.commits
    );
    emit(
        "floor_postgres_commit",
        "floor: one bare PostgreSQL commit (one row, fsync on, loopback)",
        us(bare),
        "us",
        json!({ "samples": 2 * samples }),
    );
    emit(
        "round_postgres_effectful",
        &format!("one effectful round on PostgreSQL (write_note, {rounds} rounds)"),
        us(round),
        "us",
        json!({ "rounds": measured.per_round.len(), "bare_ratio": ratio, "retries": retries, "reads_per_round": reads_per_round }),
    );
    emit(
        "commits_per_round_postgres",
        &format!(
            "fenced batch commits per effectful round on PostgreSQL ({rounds} rounds, incl. start and answer)"
        ),
        per_round,
        "commits",
        json!({ "batches": measured.commits, "rounds": rounds }),
    );
}
