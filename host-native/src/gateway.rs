//! The local gateway (`agentrt serve`): `POST /v1/fetch` reads a public page
//! for the browser through the same URL policy and limits as native reads
//! (S8), bound to 127.0.0.1, behind a random per-process token, with CORS
//! limited to the page it serves. The browser never fetches model URLs itself.
//!
//! Every request under `/v1/` passes, in order: the `Host` check (a DNS-
//! rebound name pointing at 127.0.0.1 is refused), the `Origin` check (a
//! browser request from any other page is refused, preflights included),
//! and the token (`Authorization: Bearer <token>`, compared in constant
//! time). A refused or failed read is still HTTP 200 with a
//! [`agent_fetch::GatewayReply::Failure`]: only gateway refusals use 4xx.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use agent_fetch::{CancelToken, FetchBackend, GATEWAY_FETCH_PATH, GatewayReply, GatewayRequest};
use agent_kernel::host::Entropy;
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

/// The gateway's shared state: the backend that reads (natively the
/// `agent_fetch::WebReader`), the token, and the page origins allowed by CORS.
#[derive(Clone)]
pub struct GatewayState {
    backend: Arc<dyn FetchBackend>,
    token: Arc<str>,
    allowed_origins: Arc<[String]>,
    allowed_hosts: Arc<[String]>,
}

impl std::fmt::Debug for GatewayState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayState")
            .field("token", &"<redacted>")
            .field("allowed_origins", &self.allowed_origins)
            .finish()
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
        }
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

/// The gateway's routes (`POST /v1/fetch` and its CORS preflight), guarded.
/// The host may merge its own routes (the demo page) into the result.
pub fn router(state: GatewayState) -> Router {
    Router::new()
        .route(GATEWAY_FETCH_PATH, post(fetch).options(preflight))
        .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

/// Serve [`router`] on `listener` until the process ends or the listener fails.
pub async fn serve(listener: tokio::net::TcpListener, state: GatewayState) -> std::io::Result<()> {
    axum::serve(listener, router(state)).await
}

fn refuse(status: StatusCode, code: &str, message: &str) -> Response {
    let body = serde_json::json!({ "error": code, "message": message });
    (status, Json(body)).into_response()
}

/// Constant-time equality of two byte strings (the length is not secret).
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

async fn guard(State(state): State<GatewayState>, request: Request, next: Next) -> Response {
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
    let origin = headers.get(header::ORIGIN).cloned();
    if let Some(o) = &origin {
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
