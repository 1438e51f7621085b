//! Host pieces: `ManualClock`, `timeout`, `Lifecycle`, `SeededEntropy`,
//! the `SimExecutor`, `MemoryHost`, and `LeaseManager` reentrancy.
#![cfg(not(target_arch = "wasm32"))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_kernel::host::{
    Clock, Elapsed, Entropy, Executor, LeaseError, LeaseManager, Lifecycle, LifecycleEvent,
    ManualClock, SeededEntropy, Storage, random_id, timeout,
};
use agent_kernel::memory::{MEMORY_HOST_START_WALL_MS, MemoryHost, SimExecutor};
use agent_kernel::{OwnerId, SessionId};
use futures::FutureExt;

// ----- ManualClock ----------------------------------------------------------

#[test]
fn sleep_completes_only_when_time_is_advanced_past_it() {
    let clock = ManualClock::new(5_000);
    let mut short = clock.sleep(Duration::from_millis(100));
    let mut long = clock.sleep(Duration::from_millis(300));
    assert_eq!(clock.pending_sleepers(), 2);
    assert_eq!(clock.next_deadline(), Some(Duration::from_millis(100)));
    assert!(short.as_mut().now_or_never().is_none());
    clock.advance(Duration::from_millis(99));
    assert!(short.as_mut().now_or_never().is_none());
    clock.advance(Duration::from_millis(1));
    assert!(short.as_mut().now_or_never().is_some());
    assert!(long.as_mut().now_or_never().is_none());
    assert_eq!(clock.pending_sleepers(), 1);
    clock.advance(Duration::from_millis(500));
    assert!(long.as_mut().now_or_never().is_some());
    assert_eq!(clock.pending_sleepers(), 0);
    assert_eq!(clock.monotonic(), Duration::from_millis(600));
    assert_eq!(clock.wall_ms(), 5_600);
    // A zero sleep is ready at once.
    assert!(clock.sleep(Duration::ZERO).now_or_never().is_some());
}

#[test]
fn a_sleep_wakes_its_task_on_the_executor() {
    let host = MemoryHost::fifo(1);
    let clock = host.clock().clone();
    let woke = Arc::new(AtomicUsize::new(0));
    let w = woke.clone();
    let c = clock.clone();
    host.executor().spawn(Box::pin(async move {
        c.sleep(Duration::from_secs(1)).await;
        w.fetch_add(1, Ordering::SeqCst);
    }));
    host.executor().run_until_stalled();
    assert_eq!(woke.load(Ordering::SeqCst), 0);
    host.advance(Duration::from_millis(999));
    assert_eq!(woke.load(Ordering::SeqCst), 0);
    host.advance(Duration::from_millis(1));
    assert_eq!(woke.load(Ordering::SeqCst), 1);
    assert_eq!(host.executor().pending_tasks(), 0);
}

#[test]
fn timeout_passes_the_value_or_reports_the_deadline() {
    let host = MemoryHost::fifo(1);
    let clock = host.clock().clone();
    // Finishes first.
    let got = host.block_on(timeout(&clock, Duration::from_secs(1), async { 7 }));
    assert_eq!(got, Some(Ok(7)));
    // Never finishes: the deadline passes once the clock reaches it.
    let never = futures::future::pending::<u32>();
    let got = host.block_on_advancing(timeout(&clock, Duration::from_secs(2), never));
    assert_eq!(got, Some(Err(Elapsed(Duration::from_secs(2)))));
    assert_eq!(clock.monotonic(), Duration::from_secs(2));
    // Finishes after some time, before the deadline.
    let c = clock.clone();
    let slow = async move {
        c.sleep(Duration::from_millis(500)).await;
        "done"
    };
    let got = host.block_on_advancing(timeout(&clock, Duration::from_secs(1), slow));
    assert_eq!(got, Some(Ok("done")));
    assert_eq!(clock.monotonic(), Duration::from_millis(2_500));
}

#[test]
fn wall_time_may_step_backwards_but_monotonic_time_does_not() {
    let clock = ManualClock::new(10_000);
    clock.advance(Duration::from_millis(50));
    assert_eq!(clock.wall_ms(), 10_050);
    clock.set_wall_ms(2_000);
    assert_eq!(clock.wall_ms(), 2_000);
    assert_eq!(clock.monotonic(), Duration::from_millis(50));
    clock.advance(Duration::from_millis(10));
    assert_eq!(clock.wall_ms(), 2_010);
    assert_eq!(clock.monotonic(), Duration::from_millis(60));
    // Clones share one time line.
    let other = clock.clone();
    other.advance(Duration::from_millis(1));
    assert_eq!(clock.monotonic(), Duration::from_millis(61));
}

// ----- Lifecycle -------------------------------------------------------------

#[test]
fn lifecycle_fans_out_to_every_subscriber() {
    let lifecycle = Lifecycle::new();
    let a = lifecycle.subscribe();
    let b = lifecycle.clone().subscribe();
    assert!(lifecycle.is_online());
    lifecycle.emit(LifecycleEvent::Offline);
    assert!(!lifecycle.is_online());
    lifecycle.emit(LifecycleEvent::PageHidden);
    for rx in [&a, &b] {
        assert_eq!(rx.try_recv(), Ok(LifecycleEvent::Offline));
        assert_eq!(rx.try_recv(), Ok(LifecycleEvent::PageHidden));
        assert!(rx.try_recv().is_err());
    }
    // A dropped subscriber is forgotten; a late one hears only later events.
    drop(b);
    let late = lifecycle.subscribe();
    lifecycle.emit(LifecycleEvent::Online);
    assert!(lifecycle.is_online());
    assert_eq!(a.try_recv(), Ok(LifecycleEvent::Online));
    assert_eq!(late.try_recv(), Ok(LifecycleEvent::Online));
    lifecycle.emit(LifecycleEvent::ExecutorLost);
    assert_eq!(late.try_recv(), Ok(LifecycleEvent::ExecutorLost));
}

// ----- Entropy ---------------------------------------------------------------

#[test]
fn seeded_entropy_replays_exactly() {
    let a = SeededEntropy::new(42);
    let b = SeededEntropy::new(42);
    let c = SeededEntropy::new(43);
    let (mut x, mut y, mut z) = ([0u8; 13], [0u8; 13], [0u8; 13]);
    a.fill(&mut x);
    b.fill(&mut y);
    c.fill(&mut z);
    assert_eq!(x, y);
    assert_ne!(x, z);
    let id = random_id(&a, "run-");
    assert!(id.starts_with("run-") && id.len() == 4 + 32, "{id}");
    assert_eq!(id, random_id(&b, "run-"));
}

// ----- SimExecutor -------------------------------------------------------------

fn record_order(exec: &SimExecutor, tasks: usize, rounds: usize) -> Vec<(usize, usize)> {
    let log = Arc::new(Mutex::new(Vec::new()));
    for t in 0..tasks {
        let log = log.clone();
        exec.spawn(Box::pin(async move {
            for r in 0..rounds {
                log.lock().unwrap().push((t, r));
                yield_now().await;
            }
        }));
    }
    exec.run_until_stalled();
    assert_eq!(exec.pending_tasks(), 0);
    log.lock().unwrap().clone()
}

/// Yield once: wake ourselves and return Pending.
async fn yield_now() {
    let mut yielded = false;
    futures::future::poll_fn(move |cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await;
}

#[test]
fn fifo_executor_polls_in_ready_order() {
    let exec = SimExecutor::new();
    let order = record_order(&exec, 3, 2);
    assert_eq!(order, vec![(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]);
}

#[test]
fn seeded_executor_order_is_reproducible() {
    let a = record_order(&SimExecutor::seeded(7), 6, 4);
    let b = record_order(&SimExecutor::seeded(7), 6, 4);
    assert_eq!(a, b, "same seed, same poll order");
    assert_eq!(a.len(), 24);
    let fifo = record_order(&SimExecutor::new(), 6, 4);
    let differs = (0..20u64).any(|seed| record_order(&SimExecutor::seeded(seed), 6, 4) != fifo);
    assert!(differs, "seeded orders are not all FIFO");
    let distinct: std::collections::HashSet<_> = (0..10u64)
        .map(|seed| record_order(&SimExecutor::seeded(seed), 6, 4))
        .collect();
    assert!(distinct.len() > 1, "different seeds give different orders");
}

#[test]
fn nothing_runs_until_driven_and_step_polls_one_task() {
    let exec = SimExecutor::new();
    let hits = Arc::new(AtomicUsize::new(0));
    for _ in 0..3 {
        let h = hits.clone();
        exec.spawn(Box::pin(async move {
            h.fetch_add(1, Ordering::SeqCst);
        }));
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    assert_eq!(exec.pending_tasks(), 3);
    assert_eq!(exec.ready_tasks(), 3);
    assert!(exec.step());
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    assert_eq!(exec.run_until_stalled(), 2);
    assert!(!exec.step());
    assert_eq!(exec.polls(), 3);
}

struct SpawnOnDrop {
    exec: SimExecutor,
    ran: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
}

impl Drop for SpawnOnDrop {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
        let ran = self.ran.clone();
        // Like a lease guard releasing in the background.
        self.exec.spawn(Box::pin(async move {
            ran.fetch_add(1, Ordering::SeqCst);
        }));
    }
}

#[test]
fn kill_drops_every_task_and_runs_no_cleanup() {
    let exec = SimExecutor::new();
    let ran = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    for _ in 0..3 {
        let guard = SpawnOnDrop {
            exec: exec.clone(),
            ran: ran.clone(),
            dropped: dropped.clone(),
        };
        exec.spawn(Box::pin(async move {
            let _guard = guard;
            futures::future::pending::<()>().await;
        }));
    }
    exec.run_until_stalled();
    assert_eq!(exec.pending_tasks(), 3);
    // 3 tasks, plus the 3 their drops spawned.
    assert_eq!(exec.kill(), 6);
    assert_eq!(dropped.load(Ordering::SeqCst), 3);
    assert_eq!(exec.pending_tasks(), 0);
    exec.run_until_stalled();
    assert_eq!(ran.load(Ordering::SeqCst), 0, "no cleanup ran");
    // The executor works again afterwards.
    let r = ran.clone();
    exec.spawn(Box::pin(async move {
        r.fetch_add(10, Ordering::SeqCst);
    }));
    exec.run_until_stalled();
    assert_eq!(ran.load(Ordering::SeqCst), 10);
}

#[test]
fn a_task_may_kill_its_own_executor() {
    let exec = SimExecutor::new();
    let after = Arc::new(AtomicUsize::new(0));
    let e = exec.clone();
    let a = after.clone();
    exec.spawn(Box::pin(async move {
        e.kill();
        yield_now().await;
        a.fetch_add(1, Ordering::SeqCst);
    }));
    let other = after.clone();
    exec.spawn(Box::pin(async move {
        other.fetch_add(100, Ordering::SeqCst);
    }));
    exec.run_until_stalled();
    assert_eq!(after.load(Ordering::SeqCst), 0);
    assert_eq!(exec.pending_tasks(), 0);
}

#[test]
fn block_on_returns_none_when_everything_stalls() {
    let exec = SimExecutor::new();
    assert_eq!(exec.block_on(futures::future::pending::<u8>()), None);
    let clock = ManualClock::new(0);
    assert_eq!(exec.block_on(clock.sleep(Duration::from_secs(1))), None);
    assert_eq!(
        exec.block_on_advancing(&clock, clock.sleep(Duration::from_secs(1))),
        Some(())
    );
    // Reentrant driving from inside a task does nothing instead of deadlocking.
    let e = exec.clone();
    let inner = Arc::new(Mutex::new(None));
    let i = inner.clone();
    exec.spawn(Box::pin(async move {
        *i.lock().unwrap() = Some(e.run_until_stalled());
    }));
    exec.run_until_stalled();
    assert_eq!(*inner.lock().unwrap(), Some(0));
}

#[test]
fn spawn_blocking_runs_inline() {
    let exec = SimExecutor::new();
    let hit = Arc::new(AtomicUsize::new(0));
    let h = hit.clone();
    exec.spawn_blocking(Box::new(move || {
        h.fetch_add(1, Ordering::SeqCst);
    }));
    assert_eq!(hit.load(Ordering::SeqCst), 1);
}

#[test]
fn memory_host_bundles_its_parts() {
    let host = MemoryHost::new(3);
    let bundle = host.host();
    assert!(!bundle.durable);
    assert_eq!(bundle.clock.wall_ms(), MEMORY_HOST_START_WALL_MS);
    host.clock().advance(Duration::from_secs(1));
    assert_eq!(bundle.clock.wall_ms(), MEMORY_HOST_START_WALL_MS + 1_000);
    let id_a = random_id(bundle.entropy.as_ref(), "x");
    let id_b = random_id(MemoryHost::new(3).host().entropy.as_ref(), "x");
    assert_eq!(id_a, id_b, "same seed, same ids");
    host.lifecycle().emit(LifecycleEvent::Offline);
    assert!(!bundle.lifecycle.is_online());
}

// ----- LeaseManager ------------------------------------------------------------

const TTL: Duration = Duration::from_secs(30);

fn manager(host: &MemoryHost, owner: &str) -> LeaseManager {
    let h = host.host();
    LeaseManager::new(
        h.storage,
        h.clock,
        h.executor,
        OwnerId::new(owner).unwrap(),
        TTL,
    )
}

fn session() -> SessionId {
    SessionId::new("session-1").unwrap()
}

#[test]
fn nested_acquire_is_reentrant_and_the_last_guard_releases() {
    let host = MemoryHost::fifo(1);
    let tab = manager(&host, "tab-a");
    let s = session();
    let outer = host.block_on(tab.acquire(&s)).unwrap().unwrap();
    assert_eq!(outer.epoch(), 1);
    assert_eq!(tab.depth(&s), 1);
    let inner = host.block_on(tab.acquire(&s)).unwrap().unwrap();
    assert_eq!(inner.epoch(), outer.epoch(), "nested run: same epoch");
    assert_eq!(inner.fence(), outer.fence());
    assert_eq!(tab.depth(&s), 2);
    let third = host.block_on(tab.acquire(&s)).unwrap().unwrap();
    assert_eq!(tab.depth(&s), 3);
    drop(third);
    drop(inner);
    assert_eq!(tab.depth(&s), 1);
    host.executor().run_until_stalled();
    let lease = host
        .block_on(host.storage().current_lease(&s))
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        lease.is_live(host.clock().wall_ms()),
        "still held by the outer guard"
    );
    drop(outer);
    assert_eq!(tab.depth(&s), 0);
    // The release runs through the executor.
    assert_eq!(host.executor().pending_tasks(), 1);
    host.executor().run_until_stalled();
    let lease = host
        .block_on(host.storage().current_lease(&s))
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        !lease.is_live(host.clock().wall_ms()),
        "released once the last guard dropped"
    );
    assert_eq!(lease.epoch, 1);
    // Another owner now gets the lease at once, with the next epoch.
    let other = manager(&host, "tab-b");
    let guard = host.block_on(other.acquire(&s)).unwrap().unwrap();
    assert_eq!(guard.epoch(), 2);
}

#[test]
fn another_owner_is_held_off_until_an_abandoned_lease_expires() {
    let host = MemoryHost::fifo(1);
    let a = manager(&host, "tab-a");
    let b = manager(&host, "tab-b");
    let s = session();
    let guard = host.block_on(a.acquire(&s)).unwrap().unwrap();
    assert_eq!(guard.session(), &s);
    guard.abandon();
    assert_eq!(a.depth(&s), 0);
    host.executor().run_until_stalled();
    // Abandoned, not released: the lease stays until it expires.
    match host.block_on(b.acquire(&s)).unwrap() {
        Err(LeaseError::Held { owner, .. }) => assert_eq!(owner.as_str(), "tab-a"),
        other => panic!("expected Held, got {other:?}"),
    }
    host.clock().advance(TTL - Duration::from_millis(1));
    assert!(matches!(
        host.block_on(b.acquire(&s)).unwrap(),
        Err(LeaseError::Held { .. })
    ));
    host.clock().advance(Duration::from_millis(1));
    let taken = host.block_on(b.acquire(&s)).unwrap().unwrap();
    assert_eq!(taken.epoch(), 2);
    // The old owner cannot come back while B holds it.
    assert!(matches!(
        host.block_on(a.acquire(&s)).unwrap(),
        Err(LeaseError::Held { .. })
    ));
}

#[test]
fn renew_all_extends_held_leases_and_forgets_lost_ones() {
    let host = MemoryHost::fifo(1);
    let a = manager(&host, "tab-a");
    let b = manager(&host, "tab-b");
    let s = session();
    let guard = host.block_on(a.acquire(&s)).unwrap().unwrap();
    host.clock().advance(Duration::from_secs(20));
    assert!(host.block_on(a.renew_all()).unwrap().is_empty());
    host.clock().advance(Duration::from_secs(20));
    // Renewed at 20 s for 30 s: still live at 40 s.
    assert!(matches!(
        host.block_on(b.acquire(&s)).unwrap(),
        Err(LeaseError::Held { .. })
    ));
    // Let it expire and B take it: A's renewal now reports the loss.
    host.clock().advance(Duration::from_secs(11));
    let _b_guard = host.block_on(b.acquire(&s)).unwrap().unwrap();
    let errors = host.block_on(a.renew_all()).unwrap();
    assert_eq!(errors.len(), 1);
    assert!(matches!(errors[0], LeaseError::Lost { .. }));
    assert_eq!(a.depth(&s), 0);
    drop(guard);
    host.executor().run_until_stalled();
    // A's stale guard releasing did not release B's lease.
    let lease = host
        .block_on(host.storage().current_lease(&s))
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(lease.owner.as_str(), "tab-b");
    assert!(lease.is_live(host.clock().wall_ms()));
}
