//! Lifecycle events from the host (online, offline, page hidden, executor
//! lost), fanned out to every subscriber.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// Something happened to the page or process that running work must react to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LifecycleEvent {
    Online,
    Offline,
    /// `pagehide` in the browser; interrupts foreground work.
    PageHidden,
    /// The executor that ran the work is gone (a Worker terminated, a runtime shut down).
    ExecutorLost,
}

#[derive(Default)]
struct Inner {
    subscribers: Vec<async_channel::Sender<LifecycleEvent>>,
    offline: bool,
}

/// A fan-out of lifecycle events. Clones share subscribers.
#[derive(Clone, Default)]
pub struct Lifecycle {
    inner: Arc<Mutex<Inner>>,
}

impl std::fmt::Debug for Lifecycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lifecycle")
            .field("online", &self.is_online())
            .finish()
    }
}

impl Lifecycle {
    pub fn new() -> Self {
        Self::default()
    }

    /// A receiver of every event emitted from now on.
    pub fn subscribe(&self) -> async_channel::Receiver<LifecycleEvent> {
        let (tx, rx) = async_channel::unbounded();
        if let Ok(mut inner) = self.inner.lock() {
            inner.subscribers.push(tx);
        }
        rx
    }

    /// Deliver an event to every live subscriber, dropping closed ones.
    pub fn emit(&self, event: LifecycleEvent) {
        if let Ok(mut inner) = self.inner.lock() {
            match event {
                LifecycleEvent::Offline => inner.offline = true,
                LifecycleEvent::Online => inner.offline = false,
                _ => {}
            }
            inner
                .subscribers
                .retain(|tx| tx.try_send(event).is_ok() || !tx.is_closed());
        }
    }

    /// False after `Offline` until the next `Online`.
    pub fn is_online(&self) -> bool {
        self.inner.lock().map(|i| !i.offline).unwrap_or(true)
    }
}
