//! `agent-kernel`: what every actor and host shares.
//!
//! - [`actor`]: `Addr`, bounded mailboxes, ask/reply, spawning, failure reports;
//! - [`host`]: the host traits (storage, leases, clock, executor, lifecycle, entropy);
//! - [`run`], [`budget`], [`journal`], [`mode`]: the run model of SPEC S1–S4 as data and pure functions
//!   (usage lives with the budgets it is checked against, the mode in a leaf both the run
//!   and the tool protocol read);
//! - [`protocol`]: tool definitions, invocations, the result envelope, messages;
//! - [`reasoning`]: a run's reasoning setting (effort, thinking budget) and its bounds;
//! - [`tool`]: the one tool-actor shell (`Tool`, `spawn_tool`, the capability
//!   gate, argument validation, cancellation, the `ToolDefinition` builder);
//! - [`child_runs`]: what a driver of phase runs (Deep Research's) needs
//!   from whoever starts and waits on runs, so that it needs no supervisor;
//! - [`memory`]: an in-memory host for tests and the browser's non-durable fallback;
//! - `conformance` (feature `conformance`): the storage suite every backend must pass.
//!
//! No tokio, no web-sys, no rusqlite: hosts bring those.
//!
//! # Design
//!
//! The kernel is the contract every other crate builds on, and it does no I/O
//! of its own: time, spawning, storage, leases and lifecycle events come from
//! a host through the [`host`] traits, so the same run loop runs on tokio and
//! SQLite natively and on the page's event loop and IndexedDB in a browser.
//! The rules that must hold the same everywhere are pure functions owned here
//! once: the status transitions and budgets ([`run`], [`budget`]), the
//! journal's moves and the replay rule ([`journal::replay_decision`]), the
//! lease rules ([`host::lease_rules`]), the fence and the compare-and-set
//! conditions of a batch ([`host::Fence::check`], [`host::Condition::check`]).
//! A storage backend implements only atomic steps around them, and the
//! conformance suite proves each backend against the same cases.
//!
//! A write is a [`host::Batch`]: data, not a closure (puts, deletes,
//! conditions, blobs and the writer's lease epoch), so that IndexedDB can run
//! it in one transaction.
//!
//! ```
//! use agent_kernel::host::{Batch, Storage, StorageError, Table};
//! use agent_kernel::memory::MemoryStorage;
//!
//! futures::executor::block_on(async {
//!     let storage = MemoryStorage::new();
//!     // Put a record only if the key is absent: one atomic batch.
//!     let first = Batch::new()
//!         .expect_absent(Table::Meta, "greeting")
//!         .put(Table::Meta, "greeting", b"hello".to_vec());
//!     storage.commit(first).await.unwrap();
//!     assert_eq!(storage.get(Table::Meta, "greeting").await.unwrap(), Some(b"hello".to_vec()));
//!
//!     // The same condition now fails, and nothing of the batch applies.
//!     let second = Batch::new()
//!         .expect_absent(Table::Meta, "greeting")
//!         .put(Table::Meta, "greeting", b"bye".to_vec());
//!     assert!(matches!(storage.commit(second).await, Err(StorageError::ConditionFailed { .. })));
//!     assert_eq!(storage.get(Table::Meta, "greeting").await.unwrap(), Some(b"hello".to_vec()));
//! });
//! ```

// The same `Arc`s hold `Send + Sync` values natively; on single-threaded wasm32
// the futures inside are not `Send`, by design (see `maybe_send`).
#![cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]

pub mod actor;
pub mod budget;
pub mod child_runs;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod host;
pub mod ids;
pub mod journal;
pub mod maybe_send;
pub mod memory;
pub mod mode;
pub mod protocol;
pub mod reasoning;
pub mod run;
pub mod tool;

pub use actor::{ActorError, ActorExit, ActorReport, Addr, Inbox, ParentLink, Reply, spawn_actor};
pub use ids::{CallId, IdError, OwnerId, RequestId, RunId, SessionId};
pub use maybe_send::{BoxFuture, MaybeSend, MaybeSync};
