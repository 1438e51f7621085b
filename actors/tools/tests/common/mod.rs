//! Shared test fixtures: the tokio test host (`agent-test-support`), a stand-in for
//! the supervisor (it holds the run's `Authority` and mints after approval),
//! counting HTTP servers on loopback (axum, on their own thread and runtime,
//! so that their logs are not ours), and a secret resolver.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use agent_capabilities::{Authority, Capability, Grant, Uses};
use agent_kernel::host::Clock;
use agent_kernel::ids::{CallId, RunId, SessionId};
use agent_kernel::protocol::{
    ModelToolSchema, PreparedCall, RunToolConfig, ToolCall, ToolInvocation, ToolResult, ToolsMsg,
};
use agent_tools::plugin::{SecretError, SecretHandle, SecretResolver, SecretValue};
use agent_tools::{ToolsHandle, ToolsOptions};

// ----------------------------------------------------------------------------
// Host parts
// ----------------------------------------------------------------------------

pub use agent_test_support::{clock, executor};

// ----------------------------------------------------------------------------
// Supervisor stand-in
// ----------------------------------------------------------------------------

/// Plays the supervisor's part around the tools actor: asks for schemas,
/// prepares calls, "approves" by minting with the run's Authority, dispatches.
pub struct Run {
    pub tools: ToolsHandle,
    pub authority: Authority,
    pub run: RunId,
    pub session: SessionId,
    pub config: RunToolConfig,
    pub clock: Arc<dyn Clock>,
}

impl Run {
    pub fn new(tools: ToolsHandle, run: &str) -> Run {
        Run {
            tools,
            authority: Authority::new(run, [7u8; 32]),
            run: RunId::new(run).unwrap(),
            session: SessionId::new("session-1").unwrap(),
            config: RunToolConfig::default(),
            clock: clock(),
        }
    }

    pub async fn schemas(&self) -> Vec<ModelToolSchema> {
        let config = self.config.clone();
        let run = self.run.clone();
        self.tools
            .addr
            .ask(|reply| ToolsMsg::Schemas { run, config, reply })
            .await
            .unwrap()
    }

    pub async fn prepare_attempt(
        &self,
        call_id: &str,
        name: &str,
        arguments: &str,
        attempt: u32,
    ) -> Result<PreparedCall, ToolResult> {
        let call = ToolCall {
            call_id: CallId::new(call_id).unwrap(),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        };
        let (run, session, config) = (self.run.clone(), self.session.clone(), self.config.clone());
        self.tools
            .addr
            .ask(|reply| ToolsMsg::Prepare {
                run,
                session,
                call,
                attempt,
                config,
                reply,
            })
            .await
            .unwrap()
    }

    pub async fn prepare(
        &self,
        call_id: &str,
        name: &str,
        arguments: &str,
    ) -> Result<PreparedCall, ToolResult> {
        self.prepare_attempt(call_id, name, arguments, 1).await
    }

    /// The person approved `prepared` (or the policy let it run): mint.
    pub fn mint(&self, prepared: &PreparedCall, uses: Uses) -> Capability {
        let d = &prepared.draft;
        self.authority.mint(Grant {
            tool: d.tool.clone(),
            fingerprint: d.fingerprint.clone(),
            origin: d.origin.clone(),
            effects: d.effects.clone(),
            scope: d.scope.clone(),
            uses,
            expires_at_ms: self.clock.wall_ms() + 600_000,
        })
    }

    pub async fn dispatch(&self, prepared: &PreparedCall, capability: Capability) -> ToolResult {
        let invocation = ToolInvocation {
            draft: prepared.draft.clone(),
            capability,
            verifier: self.authority.verifier(),
            progress: Default::default(),
        };
        self.tools
            .addr
            .ask(|reply| ToolsMsg::Dispatch { invocation, reply })
            .await
            .unwrap()
    }

    /// Prepare, approve once, dispatch.
    pub async fn call(&self, call_id: &str, name: &str, arguments: &str) -> ToolResult {
        match self.prepare(call_id, name, arguments).await {
            Ok(p) => {
                let cap = self.mint(&p, Uses::Once);
                self.dispatch(&p, cap).await
            }
            Err(e) => e,
        }
    }
}

pub fn tools_options() -> ToolsOptions {
    ToolsOptions::default()
}

/// The error code of a result (panics on success).
pub fn code(result: &ToolResult) -> String {
    match result {
        ToolResult::Error(e) => e.code.clone(),
        ToolResult::Success(s) => panic!("expected an error, got success: {:?}", s.content),
    }
}

/// The text of a result's content or message.
pub fn text(result: &ToolResult) -> String {
    match result {
        ToolResult::Success(s) => match &s.content {
            Value::String(t) => t.clone(),
            other => other.to_string(),
        },
        ToolResult::Error(e) => e.message.clone(),
    }
}

/// The data inside a fence (the lines between the notice and the end marker).
pub fn unfence(fenced: &str) -> String {
    let lines: Vec<&str> = fenced.lines().collect();
    assert!(
        lines.len() >= 3 && lines[0].starts_with(agent_tools::envelope::FENCE_OPEN),
        "not fenced: {fenced}"
    );
    assert!(lines[lines.len() - 1].starts_with(agent_tools::envelope::FENCE_CLOSE));
    lines[2..lines.len() - 1].join("\n")
}

// ----------------------------------------------------------------------------
// Counting servers on loopback
// ----------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What the server answers: status, body (for a 3xx: the Location), and an
/// optional delay before it.
pub type Behaviour = Arc<dyn Fn(&Seen, usize) -> (u16, String, Option<Duration>) + Send + Sync>;

pub struct CountingServer {
    pub base_url: String,
    pub origin: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl CountingServer {
    pub fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// Start a counting server on 127.0.0.1 in its own thread and runtime.
pub fn counting_server(behaviour: Behaviour) -> CountingServer {
    use axum::body::Bytes;
    use axum::extract::State;
    use axum::http::{HeaderMap, Method, StatusCode, Uri};

    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let state = (seen.clone(), behaviour);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            async fn handler(
                State((seen, behaviour)): State<(Arc<Mutex<Vec<Seen>>>, Behaviour)>,
                method: Method,
                uri: Uri,
                headers: HeaderMap,
                body: Bytes,
            ) -> (StatusCode, HeaderMap, String) {
                let req = Seen {
                    method: method.to_string(),
                    path: uri.path().to_owned(),
                    query: uri.query().map(str::to_owned),
                    headers: headers
                        .iter()
                        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").to_owned()))
                        .collect(),
                    body: String::from_utf8_lossy(&body).into_owned(),
                };
                let n = {
                    let mut s = seen.lock().unwrap();
                    s.push(req.clone());
                    s.len()
                };
                let (status, body, delay) = behaviour(&req, n);
                if let Some(d) = delay {
                    tokio::time::sleep(d).await;
                }
                // A 3xx answer redirects to the URL given as its body.
                let mut out = HeaderMap::new();
                if (300..400).contains(&status) {
                    out.insert(axum::http::header::LOCATION, body.parse().unwrap());
                }
                (StatusCode::from_u16(status).unwrap(), out, body)
            }
            let app = axum::Router::new().fallback(handler).with_state(state);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    let addr = rx.recv().unwrap();
    let origin = format!("http://127.0.0.1:{}", addr.port());
    CountingServer {
        base_url: format!("{origin}/api"),
        origin,
        seen,
    }
}

/// A server answering 200 with `body` to everything.
pub fn ok_server(body: &str) -> CountingServer {
    let body = body.to_owned();
    counting_server(Arc::new(move |_, _| (200, body.clone(), None)))
}

// ----------------------------------------------------------------------------
// Secrets
// ----------------------------------------------------------------------------

#[derive(Default)]
pub struct TestSecrets {
    map: Mutex<HashMap<String, (String, String)>>,
    pub resolved: Mutex<usize>,
}

impl TestSecrets {
    pub fn with(handle: &str, value: &str, bound_origin: &str) -> Arc<TestSecrets> {
        let s = TestSecrets::default();
        s.set(handle, value, bound_origin);
        Arc::new(s)
    }
    pub fn set(&self, handle: &str, value: &str, bound_origin: &str) {
        self.map.lock().unwrap().insert(
            handle.to_owned(),
            (value.to_owned(), bound_origin.to_owned()),
        );
    }
}

#[async_trait::async_trait]
impl SecretResolver for TestSecrets {
    fn bound_origin(&self, handle: &SecretHandle) -> Option<String> {
        self.map
            .lock()
            .unwrap()
            .get(&handle.0)
            .map(|(_, o)| o.clone())
    }
    async fn resolve(&self, handle: &SecretHandle) -> Result<SecretValue, SecretError> {
        *self.resolved.lock().unwrap() += 1;
        self.map
            .lock()
            .unwrap()
            .get(&handle.0)
            .map(|(v, _)| SecretValue::new(v.clone()))
            .ok_or_else(|| SecretError::Unknown(handle.0.clone()))
    }
}

pub fn no_secrets() -> Arc<TestSecrets> {
    Arc::new(TestSecrets::default())
}

// ----------------------------------------------------------------------------
// Manifests
// ----------------------------------------------------------------------------

use agent_capabilities::{EffectClass, EffectSet, Idempotency, Sensitivity};
use agent_tools::plugin::{HttpMethod, PluginFunction, PluginManifest};

pub fn effects(list: &[EffectClass]) -> EffectSet {
    list.iter().copied().collect()
}

pub fn function(
    name: &str,
    description: &str,
    method: HttpMethod,
    path: &str,
    parameters: Value,
    effects: EffectSet,
    idempotency: Idempotency,
) -> PluginFunction {
    PluginFunction {
        name: name.to_owned(),
        description: description.to_owned(),
        method,
        path: path.to_owned(),
        parameters,
        effects,
        idempotency,
        sensitivity: Sensitivity::Public,
        annotations: None,
    }
}

/// A read function `name` with an object schema taking an optional `q`.
pub fn read_fn(name: &str, description: &str) -> PluginFunction {
    function(
        name,
        description,
        HttpMethod::Get,
        "/read",
        serde_json::json!({"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": false}),
        effects(&[EffectClass::ReadNetwork]),
        Idempotency::Idempotent,
    )
}

pub fn manifest(id: &str, base_url: &str, functions: Vec<PluginFunction>) -> PluginManifest {
    PluginManifest {
        id: id.to_owned(),
        base_url: base_url.to_owned(),
        trusted: false,
        expected_fingerprint: None,
        auth: None,
        timeout_ms: 5_000,
        functions,
    }
}

/// Mark a manifest trusted with its current fingerprint (the person approved it).
pub fn trusted(mut m: PluginManifest) -> PluginManifest {
    m.trusted = true;
    m.expected_fingerprint = Some(m.fingerprint().unwrap());
    m
}
