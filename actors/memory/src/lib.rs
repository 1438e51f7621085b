//! Memory (SPEC S10.1, issue 20): durable facts a person lets the agent
//! keep, by scope (`global`, `workspace:<id>`, `profile:<id>`,
//! `session:<id>`), each a record with bounded text, provenance (the person,
//! or which run and tool call saved it, and when) and a revision.
//!
//! - [`scope`]: [`MemoryScope`] and [`MemoryScopes`], the read and write
//!   sets a run gets from its profile; anything outside is a typed refusal.
//! - [`record`]: [`MemoryRecord`], its keys in `Table::Meta` and how stored
//!   bytes are read back (bad bytes are a typed error, never a panic).
//! - [`store`]: [`MemoryStore`] over `agent_kernel::host::Storage`: the
//!   person's list, edit, delete (recoverable), restore and purge, and the
//!   search the tool uses. Every change is one atomic batch with a
//!   compare-and-set, fenced by the session lease when a run writes.
//! - [`tools`]: `memory_search` (read), `memory_save` and `memory_forget`
//!   (recoverable local writes with revision checks and receipts) as tool
//!   actors on the one tool shell, and [`RunGrants`], the per-run grant the
//!   tools check before anything else. They are registered for Agent runs
//!   only ([`TOOL_MODES`]): Deep Research never sees Memory (S9.1).
//!
//! Dependencies: the kernel and capabilities only (no search crate: memories
//! are short and few per scope, so a ranked term and substring match over
//! the readable scopes is enough and stays predictable).
//!
//! ```
//! # agent_kernel::memory::SimExecutor::new().block_on(async {
//! use std::sync::Arc;
//! use agent_kernel::host::{ManualClock, Storage};
//! use agent_kernel::memory::MemoryStorage;
//! use agent_memory::{ChangedBy, Expect, MemoryId, MemoryScope, MemoryStore};
//!
//! let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
//! let store = MemoryStore::new(storage, Arc::new(ManualClock::new(0)));
//! let scope = MemoryScope::parse("workspace:w1").unwrap();
//! let id = MemoryId::new("editor").unwrap();
//! let (saved, _receipt) = store
//!     .save(None, &scope, &id, "Prefers tabs", ChangedBy::Person, Expect::New)
//!     .await
//!     .unwrap();
//! let (edited, _) = store.edit(&scope, &id, "Prefers spaces", saved.revision).await.unwrap();
//! assert_eq!(edited.revision, 2);
//! # });
//! ```

pub mod record;
pub mod scope;
pub mod store;
pub mod tools;

pub use record::{ChangedBy, Forgotten, MemoryId, MemoryIdError, MemoryRecord, decode_record};
pub use scope::{MemoryScope, MemoryScopes, ScopeError, ScopeKind};
pub use store::{Expect, MemoryError, MemoryHit, MemoryReceipt, MemoryStore};
pub use tools::{
    GrantError, MemoryAccess, MemoryGrant, RunGrants, TOOL_MODES, ToolDeps, all_tool_definitions,
    builtin_tools,
};
