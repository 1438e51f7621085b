//! Shared fixtures of agent-mcp's tests: the tokio test host, secrets, the
//! conversion the assembly makes (MCP registration → agent-tools
//! registration), a tools actor over a server's tools, and a stand-in for
//! the supervisor (it holds the run's `Authority`, "approves" by minting,
//! dispatches with a progress sink, stops runs).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use agent_capabilities::{ApprovalMode, Authority, Capability, Grant, Uses};
use agent_kernel::BoxFuture;
use agent_kernel::host::Clock;
use agent_kernel::host::secrets::{SecretError, SecretHandle, SecretResolver, SecretValue};
use agent_kernel::ids::{CallId, RunId, SessionId};
use agent_kernel::protocol::{
    ModelToolSchema, PreparedCall, ProgressSink, RunToolConfig, ToolCall, ToolInvocation,
    ToolProgress, ToolResult, ToolsMsg,
};
use agent_kernel::run::RunMode;
use agent_mcp::{McpEnv, McpFunctionRegistration, McpLoad};
use agent_tools::registry::{Exposure, Registry, ToolRegistration};
use agent_tools::{ToolsHandle, ToolsOptions, spawn_tools};

pub use agent_test_support::{clock, executor};

/// Secrets by handle: (bound origin, value).
#[derive(Default)]
pub struct TestSecrets(pub Mutex<BTreeMap<String, (String, String)>>);

impl TestSecrets {
    pub fn with(handle: &str, origin: &str, value: &str) -> Arc<TestSecrets> {
        let s = TestSecrets::default();
        s.0.lock()
            .unwrap()
            .insert(handle.into(), (origin.into(), value.into()));
        Arc::new(s)
    }
}

#[async_trait::async_trait]
impl SecretResolver for TestSecrets {
    fn bound_origin(&self, handle: &SecretHandle) -> Option<String> {
        self.0
            .lock()
            .unwrap()
            .get(&handle.0)
            .map(|(o, _)| o.clone())
    }
    async fn resolve(&self, handle: &SecretHandle) -> Result<SecretValue, SecretError> {
        self.0
            .lock()
            .unwrap()
            .get(&handle.0)
            .map(|(_, v)| SecretValue::new(v.clone()))
            .ok_or_else(|| SecretError::Unknown(handle.0.clone()))
    }
}

pub fn env_with(secrets: Arc<dyn SecretResolver>) -> McpEnv {
    McpEnv {
        executor: executor(),
        clock: clock(),
        secrets,
        gateway: None,
        auth: None,
        elicitation: None,
    }
}

pub fn env() -> McpEnv {
    env_with(Arc::new(TestSecrets::default()))
}

/// The assembly's one-line conversion.
pub fn registration(r: McpFunctionRegistration) -> ToolRegistration {
    ToolRegistration {
        definition: r.definition,
        modes: vec![RunMode::Agent],
        exposure: Exposure::Discoverable,
        trusted_external: r.trusted_external,
        unknown_function: r.unknown_function,
        needs_grant: None,
        addr: r.addr,
    }
}

pub fn registrations(load: &McpLoad) -> Vec<ToolRegistration> {
    load.registrations
        .iter()
        .cloned()
        .map(registration)
        .collect()
}

/// A tools actor over these tools.
pub fn tools_over(load: &McpLoad) -> ToolsHandle {
    let mut registry = Registry::new();
    registry.register_all(registrations(load)).unwrap();
    spawn_tools(executor(), clock(), registry, ToolsOptions::default())
}

/// A callback that hands every new listing to `tools` (as the assembly
/// will) and records it.
pub fn replace_into(
    tools: Arc<Mutex<Option<ToolsHandle>>>,
    seen: Arc<Mutex<Vec<McpLoad>>>,
    id: &str,
) -> Arc<dyn agent_mcp::tools::ToolsChanged> {
    let id = id.to_owned();
    Arc::new(move |load: McpLoad| -> BoxFuture<'static, ()> {
        let tools = tools.lock().unwrap().clone();
        let seen = seen.clone();
        let id = id.clone();
        Box::pin(async move {
            if let Some(tools) = tools {
                // The tools actor may be gone when the test has ended.
                let _ = tools
                    .replace_provider(agent_capabilities::Origin::Mcp(id), registrations(&load))
                    .await;
            }
            seen.lock().unwrap().push(load);
        })
    })
}

/// The supervisor's part around the tools actor.
pub struct Run {
    pub tools: ToolsHandle,
    pub authority: Authority,
    pub run: RunId,
    pub session: SessionId,
    pub config: RunToolConfig,
    pub clock: Arc<dyn Clock>,
    pub progress: Arc<Mutex<Vec<ToolProgress>>>,
}

impl Run {
    pub fn new(tools: ToolsHandle, run: &str, approval: ApprovalMode) -> Run {
        Run {
            tools,
            authority: Authority::new(run, [9u8; 32]),
            run: RunId::new(run).unwrap(),
            session: SessionId::new("session-1").unwrap(),
            config: RunToolConfig {
                approval,
                ..RunToolConfig::default()
            },
            clock: clock(),
            progress: Arc::default(),
        }
    }

    pub async fn schemas(&self) -> Vec<ModelToolSchema> {
        let (run, config) = (self.run.clone(), self.config.clone());
        self.tools
            .addr
            .ask(|reply| ToolsMsg::Schemas { run, config, reply })
            .await
            .unwrap()
    }

    pub async fn prepare(
        &self,
        call_id: &str,
        name: &str,
        args: &Value,
    ) -> Result<PreparedCall, ToolResult> {
        let call = ToolCall {
            call_id: CallId::new(call_id).unwrap(),
            name: name.to_owned(),
            arguments: args.to_string(),
        };
        let (run, session, config) = (self.run.clone(), self.session.clone(), self.config.clone());
        self.tools
            .addr
            .ask(|reply| ToolsMsg::Prepare {
                run,
                session,
                call,
                attempt: 1,
                config,
                reply,
            })
            .await
            .unwrap()
    }

    pub fn mint(&self, p: &PreparedCall) -> Capability {
        let d = &p.draft;
        self.authority.mint(Grant {
            tool: d.tool.clone(),
            fingerprint: d.fingerprint.clone(),
            origin: d.origin.clone(),
            effects: d.effects.clone(),
            scope: d.scope.clone(),
            uses: Uses::Once,
            expires_at_ms: self.clock.wall_ms() + 600_000,
        })
    }

    pub async fn dispatch(&self, p: &PreparedCall) -> ToolResult {
        let progress = self.progress.clone();
        let invocation = ToolInvocation {
            draft: p.draft.clone(),
            capability: self.mint(p),
            verifier: self.authority.verifier(),
            progress: ProgressSink::new(move |r| progress.lock().unwrap().push(r)),
        };
        self.tools
            .addr
            .ask(|reply| ToolsMsg::Dispatch { invocation, reply })
            .await
            .unwrap()
    }

    /// Prepare, approve, dispatch.
    pub async fn call(&self, call_id: &str, name: &str, args: Value) -> ToolResult {
        match self.prepare(call_id, name, &args).await {
            Ok(p) => self.dispatch(&p).await,
            Err(e) => e,
        }
    }

    /// search_tools then load_tools of `names`; returns the search result.
    pub async fn search_and_load(&self, query: &str, names: &[&str]) -> ToolResult {
        let found = self
            .call("s", "search_tools", json!({"query": query}))
            .await;
        let loaded = self.call("l", "load_tools", json!({"names": names})).await;
        assert!(loaded.is_success(), "load_tools: {loaded:?}");
        self.schemas().await;
        found
    }

    pub async fn stop(&self) {
        self.tools
            .addr
            .send(ToolsMsg::CancelRun {
                run: self.run.clone(),
            })
            .await
            .unwrap();
    }
}

/// The JSON inside the pipeline's untrusted-data fence of a success.
pub fn unfenced(r: &ToolResult) -> Value {
    let ToolResult::Success(s) = r else {
        panic!("expected success, got {r:?}")
    };
    let Value::String(text) = &s.content else {
        return s.content.clone();
    };
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.len() >= 3 && lines[0].starts_with("<<<UNTRUSTED_DATA"),
        "{text}"
    );
    serde_json::from_str(&lines[2..lines.len() - 1].join("\n"))
        .unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The content of a success as text (panics on an error).
pub fn success_text(r: &ToolResult) -> String {
    match r {
        ToolResult::Success(s) => s.content.to_string(),
        ToolResult::Error(e) => panic!("expected success, got {}: {}", e.code, e.message),
    }
}

pub fn error_code(r: &ToolResult) -> String {
    match r {
        ToolResult::Error(e) => e.code.clone(),
        ToolResult::Success(s) => panic!("expected an error, got {}", s.content),
    }
}
