//! Session leases shared by every backend: reentrancy for one owner, guards,
//! renewal. Backends supply only the lease read and the atomic
//! compare-and-set (`Storage::lease_cas`, see [`crate::host::lease_cas`]);
//! every write then carries the guard's fence.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::host::clock::Clock;
use crate::host::executor::Executor;
use crate::host::storage::{Fence, LeaseError, LeaseRecord, Storage};
use crate::ids::{OwnerId, SessionId};

struct Held {
    record: LeaseRecord,
    depth: usize,
}

struct Shared {
    storage: Arc<dyn Storage>,
    clock: Arc<dyn Clock>,
    executor: Arc<dyn Executor>,
    owner: OwnerId,
    ttl: Duration,
    held: Mutex<HashMap<SessionId, Held>>,
}

/// Takes and keeps session leases for one owner (a tab or a process).
#[derive(Clone)]
pub struct LeaseManager {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LeaseManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseManager")
            .field("owner", &self.shared.owner)
            .finish()
    }
}

impl LeaseManager {
    pub fn new(
        storage: Arc<dyn Storage>,
        clock: Arc<dyn Clock>,
        executor: Arc<dyn Executor>,
        owner: OwnerId,
        ttl: Duration,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                storage,
                clock,
                executor,
                owner,
                ttl,
                held: Mutex::new(HashMap::new()),
            }),
        }
    }

    pub fn owner(&self) -> &OwnerId {
        &self.shared.owner
    }

    pub fn ttl(&self) -> Duration {
        self.shared.ttl
    }

    fn ttl_ms(&self) -> u64 {
        u64::try_from(self.shared.ttl.as_millis()).unwrap_or(u64::MAX)
    }

    /// Take the session's lease, or join it when this owner already holds it
    /// (a nested run, S3.2). Another live owner gives `LeaseError::Held`.
    pub async fn acquire(&self, session: &SessionId) -> Result<LeaseGuard, LeaseError> {
        if let Some(record) = self.join(session) {
            return Ok(self.guard(record));
        }
        let record = self
            .shared
            .storage
            .try_acquire_lease(
                session,
                &self.shared.owner,
                self.shared.clock.wall_ms(),
                self.ttl_ms(),
            )
            .await?;
        let mut held = self.shared.held.lock().map_err(|_| LeaseError::Lost {
            session: session.clone(),
            epoch: record.epoch,
        })?;
        // Two acquisitions may race across the await above; the later one joins.
        let entry = held.entry(session.clone()).or_insert(Held {
            record: record.clone(),
            depth: 0,
        });
        entry.depth += 1;
        let record = entry.record.clone();
        drop(held);
        Ok(self.guard(record))
    }

    fn join(&self, session: &SessionId) -> Option<LeaseRecord> {
        let mut held = self.shared.held.lock().ok()?;
        let entry = held.get_mut(session)?;
        entry.depth += 1;
        Some(entry.record.clone())
    }

    fn guard(&self, record: LeaseRecord) -> LeaseGuard {
        LeaseGuard {
            shared: self.shared.clone(),
            record,
            abandoned: false,
        }
    }

    /// How deeply this owner holds the session (0 when it does not).
    pub fn depth(&self, session: &SessionId) -> usize {
        self.shared
            .held
            .lock()
            .ok()
            .and_then(|h| h.get(session).map(|e| e.depth))
            .unwrap_or(0)
    }

    /// Renew every lease this owner holds, in one storage step; a lost one
    /// is forgotten and reported.
    pub async fn renew_all(&self) -> Vec<LeaseError> {
        let held: Vec<(SessionId, u64)> = match self.shared.held.lock() {
            Ok(held) => held
                .values()
                .map(|h| (h.record.session.clone(), h.record.epoch))
                .collect(),
            Err(_) => return Vec::new(),
        };
        if held.is_empty() {
            return Vec::new();
        }
        let renewed = self
            .shared
            .storage
            .renew_leases(
                &self.shared.owner,
                &held,
                self.shared.clock.wall_ms(),
                self.ttl_ms(),
            )
            .await;
        let mut errors = Vec::new();
        let Ok(mut current) = self.shared.held.lock() else {
            return errors;
        };
        for ((session, epoch), outcome) in held.into_iter().zip(renewed) {
            // A session released or taken again while the renewal ran is
            // left as it is now.
            let Some(entry) = current.get_mut(&session) else {
                continue;
            };
            if entry.record.epoch != epoch {
                continue;
            }
            match outcome {
                Ok(fresh) => entry.record = fresh,
                Err(e) => {
                    current.remove(&session);
                    errors.push(e);
                }
            }
        }
        errors
    }
}

/// Proof that this owner holds a session's lease. Dropping the last guard of
/// a session releases the lease in the background.
pub struct LeaseGuard {
    shared: Arc<Shared>,
    record: LeaseRecord,
    abandoned: bool,
}

impl std::fmt::Debug for LeaseGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseGuard")
            .field("session", &self.record.session)
            .field("epoch", &self.record.epoch)
            .finish()
    }
}

impl LeaseGuard {
    /// The fence every write of this holder carries.
    pub fn fence(&self) -> Fence {
        self.record.fence()
    }
    pub fn epoch(&self) -> u64 {
        self.record.epoch
    }
    pub fn session(&self) -> &SessionId {
        &self.record.session
    }
    /// Forget the guard without releasing the lease (simulates a killed tab:
    /// the lease stays until it expires or is taken over).
    pub fn abandon(mut self) {
        self.abandoned = true;
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        let release = {
            let Ok(mut held) = self.shared.held.lock() else {
                return;
            };
            match held.get_mut(&self.record.session) {
                Some(h) if h.record.epoch == self.record.epoch => {
                    h.depth = h.depth.saturating_sub(1);
                    if h.depth == 0 || self.abandoned {
                        held.remove(&self.record.session);
                        !self.abandoned
                    } else {
                        false
                    }
                }
                _ => false,
            }
        };
        if release {
            let shared = self.shared.clone();
            let record = self.record.clone();
            self.shared.executor.spawn(Box::pin(async move {
                // Failure to release is harmless: the lease expires by itself.
                let _ = shared
                    .storage
                    .release_lease(&record.session, &shared.owner, record.epoch)
                    .await;
            }));
        }
    }
}
