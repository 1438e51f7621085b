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

use std::sync::Arc;

use agent_kernel::host::Host;
use agent_kernel::protocol::{ToolAddr, ToolDefinition};
use agent_kernel::run::RunMode;
use agent_kernel::tool::{BuiltinTool, SpawnError};

use document::{DocumentSource, DocumentTool, PdfReader, ReadableExtractor};

/// The names of every built-in tool (reserved: no plugin may claim one).
pub const BUILTIN_TOOL_NAMES: [&str; 2] = [javascript::TOOL_NAME, document::TOOL_NAME];

/// The definitions of every built-in tool of this crate, in a stable order.
pub fn definitions() -> Vec<ToolDefinition> {
    vec![javascript::definition(), document::definition()]
}

/// What this crate's built-in tools need beyond the host.
pub struct ToolDeps {
    /// Where `extract_document` reads the files it is given (the session's
    /// workspace).
    pub documents: Arc<dyn DocumentSource>,
    /// Where `extract_document` reads PDFs: in process when `None`.
    pub pdf_reader: Option<Arc<dyn PdfReader>>,
    /// Where `extract_document` extracts HTML's readable text: in process
    /// when `None`.
    pub html_extractor: Option<Arc<dyn ReadableExtractor>>,
    /// The `run_javascript` actor the host spawned (natively a sandbox
    /// process, in a page a Worker), or `None`: not offered.
    pub javascript: Option<ToolAddr>,
}

/// This crate's built-in tools for Agent runs (the tool crates' one
/// registration shape, [`agent_kernel::tool::builtin`]): `run_javascript`
/// when the host spawned it, and `extract_document`, spawned here.
pub fn builtin_tools(host: &Host, deps: ToolDeps) -> Result<Vec<BuiltinTool>, SpawnError> {
    let mut tools = Vec::new();
    if let Some(addr) = deps.javascript {
        tools.push(BuiltinTool::spawned(
            (addr, javascript::definition()),
            &[RunMode::Agent],
        ));
    }
    let documents = DocumentTool::new(host.executor.clone(), host.clock.clone(), deps.documents)
        .read_pdfs_with(deps.pdf_reader)
        .extract_html_with(deps.html_extractor)
        .spawn_actor(None)?;
    tools.push(BuiltinTool::spawned(documents, &[RunMode::Agent]));
    Ok(tools)
}
