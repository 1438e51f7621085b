//! MCP through the gateway (issue 16 item 6): a page whose MCP server does
//! not allow the page's origin (most do not send CORS headers) sends its
//! Streamable HTTP requests to `agentrt serve` at [`MCP_GATEWAY_PATH`],
//! naming the server's URL in the [`MCP_TARGET_HEADER`] header. The gateway
//! forwards them (POST, GET for the server's event stream, DELETE to end a
//! session) and streams the answer back.
//!
//! Which servers it reaches is this module's rule:
//!
//! - a server configured on the gateway (`[[mcp]]` with a `url` in the
//!   `agentrt` config) is reached at any address, like a plugin, with the
//!   headers configured for it (their secret values come from the server's
//!   environment, never from the page);
//! - any other URL passes the same address policy as `/v1/fetch`
//!   (`agent_fetch::UrlPolicy`: public addresses only, checked names pinned
//!   so DNS rebinding goes nowhere) and gets no credentials.
//!
//! Everything else of the gateway holds: the Host and Origin guard, the
//! token (`Authorization: Bearer <token>`), the connection limits. Only the
//! MCP headers pass in either direction; a request body is at most
//! [`MAX_MCP_BODY_BYTES`]; a streamed answer is cut after
//! [`DEFAULT_MCP_IDLE`] without a byte or [`DEFAULT_MCP_WHOLE`] in all.

use std::sync::Arc;
use std::time::Duration;

use agent_fetch::{UrlPolicy, pinned_client_builder};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::Response;

use crate::serve::gateway::refuse;
use crate::serve::relay::{RelayLimits, bounded};

/// The path of every forwarded MCP request (the MCP client's constant: the
/// client and the gateway share one name for it).
pub const MCP_GATEWAY_PATH: &str = agent_mcp::GATEWAY_MCP_PATH;
/// The request header naming the MCP server's URL.
pub const MCP_TARGET_HEADER: &str = agent_mcp::GATEWAY_TARGET_HEADER;
/// The largest request body forwarded.
pub const MAX_MCP_BODY_BYTES: usize = 4 * 1024 * 1024;
/// A forwarded answer (or event stream) with no byte for this long is cut.
pub const DEFAULT_MCP_IDLE: Duration = Duration::from_secs(5 * 60);
/// A forwarded answer (or event stream) is cut after this long in all.
pub const DEFAULT_MCP_WHOLE: Duration = Duration::from_secs(60 * 60);

/// The MCP headers passed from the page to the server.
const REQUEST_HEADERS: [&str; 5] = [
    "content-type",
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];
/// The headers passed from the server back to the page.
const RESPONSE_HEADERS: [&str; 3] = ["content-type", "mcp-session-id", "retry-after"];
/// What a cross-origin page may send and read (its preflight's answer).
pub(crate) const ALLOW_HEADERS: &str = "authorization, content-type, accept, mcp-session-id, mcp-protocol-version, last-event-id, x-agentrt-mcp-target";
pub(crate) const EXPOSE_HEADERS: &str = "mcp-session-id";

/// An MCP server configured on the gateway: its URL and the headers sent
/// to it (values resolved from the server's own secrets).
#[derive(Clone)]
pub struct ConfiguredMcpServer {
    url: url::Url,
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl std::fmt::Debug for ConfiguredMcpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfiguredMcpServer")
            .field("url", &self.url.as_str())
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// A configured server was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpGatewayError {
    #[error("MCP server URL {0:?} is not an http(s) URL without credentials")]
    Url(String),
    #[error("MCP server {url:?}: header {name:?} cannot be sent")]
    Header { url: String, name: String },
    #[error("{0}")]
    Config(String),
}

impl ConfiguredMcpServer {
    /// `headers` are (name, value) with values already resolved.
    pub fn new(
        url: &str,
        headers: impl IntoIterator<Item = (String, String)>,
    ) -> Result<ConfiguredMcpServer, McpGatewayError> {
        let parsed = UrlPolicy::parse(url).map_err(|_| McpGatewayError::Url(url.to_owned()))?;
        let mut out = Vec::new();
        for (name, value) in headers {
            let bad = || McpGatewayError::Header {
                url: url.to_owned(),
                name: name.clone(),
            };
            let n = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
            let mut v = HeaderValue::from_str(&value).map_err(|_| bad())?;
            v.set_sensitive(true);
            out.push((n, v));
        }
        Ok(ConfiguredMcpServer {
            url: parsed,
            headers: out,
        })
    }
}

/// The servers of `[[mcp]]` that have a `url`, as the gateway reaches them:
/// each configuration checked by its own rule (`McpServerConfig::check`:
/// a secret header only to the origin its secret is bound to), secret
/// header values resolved now from the server's environment.
pub async fn configured_servers(
    servers: &[agent_mcp::McpServerConfig],
    secrets: &dyn agent_kernel::host::secrets::SecretResolver,
) -> Result<Vec<ConfiguredMcpServer>, McpGatewayError> {
    let mut out = Vec::new();
    for server in servers {
        let Some(url) = &server.url else { continue };
        server
            .check(secrets)
            .map_err(|e| McpGatewayError::Config(e.to_string()))?;
        let mut headers = Vec::new();
        for (name, value) in &server.headers {
            let text = match value {
                agent_mcp::HeaderValue::Literal(text) => text.clone(),
                agent_mcp::HeaderValue::Secret { secret, prefix } => {
                    let value = secrets.resolve(secret).await.map_err(|e| {
                        McpGatewayError::Config(format!("MCP server {:?}: {e}", server.id))
                    })?;
                    format!("{prefix}{}", value.expose())
                }
            };
            headers.push((name.clone(), text));
        }
        out.push(ConfiguredMcpServer::new(url, headers)?);
    }
    Ok(out)
}

/// What `/v1/mcp` may reach, and how long its answers may stream.
#[derive(Clone)]
pub struct McpGateway {
    configured: Arc<[ConfiguredMcpServer]>,
    /// The address policy for URLs not configured here; None refuses them.
    policy: Option<Arc<UrlPolicy>>,
    limits: RelayLimits,
    /// The strict client for configured servers, or why it could not be
    /// built: then every request to them is refused with that error (no
    /// other client is ever used in its place).
    client: Result<reqwest::Client, agent_http::ClientBuildError>,
}

impl Default for McpGateway {
    /// Reaches nothing: every target is refused.
    fn default() -> Self {
        McpGateway::new(Vec::new(), None)
    }
}

impl McpGateway {
    /// `configured` servers are reached at any address; other URLs only
    /// when `policy` is given and lets them through.
    pub fn new(configured: Vec<ConfiguredMcpServer>, policy: Option<Arc<UrlPolicy>>) -> McpGateway {
        McpGateway {
            configured: configured.into(),
            policy,
            limits: RelayLimits {
                idle: DEFAULT_MCP_IDLE,
                whole: DEFAULT_MCP_WHOLE,
            },
            client: agent_http::strict_client(&agent_http::ClientOptions {
                connect_timeout: Some(Duration::from_secs(10)),
                ..agent_http::ClientOptions::default()
            }),
        }
    }

    /// The same gateway with other stream bounds.
    pub fn with_limits(mut self, limits: RelayLimits) -> McpGateway {
        self.limits = limits;
        self
    }

    /// The configured server at `url`, compared as parsed URLs.
    fn configured(&self, url: &url::Url) -> Option<&ConfiguredMcpServer> {
        self.configured.iter().find(|s| s.url == *url)
    }
}

/// Forward one MCP request (the token and origin were checked outside).
pub async fn forward(
    State(gateway): State<McpGateway>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !matches!(method, Method::GET | Method::POST | Method::DELETE) {
        return refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            "bad_request",
            "only POST, GET and DELETE of Streamable HTTP are forwarded",
        );
    }
    let Some(target) = headers.get(MCP_TARGET_HEADER).and_then(|v| v.to_str().ok()) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "bad_request",
            &format!("name the MCP server's URL in the {MCP_TARGET_HEADER} header"),
        );
    };
    let url = match UrlPolicy::parse(target) {
        Ok(u) => u,
        Err(e) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "bad_request",
                &format!("{MCP_TARGET_HEADER}: {e}"),
            );
        }
    };
    let (client, extra) = if let Some(server) = gateway.configured(&url) {
        match &gateway.client {
            Ok(client) => (client.clone(), server.headers.clone()),
            Err(e) => {
                return refuse(
                    StatusCode::BAD_GATEWAY,
                    "upstream_unreachable",
                    &e.to_string(),
                );
            }
        }
    } else {
        let Some(policy) = &gateway.policy else {
            return refuse(
                StatusCode::FORBIDDEN,
                "mcp_target_refused",
                "this gateway forwards only to the MCP servers configured for it ([[mcp]] with a url)",
            );
        };
        let checked = match policy.check_url(url.clone()).await {
            Ok(c) => c,
            Err(violation) => {
                return refuse(
                    StatusCode::FORBIDDEN,
                    "mcp_target_refused",
                    &format!(
                        "{violation}; configure the server for the gateway ([[mcp]]) to reach it"
                    ),
                );
            }
        };
        let client = match pinned_client_builder(&checked)
            .connect_timeout(Duration::from_secs(10))
            .build()
        {
            Ok(c) => c,
            Err(e) => {
                return refuse(
                    StatusCode::BAD_GATEWAY,
                    "upstream_unreachable",
                    &e.to_string(),
                );
            }
        };
        (client, Vec::new())
    };
    let mut request = client.request(
        reqwest::Method::from_bytes(method.as_str().as_bytes()).unwrap_or(reqwest::Method::POST),
        url.as_str(),
    );
    for name in REQUEST_HEADERS {
        if let Some(v) = headers.get(name) {
            request = request.header(name, v.as_bytes());
        }
    }
    for (name, value) in extra {
        request = request.header(name.as_str(), value.as_bytes());
    }
    if method == Method::POST {
        request = request.body(body);
    }
    let upstream = match request.send().await {
        Ok(r) => r,
        Err(e) => {
            return refuse(
                StatusCode::BAD_GATEWAY,
                "upstream_unreachable",
                &format!("the MCP server could not be reached: {}", e.without_url()),
            );
        }
    };
    let status =
        StatusCode::from_u16(upstream.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut kept = HeaderMap::new();
    for name in RESPONSE_HEADERS {
        if let Some(v) = upstream.headers().get(name)
            && let Ok(v) = HeaderValue::from_bytes(v.as_bytes())
        {
            kept.insert(HeaderName::from_static(name), v);
        }
    }
    let mut resp = Response::new(Body::from_stream(bounded(
        upstream.bytes_stream(),
        gateway.limits,
    )));
    *resp.status_mut() = status;
    resp.headers_mut().extend(kept);
    resp.headers_mut().insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static(EXPOSE_HEADERS),
    );
    resp
}
