//! The one shape in which a tool crate hands its built-in tools to the
//! assembly: each crate exposes
//!
//! ```text
//! pub fn builtin_tools(host: &Host, deps: ToolDeps) -> Result<Vec<BuiltinTool>, SpawnError>
//! ```
//!
//! where `ToolDeps` is that crate's own struct of what its tools need
//! beyond the host (a store, a grant check, a backend). The function spawns
//! the crate's tool actors on the host's executor with its clock and says,
//! per tool, which run modes may use it ([`BuiltinTool::modes`]): the rule
//! of which mode sees a tool (S9.1: Deep Research never sees Memory) is the
//! tool crate's, written once. The assembly turns each into a registry
//! entry without knowing any crate's spawning details.

use crate::protocol::{ToolAddr, ToolDefinition};
use crate::run::RunMode;

/// A spawned built-in tool: what the registry needs to offer it.
#[derive(Debug, Clone)]
pub struct BuiltinTool {
    /// The definition the actor serves (as `spawn_tool` returned it).
    pub definition: ToolDefinition,
    /// The actor that performs its calls.
    pub addr: ToolAddr,
    /// The run modes that may use it.
    pub modes: Vec<RunMode>,
}

impl BuiltinTool {
    /// A tool spawned by `spawn_tool` (which gives the address first), for
    /// `modes`.
    pub fn spawned((addr, definition): (ToolAddr, ToolDefinition), modes: &[RunMode]) -> Self {
        BuiltinTool {
            definition,
            addr,
            modes: modes.to_vec(),
        }
    }
}
