//! Memory under wasm32, in headless Chromium, on the kernel's memory
//! storage (as the research crate's wasm tests): scope rules (S10.1),
//! revisions and recoverable forget (S6.1), bounds, bad stored bytes, and
//! no grant for a Deep Research run (S9.1).
#![cfg(target_arch = "wasm32")]
// Single-threaded wasm32: host objects are neither `Send` nor `Sync` by design.
#![allow(clippy::arc_with_non_send_sync)]

use std::sync::Arc;

use agent_kernel::host::{Batch, ManualClock, Storage, Table};
use agent_kernel::memory::MemoryStorage;
use agent_kernel::run::RunMode;
use agent_kernel::{RunId, SessionId};
use agent_memory::record::MAX_TEXT_BYTES;
use agent_memory::{
    ChangedBy, Expect, GrantError, MemoryError, MemoryGrant, MemoryId, MemoryScope, MemoryScopes,
    MemoryStore, RunGrants, ScopeError,
};
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

fn store() -> (MemoryStore, Arc<dyn Storage>) {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    (
        MemoryStore::new(
            storage.clone(),
            Arc::new(ManualClock::new(1_767_225_600_000)),
        ),
        storage,
    )
}

#[wasm_bindgen_test]
fn scope_rules_hold_in_the_browser() {
    let s = SessionId::new("tab-session").unwrap();
    let scopes = MemoryScopes {
        read: [MemoryScope::Global, MemoryScope::session(&s)].into(),
        write: [MemoryScope::session(&s)].into(),
    };
    assert_eq!(
        scopes.resolve_write("session", &s).unwrap().to_string(),
        "session:tab-session"
    );
    assert!(matches!(
        scopes.resolve_write("global", &s),
        Err(ScopeError::WriteDenied { .. })
    ));
    assert!(matches!(
        MemoryScope::parse("workspace:"),
        Err(ScopeError::Invalid { .. })
    ));
    let refused = RunGrants::new().allow(
        s,
        RunId::new("research-1").unwrap(),
        RunMode::Research,
        MemoryGrant {
            scopes,
            fence: None,
        },
    );
    assert!(matches!(refused, Err(GrantError::NotAgentMode { .. })));
}

#[wasm_bindgen_test]
async fn revisions_forget_and_restore_in_the_browser() {
    let (store, storage) = store();
    let g = MemoryScope::Global;
    let id = MemoryId::new("tz").unwrap();
    store
        .save(
            None,
            &g,
            &id,
            "Lives in Lisbon",
            ChangedBy::Person,
            Expect::New,
        )
        .await
        .unwrap();
    store.edit(&g, &id, "Lives in Porto", 1).await.unwrap();
    assert_eq!(
        store.edit(&g, &id, "stale", 1).await.unwrap_err().code(),
        "stale_revision"
    );
    store.delete(&g, &id, 2).await.unwrap();
    assert!(store.list(&g).await.unwrap().is_empty());
    let (back, _) = store
        .restore(None, &g, &id, ChangedBy::Person)
        .await
        .unwrap();
    assert_eq!((back.revision, back.text.as_str()), (3, "Lives in Porto"));
    // Bounds.
    let big = MemoryId::new("big").unwrap();
    assert!(matches!(
        store
            .save(
                None,
                &g,
                &big,
                &"x".repeat(MAX_TEXT_BYTES + 1),
                ChangedBy::Person,
                Expect::New
            )
            .await,
        Err(MemoryError::TooLong { .. })
    ));
    store
        .save(
            None,
            &g,
            &big,
            &"x".repeat(MAX_TEXT_BYTES),
            ChangedBy::Person,
            Expect::New,
        )
        .await
        .unwrap();
    // Bad stored bytes: a typed error.
    storage
        .commit(Batch::new().put(Table::Meta, "memory/global/bad", b"{".to_vec()))
        .await
        .unwrap();
    assert_eq!(store.list(&g).await.unwrap_err().code(), "memory_corrupt");
}
