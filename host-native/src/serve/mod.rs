//! What `agentrt serve` serves: the local gateway ([`gateway`]: reads for
//! the page under the URL policy, and every protection of the server as a
//! whole), the demo page's static routes beside it ([`page`]), the model
//! relay that keeps provider keys off the page ([`relay`]), and MCP through
//! the gateway ([`mcp_gateway`]). The command line's `serve` wires them
//! (`cli/serve.rs` of the `agentrt` binary).

pub mod gateway;
pub mod mcp_gateway;
pub mod page;
pub mod relay;
