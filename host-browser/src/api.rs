//! The embedder API (`AgentRuntime`, wasm-bindgen, with TypeScript types):
//! create a runtime in a page, start runs, subscribe to a session's events,
//! answer approvals, inputs and decisions, stop, resume, and read runs,
//! workspace files and Artifacts back. Every failure is a JS `Error` with a
//! stable `code` (see [`ErrorCode`]).
//!
//! Wiring: IndexedDB storage (memory when it cannot be opened, reported as
//! `durable: false`), Web Locks tab locks, page lifecycle events, the tools
//! actor with `run_javascript` (Worker), `extract_document` (on the page's
//! event loop: a tab has no blocking thread), the workspace and Artifact tools,
//! `fetch_url` through the native gateway and configured HTTP plugins, and
//! the supervisor's `Runtime`. Loading never resumes a run or starts network
//! work: it only recovers runs left `running` into `interrupted`, and so
//! does taking a session over from a tab that left one behind.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use agent_capabilities::ApprovalMode;
use agent_fetch::{FetchActor, GatewayClient, Limits};
use agent_kernel::budget::{Budget, BudgetPreset};
use agent_kernel::host::{
    Clock, Entropy, Executor, Host, LeaseError, LeaseGuard, Lifecycle, Storage, StorageError,
    StorageExt, random_id,
};
use agent_kernel::memory::MemoryStorage;
use agent_kernel::run::{AgentRun, RunStatus};
use agent_kernel::{CallId, OwnerId, RequestId, RunId, SessionId};
use agent_supervisor::{
    Choice, ModelProvider, OpenAiConfig, OpenAiProvider, RunConfig, RunError, RunEvent, Runtime,
    RuntimeOptions, Scenario, ScriptedProvider,
};
use agent_tools::builtin::document::DocumentTool;
use agent_tools::builtin::javascript::JsLimits;
use agent_tools::plugin::{SecretError, SecretHandle, SecretResolver, SecretValue};
use agent_tools::{
    PluginManifest, Registry, ToolRegistration, ToolsHandle, ToolsOptions, spawn_tools,
};
use agent_workspace::{
    Quotas, SpillTarget, WorkspaceDirectory, WorkspaceDocuments, WorkspacePath, WorkspaceSpill,
};
use futures::FutureExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use wasm_bindgen::prelude::*;

use crate::idb::IdbStorage;
use crate::js_tool::spawn_js_tool;
use crate::locks::{LockBackend, Notice, SessionLease, SessionLeases};
use crate::page::PageEvents;
use crate::platform::{self, BrowserClock, BrowserEntropy, BrowserExecutor};
use crate::subscriptions::{SubscriptionId, SubscriptionRegistry};
use crate::worker::ScriptWorker;

#[wasm_bindgen(typescript_custom_section)]
const TS_TYPES: &'static str = r#"
/** Stable error codes: every rejected promise is an Error with one of these in `code`. */
export type AgentErrorCode =
  | "invalid_config" | "invalid_argument" | "unavailable" | "session_busy" | "lease_lost"
  | "not_found" | "wrong_status" | "no_such_request" | "wrong_request_kind" | "invalid_answer"
  | "no_such_decision" | "decision_pending" | "run_busy" | "invalid_transition"
  | "storage_error" | "inconsistent_state" | "runtime_error";

export interface AgentError extends Error { code: AgentErrorCode; }

export type BudgetSpec = "light" | "standard" | "extended" | {
  max_tool_rounds?: number; max_tool_calls?: number; max_tokens?: number; max_duration_ms?: number;
};

export interface PluginManifest {
  id: string; base_url: string; trusted?: boolean; expected_fingerprint?: string;
  auth?: { header: string; secret: string; prefix?: string };
  timeout_ms?: number;
  functions: Array<{ name: string; description: string; method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
    path: string; parameters: object; effects: string[]; idempotency: string; sensitivity?: string; annotations?: object }>;
}

export interface RuntimeConfig {
  /** IndexedDB database name (default "agentrt"). */
  databaseName?: string;
  /** "indexeddb" (default; falls back to memory when it cannot be opened) or "memory". */
  storage?: "indexeddb" | "memory";
  /** Scripted scenario (default) or an OpenAI-compatible endpoint. */
  model?: { provider: "scripted"; scenario: object }
        | { provider: "openai"; baseUrl: string; model: string; apiKey?: string };
  /** The native gateway (`agentrt serve`) for fetch_url; without it fetch_url is not offered. */
  gateway?: { url: string; token: string };
  plugins?: PluginManifest[];
  /** Secret values by handle, bound to one origin; kept in memory only. */
  secrets?: Array<{ handle: string; origin: string; value: string }>;
  budget?: BudgetSpec;
  approvalMode?: "permissive" | "strict";
  /** URL of this package's wasm-bindgen JavaScript file, for the run_javascript Worker. */
  workerGlueUrl?: string;
  /** Session lease time to live in ms (default 30000). */
  leaseTtlMs?: number;
}

export interface RunOptions {
  budget?: BudgetSpec;
  approvalMode?: "permissive" | "strict";
  allowlist?: string[];
  /** A Skill manifest (S5.6): the run may use only the tools it allows (and the allowlist), and its instructions join the system prompt. A malformed manifest, or one holding a secret, is refused with code `invalid_config`. */
  skill?: { name: string; description: string; instructions: string; allowed_tools: string[] };
  model?: { model?: string; system_prompt?: string; temperature?: number; max_output_tokens?: number };
}

export type RunStatus = "running" | "awaiting_input" | "awaiting_approval" | "interrupted" | "completed" | "failed" | "cancelled";

export interface AgentRun {
  id: string; session: string; parent?: string; children: string[]; mode: string;
  status: RunStatus;
  stop_reason?: { reason: "completed" | "user_stopped" | "budget_exhausted" | "offline" | "page_interrupted" | "effect_unknown" | "runtime_error"; [k: string]: unknown };
  usage: { tool_rounds: number; tool_calls: number; input_tokens: number; output_tokens: number; active_ms: number };
  budget: { max_tool_rounds: number; max_tool_calls: number; max_tokens?: number; max_duration_ms?: number };
  created_at_ms: number; updated_at_ms: number; [k: string]: unknown;
}

export interface PendingRequest {
  run: string; id: string; created_at_ms: number; presented: boolean;
  kind: { kind: "approval"; call_id: string; tool: string; effects: string[]; target_summary: string; reason: string; identity: object }
      | { kind: "input"; call_id: string; question: object; question_text?: string }
      | { kind: "decision"; call_id: string; tool: string };
}

export interface RunView {
  run: AgentRun; activities: object[]; journal: object[]; pending: PendingRequest[];
  output?: string; plan?: unknown;
}

export type RuntimeEvent =
  | { type: "run"; run: AgentRun }
  | { type: "activity"; runId: string; activity: object }
  | { type: "text"; runId: string; text: string }
  | { type: "session"; kind: "busy" | "free" | "changed"; session: string; owner: string };
"#;

/// The stable error codes of the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    InvalidConfig,
    InvalidArgument,
    Unavailable,
    SessionBusy,
    LeaseLost,
    NotFound,
    WrongStatus,
    NoSuchRequest,
    WrongRequestKind,
    InvalidAnswer,
    NoSuchDecision,
    DecisionPending,
    RunBusy,
    InvalidTransition,
    StorageError,
    InconsistentState,
    RuntimeError,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidConfig => "invalid_config",
            ErrorCode::InvalidArgument => "invalid_argument",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::SessionBusy => "session_busy",
            ErrorCode::LeaseLost => "lease_lost",
            ErrorCode::NotFound => "not_found",
            ErrorCode::WrongStatus => "wrong_status",
            ErrorCode::NoSuchRequest => "no_such_request",
            ErrorCode::WrongRequestKind => "wrong_request_kind",
            ErrorCode::InvalidAnswer => "invalid_answer",
            ErrorCode::NoSuchDecision => "no_such_decision",
            ErrorCode::DecisionPending => "decision_pending",
            ErrorCode::RunBusy => "run_busy",
            ErrorCode::InvalidTransition => "invalid_transition",
            ErrorCode::StorageError => "storage_error",
            ErrorCode::InconsistentState => "inconsistent_state",
            ErrorCode::RuntimeError => "runtime_error",
        }
    }
}

/// A JS `Error` whose `code` property is `code`.
pub fn js_error(code: ErrorCode, message: impl std::fmt::Display) -> JsValue {
    let error = js_sys::Error::new(&message.to_string());
    let _ = js_sys::Reflect::set(&error, &"code".into(), &code.as_str().into());
    error.into()
}

fn storage_code(e: &StorageError) -> ErrorCode {
    match e {
        StorageError::StaleEpoch { .. } => ErrorCode::LeaseLost,
        StorageError::Unavailable(_) => ErrorCode::Unavailable,
        StorageError::Corrupt { .. } => ErrorCode::InconsistentState,
        _ => ErrorCode::StorageError,
    }
}

fn lease_code(e: &LeaseError) -> ErrorCode {
    match e {
        LeaseError::Held { .. } => ErrorCode::SessionBusy,
        LeaseError::Lost { .. } => ErrorCode::LeaseLost,
        LeaseError::Storage(s) => storage_code(s),
    }
}

/// The stable code of a run error.
pub fn run_error_code(e: &RunError) -> ErrorCode {
    match e {
        RunError::NotFound(_) => ErrorCode::NotFound,
        RunError::WrongStatus { .. } => ErrorCode::WrongStatus,
        RunError::NoSuchRequest { .. } => ErrorCode::NoSuchRequest,
        RunError::WrongRequestKind { .. } => ErrorCode::WrongRequestKind,
        RunError::InvalidAnswer { .. } => ErrorCode::InvalidAnswer,
        RunError::NoSuchDecision { .. } => ErrorCode::NoSuchDecision,
        RunError::DecisionPending { .. } => ErrorCode::DecisionPending,
        RunError::Busy { .. } => ErrorCode::RunBusy,
        RunError::Transition(_) => ErrorCode::InvalidTransition,
        RunError::Config(_) => ErrorCode::InvalidConfig,
        RunError::Storage(s) => storage_code(s),
        RunError::Lease(l) => lease_code(l),
        RunError::Id(_) => ErrorCode::InvalidArgument,
        RunError::Inconsistent { .. } => ErrorCode::InconsistentState,
        RunError::Actor(_) => ErrorCode::RuntimeError,
    }
}

fn run_error(e: RunError) -> JsValue {
    js_error(run_error_code(&e), e)
}

fn to_js<T: Serialize + ?Sized>(value: &T) -> Result<JsValue, JsValue> {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(|e| {
            js_error(
                ErrorCode::RuntimeError,
                format!("could not convert a result: {e}"),
            )
        })
}

fn from_js<T: serde::de::DeserializeOwned>(value: JsValue, what: &str) -> Result<T, JsValue> {
    serde_wasm_bindgen::from_value(value)
        .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("{what}: {e}")))
}

fn session_id(s: &str) -> Result<SessionId, JsValue> {
    SessionId::new(s).map_err(|e| js_error(ErrorCode::InvalidArgument, format!("session id: {e}")))
}

fn run_id(s: &str) -> Result<RunId, JsValue> {
    RunId::new(s).map_err(|e| js_error(ErrorCode::InvalidArgument, format!("run id: {e}")))
}

// ---------------------------------------------------------------- config

#[derive(Debug, Deserialize)]
#[serde(tag = "provider", rename_all = "snake_case", deny_unknown_fields)]
enum ModelConfig {
    Scripted {
        scenario: Value,
    },
    #[serde(rename_all = "camelCase")]
    Openai {
        base_url: String,
        model: String,
        #[serde(default)]
        api_key: Option<String>,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GatewayConfig {
    url: String,
    token: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretConfig {
    handle: String,
    origin: String,
    value: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RuntimeConfig {
    #[serde(default)]
    database_name: Option<String>,
    #[serde(default)]
    storage: Option<String>,
    #[serde(default)]
    model: Option<ModelConfig>,
    #[serde(default)]
    gateway: Option<GatewayConfig>,
    #[serde(default)]
    plugins: Vec<PluginManifest>,
    #[serde(default)]
    secrets: Vec<SecretConfig>,
    #[serde(default)]
    budget: Option<Value>,
    #[serde(default)]
    approval_mode: Option<ApprovalMode>,
    #[serde(default)]
    worker_glue_url: Option<String>,
    #[serde(default)]
    lease_ttl_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RunOptions {
    #[serde(default)]
    budget: Option<Value>,
    #[serde(default)]
    approval_mode: Option<ApprovalMode>,
    #[serde(default)]
    allowlist: Option<std::collections::BTreeSet<String>>,
    #[serde(default)]
    skill: Option<Value>,
    #[serde(default)]
    model: Option<Value>,
}

/// A budget from a preset name or a custom object (S4.3, S4.4).
pub fn budget_from(value: &Value) -> Result<Budget, String> {
    match value {
        Value::String(name) => match name.as_str() {
            "light" => Ok(Budget::preset(BudgetPreset::Light)),
            "standard" => Ok(Budget::preset(BudgetPreset::Standard)),
            "extended" => Ok(Budget::preset(BudgetPreset::Extended)),
            other => Err(format!(
                "unknown budget preset {other:?}; use light, standard, extended or an object"
            )),
        },
        other => Budget::from_json(other).map_err(|e| e.to_string()),
    }
}

/// Secrets given by the embedder: values in memory only, each bound to one origin.
struct PageSecrets {
    secrets: HashMap<String, (String, String)>,
}

#[async_trait::async_trait(?Send)]
impl SecretResolver for PageSecrets {
    fn bound_origin(&self, handle: &SecretHandle) -> Option<String> {
        self.secrets
            .get(&handle.0)
            .map(|(origin, _)| origin.clone())
    }
    async fn resolve(&self, handle: &SecretHandle) -> Result<SecretValue, SecretError> {
        self.secrets
            .get(&handle.0)
            .map(|(_, value)| SecretValue::new(value.clone()))
            .ok_or_else(|| SecretError::Unknown(handle.0.clone()))
    }
}

// ---------------------------------------------------------------- runtime

/// What this tab holds while it executes a session: the stored lease (its
/// fence also opens the session's workspace) and the tab lock. The guard is
/// declared first so that it is released before the lock.
struct Hold {
    _guard: LeaseGuard,
    _tab: SessionLease,
    /// Commands and runs of this tab using the session; released at zero.
    users: usize,
}

struct Inner {
    runtime: Runtime,
    host: Host,
    leases: SessionLeases,
    workspaces: WorkspaceDirectory,
    holds: RefCell<HashMap<SessionId, Hold>>,
    sessions: RefCell<HashMap<RunId, SessionId>>,
    defaults: RunConfig,
    recovered: RefCell<Vec<String>>,
    _tools: ToolsHandle,
    _page: PageEvents,
    closed: Cell<bool>,
    /// The live subscriptions: the runtime owns them, not their JS handles.
    subscriptions: SubscriptionRegistry,
}

/// The agent runtime of one page (tab).
#[wasm_bindgen]
pub struct AgentRuntime {
    inner: Rc<Inner>,
}

/// A handle on a live event subscription. The runtime, not this handle,
/// keeps the subscription: it delivers every event of its session until
/// `close()` is called or the runtime closes, whether or not the page keeps
/// the handle (like `addEventListener`). Dropping the handle, its garbage
/// collection or `free()` do not end it; keep the handle to call `close()`.
#[wasm_bindgen]
pub struct Subscription {
    id: SubscriptionId,
    runtime: std::rc::Weak<Inner>,
}

#[wasm_bindgen]
impl Subscription {
    /// Stop delivering events: the callback is not called again once this
    /// returns. Closing twice does nothing.
    pub fn close(&self) {
        if let Some(inner) = self.runtime.upgrade() {
            inner.subscriptions.close(self.id);
        }
    }
}

fn default_glue_url() -> Option<String> {
    // The demo and most embedders serve the package at ./pkg/.
    let href = web_sys::window()?.location().href().ok()?;
    web_sys::Url::new_with_base("pkg/agent_host_browser.js", &href)
        .ok()
        .map(|u| u.href())
}

async fn open_storage(
    config: &RuntimeConfig,
) -> Result<(Arc<dyn Storage>, Option<Arc<IdbStorage>>, bool), JsValue> {
    match config.storage.as_deref() {
        Some("memory") => Ok((Arc::new(MemoryStorage::new()), None, false)),
        None | Some("indexeddb") => {
            let name = config.database_name.as_deref().unwrap_or("agentrt");
            match IdbStorage::open(name).await {
                Ok(idb) => {
                    let idb = Arc::new(idb);
                    Ok((idb.clone() as Arc<dyn Storage>, Some(idb), true))
                }
                Err(e) => {
                    web_sys::console::warn_1(&JsValue::from_str(&format!(
                        "IndexedDB is unavailable ({e}); runs are kept in memory only and are lost on reload"
                    )));
                    Ok((Arc::new(MemoryStorage::new()), None, false))
                }
            }
        }
        Some(other) => Err(js_error(
            ErrorCode::InvalidConfig,
            format!("storage must be \"indexeddb\" or \"memory\", not {other:?}"),
        )),
    }
}

fn provider(
    config: &RuntimeConfig,
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn ModelProvider>, JsValue> {
    match &config.model {
        None => Err(js_error(
            ErrorCode::InvalidConfig,
            "model is required: { provider: \"scripted\", scenario } or { provider: \"openai\", baseUrl, model }",
        )),
        Some(ModelConfig::Scripted { scenario }) => {
            let scenario = Scenario::from_json(&scenario.to_string())
                .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("model.scenario: {e}")))?;
            Ok(Arc::new(ScriptedProvider::new(scenario, clock)))
        }
        Some(ModelConfig::Openai {
            base_url, api_key, ..
        }) => {
            let mut c = OpenAiConfig::new(base_url.clone());
            c.api_key = api_key.clone();
            OpenAiProvider::new(c, clock)
                .map(|p| Arc::new(p) as Arc<dyn ModelProvider>)
                .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("model: {e}")))
        }
    }
}

fn run_config(config: &RuntimeConfig) -> Result<RunConfig, JsValue> {
    let mut defaults = RunConfig::default();
    if let Some(b) = &config.budget {
        defaults.budget = budget_from(b)
            .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("budget: {e}")))?;
    }
    if let Some(mode) = config.approval_mode {
        defaults.approval = mode;
    }
    if let Some(ModelConfig::Openai { model, .. }) = &config.model {
        defaults.model.model = model.clone();
    }
    defaults
        .validate()
        .map_err(|e| js_error(ErrorCode::InvalidConfig, e))?;
    Ok(defaults)
}

/// Spawn every tool actor and the tools actor (nothing here awaits: a
/// separate function keeps `build`'s async state small).
fn register_tools(
    config: &RuntimeConfig,
    host: &Host,
    workspaces: &WorkspaceDirectory,
) -> Result<ToolsHandle, JsValue> {
    let executor = host.executor.clone();
    let clock = host.clock.clone();
    let storage = host.storage.clone();
    // Tools: run_javascript in a Worker, workspace and Artifacts, fetch_url
    // through the gateway, HTTP plugins.
    let mut tools: Vec<ToolRegistration> = Vec::new();
    if let Some(glue) = config.worker_glue_url.clone().or_else(default_glue_url) {
        let worker = Rc::new(ScriptWorker::new(&glue));
        let js = spawn_js_tool(executor.clone(), clock.clone(), worker, JsLimits::DEFAULT)
            .map_err(|e| js_error(ErrorCode::RuntimeError, e))?;
        tools.push(ToolRegistration::builtin(
            agent_tools::builtin::javascript::definition(),
            js,
        ));
    }
    let documents = DocumentTool::new(
        executor.clone(),
        clock.clone(),
        Arc::new(WorkspaceDocuments::new(workspaces.clone())),
    )
    .spawn(None)
    .map_err(|e| js_error(ErrorCode::RuntimeError, e))?;
    tools.push(ToolRegistration::builtin(
        agent_tools::builtin::document::definition(),
        documents,
    ));
    for (definition, addr) in agent_workspace::tool_registrations(host, workspaces.clone())
        .map_err(|e| js_error(ErrorCode::RuntimeError, e.to_string()))?
    {
        tools.push(ToolRegistration::builtin(definition, addr));
    }
    if let Some(gateway) = &config.gateway {
        let client = GatewayClient::new(
            &gateway.url,
            gateway.token.clone(),
            &Limits::spec(),
            clock.clone(),
        )
        .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("gateway: {e}")))?;
        let fetch = FetchActor::new(Arc::new(client), storage.clone(), clock.clone())
            .spawn(executor.clone(), None);
        tools.push(ToolRegistration::builtin(
            agent_fetch::fetch_url_definition(),
            fetch,
        ));
    }
    let secrets = Arc::new(PageSecrets {
        secrets: config
            .secrets
            .iter()
            .map(|s| (s.handle.clone(), (s.origin.clone(), s.value.clone())))
            .collect(),
    });
    for manifest in &config.plugins {
        let regs =
            agent_tools::spawn_plugin(executor.clone(), clock.clone(), manifest, secrets.clone())
                .map_err(|e| js_error(ErrorCode::InvalidConfig, e))?;
        tools.extend(regs);
    }
    let mut registry = Registry::new();
    registry
        .register_all(tools)
        .map_err(|e| js_error(ErrorCode::InvalidConfig, e))?;
    let spill = WorkspaceSpill::new(workspaces.clone(), SpillTarget::Workspace);
    let tools = spawn_tools(
        executor.clone(),
        clock.clone(),
        registry,
        ToolsOptions {
            spill: Some(Arc::new(spill)),
            // A run's loaded tools survive a page reload (S5.2).
            storage: Some(storage),
            ..ToolsOptions::default()
        },
    );
    Ok(tools)
}

async fn build(config: RuntimeConfig) -> Result<AgentRuntime, JsValue> {
    let clock: Arc<dyn Clock> = Arc::new(BrowserClock);
    let executor: Arc<dyn Executor> = Arc::new(BrowserExecutor);
    let entropy: Arc<dyn Entropy> =
        Arc::new(BrowserEntropy::new().map_err(|e| js_error(ErrorCode::Unavailable, e))?);
    let defaults = run_config(&config)?;
    let provider = provider(&config, clock.clone())?;
    let (storage, idb, durable) = open_storage(&config).await?;
    let lifecycle = Lifecycle::new();
    let page = PageEvents::install(&lifecycle);
    let host = Host {
        storage: storage.clone(),
        clock: clock.clone(),
        executor: executor.clone(),
        entropy: entropy.clone(),
        lifecycle,
        durable,
    };
    let owner = OwnerId::new(random_id(&*entropy, "tab-"))
        .map_err(|e| js_error(ErrorCode::RuntimeError, e))?;
    let ttl = Duration::from_millis(config.lease_ttl_ms.unwrap_or(30_000).clamp(3_000, 600_000));

    let workspaces = WorkspaceDirectory::new();
    let tools = register_tools(&config, &host, &workspaces)?;
    let runtime = Runtime::new(
        host.clone(),
        owner.clone(),
        tools.addr.clone(),
        provider,
        RuntimeOptions {
            lease_ttl: ttl,
            ..RuntimeOptions::default()
        },
    );
    let leases = SessionLeases::new(
        storage,
        idb,
        clock,
        executor,
        owner,
        LockBackend::detect(),
        ttl,
    );
    let inner = Rc::new(Inner {
        runtime,
        host,
        leases,
        workspaces,
        holds: RefCell::new(HashMap::new()),
        sessions: RefCell::new(HashMap::new()),
        defaults,
        recovered: RefCell::new(Vec::new()),
        _tools: tools,
        _page: page,
        closed: Cell::new(false),
        subscriptions: SubscriptionRegistry::new(),
    });
    recover(&inner).await?;
    keep_renewed(Rc::downgrade(&inner), ttl);
    Ok(AgentRuntime { inner })
}

/// S2.5: runs left `running` by a closed or reloaded page become
/// `interrupted` / `page_interrupted`; nothing resumes, no network work starts.
async fn recover(inner: &Rc<Inner>) -> Result<(), JsValue> {
    let runs = inner.runtime.runs().await.map_err(run_error)?;
    let mut held = Vec::new();
    for run in runs.iter().filter(|r| r.status == RunStatus::Running) {
        if held
            .iter()
            .any(|l: &SessionLease| l.session() == &run.session)
        {
            continue;
        }
        // Only a session no live tab holds: its Web Lock is free.
        if let Ok(lease) = inner.leases.hold(&run.session).await {
            held.push(lease);
        }
    }
    if held.is_empty() {
        return Ok(());
    }
    let recovered = inner.runtime.recover().await.map_err(run_error)?;
    inner
        .recovered
        .borrow_mut()
        .extend(recovered.iter().map(|r| r.to_string()));
    for lease in &held {
        inner.leases.notify_changed(lease.session());
    }
    drop(held);
    Ok(())
}

fn keep_renewed(inner: std::rc::Weak<Inner>, ttl: Duration) {
    wasm_bindgen_futures::spawn_local(async move {
        loop {
            platform::sleep(ttl / 3).await;
            let Some(inner) = inner.upgrade() else { break };
            if inner.closed.get() {
                break;
            }
            // A lost lease is dropped by the manager; its writes are fenced out.
            let _lost = inner.runtime.leases().renew_all().await;
        }
    });
}

impl Inner {
    async fn session_of(&self, run: &RunId) -> Result<SessionId, RunError> {
        if let Some(s) = self.sessions.borrow().get(run).cloned() {
            return Ok(s);
        }
        let record = self.runtime.run(run).await?;
        self.sessions
            .borrow_mut()
            .insert(run.clone(), record.session.clone());
        Ok(record.session)
    }

    /// This tab must hold the session's tab lock to execute it (S3.1).
    async fn ensure_hold(&self, session: &SessionId) -> Result<(), JsValue> {
        if self.closed.get() {
            return Err(js_error(ErrorCode::Unavailable, "this runtime was closed"));
        }
        if let Some(hold) = self.holds.borrow_mut().get_mut(session) {
            hold.users += 1;
            return Ok(());
        }
        let lease = self.leases.hold(session).await.map_err(|e| {
            let code = lease_code(&e);
            match e {
                LeaseError::Held { .. } => js_error(
                    code,
                    format!("session {session} is being executed in another tab; wait until it finishes there or close that tab"),
                ),
                other => js_error(code, other),
            }
        })?;
        let guard = self
            .runtime
            .leases()
            .acquire(session)
            .await
            .map_err(|e| js_error(lease_code(&e), e))?;
        // The workspace actors write with this tenure's fence.
        self.workspaces
            .open(&self.host, guard.fence(), Quotas::default());
        self.holds.borrow_mut().insert(
            session.clone(),
            Hold {
                _guard: guard,
                _tab: lease,
                users: 1,
            },
        );
        // This tab now holds the session's Web Lock, so no other tab executes
        // it: a run another tab left `running` (closed before its pagehide
        // writes committed) is recovered now, not at the next page load.
        match self.runtime.recover_session(session).await {
            Ok(recovered) if !recovered.is_empty() => {
                self.recovered
                    .borrow_mut()
                    .extend(recovered.iter().map(|r| r.to_string()));
                self.leases.notify_changed(session);
            }
            Ok(_) => {}
            Err(e) => {
                self.done(session);
                return Err(run_error(e));
            }
        }
        Ok(())
    }

    /// One user of the session is done; the last one releases it.
    fn done(&self, session: &SessionId) {
        let last = match self.holds.borrow_mut().get_mut(session) {
            Some(hold) => {
                hold.users = hold.users.saturating_sub(1);
                hold.users == 0
            }
            None => false,
        };
        if last {
            self.release(session);
        }
    }

    /// Give up the session: close its workspace, release the lease and the tab lock.
    fn release(&self, session: &SessionId) {
        if self.holds.borrow_mut().remove(session).is_some() {
            self.workspaces.close(session);
            self.leases.notify_changed(session);
        }
    }

    /// Count this use of the session done once `run` settles here (it is
    /// no longer `running` in this tab): awaiting, interrupted or final.
    fn release_when_settled(self: &Rc<Self>, run: RunId, session: SessionId) {
        let inner = Rc::downgrade(self);
        wasm_bindgen_futures::spawn_local(async move {
            let Some(strong) = inner.upgrade() else {
                return;
            };
            let _ = strong.runtime.wait_settled(&run).await;
            strong.done(&session);
        });
    }

    async fn command(
        self: &Rc<Self>,
        run: &RunId,
        act: impl AsyncFnOnce(&Runtime) -> Result<(), RunError>,
    ) -> Result<(), JsValue> {
        let session = self.session_of(run).await.map_err(run_error)?;
        self.ensure_hold(&session).await?;
        let outcome = act(&self.runtime).await;
        self.release_when_settled(run.clone(), session);
        outcome.map_err(run_error)
    }
}

fn promise(
    fut: impl std::future::Future<Output = Result<JsValue, JsValue>> + 'static,
) -> js_sys::Promise {
    wasm_bindgen_futures::future_to_promise(fut)
}

#[derive(Serialize)]
struct RunView {
    run: AgentRun,
    activities: Vec<agent_kernel::run::Activity>,
    journal: Vec<agent_kernel::journal::JournalRecord>,
    pending: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<Value>,
}

/// A pending request as JSON, with an `ask_user` question's text and answer
/// schema resolved (its `choices` are in the request itself).
async fn pending_view(
    runtime: &Runtime,
    p: &agent_kernel::run::PendingRequest,
) -> Result<Value, RunError> {
    let mut value = serde_json::to_value(p).map_err(|e| RunError::Inconsistent {
        run: p.run.clone(),
        detail: e.to_string(),
    })?;
    if let agent_kernel::run::PendingKind::Input {
        question, schema, ..
    } = &p.kind
        && let Some(kind) = value.get_mut("kind").and_then(Value::as_object_mut)
    {
        if let Ok(bytes) = runtime.blob(&p.run, question).await {
            let text = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned());
            kind.insert("question_text".into(), Value::String(text));
        }
        if let Some(schema) = schema
            && let Ok(bytes) = runtime.blob(&p.run, schema).await
            && let Ok(schema) = serde_json::from_slice::<Value>(&bytes)
        {
            kind.insert("answer_schema".into(), schema);
        }
    }
    Ok(value)
}

#[wasm_bindgen]
impl AgentRuntime {
    /// Create the runtime for this page. Resolves once storage is open and
    /// runs left `running` by a previous page are marked interrupted.
    #[wasm_bindgen(unchecked_return_type = "Promise<AgentRuntime>")]
    pub fn create(
        #[wasm_bindgen(unchecked_param_type = "RuntimeConfig")] config: JsValue,
    ) -> js_sys::Promise {
        promise(async move { AgentRuntime::open(config).await.map(JsValue::from) })
    }

    /// False when IndexedDB could not be opened and runs live in memory only.
    #[wasm_bindgen(getter)]
    pub fn durable(&self) -> bool {
        self.inner.host.durable
    }

    /// This tab's owner id (the lease holder's name).
    #[wasm_bindgen(getter)]
    pub fn owner(&self) -> String {
        self.inner.leases.owner().to_string()
    }

    /// "web_locks" or "local_storage".
    #[wasm_bindgen(getter, js_name = lockBackend)]
    pub fn lock_backend(&self) -> String {
        match self.inner.leases.backend() {
            LockBackend::WebLocks => "web_locks".into(),
            LockBackend::LocalStorage => "local_storage".into(),
        }
    }

    /// Runs this page load turned from `running` into `interrupted`.
    #[wasm_bindgen(js_name = recoveredRuns)]
    pub fn recovered_runs(&self) -> Vec<String> {
        self.inner.recovered.borrow().clone()
    }

    /// Start a run in `session`; resolves with its id once it is stored.
    /// Rejects with `session_busy` while another tab executes the session.
    #[wasm_bindgen(js_name = startRun, unchecked_return_type = "Promise<string>")]
    pub fn start_run(
        &self,
        session: String,
        prompt: String,
        #[wasm_bindgen(unchecked_param_type = "RunOptions | undefined")] options: JsValue,
    ) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let session = session_id(&session)?;
            let options: RunOptions = if options.is_undefined() || options.is_null() {
                RunOptions::default()
            } else {
                from_js(options, "run options")?
            };
            let mut config = inner.defaults.clone();
            if let Some(b) = &options.budget {
                config.budget = budget_from(b)
                    .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("budget: {e}")))?;
            }
            if let Some(mode) = options.approval_mode {
                config.approval = mode;
            }
            if options.allowlist.is_some() {
                config.allowlist = options.allowlist;
            }
            if let Some(manifest) = &options.skill {
                let skill = agent_tools::builtin::skill::Skill::from_json(manifest)
                    .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("skill: {e}")))?;
                config.skill = Some(skill.applied());
            }
            if let Some(model) = options.model {
                let mut merged = serde_json::to_value(&config.model)
                    .map_err(|e| js_error(ErrorCode::RuntimeError, e))?;
                if let (Some(m), Some(o)) = (merged.as_object_mut(), model.as_object()) {
                    for (k, v) in o {
                        m.insert(k.clone(), v.clone());
                    }
                }
                config.model = serde_json::from_value(merged)
                    .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("model: {e}")))?;
            }
            config
                .validate()
                .map_err(|e| js_error(ErrorCode::InvalidConfig, e))?;
            inner.ensure_hold(&session).await?;
            let started = inner.runtime.start(&session, &prompt, config).await;
            match started {
                Ok(run) => {
                    inner
                        .sessions
                        .borrow_mut()
                        .insert(run.clone(), session.clone());
                    inner.release_when_settled(run.clone(), session.clone());
                    inner.leases.notify_changed(&session);
                    Ok(JsValue::from_str(run.as_str()))
                }
                Err(e) => {
                    inner.done(&session);
                    Err(run_error(e))
                }
            }
        })
    }

    /// Call `callback` with every event of `session` from now on: run
    /// snapshots, activities, streamed text, and other tabs' busy/free notices.
    /// The subscription lives until `close()` is called on the returned
    /// handle or the runtime closes, whether or not the page keeps the handle
    /// (like `addEventListener`). Rejected with `unavailable` once the runtime
    /// is closed.
    pub fn subscribe(
        &self,
        session: String,
        #[wasm_bindgen(unchecked_param_type = "(event: RuntimeEvent) => void")]
        callback: js_sys::Function,
    ) -> Result<Subscription, JsValue> {
        let session = session_id(&session)?;
        // The registry refuses once the runtime's close() closed it.
        let (id, stop) = self
            .inner
            .subscriptions
            .open()
            .map_err(|e| js_error(ErrorCode::Unavailable, e))?;
        let runtime = Rc::downgrade(&self.inner);
        let events = self.inner.runtime.subscribe();
        let notices = self.inner.leases.notices();
        let forwarding = runtime.clone();
        wasm_bindgen_futures::spawn_local(async move {
            forward_events(
                forwarding.clone(),
                id,
                session,
                callback,
                stop,
                events,
                notices,
            )
            .await;
            // Ended by close, by the runtime's close, or with the runtime:
            // forget the subscription.
            if let Some(inner) = forwarding.upgrade() {
                inner.subscriptions.ended(id);
            }
        });
        Ok(Subscription { id, runtime })
    }

    /// Subscriptions opened on this runtime and not yet ended by `close()`
    /// (or the runtime's `close()`); for embedders checking they close what
    /// they open.
    #[wasm_bindgen(getter, js_name = liveSubscriptions)]
    pub fn live_subscriptions(&self) -> usize {
        self.inner.subscriptions.live()
    }

    /// Approve a pending approval request (S6).
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn approve(&self, run: String, request: String) -> js_sys::Promise {
        self.answer(run, move |rt, run| {
            let request = request.clone();
            Box::pin(async move {
                let request = RequestId::new(&request)?;
                rt.approve(&run, &request).await
            })
        })
    }

    /// Deny a pending approval request.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn deny(&self, run: String, request: String) -> js_sys::Promise {
        self.answer(run, move |rt, run| {
            let request = request.clone();
            Box::pin(async move {
                let request = RequestId::new(&request)?;
                rt.deny(&run, &request).await
            })
        })
    }

    /// Answer an `ask_user` request with `text`: one of its choices, or
    /// text that satisfies its answer schema (read as JSON when it parses);
    /// anything else is `invalid_answer` and the run keeps waiting.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn respond(&self, run: String, request: String, text: String) -> js_sys::Promise {
        self.answer(run, move |rt, run| {
            let request = request.clone();
            let text = text.clone();
            Box::pin(async move {
                let request = RequestId::new(&request)?;
                rt.respond(&run, &request, &text).await
            })
        })
    }

    /// Decide about a call whose effect is unknown:
    /// "retry_anyway", "mark_done" or "abandon".
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn decide(
        &self,
        run: String,
        call: String,
        #[wasm_bindgen(unchecked_param_type = "\"retry_anyway\" | \"mark_done\" | \"abandon\"")]
        choice: String,
    ) -> js_sys::Promise {
        let choice = match choice.as_str() {
            "retry_anyway" => Ok(Choice::RetryAnyway),
            "mark_done" => Ok(Choice::MarkDone),
            "abandon" => Ok(Choice::Abandon),
            other => Err(other.to_owned()),
        };
        match choice {
            Err(other) => js_sys::Promise::reject(&js_error(
                ErrorCode::InvalidArgument,
                format!("choice must be retry_anyway, mark_done or abandon, not {other:?}"),
            )),
            Ok(choice) => self.answer(run, move |rt, run| {
                let call = call.clone();
                Box::pin(async move {
                    let call = CallId::new(&call)?;
                    rt.decide(&run, &call, choice).await
                })
            }),
        }
    }

    /// Stop a run (`cancelled` / `user_stopped`).
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn stop(&self, run: String) -> js_sys::Promise {
        self.answer(run, |rt, run| Box::pin(async move { rt.stop(&run).await }))
    }

    /// Continue an interrupted run: the only way one continues (S2.5).
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn resume(&self, run: String) -> js_sys::Promise {
        self.answer(run, |rt, run| {
            Box::pin(async move { rt.resume(&run).await })
        })
    }

    /// Every stored run, or those of `session`, oldest first.
    #[wasm_bindgen(js_name = listRuns, unchecked_return_type = "Promise<AgentRun[]>")]
    pub fn list_runs(&self, session: Option<String>) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let mut runs = inner.runtime.runs().await.map_err(run_error)?;
            if let Some(s) = session {
                runs.retain(|r| r.session.as_str() == s);
            }
            runs.sort_by_key(|r| (r.created_at_ms, r.id.to_string()));
            to_js(&runs)
        })
    }

    /// One run with its activities, journal, pending requests, output and plan.
    #[wasm_bindgen(js_name = readRun, unchecked_return_type = "Promise<RunView>")]
    pub fn read_run(&self, run: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let id = run_id(&run)?;
            let rt = &inner.runtime;
            let record = rt.run(&id).await.map_err(run_error)?;
            let mut pending = Vec::new();
            for p in rt.pending(&id).await.map_err(run_error)? {
                pending.push(pending_view(rt, &p).await.map_err(run_error)?);
            }
            let view = RunView {
                activities: rt.activities(&id).await.map_err(run_error)?,
                journal: rt.journal(&id).await.map_err(run_error)?,
                pending,
                output: rt.output(&id).await.map_err(run_error)?,
                plan: rt.plan(&id).await.map_err(run_error)?,
                run: record,
            };
            to_js(&view)
        })
    }

    /// Pending requests of `run` not shown before, now marked as shown (S6.4).
    #[wasm_bindgen(js_name = presentPending, unchecked_return_type = "Promise<PendingRequest[]>")]
    pub fn present_pending(&self, run: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let id = run_id(&run)?;
            let session = inner.session_of(&id).await.map_err(run_error)?;
            inner.ensure_hold(&session).await?;
            let fresh = inner.runtime.present_pending(&id).await;
            inner.release_when_settled(id.clone(), session);
            let fresh = fresh.map_err(run_error)?;
            let mut out = Vec::new();
            for p in &fresh {
                out.push(pending_view(&inner.runtime, p).await.map_err(run_error)?);
            }
            to_js(&out)
        })
    }

    /// The workspace files of `session` (manifest entries, S7.2).
    #[wasm_bindgen(js_name = listWorkspace, unchecked_return_type = "Promise<object[]>")]
    pub fn list_workspace(&self, session: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let session = session_id(&session)?;
            let entries: Vec<agent_workspace::manifest::FileEntry> = inner
                .host
                .storage
                .scan_records(&format!("{session}/"))
                .await
                .map_err(|e| js_error(storage_code(&e), e))?;
            to_js(&entries)
        })
    }

    /// One workspace file: `{ entry, text?, bytes }` (`text` when UTF-8).
    #[wasm_bindgen(js_name = readWorkspaceFile, unchecked_return_type = "Promise<{ entry: object; text?: string; bytes: Uint8Array }>")]
    pub fn read_workspace_file(&self, session: String, path: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let session = session_id(&session)?;
            let path =
                WorkspacePath::parse(&path).map_err(|e| js_error(ErrorCode::InvalidArgument, e))?;
            let key = agent_workspace::manifest::FileEntry::key_for(&session, &path);
            let storage = &inner.host.storage;
            let entry: agent_workspace::manifest::FileEntry = storage
                .get_record(&key)
                .await
                .map_err(|e| js_error(storage_code(&e), e))?
                .ok_or_else(|| {
                    js_error(
                        ErrorCode::NotFound,
                        format!("no file {path} in session {session}"),
                    )
                })?;
            let bytes = storage
                .get_blob(&entry.hash)
                .await
                .map_err(|e| js_error(storage_code(&e), e))?
                .ok_or_else(|| {
                    js_error(
                        ErrorCode::InconsistentState,
                        format!("the content of {path} is missing"),
                    )
                })?;
            content_view(&entry, bytes)
        })
    }

    /// The Artifacts of `session`.
    #[wasm_bindgen(js_name = listArtifacts, unchecked_return_type = "Promise<object[]>")]
    pub fn list_artifacts(&self, session: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let session = session_id(&session)?;
            let artifacts: Vec<agent_workspace::artifact::Artifact> = inner
                .host
                .storage
                .scan_records(&format!("{session}/"))
                .await
                .map_err(|e| js_error(storage_code(&e), e))?;
            to_js(&artifacts)
        })
    }

    /// One Artifact: `{ entry, text?, bytes }`.
    #[wasm_bindgen(js_name = readArtifact, unchecked_return_type = "Promise<{ entry: object; text?: string; bytes: Uint8Array }>")]
    pub fn read_artifact(&self, session: String, id: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let session = session_id(&session)?;
            if !agent_workspace::artifact::is_artifact_id(&id) {
                return Err(js_error(
                    ErrorCode::InvalidArgument,
                    "an Artifact id is 64 lowercase hex digits",
                ));
            }
            let storage = &inner.host.storage;
            let entry: agent_workspace::artifact::Artifact = storage
                .get_record(&agent_workspace::artifact::Artifact::key_for(&session, &id))
                .await
                .map_err(|e| js_error(storage_code(&e), e))?
                .ok_or_else(|| {
                    js_error(
                        ErrorCode::NotFound,
                        format!("no Artifact {id} in session {session}"),
                    )
                })?;
            let bytes = storage
                .get_blob(&entry.id)
                .await
                .map_err(|e| js_error(storage_code(&e), e))?
                .ok_or_else(|| {
                    js_error(
                        ErrorCode::InconsistentState,
                        format!("the content of Artifact {id} is missing"),
                    )
                })?;
            content_view(&entry, bytes)
        })
    }

    /// True while this tab holds `session`'s lock (it executes the session).
    #[wasm_bindgen(js_name = holdsSession)]
    pub fn holds_session(&self, session: String) -> bool {
        SessionId::new(&session)
            .map(|s| self.inner.holds.borrow().contains_key(&s))
            .unwrap_or(false)
    }

    /// Stop using this runtime: end every subscription, release session
    /// locks; later calls fail with `unavailable`.
    pub fn close(&self) {
        self.inner.closed.set(true);
        self.inner.subscriptions.close_all();
        let sessions: Vec<SessionId> = self.inner.holds.borrow().keys().cloned().collect();
        for session in sessions {
            self.inner.release(&session);
        }
    }
}

/// What the subscription loop woke up for.
enum Next {
    Event(Option<RunEvent>),
    Notice(Option<Notice>),
}

/// The task of subscription `id`: forward `session`'s run events and other
/// tabs' notices to `callback` until `stop` fires (the subscription's or the
/// runtime's `close()`, or the runtime is dropped) or the runtime is gone.
async fn forward_events(
    runtime: std::rc::Weak<Inner>,
    id: SubscriptionId,
    session: SessionId,
    callback: js_sys::Function,
    stop: crate::subscriptions::StopSignal,
    events: async_channel::Receiver<RunEvent>,
    notices: crate::locks::NoticeStream,
) {
    let mut stop = stop.fuse();
    loop {
        let next = futures::select! {
            _ = stop => break,
            e = events.recv().fuse() => Next::Event(e.ok()),
            n = notices.next().fuse() => Next::Notice(n),
        };
        let Some(inner) = runtime.upgrade() else {
            break;
        };
        let payloads: Vec<Value> = match next {
            Next::Event(None) | Next::Notice(None) => break,
            Next::Event(Some(event)) => {
                let run = event.run().clone();
                match inner.session_of(&run).await {
                    Ok(s) if s == session => {}
                    _ => continue,
                }
                match event {
                    RunEvent::TextDelta { run, text } => {
                        vec![json!({"type": "text", "runId": run.as_str(), "text": text})]
                    }
                    RunEvent::Activity(activity) => {
                        let mut out = vec![json!({
                            "type": "activity",
                            "runId": run.as_str(),
                            "activity": activity,
                        })];
                        if let Ok(record) = inner.runtime.run(&run).await {
                            out.push(json!({"type": "run", "run": record}));
                        }
                        out
                    }
                }
            }
            Next::Notice(Some(notice)) => {
                if notice.session() != session.as_str() {
                    continue;
                }
                let (kind, owner) = match &notice {
                    Notice::Busy { owner, .. } => ("busy", owner),
                    Notice::Free { owner, .. } => ("free", owner),
                    Notice::Changed { owner, .. } => ("changed", owner),
                };
                vec![
                    json!({"type": "session", "kind": kind, "session": notice.session(), "owner": owner}),
                ]
            }
        };
        for payload in payloads {
            if !inner.subscriptions.is_open(id) {
                // Closed while this event was prepared: deliver nothing more.
                return;
            }
            if let Ok(value) = to_js(&payload) {
                // A throwing callback is the embedder's problem; keep delivering.
                let _ = callback.call1(&JsValue::UNDEFINED, &value);
            }
        }
    }
}

fn content_view<T: Serialize>(entry: &T, bytes: Vec<u8>) -> Result<JsValue, JsValue> {
    let out = js_sys::Object::new();
    let _ = js_sys::Reflect::set(&out, &"entry".into(), &to_js(entry)?);
    if let Ok(text) = std::str::from_utf8(&bytes) {
        let _ = js_sys::Reflect::set(&out, &"text".into(), &JsValue::from_str(text));
    }
    let _ = js_sys::Reflect::set(
        &out,
        &"bytes".into(),
        &js_sys::Uint8Array::from(bytes.as_slice()).into(),
    );
    Ok(out.into())
}

impl AgentRuntime {
    /// `AgentRuntime.create` for Rust callers (and tests): the same
    /// configuration object, the runtime itself instead of a promise.
    pub async fn open(config: JsValue) -> Result<AgentRuntime, JsValue> {
        let config: RuntimeConfig = if config.is_undefined() || config.is_null() {
            RuntimeConfig::default()
        } else {
            from_js(config, "runtime config")?
        };
        build(config).await
    }

    fn answer(
        &self,
        run: String,
        act: impl for<'a> FnOnce(
            &'a Runtime,
            RunId,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<(), RunError>> + 'a>,
        > + 'static,
    ) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let id = run_id(&run)?;
            let id2 = id.clone();
            inner
                .command(&id, async move |rt| act(rt, id2).await)
                .await
                .map(|()| JsValue::UNDEFINED)
        })
    }
}
