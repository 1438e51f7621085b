//! Knowledge bases under wasm32, in headless Chromium, on the kernel's
//! memory storage: the BM25 index builds and ranks in the browser, the
//! allowlist refuses another base (S10.1), passages are bounded and their
//! provenance resolves to the stored text (S5.4).
#![cfg(target_arch = "wasm32")]
// Single-threaded wasm32: host objects are neither `Send` nor `Sync` by design.
#![allow(clippy::arc_with_non_send_sync)]

use std::sync::Arc;

use agent_kernel::host::{ManualClock, Storage};
use agent_kernel::memory::MemoryStorage;
use agent_knowledge::{
    KnowledgeAllowlist, KnowledgeBases, KnowledgeError, KnowledgeStore, NewDocument, SearchLimits,
    SourceRef,
};
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

fn doc(id: &str, text: &str) -> NewDocument {
    NewDocument {
        id: id.into(),
        title: id.into(),
        source: SourceRef::Artifact {
            id: format!("sha256-{id}"),
            content_hash: None,
        },
        text: text.into(),
    }
}

#[wasm_bindgen_test]
async fn search_ranks_resolves_and_respects_the_allowlist_in_the_browser() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let store = KnowledgeStore::new(storage.clone(), Arc::new(ManualClock::new(0)));
    let bases = KnowledgeBases::open(store).await.unwrap();
    bases.create_base("notes").await.unwrap();
    bases
        .add_documents(
            "notes",
            vec![
                doc("garden", "Tomatoes need full sun and water every morning."),
                doc("bikes", "Check the tyre pressure of the bicycle weekly."),
                doc(
                    "bread",
                    "Sourdough bread rises overnight in a warm kitchen.",
                ),
            ],
        )
        .await
        .unwrap();
    let hits = bases
        .search(
            &["notes".into()],
            "bicycle tyres",
            SearchLimits {
                max_passages: 2,
                max_bytes: 20,
            },
        )
        .unwrap();
    assert_eq!(hits[0].document, "bikes");
    assert!(hits[0].text.len() <= 20 && hits[0].truncated);
    let stored = bases.resolve(&hits[0]).await.unwrap();
    assert_eq!(
        agent_capabilities::sha256_hex(stored.as_bytes()),
        hits[0].text_hash
    );

    // Reopened over the same storage: the index is rebuilt from it.
    let reopened =
        KnowledgeBases::open(KnowledgeStore::new(storage, Arc::new(ManualClock::new(0))))
            .await
            .unwrap();
    let hits = reopened
        .search(&["notes".into()], "sourdough", SearchLimits::default())
        .unwrap();
    assert_eq!(hits[0].document, "bread");

    let allow = KnowledgeAllowlist::of(["notes"]);
    assert!(allow.check(&["notes".into()]).is_ok());
    assert!(matches!(
        allow.check(&["notes".into(), "private".into()]),
        Err(KnowledgeError::NotAllowed { .. })
    ));
}
