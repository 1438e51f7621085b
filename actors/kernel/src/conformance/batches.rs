//! Conformance cases for batches: a batch applies whole or not at all (a
//! failed condition, a stale fence), and the compare-and-set conditions.

use std::sync::Arc;

use crate::host::storage::{Batch, Fence, Storage, StorageError, Table};

use super::{T0, TTL, dump, owner, sid};

/// A batch whose last condition fails writes nothing, not even the ops
/// listed before it, and reports the failing table and key.
pub async fn batch_is_atomic_when_a_condition_fails(storage: Arc<dyn Storage>) {
    storage
        .commit(Batch::new().put(Table::Meta, "existing", b"old".to_vec()))
        .await
        .expect("seed");
    let before = dump(storage.as_ref()).await;
    let batch = Batch::new()
        .put(Table::Runs, "r1", b"run".to_vec())
        .put(Table::Journal, "r1/c1", b"journal".to_vec())
        .delete(Table::Meta, "existing")
        .put(Table::Meta, "existing", b"new".to_vec())
        .expect_absent(Table::Runs, "r1")
        .expect_present(Table::Meta, "existing")
        .expect_absent(Table::Meta, "existing");
    let err = storage
        .commit(batch)
        .await
        .expect_err("condition must fail");
    assert_eq!(
        err,
        StorageError::ConditionFailed {
            table: Table::Meta,
            key: "existing".into()
        }
    );
    assert_eq!(
        dump(storage.as_ref()).await,
        before,
        "a refused batch leaves nothing behind"
    );
}

/// A batch with a stale fence writes nothing and names the current epoch.
pub async fn batch_is_atomic_when_the_fence_is_stale(storage: Arc<dyn Storage>) {
    let s = sid("session-atomic");
    let lease = storage
        .try_acquire_lease(&s, &owner("tab-a"), T0, TTL)
        .await
        .expect("acquire");
    let before = dump(storage.as_ref()).await;
    let stale = Fence {
        session: s.clone(),
        epoch: lease.epoch + 1,
    };
    let err = storage
        .commit(
            Batch::new()
                .fenced(stale)
                .put(Table::Runs, "r1", b"run".to_vec())
                .put(Table::Journal, "r1/c1", b"j".to_vec()),
        )
        .await
        .expect_err("stale fence must be refused");
    assert_eq!(
        err,
        StorageError::StaleEpoch {
            session: s.clone(),
            presented: lease.epoch + 1,
            current: Some(lease.epoch),
        }
    );
    assert_eq!(dump(storage.as_ref()).await, before);
    // The current fence writes.
    storage
        .commit(
            Batch::new()
                .fenced(lease.fence())
                .put(Table::Runs, "r1", b"run".to_vec()),
        )
        .await
        .expect("current fence writes");
    assert_eq!(
        storage.get(Table::Runs, "r1").await.expect("get"),
        Some(b"run".to_vec())
    );
}

/// `expect_absent`, `expect_present` and `expect_value` hold or refuse as documented.
pub async fn compare_and_set_conditions(storage: Arc<dyn Storage>) {
    let t = Table::Meta;
    // Absent holds on a missing key: create once, the second create fails.
    storage
        .commit(
            Batch::new()
                .expect_absent(t, "k")
                .put(t, "k", b"1".to_vec()),
        )
        .await
        .expect("create");
    let err = storage
        .commit(
            Batch::new()
                .expect_absent(t, "k")
                .put(t, "k", b"2".to_vec()),
        )
        .await
        .expect_err("second create");
    assert_eq!(
        err,
        StorageError::ConditionFailed {
            table: t,
            key: "k".into()
        }
    );
    assert_eq!(storage.get(t, "k").await.expect("get"), Some(b"1".to_vec()));
    // Present.
    storage
        .commit(
            Batch::new()
                .expect_present(t, "k")
                .put(t, "other", b"x".to_vec()),
        )
        .await
        .expect("present holds");
    let err = storage
        .commit(
            Batch::new()
                .expect_present(t, "missing")
                .put(t, "other", b"y".to_vec()),
        )
        .await
        .expect_err("present on a missing key");
    assert_eq!(
        err,
        StorageError::ConditionFailed {
            table: t,
            key: "missing".into()
        }
    );
    assert_eq!(
        storage.get(t, "other").await.expect("get"),
        Some(b"x".to_vec())
    );
    // Equals: exact bytes only.
    storage
        .commit(
            Batch::new()
                .expect_value(t, "k", b"1".to_vec())
                .put(t, "k", b"2".to_vec()),
        )
        .await
        .expect("cas 1 -> 2");
    for wrong in [b"1".to_vec(), b"".to_vec(), b"2 ".to_vec()] {
        let err = storage
            .commit(
                Batch::new()
                    .expect_value(t, "k", wrong)
                    .put(t, "k", b"3".to_vec()),
            )
            .await
            .expect_err("cas with a wrong value");
        assert_eq!(
            err,
            StorageError::ConditionFailed {
                table: t,
                key: "k".into()
            }
        );
    }
    let err = storage
        .commit(
            Batch::new()
                .expect_value(t, "missing", Vec::new())
                .put(t, "k", b"3".to_vec()),
        )
        .await
        .expect_err("equals on a missing key, even against empty bytes");
    assert_eq!(
        err,
        StorageError::ConditionFailed {
            table: t,
            key: "missing".into()
        }
    );
    assert_eq!(storage.get(t, "k").await.expect("get"), Some(b"2".to_vec()));
    // Conditions are per table.
    let err = storage
        .commit(
            Batch::new()
                .expect_present(Table::Runs, "k")
                .put(t, "k", b"4".to_vec()),
        )
        .await
        .expect_err("the key exists in Meta, not in Runs");
    assert_eq!(
        err,
        StorageError::ConditionFailed {
            table: Table::Runs,
            key: "k".into()
        }
    );
    // A condition-only batch checks and writes nothing.
    storage
        .commit(Batch::new().expect_value(t, "k", b"2".to_vec()))
        .await
        .expect("condition-only batch");
}
