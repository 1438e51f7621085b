//! [`McpError`]: every way talking to an MCP server can fail, typed, with a
//! message that says what was wrong and what to do.

/// Talking to an MCP server failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The configuration was refused before anything was sent.
    #[error("MCP server {id:?}: {why}")]
    Config { id: String, why: String },
    /// The connection failed or broke (HTTP error, process gone, stream cut).
    /// `sent` says whether the request may have reached the server.
    #[error("MCP transport failed: {detail}")]
    Transport { detail: String, sent: bool },
    /// The server broke the protocol (not JSON-RPC, a wrong type, an
    /// unexpected answer).
    #[error("MCP protocol error: {0}")]
    Protocol(String),
    /// No answer within the deadline. The request was sent.
    #[error("the MCP server did not answer {method} within {ms} ms")]
    Timeout { method: String, ms: u64 },
    /// The server answered with a JSON-RPC error.
    #[error("the MCP server answered {method} with error {code}: {message}")]
    Server {
        method: String,
        code: i64,
        message: String,
    },
    /// A message from the server exceeded a size limit.
    #[error("a message from the MCP server is {size} bytes or more, over the limit of {limit}")]
    TooLarge { size: usize, limit: usize },
    /// Listing exceeded the page or item cap.
    #[error("the MCP server listed more than {limit} {what}; refusing the rest")]
    TooMany { what: &'static str, limit: usize },
    /// The server speaks a protocol revision this client does not.
    #[error(
        "the MCP server answered protocol version {offered:?}; this client supports {supported:?}"
    )]
    UnsupportedVersion {
        offered: String,
        supported: Vec<&'static str>,
    },
    /// The HTTP session ended (404 on a request carrying its id) and the
    /// request could not be retried safely.
    #[error(
        "the MCP session expired while {method} was in flight; it was not retried because it may have had an effect"
    )]
    SessionExpired { method: String },
    /// The server answered with a redirect; it was not followed, so no
    /// credential and no body went to its target (S13.5). `status` is
    /// `None` in the browser, where the redirect is opaque.
    #[error(
        "the MCP server answered with a redirect{}; MCP requests never follow redirects (nothing was sent to its target): configure the final URL",
        status.map(|s| format!(" ({s})")).unwrap_or_default()
    )]
    Redirected { status: Option<u16> },
    /// The call was cancelled (the run stopped); the server was told.
    #[error("the MCP request {method} was cancelled")]
    Cancelled { method: String },
    /// Authorization failed: discovery, registration or a token request
    /// (nothing was sent to the MCP server with a credential it should not
    /// have).
    #[error("MCP server {id:?}: authorization failed: {why}")]
    Auth { id: String, why: String },
    /// The server needs a login that cannot happen here (no person at a
    /// browser, no refresh token): log in first.
    #[error(
        "MCP server {id:?} needs a login: run `agentrt mcp login {id}` (or log in from the page), then try again"
    )]
    AuthRequired { id: String },
    /// The client is closed (the server process ended, the client dropped).
    #[error("the MCP connection is closed: {0}")]
    Closed(String),
}

impl McpError {
    /// True when the request may have reached the server (so an effect may
    /// have happened): every failure after sending, except a JSON-RPC error
    /// answer, which says the server handled the request.
    pub fn may_have_reached_server(&self) -> bool {
        match self {
            McpError::Transport { sent, .. } => *sent,
            McpError::Timeout { .. }
            | McpError::Redirected { .. }
            | McpError::TooLarge { .. }
            | McpError::Protocol(_)
            | McpError::SessionExpired { .. }
            | McpError::Cancelled { .. }
            | McpError::Closed(_) => true,
            McpError::Config { .. }
            | McpError::Server { .. }
            | McpError::TooMany { .. }
            | McpError::UnsupportedVersion { .. }
            | McpError::Auth { .. }
            | McpError::AuthRequired { .. } => false,
        }
    }
}
