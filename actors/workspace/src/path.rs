//! The workspace path policy (SPEC S7.1), re-exported: [`WorkspacePath`] and
//! its refusals live in `agent_capabilities::path`, below both the workspace
//! and the capability scopes that check workspace targets, so both use one
//! rule. [`WorkspacePath::parse`] is still the one gate every path passes.

pub use agent_capabilities::path::{PathError, PathErrorKind, WorkspacePath};
