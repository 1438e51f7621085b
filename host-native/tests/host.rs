//! The tokio host: process leases renewed by the heartbeat, the documented
//! time-to-live limits, and the data directory checks (S3.1, S3.3).

use std::time::Duration;

use agent_host_native::host::{HostError, MIN_LEASE_TTL, NativeHost, NativeHostOptions};
use agent_kernel::host::LeaseError;
use agent_kernel::{OwnerId, SessionId};

fn options(ttl: Duration, owner: &str) -> NativeHostOptions {
    NativeHostOptions {
        lease_ttl: ttl,
        owner: Some(OwnerId::new(owner).expect("owner")),
        store: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_ttl_limit_at_below_and_above() {
    let dir = tempfile::tempdir().expect("dir");
    let below = MIN_LEASE_TTL - Duration::from_millis(1);
    let err = NativeHost::open_with(dir.path(), options(below, "a"))
        .await
        .expect_err("too short");
    assert!(matches!(err, HostError::LeaseTtl(_)), "{err}");
    NativeHost::open_with(dir.path(), options(MIN_LEASE_TTL, "a"))
        .await
        .expect("at the limit");
    NativeHost::open_with(dir.path(), options(MIN_LEASE_TTL * 2, "a"))
        .await
        .expect("above");
}

/// S3.1, S3.3: the heartbeat keeps a held lease alive past its TTL; when
/// the holder stops (its heartbeat ends) the lease expires and another
/// owner takes it with a higher epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_renews_the_lease_and_expiry_frees_it() {
    let dir = tempfile::tempdir().expect("dir");
    let ttl = Duration::from_millis(400);
    let a = NativeHost::open_with(dir.path(), options(ttl, "owner-a"))
        .await
        .expect("a");
    let b = NativeHost::open_with(dir.path(), options(ttl, "owner-b"))
        .await
        .expect("b");
    let session = SessionId::new("s").expect("session");
    let leases_a = a.lease_manager();
    let guard = leases_a.acquire(&session).await.expect("a takes");
    tokio::time::sleep(ttl * 3).await;
    let now = agent_kernel::host::Clock::wall_ms(b.host().clock.as_ref());
    let err = b
        .host()
        .storage
        .try_acquire_lease(&session, b.owner(), now, 400)
        .await
        .expect_err("still held thanks to the heartbeat");
    assert!(matches!(err, LeaseError::Held { .. }), "{err}");
    // A dies: no release, no more heartbeat.
    guard.abandon();
    drop(leases_a);
    drop(a);
    tokio::time::sleep(ttl * 2).await;
    let leases_b = b.lease_manager();
    let taken = leases_b
        .acquire(&session)
        .await
        .expect("b takes after expiry");
    assert!(taken.epoch() >= 2);
}

#[tokio::test]
async fn a_file_is_not_a_data_directory() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("f");
    std::fs::write(&file, "x").expect("write");
    let err = NativeHost::open(&file).await.expect_err("file");
    assert!(matches!(err, HostError::DataDir { .. }), "{err}");
    assert!(err.to_string().contains("AGENTRT_DATA_DIR"));
}
