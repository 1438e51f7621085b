//! The names of the tools the supervisor answers itself (`ask_user`,
//! `update_plan`) are reserved by the tool registry, so no plugin or MCP
//! function can take one (S5.5). The two lists live in two actor crates that
//! do not depend on each other; this host, which wires both, checks they
//! agree.

#[test]
fn every_supervisor_tool_name_is_reserved() {
    for name in agent_supervisor::builtin::TOOL_NAMES {
        assert!(
            agent_tools::registry::RESERVED_TOOL_NAMES.contains(&name),
            "{name}"
        );
    }
}
