//! Built-in tools: `run_javascript`, `extract_document`, Skills. (`ask_user`
//! and `update_plan` change only the run itself, so the supervisor owns and
//! carries them out: `agent_supervisor::builtin`.)
//!
//! Each tool exports its [`ToolDefinition`] (origin `builtin`, effects
//! declared); the host registers them. The two that run code on the host
//! (`run_javascript`, `extract_document`) also export a tool made with the
//! one tool-actor shell (`agent_kernel::tool`), which verifies each
//! invocation's capability before anything runs. Skills are not tools: a [`skill::Skill`] narrows the tools a run
//! may use, as a caveat on its capabilities.
//!
//! Crates chosen: `rquickjs` (QuickJS; small, embeddable, builds for wasm32,
//! with interrupt, memory and stack limits), `dom_smoothie` (a Readability
//! port for HTML), `lopdf` (pure-Rust PDF parsing with bounded decompression;
//! builds for wasm32), `csv` (RFC 4180 parsing), `encoding_rs` (strict
//! decoding).

pub mod document;
pub mod javascript;
pub mod offload;
pub mod secrets;
pub mod skill;

use agent_kernel::protocol::ToolDefinition;

/// The names of every built-in tool (reserved: no plugin may claim one).
pub const BUILTIN_TOOL_NAMES: [&str; 2] = [javascript::TOOL_NAME, document::TOOL_NAME];

/// The definitions of every built-in tool of this crate, in a stable order.
pub fn definitions() -> Vec<ToolDefinition> {
    vec![javascript::definition(), document::definition()]
}
