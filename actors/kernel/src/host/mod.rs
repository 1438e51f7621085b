//! Host traits: everything the runtime needs from its environment (storage,
//! blobs, leases, clock, executor, lifecycle, entropy, secrets). Native and browser
//! hosts implement them; `crate::memory` implements them in memory. The lease
//! rules live in [`lease_rules`]; the one atomic lease step every storage backend
//! implements, and the lease operations built on it, in [`lease_cas`].

pub mod clock;
pub mod entropy;
pub mod executor;
pub mod lease;
pub mod lease_cas;
pub mod lease_rules;
pub mod lifecycle;
pub mod secrets;
pub mod storage;

use std::sync::Arc;

pub use clock::{Clock, Elapsed, ManualClock, timeout};
pub use entropy::{Entropy, SeededEntropy, random_id, random_key};
pub use executor::Executor;
pub use lease::{LeaseGuard, LeaseManager};
pub use lease_cas::{LeaseCas, LeaseSwap};
pub use lifecycle::{Lifecycle, LifecycleEvent};
pub use secrets::{SecretError, SecretHandle, SecretResolver, SecretValue};
pub use storage::{
    Batch, BlobRef, Condition, Fence, LeaseError, LeaseRecord, Op, Record, Storage, StorageError,
    StorageExt, Table,
};

/// Everything a runtime component needs from its host, in one clonable bundle.
#[derive(Clone)]
pub struct Host {
    pub storage: Arc<dyn Storage>,
    pub clock: Arc<dyn Clock>,
    pub executor: Arc<dyn Executor>,
    pub entropy: Arc<dyn Entropy>,
    pub lifecycle: Lifecycle,
    /// True when `storage` survives a reload (false for the memory fallback).
    pub durable: bool,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("durable", &self.durable)
            .finish()
    }
}
