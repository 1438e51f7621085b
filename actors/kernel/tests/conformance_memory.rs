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

/// The suite has 20 cases: a case deleted from the one list together with its
/// function is noticed here (`CASES` and the tests above are both generated
/// from `for_each_conformance_case!`, and the kernel's unit test
/// `every_public_case_is_listed` catches a function missing from the list).
#[test]
fn every_case_is_listed() {
    assert_eq!(agent_kernel::conformance::CASES.len(), 22);
}
