//! Knowledge bases (SPEC S5.1 knowledge reads, S10.1 knowledge allowlists;
//! issue 20 item 5): named collections of documents (text from
//! attachments, workspace files or Artifacts, each with a source
//! reference), chunked and indexed for ranked search.
//!
//! - [`chunk`]: bounded chunks ([`chunk::CHUNK_BYTES`]) with overlap, cut on
//!   char boundaries; each a byte range of the stored text with its hash.
//! - [`store`]: [`KnowledgeStore`] over `agent_kernel::host::Storage`: base
//!   and document records in `Table::Meta`, texts as blobs, each change one
//!   batch with a compare-and-set on the base record; bad bytes are typed
//!   errors. Bases survive restarts in both hosts because the storage does.
//! - [`index`]: [`KnowledgeBases`], the open bases with a BM25 index each,
//!   rebuilt from storage on open and after each change; search returns
//!   bounded [`Passage`]s whose provenance (base, document, byte offset,
//!   SHA-256) [`KnowledgeBases::resolve`] checks against the stored text;
//!   [`KnowledgeAllowlist`], the bases a run may search.
//! - [`tool`]: `knowledge_search`, a read tool on the one tool shell whose
//!   passages are `external_untrusted` (S5.4).
//!
//! Ranking is the maintained `bm25` crate (2.x, MIT): pure Rust, builds
//! for wasm32-unknown-unknown and natively (checked), with an English
//! tokenizer (Unicode segmentation, stop words, Snowball stemming). It was
//! chosen over `tantivy` (an on-disk index with threads and mmap, not for
//! wasm32-unknown-unknown) and `probly-search` (no stemming, a tokenizer of
//! our own to write); the index lives in memory and is rebuilt from the
//! stored chunks, so nothing of the crate's format is ever persisted.
//!
//! ```
//! # agent_kernel::memory::SimExecutor::new().block_on(async {
//! use std::sync::Arc;
//! use agent_kernel::host::{ManualClock, Storage};
//! use agent_kernel::memory::MemoryStorage;
//! use agent_knowledge::{KnowledgeBases, KnowledgeStore, NewDocument, SearchLimits, SourceRef};
//!
//! let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
//! let store = KnowledgeStore::new(storage, Arc::new(ManualClock::new(0)));
//! let bases = KnowledgeBases::open(store).await.unwrap();
//! bases.create_base("handbook").await.unwrap();
//! let doc = NewDocument {
//!     id: "leave".into(),
//!     title: "Leave policy".into(),
//!     source: SourceRef::Attachment { name: "leave.md".into() },
//!     text: "Employees get 25 days of paid holiday a year.".into(),
//! };
//! bases.add_documents("handbook", vec![doc]).await.unwrap();
//! let hits = bases
//!     .search(&["handbook".into()], "paid holidays", SearchLimits::default())
//!     .unwrap();
//! assert_eq!(hits[0].document, "leave");
//! assert_eq!(bases.resolve(&hits[0]).await.unwrap(), hits[0].text);
//! # });
//! ```

pub mod chunk;
pub mod index;
pub mod store;
pub mod tool;

pub use index::{KnowledgeAllowlist, KnowledgeBases, Passage, SearchLimits};
pub use store::{
    BaseRecord, DocumentRecord, KnowledgeError, KnowledgeStore, NewDocument, SourceRef,
    document_id_for,
};
pub use tool::{KnowledgeAccess, RunAllowlists, TOOL_MODES, ToolDeps, builtin_tools};
