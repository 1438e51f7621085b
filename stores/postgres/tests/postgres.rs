//! What PostgreSQL adds beyond the conformance suite, against a real server
//! on loopback: connection loss and a server restart give `Unavailable`
//! and never a partial write, and the store works again afterwards; many
//! openers of one fresh database migrate it once; a newer schema, a bad
//! address and an unreachable server are typed errors; two stores (two
//! processes) share leases and fences; corrupt rows are reported.

use std::sync::Arc;

use agent_kernel::host::{Batch, LeaseError, Storage, StorageError, StorageExt, Table};
use agent_kernel::run::AgentRun;
use agent_kernel::{OwnerId, SessionId};
use agent_store_postgres::test_cluster::PgCluster;
use agent_store_postgres::{OpenError, PostgresOptions, PostgresStorage};

fn sid(s: &str) -> SessionId {
    SessionId::new(s).expect("valid session id")
}

fn owner(s: &str) -> OwnerId {
    OwnerId::new(s).expect("valid owner id")
}

/// A raw client for planting rows the store would never write.
async fn raw(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("raw connection");
    tokio::spawn(connection);
    client
}

const TTL: u64 = 30_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s14_a_killed_server_gives_unavailable_then_the_store_recovers_after_restart() {
    // Its own cluster: killing the shared one would break the other tests.
    let cluster = PgCluster::start().expect("a PostgreSQL server");
    let database = cluster.create_database().expect("database");
    let options = PostgresOptions {
        connect_timeout: std::time::Duration::from_secs(2),
        ..PostgresOptions::default()
    };
    let storage = PostgresStorage::connect_with(&database.url(), options, None)
        .await
        .expect("connect");
    let s = sid("session-loss");
    let lease = storage
        .try_acquire_lease(&s, &owner("worker-a"), 1_000, TTL)
        .await
        .expect("lease");
    storage
        .commit(
            Batch::new()
                .fenced(lease.fence())
                .put(Table::Runs, "r1", b"before".to_vec()),
        )
        .await
        .expect("write before the crash");

    cluster.kill().expect("kill the server");
    let err = storage
        .commit(
            Batch::new()
                .fenced(lease.fence())
                .put(Table::Runs, "r1", b"during".to_vec())
                .put(Table::Journal, "r1/c1", b"during".to_vec()),
        )
        .await
        .expect_err("no server, no commit");
    assert!(matches!(err, StorageError::Unavailable(_)), "{err:?}");
    let err = storage
        .get(Table::Runs, "r1")
        .await
        .expect_err("no server, no read");
    assert!(matches!(err, StorageError::Unavailable(_)), "{err:?}");
    let err = storage
        .renew_lease(&s, &owner("worker-a"), lease.epoch, 2_000, TTL)
        .await
        .expect_err("no server, no renewal");
    assert!(
        matches!(err, LeaseError::Storage(StorageError::Unavailable(_))),
        "{err:?}"
    );

    cluster.restart().expect("restart the server");
    // The pool drops its dead connections and opens new ones.
    assert_eq!(
        storage.get(Table::Runs, "r1").await.expect("read again"),
        Some(b"before".to_vec()),
        "the refused write left nothing behind"
    );
    assert_eq!(
        storage.get(Table::Journal, "r1/c1").await.expect("read"),
        None
    );
    storage
        .commit(
            Batch::new()
                .fenced(lease.fence())
                .put(Table::Runs, "r1", b"after".to_vec()),
        )
        .await
        .expect("the lease survived the restart: the same fence writes");
    assert_eq!(
        storage.get(Table::Runs, "r1").await.expect("read"),
        Some(b"after".to_vec())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_openers_of_one_fresh_database_migrate_it_once() {
    let cluster = PgCluster::shared().expect("a PostgreSQL server");
    let database = cluster.create_database().expect("database");
    let url = database.url();
    let opens = (0..8).map(|_| {
        let url = url.clone();
        tokio::spawn(async move { PostgresStorage::connect(&url).await })
    });
    for open in futures_join(opens.collect()).await {
        open.expect("every opener succeeds");
    }
    let client = raw(&url).await;
    let versions: Vec<i64> = client
        .query(
            "SELECT version FROM agentrt_schema_version ORDER BY version",
            &[],
        )
        .await
        .expect("versions")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, [1], "each migration recorded once");
}

async fn futures_join(
    handles: Vec<tokio::task::JoinHandle<Result<PostgresStorage, OpenError>>>,
) -> Vec<Result<PostgresStorage, OpenError>> {
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("opener task"));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_schema_is_refused_and_left_untouched() {
    let cluster = PgCluster::shared().expect("a PostgreSQL server");
    let database = cluster.create_database().expect("database");
    PostgresStorage::connect(&database.url())
        .await
        .expect("first open migrates");
    let client = raw(&database.url()).await;
    client
        .execute(
            "INSERT INTO agentrt_schema_version (version) VALUES (99)",
            &[],
        )
        .await
        .expect("pretend a newer agentrt migrated");
    let err = PostgresStorage::connect(&database.url())
        .await
        .expect_err("too new");
    assert!(
        matches!(
            err,
            OpenError::TooNew {
                found: 99,
                known: 1,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("newer agentrt"), "{err}");
    let count: i64 = client
        .query_one("SELECT count(*) FROM agentrt_schema_version", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(count, 2, "nothing was changed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_addresses_and_unreachable_servers_are_typed_errors() {
    for url in ["not a url", "postgres://u@h:notaport/db", "mysql://x@y/z"] {
        let err = PostgresStorage::connect(url)
            .await
            .expect_err("invalid address");
        assert!(
            matches!(err, OpenError::InvalidUrl { .. }),
            "{url}: {err:?}"
        );
    }
    // A port nothing listens on: bind one, then free it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let options = PostgresOptions {
        connect_timeout: std::time::Duration::from_secs(2),
        ..PostgresOptions::default()
    };
    let err = PostgresStorage::connect_with(
        &format!("postgres://postgres:secret-password@127.0.0.1:{port}/agentrt"),
        options,
        None,
    )
    .await
    .expect_err("nothing listens there");
    assert!(matches!(err, OpenError::Unavailable { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains(&port.to_string()), "{message}");
    assert!(
        !message.contains("secret-password"),
        "no password in messages: {message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s14_two_stores_on_one_database_share_leases_and_fences() {
    let cluster = PgCluster::shared().expect("a PostgreSQL server");
    let database = cluster.create_database().expect("database");
    // Two stores stand for two worker processes; the second knows the first
    // worker is dead (as `/proc` would tell on one machine).
    let a = PostgresStorage::connect(&database.url())
        .await
        .expect("worker a");
    let dead: agent_store_postgres::DeadOwnerCheck =
        Arc::new(|holder: &OwnerId| holder.as_str() == "worker-a");
    let b = PostgresStorage::connect_with(&database.url(), PostgresOptions::default(), Some(dead))
        .await
        .expect("worker b");
    let c = PostgresStorage::connect(&database.url())
        .await
        .expect("worker c");
    let s = sid("session-shared");
    let la = a
        .try_acquire_lease(&s, &owner("worker-a"), 1_000, TTL)
        .await
        .expect("a takes the lease");
    // C does not know A is dead: it waits for the expiry.
    let err = c
        .try_acquire_lease(&s, &owner("worker-c"), 2_000, TTL)
        .await
        .expect_err("held by a");
    assert!(matches!(err, LeaseError::Held { ref owner, .. } if owner.as_str() == "worker-a"));
    // B knows A is dead: it takes over at once, with the next epoch.
    let lb = b
        .try_acquire_lease(&s, &owner("worker-b"), 2_000, TTL)
        .await
        .expect("b takes over a dead holder's lease");
    assert_eq!(lb.epoch, la.epoch + 1);
    // A comes back (it was only paused): its writes are refused.
    let err = a
        .commit(
            Batch::new()
                .fenced(la.fence())
                .put(Table::Runs, "r", b"a".to_vec()),
        )
        .await
        .expect_err("a is fenced off");
    assert!(
        matches!(err, StorageError::StaleEpoch { presented, current: Some(current), .. }
            if presented == la.epoch && current == lb.epoch),
        "{err:?}"
    );
    assert_eq!(a.counts().stale_refusals, 1);
    assert_eq!(a.counts().commits, 0);
    b.commit(
        Batch::new()
            .fenced(lb.fence())
            .put(Table::Runs, "r", b"b".to_vec()),
    )
    .await
    .expect("b writes");
    assert_eq!(
        c.get(Table::Runs, "r").await.expect("c reads"),
        Some(b"b".to_vec())
    );
    assert_eq!(b.counts().commits, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s14_concurrent_fenced_writers_across_stores_only_the_current_epoch_lands() {
    let cluster = PgCluster::shared().expect("a PostgreSQL server");
    let database = cluster.create_database().expect("database");
    let a = Arc::new(PostgresStorage::connect(&database.url()).await.expect("a"));
    let b = Arc::new(PostgresStorage::connect(&database.url()).await.expect("b"));
    let s = sid("session-race");
    let la = a
        .try_acquire_lease(&s, &owner("worker-a"), 1_000, 100)
        .await
        .expect("a");
    // A writes in a loop while B takes the expired lease over mid-way.
    let writer = {
        let a = a.clone();
        let fence = la.fence();
        tokio::spawn(async move {
            let mut landed = 0u64;
            let mut refused = 0u64;
            for i in 0..200u64 {
                let batch = Batch::new().fenced(fence.clone()).put(
                    Table::Journal,
                    format!("a/{i:04}"),
                    b"a".to_vec(),
                );
                match a.commit(batch).await {
                    Ok(()) => landed += 1,
                    Err(StorageError::StaleEpoch { .. }) => refused += 1,
                    Err(e) => panic!("unexpected error: {e}"),
                }
            }
            (landed, refused)
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let lb = b
        .try_acquire_lease(&s, &owner("worker-b"), 1_100, TTL)
        .await
        .expect("b takes the expired lease");
    let after_takeover = b
        .scan_prefix(Table::Journal, "a/")
        .await
        .expect("scan")
        .len() as u64;
    let (landed, refused) = writer.await.expect("writer");
    assert_eq!(landed + refused, 200);
    assert_eq!(lb.epoch, la.epoch + 1);
    let stored = b.scan_prefix(Table::Journal, "a/").await.expect("scan");
    assert_eq!(stored.len() as u64, landed);
    // Every write that landed landed before the take-over committed.
    assert!(
        landed <= after_takeover,
        "{landed} landed, {after_takeover} were there at the take-over"
    );
    assert_eq!(a.counts().stale_refusals, refused);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_rows_are_reported_never_hidden() {
    let cluster = PgCluster::shared().expect("a PostgreSQL server");
    let database = cluster.create_database().expect("database");
    let storage = PostgresStorage::connect(&database.url())
        .await
        .expect("connect");
    let client = raw(&database.url()).await;
    // A key that is not UTF-8.
    client
        .execute(
            "INSERT INTO agentrt_kv (tbl, key, value) VALUES ('runs', '\\x72756eff'::bytea, 'x')",
            &[],
        )
        .await
        .expect("plant a bad key");
    let err = storage
        .scan_prefix(Table::Runs, "run")
        .await
        .expect_err("bad key");
    assert!(
        matches!(
            err,
            StorageError::Corrupt {
                table: Table::Runs,
                ..
            }
        ),
        "{err:?}"
    );
    // A run record that does not decode.
    client
        .execute(
            "INSERT INTO agentrt_kv (tbl, key, value) VALUES ('runs', 'r-bad'::bytea, '{\"id\":')",
            &[],
        )
        .await
        .expect("plant a bad record");
    let err = storage
        .get_record::<AgentRun>("r-bad")
        .await
        .expect_err("bad record");
    assert!(matches!(err, StorageError::Corrupt { .. }), "{err:?}");
    // A blob whose bytes no longer match its name.
    let blob = storage
        .put_blob(
            &agent_kernel::host::BlobRef::of(b"good").hash,
            b"good".to_vec(),
        )
        .await
        .expect("blob");
    client
        .execute(
            "UPDATE agentrt_blobs SET bytes = 'evil'::bytea WHERE hash = $1",
            &[&blob.hash],
        )
        .await
        .expect("tamper");
    let err = storage.get_blob(&blob.hash).await.expect_err("tampered");
    assert!(
        matches!(&err, StorageError::Backend(m) if m.contains("corrupt")),
        "{err:?}"
    );
    // A lease row naming an invalid owner.
    client
        .execute(
            "INSERT INTO agentrt_leases (session, owner, epoch, expires_at_ms) VALUES ('s-bad', '', 1, 0)",
            &[],
        )
        .await
        .expect("plant a bad lease");
    let err = storage
        .current_lease(&sid("s-bad"))
        .await
        .expect_err("bad lease");
    assert!(matches!(err, StorageError::Backend(_)), "{err:?}");
}

/// A batch's statements go to the server pipelined: they must still apply
/// in the batch's order (a put, a delete and a put of one key end with the
/// last put), also in a long batch, and its reads see the state before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_batches_apply_in_order() {
    let cluster = PgCluster::shared().expect("a PostgreSQL server");
    let database = cluster.create_database().expect("database");
    let storage = PostgresStorage::connect(&database.url())
        .await
        .expect("connect");
    let t = Table::Meta;
    storage
        .commit(Batch::new().put(t, "k", b"old".to_vec()))
        .await
        .expect("seed");
    let mut batch = Batch::new()
        .expect_value(t, "k", b"old".to_vec())
        .expect_absent(t, "j");
    for i in 0..200u32 {
        batch = batch
            .put(t, "k", i.to_string().into_bytes())
            .delete(t, "k")
            .put(t, "j", i.to_string().into_bytes());
        if i % 2 == 0 {
            batch = batch.delete(t, "j");
        }
    }
    batch = batch.put(t, "k", b"last".to_vec());
    storage.commit(batch).await.expect("long batch");
    assert_eq!(
        storage.get(t, "k").await.expect("k"),
        Some(b"last".to_vec())
    );
    assert_eq!(
        storage.get(t, "j").await.expect("j"),
        Some(b"199".to_vec()),
        "the last op on j was the put of round 199"
    );
    // The same conditions now fail: the reads ran before the writes.
    let err = storage
        .commit(
            Batch::new()
                .expect_value(t, "k", b"old".to_vec())
                .put(t, "k", b"never".to_vec()),
        )
        .await
        .expect_err("k is not old any more");
    assert!(
        matches!(err, StorageError::ConditionFailed { .. }),
        "{err:?}"
    );
    assert_eq!(
        storage.get(t, "k").await.expect("k"),
        Some(b"last".to_vec())
    );
}

/// S14 / S2: a server killed while batches stream in leaves each batch
/// whole or absent, never half written; every failure is `Unavailable`
/// (no panic); each acknowledged batch survives the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s14_a_server_killed_mid_stream_leaves_every_batch_whole_or_absent() {
    let cluster = PgCluster::start().expect("a PostgreSQL server");
    let database = cluster.create_database().expect("database");
    let options = PostgresOptions {
        connect_timeout: std::time::Duration::from_secs(1),
        ..PostgresOptions::default()
    };
    let storage = Arc::new(
        PostgresStorage::connect_with(&database.url(), options, None)
            .await
            .expect("connect"),
    );
    let s = sid("session-stream");
    let lease = storage
        .try_acquire_lease(&s, &owner("worker-a"), 1_000, 600_000)
        .await
        .expect("lease");
    let progress = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let writer = {
        let storage = storage.clone();
        let fence = lease.fence();
        let progress = progress.clone();
        tokio::spawn(async move {
            let mut outcomes: Vec<Result<(), StorageError>> = Vec::new();
            // Until the server is gone for a few batches in a row.
            for i in 0..1_000_000u32 {
                if outcomes.len() >= 5 && outcomes[outcomes.len() - 5..].iter().all(|o| o.is_err())
                {
                    break;
                }
                let batch = Batch::new()
                    .fenced(fence.clone())
                    .put(Table::Runs, format!("r{i:04}"), vec![b'x'; 300])
                    .put(Table::Journal, format!("r{i:04}/c"), vec![b'y'; 300])
                    .put(Table::Checkpoints, format!("r{i:04}/1"), vec![b'z'; 300]);
                outcomes.push(storage.commit(batch).await);
                progress.store(i + 1, std::sync::atomic::Ordering::SeqCst);
            }
            outcomes
        })
    };
    while progress.load(std::sync::atomic::Ordering::SeqCst) < 50 {
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    cluster.kill().expect("kill the server mid-stream");
    let outcomes = writer.await.expect("the writer never panics");
    cluster.restart().expect("restart");
    let acknowledged: Vec<usize> = (0..outcomes.len())
        .filter(|&i| outcomes[i].is_ok())
        .collect();
    let failed = outcomes.iter().filter(|o| o.is_err()).count();
    assert!(
        !acknowledged.is_empty() && failed > 0,
        "the kill landed mid-stream: {} acknowledged, {failed} failed",
        acknowledged.len()
    );
    for outcome in &outcomes {
        if let Err(e) = outcome {
            assert!(matches!(e, StorageError::Unavailable(_)), "{e:?}");
        }
    }
    let runs = storage.scan_prefix(Table::Runs, "r").await.expect("runs");
    let journal = storage
        .scan_prefix(Table::Journal, "r")
        .await
        .expect("journal");
    let checkpoints = storage
        .scan_prefix(Table::Checkpoints, "r")
        .await
        .expect("checkpoints");
    assert_eq!(runs.len(), journal.len(), "no batch half written");
    assert_eq!(runs.len(), checkpoints.len(), "no batch half written");
    for i in &acknowledged {
        assert!(
            runs.iter().any(|(k, _)| *k == format!("r{i:04}")),
            "acknowledged batch {i} survived"
        );
    }
    // At most the batch whose COMMIT was cut may be there unacknowledged.
    assert!(runs.len() <= acknowledged.len() + 1);
}
