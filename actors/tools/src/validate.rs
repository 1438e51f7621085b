//! Argument handling before dispatch (S5.3); its one owner is
//! `agent_kernel::tool::validate` (the tool-actor shell uses it too),
//! re-exported here so `agent_tools::validate` keeps working.

pub use agent_kernel::tool::validate::*;
