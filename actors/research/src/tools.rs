//! The research tools as the assembly registers them, in the tool crates'
//! one shape ([`agent_kernel::tool::builtin`]): `start_deep_research` for
//! the start turn (S9.3) and, with a search backend, `web_search` for
//! planning (S9.4). Only `research` runs see them.

use std::sync::Arc;

use agent_kernel::host::{Host, LeaseManager};
use agent_kernel::run::RunMode;
use agent_kernel::tool::{BuiltinTool, SpawnError};

use crate::search::{SearchBackend, WebSearchTool, web_search_definition};
use crate::start::{StartDeepResearch, start_deep_research_definition};
use crate::store::ResearchStore;

/// The run modes the research tools are registered for.
pub const TOOL_MODES: [RunMode; 1] = [RunMode::Research];

/// What the research tools need beyond the host.
#[derive(Clone)]
pub struct ToolDeps {
    /// The task store the start tool creates tasks in.
    pub store: ResearchStore,
    /// The host's lease manager (the same owner as the runs).
    pub leases: LeaseManager,
    /// Where planning searches the web, or `None`: no `web_search`.
    pub search: Option<Arc<dyn SearchBackend>>,
}

/// Spawn `start_deep_research` and, with a search backend, `web_search`
/// on the host's executor, for [`TOOL_MODES`] only.
pub fn builtin_tools(host: &Host, deps: ToolDeps) -> Result<Vec<BuiltinTool>, SpawnError> {
    let start = StartDeepResearch::new(deps.store, deps.leases, host.clock.clone())
        .spawn(host.executor.clone(), None)?;
    let mut tools = vec![BuiltinTool {
        definition: start_deep_research_definition(),
        addr: start,
        modes: TOOL_MODES.to_vec(),
    }];
    if let Some(backend) = deps.search {
        let definition = web_search_definition(&backend.origin());
        let addr =
            WebSearchTool::new(backend, host.clock.clone()).spawn(host.executor.clone(), None)?;
        tools.push(BuiltinTool {
            definition,
            addr,
            modes: TOOL_MODES.to_vec(),
        });
    }
    Ok(tools)
}
