//! `agent-host-browser`: the browser host of the Trusted Agent Runtime.
//!
//! - [`idb`]: `Storage` on IndexedDB (one transaction per batch, fenced);
//! - [`lease_rules`]: the lease rules shared with every backend, as pure functions;
//!
//! Everything that touches the browser compiles only for `wasm32`; natively
//! this crate holds just the pure parts, so that `cargo test` covers them.

pub mod lease_rules;

#[cfg(target_arch = "wasm32")]
pub mod idb;
#[cfg(target_arch = "wasm32")]
mod js;
