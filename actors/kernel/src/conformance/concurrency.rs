//! Conformance cases for concurrent writers: compare-and-set increments are
//! exact, and one of many concurrent lease acquisitions wins.

use std::sync::Arc;

use futures::future::join_all;
use serde::{Deserialize, Serialize};

use crate::host::storage::{Batch, LeaseError, Storage, StorageError, Table};

use super::{T0, TTL, owner, sid};

#[derive(Serialize, Deserialize)]
struct Counter {
    value: u64,
}

/// Many concurrent compare-and-set increments of one counter, each retrying
/// on `ConditionFailed`, end with the exact count.
pub async fn concurrent_cas_increments_are_exact(storage: Arc<dyn Storage>) {
    const WRITERS: u64 = 16;
    const EACH: u64 = 8;
    let t = Table::Meta;
    let key = "counter";
    let encode = |value: u64| serde_json::to_vec(&Counter { value }).unwrap_or_default();
    storage
        .commit(Batch::new().expect_absent(t, key).put(t, key, encode(0)))
        .await
        .expect("create counter");
    let writers = (0..WRITERS).map(|_| {
        let storage = storage.clone();
        async move {
            let mut conflicts = 0u64;
            for _ in 0..EACH {
                loop {
                    let current = storage
                        .get(t, key)
                        .await
                        .expect("get")
                        .expect("counter exists");
                    let value: Counter = serde_json::from_slice(&current).expect("counter decodes");
                    let batch = Batch::new().expect_value(t, key, current).put(
                        t,
                        key,
                        encode(value.value + 1),
                    );
                    match storage.commit(batch).await {
                        Ok(()) => break,
                        Err(StorageError::ConditionFailed { .. }) => {
                            conflicts += 1;
                            futures::future::ready(()).await;
                        }
                        Err(e) => panic!("unexpected storage error: {e}"),
                    }
                }
            }
            conflicts
        }
    });
    let _conflicts: u64 = join_all(writers).await.into_iter().sum();
    let last = storage
        .get(t, key)
        .await
        .expect("get")
        .expect("counter exists");
    let last: Counter = serde_json::from_slice(&last).expect("decodes");
    assert_eq!(
        last.value,
        WRITERS * EACH,
        "every increment counted exactly once"
    );
}

/// Concurrent acquisitions of one free lease by different owners: exactly
/// one wins, the others are told who holds it.
pub async fn concurrent_lease_acquisitions_have_one_winner(storage: Arc<dyn Storage>) {
    const OWNERS: usize = 12;
    let s = sid("session-race");
    let attempts = (0..OWNERS).map(|i| {
        let storage = storage.clone();
        let s = s.clone();
        async move {
            storage
                .try_acquire_lease(&s, &owner(&format!("tab-{i}")), T0, TTL)
                .await
        }
    });
    let results = join_all(attempts).await;
    let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1, "exactly one holder: {results:?}");
    let winner = winners[0].clone();
    assert_eq!(winner.epoch, 1);
    for r in &results {
        match r {
            Ok(rec) => assert_eq!(rec, &winner),
            Err(LeaseError::Held { owner, .. }) => assert_eq!(owner, &winner.owner),
            Err(e) => panic!("unexpected lease error: {e}"),
        }
    }
    assert_eq!(
        storage.current_lease(&s).await.expect("current"),
        Some(winner)
    );
}
