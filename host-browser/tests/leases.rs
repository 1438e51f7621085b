//! Session leases across tabs (S3) in headless Chromium: two `SessionLeases`
//! with different owners in one page stand for two tabs (Web Locks and
//! BroadcastChannel behave the same between contexts of one origin).
#![cfg(target_arch = "wasm32")]
// As in the crate: the kernel's host traits are shared as `Arc<dyn Trait>`,
// and the browser's storage is single-threaded by nature.
#![allow(clippy::arc_with_non_send_sync)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use agent_host_browser::idb::IdbStorage;
use agent_host_browser::locks::{LockBackend, Notice, SessionLeases};
use agent_host_browser::platform::{self, BrowserClock, BrowserExecutor};
use agent_kernel::host::{Batch, LeaseError, Storage, StorageError, Table};
use agent_kernel::{OwnerId, SessionId};
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

static NEXT: AtomicU32 = AtomicU32::new(0);

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        js_sys::Date::now() as u64,
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

struct Tab {
    leases: SessionLeases,
}

async fn two_tabs(backend: LockBackend) -> (Arc<IdbStorage>, Tab, Tab, String) {
    let name = unique("leases");
    let idb = Arc::new(IdbStorage::open(&name).await.expect("open"));
    let tab = |owner: &str| Tab {
        leases: SessionLeases::new(
            idb.clone() as Arc<dyn Storage>,
            Some(idb.clone()),
            Arc::new(BrowserClock),
            Arc::new(BrowserExecutor),
            OwnerId::new(owner).expect("owner"),
            backend,
            Duration::from_secs(30),
        ),
    };
    let a = tab(&unique("tab-a"));
    let b = tab(&unique("tab-b"));
    (idb, a, b, name)
}

async fn write(storage: &IdbStorage, fence: agent_kernel::host::Fence) -> Result<(), StorageError> {
    storage
        .commit(
            Batch::new()
                .fenced(fence)
                .put(Table::Meta, "k", b"v".to_vec()),
        )
        .await
}

async fn exclusive_then_released(backend: LockBackend) {
    let (idb, a, b, name) = two_tabs(backend).await;
    let s = SessionId::new(unique("s")).expect("session");
    let outer = a.leases.acquire(&s).await.expect("a takes the session");
    // S3.2: a nested run of the same tab joins; Web Locks alone would wait forever.
    let nested =
        agent_kernel::host::timeout(&BrowserClock, Duration::from_secs(2), a.leases.acquire(&s))
            .await
            .expect("a nested acquisition never waits")
            .expect("a joins its own lease");
    assert_eq!(nested.epoch(), outer.epoch());
    assert_eq!(a.leases.depth(&s), 2);
    // S3.1: the other tab cannot execute the session.
    let err = b.leases.acquire(&s).await.expect_err("b is refused");
    assert!(matches!(err, LeaseError::Held { .. }), "{err:?}");
    drop(nested);
    let err = b
        .leases
        .acquire(&s)
        .await
        .expect_err("still held by the outer run");
    assert!(matches!(err, LeaseError::Held { .. }), "{err:?}");
    let old_fence = outer.fence().expect("fence");
    write(&idb, old_fence.clone())
        .await
        .expect("a writes while it holds");
    drop(outer);
    assert_eq!(a.leases.depth(&s), 0);
    // The lock is released at once (the stored lease in the background).
    platform::sleep(Duration::from_millis(50)).await;
    let taken = b
        .leases
        .acquire(&s)
        .await
        .expect("b takes it after a let go");
    assert!(taken.epoch() > old_fence.epoch, "a new tenure, a new epoch");
    // S3.3: a's stale fence is refused from now on.
    let err = write(&idb, old_fence).await.expect_err("a is fenced out");
    assert!(matches!(err, StorageError::StaleEpoch { .. }), "{err:?}");
    write(&idb, taken.fence().expect("fence"))
        .await
        .expect("b writes");
    drop(taken);
    idb.close();
    let _ = IdbStorage::delete_database(&name).await;
}

#[wasm_bindgen_test]
async fn s3_web_locks_exclusive_reentrant_and_released() {
    assert_eq!(LockBackend::detect(), LockBackend::WebLocks);
    exclusive_then_released(LockBackend::WebLocks).await;
}

#[wasm_bindgen_test]
async fn s3_local_storage_heartbeat_fallback_exclusive_reentrant_and_released() {
    exclusive_then_released(LockBackend::LocalStorage).await;
}

/// S3.3: a tab that closed without releasing leaves a live stored lease; the
/// next tab that gets the Web Lock takes it over with epoch + 1 and the dead
/// tab's writes are refused.
#[wasm_bindgen_test]
async fn s3_3_closed_tab_lease_is_taken_over_and_fenced() {
    let (idb, _a, b, name) = two_tabs(LockBackend::WebLocks).await;
    let s = SessionId::new(unique("s")).expect("session");
    let dead = idb
        .try_acquire_lease(
            &s,
            &OwnerId::new("closed-tab").expect("owner"),
            agent_kernel::host::Clock::wall_ms(&BrowserClock),
            3_600_000,
        )
        .await
        .expect("the closed tab held it");
    let lease = b.leases.acquire(&s).await.expect("b takes over");
    assert_eq!(lease.epoch(), dead.epoch + 1);
    let err = write(&idb, dead.fence())
        .await
        .expect_err("the closed tab is fenced out");
    assert!(matches!(err, StorageError::StaleEpoch { .. }), "{err:?}");
    drop(lease);
    idb.close();
    let _ = IdbStorage::delete_database(&name).await;
}

/// Other tabs hear that a session became busy, changed, and free.
#[wasm_bindgen_test]
async fn s3_broadcast_busy_changed_free() {
    let (idb, a, b, name) = two_tabs(LockBackend::WebLocks).await;
    let s = SessionId::new(unique("s")).expect("session");
    let notices = b.leases.notices();
    let lease = a.leases.acquire(&s).await.expect("a takes it");
    a.leases.notify_changed(&s);
    drop(lease);
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let next =
            agent_kernel::host::timeout(&BrowserClock, Duration::from_secs(2), notices.next())
                .await
                .expect("a notice within 2 s")
                .expect("channel open");
        if next.session() == s.as_str() {
            seen.push(next);
        }
    }
    assert!(matches!(seen[0], Notice::Busy { .. }), "{seen:?}");
    assert!(matches!(seen[1], Notice::Changed { .. }), "{seen:?}");
    assert!(matches!(seen[2], Notice::Free { .. }), "{seen:?}");
    idb.close();
    let _ = IdbStorage::delete_database(&name).await;
}
