//! Time from the host: wall time, a monotonic instant, and sleep. All time in
//! the project goes through `Clock` (`SystemTime::now` panics on wasm32);
//! `ManualClock` lets tests and the simulator step time by hand.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures::FutureExt;

use crate::maybe_send::{BoxFuture, MaybeSend, MaybeSync};

/// A source of time.
pub trait Clock: MaybeSend + MaybeSync {
    /// Milliseconds since the Unix epoch. May step backwards (NTP, a person's clock).
    fn wall_ms(&self) -> u64;
    /// Time since an arbitrary fixed point; never goes backwards.
    fn monotonic(&self) -> Duration;
    /// Complete after `duration` of monotonic time.
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()>;
}

/// A deadline passed before the work finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("deadline of {0:?} passed")]
pub struct Elapsed(pub Duration);

/// Run `fut` until it finishes or `limit` of the clock's time passes.
pub async fn timeout<T>(
    clock: &dyn Clock,
    limit: Duration,
    fut: impl Future<Output = T>,
) -> Result<T, Elapsed> {
    let sleep = clock.sleep(limit).fuse();
    let fut = fut.fuse();
    futures::pin_mut!(sleep, fut);
    futures::select_biased! {
        value = fut => Ok(value),
        () = sleep => Err(Elapsed(limit)),
    }
}

struct Sleeper {
    deadline: Duration,
    state: Arc<Mutex<SleepState>>,
}

#[derive(Default)]
struct SleepState {
    done: bool,
    waker: Option<Waker>,
}

struct ManualInner {
    wall_ms: u64,
    mono: Duration,
    sleepers: Vec<Sleeper>,
}

/// A clock that moves only when told to. Clones share one time line.
#[derive(Clone)]
pub struct ManualClock {
    inner: Arc<Mutex<ManualInner>>,
}

impl std::fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManualClock")
            .field("wall_ms", &self.wall_ms())
            .field("monotonic", &self.monotonic())
            .finish()
    }
}

impl ManualClock {
    /// A clock whose wall time starts at `wall_ms` and monotonic time at zero.
    pub fn new(wall_ms: u64) -> Self {
        Self {
            inner: Arc::new(Mutex::new(ManualInner {
                wall_ms,
                mono: Duration::ZERO,
                sleepers: Vec::new(),
            })),
        }
    }

    /// Move both wall and monotonic time forward, waking sleepers that are due.
    pub fn advance(&self, by: Duration) {
        let due = {
            let Ok(mut inner) = self.inner.lock() else {
                return;
            };
            inner.mono += by;
            inner.wall_ms = inner
                .wall_ms
                .saturating_add(u64::try_from(by.as_millis()).unwrap_or(u64::MAX));
            let now = inner.mono;
            let (due, rest): (Vec<_>, Vec<_>) =
                inner.sleepers.drain(..).partition(|s| s.deadline <= now);
            inner.sleepers = rest;
            due
        };
        for sleeper in due {
            if let Ok(mut st) = sleeper.state.lock() {
                st.done = true;
                if let Some(w) = st.waker.take() {
                    w.wake();
                }
            }
        }
    }

    /// Set wall time to any value, including an earlier one (a clock step).
    pub fn set_wall_ms(&self, wall_ms: u64) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.wall_ms = wall_ms;
        }
    }

    /// How many sleeps are pending (lets tests wait until work is parked).
    pub fn pending_sleepers(&self) -> usize {
        self.inner.lock().map(|i| i.sleepers.len()).unwrap_or(0)
    }

    /// The earliest pending deadline, if any (lets a simulator jump to it).
    pub fn next_deadline(&self) -> Option<Duration> {
        self.inner
            .lock()
            .ok()
            .and_then(|i| i.sleepers.iter().map(|s| s.deadline).min())
    }
}

impl Clock for ManualClock {
    fn wall_ms(&self) -> u64 {
        self.inner.lock().map(|i| i.wall_ms).unwrap_or(0)
    }

    fn monotonic(&self) -> Duration {
        self.inner.lock().map(|i| i.mono).unwrap_or_default()
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        let state = Arc::new(Mutex::new(SleepState::default()));
        if let Ok(mut inner) = self.inner.lock() {
            if duration.is_zero() {
                if let Ok(mut st) = state.lock() {
                    st.done = true;
                }
            } else {
                let deadline = inner.mono + duration;
                inner.sleepers.push(Sleeper {
                    deadline,
                    state: state.clone(),
                });
            }
        }
        Box::pin(ManualSleep { state })
    }
}

struct ManualSleep {
    state: Arc<Mutex<SleepState>>,
}

impl Future for ManualSleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let Ok(mut st) = self.state.lock() else {
            return Poll::Ready(());
        };
        if st.done {
            Poll::Ready(())
        } else {
            st.waker = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}
