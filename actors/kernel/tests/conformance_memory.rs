//! The storage conformance suite against `MemoryStorage`, natively.
#![cfg(not(target_arch = "wasm32"))]

use std::sync::Arc;

use agent_kernel::host::Storage;
use agent_kernel::memory::MemoryStorage;

agent_kernel::storage_conformance_tests! {
    attr: #[test],
    block_on: futures::executor::block_on,
    fixture: async { Arc::new(MemoryStorage::new()) as Arc<dyn Storage> },
}

/// The macro expands every case listed in `CASES` (guards against a case
/// added to the list but not to the macro, or the reverse).
#[test]
fn every_case_is_listed() {
    assert_eq!(agent_kernel::conformance::CASES.len(), 19);
}
