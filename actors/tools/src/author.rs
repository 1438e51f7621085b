//! The tool-author API: the one tool-actor shell lives in
//! `agent_kernel::tool` (so that every tool crate can use it); re-exported
//! here so `agent_tools::author` keeps working.

pub use agent_kernel::tool::{
    NoHooks, SpawnError, Tool, ToolContext, ToolHooks, ToolOptions, spawn_tool, spawn_tool_with,
    with_receipt,
};
