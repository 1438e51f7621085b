//! The storage conformance suite (feature `conformance`): one async function
//! per behaviour of [`Storage`], the one list of those cases
//! ([`for_each_conformance_case!`](crate::for_each_conformance_case), from
//! which [`CASES`] is generated), and the
//! [`storage_conformance_tests!`](crate::storage_conformance_tests) macro that
//! expands that list into one test per case for a backend. A new case is a
//! `pub async fn` in the submodule of its topic plus its name in the list; the
//! unit test `every_public_case_is_listed` fails if the name is missing.
//!
//! This module owns the fixture trait, the list, the macros and the helpers
//! the cases share; the cases live by topic in `records`, `batches`,
//! `leases`, `blobs`, `scans` and `concurrency`, and are re-exported here, so
//! a case is always `agent_kernel::conformance::<case>`.
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

use crate::host::storage::{Storage, Table};
use crate::ids::{CallId, OwnerId, RunId, SessionId};

mod batches;
mod blobs;
mod concurrency;
mod leases;
mod records;
mod scans;

pub use batches::*;
pub use blobs::*;
pub use concurrency::*;
pub use leases::*;
pub use records::*;
pub use scans::*;

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
/// that every `pub async fn` of this module's files is in it, so a case cannot be left
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

#[cfg(test)]
mod tests {
    use super::CASES;

    /// The files of this module: its own and every case submodule's.
    const FILES: [&str; 7] = [
        include_str!("mod.rs"),
        include_str!("records.rs"),
        include_str!("batches.rs"),
        include_str!("leases.rs"),
        include_str!("blobs.rs"),
        include_str!("scans.rs"),
        include_str!("concurrency.rs"),
    ];

    /// The names of the `pub async fn` items of this module's files: the cases.
    fn public_case_functions() -> Vec<&'static str> {
        FILES
            .iter()
            .flat_map(|file| file.lines())
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
            "for_each_conformance_case! must list every `pub async fn` case of conformance/"
        );
    }
}
