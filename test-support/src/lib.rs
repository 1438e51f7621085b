//! The tokio test host, written once: what a native test of any crate needs
//! from a host to run actors (spawning on the test's tokio runtime, real
//! time), a whole in-memory [`Host`] built from them, and a
//! [`RecordingClock`] whose sleeps pass at once. The production
//! hosts are `agent-host-native` (SQLite, tokio) and `agent-host-browser`
//! (IndexedDB, the page's event loop); crates below them cannot use those
//! in their own tests, so they use this. Never shipped (`publish = false`),
//! native only, and a dev-dependency only: `cargo xtask layering` checks
//! normal dependencies, and no normal dependency may name this crate.
//!
//! # Example
//!
//! A native test of any crate gets a whole in-memory host on the test's own
//! tokio runtime:
//!
//! ```
//! use agent_kernel::host::{Batch, Table};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let host = agent_test_support::memory_host(agent_test_support::clock(), 7);
//! host.storage
//!     .commit(Batch::new().put(Table::Meta, "k", b"v".to_vec()))
//!     .await
//!     .unwrap();
//! assert_eq!(host.storage.get(Table::Meta, "k").await.unwrap(), Some(b"v".to_vec()));
//! # }
//! ```

pub mod redirect;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agent_kernel::BoxFuture;
use agent_kernel::host::{Clock, Entropy, Executor, Host, Lifecycle, SeededEntropy};
use agent_kernel::memory::MemoryStorage;

/// Spawns onto the tokio runtime it was made on (the test's own, also when
/// the task is spawned from another thread); blocking work goes to tokio's
/// blocking pool.
pub struct TokioExecutor(tokio::runtime::Handle);

impl TokioExecutor {
    /// An executor for the current tokio runtime. Panics outside one, as
    /// `tokio::spawn` would: a test without a runtime is a wrong test.
    pub fn current() -> TokioExecutor {
        TokioExecutor(tokio::runtime::Handle::current())
    }
}

impl Executor for TokioExecutor {
    fn spawn(&self, task: BoxFuture<'static, ()>) {
        drop(self.0.spawn(task));
    }
    fn spawn_blocking(&self, job: Box<dyn FnOnce() + Send + 'static>) {
        drop(self.0.spawn_blocking(job));
    }
}

/// Real time: the wall clock from `SystemTime`, monotonic time from the
/// `Instant` it was made at, sleeps on tokio's timer.
pub struct SystemClock {
    start: Instant,
}

impl SystemClock {
    pub fn new() -> SystemClock {
        SystemClock {
            start: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn wall_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
    fn monotonic(&self) -> Duration {
        self.start.elapsed()
    }
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// [`TokioExecutor::current`], shared.
pub fn executor() -> Arc<dyn Executor> {
    Arc::new(TokioExecutor::current())
}

/// A fresh [`SystemClock`], shared.
pub fn clock() -> Arc<dyn Clock> {
    Arc::new(SystemClock::new())
}

/// A whole host in memory on the current tokio runtime: `clock` (a
/// `ManualClock` for deterministic tests, [`clock()`] for real time),
/// entropy seeded with `seed`, a fresh [`MemoryStorage`] (not durable) and
/// its own lifecycle.
pub fn memory_host(clock: Arc<dyn Clock>, seed: u64) -> Host {
    let entropy: Arc<dyn Entropy> = Arc::new(SeededEntropy::new(seed));
    Host {
        storage: Arc::new(MemoryStorage::new()),
        clock,
        executor: executor(),
        entropy,
        lifecycle: Lifecycle::new(),
        durable: false,
    }
}

/// A clock whose sleeps complete at once, moving its time forward and
/// recording how long each was: for backoff and retry bounds without
/// waiting. Tests read [`RecordingClock::sleeps`].
pub struct RecordingClock {
    inner: agent_kernel::host::ManualClock,
    /// Every sleep asked for, in order.
    pub sleeps: std::sync::Mutex<Vec<Duration>>,
}

impl Clock for RecordingClock {
    fn wall_ms(&self) -> u64 {
        self.inner.wall_ms()
    }
    fn monotonic(&self) -> Duration {
        self.inner.monotonic()
    }
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        if let Ok(mut sleeps) = self.sleeps.lock() {
            sleeps.push(duration);
        }
        self.inner.advance(duration);
        Box::pin(async {})
    }
}

/// A [`RecordingClock`] at 2026-01-01.
pub fn recording_clock() -> Arc<RecordingClock> {
    Arc::new(RecordingClock {
        inner: agent_kernel::host::ManualClock::new(1_767_225_600_000),
        sleeps: std::sync::Mutex::new(Vec::new()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[tokio::test]
    async fn spawned_tasks_and_blocking_jobs_run() {
        let exec = executor();
        let (tx, rx) = tokio::sync::oneshot::channel();
        exec.spawn(Box::pin(async move {
            let _ = tx.send(7);
        }));
        assert_eq!(rx.await.ok(), Some(7));
        let ran = Arc::new(AtomicBool::new(false));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let r = ran.clone();
        exec.spawn_blocking(Box::new(move || {
            r.store(true, Ordering::SeqCst);
            let _ = tx.send(());
        }));
        rx.await.expect("the blocking job ran");
        assert!(ran.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn the_clock_moves_and_sleeps() {
        let clock = SystemClock::new();
        let before = clock.monotonic();
        clock.sleep(Duration::from_millis(5)).await;
        assert!(clock.monotonic() >= before + Duration::from_millis(5));
        assert!(clock.wall_ms() > 1_700_000_000_000);
    }

    #[tokio::test]
    async fn a_memory_host_is_not_durable() {
        let host = memory_host(clock(), 1);
        assert!(!host.durable);
    }
}
