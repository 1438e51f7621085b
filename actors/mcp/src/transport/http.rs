//! Streamable HTTP (both targets, reqwest): every message is a POST with
//! `Accept: application/json, text/event-stream`; an answer comes back as
//! one JSON body or as an SSE stream read on its own task (bounded per
//! message); `Mcp-Session-Id` is kept and sent, `MCP-Protocol-Version`
//! after the handshake; a 404 on a request carrying a session id is
//! [`McpError::SessionExpired`]; the optional GET stream carries server
//! notifications (405: the server offers none). A request's event stream
//! that ends before its answer, after an event with an `id`, is resumed
//! (2025-11-25, "Resumability and Redelivery"): a `GET` with
//! `Last-Event-ID`, after the stream's `retry` (capped at
//! [`MAX_RETRY_MS`]), at most [`MAX_RESUME_ATTEMPTS`] times within
//! [`MAX_RESUME_TIME`]; past that the request fails as sent (its effect
//! unknown). The notification stream is reopened the same way when it
//! ends after an event id (at most [`MAX_RESUME_ATTEMPTS`] times in a row
//! without a message, or once a reopening fails). A request the client
//! abandons (timed out, cancelled) has its event stream dropped at once,
//! which closes its connection. Configured headers are
//! attached per request, secrets resolved only then and only for the origin
//! they are bound to. No redirect is followed, natively or in the browser
//! (`agent_http`'s strict client and sender): a redirect is
//! [`McpError::Redirected`] and nothing reaches its target (S13.5).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::{FutureExt, StreamExt};
use serde_json::Value;

use std::time::Duration;

use agent_kernel::host::secrets::SecretResolver;
use agent_kernel::host::{Clock, Executor};
use agent_kernel::maybe_send::boxed;
use agent_kernel::tool::{CancelHandle, CancelToken};

use super::{Inbound, InboundSink, Transport};
use crate::auth::challenge::{self, BearerChallenge};
use crate::auth::session::{AuthSession, TokenGeneration};
use crate::config::HeaderValue;
use crate::error::McpError;
use crate::jsonrpc::{MAX_MESSAGE_BYTES, RequestId, ServerMessage, parse_server_messages};
use agent_http::SseDecoder;

/// The session header.
pub const SESSION_HEADER: &str = "mcp-session-id";
/// The path of an `agentrt serve` gateway that forwards MCP requests.
pub const GATEWAY_MCP_PATH: &str = "/v1/mcp";
/// The header naming the MCP server's URL to that gateway.
pub const GATEWAY_TARGET_HEADER: &str = "x-agentrt-mcp-target";

/// Reach a server through an `agentrt serve` gateway (a page whose server
/// sends no CORS headers for it): every request goes to the gateway's
/// [`GATEWAY_MCP_PATH`] with the gateway token and the server's URL in
/// [`GATEWAY_TARGET_HEADER`]; the gateway adds whatever credentials it has
/// configured for that server, so the page sends none.
#[derive(Clone)]
pub struct GatewayRoute {
    /// The gateway's base URL (`http://127.0.0.1:8787`).
    pub url: String,
    /// The gateway token (`Authorization: Bearer`).
    pub token: String,
}

impl std::fmt::Debug for GatewayRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayRoute")
            .field("url", &self.url)
            .field("token", &"<redacted>")
            .finish()
    }
}
/// How many times one request's event stream is resumed at most.
pub const MAX_RESUME_ATTEMPTS: u32 = 5;
/// The longest wait before a resumption, whatever `retry` a server asks.
pub const MAX_RETRY_MS: u64 = 10_000;
/// The wait before a resumption when the stream gave no `retry`.
pub const DEFAULT_RETRY_MS: u64 = 1_000;
/// How long after its stream first ended a request may still be resumed.
pub const MAX_RESUME_TIME: Duration = Duration::from_secs(60);
/// How long the notification stream may take to answer its headers.
pub const NOTIFICATION_STREAM_OPEN: Duration = Duration::from_secs(10);
/// The header naming the last event received, on a resuming GET.
const LAST_EVENT_ID_HEADER: &str = "last-event-id";

/// The protocol version header.
pub const VERSION_HEADER: &str = "mcp-protocol-version";

/// Session state shared by concurrent requests (a leaf value, not an
/// actor's state: two fields read and replaced whole).
#[derive(Default)]
struct Session {
    id: Option<String>,
    version: Option<String>,
}

/// A Streamable HTTP connection to one server.
pub struct HttpTransport {
    url: url::Url,
    origin: String,
    headers: BTreeMap<String, HeaderValue>,
    secrets: Arc<dyn SecretResolver>,
    executor: Arc<dyn Executor>,
    clock: Arc<dyn Clock>,
    client: reqwest::Client,
    session: Mutex<Session>,
    /// Through a gateway: its MCP endpoint and token.
    route: Option<(url::Url, String)>,
    sink: InboundSink,
    /// Fired when the transport is dropped: its stream readers stop.
    closed: CancelHandle,
    /// The event streams still read toward a request's answer, each
    /// stopped by its own handle when the client abandons the request.
    streams: Arc<Mutex<BTreeMap<RequestId, CancelHandle>>>,
    /// Authorization (OAuth) of a server reached directly without a
    /// configured `Authorization` header.
    auth: Option<AuthSession>,
    /// The configured server id (for authorization errors).
    id: String,
}

impl Drop for HttpTransport {
    fn drop(&mut self) {
        self.closed.cancel();
    }
}

impl HttpTransport {
    /// A transport to `url` (of `origin`) sending `headers`, with the
    /// host's spawning, time, secrets and gateway route from `env`.
    pub fn new(
        url: url::Url,
        origin: String,
        config: &crate::config::McpServerConfig,
        env: &crate::client::McpEnv,
        sink: InboundSink,
    ) -> Result<HttpTransport, McpError> {
        let headers = config.headers.clone();
        let secrets = env.secrets.clone();
        let executor = env.executor.clone();
        let clock = env.clock.clone();
        let route = env.gateway.as_ref();
        let route = match route {
            None => None,
            Some(r) => {
                let base = url::Url::parse(&r.url).map_err(|e| McpError::Config {
                    id: origin.clone(),
                    why: format!("gateway URL {:?}: {e}", r.url),
                })?;
                let endpoint = base.join(GATEWAY_MCP_PATH).map_err(|e| McpError::Config {
                    id: origin.clone(),
                    why: format!("gateway URL {:?}: {e}", r.url),
                })?;
                Some((endpoint, r.token.clone()))
            }
        };
        let client = agent_http::strict_client(&agent_http::ClientOptions {
            proxy_from_environment: true,
            ..agent_http::ClientOptions::default()
        })
        .map_err(|e| McpError::Config {
            id: origin.clone(),
            why: e.to_string(),
        })?;
        let configured_authorization = headers
            .keys()
            .any(|name| name.eq_ignore_ascii_case("authorization"));
        let auth = match (&env.auth, &route) {
            (Some(auth_env), None) if !configured_authorization => Some(AuthSession::new(
                &config.id,
                &url,
                config.auth.clone().unwrap_or_default(),
                auth_env.clone(),
                secrets.clone(),
                clock.clone(),
            )),
            _ => None,
        };
        Ok(HttpTransport {
            auth,
            id: config.id.clone(),
            url,
            origin,
            headers,
            secrets,
            executor,
            clock,
            client,
            session: Mutex::new(Session::default()),
            route,
            sink,
            closed: CancelHandle::new(),
            streams: Arc::default(),
        })
    }

    /// Where requests go: the server, or the gateway that forwards them.
    fn endpoint(&self) -> url::Url {
        match &self.route {
            Some((gateway, _)) => gateway.clone(),
            None => self.url.clone(),
        }
    }

    fn session(&self) -> (Option<String>, Option<String>) {
        match self.session.lock() {
            Ok(s) => (s.id.clone(), s.version.clone()),
            Err(poisoned) => {
                let s = poisoned.into_inner();
                (s.id.clone(), s.version.clone())
            }
        }
    }

    fn set_session(&self, f: impl FnOnce(&mut Session)) {
        match self.session.lock() {
            Ok(mut s) => f(&mut s),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// The request with the session, version and configured headers.
    async fn prepare(
        &self,
        builder: reqwest::RequestBuilder,
    ) -> Result<(reqwest::RequestBuilder, bool, Option<TokenGeneration>), McpError> {
        let mut builder = builder;
        let (session, version) = self.session();
        let had_session = session.is_some();
        let mut generation = None;
        if let Some(auth) = &self.auth {
            let (token, sent) = auth.bearer().await?;
            generation = Some(sent);
            if let Some(token) = token {
                let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
                    .map_err(|_| McpError::Transport {
                        detail: "the stored access token is not a valid header value".into(),
                        sent: false,
                    })?;
                value.set_sensitive(true);
                builder = builder.header(reqwest::header::AUTHORIZATION, value);
            }
        }
        if let Some((_, token)) = &self.route {
            let mut auth = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| McpError::Transport {
                    detail: "the gateway token is not a valid header value".into(),
                    sent: false,
                })?;
            auth.set_sensitive(true);
            builder = builder
                .header(reqwest::header::AUTHORIZATION, auth)
                .header(GATEWAY_TARGET_HEADER, self.url.as_str());
        }
        if let Some(id) = session {
            builder = builder.header(SESSION_HEADER, id);
        }
        if let Some(v) = version {
            builder = builder.header(VERSION_HEADER, v);
        }
        for (name, value) in &self.headers {
            match value {
                HeaderValue::Literal(text) => {
                    builder = builder.header(name.as_str(), text.as_str())
                }
                HeaderValue::Secret { secret, prefix } => {
                    // Checked again per request: a binding that changed
                    // since the configuration was checked must not leak.
                    if self.secrets.bound_origin(secret).as_deref() != Some(self.origin.as_str()) {
                        return Err(McpError::Config {
                            id: self.origin.clone(),
                            why: format!(
                                "the secret of header {name:?} is no longer bound to {}; nothing was sent",
                                self.origin
                            ),
                        });
                    }
                    let value =
                        self.secrets
                            .resolve(secret)
                            .await
                            .map_err(|e| McpError::Transport {
                                detail: e.to_string(),
                                sent: false,
                            })?;
                    let mut header = reqwest::header::HeaderValue::from_str(&format!(
                        "{prefix}{}",
                        value.expose()
                    ))
                    .map_err(|_| McpError::Transport {
                        detail: format!(
                            "the secret of header {name:?} is not a valid header value"
                        ),
                        sent: false,
                    })?;
                    header.set_sensitive(true);
                    builder = builder.header(name.as_str(), header);
                }
            }
        }
        Ok((builder, had_session, generation))
    }

    /// The GET that resumes a request's event stream (its headers as any
    /// request's; `Last-Event-ID` added per attempt), or `None` when it
    /// cannot be built (then the stream is not resumed).
    async fn resume_template(&self) -> Option<reqwest::Request> {
        let builder = self
            .client
            .get(self.endpoint())
            .header(reqwest::header::ACCEPT, "text/event-stream");
        let (builder, _, _) = self.prepare(builder).await.ok()?;
        built(builder).ok()
    }

    fn spawn_sse(
        &self,
        response: agent_http::Response,
        request: Option<RequestId>,
        resume: Option<reqwest::Request>,
    ) {
        let sink = self.sink.clone();
        let closed = self.closed.token();
        let abandoned = CancelHandle::new();
        if let Some(id) = &request {
            lock(&self.streams).insert(id.clone(), abandoned.clone());
        }
        let streams = self.streams.clone();
        let abandoned = abandoned.token();
        let client = self.client.clone();
        let clock = self.clock.clone();
        self.executor.spawn(boxed(async move {
            let mut outcome = read_sse(response, &sink, &closed, &abandoned, request.as_ref()).await;
            let mut attempts = 0u32;
            let first_end = clock.monotonic();
            // Resume while the stream ended cleanly, unanswered, after an id.
            while let (Ok(end), Some(template)) = (&outcome, &resume) {
                let Some(last_id) = end.last_event_id.clone() else { break };
                if end.answered || attempts >= MAX_RESUME_ATTEMPTS {
                    break;
                }
                let wait = Duration::from_millis(
                    end.retry_ms.unwrap_or(DEFAULT_RETRY_MS).min(MAX_RETRY_MS),
                );
                if clock.monotonic().saturating_sub(first_end) + wait > MAX_RESUME_TIME {
                    break;
                }
                futures::select! {
                    () = clock.sleep(wait).fuse() => {},
                    () = closed.cancelled().fuse() => break,
                    () = abandoned.cancelled().fuse() => break,
                }
                attempts += 1;
                let Some(mut get) = template.try_clone() else { break };
                let Ok(value) = reqwest::header::HeaderValue::from_str(&last_id) else { break };
                get.headers_mut().insert(LAST_EVENT_ID_HEADER, value);
                let previous = end.clone();
                let sent = futures::select! {
                    sent = agent_http::send(&client, get).fuse() => sent,
                    () = closed.cancelled().fuse() => break,
                    () = abandoned.cancelled().fuse() => break,
                };
                outcome = match sent {
                    Ok(r)
                        if r.status().is_success()
                            && content_type(&r).starts_with("text/event-stream") =>
                    {
                        read_sse(r, &sink, &closed, &abandoned, request.as_ref())
                            .await
                            .map(|end| end.after(&previous))
                    }
                    // Not resumed this time: try again while the bound allows.
                    Ok(_) | Err(_) => Ok(previous),
                };
            }
            if let Some(request) = &request {
                lock(&streams).remove(request);
            }
            if abandoned.is_cancelled() {
                // The client gave up on it; the body is dropped here.
                return;
            }
            if let Some(request) = request {
                // The router ignores this when the answer already came.
                let error = match outcome {
                    Ok(_) if attempts > 0 => McpError::Transport {
                        detail: format!(
                            "the server's event stream ended before the answer and could not be resumed ({attempts} attempts)"
                        ),
                        sent: true,
                    },
                    Ok(_) => McpError::Transport {
                        detail: "the server's event stream ended before the answer".into(),
                        sent: true,
                    },
                    Err(e) => e,
                };
                sink.deliver(Inbound::StreamFailed { request, error }).await;
            } else if let Err(e) = outcome {
                tracing::debug!(error = %e, "the MCP notification stream ended");
            }
        }));
    }
}

fn send_error(e: agent_http::SendError) -> McpError {
    match e {
        agent_http::SendError::Redirected { status } => McpError::Redirected { status },
        other => McpError::Transport {
            sent: !other.never_sent(),
            detail: other.to_string(),
        },
    }
}

/// A request as built, or why it could not be (nothing was sent).
fn built(builder: reqwest::RequestBuilder) -> Result<reqwest::Request, McpError> {
    builder.build().map_err(|e| McpError::Transport {
        detail: format!("the request could not be built: {}", e.without_url()),
        sent: false,
    })
}

/// Read one bounded body.
async fn read_body(response: agent_http::Response) -> Result<Vec<u8>, McpError> {
    match response
        .bytes_limited(MAX_MESSAGE_BYTES)
        .await
        .map_err(send_error)?
    {
        Ok(body) => Ok(body),
        Err(size) => Err(McpError::TooLarge {
            size,
            limit: MAX_MESSAGE_BYTES,
        }),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// How an event stream ended cleanly.
#[derive(Debug, Clone, Default)]
struct StreamEnd {
    /// The answer to the stream's request came.
    answered: bool,
    /// At least one message came.
    delivered: bool,
    /// The last event ID and reconnection time the stream set.
    last_event_id: Option<String>,
    retry_ms: Option<u64>,
}

impl StreamEnd {
    /// This end of a resumed stream, keeping what the earlier one set and
    /// this one did not.
    fn after(self, previous: &StreamEnd) -> StreamEnd {
        StreamEnd {
            answered: self.answered,
            delivered: self.delivered,
            last_event_id: self
                .last_event_id
                .or_else(|| previous.last_event_id.clone()),
            retry_ms: self.retry_ms.or(previous.retry_ms),
        }
    }
}

/// Read an SSE body into the sink until it ends, the transport closes or
/// the request is `abandoned`; note whether `request`'s answer came.
async fn read_sse(
    response: agent_http::Response,
    sink: &InboundSink,
    closed: &CancelToken,
    abandoned: &CancelToken,
    request: Option<&RequestId>,
) -> Result<StreamEnd, McpError> {
    let mut end = StreamEnd::default();
    let mut decoder = SseDecoder::new(MAX_MESSAGE_BYTES);
    let mut stream = response.bytes_stream();
    loop {
        let next = futures::select! {
            next = stream.next().fuse() => next,
            () = closed.cancelled().fuse() => return Ok(end),
            () = abandoned.cancelled().fuse() => return Ok(end),
        };
        let Some(chunk) = next else { break };
        let chunk = chunk.map_err(send_error)?;
        // Messages completed before a broken line are delivered first (a
        // response may have ended in the same chunk), then the error.
        let mut events = Vec::new();
        let broken = decoder.push(&chunk, &mut events).map_err(sse_error);
        end.last_event_id = decoder.last_event_id().map(str::to_owned);
        end.retry_ms = decoder.retry_ms();
        for data in events {
            if data.trim().is_empty() {
                continue; // a priming event carries no message
            }
            for message in parse_server_messages(data.as_bytes())? {
                if let (ServerMessage::Response { id, .. }, Some(request)) = (&message, request)
                    && id == request
                {
                    end.answered = true;
                }
                end.delivered = true;
                let item = match (request, &message) {
                    (Some(request), ServerMessage::Request { .. }) => Inbound::Related {
                        request: request.clone(),
                        message,
                    },
                    _ => Inbound::Message(message),
                };
                sink.deliver(item).await;
            }
        }
        broken?;
    }
    Ok(end)
}

fn sse_error(e: agent_http::SseError) -> McpError {
    match e {
        agent_http::SseError::EventTooLarge { size, limit } => McpError::TooLarge { size, limit },
        agent_http::SseError::LineTooLong { limit } => McpError::TooLarge {
            size: limit + 1,
            limit: MAX_MESSAGE_BYTES,
        },
        agent_http::SseError::NotUtf8 => McpError::Protocol(e.to_string()),
    }
}

/// The `Bearer` challenge of a 401 or 403 answer (empty without one).
fn bearer_challenge(response: &agent_http::Response) -> BearerChallenge {
    response
        .headers()
        .get_all(reqwest::header::WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(challenge::parse)
        .find(|c| *c != BearerChallenge::default())
        .unwrap_or_default()
}

fn content_type(response: &agent_http::Response) -> String {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase()
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl Transport for HttpTransport {
    async fn send(&self, message: &Value, request: Option<&RequestId>) -> Result<(), McpError> {
        let body = serde_json::to_vec(message)
            .map_err(|e| McpError::Protocol(format!("cannot encode a message: {e}")))?;
        let mut authorizations = 0u32;
        let response = loop {
            let builder = self
                .client
                .post(self.endpoint())
                .header(
                    reqwest::header::ACCEPT,
                    "application/json, text/event-stream",
                )
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone());
            let (builder, had_session, generation) = self.prepare(builder).await?;
            let response = agent_http::send(&self.client, built(builder)?)
                .await
                .map_err(send_error)?;
            let (Some(auth), Some(generation)) = (&self.auth, generation) else {
                break (response, had_session);
            };
            let status = response.status().as_u16();
            if status != 401 && status != 403 {
                break (response, had_session);
            }
            let challenge = bearer_challenge(&response);
            if status == 403 && !challenge.insufficient_scope() {
                break (response, had_session);
            }
            if authorizations >= crate::auth::MAX_AUTHORIZATIONS_PER_REQUEST {
                return Err(McpError::Auth {
                    id: self.id.clone(),
                    why: format!(
                        "the server still answered HTTP {status} after {authorizations} authorizations for this request; giving up"
                    ),
                });
            }
            authorizations += 1;
            if status == 401 {
                auth.unauthorized(&challenge, generation).await?;
            } else {
                auth.step_up(&challenge, generation).await?;
            }
        };
        let (response, had_session) = response;
        let status = response.status();
        if let Some(id) = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
        {
            let id = id.to_owned();
            self.set_session(|s| {
                if s.id.is_none() {
                    s.id = Some(id);
                }
            });
        }
        if status.as_u16() == 404 && had_session {
            return Err(McpError::SessionExpired {
                method: String::new(),
            });
        }
        if !status.is_success() {
            let text = read_body(response).await.unwrap_or_default();
            let text = String::from_utf8_lossy(&text);
            let mut shown: String = text.chars().take(300).collect();
            if shown.len() < text.len() {
                shown.push('…');
            }
            return Err(McpError::Transport {
                detail: format!("the server answered HTTP {status}: {shown}"),
                // A server error may come after the request was handled.
                sent: status.is_server_error(),
            });
        }
        if status.as_u16() == 202 || request.is_none() {
            return Ok(());
        }
        let kind = content_type(&response);
        if kind.starts_with("text/event-stream") {
            let resume = self.resume_template().await;
            self.spawn_sse(response, request.cloned(), resume);
            Ok(())
        } else if kind.starts_with("application/json") {
            let body = read_body(response).await?;
            for message in parse_server_messages(&body)? {
                self.sink.deliver(Inbound::Message(message)).await;
            }
            Ok(())
        } else {
            Err(McpError::Protocol(format!(
                "the server answered a request with content type {kind:?}, not JSON or an event stream"
            )))
        }
    }

    async fn initialized(&self, version: &str) {
        self.set_session(|s| s.version = Some(version.to_owned()));
        // The optional stream of server notifications (list_changed).
        let builder = self
            .client
            .get(self.endpoint())
            .header(reqwest::header::ACCEPT, "text/event-stream");
        let Ok((builder, _, _)) = self.prepare(builder).await else {
            return;
        };
        let Ok(request) = built(builder) else {
            return;
        };
        let sink = self.sink.clone();
        let closed = self.closed.token();
        let client = self.client.clone();
        let clock = self.clock.clone();
        // Kept to reopen the stream (a GET has no body: it clones).
        let template = request.try_clone();
        // Opened before the handshake returns, so that the server has it
        // before any later request (it is not mistaken for a resumption);
        // a server that does not answer its headers in time offers none.
        let sent = agent_kernel::host::timeout(
            &*self.clock,
            NOTIFICATION_STREAM_OPEN,
            agent_http::send(&client, request),
        )
        .await;
        self.executor.spawn(boxed(async move {
            let sent = match sent {
                Ok(sent) => sent,
                Err(_) => {
                    tracing::debug!("the MCP notification stream did not open in time");
                    return;
                }
            };
            let mut response = match sent {
                Ok(response)
                    if response.status().is_success()
                        && content_type(&response).starts_with("text/event-stream") =>
                {
                    response
                }
                // 405: the server offers no such stream; anything else: none either.
                Ok(response) => {
                    tracing::debug!(status = %response.status(), "no MCP notification stream");
                    return;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "no MCP notification stream");
                    return;
                }
            };
            // Reopened while it ends cleanly after an event id; at most
            // MAX_RESUME_ATTEMPTS reopenings in a row without a message.
            let mut last = StreamEnd::default();
            let mut barren = 0u32;
            loop {
                let end =
                    match read_sse(response, &sink, &closed, &CancelToken::never(), None).await {
                        Ok(end) => end.after(&last),
                        Err(e) => {
                            tracing::debug!(error = %e, "the MCP notification stream ended");
                            return;
                        }
                    };
                barren = if end.delivered { 0 } else { barren + 1 };
                let (Some(last_id), Some(template)) = (end.last_event_id.clone(), &template) else {
                    return;
                };
                if closed.is_cancelled() || barren > MAX_RESUME_ATTEMPTS {
                    return;
                }
                let wait = Duration::from_millis(
                    end.retry_ms.unwrap_or(DEFAULT_RETRY_MS).min(MAX_RETRY_MS),
                );
                futures::select! {
                    () = clock.sleep(wait).fuse() => {},
                    () = closed.cancelled().fuse() => return,
                }
                let (Some(mut get), Ok(value)) = (
                    template.try_clone(),
                    reqwest::header::HeaderValue::from_str(&last_id),
                ) else {
                    return;
                };
                get.headers_mut().insert(LAST_EVENT_ID_HEADER, value);
                last = StreamEnd {
                    delivered: false,
                    ..end
                };
                let sent = futures::select! {
                    sent = agent_http::send(&client, get).fuse() => sent,
                    () = closed.cancelled().fuse() => return,
                };
                response = match sent {
                    Ok(r)
                        if r.status().is_success()
                            && content_type(&r).starts_with("text/event-stream") =>
                    {
                        r
                    }
                    _ => {
                        tracing::debug!("the MCP notification stream could not be reopened");
                        return;
                    }
                };
            }
        }));
    }

    fn reset_session(&self) {
        self.set_session(|s| *s = Session::default());
    }

    fn describe(&self) -> String {
        self.origin.clone()
    }

    fn abandon(&self, request: &RequestId) {
        if let Some(stream) = lock(&self.streams).remove(request) {
            stream.cancel();
        }
    }
}
