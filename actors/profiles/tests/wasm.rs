//! The profile store (S10.3) in headless Chromium on IndexedDB: every
//! scenario of `common`, each on a fresh database deleted afterwards, plus
//! durability across closing and opening the database again. The
//! IndexedDB backend is the browser host's (`agent-host-browser` without
//! its `runtime` feature, so no dependency cycle).
#![cfg(target_arch = "wasm32")]
// Single-threaded wasm32: host objects are neither `Send` nor `Sync` by design.
#![allow(clippy::arc_with_non_send_sync)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use agent_host_browser::idb::IdbStorage;
use agent_kernel::host::{Clock, ManualClock, Storage};
use agent_profiles::{ProfileStore, RevisionCause};
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

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

fn fresh_name() -> String {
    format!(
        "profiles-{}-{}",
        js_sys::Date::now() as u64,
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

async fn fresh() -> (Arc<dyn Storage>, FreshDb) {
    let name = fresh_name();
    let storage = IdbStorage::open(&name).await.expect("open IndexedDB");
    (Arc::new(storage) as Arc<dyn Storage>, FreshDb(name))
}

macro_rules! on_indexeddb {
    ($($name:ident),* $(,)?) => {
        $(
            #[wasm_bindgen_test]
            async fn $name() {
                let (storage, _db) = fresh().await;
                common::$name(storage).await;
            }
        )*
    };
}

on_indexeddb!(
    revisions_diff_rollback,
    fork_records_its_origin,
    export_excludes_secrets_and_round_trips,
    import_narrows_to_the_host,
    legacy_assistants_migrate_lazily,
    bad_stored_bytes_are_typed_errors,
    run_history_is_fenced,
    concurrent_writers_never_both_win,
);

/// S10.3 on IndexedDB: revisions, a fork and a migrated legacy assistant
/// are there after the database is opened again (a reload).
#[wasm_bindgen_test]
async fn revisions_survive_reopening_the_database() {
    let name = fresh_name();
    let _db = FreshDb(name.clone());
    let clock = Arc::new(ManualClock::new(common::T0));
    {
        let idb = Arc::new(IdbStorage::open(&name).await.unwrap());
        let storage: Arc<dyn Storage> = idb.clone();
        let store = ProfileStore::new(storage.clone(), clock.clone() as Arc<dyn Clock>);
        let mut p = common::sample("durable");
        store.create(&p).await.unwrap();
        p.name = "Durable 2".into();
        store.save(&p, 1).await.unwrap();
        store
            .fork(&common::id("durable"), common::id("durable-fork"), "Fork")
            .await
            .unwrap();
        storage
            .commit(agent_kernel::host::Batch::new().put(
                agent_kernel::host::Table::Meta,
                "assistant/old",
                br#"{"name":"Old","system_prompt":"Hi","model":"m"}"#.to_vec(),
            ))
            .await
            .unwrap();
        store.get(&common::id("old")).await.unwrap();
        idb.close();
    }
    let storage: Arc<dyn Storage> = Arc::new(IdbStorage::open(&name).await.unwrap());
    let store = ProfileStore::new(storage, clock as Arc<dyn Clock>);
    let r = store.get(&common::id("durable")).await.unwrap();
    assert_eq!((r.revision, r.profile.name.as_str()), (2, "Durable 2"));
    let fork = store.head(&common::id("durable-fork")).await.unwrap();
    assert_eq!(fork.forked_from.unwrap().revision, 2);
    let old = store.get(&common::id("old")).await.unwrap();
    assert!(matches!(old.cause, RevisionCause::Migrated { .. }));
    assert_eq!(store.list().await.unwrap().profiles.len(), 3);
}
