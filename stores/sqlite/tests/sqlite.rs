//! SQLite-specific behaviour beyond the conformance suite: durability across
//! reopen, several handles on one file, corrupted files and rows (typed
//! errors, never a panic, data left untouched), schema versions, and the
//! takeover of a lease whose holder the host judges gone (S1.1, S3.1, S3.3).

use std::sync::Arc;

use agent_kernel::host::{Batch, LeaseError, Storage, StorageError, StorageExt, Table};
use agent_kernel::run::AgentRun;
use agent_kernel::{OwnerId, SessionId};
use agent_store_sqlite::{Liveness, OpenError, SqliteStorage};
use rusqlite::types::Value;

fn sid(s: &str) -> SessionId {
    SessionId::new(s).expect("session id")
}
fn owner(s: &str) -> OwnerId {
    OwnerId::new(s).expect("owner id")
}

#[tokio::test]
async fn s1_1_data_survives_reopen() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("db.sqlite3");
    {
        let s = SqliteStorage::open(&path).await.expect("open");
        s.commit(Batch::new().put(Table::Runs, "r1", b"one".to_vec()))
            .await
            .expect("commit");
        s.put_blob(
            &agent_kernel::host::BlobRef::of(b"blob").hash,
            b"blob".to_vec(),
        )
        .await
        .expect("blob");
        s.try_acquire_lease(&sid("s"), &owner("a"), 10, 1_000)
            .await
            .expect("lease");
    }
    let s = SqliteStorage::open(&path).await.expect("reopen");
    assert_eq!(
        s.get(Table::Runs, "r1").await.expect("get"),
        Some(b"one".to_vec())
    );
    assert_eq!(s.list_blobs().await.expect("blobs").len(), 1);
    let lease = s
        .current_lease(&sid("s"))
        .await
        .expect("lease")
        .expect("kept");
    assert_eq!(lease.epoch, 1);
    s.quick_check().await.expect("sound file");
}

#[tokio::test]
async fn s3_3_two_handles_on_one_file_share_leases_and_fences() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("db.sqlite3");
    let a = SqliteStorage::open(&path).await.expect("open a");
    let b = SqliteStorage::open(&path).await.expect("open b");
    let la = a
        .try_acquire_lease(&sid("s"), &owner("tab-a"), 0, 1_000)
        .await
        .expect("a takes");
    let err = b
        .try_acquire_lease(&sid("s"), &owner("tab-b"), 10, 1_000)
        .await
        .expect_err("b refused while live");
    assert!(matches!(err, LeaseError::Held { ref owner, .. } if owner.as_str() == "tab-a"));
    let lb = b
        .try_acquire_lease(&sid("s"), &owner("tab-b"), 1_000, 1_000)
        .await
        .expect("b takes after expiry");
    assert_eq!(lb.epoch, la.epoch + 1);
    let err = a
        .commit(
            Batch::new()
                .fenced(la.fence())
                .put(Table::Meta, "k", b"a".to_vec()),
        )
        .await
        .expect_err("a is fenced off");
    assert!(matches!(err, StorageError::StaleEpoch { .. }), "{err}");
    b.commit(
        Batch::new()
            .fenced(lb.fence())
            .put(Table::Meta, "k", b"b".to_vec()),
    )
    .await
    .expect("b writes");
    assert_eq!(
        a.get(Table::Meta, "k").await.expect("get"),
        Some(b"b".to_vec())
    );
}

#[tokio::test]
async fn garbage_file_is_a_typed_error_and_left_untouched() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("db.sqlite3");
    let garbage = b"this is not a database, it is a shopping list\n".repeat(200);
    std::fs::write(&path, &garbage).expect("write");
    let err = SqliteStorage::open(&path)
        .await
        .expect_err("not a database");
    assert!(matches!(err, OpenError::Corrupt { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("move it aside"), "{msg}");
    assert_eq!(
        std::fs::read(&path).expect("read"),
        garbage,
        "file untouched"
    );
}

#[tokio::test]
async fn damaged_pages_give_errors_not_panics() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("db.sqlite3");
    {
        let s = SqliteStorage::open(&path).await.expect("open");
        let mut batch = Batch::new();
        for i in 0..400 {
            batch = batch.put(Table::Journal, format!("run/{i:05}"), vec![7u8; 300]);
        }
        s.commit(batch).await.expect("seed");
    }
    // Fold the WAL into the main file, then overwrite pages after the header.
    {
        let conn = rusqlite::Connection::open(&path).expect("raw open");
        conn.pragma_update(None, "wal_checkpoint", "TRUNCATE")
            .expect("checkpoint");
    }
    let mut bytes = std::fs::read(&path).expect("read");
    assert!(bytes.len() > 8192, "seeded file has several pages");
    let end = bytes.len() - 1;
    for b in &mut bytes[4096 + 100..end] {
        *b = 0xA5;
    }
    std::fs::write(&path, &bytes).expect("damage");
    match SqliteStorage::open(&path).await {
        Err(e) => assert!(!e.to_string().is_empty()),
        Ok(s) => {
            let scan = s.scan_prefix(Table::Journal, "run/").await;
            let check = s.quick_check().await;
            assert!(scan.is_err() || check.is_err(), "damage must be reported");
            if let Err(e) = check {
                assert!(e.to_string().contains("restore a backup"), "{e}");
            }
        }
    }
}

#[tokio::test]
async fn corrupt_rows_are_typed_errors_and_kept() {
    let dir = tempfile::tempdir().expect("dir");
    let s = SqliteStorage::open(dir.path().join("db.sqlite3"))
        .await
        .expect("open");
    s.put_raw_for_tests(Table::Runs, "run-null", Value::Real(1.5))
        .await
        .expect("plant");
    s.put_raw_for_tests(Table::Runs, "run-int", Value::Integer(7))
        .await
        .expect("plant");
    for key in ["run-null", "run-int"] {
        let err = s.get(Table::Runs, key).await.expect_err("corrupt value");
        assert!(
            matches!(&err, StorageError::Corrupt { key: k, .. } if k == key),
            "{err:?}"
        );
    }
    let err = s
        .scan_prefix(Table::Runs, "run-")
        .await
        .expect_err("scan reports it");
    assert!(matches!(
        err,
        StorageError::Corrupt {
            table: Table::Runs,
            ..
        }
    ));
    let err = s
        .get_record::<AgentRun>("run-int")
        .await
        .expect_err("typed read too");
    assert!(matches!(err, StorageError::Corrupt { .. }));
    // A key that is not UTF-8 is reported, not skipped.
    let conn = rusqlite::Connection::open(s.path()).expect("raw");
    conn.execute(
        "INSERT INTO kv (tbl, key, value) VALUES ('journal', x'ff00', x'00')",
        [],
    )
    .expect("plant bad key");
    let err = s
        .scan_prefix(Table::Journal, "")
        .await
        .expect_err("bad key");
    assert!(
        matches!(
            err,
            StorageError::Corrupt {
                table: Table::Journal,
                ..
            }
        ),
        "{err:?}"
    );
    // Nothing was removed.
    let n: i64 = conn
        .query_row("SELECT count(*) FROM kv", [], |r| r.get(0))
        .expect("count");
    assert_eq!(n, 3);
}

#[tokio::test]
async fn blob_whose_bytes_changed_is_reported() {
    let dir = tempfile::tempdir().expect("dir");
    let s = SqliteStorage::open(dir.path().join("db.sqlite3"))
        .await
        .expect("open");
    let r = s
        .put_blob(
            &agent_kernel::host::BlobRef::of(b"abc").hash,
            b"abc".to_vec(),
        )
        .await
        .expect("put");
    let conn = rusqlite::Connection::open(s.path()).expect("raw");
    conn.execute("UPDATE blobs SET bytes = x'00'", [])
        .expect("tamper");
    let err = s.get_blob(&r.hash).await.expect_err("tampered blob");
    assert!(err.to_string().contains("corrupt"), "{err}");
    assert_eq!(s.list_blobs().await.expect("list"), vec![r.hash], "kept");
}

#[tokio::test]
async fn newer_schema_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("db.sqlite3");
    drop(SqliteStorage::open(&path).await.expect("create"));
    let conn = rusqlite::Connection::open(&path).expect("raw");
    conn.pragma_update(None, "user_version", 99).expect("bump");
    drop(conn);
    let err = SqliteStorage::open(&path).await.expect_err("too new");
    assert!(
        matches!(err, OpenError::TooNew { found: 99, .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn unopenable_path_is_an_io_error() {
    let dir = tempfile::tempdir().expect("dir");
    let err = SqliteStorage::open(dir.path().join("missing/dir/db.sqlite3"))
        .await
        .expect_err("no parent");
    assert!(matches!(err, OpenError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("--data-dir"), "{err}");
}

#[tokio::test]
async fn wal_and_full_sync_are_on() {
    let dir = tempfile::tempdir().expect("dir");
    let s = SqliteStorage::open(dir.path().join("db.sqlite3"))
        .await
        .expect("open");
    // `synchronous` belongs to a connection: read the storage's own.
    let (mode, synchronous) = s.durability_settings().await.expect("pragmas");
    assert_eq!(mode, "wal");
    assert_eq!(synchronous, 2, "synchronous=FULL");
    let conn = rusqlite::Connection::open(s.path()).expect("raw");
    let version: u32 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .expect("version");
    assert_eq!(version, 1);
}

/// S3.3: a holder the host's liveness check judges dead loses its live
/// lease at once (epoch + 1); an alive or unknown one keeps it until expiry,
/// and with [`SqliteStorage::open`] no holder is ever judged gone.
#[tokio::test]
async fn s3_3_a_holder_judged_dead_is_taken_over_at_once() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("db.sqlite3");
    let judged = SqliteStorage::open_with_liveness(
        &path,
        Arc::new(|o: &OwnerId| match o.as_str() {
            "tab-dead" => Liveness::Dead,
            "tab-alive" => Liveness::Alive,
            _ => Liveness::Unknown,
        }),
    )
    .await
    .expect("open");
    let ttl = 3_600_000;
    for (session, holder) in [("alive", "tab-alive"), ("unknown", "tab-unknown")] {
        judged
            .try_acquire_lease(&sid(session), &owner(holder), 0, ttl)
            .await
            .expect("first");
        let err = judged
            .try_acquire_lease(&sid(session), &owner("tab-new"), 1, ttl)
            .await
            .expect_err("kept until expiry");
        assert!(matches!(err, LeaseError::Held { .. }), "{err:?}");
    }
    let held = judged
        .try_acquire_lease(&sid("dead"), &owner("tab-dead"), 0, ttl)
        .await
        .expect("first");
    let plain = SqliteStorage::open(&path).await.expect("open plain");
    let err = plain
        .try_acquire_lease(&sid("dead"), &owner("tab-new"), 1, ttl)
        .await
        .expect_err("a plain store judges nobody gone");
    assert!(matches!(err, LeaseError::Held { .. }), "{err:?}");
    let taken = judged
        .try_acquire_lease(&sid("dead"), &owner("tab-new"), 1, ttl)
        .await
        .expect("taken over at once");
    assert_eq!(
        (taken.epoch, taken.owner.as_str()),
        (held.epoch + 1, "tab-new")
    );
    let stale = Batch::new()
        .fenced(held.fence())
        .put(Table::Runs, "r", b"x".to_vec());
    assert!(matches!(
        judged.commit(stale).await,
        Err(StorageError::StaleEpoch { .. })
    ));
}
