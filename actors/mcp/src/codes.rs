//! The stable error codes of MCP tool calls (beside the shell's, in
//! `agent_kernel::tool::codes`). A code never changes meaning.

/// The server answered the call with `isError: true`.
pub const MCP_TOOL_ERROR: &str = "mcp_tool_error";
/// The server did not answer within its deadline.
pub const MCP_TIMEOUT: &str = "mcp_timeout";
/// The server could not be reached, or the connection broke.
pub const MCP_UNREACHABLE: &str = "mcp_unreachable";
/// The server answered with a JSON-RPC error.
pub const MCP_SERVER_ERROR: &str = "mcp_server_error";
/// The server broke the protocol.
pub const MCP_PROTOCOL_ERROR: &str = "mcp_protocol_error";
/// A message from the server exceeded its size limit.
pub const MCP_RESPONSE_TOO_LARGE: &str = "mcp_response_too_large";
/// The session expired during a call that is not safe to repeat.
pub const MCP_SESSION_EXPIRED: &str = "mcp_session_expired";
/// The function declares an `outputSchema` and its result's
/// `structuredContent` is missing or does not match it.
pub const MCP_INVALID_OUTPUT: &str = "mcp_invalid_output";
