//! The local gateway (`agentrt serve`): `POST /v1/fetch` reads a public page
//! for the browser through the same URL policy and limits as native reads
//! (S8), bound to 127.0.0.1 (or to the one exact address of `--listen`,
//! [`ListenAddress`], behind a reverse proxy that holds the TLS), behind a
//! random per-process token, with CORS limited to the page it serves and the
//! exact origins of `--allow-origin` ([`AllowedOrigin`]). The browser never
//! fetches model URLs itself.
//!
//! This module owns every protection of the server as a whole (issue 12
//! item 6), so that the demo page's routes ([`crate::serve::page`]) get them too:
//!
//! - **Same origin, on every route** (`same_origin_guard`, one layer over
//!   the API and the page): the `Host` header must be exactly the
//!   `127.0.0.1:<port>` the server is bound to (a DNS-rebound name pointing
//!   at 127.0.0.1 is refused, 403 `host_refused`, before any page byte is
//!   read), and an `Origin` header, when present, must be the server's own
//!   origin (403 `origin_refused`, preflights included).
//! - **No framing** (`security_headers`, on every response):
//!   `X-Frame-Options: DENY` and [`CONTENT_SECURITY_POLICY`] with
//!   `frame-ancestors 'none'`, so the approval dialog cannot be clickjacked.
//! - **Bounded connections** ([`serve_app`] drives hyper itself): a
//!   header-read timeout (a half-sent request, or an idle keep-alive
//!   connection, is closed at [`ServeLimits::header_read_timeout`]), a
//!   whole-request timeout (the handler, body read included, is dropped at
//!   [`ServeLimits::request_timeout`]: dropping it ends the read), and a cap
//!   of [`ServeLimits::max_connections`] open connections; beyond the cap a
//!   new connection is answered `503` and closed at once. Legitimate
//!   requests are not queued behind a full cap: nothing tells them apart
//!   from hostile ones before their headers are read, and a queued
//!   connection would wait behind the attacker's; a browser opens at most
//!   six connections per host, far below the cap, and gets its answer once
//!   the held connections time out.
//!
//! Then every request under `/v1/` needs the token (`Authorization: Bearer
//! <token>`, compared in constant time). A refused or failed read is still
//! HTTP 200 with a [`agent_fetch::GatewayReply::Failure`]: only gateway
//! refusals use 4xx/5xx.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use agent_fetch::{CancelToken, FetchBackend, GATEWAY_FETCH_PATH, GatewayReply, GatewayRequest};
use agent_kernel::host::Entropy;

use crate::serve::mcp_gateway::{MAX_MCP_BODY_BYTES, MCP_GATEWAY_PATH, McpGateway};
use crate::serve::relay::{MAX_RELAY_BODY_BYTES, RELAY_PREFIX, Relay};
use axum::Json;
use axum::Router;
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

/// The gateway's default port on 127.0.0.1.
pub const DEFAULT_PORT: u16 = 8787;

/// The largest request body accepted (a URL and a little JSON).
pub const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// The Content-Security-Policy of every response. The demo page loads its
/// own module scripts, compiles its wasm (`'wasm-unsafe-eval'`), starts the
/// `run_javascript` Worker from a `blob:` URL that imports the wasm-bindgen
/// glue from another `blob:` URL (`blob:` in `script-src` and
/// `worker-src`), and calls model providers and HTTP plugins configured by
/// the person (`https:`, and plain HTTP on loopback). Nothing may frame it.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; \
script-src 'self' 'wasm-unsafe-eval' blob:; worker-src 'self' blob:; \
connect-src 'self' https: http://127.0.0.1:* http://localhost:*; \
img-src 'self' data:; style-src 'self'; object-src 'none'; base-uri 'none'; \
form-action 'self'; frame-ancestors 'none'";

/// The limits of [`serve_app`]. See the module docs for why each exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeLimits {
    /// A connection that has not sent a whole request head this long after
    /// it opened (or after its previous response) is closed. Default 10 s.
    pub header_read_timeout: Duration,
    /// A request whose handler (body read included) has not answered this
    /// long after its head arrived is dropped and answered 503. Default
    /// 60 s: a gateway read has its own 30 s deadline.
    pub request_timeout: Duration,
    /// At most this many connections are open at once. Default 64.
    pub max_connections: usize,
}

/// Default of [`ServeLimits::header_read_timeout`].
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of [`ServeLimits::request_timeout`].
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Default of [`ServeLimits::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;

impl Default for ServeLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// A [`ServeLimits`] value that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitsError {
    #[error("the gateway's {0} must be more than zero")]
    Zero(&'static str),
}

impl ServeLimits {
    /// Check that every limit is usable (none is zero).
    pub fn check(&self) -> Result<(), LimitsError> {
        if self.header_read_timeout.is_zero() {
            return Err(LimitsError::Zero("header read timeout"));
        }
        if self.request_timeout.is_zero() {
            return Err(LimitsError::Zero("request timeout"));
        }
        if self.max_connections == 0 {
            return Err(LimitsError::Zero("connection cap"));
        }
        Ok(())
    }
}

/// The gateway's shared state: the backend that reads (natively the
/// `agent_fetch::WebReader`), the token, and the page origins allowed by CORS.
#[derive(Clone)]
pub struct GatewayState {
    backend: Arc<dyn FetchBackend>,
    token: Arc<str>,
    allowed_origins: Arc<[String]>,
    allowed_hosts: Arc<[String]>,
    /// The model providers relayed under [`crate::serve::relay::RELAY_PREFIX`].
    relay: Relay,
    /// The MCP servers reached under [`crate::serve::mcp_gateway::MCP_GATEWAY_PATH`].
    mcp: McpGateway,
}

impl std::fmt::Debug for GatewayState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayState")
            .field("token", &"<redacted>")
            .field("allowed_origins", &self.allowed_origins)
            .finish()
    }
}

/// An exact web origin allowed to call the gateway besides its own page
/// (`agentrt serve --allow-origin`): a chat application served from its own
/// domain. `scheme://host[:port]` with `http` or `https`, no credentials,
/// path, query, fragment or wildcard; kept in the form browsers send in
/// `Origin` (lowercase, punycode, default port dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedOrigin(String);

/// Why an `--allow-origin` value is not an exact origin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--allow-origin {given:?}: {problem}")]
pub struct OriginError {
    pub given: String,
    pub problem: &'static str,
}

impl AllowedOrigin {
    /// Read one exact origin; anything else is refused with the reason.
    pub fn parse(given: &str) -> Result<AllowedOrigin, OriginError> {
        let refuse = |problem| OriginError {
            given: given.to_owned(),
            problem,
        };
        if given.contains('*') {
            return Err(refuse(
                "wildcards are not allowed; name each origin exactly",
            ));
        }
        if given.eq_ignore_ascii_case("null") {
            return Err(refuse("the opaque origin \"null\" is never allowed"));
        }
        let url = url::Url::parse(given)
            .map_err(|_| refuse("not a URL origin such as https://chat.example"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(refuse("only http and https origins are allowed"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(refuse("an origin carries no user name or password"));
        }
        if url.host().is_none() {
            return Err(refuse("an origin names a host"));
        }
        // `Url` turns an empty path into "/"; anything longer was written.
        let after_authority = given
            .split_once("://")
            .map(|(_, rest)| rest)
            .unwrap_or_default();
        let written = after_authority.strip_suffix('/').unwrap_or(after_authority);
        if written.contains(['/', '\\', '?', '#'])
            || url.path() != "/"
            || url.query().is_some()
            || url.fragment().is_some()
        {
            return Err(refuse("an origin has no path, query or fragment"));
        }
        Ok(AllowedOrigin(url.origin().ascii_serialization()))
    }

    /// The origin as browsers send it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl GatewayState {
    /// `allowed_origins` are the exact origins (`http://127.0.0.1:8787`) of
    /// the pages allowed to call the gateway: normally just
    /// [`page_origin`] of the bound address. Their `host:port` parts are
    /// also the only `Host` headers accepted.
    pub fn new(
        backend: Arc<dyn FetchBackend>,
        token: impl Into<String>,
        allowed_origins: impl IntoIterator<Item = String>,
    ) -> Self {
        let allowed_origins: Vec<String> = allowed_origins
            .into_iter()
            .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
            .collect();
        let allowed_hosts = allowed_origins
            .iter()
            .filter_map(|o| o.split_once("://").map(|(_, host)| host.to_owned()))
            .collect::<Vec<_>>();
        Self {
            backend,
            token: Arc::from(token.into()),
            allowed_origins: allowed_origins.into(),
            allowed_hosts: allowed_hosts.into(),
            relay: Relay::default(),
            mcp: McpGateway::default(),
        }
    }

    /// Forward pages' MCP requests as [`crate::serve::mcp_gateway`] says.
    pub fn with_mcp(mut self, mcp: McpGateway) -> Self {
        self.mcp = mcp;
        self
    }

    /// Relay model requests to these providers ([`crate::serve::relay`]).
    pub fn with_relay(mut self, relay: Relay) -> Self {
        self.relay = relay;
        self
    }

    /// Also accept requests whose `Origin` is one of `origins` (a hosted
    /// chat app calling with the token). Only the `Origin` check widens: the
    /// `Host` header must still name the gateway's own address, so a name
    /// rebound to the gateway's address stays refused, and the token, the
    /// URL policy and every limit apply as for the gateway's own page.
    pub fn also_allowing(mut self, origins: &[AllowedOrigin]) -> Self {
        let mut all: Vec<String> = self.allowed_origins.to_vec();
        for o in origins {
            if !all.iter().any(|a| a == o.as_str()) {
                all.push(o.0.clone());
            }
        }
        self.allowed_origins = all.into();
        self
    }
}

/// A fresh per-process token: 32 random bytes from the host's entropy, hex.
pub fn random_token(entropy: &dyn Entropy) -> String {
    let key = agent_kernel::host::random_key(entropy);
    key.iter().map(|b| format!("{b:02x}")).collect()
}

/// The origin of the page the gateway serves at `addr` (`http://127.0.0.1:8787`).
pub fn page_origin(addr: SocketAddr) -> String {
    format!("http://{addr}")
}

/// Bind the gateway's listener on 127.0.0.1 (never on all interfaces).
pub async fn bind(port: u16) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await
}

/// Where `agentrt serve --listen ADDR` listens: one exact address. The
/// `Host` check accepts only the bound `IP:PORT`, so an unspecified address
/// (`0.0.0.0`, `::`), which names no address a client could put in `Host`,
/// is refused; a reverse proxy in front (which holds the TLS) forwards to
/// the exact address and sends it as `Host`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenAddress(SocketAddr);

/// Why a `--listen` address cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--listen {given}: {problem}")]
pub struct ListenError {
    pub given: SocketAddr,
    pub problem: &'static str,
}

impl ListenAddress {
    /// Accept one exact address (loopback or not).
    pub fn check(addr: SocketAddr) -> Result<ListenAddress, ListenError> {
        if addr.ip().is_unspecified() {
            return Err(ListenError {
                given: addr,
                problem: "an unspecified address names no host a request can send in Host; give the exact address the reverse proxy forwards to",
            });
        }
        if addr.ip().is_multicast() {
            return Err(ListenError {
                given: addr,
                problem: "a multicast address cannot be listened on",
            });
        }
        Ok(ListenAddress(addr))
    }

    pub fn addr(&self) -> SocketAddr {
        self.0
    }

    /// True for 127.0.0.0/8 and ::1: nothing beyond this machine reaches it.
    pub fn is_loopback(&self) -> bool {
        self.0.ip().is_loopback()
    }

    /// Bind the listener at this address.
    pub async fn bind(&self) -> std::io::Result<tokio::net::TcpListener> {
        tokio::net::TcpListener::bind(self.0).await
    }
}

/// The gateway alone (`POST /v1/fetch` and its CORS preflight) with every
/// protection of [`router_with_page`].
pub fn router(state: GatewayState) -> Router {
    protected(api(state.clone()), state)
}

/// The gateway and the demo page on one origin (`agentrt serve`): the
/// same-origin guard and the framing headers cover the page's routes exactly
/// as the API's ([`serve_app`] adds the request timeout around both).
pub fn router_with_page(state: GatewayState, page: Router) -> Router {
    protected(api(state.clone()).merge(page), state)
}

/// The API routes behind the token.
fn api(state: GatewayState) -> Router {
    Router::new()
        .route(GATEWAY_FETCH_PATH, post(fetch).options(preflight))
        .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
        .layer(middleware::from_fn_with_state(state.clone(), token_guard))
        .with_state(state.clone())
        .merge(relay_api(state.clone()))
        .merge(mcp_api(state))
}

/// The MCP forwarding route, behind the same token as `/v1/fetch`.
fn mcp_api(state: GatewayState) -> Router {
    Router::new()
        .route(
            MCP_GATEWAY_PATH,
            post(crate::serve::mcp_gateway::forward)
                .get(crate::serve::mcp_gateway::forward)
                .delete(crate::serve::mcp_gateway::forward)
                .options(mcp_preflight),
        )
        .layer(DefaultBodyLimit::max(MAX_MCP_BODY_BYTES))
        .layer(middleware::from_fn_with_state(state.clone(), token_guard))
        .with_state(state.mcp)
}

async fn mcp_preflight() -> Response {
    let mut resp = preflight().await;
    let h = resp.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("POST, GET, DELETE"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(crate::serve::mcp_gateway::ALLOW_HEADERS),
    );
    resp
}

/// The model relay's routes: the token in the header the provider's format
/// carries its key in ([`crate::serve::relay::relay_tokens`]).
fn relay_api(state: GatewayState) -> Router {
    Router::new()
        .route(
            &format!("{RELAY_PREFIX}/{{provider}}/{{*rest}}"),
            post(crate::serve::relay::forward).options(relay_preflight),
        )
        .layer(DefaultBodyLimit::max(MAX_RELAY_BODY_BYTES))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            relay_token_guard,
        ))
        .with_state(state.relay)
}

/// [`token_guard`] for the relay: the token may come in any of the
/// headers a provider's key goes in.
async fn relay_token_guard(
    State(state): State<GatewayState>,
    request: Request,
    next: Next,
) -> Response {
    let origin = request.headers().get(header::ORIGIN).cloned();
    if request.method() != Method::OPTIONS {
        let ok = crate::serve::relay::relay_tokens(request.headers())
            .any(|t| same_secret(t.as_bytes(), state.token.as_bytes()));
        if !ok {
            let mut resp = refuse(
                StatusCode::UNAUTHORIZED,
                "token_required",
                "missing or wrong gateway token; send the token printed by agentrt serve where the provider's key would go",
            );
            with_cors(&mut resp, origin.as_ref());
            return resp;
        }
    }
    let mut resp = next.run(request).await;
    with_cors(&mut resp, origin.as_ref());
    resp
}

async fn relay_preflight(headers: HeaderMap) -> Response {
    let requested = headers
        .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
        .and_then(|v| v.to_str().ok());
    let mut resp = preflight().await;
    if let Ok(allowed) = HeaderValue::from_str(&crate::serve::relay::relay_allow_headers(requested))
    {
        resp.headers_mut()
            .insert(header::ACCESS_CONTROL_ALLOW_HEADERS, allowed);
    }
    resp
}

/// The layers every route passes, outermost last: the Host/Origin guard,
/// then the security headers on whatever comes out (refusals included).
fn protected(app: Router, state: GatewayState) -> Router {
    app.layer(middleware::from_fn_with_state(state, same_origin_guard))
        .layer(middleware::from_fn(security_headers))
}

/// Serve [`router`] on `listener` with the default [`ServeLimits`] until the
/// listener fails.
pub async fn serve(listener: tokio::net::TcpListener, state: GatewayState) -> std::io::Result<()> {
    serve_app(listener, router(state), ServeLimits::default()).await
}

/// Serve `app` (normally [`router`] or [`router_with_page`]) on `listener`
/// over HTTP/1.1 within `limits` (all three of them are applied here), until
/// the listener fails.
pub async fn serve_app(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: ServeLimits,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use hyper_util::service::TowerToHyperService;
    limits
        .check()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let timeout = limits.request_timeout;
    let app = app.layer(middleware::from_fn(move |request: Request, next: Next| {
        request_deadline(timeout, request, next)
    }));
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _peer)) => stream,
            // Out of file descriptors and the like: wait, then go on.
            Err(e) if is_transient(&e) => {
                tracing::warn!(error = %e, "gateway accept failed; retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Err(e) => return Err(e),
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            refuse_over_cap(stream);
            continue;
        };
        let connection =
            http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        tokio::spawn(async move {
            // Ignored on purpose: a timed-out or broken connection is just closed.
            let _ = connection.await;
            drop(slot);
        });
    }
}

fn is_transient(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionReset, Interrupted, WouldBlock};
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | Interrupted | WouldBlock
    ) || e.raw_os_error().is_some_and(|c| c == 23 || c == 24) // ENFILE, EMFILE
}

/// Beyond the cap: answer 503 without waiting for anything, and close.
fn refuse_over_cap(stream: tokio::net::TcpStream) {
    const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n\
Content-Type: text/plain\r\nContent-Length: 39\r\nRetry-After: 1\r\n\r\n\
agentrt gateway: too many connections\r\n";
    // Nothing here waits. What the client sent already is read and dropped
    // first, so that closing sends FIN, not RST (an RST may make the client
    // lose the answer); at most 64 KiB are read.
    let mut sink = [0u8; 16 * 1024];
    for _ in 0..4 {
        match stream.try_read(&mut sink) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
    // All of it fits in the empty socket buffer.
    let _ = stream.try_write(BUSY);
    // Dropping the stream closes it.
}

/// Drop the rest of the chain (which stops its work) when it has not
/// answered within `timeout`.
async fn request_deadline(timeout: Duration, request: Request, next: Next) -> Response {
    match tokio::time::timeout(timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            let mut resp = refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "request_timeout",
                &format!(
                    "the request was not answered within {} ms and was stopped; retry",
                    timeout.as_millis()
                ),
            );
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            add_security_headers(&mut resp);
            resp
        }
    }
}

/// `X-Frame-Options`, the CSP and friends on every response.
async fn security_headers(request: Request, next: Next) -> Response {
    let mut resp = next.run(request).await;
    add_security_headers(&mut resp);
    resp
}

fn add_security_headers(resp: &mut Response) {
    let h = resp.headers_mut();
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
}

/// A gateway refusal: `{ error, message }` with `status`.
pub(crate) fn refuse(status: StatusCode, code: &str, message: &str) -> Response {
    let body = serde_json::json!({ "error": code, "message": message });
    (status, Json(body)).into_response()
}

/// Constant-time equality of two byte strings (the length is not secret).
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token of an `Authorization: Bearer <token>` header.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The Host and Origin rule of every route (the one owner of it).
async fn same_origin_guard(
    State(state): State<GatewayState>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let host_ok = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|h| {
            state
                .allowed_hosts
                .iter()
                .any(|a| a.eq_ignore_ascii_case(h))
        });
    if !host_ok {
        return refuse(
            StatusCode::FORBIDDEN,
            "host_refused",
            "the Host header does not name this gateway; call it at its own 127.0.0.1 address",
        );
    }
    if let Some(o) = headers.get(header::ORIGIN) {
        let allowed = o.to_str().is_ok_and(|o| {
            state
                .allowed_origins
                .iter()
                .any(|a| a.eq_ignore_ascii_case(o))
        });
        if !allowed {
            return refuse(
                StatusCode::FORBIDDEN,
                "origin_refused",
                "requests from this page's origin are refused; only the gateway's own page may call it",
            );
        }
    }
    next.run(request).await
}

/// The token of the API routes, and CORS for the (already checked) origin.
async fn token_guard(State(state): State<GatewayState>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let origin = headers.get(header::ORIGIN).cloned();
    // A preflight carries no credentials; it is answered for allowed origins only.
    if request.method() != Method::OPTIONS {
        let ok = bearer(headers).is_some_and(|t| same_secret(t.as_bytes(), state.token.as_bytes()));
        if !ok {
            let mut resp = refuse(
                StatusCode::UNAUTHORIZED,
                "token_required",
                "missing or wrong gateway token; send Authorization: Bearer <token> as printed by agentrt serve",
            );
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            with_cors(&mut resp, origin.as_ref());
            return resp;
        }
    }
    let mut resp = next.run(request).await;
    with_cors(&mut resp, origin.as_ref());
    resp
}

fn with_cors(resp: &mut Response, origin: Option<&HeaderValue>) {
    let h = resp.headers_mut();
    h.insert(header::VARY, HeaderValue::from_static("Origin"));
    if let Some(origin) = origin {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
    }
}

async fn preflight() -> Response {
    let mut resp = StatusCode::NO_CONTENT.into_response();
    let h = resp.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("POST"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("authorization, content-type"),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    resp
}

async fn fetch(
    State(state): State<GatewayState>,
    body: Result<Json<GatewayRequest>, JsonRejection>,
) -> Response {
    let Json(request) = match body {
        Ok(b) => b,
        Err(e) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "bad_request",
                &format!("the body must be JSON {{\"url\": \"https://...\"}}: {e}"),
            );
        }
    };
    // A client that goes away drops this future, which ends the read.
    let reply: GatewayReply = state
        .backend
        .fetch(&request.url, CancelToken::never())
        .await
        .into();
    Json(reply).into_response()
}
