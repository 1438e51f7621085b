//! The storage conformance suite (feature `conformance`): one async function
//! per behaviour of [`Storage`], the one list of those cases
//! ([`for_each_conformance_case!`](crate::for_each_conformance_case), from
//! which [`CASES`] is generated), and the
//! [`storage_conformance_tests!`](crate::storage_conformance_tests) macro that
//! expands that list into one test per case for a backend. A new case is a
//! `pub async fn` here plus its name in the list; the unit test
//! `every_public_case_is_listed` fails if the name is missing.
//!
//! Every backend (memory, SQLite, IndexedDB) runs the same cases, so that the
//! runtime can rely on the same semantics everywhere: atomic fenced batches,
//! compare-and-set conditions, content-addressed blobs, byte-ordered prefix
//! scans, leases with epochs, and corrupt records reported, never hidden.
//!
//! The case functions panic (through `assert!`) on a violation: they are test
//! code, compiled only with the `conformance` feature.
//!
//! # Usage
//!
//! A backend with an async test attribute (tokio, wasm-bindgen-test):
//!
//! ```ignore
//! agent_kernel::storage_conformance_tests! {
//!     attr: #[tokio::test],
//!     fixture: async {
//!         let dir = tempfile::tempdir().unwrap();
//!         let storage = SqliteStorage::open(dir.path().join("db.sqlite")).await.unwrap();
//!         (Arc::new(storage) as Arc<dyn Storage>, dir) // the guard lives as long as the test
//!     },
//! }
//! ```
//!
//! A backend tested with plain `#[test]` and a blocking executor:
//!
//! ```ignore
//! agent_kernel::storage_conformance_tests! {
//!     attr: #[test],
//!     block_on: futures::executor::block_on,
//!     fixture: async { Arc::new(MemoryStorage::new()) as Arc<dyn Storage> },
//! }
//! ```
//!
//! The fixture is evaluated afresh in every test; it yields either an
//! `Arc<dyn Storage>` or a pair `(Arc<dyn Storage>, guard)` whose guard (a
//! temporary directory, a database name to delete) is dropped after the test.

use std::sync::Arc;

use agent_capabilities::{EffectClass, EffectSet, Fingerprint, Idempotency, Trust};
use futures::future::join_all;
use serde::{Deserialize, Serialize};

use crate::budget::Budget;
use crate::host::lease_cas::{LeaseCas, LeaseSwap};
use crate::host::storage::{
    Batch, BlobRef, Fence, LeaseError, LeaseRecord, Record, Storage, StorageError, StorageExt,
    Table,
};
use crate::ids::{CallId, OwnerId, RequestId, RunId, SessionId};
use crate::journal::{CallState, JournalRecord};
use crate::protocol::{Provenance, Reference, ReferenceKind};
use crate::run::{
    Activity, ActivityKind, AgentRun, Checkpoint, CheckpointStage, Evidence, PendingKind,
    PendingRequest, RunMode, RunStatus, Usage,
};

/// What a conformance fixture yields: the storage under test, and anything
/// that must live as long as the test (a temporary directory).
pub trait StorageFixture {
    fn storage(&self) -> Arc<dyn Storage>;
}

impl StorageFixture for Arc<dyn Storage> {
    fn storage(&self) -> Arc<dyn Storage> {
        self.clone()
    }
}

impl<G> StorageFixture for (Arc<dyn Storage>, G) {
    fn storage(&self) -> Arc<dyn Storage> {
        self.0.clone()
    }
}

/// The one list of cases: invokes `$callback!($($extra)* case)` once per case,
/// in this order.
///
/// This is the only place where the cases are named. [`CASES`] and
/// [`storage_conformance_tests!`](crate::storage_conformance_tests) are both
/// generated from it, and the unit test `every_public_case_is_listed` checks
/// that every `pub async fn` of this module is in it, so a case cannot be left
/// out of a backend's tests silently.
///
/// ```ignore
/// macro_rules! one_test {
///     ($case:ident) => {
///         #[tokio::test]
///         async fn $case() {
///             agent_kernel::conformance::$case(fresh_storage().await).await;
///         }
///     };
/// }
/// agent_kernel::for_each_conformance_case!(one_test);
/// ```
///
/// Tokens after the callback (`for_each_conformance_case!(cb, @mode [x])`)
/// are passed before the case name: `cb!(@mode [x] case)`.
#[macro_export]
macro_rules! for_each_conformance_case {
    // The whole list in one invocation: `$callback!($($extra)* case case ...)`.
    (@all [$callback:path] [$($extra:tt)*]) => {
        $callback!($($extra)*
            round_trip_every_table
            round_trip_typed_records
            batch_is_atomic_when_a_condition_fails
            batch_is_atomic_when_the_fence_is_stale
            compare_and_set_conditions
            fence_refuses_a_stale_writer_after_takeover
            fence_without_a_lease_is_refused
            lease_release_then_other_owner_gets_next_epoch
            lease_same_owner_reacquire_keeps_epoch
            lease_held_by_live_other_owner
            lease_renew_and_release_check_owner_and_epoch
            lease_renewals_together_answer_each_lease
            lease_cas_at_the_boundary
            lease_cas_all_answers_each_swap_in_order
            blob_with_wrong_hash_is_refused
            blob_same_bytes_stored_once
            blob_get_delete_list
            blobs_in_a_batch_commit_with_it
            prefix_scans_are_ordered_by_bytes
            concurrent_cas_increments_are_exact
            concurrent_lease_acquisitions_have_one_winner
            corrupt_record_is_reported_and_kept
        );
    };
    (@each [$callback:path] $extra:tt $($case:ident)+) => {
        $( $crate::__conformance_apply!([$callback] $extra $case); )+
    };
    ($callback:path $(, $($extra:tt)*)?) => {
        $crate::for_each_conformance_case!(@all [$crate::for_each_conformance_case]
            [@each [$callback] [$($($extra)*)?]]);
    };
}

/// Implementation detail of [`for_each_conformance_case!`](crate::for_each_conformance_case):
/// one callback invocation.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_apply {
    ([$callback:path] [$($extra:tt)*] $case:ident) => {
        $callback!($($extra)* $case);
    };
}

/// Expand the conformance suite into one test per case (see the module docs),
/// from the one list in [`for_each_conformance_case!`](crate::for_each_conformance_case).
///
/// ```ignore
/// storage_conformance_tests! { attr: #[tokio::test], fixture: async { ... } }
/// storage_conformance_tests! { attr: #[wasm_bindgen_test], fixture: async { ... } }
/// storage_conformance_tests! { attr: #[test], block_on: futures::executor::block_on, fixture: async { ... } }
/// ```
///
/// The tests are generated in a module `storage_conformance` that glob-imports
/// the caller's module, so the fixture may use the caller's imports.
#[macro_export]
macro_rules! storage_conformance_tests {
    (attr: $(#[$attr:meta])+, fixture: $fixture:expr $(,)?) => {
        #[allow(unused_imports)]
        mod storage_conformance {
            use super::*;
            $crate::for_each_conformance_case!(
                $crate::__storage_conformance_case, @async [$(#[$attr])+] [$fixture]
            );
        }
    };
    (attr: $(#[$attr:meta])+, block_on: $block_on:path, fixture: $fixture:expr $(,)?) => {
        #[allow(unused_imports)]
        mod storage_conformance {
            use super::*;
            $crate::for_each_conformance_case!(
                $crate::__storage_conformance_case, @sync [$(#[$attr])+] [$block_on] [$fixture]
            );
        }
    };
}

/// Implementation detail of [`storage_conformance_tests!`](crate::storage_conformance_tests): one test.
#[doc(hidden)]
#[macro_export]
macro_rules! __storage_conformance_case {
    (@async [$(#[$attr:meta])+] [$fixture:expr] $case:ident) => {
        $(#[$attr])+
        async fn $case() {
            let fixture = $fixture.await;
            $crate::conformance::$case($crate::conformance::StorageFixture::storage(&fixture))
                .await;
        }
    };
    (@sync [$(#[$attr:meta])+] [$block_on:path] [$fixture:expr] $case:ident) => {
        $(#[$attr])+
        fn $case() {
            $block_on(async {
                let fixture = $fixture.await;
                $crate::conformance::$case($crate::conformance::StorageFixture::storage(&fixture))
                    .await;
            })
        }
    };
}

/// Generates [`CASES`] from the whole list.
macro_rules! case_names {
    ($($case:ident)+) => {
        /// The name of every case, in the order
        /// [`for_each_conformance_case!`](crate::for_each_conformance_case) lists them.
        pub const CASES: &[&str] = &[$(stringify!($case)),+];
    };
}

crate::for_each_conformance_case!(@all [case_names] []);

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn sid(s: &str) -> SessionId {
    SessionId::new(s).expect("valid test session id")
}

fn owner(s: &str) -> OwnerId {
    OwnerId::new(s).expect("valid test owner id")
}

fn run_id(s: &str) -> RunId {
    RunId::new(s).expect("valid test run id")
}

fn call_id(s: &str) -> CallId {
    CallId::new(s).expect("valid test call id")
}

const TTL: u64 = 10_000;
const T0: u64 = 1_000_000;

async fn dump(storage: &dyn Storage) -> Vec<(Table, Vec<(String, Vec<u8>)>)> {
    let mut out = Vec::new();
    for table in Table::ALL {
        out.push((table, storage.scan_prefix(table, "").await.expect("scan")));
    }
    out
}

// ---------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------

/// Put, get, overwrite and delete a key in every table; tables are separate.
pub async fn round_trip_every_table(storage: Arc<dyn Storage>) {
    for (i, table) in Table::ALL.into_iter().enumerate() {
        let key = "shared/key";
        assert_eq!(
            storage.get(table, key).await.expect("get"),
            None,
            "{table:?} starts empty"
        );
        let value = format!("value for {} #{i}", table.as_str()).into_bytes();
        storage
            .commit(Batch::new().put(table, key, value.clone()))
            .await
            .expect("put");
        assert_eq!(
            storage.get(table, key).await.expect("get"),
            Some(value),
            "{table:?} round trip"
        );
    }
    // Every table kept its own value under the same key.
    for (i, table) in Table::ALL.into_iter().enumerate() {
        let expected = format!("value for {} #{i}", table.as_str()).into_bytes();
        assert_eq!(
            storage.get(table, "shared/key").await.expect("get"),
            Some(expected)
        );
    }
    for table in Table::ALL {
        // Overwrite, including binary and empty values.
        let binary = vec![0u8, 255, 1, 254, 0];
        storage
            .commit(Batch::new().put(table, "shared/key", binary.clone()))
            .await
            .expect("overwrite");
        assert_eq!(
            storage.get(table, "shared/key").await.expect("get"),
            Some(binary)
        );
        storage
            .commit(Batch::new().put(table, "empty", Vec::new()))
            .await
            .expect("put empty");
        assert_eq!(
            storage.get(table, "empty").await.expect("get"),
            Some(Vec::new())
        );
        storage
            .commit(
                Batch::new()
                    .delete(table, "shared/key")
                    .delete(table, "empty"),
            )
            .await
            .expect("delete");
        assert_eq!(storage.get(table, "shared/key").await.expect("get"), None);
        assert_eq!(storage.get(table, "empty").await.expect("get"), None);
        // Deleting a missing key is not an error.
        storage
            .commit(Batch::new().delete(table, "never-existed"))
            .await
            .expect("delete missing key");
    }
    // Put and delete of the same key in one batch apply in order.
    storage
        .commit(
            Batch::new()
                .put(Table::Meta, "k", b"1".to_vec())
                .delete(Table::Meta, "k")
                .put(Table::Meta, "j", b"1".to_vec())
                .put(Table::Meta, "j", b"2".to_vec()),
        )
        .await
        .expect("ordered ops");
    assert_eq!(storage.get(Table::Meta, "k").await.expect("get"), None);
    assert_eq!(
        storage.get(Table::Meta, "j").await.expect("get"),
        Some(b"2".to_vec())
    );
    // An empty batch is fine.
    storage.commit(Batch::new()).await.expect("empty batch");
}

fn sample_run(id: &str) -> AgentRun {
    AgentRun {
        id: run_id(id),
        session: sid("session-1"),
        parent: None,
        children: vec![run_id("child-1")],
        mode: RunMode::Agent,
        status: RunStatus::Running,
        stop_reason: None,
        usage: Usage {
            tool_rounds: 2,
            tool_calls: 3,
            input_tokens: 1_000,
            output_tokens: 200,
            active_ms: 5_000,
            cached_input_tokens: 700,
            cache_write_tokens: 100,
            reasoning_tokens: 50,
        },
        budget: Budget::fallback(),
        prompt: BlobRef::of(b"the prompt"),
        output: None,
        plan: Some(BlobRef::of(b"the plan")),
        next_activity: 1,
        status_history: vec![RunStatus::Running],
        created_at_ms: T0,
        updated_at_ms: T0 + 1,
    }
}

fn sample_journal(run: &str, call: &str) -> JournalRecord {
    let mut effects = EffectSet::new();
    effects.insert(EffectClass::WriteLocal);
    JournalRecord {
        run: run_id(run),
        call_id: call_id(call),
        tool: "write_file".into(),
        fingerprint: Fingerprint::of(&serde_json::json!({"tool": "write_file"}))
            .expect("fingerprint of a small JSON value"),
        args: BlobRef::of(b"{\"path\":\"a.txt\"}"),
        effects,
        idempotency: Idempotency::Idempotent,
        attempt: 1,
        state: CallState::Running,
        idempotency_key: format!("{run}/{call}"),
        target_summary: None,
        result: None,
        receipts: Vec::new(),
        error: None,
        updated_at_ms: T0,
    }
}

async fn typed_round_trip<R>(storage: &dyn Storage, record: &R)
where
    R: Record + PartialEq + std::fmt::Debug,
{
    storage
        .commit(Batch::new().put_record(record).expect("encode"))
        .await
        .expect("commit record");
    let back: Option<R> = storage.get_record(&record.key()).await.expect("decode");
    assert_eq!(back.as_ref(), Some(record), "{:?} round trip", R::TABLE);
    let scanned: Vec<R> = storage.scan_records(&record.key()).await.expect("scan");
    assert_eq!(scanned.len(), 1);
    storage
        .commit(Batch::new().delete(R::TABLE, record.key()))
        .await
        .expect("delete record");
    let gone: Option<R> = storage.get_record(&record.key()).await.expect("get");
    assert!(gone.is_none(), "{:?} deleted", R::TABLE);
}

/// Every typed record survives `put_record` / `get_record` / `scan_records`.
pub async fn round_trip_typed_records(storage: Arc<dyn Storage>) {
    let s = storage.as_ref();
    typed_round_trip(s, &sample_run("run-1")).await;
    typed_round_trip(s, &sample_journal("run-1", "call-1")).await;
    typed_round_trip(
        s,
        &Activity {
            run: run_id("run-1"),
            seq: 7,
            at_ms: T0,
            kind: ActivityKind::StatusChanged {
                from: RunStatus::Running,
                to: RunStatus::AwaitingInput,
                reason: None,
            },
        },
    )
    .await;
    typed_round_trip(
        s,
        &Evidence {
            run: run_id("run-1"),
            call_id: call_id("call-1"),
            tool: "fetch_url".into(),
            trust: Trust::ExternalUntrusted,
            provenance: Provenance {
                origin: "builtin".into(),
                tool: "fetch_url".into(),
                requested_url: Some("https://example.org/".into()),
                final_url: Some("https://example.org/a".into()),
                fetched_at_ms: Some(T0),
                content_hash: Some(BlobRef::of(b"page").hash),
                ..Provenance::default()
            },
            references: vec![Reference {
                kind: ReferenceKind::Blob,
                id: BlobRef::of(b"page").hash,
                name: None,
                mime: Some("text/plain".into()),
                size: 4,
                hash: BlobRef::of(b"page").hash,
            }],
            result: BlobRef::of(b"result"),
            at_ms: T0,
        },
    )
    .await;
    typed_round_trip(
        s,
        &PendingRequest {
            run: run_id("run-1"),
            id: RequestId::new("req-1").expect("valid request id"),
            kind: PendingKind::Input {
                call_id: call_id("call-2"),
                question: BlobRef::of(b"what?"),
                schema: None,
                choices: Some(vec!["yes".into(), "no".into()]),
            },
            created_at_ms: T0,
            presented: true,
        },
    )
    .await;
    typed_round_trip(
        s,
        &Checkpoint {
            run: run_id("run-1"),
            seq: 3,
            stage: CheckpointStage::BeforeDispatch {
                call_id: call_id("call-1"),
            },
            transcript: BlobRef::of(b"[]"),
            usage: Usage::default(),
            at_ms: T0,
        },
    )
    .await;
}

// ---------------------------------------------------------------------------
// Atomicity and conditions
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Fencing and leases
// ---------------------------------------------------------------------------

/// After another owner takes an expired lease, the old holder's writes are
/// refused with `StaleEpoch` and change nothing; the new holder writes.
pub async fn fence_refuses_a_stale_writer_after_takeover(storage: Arc<dyn Storage>) {
    let s = sid("session-fence");
    let a = storage
        .try_acquire_lease(&s, &owner("tab-a"), T0, TTL)
        .await
        .expect("a acquires");
    assert_eq!(a.epoch, 1, "the first holder of a session gets epoch 1");
    assert_eq!(a.owner, owner("tab-a"));
    assert_eq!(a.expires_at_ms, T0 + TTL);
    assert!(a.is_live(T0));
    storage
        .commit(
            Batch::new()
                .fenced(a.fence())
                .put(Table::Runs, "r", b"a1".to_vec()),
        )
        .await
        .expect("a writes");
    // Tab A stalls past its expiry; tab B takes over.
    let b = storage
        .try_acquire_lease(&s, &owner("tab-b"), T0 + TTL, TTL)
        .await
        .expect("b takes the expired lease");
    assert_eq!(b.epoch, a.epoch + 1);
    assert_eq!(b.owner, owner("tab-b"));
    assert_eq!(
        storage.current_lease(&s).await.expect("current"),
        Some(b.clone())
    );
    let before = dump(storage.as_ref()).await;
    let err = storage
        .commit(
            Batch::new()
                .fenced(a.fence())
                .put(Table::Runs, "r", b"a2".to_vec())
                .put(Table::Journal, "r/c", b"a2".to_vec()),
        )
        .await
        .expect_err("a is fenced off");
    assert_eq!(
        err,
        StorageError::StaleEpoch {
            session: s.clone(),
            presented: a.epoch,
            current: Some(b.epoch),
        }
    );
    assert_eq!(
        dump(storage.as_ref()).await,
        before,
        "the stale write changed nothing"
    );
    // A cannot renew or release B's lease either.
    let err = storage
        .renew_lease(&s, &owner("tab-a"), a.epoch, T0 + TTL, TTL)
        .await
        .expect_err("a lost its lease");
    assert!(matches!(err, LeaseError::Lost { .. }), "{err:?}");
    let err = storage
        .release_lease(&s, &owner("tab-a"), a.epoch)
        .await
        .expect_err("a cannot release");
    assert!(matches!(err, LeaseError::Lost { .. }), "{err:?}");
    storage
        .commit(
            Batch::new()
                .fenced(b.fence())
                .put(Table::Runs, "r", b"b1".to_vec()),
        )
        .await
        .expect("b writes");
    assert_eq!(
        storage.get(Table::Runs, "r").await.expect("get"),
        Some(b"b1".to_vec())
    );
    // Fences are per session: B's epoch means nothing for another session.
    let err = storage
        .commit(
            Batch::new()
                .fenced(Fence {
                    session: sid("session-other"),
                    epoch: b.epoch,
                })
                .put(Table::Runs, "x", b"x".to_vec()),
        )
        .await
        .expect_err("no lease on the other session");
    assert!(
        matches!(err, StorageError::StaleEpoch { current: None, .. }),
        "{err:?}"
    );
}

/// A fenced write on a session nobody ever leased is refused (`current: None`).
pub async fn fence_without_a_lease_is_refused(storage: Arc<dyn Storage>) {
    let s = sid("session-unleased");
    let err = storage
        .commit(
            Batch::new()
                .fenced(Fence {
                    session: s.clone(),
                    epoch: 1,
                })
                .put(Table::Meta, "k", b"v".to_vec()),
        )
        .await
        .expect_err("no lease, no write");
    assert_eq!(
        err,
        StorageError::StaleEpoch {
            session: s.clone(),
            presented: 1,
            current: None,
        }
    );
    assert_eq!(storage.get(Table::Meta, "k").await.expect("get"), None);
    assert_eq!(storage.current_lease(&s).await.expect("current"), None);
}

/// Release keeps the epoch; the next holder (another owner, or the same
/// owner after a release) gets a higher one at once, before any expiry.
pub async fn lease_release_then_other_owner_gets_next_epoch(storage: Arc<dyn Storage>) {
    let s = sid("session-release");
    let a = storage
        .try_acquire_lease(&s, &owner("tab-a"), T0, TTL)
        .await
        .expect("a acquires");
    storage
        .release_lease(&s, &owner("tab-a"), a.epoch)
        .await
        .expect("a releases");
    let released = storage
        .current_lease(&s)
        .await
        .expect("current")
        .expect("a released lease keeps its record");
    assert_eq!(released.epoch, a.epoch, "release keeps the epoch");
    assert!(!released.is_live(T0 + 1), "a released lease is not live");
    let b = storage
        .try_acquire_lease(&s, &owner("tab-b"), T0 + 1, TTL)
        .await
        .expect("b acquires the released lease before its ttl");
    assert_eq!(b.epoch, a.epoch + 1);
    // A writes with its old epoch: refused.
    let err = storage
        .commit(
            Batch::new()
                .fenced(a.fence())
                .put(Table::Meta, "k", b"a".to_vec()),
        )
        .await
        .expect_err("a released");
    assert!(matches!(err, StorageError::StaleEpoch { .. }), "{err:?}");
    // B releases; A comes back: again a new epoch.
    storage
        .release_lease(&s, &owner("tab-b"), b.epoch)
        .await
        .expect("b releases");
    let a2 = storage
        .try_acquire_lease(&s, &owner("tab-a"), T0 + 2, TTL)
        .await
        .expect("a acquires again");
    assert_eq!(a2.epoch, b.epoch + 1);
    // The same owner after its own release gets a new epoch too.
    storage
        .release_lease(&s, &owner("tab-a"), a2.epoch)
        .await
        .expect("a releases again");
    let a3 = storage
        .try_acquire_lease(&s, &owner("tab-a"), T0 + 3, TTL)
        .await
        .expect("a acquires a third time");
    assert_eq!(a3.epoch, a2.epoch + 1);
}

/// The same owner re-acquiring a live lease keeps the epoch and extends the
/// expiry; after expiry it starts a new tenure with epoch + 1.
pub async fn lease_same_owner_reacquire_keeps_epoch(storage: Arc<dyn Storage>) {
    let s = sid("session-same");
    let a = storage
        .try_acquire_lease(&s, &owner("tab-a"), T0, TTL)
        .await
        .expect("acquire");
    let again = storage
        .try_acquire_lease(&s, &owner("tab-a"), T0 + TTL / 2, TTL)
        .await
        .expect("re-acquire");
    assert_eq!(again.epoch, a.epoch, "same owner, live lease: same epoch");
    assert_eq!(again.expires_at_ms, T0 + TTL / 2 + TTL, "expiry extended");
    // The old fence is still current.
    storage
        .commit(
            Batch::new()
                .fenced(a.fence())
                .put(Table::Meta, "k", b"v".to_vec()),
        )
        .await
        .expect("same fence still writes");
    // After expiry, even the same owner starts a new tenure.
    let later = storage
        .try_acquire_lease(&s, &owner("tab-a"), again.expires_at_ms, TTL)
        .await
        .expect("re-acquire after expiry");
    assert_eq!(later.epoch, a.epoch + 1);
}

/// A live lease of another owner gives `Held` naming the holder; at its
/// expiry the lease is free.
pub async fn lease_held_by_live_other_owner(storage: Arc<dyn Storage>) {
    let s = sid("session-held");
    let a = storage
        .try_acquire_lease(&s, &owner("tab-a"), T0, TTL)
        .await
        .expect("a acquires");
    for now in [T0, T0 + 1, T0 + TTL - 1] {
        let err = storage
            .try_acquire_lease(&s, &owner("tab-b"), now, TTL)
            .await
            .expect_err("held by a");
        assert_eq!(
            err,
            LeaseError::Held {
                session: s.clone(),
                owner: owner("tab-a"),
                expires_at_ms: a.expires_at_ms,
            }
        );
    }
    // Refusals changed nothing.
    assert_eq!(
        storage.current_lease(&s).await.expect("current"),
        Some(a.clone())
    );
    let b = storage
        .try_acquire_lease(&s, &owner("tab-b"), a.expires_at_ms, TTL)
        .await
        .expect("free at expiry");
    assert_eq!(b.epoch, a.epoch + 1);
    // Leases are per session.
    let other = storage
        .try_acquire_lease(&sid("session-held-2"), &owner("tab-a"), T0, TTL)
        .await
        .expect("another session is free");
    assert_eq!(other.epoch, 1);
}

/// Renewing several leases at once (a host's heartbeat) answers each as
/// `renew_lease` would, in order: the ones still held are extended, a stale
/// epoch or a lease another owner took is `Lost` and left as it is.
pub async fn lease_renewals_together_answer_each_lease(storage: Arc<dyn Storage>) {
    let a = owner("tab-a");
    let (kept, stale, taken) = (sid("renew-kept"), sid("renew-stale"), sid("renew-taken"));
    let kept_lease = storage
        .try_acquire_lease(&kept, &a, T0, TTL)
        .await
        .expect("acquire kept");
    let stale_lease = storage
        .try_acquire_lease(&stale, &a, T0, TTL)
        .await
        .expect("acquire stale");
    let taken_lease = storage
        .try_acquire_lease(&taken, &a, T0 - TTL, TTL)
        .await
        .expect("acquire taken");
    let b_lease = storage
        .try_acquire_lease(&taken, &owner("tab-b"), T0, TTL)
        .await
        .expect("b takes the expired lease");
    assert!(
        storage
            .renew_leases(&a, &[], T0 + 1_000, TTL)
            .await
            .is_empty()
    );
    let held = [
        (kept.clone(), kept_lease.epoch),
        (stale.clone(), stale_lease.epoch + 1),
        (taken.clone(), taken_lease.epoch),
    ];
    let answers = storage.renew_leases(&a, &held, T0 + 5_000, TTL).await;
    assert_eq!(answers.len(), 3, "{answers:?}");
    let renewed = answers[0].clone().expect("the kept lease is renewed");
    assert_eq!(renewed.epoch, kept_lease.epoch);
    assert_eq!(renewed.expires_at_ms, T0 + 5_000 + TTL);
    assert!(
        matches!(answers[1], Err(LeaseError::Lost { .. })),
        "{answers:?}"
    );
    assert!(
        matches!(answers[2], Err(LeaseError::Lost { .. })),
        "{answers:?}"
    );
    assert_eq!(
        storage.current_lease(&kept).await.expect("current"),
        Some(renewed)
    );
    assert_eq!(
        storage.current_lease(&stale).await.expect("current"),
        Some(stale_lease.clone())
    );
    assert_eq!(
        storage.current_lease(&taken).await.expect("current"),
        Some(b_lease)
    );
    // When none is held any more, nothing changes.
    let answers = storage.renew_leases(&a, &held[1..], T0 + 6_000, TTL).await;
    assert!(
        answers
            .iter()
            .all(|r| matches!(r, Err(LeaseError::Lost { .. })))
    );
    assert_eq!(
        storage.current_lease(&stale).await.expect("current"),
        Some(stale_lease)
    );
}

fn lease(session: &str, who: &str, epoch: u64, expires_at_ms: u64) -> LeaseRecord {
    LeaseRecord {
        session: sid(session),
        owner: owner(who),
        epoch,
        expires_at_ms,
    }
}

/// The one atomic lease step at its boundary: expected absent and absent,
/// expected absent but present, expected present but absent, the expected
/// record exactly, the epoch one off, the same epoch with another expiry
/// (a released lease), and an expired record (the step compares records; it
/// does not judge time). A refusal changes nothing and says what is stored.
pub async fn lease_cas_at_the_boundary(storage: Arc<dyn Storage>) {
    let s = "session-cas";
    let current = |storage: Arc<dyn Storage>| async move {
        storage.current_lease(&sid(s)).await.expect("current")
    };
    let first = lease(s, "tab-a", 1, T0 + TTL);
    // Expected present, but there is no record: refused, still absent.
    assert_eq!(
        storage.lease_cas(Some(&first), &first).await.expect("cas"),
        LeaseCas::Refused { current: None }
    );
    assert_eq!(current(storage.clone()).await, None);
    // Expected absent and absent: stored.
    assert_eq!(
        storage.lease_cas(None, &first).await.expect("cas"),
        LeaseCas::Swapped
    );
    assert_eq!(current(storage.clone()).await, Some(first.clone()));
    // Expected absent, but present: refused with what is stored.
    let intruder = lease(s, "tab-b", 1, T0 + 2 * TTL);
    assert_eq!(
        storage.lease_cas(None, &intruder).await.expect("cas"),
        LeaseCas::Refused {
            current: Some(first.clone())
        }
    );
    // The epoch one off either way: refused, unchanged.
    for epoch in [first.epoch - 1, first.epoch + 1] {
        let stale = LeaseRecord {
            epoch,
            ..first.clone()
        };
        assert_eq!(
            storage
                .lease_cas(Some(&stale), &intruder)
                .await
                .expect("cas"),
            LeaseCas::Refused {
                current: Some(first.clone())
            },
            "expected epoch {epoch}"
        );
    }
    // The same epoch and owner with another expiry (what a renewal that
    // raced a release would expect): refused.
    let released = LeaseRecord {
        expires_at_ms: 0,
        ..first.clone()
    };
    assert_eq!(
        storage
            .lease_cas(Some(&released), &intruder)
            .await
            .expect("cas"),
        LeaseCas::Refused {
            current: Some(first.clone())
        }
    );
    // Another owner expected: refused.
    let other_owner = LeaseRecord {
        owner: owner("tab-b"),
        ..first.clone()
    };
    assert_eq!(
        storage
            .lease_cas(Some(&other_owner), &intruder)
            .await
            .expect("cas"),
        LeaseCas::Refused {
            current: Some(first.clone())
        }
    );
    assert_eq!(current(storage.clone()).await, Some(first.clone()));
    // Exactly the stored record: swapped (here, a release).
    assert_eq!(
        storage
            .lease_cas(Some(&first), &released)
            .await
            .expect("cas"),
        LeaseCas::Swapped
    );
    assert_eq!(current(storage.clone()).await, Some(released.clone()));
    // An expired record is swapped like any other when it is the one expected.
    let next = lease(s, "tab-b", 2, T0 + TTL);
    assert!(!released.is_live(T0));
    assert_eq!(
        storage
            .lease_cas(Some(&released), &next)
            .await
            .expect("cas"),
        LeaseCas::Swapped
    );
    assert_eq!(current(storage.clone()).await, Some(next.clone()));
    // The largest times and epochs round-trip, so that a swap can expect them.
    let far = LeaseRecord {
        epoch: i64::MAX as u64,
        expires_at_ms: i64::MAX as u64,
        ..next.clone()
    };
    assert_eq!(
        storage.lease_cas(Some(&next), &far).await.expect("cas"),
        LeaseCas::Swapped
    );
    assert_eq!(current(storage.clone()).await, Some(far.clone()));
    assert_eq!(
        storage.lease_cas(Some(&far), &next).await.expect("cas"),
        LeaseCas::Swapped
    );
    // The provided operations agree with what the steps stored.
    let err = storage
        .try_acquire_lease(&sid(s), &owner("tab-a"), T0, TTL)
        .await
        .expect_err("tab-b holds it");
    assert!(
        matches!(&err, LeaseError::Held { owner: o, expires_at_ms, .. } if o.as_str() == "tab-b" && *expires_at_ms == T0 + TTL),
        "{err:?}"
    );
}

/// The batched step answers each swap as the single step would, in order:
/// a later swap of the same session sees the earlier one, a refusal does
/// not stop the swaps after it, and nothing is asked of an empty batch.
pub async fn lease_cas_all_answers_each_swap_in_order(storage: Arc<dyn Storage>) {
    assert!(storage.lease_cas_all(&[]).await.expect("empty").is_empty());
    let a1 = lease("session-all-a", "tab-a", 1, T0 + TTL);
    let a2 = LeaseRecord {
        expires_at_ms: T0 + 2 * TTL,
        ..a1.clone()
    };
    let b1 = lease("session-all-b", "tab-a", 1, T0 + TTL);
    let c1 = lease("session-all-c", "tab-a", 1, T0 + TTL);
    let swaps = [
        LeaseSwap {
            expected: None,
            new: a1.clone(),
        },
        LeaseSwap {
            expected: Some(a1.clone()),
            new: a2.clone(),
        },
        // Expects a record that is not there.
        LeaseSwap {
            expected: Some(b1.clone()),
            new: b1.clone(),
        },
        LeaseSwap {
            expected: None,
            new: c1.clone(),
        },
        // Expects what was there before the second swap.
        LeaseSwap {
            expected: Some(a1.clone()),
            new: a1.clone(),
        },
    ];
    let answers = storage.lease_cas_all(&swaps).await.expect("cas all");
    assert_eq!(
        answers,
        vec![
            LeaseCas::Swapped,
            LeaseCas::Swapped,
            LeaseCas::Refused { current: None },
            LeaseCas::Swapped,
            LeaseCas::Refused {
                current: Some(a2.clone())
            },
        ]
    );
    let sessions = [
        sid("session-all-a"),
        sid("session-all-b"),
        sid("session-all-c"),
    ];
    assert_eq!(
        storage.current_leases(&sessions).await.expect("read all"),
        vec![Some(a2), None, Some(c1)]
    );
    assert!(storage.current_leases(&[]).await.expect("none").is_empty());
}

/// Renew and release need the right owner and epoch; renewing a live lease
/// extends it; a released or expired lease cannot be renewed.
pub async fn lease_renew_and_release_check_owner_and_epoch(storage: Arc<dyn Storage>) {
    let s = sid("session-renew");
    let a = storage
        .try_acquire_lease(&s, &owner("tab-a"), T0, TTL)
        .await
        .expect("acquire");
    let renewed = storage
        .renew_lease(&s, &owner("tab-a"), a.epoch, T0 + 5_000, TTL)
        .await
        .expect("renew");
    assert_eq!(renewed.epoch, a.epoch);
    assert_eq!(renewed.expires_at_ms, T0 + 5_000 + TTL);
    assert_eq!(
        storage.current_lease(&s).await.expect("current"),
        Some(renewed.clone())
    );
    for (who, epoch) in [("tab-b", a.epoch), ("tab-a", a.epoch + 1), ("tab-a", 0)] {
        let err = storage
            .renew_lease(&s, &owner(who), epoch, T0 + 6_000, TTL)
            .await
            .expect_err("wrong owner or epoch");
        assert!(matches!(err, LeaseError::Lost { .. }), "{err:?}");
        let err = storage
            .release_lease(&s, &owner(who), epoch)
            .await
            .expect_err("wrong owner or epoch");
        assert!(matches!(err, LeaseError::Lost { .. }), "{err:?}");
    }
    assert_eq!(
        storage.current_lease(&s).await.expect("current"),
        Some(renewed.clone())
    );
    // Renewing past expiry fails: the lease may already belong to someone else.
    let err = storage
        .renew_lease(&s, &owner("tab-a"), a.epoch, renewed.expires_at_ms, TTL)
        .await
        .expect_err("expired");
    assert!(matches!(err, LeaseError::Lost { .. }), "{err:?}");
    // Release, then renew: lost.
    let fresh = storage
        .try_acquire_lease(&s, &owner("tab-a"), renewed.expires_at_ms, TTL)
        .await
        .expect("new tenure");
    storage
        .release_lease(&s, &owner("tab-a"), fresh.epoch)
        .await
        .expect("release");
    let err = storage
        .renew_lease(
            &s,
            &owner("tab-a"),
            fresh.epoch,
            renewed.expires_at_ms + 1,
            TTL,
        )
        .await
        .expect_err("released");
    assert!(matches!(err, LeaseError::Lost { .. }), "{err:?}");
    // Renewing a session without a lease is lost too.
    let err = storage
        .renew_lease(&sid("session-none"), &owner("tab-a"), 1, T0, TTL)
        .await
        .expect_err("no lease");
    assert!(matches!(err, LeaseError::Lost { .. }), "{err:?}");
}

// ---------------------------------------------------------------------------
// Blobs
// ---------------------------------------------------------------------------

/// Bytes that do not hash to the claimed SHA-256 are refused and not stored.
pub async fn blob_with_wrong_hash_is_refused(storage: Arc<dyn Storage>) {
    let bytes = b"hello blob".to_vec();
    let wrong = BlobRef::of(b"other bytes").hash;
    let err = storage
        .put_blob(&wrong, bytes.clone())
        .await
        .expect_err("wrong hash");
    assert_eq!(
        err,
        StorageError::BlobHashMismatch {
            claimed: wrong.clone(),
            actual: BlobRef::of(&bytes).hash,
        }
    );
    for bad in ["", "not-a-hash", &BlobRef::of(&bytes).hash.to_uppercase()] {
        let err = storage
            .put_blob(bad, bytes.clone())
            .await
            .expect_err("malformed claimed hash");
        assert!(
            matches!(err, StorageError::BlobHashMismatch { .. }),
            "{err:?}"
        );
    }
    assert_eq!(storage.get_blob(&wrong).await.expect("get"), None);
    assert!(storage.list_blobs().await.expect("list").is_empty());
}

/// The same bytes stored twice are one blob; the reference is the hash and size.
pub async fn blob_same_bytes_stored_once(storage: Arc<dyn Storage>) {
    let bytes = b"same bytes".to_vec();
    let expected = BlobRef::of(&bytes);
    assert_eq!(expected.size, bytes.len() as u64);
    assert_eq!(expected.hash.len(), 64);
    let first = storage
        .put_blob(&expected.hash, bytes.clone())
        .await
        .expect("first put");
    let second = storage
        .put_blob(&expected.hash, bytes.clone())
        .await
        .expect("second put");
    assert_eq!(first, expected);
    assert_eq!(second, expected);
    assert_eq!(
        storage.list_blobs().await.expect("list"),
        vec![expected.hash.clone()]
    );
    assert_eq!(
        storage.get_blob(&expected.hash).await.expect("get"),
        Some(bytes)
    );
    // The empty blob is a blob like any other.
    let empty = BlobRef::of(b"");
    storage
        .put_blob(&empty.hash, Vec::new())
        .await
        .expect("empty blob");
    assert_eq!(
        storage.get_blob(&empty.hash).await.expect("get"),
        Some(Vec::new())
    );
}

/// Blobs carried by a batch become durable with its records and never
/// without them: a refused batch (condition, stale fence, a blob whose bytes
/// do not hash to its name) stores none of its blobs.
pub async fn blobs_in_a_batch_commit_with_it(storage: Arc<dyn Storage>) {
    // Refused by a condition: no record, no blob.
    let mut refused = Batch::new()
        .put(Table::Runs, "r1", b"run".to_vec())
        .expect_present(Table::Runs, "missing");
    let orphan = refused.add_blob(b"named by a refused batch".to_vec());
    assert!(matches!(
        storage.commit(refused).await,
        Err(StorageError::ConditionFailed { .. })
    ));
    assert_eq!(storage.get_blob(&orphan.hash).await.expect("get"), None);
    assert!(storage.list_blobs().await.expect("list").is_empty());

    // Refused by a stale fence: the same.
    let s = sid("session-batch-blobs");
    let lease = storage
        .try_acquire_lease(&s, &owner("tab-a"), T0, TTL)
        .await
        .expect("lease");
    let mut stale = Batch::new()
        .fenced(Fence {
            session: s.clone(),
            epoch: lease.epoch + 1,
        })
        .put(Table::Runs, "r1", b"run".to_vec());
    stale.add_blob(b"named by a stale writer".to_vec());
    assert!(matches!(
        storage.commit(stale).await,
        Err(StorageError::StaleEpoch { .. })
    ));
    assert!(storage.list_blobs().await.expect("list").is_empty());

    // A blob whose bytes do not hash to its name refuses the whole batch.
    let mut lying = Batch::new().put(Table::Runs, "r1", b"run".to_vec());
    lying.add_blob(b"honest".to_vec());
    let lying = lying.put_claimed_blob(BlobRef::of(b"claimed").hash, b"actual".to_vec());
    assert!(matches!(
        storage.commit(lying).await,
        Err(StorageError::BlobHashMismatch { .. })
    ));
    assert_eq!(storage.get(Table::Runs, "r1").await.expect("get"), None);
    assert!(storage.list_blobs().await.expect("list").is_empty());

    // Committed: the record and its blobs, the same bytes twice kept once,
    // a blob already stored separately kept as it was.
    let earlier = b"stored earlier".to_vec();
    let earlier_ref = BlobRef::of(&earlier);
    storage
        .put_blob(&earlier_ref.hash, earlier.clone())
        .await
        .expect("put");
    let mut batch = Batch::new().fenced(lease.fence());
    let result = batch.add_blob(b"a result".to_vec());
    let again = batch.add_blob(b"a result".to_vec());
    let empty = batch.add_blob(Vec::new());
    assert_eq!(batch.add_blob(earlier.clone()), earlier_ref);
    assert_eq!(result, again);
    assert_eq!(result, BlobRef::of(b"a result"));
    let batch = batch.put(Table::Journal, "r1/c1", result.hash.clone().into_bytes());
    storage.commit(batch).await.expect("commit");
    assert_eq!(
        storage.get(Table::Journal, "r1/c1").await.expect("get"),
        Some(result.hash.clone().into_bytes())
    );
    assert_eq!(
        storage.get_blob(&result.hash).await.expect("get"),
        Some(b"a result".to_vec())
    );
    assert_eq!(
        storage.get_blob(&empty.hash).await.expect("get"),
        Some(Vec::new())
    );
    assert_eq!(
        storage.get_blob(&earlier_ref.hash).await.expect("get"),
        Some(earlier)
    );
    let mut expected = vec![result.hash, empty.hash, earlier_ref.hash];
    expected.sort();
    assert_eq!(storage.list_blobs().await.expect("list"), expected);
}

/// Get, delete and list blobs; the list is ordered.
pub async fn blob_get_delete_list(storage: Arc<dyn Storage>) {
    let mut hashes = Vec::new();
    for i in 0..5u8 {
        let bytes = vec![i; usize::from(i) * 100 + 1];
        let r = BlobRef::of(&bytes);
        let stored = storage.put_blob(&r.hash, bytes.clone()).await.expect("put");
        assert_eq!(stored, r);
        assert_eq!(storage.get_blob(&r.hash).await.expect("get"), Some(bytes));
        hashes.push(r.hash);
    }
    let mut sorted = hashes.clone();
    sorted.sort();
    assert_eq!(storage.list_blobs().await.expect("list"), sorted, "ordered");
    assert!(storage.delete_blob(&hashes[2]).await.expect("delete"));
    assert!(!storage.delete_blob(&hashes[2]).await.expect("delete again"));
    assert_eq!(storage.get_blob(&hashes[2]).await.expect("get"), None);
    sorted.retain(|h| h != &hashes[2]);
    assert_eq!(storage.list_blobs().await.expect("list"), sorted);
    assert_eq!(
        storage
            .get_blob(&BlobRef::of(b"never").hash)
            .await
            .expect("get"),
        None
    );
    // Blobs are not table records.
    for table in Table::ALL {
        assert!(
            storage
                .scan_prefix(table, "")
                .await
                .expect("scan")
                .is_empty()
        );
    }
}

// ---------------------------------------------------------------------------
// Scans
// ---------------------------------------------------------------------------

/// Prefix scans return exactly the keys that start with the prefix, ordered
/// by their UTF-8 bytes, within one table.
pub async fn prefix_scans_are_ordered_by_bytes(storage: Arc<dyn Storage>) {
    let t = Table::Journal;
    let keys = [
        "run1/b",
        "run1/a",
        "run10/a",
        "run1/",
        "run1",
        "run2/a",
        "run1/a/b",
        "run1/Z",
        "run1/é",
        "run1/z",
        "run0/z",
        "run1/\u{10348}",
        "run1/0010",
        "run1/0002",
    ];
    let mut batch = Batch::new();
    for (i, k) in keys.iter().enumerate() {
        batch = batch.put(t, *k, vec![u8::try_from(i).unwrap_or(0)]);
    }
    // Another table with the same keys must not leak into scans of `t`.
    batch = batch.put(Table::Checkpoints, "run1/zz", b"other".to_vec());
    storage.commit(batch).await.expect("seed");

    let scan = |prefix: &'static str| {
        let storage = storage.clone();
        async move {
            storage
                .scan_prefix(t, prefix)
                .await
                .expect("scan")
                .into_iter()
                .map(|(k, _)| k)
                .collect::<Vec<_>>()
        }
    };
    let expected_run1_slash: Vec<String> = [
        "run1/",
        "run1/0002",
        "run1/0010",
        "run1/Z",
        "run1/a",
        "run1/a/b",
        "run1/b",
        "run1/z",
        "run1/é",
        "run1/\u{10348}",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    assert_eq!(
        scan("run1/").await,
        expected_run1_slash,
        "run1/ excludes run10/"
    );
    assert_eq!(scan("run10/").await, vec!["run10/a".to_owned()]);
    let mut all: Vec<String> = keys.iter().map(|s| (*s).to_owned()).collect();
    all.sort();
    assert_eq!(scan("").await, all, "empty prefix: every key, byte order");
    let run1: Vec<String> = all
        .iter()
        .filter(|k| k.starts_with("run1"))
        .cloned()
        .collect();
    assert_eq!(
        scan("run1").await,
        run1,
        "run1 includes run1, run1/... and run10/..."
    );
    assert_eq!(
        scan("run1/a").await,
        vec!["run1/a".to_owned(), "run1/a/b".to_owned()]
    );
    assert!(scan("run3").await.is_empty());
    assert!(scan("run1/zz").await.is_empty());
    // Values come back with their keys.
    let with_values = storage.scan_prefix(t, "run10/").await.expect("scan");
    assert_eq!(with_values, vec![("run10/a".to_owned(), vec![2u8])]);
    // Typed scans follow the same order.
    let run = run_id("run-scan");
    let mut batch = Batch::new();
    for seq in [10u64, 2, 1, 100] {
        let activity = Activity {
            run: run.clone(),
            seq,
            at_ms: T0,
            kind: ActivityKind::ModelRequest { round: seq },
        };
        batch = batch.put_record(&activity).expect("encode");
    }
    storage.commit(batch).await.expect("activities");
    let activities: Vec<Activity> = storage
        .scan_records(&format!("{run}/"))
        .await
        .expect("typed scan");
    assert_eq!(
        activities.iter().map(|a| a.seq).collect::<Vec<_>>(),
        vec![1, 2, 10, 100]
    );
}

// ---------------------------------------------------------------------------
// Concurrency
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Corruption
// ---------------------------------------------------------------------------

/// A record that does not decode is `StorageError::Corrupt` naming the table
/// and key, through `get_record` and `scan_records`, and the raw bytes stay.
pub async fn corrupt_record_is_reported_and_kept(storage: Arc<dyn Storage>) {
    let good = sample_run("run-good");
    let key = "run-bad";
    let garbage = b"{\"id\": \"run-bad\", \"status\": tru".to_vec();
    storage
        .commit(Batch::new().put_record(&good).expect("encode").put(
            Table::Runs,
            key,
            garbage.clone(),
        ))
        .await
        .expect("plant a corrupt record");
    let ok: Option<AgentRun> = storage
        .get_record("run-good")
        .await
        .expect("good one decodes");
    assert_eq!(ok, Some(good));
    let err = storage
        .get_record::<AgentRun>(key)
        .await
        .expect_err("corrupt");
    match &err {
        StorageError::Corrupt {
            table,
            key: k,
            detail,
        } => {
            assert_eq!(*table, Table::Runs);
            assert_eq!(k, key);
            assert!(!detail.is_empty());
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains("run-bad") && message.contains("Runs"),
        "{message}"
    );
    let err = storage
        .scan_records::<AgentRun>("run-")
        .await
        .expect_err("a scan over a corrupt record fails, never skips it");
    assert!(
        matches!(&err, StorageError::Corrupt { table: Table::Runs, key: k, .. } if k == key),
        "{err:?}"
    );
    // Valid JSON of the wrong shape is corrupt too.
    storage
        .commit(Batch::new().put(Table::Journal, "r/c", b"{\"x\":1}".to_vec()))
        .await
        .expect("plant");
    let err = storage
        .get_record::<JournalRecord>("r/c")
        .await
        .expect_err("wrong shape");
    assert!(
        matches!(&err, StorageError::Corrupt { table: Table::Journal, key: k, .. } if k == "r/c"),
        "{err:?}"
    );
    // The raw bytes are untouched.
    assert_eq!(
        storage.get(Table::Runs, key).await.expect("raw get"),
        Some(garbage)
    );
    assert_eq!(
        storage.get(Table::Journal, "r/c").await.expect("raw get"),
        Some(b"{\"x\":1}".to_vec())
    );
}

#[cfg(test)]
mod tests {
    use super::CASES;

    /// The names of the `pub async fn` items of this file: the cases.
    fn public_case_functions() -> Vec<&'static str> {
        include_str!("conformance.rs")
            .lines()
            .filter_map(|line| line.strip_prefix("pub async fn "))
            .map(|rest| rest.split('(').next().unwrap_or(rest).trim())
            .collect()
    }

    /// Every case function is in the one list, once, and the list names
    /// nothing else (a name without a function would not compile in a
    /// backend's tests either).
    #[test]
    fn every_public_case_is_listed() {
        let mut functions = public_case_functions();
        let mut listed = CASES.to_vec();
        assert!(!functions.is_empty(), "the case functions were not found");
        functions.sort_unstable();
        listed.sort_unstable();
        let mut deduplicated = listed.clone();
        deduplicated.dedup();
        assert_eq!(listed, deduplicated, "a case is listed twice");
        assert_eq!(
            functions, listed,
            "for_each_conformance_case! must list every `pub async fn` case of conformance.rs"
        );
    }
}
