//! [`McpClient`]: connect and initialize (version negotiation), list tools,
//! resources and prompts across pages (capped), call a tool with progress
//! and cancellation, read a resource, get a prompt, ping; per-request
//! timeouts from the host's clock; a re-initialize when an HTTP session
//! expires (the request retried once when that is safe); a stream of
//! [`ServerEvent`]s (`tools/list_changed`, reconnects).
//!
//! One router task per connection owns the table of pending requests and
//! progress tokens; the client and the transport reach it through one
//! bounded mailbox, so a request is always registered before its answer can
//! arrive. A server's `elicitation/create` goes to the host's handler with
//! the origin (run and call) of the request it belongs to: the one whose
//! event stream carried it, else the only request in flight that named an
//! origin. Server requests this client does not support (sampling, roots,
//! elicitation without a handler) are answered "method not found" at once.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::channel::oneshot;
use serde_json::{Value, json};

use agent_kernel::host::secrets::SecretResolver;
use agent_kernel::host::{Clock, Executor, timeout};
use agent_kernel::maybe_send::boxed;
use agent_kernel::tool::CancelToken;

use crate::config::{Endpoint, McpServerConfig};
use crate::elicitation::ElicitationOrigin;
use crate::error::McpError;
use crate::jsonrpc::{self, METHOD_NOT_FOUND, RequestId, ServerMessage};
use crate::protocol::{
    CallToolResult, GetPromptResult, InitializeResult, MAX_LIST_ITEMS, MAX_LIST_PAGES, McpTool,
    ProgressParams, Prompt, ReadResourceResult, Resource, ServerCapabilities, decode,
    initialize_params, negotiate_version, page_of,
};
use crate::transport::http::{GatewayRoute, HttpTransport};
use crate::transport::{Inbound, InboundSink, Transport};

/// Capacity of the router's mailbox (back-pressure beyond it).
const ROUTER_MAILBOX: usize = 64;
/// Capacity of the event stream; further list_changed events are dropped
/// while it is full (one pending re-list covers them all).
const EVENT_CAPACITY: usize = 8;

/// What the host gives a client: spawning, time, and secrets.
#[derive(Clone)]
pub struct McpEnv {
    pub executor: Arc<dyn Executor>,
    pub clock: Arc<dyn Clock>,
    pub secrets: Arc<dyn SecretResolver>,
    /// Reach the server (Streamable HTTP) through an `agentrt serve`
    /// gateway instead of directly; its own headers are then configured on
    /// the gateway, and a server configured with headers is refused.
    pub gateway: Option<GatewayRoute>,
    /// Authorization for servers that answer 401 (None: such a server is
    /// [`McpError::AuthRequired`]).
    pub auth: Option<crate::auth::AuthEnv>,
    /// Where a server's `elicitation/create` goes (None: not supported,
    /// answered -32601).
    pub elicitation: Option<Arc<dyn crate::elicitation::ElicitationHandler>>,
}

/// Something the server told us that is not an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent {
    /// `notifications/tools/list_changed`: list the tools again.
    ToolsListChanged,
    /// `notifications/resources/list_changed` or `prompts/list_changed`.
    OtherListChanged,
    /// The session expired and a new one was made: anything may have changed.
    Reconnected,
}

/// Progress of one request (`notifications/progress`).
pub type ProgressSink = async_channel::Sender<ProgressParams>;

/// Messages of the router task.
pub(crate) enum RouterMsg {
    Register {
        id: RequestId,
        method: String,
        reply: oneshot::Sender<Result<Value, McpError>>,
        progress: Option<(String, ProgressSink)>,
        origin: Option<ElicitationOrigin>,
    },
    Forget {
        id: RequestId,
    },
    Inbound(Inbound),
    Shutdown,
}

struct Pending {
    method: String,
    reply: oneshot::Sender<Result<Value, McpError>>,
    progress_token: Option<String>,
    /// The run and call this request serves (elicitation goes there).
    origin: Option<ElicitationOrigin>,
}

/// The router: owns the pending table; answers server requests.
struct Router {
    pending: BTreeMap<RequestId, Pending>,
    progress: BTreeMap<String, ProgressSink>,
    events: async_channel::Sender<ServerEvent>,
    transport: std::sync::Weak<dyn Transport>,
    executor: Arc<dyn Executor>,
    /// Set once the connection closed: later registrations fail at once.
    closed: Option<McpError>,
    server_id: String,
    elicitation: Option<Arc<dyn crate::elicitation::ElicitationHandler>>,
}

impl Router {
    async fn run(mut self, inbox: async_channel::Receiver<RouterMsg>) {
        while let Ok(msg) = inbox.recv().await {
            match msg {
                RouterMsg::Register {
                    id,
                    method,
                    reply,
                    progress,
                    origin,
                } => {
                    if let Some(e) = &self.closed {
                        // The receiver may be gone already: nobody waits then.
                        let _ = reply.send(Err(e.clone()));
                        continue;
                    }
                    let progress_token = progress.map(|(token, sink)| {
                        self.progress.insert(token.clone(), sink);
                        token
                    });
                    self.pending.insert(
                        id,
                        Pending {
                            method,
                            reply,
                            progress_token,
                            origin,
                        },
                    );
                }
                RouterMsg::Forget { id } => {
                    if let Some(p) = self.pending.remove(&id)
                        && let Some(t) = p.progress_token
                    {
                        self.progress.remove(&t);
                    }
                }
                RouterMsg::Inbound(item) => self.inbound(item),
                RouterMsg::Shutdown => return,
            }
        }
    }

    fn finish(&mut self, id: &RequestId, outcome: Result<Value, McpError>) {
        if let Some(p) = self.pending.remove(id) {
            if let Some(t) = &p.progress_token {
                self.progress.remove(t);
            }
            // The caller may have given up (timeout, cancel): fine.
            let _ = p.reply.send(outcome);
        }
    }

    fn inbound(&mut self, item: Inbound) {
        match item {
            Inbound::Message(ServerMessage::Response { id, outcome }) => {
                let method = match self.pending.get(&id) {
                    Some(p) => p.method.clone(),
                    None => {
                        tracing::debug!(%id, "an MCP answer to no pending request, ignored");
                        return;
                    }
                };
                let outcome = outcome.map_err(|e| McpError::Server {
                    method,
                    code: e.code,
                    message: e.message,
                });
                self.finish(&id, outcome);
            }
            Inbound::Message(ServerMessage::Notification { method, params }) => {
                self.notification(&method, params)
            }
            Inbound::Related { request, message } => {
                let origin = self.pending.get(&request).and_then(|p| p.origin.clone());
                self.server_request(message, origin)
            }
            Inbound::Message(message) => {
                // Not on a request's stream (stdio, or HTTP's notification
                // stream): it belongs to the only request in flight that
                // names an origin, if there is exactly one.
                let mut origins = self.pending.values().filter_map(|p| p.origin.clone());
                let origin = match (origins.next(), origins.next()) {
                    (Some(only), None) => Some(only),
                    _ => None,
                };
                self.server_request(message, origin)
            }
            Inbound::StreamFailed { request, error } => self.finish(&request, Err(error)),
            Inbound::Closed(error) => {
                let ids: Vec<RequestId> = self.pending.keys().cloned().collect();
                for id in ids {
                    self.finish(&id, Err(error.clone()));
                }
                self.closed = Some(error);
            }
        }
    }

    /// A request of the server's (`origin`: the call it belongs to).
    fn server_request(&mut self, message: ServerMessage, origin: Option<ElicitationOrigin>) {
        match message {
            ServerMessage::Response { .. } | ServerMessage::Notification { .. } => {
                self.inbound(Inbound::Message(message))
            }
            ServerMessage::Request { id, method, params }
                if method == "elicitation/create" && self.elicitation.is_some() =>
            {
                self.elicit(id, params.unwrap_or(Value::Null), origin)
            }
            ServerMessage::Request { id, method, .. } => {
                let answer = if method == "ping" {
                    jsonrpc::response(&id, json!({}))
                } else {
                    jsonrpc::error_response(
                        &id,
                        METHOD_NOT_FOUND,
                        &format!("this client does not support {method}"),
                    )
                };
                if let Some(transport) = self.transport.upgrade() {
                    self.executor.spawn(boxed(async move {
                        if let Err(e) = transport.send(&answer, None).await {
                            tracing::debug!(error = %e, "answering a server request failed");
                        }
                    }));
                }
            }
        }
    }

    /// Hand `elicitation/create` to the host's handler on a task of its
    /// own (the person may take long); the answer is checked against the
    /// requested schema before it is sent.
    fn elicit(&self, id: RequestId, params: Value, origin: Option<ElicitationOrigin>) {
        let (Some(handler), Some(transport)) = (self.elicitation.clone(), self.transport.upgrade())
        else {
            return;
        };
        let request = crate::elicitation::ElicitationRequest::from_params(&self.server_id, &params)
            .map(|mut request| {
                request.origin = origin;
                request
            });
        self.executor.spawn(boxed(async move {
            let answer = match request {
                Err(e) => jsonrpc::error_response(&id, jsonrpc::INVALID_PARAMS, &e.to_string()),
                Ok(request) => {
                    let answer = handler.elicit(request.clone()).await;
                    match &answer {
                        crate::elicitation::ElicitationAnswer::Accept(content) => {
                            match request.check(content) {
                                Ok(()) => jsonrpc::response(&id, answer.to_result()),
                                Err(e) => jsonrpc::error_response(
                                    &id,
                                    jsonrpc::INVALID_PARAMS,
                                    &e.to_string(),
                                ),
                            }
                        }
                        _ => jsonrpc::response(&id, answer.to_result()),
                    }
                }
            };
            if let Err(e) = transport.send(&answer, None).await {
                tracing::debug!(error = %e, "answering elicitation/create failed");
            }
        }));
    }

    fn notification(&mut self, method: &str, params: Option<Value>) {
        match method {
            "notifications/progress" => {
                let Some(params) = params else { return };
                match serde_json::from_value::<ProgressParams>(params) {
                    Ok(p) => {
                        let token = token_key(&p.progress_token);
                        if let Some(sink) = self.progress.get(&token) {
                            // A full or closed progress sink drops one update.
                            let _ = sink.try_send(p);
                        }
                    }
                    Err(e) => tracing::debug!(error = %e, "a malformed progress notification"),
                }
            }
            "notifications/tools/list_changed" => {
                let _ = self.events.try_send(ServerEvent::ToolsListChanged);
            }
            "notifications/resources/list_changed" | "notifications/prompts/list_changed" => {
                let _ = self.events.try_send(ServerEvent::OtherListChanged);
            }
            other => tracing::trace!(method = other, "MCP notification ignored"),
        }
    }
}

fn token_key(token: &Value) -> String {
    match token {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What the handshake established.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerInfo {
    pub protocol_version: &'static str,
    pub capabilities: ServerCapabilities,
    pub name: String,
    pub version: String,
    pub instructions: Option<String>,
}

struct Inner {
    id: String,
    transport: Arc<dyn Transport>,
    router: async_channel::Sender<RouterMsg>,
    events: async_channel::Receiver<ServerEvent>,
    events_tx: async_channel::Sender<ServerEvent>,
    executor: Arc<dyn Executor>,
    clock: Arc<dyn Clock>,
    timeout: Duration,
    next_id: AtomicI64,
    /// Counts sessions: a reconnect happens once per expired session.
    epoch: AtomicU64,
    reconnecting: futures::lock::Mutex<()>,
    info: std::sync::Mutex<Option<ServerInfo>>,
    /// The host handles elicitation (declared in `initialize`).
    elicits: bool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The router stops; the transport (and a stdio child) drops with us.
        let _ = self.router.try_send(RouterMsg::Shutdown);
    }
}

/// Options of one request.
#[derive(Default)]
pub struct RequestOptions {
    /// Where progress notifications go (adds `_meta.progressToken`).
    pub progress: Option<ProgressSink>,
    /// Fires when the caller stops waiting: `notifications/cancelled` is sent.
    pub cancel: Option<CancelToken>,
    /// Whether the request may be sent again after a session expired.
    pub retry_safe: bool,
    /// A deadline other than the configured one.
    pub timeout: Option<Duration>,
    /// The run and call this request serves: a server's elicitation that
    /// comes with it is handed to the host with this origin.
    pub origin: Option<ElicitationOrigin>,
}

/// A connection to one MCP server. Clones share it; dropping the last one
/// closes it (a stdio child is killed and reaped).
#[derive(Clone)]
pub struct McpClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("server", &self.inner.id)
            .finish_non_exhaustive()
    }
}

/// Sends `notifications/cancelled` for a request whose caller stopped
/// waiting (a dropped future included), unless disarmed.
struct CancelOnDrop {
    client: Option<McpClient>,
    id: RequestId,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let id = self.id.clone();
            let executor = client.inner.executor.clone();
            executor.spawn(boxed(async move {
                client.send_cancelled(&id, "the run was stopped").await;
            }));
        }
    }
}

impl McpClient {
    /// Check `config`, open the transport and run the handshake.
    pub async fn connect(config: &McpServerConfig, env: &McpEnv) -> Result<McpClient, McpError> {
        let endpoint = config.check(&*env.secrets)?;
        let (router_tx, router_rx) = async_channel::bounded(ROUTER_MAILBOX);
        let sink = InboundSink(router_tx.clone());
        let transport: Arc<dyn Transport> = match endpoint {
            Endpoint::Http { url, origin } => {
                if env.gateway.is_some() && !config.headers.is_empty() {
                    return Err(McpError::Config {
                        id: config.id.clone(),
                        why: "a server reached through the gateway gets its headers from the gateway's own configuration ([[mcp]] there); configure none here".into(),
                    });
                }
                Arc::new(HttpTransport::new(url, origin, config, env, sink)?)
            }
            #[cfg(not(target_arch = "wasm32"))]
            Endpoint::Stdio {
                command,
                args,
                env_allow,
            } => Arc::new(crate::transport::stdio::StdioTransport::spawn(
                &command, &args, &env_allow, sink,
            )?),
            #[cfg(target_arch = "wasm32")]
            Endpoint::Stdio { .. } => {
                return Err(McpError::Config {
                    id: config.id.clone(),
                    why: "a command (stdio) server cannot run in the browser".into(),
                });
            }
        };
        let (events_tx, events_rx) = async_channel::bounded(EVENT_CAPACITY);
        let router = Router {
            pending: BTreeMap::new(),
            progress: BTreeMap::new(),
            events: events_tx.clone(),
            transport: Arc::downgrade(&transport),
            executor: env.executor.clone(),
            closed: None,
            server_id: config.id.clone(),
            elicitation: env.elicitation.clone(),
        };
        env.executor.spawn(boxed(router.run(router_rx)));
        let client = McpClient {
            inner: Arc::new(Inner {
                id: config.id.clone(),
                transport,
                router: router_tx,
                events: events_rx,
                events_tx,
                executor: env.executor.clone(),
                clock: env.clock.clone(),
                timeout: Duration::from_millis(config.timeout_ms),
                next_id: AtomicI64::new(1),
                epoch: AtomicU64::new(0),
                reconnecting: futures::lock::Mutex::new(()),
                info: std::sync::Mutex::new(None),
                elicits: env.elicitation.is_some(),
            }),
        };
        client.initialize().await?;
        Ok(client)
    }

    /// The configured server id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// What the handshake established.
    pub fn server_info(&self) -> Option<ServerInfo> {
        match self.inner.info.lock() {
            Ok(i) => i.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Events from the server (list_changed, reconnects). Every clone of the
    /// receiver competes for the same events: take one per consumer.
    pub fn events(&self) -> async_channel::Receiver<ServerEvent> {
        self.inner.events.clone()
    }

    async fn initialize(&self) -> Result<(), McpError> {
        let result = self
            .raw_request(
                "initialize",
                Some(initialize_params(self.inner.elicits)),
                RequestOptions::default(),
            )
            .await?;
        let init: InitializeResult = decode("initialize", result)?;
        let version = negotiate_version(&init.protocol_version)?;
        self.inner.transport.initialized(version).await;
        self.inner
            .transport
            .send(
                &jsonrpc::notification("notifications/initialized", None),
                None,
            )
            .await?;
        let info = ServerInfo {
            protocol_version: version,
            capabilities: init.capabilities,
            name: init.server_info.name,
            version: init.server_info.version,
            instructions: init.instructions,
        };
        match self.inner.info.lock() {
            Ok(mut i) => *i = Some(info),
            Err(p) => *p.into_inner() = Some(info),
        }
        Ok(())
    }

    /// Make a new session after `seen_epoch`'s expired (once, however many
    /// requests noticed it).
    async fn reconnect(&self, seen_epoch: u64) -> Result<(), McpError> {
        let _one_at_a_time = self.inner.reconnecting.lock().await;
        if self.inner.epoch.load(Ordering::SeqCst) != seen_epoch {
            return Ok(()); // another request already reconnected
        }
        tracing::info!(server = %self.inner.id, "MCP session expired; initializing again");
        self.inner.transport.reset_session();
        self.initialize().await?;
        self.inner.epoch.fetch_add(1, Ordering::SeqCst);
        // A full event queue already holds a pending re-list: enough.
        let _ = self.inner.events_tx.try_send(ServerEvent::Reconnected);
        Ok(())
    }

    async fn send_cancelled(&self, id: &RequestId, reason: &str) {
        let note = jsonrpc::notification(
            "notifications/cancelled",
            Some(json!({"requestId": id, "reason": reason})),
        );
        if let Err(e) = self.inner.transport.send(&note, None).await {
            tracing::debug!(error = %e, "sending notifications/cancelled failed");
        }
    }

    /// One request and its answer: registered, sent, awaited with the
    /// deadline, cancelled on request (the server is told), retried once
    /// after a session expiry when `retry_safe`.
    pub async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        options: RequestOptions,
    ) -> Result<Value, McpError> {
        let mut retried = false;
        loop {
            let epoch = self.inner.epoch.load(Ordering::SeqCst);
            match self
                .raw_request(
                    method,
                    params.clone(),
                    RequestOptions {
                        progress: options.progress.clone(),
                        cancel: options.cancel.clone(),
                        retry_safe: options.retry_safe,
                        timeout: options.timeout,
                        origin: options.origin.clone(),
                    },
                )
                .await
            {
                Err(McpError::SessionExpired { .. }) => {
                    self.reconnect(epoch).await?;
                    if options.retry_safe && !retried {
                        retried = true;
                        continue;
                    }
                    return Err(McpError::SessionExpired {
                        method: method.to_owned(),
                    });
                }
                other => return other,
            }
        }
    }

    async fn raw_request(
        &self,
        method: &str,
        params: Option<Value>,
        options: RequestOptions,
    ) -> Result<Value, McpError> {
        let id = RequestId::Number(self.inner.next_id.fetch_add(1, Ordering::SeqCst));
        let (reply_tx, reply_rx) = oneshot::channel();
        let mut params = params;
        let progress = options.progress.map(|sink| {
            let token = format!("p{id}");
            let p = params.get_or_insert_with(|| json!({}));
            if let Some(obj) = p.as_object_mut() {
                obj.insert("_meta".into(), json!({"progressToken": token}));
            }
            (token, sink)
        });
        self.inner
            .router
            .send(RouterMsg::Register {
                id: id.clone(),
                method: method.to_owned(),
                reply: reply_tx,
                progress,
                origin: options.origin,
            })
            .await
            .map_err(|_| McpError::Closed("the connection's router stopped".into()))?;
        let message = jsonrpc::request(&id, method, params);
        // One deadline for sending and answering: a server that stops
        // reading its input cannot hold the caller past it.
        let deadline = options.timeout.unwrap_or(self.inner.timeout);
        let started = self.inner.clock.monotonic();
        let timed_out = || McpError::Timeout {
            method: method.to_owned(),
            ms: u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX),
        };
        let sent = timeout(
            &*self.inner.clock,
            deadline,
            self.inner.transport.send(&message, Some(&id)),
        )
        .await;
        let sent = match sent {
            Ok(sent) => sent,
            Err(_) => {
                self.inner.transport.abandon(&id);
                Err(timed_out())
            }
        };
        if let Err(e) = sent {
            let _ = self.inner.router.send(RouterMsg::Forget { id }).await;
            return Err(match e {
                McpError::SessionExpired { .. } => McpError::SessionExpired {
                    method: method.to_owned(),
                },
                other => other,
            });
        }
        // From here on the server has the request: a caller that stops
        // waiting tells it so.
        let mut guard = CancelOnDrop {
            client: Some(self.clone()),
            id: id.clone(),
        };
        let remaining =
            deadline.saturating_sub(self.inner.clock.monotonic().saturating_sub(started));
        let cancel = options.cancel.unwrap_or_else(CancelToken::never);
        let answer = futures::select! {
            answer = timeout(&*self.inner.clock, remaining, reply_rx).fuse() => answer,
            () = cancel.cancelled().fuse() => {
                self.inner.transport.abandon(&id);
                let _ = self.inner.router.send(RouterMsg::Forget { id: id.clone() }).await;
                guard.client = None;
                self.send_cancelled(&id, "the run was stopped").await;
                return Err(McpError::Cancelled { method: method.to_owned() });
            }
        };
        let result = match answer {
            Err(_) => {
                // Its event stream is dropped now, not read to its end.
                self.inner.transport.abandon(&id);
                let _ = self
                    .inner
                    .router
                    .send(RouterMsg::Forget { id: id.clone() })
                    .await;
                guard.client = None;
                self.send_cancelled(&id, "timed out").await;
                Err(timed_out())
            }
            Ok(Err(_)) => Err(McpError::Closed("the connection's router stopped".into())),
            Ok(Ok(outcome)) => outcome,
        };
        guard.client = None;
        result
    }

    /// `ping`.
    pub async fn ping(&self) -> Result<(), McpError> {
        self.request(
            "ping",
            None,
            RequestOptions {
                retry_safe: true,
                ..RequestOptions::default()
            },
        )
        .await
        .map(|_| ())
    }

    async fn list_all<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        field: &'static str,
    ) -> Result<Vec<T>, McpError> {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        for _page in 0..MAX_LIST_PAGES {
            let params = cursor.as_ref().map(|c| json!({"cursor": c}));
            let result = self
                .request(
                    method,
                    params,
                    RequestOptions {
                        retry_safe: true,
                        ..RequestOptions::default()
                    },
                )
                .await?;
            let (items, next) = page_of::<T>(result, field)?;
            if all.len() + items.len() > MAX_LIST_ITEMS {
                return Err(McpError::TooMany {
                    what: field,
                    limit: MAX_LIST_ITEMS,
                });
            }
            all.extend(items);
            match next {
                Some(c) if !c.is_empty() => cursor = Some(c),
                _ => return Ok(all),
            }
        }
        Err(McpError::TooMany {
            what: "pages",
            limit: MAX_LIST_PAGES,
        })
    }

    /// Every tool, across pages (at most [`MAX_LIST_PAGES`] pages and
    /// [`MAX_LIST_ITEMS`] tools).
    pub async fn list_tools(&self) -> Result<Vec<McpTool>, McpError> {
        self.list_all("tools/list", "tools").await
    }

    /// Every resource, across pages (same caps).
    pub async fn list_resources(&self) -> Result<Vec<Resource>, McpError> {
        self.list_all("resources/list", "resources").await
    }

    /// Every prompt, across pages (same caps).
    pub async fn list_prompts(&self) -> Result<Vec<Prompt>, McpError> {
        self.list_all("prompts/list", "prompts").await
    }

    /// `resources/read`.
    pub async fn read_resource(
        &self,
        uri: &str,
        cancel: Option<CancelToken>,
    ) -> Result<ReadResourceResult, McpError> {
        let v = self
            .request(
                "resources/read",
                Some(json!({"uri": uri})),
                RequestOptions {
                    retry_safe: true,
                    cancel,
                    ..RequestOptions::default()
                },
            )
            .await?;
        decode("resources/read", v)
    }

    /// `prompts/get` with string arguments.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: BTreeMap<String, String>,
        cancel: Option<CancelToken>,
    ) -> Result<GetPromptResult, McpError> {
        let v = self
            .request(
                "prompts/get",
                Some(json!({"name": name, "arguments": arguments})),
                RequestOptions {
                    retry_safe: true,
                    cancel,
                    ..RequestOptions::default()
                },
            )
            .await?;
        decode("prompts/get", v)
    }

    /// `tools/call`. `retry_safe`: the function is read-only or idempotent,
    /// so it may be sent again after a session expiry.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        options: RequestOptions,
    ) -> Result<CallToolResult, McpError> {
        let v = self
            .request(
                "tools/call",
                Some(json!({"name": name, "arguments": arguments})),
                options,
            )
            .await?;
        decode("tools/call", v)
    }
}
