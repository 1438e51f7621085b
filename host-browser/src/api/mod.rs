//! The embedder API (`AgentRuntime`, wasm-bindgen, with TypeScript types):
//! create a runtime in a page, start runs, subscribe to a session's events,
//! answer approvals, inputs and decisions, stop, resume, and read runs,
//! workspace files and Artifacts back. Every failure is a JS `Error` with a
//! stable `code` (see [`ErrorCode`]).
//!
//! Wiring: IndexedDB storage (memory when it cannot be opened, reported as
//! `durable: false`), Web Locks tab locks, page lifecycle events, and the
//! host-specific parts handed to `agent-assembly` (which wires the tools,
//! workspaces and the supervisor's `Runtime` as in every host):
//! `run_javascript` in a Worker, `fetch_url` through the native gateway,
//! the page's secrets, the configured HTTP plugins and which are always on.
//! `extract_document` runs on the page's event loop (a tab has no blocking
//! thread).
//!
//! Parts: [`errors`] (stable codes), `config` (the embedder's configuration),
//! `calls` (one tool call with its arguments and result, for chat UIs),
//! `hold` (session holding), `views` (file and Artifact views); this module
//! is the wasm-bindgen surface. Loading never resumes a run or starts network
//! work: it only recovers runs left `running` into `interrupted`, and so
//! does taking a session over from a tab that left one behind.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use agent_assembly::{Assembly, Parts};
use agent_fetch::{FetchBackend, GatewayClient, Limits};
use agent_kernel::host::{Clock, Entropy, Executor, Host, Lifecycle, random_id};
use agent_kernel::run::RunStatus;
use agent_kernel::{CallId, OwnerId, RequestId, RunId, SessionId};
use agent_supervisor::{Choice, RunConfig, RunError, RunEvent, RuntimeOptions};
use agent_tools::builtin::document::PdfReader;
use agent_tools::builtin::javascript::JsLimits;
use futures::FutureExt;
use serde_json::{Value, json};
use wasm_bindgen::prelude::*;

use crate::html_extractor::WorkerHtmlExtractor;
use crate::js_tool::spawn_js_tool;
use crate::locks::{LockBackend, Notice, SessionLease, SessionLeases};
use crate::page::PageEvents;
use crate::page_tool::{PageToolSpec, PageTools};
use crate::pdf_reader::WorkerPdfReader;
use crate::platform::{self, BrowserClock, BrowserEntropy, BrowserExecutor};
use crate::subscriptions::{SubscriptionId, SubscriptionRegistry};
use crate::worker::{ModuleWorker, WorkerModule, WorkerSource};
use config::{
    PageSecrets, RunOptions, RuntimeConfig, check_plugins, default_glue_url, mcp_servers,
    named_models, open_storage, provider, run_config, run_config_for,
};
use errors::{assembly_error, from_js, run_error, run_id, session_id, to_js};
use hold::Hold;

mod calls;
mod config;
mod errors;
mod hold;
mod knowledge_files;
mod memory;
mod profiles;
mod research;
mod sessions;
mod views;

pub use errors::{ErrorCode, js_error, run_error_code};

/// The TypeScript types of every value the Rust side serializes for the
/// page, generated from the Rust types (`generated.d.ts`, written by
/// `agent_assembly::typescript`; `cargo xtask test` fails when it differs
/// from what the Rust types give).
#[wasm_bindgen(typescript_custom_section)]
const TS_GENERATED_TYPES: &str = include_str!("generated.d.ts");

/// The browser host's own types, written by hand (`types.d.ts`: its
/// configuration, run options, events, error codes); they refer to the
/// generated ones by name. `tsc --strict` checks both against values from
/// real runs (`host-browser/typecheck`).
#[wasm_bindgen(typescript_custom_section)]
const TS_TYPES: &str = include_str!("types.d.ts");

struct Inner {
    /// The runtime, tools and workspaces, wired as in every host.
    assembly: Assembly,
    leases: SessionLeases,
    holds: RefCell<HashMap<SessionId, Hold>>,
    sessions: RefCell<HashMap<RunId, SessionId>>,
    defaults: RunConfig,
    /// The model each provider name of `models` runs by default.
    named_models: std::collections::BTreeMap<String, String>,
    recovered: RefCell<Vec<String>>,
    _page: PageEvents,
    closed: Cell<bool>,
    /// The live subscriptions: the runtime owns them, not their JS handles.
    subscriptions: SubscriptionRegistry,
    /// The tools this page registered (`registerTool`, S5.9).
    page_tools: PageTools,
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

/// The assembly of this tab: the host-specific parts (the Worker's
/// `run_javascript`, the gateway as `fetch_url`'s backend, the page's
/// secrets) passed to `agent-assembly`, which wires the rest. Nothing here
/// awaits: a separate function keeps `build`'s async state small.
fn assemble(
    config: &RuntimeConfig,
    host: Host,
    owner: OwnerId,
    provider: Arc<dyn agent_supervisor::ModelProvider>,
    lease_ttl: Duration,
) -> Result<Assembly, JsValue> {
    // One Worker module for the tab, fetched and compiled on first use; a
    // Worker of its own for scripts and one for PDFs, so a PDF never waits
    // behind a script.
    let (javascript, pdf_reader, html_extractor) =
        match config.worker_glue_url.clone().or_else(default_glue_url) {
            Some(glue) => {
                let module = match config.worker_wasm_url.clone() {
                    Some(wasm_url) => WorkerModule::Separate {
                        glue_url: glue,
                        wasm_url,
                    },
                    None => WorkerModule::beside_glue(&glue),
                };
                let source = WorkerSource::new(module);
                let scripts = Rc::new(ModuleWorker::new(source.clone(), "agentrt-run-javascript"));
                let pdfs = Rc::new(ModuleWorker::new(source.clone(), "agentrt-read-pdf"));
                let pages = Rc::new(ModuleWorker::new(source, "agentrt-readable-text"));
                let javascript = spawn_js_tool(
                    host.executor.clone(),
                    host.clock.clone(),
                    scripts,
                    JsLimits::DEFAULT,
                )
                .map_err(|e| js_error(ErrorCode::RuntimeError, e))?;
                let pdf_reader: Arc<dyn PdfReader> = Arc::new(WorkerPdfReader::new(pdfs));
                let html_extractor: Arc<dyn agent_tools::builtin::document::ReadableExtractor> =
                    Arc::new(WorkerHtmlExtractor::new(pages));
                (Some(javascript), Some(pdf_reader), Some(html_extractor))
            }
            None => (None, None, None),
        };
    let fetch = match &config.gateway {
        Some(gateway) => {
            let client = GatewayClient::new(
                &gateway.url,
                gateway.token.clone(),
                &Limits::spec(),
                host.clock.clone(),
            )
            .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("gateway: {e}")))?;
            Some(Arc::new(client) as Arc<dyn FetchBackend>)
        }
        None => None,
    };
    let secrets = Arc::new(PageSecrets::new(&config.secrets));
    let search: Option<Arc<dyn agent_research::search::SearchBackend>> = match &config.search_url {
        Some(url) => Some(Arc::new(
            agent_research::search::SearxngBackend::new(url, host.clock.clone())
                .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("searchUrl: {e}")))?,
        )),
        None => None,
    };
    Assembly::build(Parts {
        host,
        owner,
        provider,
        javascript,
        pdf_reader,
        html_extractor,
        fetch,
        secrets,
        plugins: config.plugins.clone(),
        always_on_plugins: config.always_on_plugins.clone(),
        mcp: mcp_servers(config)?,
        search,
        runtime: RuntimeOptions {
            lease_ttl,
            ..RuntimeOptions::default()
        },
    })
    .map_err(assembly_error)
}

async fn build(config: RuntimeConfig) -> Result<AgentRuntime, JsValue> {
    let clock: Arc<dyn Clock> = Arc::new(BrowserClock);
    let executor: Arc<dyn Executor> = Arc::new(BrowserExecutor);
    let entropy: Arc<dyn Entropy> =
        Arc::new(BrowserEntropy::new().map_err(|e| js_error(ErrorCode::Unavailable, e))?);
    let defaults = run_config(&config)?;
    let named_models = named_models(&config);
    check_plugins(&config)?;
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
    let page_tools = PageTools::new(
        host.executor.clone(),
        host.clock.clone(),
        host.lifecycle.clone(),
    );
    let assembly = assemble(&config, host, owner.clone(), provider, ttl)?;
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
        assembly,
        leases,
        holds: RefCell::new(HashMap::new()),
        sessions: RefCell::new(HashMap::new()),
        defaults,
        named_models,
        recovered: RefCell::new(Vec::new()),
        _page: page,
        closed: Cell::new(false),
        subscriptions: SubscriptionRegistry::new(),
        page_tools,
    });
    recover(&inner).await?;
    interrupt_research(&inner).await;
    // A server that cannot be reached is in `mcpServers()` with its reason;
    // `connectMcp()` tries it again.
    inner.assembly.connect_mcp().await;
    keep_renewed(Rc::downgrade(&inner), ttl);
    Ok(AgentRuntime { inner })
}

/// S9.6: Deep Research tasks a closed or reloaded page left mid-phase
/// become `interrupted` (holding the session opens it, which interrupts
/// them); nothing is started. A session another live tab holds is that
/// tab's, and left alone.
async fn interrupt_research(inner: &Rc<Inner>) {
    let sessions = match inner.assembly.research_store().sessions_mid_phase().await {
        Ok(sessions) => sessions,
        Err(e) => {
            tracing::warn!(error = %e, "research tasks could not be read at load");
            return;
        }
    };
    for session in sessions {
        if inner.ensure_hold(&session).await.is_ok() {
            inner.done(&session);
        }
    }
}

/// S2.5: runs left `running` by a closed or reloaded page become
/// `interrupted` / `page_interrupted`; nothing resumes, no network work starts.
async fn recover(inner: &Rc<Inner>) -> Result<(), JsValue> {
    let runs = inner.assembly.runtime().runs().await.map_err(run_error)?;
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
    let recovered = inner
        .assembly
        .runtime()
        .recover()
        .await
        .map_err(run_error)?;
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
            let _lost = inner.assembly.runtime().leases().renew_all().await;
        }
    });
}

fn promise(
    fut: impl std::future::Future<Output = Result<JsValue, JsValue>> + 'static,
) -> js_sys::Promise {
    wasm_bindgen_futures::future_to_promise(fut)
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
        self.inner.assembly.host().durable
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

    /// What became of each configured MCP server (issue 16): connected
    /// with its tools, the functions left out and why, or why it is not
    /// connected.
    #[wasm_bindgen(js_name = mcpServers, unchecked_return_type = "McpServerStatus[]")]
    pub fn mcp_servers(&self) -> Result<JsValue, JsValue> {
        to_js(&self.inner.assembly.mcp_statuses())
    }

    /// Connect the MCP servers not connected yet (one that was down when
    /// the runtime was created); resolves with every server's status.
    #[wasm_bindgen(js_name = connectMcp, unchecked_return_type = "Promise<McpServerStatus[]>")]
    pub fn connect_mcp(&self) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move { to_js(&inner.assembly.connect_mcp().await) })
    }

    /// Register a tool defined by this page (S5.9): `definition` names it,
    /// describes it, gives its JSON Schema, declared effects, idempotency
    /// and the rest, and `execute(args, ctx)` does the work. The same name
    /// again replaces the tool (a changed definition has a new fingerprint
    /// and is asked about again). Refused with `invalid_config` when the
    /// definition is malformed, its name is reserved or taken (S5.5), or
    /// its schema does not compile. Resolves with its name and fingerprint.
    #[wasm_bindgen(js_name = registerTool, unchecked_return_type = "Promise<{ name: string; fingerprint: string }>")]
    pub fn register_tool(
        &self,
        #[wasm_bindgen(unchecked_param_type = "PageToolDefinition")] definition: JsValue,
    ) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let execute = js_sys::Reflect::get(&definition, &JsValue::from_str("execute"))
                .ok()
                .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
                .ok_or_else(|| {
                    js_error(
                        ErrorCode::InvalidConfig,
                        "page tool: execute must be a function (args, ctx) => Promise<result>",
                    )
                })?;
            let fields = js_sys::Object::assign(&js_sys::Object::new(), definition.unchecked_ref());
            let _ = js_sys::Reflect::delete_property(&fields, &JsValue::from_str("execute"));
            let spec: PageToolSpec = from_js(fields.into(), "page tool")?;
            let registered = inner
                .page_tools
                .register(inner.assembly.tools(), spec, execute)
                .await
                .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("page tool: {e}")))?;
            to_js(&registered)
        })
    }

    /// Forget the page tool `name`; resolves false when there is none.
    #[wasm_bindgen(js_name = unregisterTool, unchecked_return_type = "Promise<boolean>")]
    pub fn unregister_tool(&self, name: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let removed = inner
                .page_tools
                .unregister(inner.assembly.tools(), &name)
                .await
                .map_err(|e| js_error(ErrorCode::RuntimeError, format!("page tool: {e}")))?;
            Ok(JsValue::from_bool(removed))
        })
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
            let mut options: RunOptions = if options.is_undefined() || options.is_null() {
                RunOptions::default()
            } else {
                from_js(options, "run options")?
            };
            let choice = profiles::choice_of(options.profile.take(), options.turn.take())?;
            let config = run_config_for(&inner.defaults, &inner.named_models, options)?;
            inner.ensure_hold(&session).await?;
            let started = match &choice {
                None => inner
                    .assembly
                    .runtime()
                    .start(&session, &prompt, config)
                    .await
                    .map_err(run_error),
                Some(choice) => inner
                    .assembly
                    .start_with_profile(&session, &prompt, config, choice)
                    .await
                    .map(|(run, _)| run)
                    .map_err(profiles::start_error),
            };
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
                    Err(e)
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
        let events = self.inner.assembly.runtime().subscribe();
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
        self.answer(run, move |a, run| {
            let request = request.clone();
            Box::pin(async move {
                let request = RequestId::new(&request)?;
                a.runtime().approve(&run, &request).await
            })
        })
    }

    /// Deny a pending approval request.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn deny(&self, run: String, request: String) -> js_sys::Promise {
        self.answer(run, move |a, run| {
            let request = request.clone();
            Box::pin(async move {
                let request = RequestId::new(&request)?;
                a.runtime().deny(&run, &request).await
            })
        })
    }

    /// Answer an `ask_user` request with `text`: one of its choices, or
    /// text that satisfies its answer schema (read as JSON when it parses);
    /// anything else is `invalid_answer` and the run keeps waiting.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn respond(&self, run: String, request: String, text: String) -> js_sys::Promise {
        self.answer(run, move |a, run| {
            let request = request.clone();
            let text = text.clone();
            Box::pin(async move {
                let request = RequestId::new(&request)?;
                a.runtime().respond(&run, &request, &text).await
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
            Ok(choice) => self.answer(run, move |a, run| {
                let call = call.clone();
                Box::pin(async move {
                    let call = CallId::new(&call)?;
                    a.runtime().decide(&run, &call, choice).await
                })
            }),
        }
    }

    /// Stop a run (`cancelled` / `user_stopped`); its `fetch_url` reads in
    /// flight are cancelled (the assembly's stop, as natively). A run of a
    /// Deep Research task stops the task (`stopResearch`, S9.6): its reads
    /// and synthesis end and the partial report keeps a `stopped` gap.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn stop(&self, run: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let id = run_id(&run)?;
            let task = inner
                .assembly
                .research_task_of(&id)
                .await
                .map_err(research::research_error)?;
            match task {
                Some((session, task)) => {
                    inner
                        .researching(&session, async |a| a.stop_research(&session, &task).await)
                        .await?;
                }
                None => {
                    let stopped = id.clone();
                    inner
                        .command(&id, async move |a| a.stop(&stopped).await)
                        .await?;
                }
            }
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Continue an interrupted run: the only way one continues (S2.5).
    /// Refused with `tool_unavailable`, naming the tools, while the run
    /// waits on a tool this page has not registered (again) with the same
    /// fingerprint (S5.9); nothing changes then.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn resume(&self, run: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let id = run_id(&run)?;
            let missing = inner.assembly.missing_tools(&id).await.map_err(run_error)?;
            if !missing.is_empty() {
                return Err(js_error(
                    ErrorCode::ToolUnavailable,
                    format!(
                        "the run waits on {}, which this page has not registered (or registered with another definition); register it, then resume",
                        missing.join(", ")
                    ),
                ));
            }
            let resumed = id.clone();
            inner
                .command(&id, async move |a| a.runtime().resume(&resumed).await)
                .await
                .map(|()| JsValue::UNDEFINED)
        })
    }

    /// Every stored run, or those of `session`, oldest first.
    #[wasm_bindgen(js_name = listRuns, unchecked_return_type = "Promise<AgentRun[]>")]
    pub fn list_runs(&self, session: Option<String>) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let runs = match session.map(|s| SessionId::new(&s)) {
                // No run is stored under a session id that is not one.
                Some(Err(_)) => Vec::new(),
                session => (inner.assembly.runtime())
                    .list_runs(session.and_then(Result::ok).as_ref())
                    .await
                    .map_err(run_error)?,
            };
            to_js(&runs)
        })
    }

    /// One run with its activities, journal, pending requests, output and plan.
    #[wasm_bindgen(js_name = readRun, unchecked_return_type = "Promise<RunView>")]
    pub fn read_run(&self, run: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let id = run_id(&run)?;
            let view = inner.assembly.run_view(&id).await.map_err(run_error)?;
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
            let fresh = inner.assembly.runtime().present_pending(&id).await;
            inner.release_when_settled(id.clone(), session);
            let fresh = fresh.map_err(run_error)?;
            let mut out = Vec::new();
            for p in fresh {
                out.push(inner.assembly.pending_view(p).await);
            }
            to_js(&out)
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
                    RunEvent::ReasoningDelta { run, text } => {
                        vec![json!({"type": "reasoning", "runId": run.as_str(), "text": text})]
                    }
                    RunEvent::ToolProgress {
                        run,
                        call_id,
                        tool,
                        progress,
                    } => vec![json!({
                        "type": "tool_progress",
                        "runId": run.as_str(),
                        "callId": call_id.as_str(),
                        "tool": tool,
                        "progress": progress,
                    })],
                    RunEvent::Research { run, task, phase } => vec![json!({
                        "type": "research",
                        "runId": run.as_str(),
                        "task": task,
                        "phase": phase,
                    })],
                    RunEvent::Activity(activity) => {
                        let mut out = vec![json!({
                            "type": "activity",
                            "runId": run.as_str(),
                            "activity": activity,
                        })];
                        if let Ok(record) = inner.assembly.runtime().run(&run).await {
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
            &'a Assembly,
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
                .command(&id, async move |a| act(a, id2).await)
                .await
                .map(|()| JsValue::UNDEFINED)
        })
    }
}
