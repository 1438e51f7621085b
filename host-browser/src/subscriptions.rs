//! The runtime's registry of live event subscriptions: it owns each
//! subscription's stop switch, so a subscription lives until it is closed or
//! the runtime closes, never until its JS handle is garbage-collected.
//!
//! `AgentRuntime.subscribe` opens an entry and spawns the task that forwards
//! events to the callback; the JS `Subscription` handle keeps only the entry's
//! id and a weak reference to the runtime. Dropping or finalizing the handle
//! (wasm-bindgen frees it when the page lets it go) therefore changes nothing;
//! `close()` flips the switch, `close_all` (the runtime's `close()`) flips
//! every switch, and dropping the registry with the runtime drops every switch,
//! which ends the tasks too. A task that ends, for whatever reason, calls
//! [`SubscriptionRegistry::ended`], so closed subscriptions leave no entry.
//!
//! Pure Rust (no browser types): the rules are tested natively.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use futures::channel::oneshot;

/// Identifies one subscription within its runtime.
pub type SubscriptionId = u64;

/// Resolves when the subscription must stop: on `close`, `close_all`, or
/// when the registry is dropped (then with `Canceled`, which means the same).
pub type StopSignal = oneshot::Receiver<()>;

/// `open` after `close_all`: the runtime is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("this runtime was closed; it takes no new subscriptions")]
pub struct RegistryClosed;

/// The live subscriptions of one runtime, by id. Single-threaded (a tab).
#[derive(Default)]
pub struct SubscriptionRegistry {
    next_id: Cell<SubscriptionId>,
    /// The stop switch of each subscription whose task has not ended yet;
    /// `None` once the switch was flipped but the task has not noticed.
    live: RefCell<HashMap<SubscriptionId, Option<oneshot::Sender<()>>>>,
    closed: Cell<bool>,
}

impl SubscriptionRegistry {
    pub fn new() -> SubscriptionRegistry {
        SubscriptionRegistry::default()
    }

    /// Register a new subscription; its task must await the returned signal
    /// and call [`ended`](Self::ended) when it finishes.
    pub fn open(&self) -> Result<(SubscriptionId, StopSignal), RegistryClosed> {
        if self.closed.get() {
            return Err(RegistryClosed);
        }
        let id = self.next_id.get();
        self.next_id.set(id.wrapping_add(1));
        let (stop_tx, stop_rx) = oneshot::channel();
        self.live.borrow_mut().insert(id, Some(stop_tx));
        Ok((id, stop_rx))
    }

    /// Whether `id` may still deliver events: opened, not closed, not ended.
    pub fn is_open(&self, id: SubscriptionId) -> bool {
        matches!(self.live.borrow().get(&id), Some(Some(_)))
    }

    /// Stop subscription `id`; closing it again, or an unknown id, does nothing.
    pub fn close(&self, id: SubscriptionId) {
        let switch = self.live.borrow_mut().get_mut(&id).and_then(Option::take);
        if let Some(stop) = switch {
            let _ = stop.send(());
        }
    }

    /// Stop every subscription and refuse new ones (the runtime closes).
    pub fn close_all(&self) {
        self.closed.set(true);
        let switches: Vec<oneshot::Sender<()>> = self
            .live
            .borrow_mut()
            .values_mut()
            .filter_map(Option::take)
            .collect();
        for stop in switches {
            let _ = stop.send(());
        }
    }

    /// The task of `id` has finished: forget the subscription.
    pub fn ended(&self, id: SubscriptionId) {
        self.live.borrow_mut().remove(&id);
    }

    /// Subscriptions whose task has not ended (closed ones included until
    /// their task notices).
    pub fn live(&self) -> usize {
        self.live.borrow().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    /// What a forwarding task does with its signal: poll it, and end (calling
    /// `ended`) once it fired.
    fn task_notices(registry: &SubscriptionRegistry, id: SubscriptionId, stop: &mut StopSignal) {
        if stop.now_or_never().is_some() {
            registry.ended(id);
        }
    }

    #[test]
    fn a_subscription_lives_until_closed_and_then_leaves_no_entry() {
        let registry = SubscriptionRegistry::new();
        let (id, mut stop) = registry.open().expect("open");
        assert!(registry.is_open(id));
        task_notices(&registry, id, &mut stop);
        assert_eq!(registry.live(), 1, "nothing stops it but close");
        registry.close(id);
        assert!(!registry.is_open(id), "no delivery once close returned");
        assert_eq!(registry.live(), 1, "until its task notices");
        task_notices(&registry, id, &mut stop);
        assert_eq!(registry.live(), 0);
        registry.close(id);
        registry.close(12_345);
        assert_eq!(
            registry.live(),
            0,
            "closing twice or an unknown id is harmless"
        );
    }

    #[test]
    fn many_opened_and_closed_subscriptions_leave_the_registry_empty() {
        let registry = SubscriptionRegistry::new();
        let mut opened: Vec<_> = (0..1_000).map(|_| registry.open().expect("open")).collect();
        assert_eq!(registry.live(), 1_000);
        let ids: std::collections::HashSet<_> = opened.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids.len(), 1_000, "ids are distinct");
        for (id, stop) in &mut opened {
            registry.close(*id);
            task_notices(&registry, *id, stop);
        }
        assert_eq!(registry.live(), 0);
    }

    #[test]
    fn closing_the_runtime_stops_every_subscription_and_refuses_new_ones() {
        let registry = SubscriptionRegistry::new();
        let mut opened: Vec<_> = (0..10).map(|_| registry.open().expect("open")).collect();
        registry.close_all();
        for (id, stop) in &mut opened {
            assert!(!registry.is_open(*id));
            task_notices(&registry, *id, stop);
        }
        assert_eq!(registry.live(), 0);
        assert_eq!(registry.open().err(), Some(RegistryClosed));
    }

    #[test]
    fn dropping_the_registry_stops_every_task() {
        let registry = SubscriptionRegistry::new();
        let (_, stop) = registry.open().expect("open");
        drop(registry);
        assert!(
            stop.now_or_never().is_some(),
            "a dropped switch fires the signal (Canceled)"
        );
    }
}
