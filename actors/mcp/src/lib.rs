//! `agent-mcp`: the Model Context Protocol client and its tool actors.
//!
//! - [`jsonrpc`]: JSON-RPC 2.0 messages and the one bounded parser every
//!   server message goes through (4 MiB, serde_json's depth limit);
//! - [`protocol`]: the MCP messages (revision 2025-11-25; 2025-06-18 and
//!   2025-03-26 accepted from older servers);
//! - [`transport`]: Streamable HTTP (both targets; `agent_http`'s strict
//!   client, redirect-refusing sender and bounded SSE decoder) and stdio (native);
//! - [`auth`]: authorization (MCP 2025-11-25): discovery, PKCE, client
//!   registration, tokens, refresh and step-up, and the host's credential
//!   store, URL guard and browser step;
//! - [`client`]: [`McpClient`] (handshake, listings, calls, progress,
//!   cancellation, timeouts, session expiry, server events);
//! - [`elicitation`]: a server's `elicitation/create` (form mode), its
//!   schema check, and the host's [`elicitation::ElicitationHandler`];
//! - [`config`]: [`McpServerConfig`], the configuration of one server;
//! - [`tools`]: the tool actors of a server (one per function, and the
//!   resource and prompt read tools) and [`spawn_mcp_server`];
//! - [`codes`]: the stable error codes of MCP tool calls.
//!
//! Why not the official SDK (`rmcp`): its transports and service loop are
//! built on tokio (tasks, `tokio::process`, tokio channels and timers), and
//! its Streamable HTTP client did not build for wasm32-unknown-unknown when
//! this crate was written. This crate must run in the browser too, where
//! spawning and time come from the host (`agent_kernel::host`), so it keeps
//! one protocol model for both targets and uses reqwest (the browser's
//! fetch on wasm32) for HTTP and plain threads for stdio's pipes.
//!
//! Limits: a server message is at most [`jsonrpc::MAX_MESSAGE_BYTES`]
//! (4 MiB) and nests at most 128 levels; a listing reads at most
//! [`protocol::MAX_LIST_PAGES`] pages and [`protocol::MAX_LIST_ITEMS`]
//! items; every request has a deadline (`timeout_ms`, default 30 s); text
//! handed to the model is at most [`tools::MAX_TEXT_CHARS`] characters per
//! result, truncation marked; stdio keeps the last
//! 8 KiB of the server's stderr.
//!
//! Trust (S6.1, S6.3): a function the configuration does not declare is
//! *unknown*: it is assumed to write externally and not be idempotent, and
//! every call asks once. Annotations (`readOnlyHint`, ...) are display hints
//! that never change effects. Results, resources and prompts are
//! `external_untrusted` data.
//!
//! # Example
//!
//! Every message a server sends goes through one bounded parser; what it
//! cannot read is a typed error, never a panic:
//!
//! ```
//! use agent_mcp::jsonrpc::{RequestId, ServerMessage, parse_server_message, request};
//!
//! let ask = request(&RequestId::Number(1), "tools/list", None);
//! assert_eq!(ask["method"], "tools/list");
//!
//! let answer = br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#;
//! assert!(matches!(parse_server_message(answer), Ok(ServerMessage::Response { .. })));
//! assert!(parse_server_message(b"{not json").is_err());
//! ```

// The same `Arc`s hold `Send + Sync` values natively; on single-threaded
// wasm32 the host traits inside are not `Send`, by design (as in the kernel).
#![cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]

pub mod auth;
pub mod client;
pub mod codes;
pub mod config;
pub mod elicitation;
pub mod error;
pub mod jsonrpc;
pub mod protocol;
pub mod tools;
pub mod transport;

pub use client::{McpClient, McpEnv, RequestOptions, ServerEvent, ServerInfo};
pub use config::{HeaderValue, McpServerConfig, TrustedFunction};
pub use error::McpError;
pub use tools::{McpFunctionRegistration, McpLoad, McpServer, spawn_mcp_server};
pub use transport::http::{GATEWAY_MCP_PATH, GATEWAY_TARGET_HEADER, GatewayRoute};
