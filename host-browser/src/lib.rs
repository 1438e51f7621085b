//! `agent-host-browser`: the browser host of the Trusted Agent Runtime.
//!
//! - `api` (feature `runtime`): `AgentRuntime`, the wasm-bindgen API for embedders;
//! - `idb`: `Storage` on IndexedDB, the `agent-store-indexeddb` crate
//!   (re-exported under this name);
//! - [`key_range`]: IndexedDB key ranges for prefix scans (that crate's);
//! - `locks`: session leases across tabs (Web Locks or a localStorage
//!   heartbeat, reentrancy in Rust, the fenced stored epoch, BroadcastChannel);
//! - `page`: `pagehide`/`offline`/`online` as lifecycle events (S2.5);
//! - `page_tool` (feature `runtime`): tools the page defines in JavaScript
//!   (`rt.registerTool`, S5.9), each a tool actor of the one shell;
//! - `worker`: the dedicated Workers that run `run_javascript` and read
//!   PDFs in the Worker module (`agent-worker-module`), loaded on first use (S5.7);
//! - `pdf_reader` (feature `runtime`): `extract_document`'s PDF reader on such a Worker;
//! - `html_extractor` (feature `runtime`): readable text of HTML on such a
//!   Worker, terminated at the deadline;
//! - `platform`: clock, entropy and executor from the browser;
//! - [`subscriptions`]: the runtime's registry of live event subscriptions
//!   (they live until closed, not until their JS handle is collected);
//!
//! Everything that touches the browser compiles only for `wasm32`; natively
//! this crate holds just the pure parts, so that `cargo test` covers them.
//!
//! # Design
//!
//! The browser's host traits are answered by the page: IndexedDB for storage
//! (each batch one `readwrite` transaction whose only awaits are its own
//! requests, or it would auto-commit), Web Locks for the one tab that
//! executes a session (held through one pending Promise, reentrancy counted
//! in Rust, the stored epoch fencing every write), the page's clock and
//! `crypto.getRandomValues`, `spawn_local` for tasks, and `pagehide`,
//! `freeze` and `offline` as lifecycle events. Heavy or hostile work
//! (`run_javascript`, PDFs, HTML extraction) runs in a dedicated Worker that
//! a deadline terminates. The embedder sees one class, `AgentRuntime`
//! (`api`), documented for JavaScript in the book's "Embedding in a web
//! page" chapter.
//!
//! # Example
//!
//! From JavaScript (the runtime needs a browser; `cargo xtask demo` serves a
//! page that does this):
//!
//! ```js
//! import init, { AgentRuntime } from './pkg/agent_host_browser.js';
//! await init();
//! const rt = await AgentRuntime.create({
//!   model: { provider: 'scripted', scenario: { turns: [{ text: 'Hello.' }] } },
//! });
//! const sub = rt.subscribe('my-session', (event) => console.log(event));
//! const runId = await rt.startRun('my-session', 'Say hello');
//! ```
//!
//! The pure parts also build natively, where `cargo test` covers them; the
//! prefix scans, for instance, read one IndexedDB key range:
//!
//! ```
//! use agent_host_browser::key_range::prefix_upper_bound;
//!
//! // Every key starting with "run-1/" sorts below "run-10".
//! assert_eq!(prefix_upper_bound(b"run-1/"), Some(b"run-10".to_vec()));
//! assert_eq!(prefix_upper_bound(&[0xff, 0xff]), None); // no upper bound: scan to the end
//! ```

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
pub mod page_tool;
#[cfg(all(target_arch = "wasm32", feature = "runtime"))]
pub mod pdf_reader;
#[cfg(target_arch = "wasm32")]
pub mod platform;
#[cfg(all(target_arch = "wasm32", feature = "runtime"))]
pub mod worker;
