//! The stable error codes of tool calls; their one owner is
//! `agent_kernel::tool::codes`, re-exported here so `agent_tools::codes` keeps working.

pub use agent_kernel::tool::codes::*;
