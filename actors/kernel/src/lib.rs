//! `agent-kernel`: what every actor and host shares.
//!
//! - [`actor`]: `Addr`, bounded mailboxes, ask/reply, spawning, failure reports;
//! - [`host`]: the host traits (storage, leases, clock, executor, lifecycle, entropy);
//! - [`run`], [`budget`], [`journal`]: the run model of SPEC S1–S4 as data and pure functions;
//! - [`protocol`]: tool definitions, invocations, the result envelope, messages;
//! - [`reasoning`]: a run's reasoning setting (effort, thinking budget) and its bounds;
//! - [`tool`]: the one tool-actor shell (`Tool`, `spawn_tool`, the capability
//!   gate, argument validation, cancellation, the `ToolDefinition` builder);
//! - [`memory`]: an in-memory host for tests and the browser's non-durable fallback;
//! - `conformance` (feature `conformance`): the storage suite every backend must pass.
//!
//! No tokio, no web-sys, no rusqlite: hosts bring those.

// The same `Arc`s hold `Send + Sync` values natively; on single-threaded wasm32
// the futures inside are not `Send`, by design (see `maybe_send`).
#![cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]

pub mod actor;
pub mod budget;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod host;
pub mod ids;
pub mod journal;
pub mod maybe_send;
pub mod memory;
pub mod protocol;
pub mod reasoning;
pub mod run;
pub mod tool;

pub use actor::{ActorError, ActorExit, ActorReport, Addr, Inbox, ParentLink, Reply, spawn_actor};
pub use ids::{CallId, IdError, OwnerId, RequestId, RunId, SessionId};
pub use maybe_send::{BoxFuture, MaybeSend, MaybeSync};
