//! `agent-host-browser`: the browser host of the Trusted Agent Runtime.
//!
//! - [`api`] (feature `runtime`): `AgentRuntime`, the wasm-bindgen API for embedders;
//! - [`idb`]: `Storage` on IndexedDB, the `agent-store-indexeddb` crate
//!   (re-exported under this name);
//! - [`key_range`]: IndexedDB key ranges for prefix scans (that crate's);
//! - [`locks`]: session leases across tabs (Web Locks or a localStorage
//!   heartbeat, reentrancy in Rust, the fenced stored epoch, BroadcastChannel);
//! - [`page`]: `pagehide`/`offline`/`online` as lifecycle events (S2.5);
//! - [`worker`]: the dedicated Workers that run `run_javascript` and read
//!   PDFs in the Worker module (`agent-worker-module`), loaded on first use (S5.7);
//! - [`pdf_reader`] (feature `runtime`): `extract_document`'s PDF reader on such a Worker;
//! - [`html_extractor`] (feature `runtime`): readable text of HTML on such a
//!   Worker, terminated at the deadline;
//! - [`platform`]: clock, entropy and executor from the browser;
//! - [`subscriptions`]: the runtime's registry of live event subscriptions
//!   (they live until closed, not until their JS handle is collected);
//!
//! Everything that touches the browser compiles only for `wasm32`; natively
//! this crate holds just the pure parts, so that `cargo test` covers them.

// The kernel's host traits are shared as `Arc<dyn Trait>`; on wasm32 the
// browser's values are single-threaded by nature, so those Arcs are not Send.
#![cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]

pub use agent_store_indexeddb::key_range;
pub mod subscriptions;

#[cfg(all(target_arch = "wasm32", feature = "runtime"))]
pub mod api;
#[cfg(all(target_arch = "wasm32", feature = "runtime"))]
pub mod html_extractor;
#[cfg(target_arch = "wasm32")]
pub use agent_store_indexeddb as idb;
#[cfg(target_arch = "wasm32")]
mod js;
#[cfg(all(target_arch = "wasm32", feature = "runtime"))]
pub mod js_tool;
#[cfg(target_arch = "wasm32")]
pub mod locks;
#[cfg(target_arch = "wasm32")]
pub mod page;
#[cfg(all(target_arch = "wasm32", feature = "runtime"))]
pub mod pdf_reader;
#[cfg(target_arch = "wasm32")]
pub mod platform;
#[cfg(all(target_arch = "wasm32", feature = "runtime"))]
pub mod worker;
