//! The kernel's storage conformance suite (S1.1, S3.3) against IndexedDB in
//! headless Chromium, with a fresh database per test, deleted afterwards.
#![cfg(target_arch = "wasm32")]
// As in the crate: the kernel's host traits are shared as `Arc<dyn Trait>`,
// and the browser's storage is single-threaded by nature.
#![allow(clippy::arc_with_non_send_sync)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use agent_kernel::host::Storage;
use agent_store_indexeddb::IdbStorage;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

/// Deletes its database when the test ends.
struct FreshDb(String);

impl Drop for FreshDb {
    fn drop(&mut self) {
        let name = self.0.clone();
        wasm_bindgen_futures::spawn_local(async move {
            let _ = IdbStorage::delete_database(&name).await;
        });
    }
}

static NEXT: AtomicU32 = AtomicU32::new(0);

async fn fresh() -> (Arc<dyn Storage>, FreshDb) {
    let name = format!(
        "conformance-{}-{}",
        js_sys::Date::now() as u64,
        NEXT.fetch_add(1, Ordering::SeqCst)
    );
    let storage = IdbStorage::open(&name).await.expect("open IndexedDB");
    (Arc::new(storage) as Arc<dyn Storage>, FreshDb(name))
}

agent_kernel::storage_conformance_tests! {
    attr: #[wasm_bindgen_test],
    fixture: fresh(),
}
