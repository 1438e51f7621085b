//! The supervisor's run loop on PostgreSQL, end to end against a real
//! server: a run of effectful rounds completes, every round's journal is
//! durable in the database, and a second store (another process) reads it.

mod common;

use std::sync::Arc;

use agent_kernel::host::{Storage, Table};
use agent_kernel::run::RunStatus;
use agent_store_postgres::PostgresStorage;
use agent_store_postgres::test_cluster::PgCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s14_an_effectful_run_completes_on_postgres_and_another_store_sees_it() {
    let cluster = PgCluster::shared().expect("a PostgreSQL server");
    let database = cluster.create_database().expect("database");
    let storage = Arc::new(
        PostgresStorage::connect(&database.url())
            .await
            .expect("connect"),
    );
    let measured = common::run_effectful(storage.clone(), "worker-1", "session-1", 5).await;
    assert_eq!(
        measured.run.status,
        RunStatus::Completed,
        "{:?}",
        measured.run.stop_reason
    );
    assert_eq!(
        measured.per_round.len(),
        5,
        "one model request per round, then the answer"
    );
    assert!(
        measured.commits >= 5,
        "at least one fenced commit per round: {}",
        measured.commits
    );
    assert_eq!(storage.counts().stale_refusals, 0);

    let other = PostgresStorage::connect(&database.url())
        .await
        .expect("another store");
    let run_key = measured.run.id.as_str().to_owned();
    assert!(
        other
            .get(Table::Runs, &run_key)
            .await
            .expect("read")
            .is_some(),
        "the run record is in the shared database"
    );
    let journal = other
        .scan_prefix(Table::Journal, &format!("{run_key}/"))
        .await
        .expect("journal");
    assert_eq!(journal.len(), 5, "one journal record per effectful call");
}
