//! `agent-store-indexeddb`: the agent runtime's [`Storage`] on IndexedDB,
//! for the browser host (`agent-host-browser`): durable across reloads and
//! shared by every tab of an origin.
//!
//! # What it owns
//!
//! - `IdbStorage` (wasm32 only): one object store per kernel `Table`, one
//!   for blobs and one for leases; every `Batch` in ONE readwrite
//!   transaction that awaits nothing but its own requests and checks the
//!   lease fence inside it (S3.3); point reads of one turn gathered into one
//!   readonly transaction;
//! - the lease steps of this backend: [`Storage::lease_cas`] as one
//!   readwrite transaction (read the session's record, compare, write), and
//!   the lease read;
//! - [`key_range`]: the byte-ordered key ranges of prefix scans (pure, so
//!   native unit tests cover it);
//! - the futures over IndexedDB requests and transactions, and (wasm32
//!   only) `describe`, the text of a thrown JS value, and `global_property`.
//!
//! It does not own the lease rules: acquire, renew and release are the
//! kernel's provided methods over this crate's compare-and-set, and taking a
//! session over from a closed tab is the kernel's `lease_cas::take_over`
//! over it too. Which tab may take over is the browser host's knowledge
//! (its Web Locks), not this crate's.
//!
//! # Design
//!
//! A batch is data, not a closure, so that it runs in one transaction
//! without awaiting anything else inside it (IndexedDB commits a transaction
//! as soon as it has no pending request). Table keys are stored as binary
//! keys (the UTF-8 bytes of the key), because IndexedDB orders string keys
//! by UTF-16 code units while `Storage` promises byte order. Values are
//! `Uint8Array`s; lease records are JSON strings. Transactions ask for
//! `"strict"` durability: complete only once the data is flushed.
//!
//! Natively this crate holds only [`key_range`]; everything that touches
//! the browser compiles for `wasm32` only.
//!
//! # Example
//!
//! In a page or a worker (wasm32):
//!
//! ```ignore
//! use agent_kernel::host::{Batch, Storage, Table};
//! use agent_kernel::{OwnerId, SessionId};
//! use agent_store_indexeddb::IdbStorage;
//!
//! let storage = IdbStorage::open("agentrt").await?;
//! let session = SessionId::new("s-1")?;
//! let lease = storage
//!     .try_acquire_lease(&session, &OwnerId::new("tab-a")?, now_ms, 30_000)
//!     .await?;
//! storage
//!     .commit(Batch::new().fenced(lease.fence()).put(Table::Runs, "run-1", b"{}".to_vec()))
//!     .await?;
//! ```
//!
//! The same calls run in headless Chromium in `tests/conformance.rs` (the
//! kernel's storage suite), where they are compiled and checked.

// The kernel's host traits are shared as `Arc<dyn Trait>`; on wasm32 the
// browser's values are single-threaded by nature, so those Arcs are not Send.
#![cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]

#[cfg(doc)]
use agent_kernel::host::Storage;

#[cfg(target_arch = "wasm32")]
mod idb;
#[cfg(target_arch = "wasm32")]
mod js;
pub mod key_range;

#[cfg(target_arch = "wasm32")]
pub use idb::IdbStorage;
/// JS helpers the browser host shares: the text of a thrown value, a
/// property of the global scope.
#[cfg(target_arch = "wasm32")]
pub use js::{describe, global_property};
