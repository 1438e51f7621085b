//! Deep Research through the native host (SPEC S9), end to end: SQLite on
//! disk, the real supervisor and tools actor, an OpenAI-compatible model, a
//! SearXNG-shaped search API and the source pages all on loopback servers
//! this test starts; hostnames resolve through a scripted resolver, one of
//! them to a private address (a DNS trick inside an approved plan).
//!
//! - S9.3: the start turn offers only `start_deep_research` and stops after
//!   it; when the model answers without it the runtime makes the call;
//! - S9.2: the start run's output is only the task reference; planning and
//!   synthesis are child runs of the start run, mode `research`, never
//!   conversation turns;
//! - S9.4: planning is offered only `web_search` and `fetch_url` (with a
//!   search backend), capped; the plan request is shown once; execution
//!   reads only the frozen snapshot;
//! - S9.5: the private source of the approved plan is refused by the URL
//!   policy and becomes a gap; nothing reaches it;
//! - S9.6: synthesis is sent no tools; the report Artifact's findings cite
//!   evidence that resolves to stored texts; reopening the session (a
//!   reload) interrupts a task mid-phase and starts nothing until Resume.
#![cfg(not(target_arch = "wasm32"))]

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use agent_fetch::testing::TestLoopback;
use agent_fetch::{ScriptedResolver, UrlPolicy};
use agent_host_native::app::{App, AppOptions};
use agent_host_native::host::NativeHost;
use agent_kernel::run::{RunMode, RunStatus};
use agent_kernel::{RunId, SessionId};
use agent_research::report::Report;
use agent_research::{Gap, PlanDecision};
use agent_supervisor::{OpenAiConfig, OpenAiProvider, RunConfig};
use axum::Router;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Value, json};

type Seen = Arc<Mutex<Vec<Value>>>;

fn sse(chunks: &[Value]) -> Response {
    let mut s = String::new();
    for c in chunks {
        s.push_str(&format!("data: {c}\n\n"));
    }
    s.push_str("data: [DONE]\n\n");
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(s.into())
        .unwrap()
}

fn text(t: &str) -> Response {
    sse(&[
        json!({"choices": [{"index": 0, "delta": {"content": t}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ])
}

fn calls(calls: &[(&str, &str, Value)]) -> Response {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (id, name, args))| {
            json!({"index": i, "id": id, "type": "function",
                   "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect();
    sse(&[
        json!({"choices": [{"index": 0, "delta": {"tool_calls": calls}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ])
}

struct Model {
    seen: Seen,
    /// Whether the start turn's model calls `start_deep_research`.
    calls_start: bool,
    port: u16,
    /// The plan's second source keeps its first reader waiting.
    slow_source: bool,
    /// The first plan of a topic containing `malformed-first` is no JSON.
    topic_marks_bad_plan: bool,
    /// What synthesis answers.
    synthesis: Synthesis,
}

/// How the model answers synthesis.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Synthesis {
    /// A draft citing the first source read.
    Cites,
    /// No JSON at first; then a draft whose finding cites `ev-9`, which
    /// was never read.
    MalformedThenUnknownEvidence,
    /// Never answers (a synthesis the person stops).
    Hangs,
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn plan(port: u16, slow_source: bool) -> String {
    let plant = if slow_source { "slow-plant" } else { "plant" };
    json!({
        "questions": ["How dense are solid-state cells?"],
        "queries": ["solid-state battery density"],
        "sources": [
            format!("http://docs.site.example:{port}/cells"),
            format!("http://intranet.site.example:{port}/secret"),
            format!("http://news.site.example:{port}/{plant}"),
        ],
        "domains": ["site.example"],
    })
    .to_string()
}

async fn completions(State(model): State<Arc<Model>>, body: String) -> Response {
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    model.seen.lock().unwrap().push(request.clone());
    let tools = tool_names(&request);
    let said = request["messages"].to_string();
    if tools.iter().any(|t| t == "start_deep_research") {
        if model.calls_start {
            return calls(&[
                (
                    "call_fetch",
                    "fetch_url",
                    json!({"url": "https://example.org/"}),
                ),
                (
                    "call_start",
                    "start_deep_research",
                    json!({"topic": "solid-state batteries", "urls": []}),
                ),
            ]);
        }
        return text("Solid-state batteries are ...");
    }
    if said.contains("You plan a Deep Research task") {
        let searched = request["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        if tools.iter().any(|t| t == "web_search") && !searched {
            return calls(&[(
                "call_search",
                "web_search",
                json!({"query": "solid-state battery density"}),
            )]);
        }
        if model.topic_marks_bad_plan && said.contains("malformed-first") {
            let planned = model
                .seen
                .lock()
                .unwrap()
                .iter()
                .filter(|r| {
                    r["messages"]
                        .to_string()
                        .contains("You plan a Deep Research task")
                })
                .count();
            if planned == 1 {
                return text("I think the plan is: read some pages.");
            }
        }
        return text(&format!(
            "```json\n{}\n```",
            plan(model.port, model.slow_source)
        ));
    }
    let syntheses = model
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r["messages"].to_string().contains("You write the report"))
        .count();
    match model.synthesis {
        Synthesis::Cites => {}
        Synthesis::Hangs => {
            tokio::time::sleep(std::time::Duration::from_secs(120)).await;
        }
        Synthesis::MalformedThenUnknownEvidence if syntheses == 1 => {
            return text("Here is my report: batteries are good.");
        }
        Synthesis::MalformedThenUnknownEvidence => {
            return text(
                &json!({
                    "title": "Solid-state batteries",
                    "findings": [
                        {"claim": "Lab cells reached 500 Wh/kg.", "evidence": ["ev-1"]},
                        {"claim": "Prices halve by 2030.", "evidence": ["ev-9"]},
                    ],
                })
                .to_string(),
            );
        }
    }
    // Synthesis: cite the first source read.
    text(
        &json!({
            "title": "Solid-state batteries",
            "findings": [{"claim": "Lab cells reached 500 Wh/kg.", "evidence": ["ev-1"]}],
            "unverified": [{"text": "A forum says prices will halve."}],
            "model_knowledge": [{"text": "Solid-state cells use a solid electrolyte."}],
        })
        .to_string(),
    )
}

async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

struct Servers {
    model: SocketAddr,
    model_seen: Seen,
    search: SocketAddr,
    search_seen: Seen,
    pages: SocketAddr,
    pages_seen: Seen,
}

async fn servers(calls_start: bool) -> Servers {
    servers_with(calls_start, false).await
}

async fn servers_with(calls_start: bool, slow_source: bool) -> Servers {
    servers_answering(calls_start, slow_source, Synthesis::Cites).await
}

async fn servers_answering(calls_start: bool, slow_source: bool, synthesis: Synthesis) -> Servers {
    // The pages first: the model's plan names their port.
    let pages_seen: Seen = Arc::default();
    let seen = pages_seen.clone();
    let pages = serve(Router::new().fallback(move |req: axum::extract::Request| {
        let seen = seen.clone();
        async move {
            let host = req
                .headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            if req.uri().path() != "/slow-plant" {
                seen.lock()
                    .unwrap()
                    .push(json!({"host": host, "path": req.uri().path()}));
            }
            let path = req.uri().path().to_owned();
            let plant_hits = seen
                .lock()
                .unwrap()
                .iter()
                .filter(|p| p["path"] == "/plant")
                .count();
            // `/slow-plant` keeps its first reader waiting (a tab closed
            // mid-read); later reads answer at once.
            if path == "/slow-plant" && plant_hits == 0 {
                seen.lock()
                    .unwrap()
                    .push(json!({"host": "", "path": "/plant"}));
                tokio::time::sleep(std::time::Duration::from_secs(60)).await;
            }
            let body = match path.as_str() {
                "/cells" => "Lab cells reached 500 Wh/kg in 2025.",
                "/plant" | "/slow-plant" => "The first plant opens in 2027.",
                _ => "private",
            };
            (
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                body.to_owned(),
            )
        }
    }))
    .await;
    let model_seen: Seen = Arc::default();
    let model = Arc::new(Model {
        seen: model_seen.clone(),
        calls_start,
        port: pages.port(),
        slow_source,
        topic_marks_bad_plan: true,
        synthesis,
    });
    let model = serve(
        Router::new()
            .route("/v1/chat/completions", post(completions))
            .with_state(model),
    )
    .await;
    let search_seen: Seen = Arc::default();
    let s = search_seen.clone();
    let search = serve(Router::new().route(
        "/search",
        get(
            move |Query(q): Query<std::collections::HashMap<String, String>>| {
                let s = s.clone();
                async move {
                    s.lock().unwrap().push(json!(q));
                    (
                        [(header::CONTENT_TYPE, "application/json")],
                        json!({"results": [{"url": "https://docs.site.example/cells",
                                            "title": "Cells", "content": "density"}]})
                        .to_string(),
                    )
                }
            },
        ),
    ))
    .await;
    Servers {
        model,
        model_seen,
        search,
        search_seen,
        pages,
        pages_seen,
    }
}

async fn app(data: &std::path::Path, s: &Servers, search: bool) -> App {
    let native = NativeHost::open_with(data, Default::default())
        .await
        .unwrap();
    let loopback: IpAddr = "127.0.0.1".parse().unwrap();
    let resolver = ScriptedResolver::new()
        .answer("docs.site.example", [loopback])
        .answer("news.site.example", [loopback])
        .answer("intranet.site.example", ["10.0.0.7".parse().unwrap()]);
    let policy = UrlPolicy::public_web(Arc::new(resolver))
        .allowing_test_servers(TestLoopback::for_tests_only(), [s.pages]);
    let mut options = AppOptions {
        url_policy: Some(policy),
        ..AppOptions::default()
    };
    if search {
        options.config.search = Some(format!("http://{}/", s.search));
    }
    let provider = Arc::new(
        OpenAiProvider::new(
            OpenAiConfig::new(format!("http://{}/v1", s.model)),
            native.host().clock.clone(),
        )
        .unwrap(),
    );
    App::on_host(native, options, provider).await.unwrap()
}

fn config() -> RunConfig {
    let mut config = RunConfig::default();
    config.model.model = "test-model".into();
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_a_task_goes_from_the_start_turn_to_a_report_whose_claims_resolve() {
    let s = servers(true).await;
    let data = tempfile::tempdir().unwrap();
    let app = app(data.path(), &s, true).await;
    let session = SessionId::new("chat-1").unwrap();
    let _opened = app.open_session(&session).await.unwrap();
    let a = app.assembly();

    // S9.3: the start turn. The model calls fetch_url and
    // start_deep_research; only the start call is kept.
    let started = a
        .start_research(&session, "Tell me about solid-state batteries", config())
        .await
        .unwrap();
    let first = s.model_seen.lock().unwrap()[0].clone();
    assert_eq!(tool_names(&first), vec!["start_deep_research"]);
    assert!(
        !first["messages"].to_string().contains("never instructions"),
        "S9.1: the start turn has none of the Agent system prompt"
    );
    let start_run = app.runtime().run(&started.run).await.unwrap();
    assert_eq!(start_run.mode, RunMode::Research);
    assert_eq!(start_run.status, RunStatus::Completed);
    assert_eq!(start_run.usage.tool_calls, 1, "fetch_url was dropped");
    // S9.2: the output is the task reference only.
    let output = app.runtime().output(&started.run).await.unwrap().unwrap();
    let output: Value = serde_json::from_str(&output).unwrap();
    assert_eq!(
        output["content"]["research_task"],
        json!(started.task.as_str())
    );

    // Planning ran as a child run: web_search and fetch_url only.
    let view = a.advance_research(&session, &started.task).await.unwrap();
    assert_eq!(view.phase, "awaiting_plan_approval");
    let plan_run = RunId::new(format!("{}-plan-1", started.task)).unwrap();
    let planning = app.runtime().run(&plan_run).await.unwrap();
    assert_eq!(planning.parent.as_ref(), Some(&started.run));
    assert_eq!(planning.mode, RunMode::Research);
    assert!(!planning.mode.is_conversation_turn());
    let requests = s.model_seen.lock().unwrap().clone();
    let planning_request = requests
        .iter()
        .find(|r| {
            r["messages"]
                .to_string()
                .contains("You plan a Deep Research task")
        })
        .unwrap();
    let mut offered = tool_names(planning_request);
    offered.sort();
    assert_eq!(offered, vec!["fetch_url", "web_search"]);
    assert_eq!(
        s.search_seen.lock().unwrap().len(),
        1,
        "one search was sent"
    );
    assert!(
        s.pages_seen.lock().unwrap().is_empty(),
        "no source is read before approval"
    );

    // S6.4: the plan request is shown once.
    let shown = a.present_plan(&session, &started.task).await.unwrap();
    assert!(shown.is_some());
    assert_eq!(a.present_plan(&session, &started.task).await.unwrap(), None);

    // Approval: execution reads the snapshot, synthesis writes the report.
    let request = view.plan_request.clone().unwrap().id;
    let done = a
        .decide_plan(&session, &started.task, &request, PlanDecision::Approve)
        .await
        .unwrap();
    assert_eq!(done.phase, "partial", "{done:?}");
    // S9.5: the private address was refused: a gap, and no request for it.
    assert!(
        done.gaps
            .iter()
            .any(|g| matches!(g, Gap::SourceFailed { url, .. } if url.contains("intranet"))),
        "{:?}",
        done.gaps
    );
    let hosts: Vec<String> = s
        .pages_seen
        .lock()
        .unwrap()
        .iter()
        .map(|p| p["host"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(hosts.len(), 2, "{hosts:?}");
    assert!(hosts.iter().all(|h| !h.contains("intranet")));

    // S9.6: synthesis had no tools; the report's claims resolve.
    let requests = s.model_seen.lock().unwrap().clone();
    let synthesis = requests.last().unwrap();
    assert!(
        tool_names(synthesis).is_empty(),
        "synthesis is sent no tools"
    );
    let report_ref = done.report.clone().unwrap();
    let bytes = a
        .host()
        .storage
        .get_blob(&report_ref.artifact)
        .await
        .unwrap()
        .unwrap();
    let report = Report::from_bytes(&bytes).unwrap();
    let snapshot = a
        .research_store()
        .load(&session, &started.task)
        .await
        .unwrap()
        .snapshot;
    report.validate(snapshot.as_ref()).unwrap();
    assert_eq!(report.findings.len(), 1);
    assert_eq!(report.unverified.len(), 1);
    assert_eq!(report.model_knowledge.len(), 1);
    let synth_run = RunId::new(format!("{}-synthesis-1", started.task)).unwrap();
    let synth = app.runtime().run(&synth_run).await.unwrap();
    assert_eq!(synth.parent.as_ref(), Some(&started.run));
    assert_eq!(synth.usage.tool_calls, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_3_the_runtime_starts_research_when_the_model_answers_without_the_call() {
    let s = servers(false).await;
    let data = tempfile::tempdir().unwrap();
    let app = app(data.path(), &s, false).await;
    let session = SessionId::new("chat-2").unwrap();
    let _opened = app.open_session(&session).await.unwrap();
    let a = app.assembly();
    let started = a
        .start_research(&session, "  What about sodium batteries?  ", config())
        .await
        .unwrap();
    let task = a
        .research_store()
        .load(&session, &started.task)
        .await
        .unwrap();
    assert_eq!(
        a.research_store().topic(&task).await.unwrap(),
        "What about sodium batteries?"
    );
    // S9.5: host-supplied identity.
    assert_eq!(task.session, session);
    assert_eq!(task.message.as_str(), started.run.as_str());
    let journal = app.runtime().journal(&started.run).await.unwrap();
    assert_eq!(
        journal.len(),
        1,
        "the runtime's call went through the journal"
    );
    // Without a search backend, planning has no tools and says so.
    let view = a.advance_research(&session, &started.task).await.unwrap();
    assert_eq!(view.phase, "awaiting_plan_approval");
    let plan = view.plan.unwrap();
    assert_eq!(
        plan.notes,
        vec![agent_research::search::NO_SEARCH_NOTE.to_string()]
    );
    let requests = s.model_seen.lock().unwrap().clone();
    assert!(tool_names(requests.last().unwrap()).is_empty());
    assert!(s.search_seen.lock().unwrap().is_empty());
}

/// Open `session` in `app` once the previous app of this process has given
/// its lease up. Dropping an app's last lease guard releases the lease in
/// the background, and an owner inside this process counts as alive (a
/// reload here is simulated inside one process, where the old "tab" ends
/// its tasks only after it is dropped), so the new app waits for that
/// release instead of racing it; a real reload starts a new process, whose
/// dead predecessor's lease is taken over at once.
async fn open_after_release(app: &App, session: &SessionId) -> agent_assembly::OpenedSession {
    let storage = app.native().host().storage.clone();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let lease = storage.current_lease(session).await.unwrap();
        if lease.as_ref().is_none_or(|l| l.expires_at_ms == 0) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the dropped app never released its lease: {lease:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    app.open_session(session).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_6_a_reload_interrupts_a_task_mid_phase_and_starts_nothing_until_resume() {
    let s = servers(true).await;
    let data = tempfile::tempdir().unwrap();
    let session = SessionId::new("chat-3").unwrap();
    let task = {
        let app = app(data.path(), &s, false).await;
        let opened = app.open_session(&session).await.unwrap();
        let started = app
            .assembly()
            .start_research(&session, "Batteries", config())
            .await
            .unwrap();
        // The tab goes away after the start, before planning ran.
        drop(opened);
        started.task
    };
    let before = s.model_seen.lock().unwrap().len();
    let app = app(data.path(), &s, false).await;
    let _opened = open_after_release(&app, &session).await;
    let a = app.assembly();
    let view = a.research_view(&session, &task).await.unwrap();
    assert_eq!(view.phase, "interrupted");
    // Reading and listing start nothing.
    let _ = a.research_tasks(&session).await.unwrap();
    assert_eq!(s.model_seen.lock().unwrap().len(), before);
    // Advancing an interrupted task waits for Resume.
    let view = a.advance_research(&session, &task).await.unwrap();
    assert_eq!(view.phase, "interrupted");
    assert_eq!(s.model_seen.lock().unwrap().len(), before);
    // Resume continues planning.
    let view = a.resume_research(&session, &task).await.unwrap();
    assert_eq!(view.phase, "awaiting_plan_approval");
    assert!(s.model_seen.lock().unwrap().len() > before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_4_a_widening_edit_is_refused_and_a_rejected_plan_reads_nothing() {
    let s = servers(true).await;
    let data = tempfile::tempdir().unwrap();
    let app = app(data.path(), &s, false).await;
    let session = SessionId::new("chat-4").unwrap();
    let _opened = app.open_session(&session).await.unwrap();
    let a = app.assembly();
    let started = a
        .start_research(&session, "Batteries", config())
        .await
        .unwrap();
    let view = a.advance_research(&session, &started.task).await.unwrap();
    let request = view.plan_request.clone().unwrap().id;
    let mut wider = view.plan.clone().unwrap();
    wider.domains.insert("elsewhere.example".into());
    let refused = a
        .decide_plan(&session, &started.task, &request, PlanDecision::Edit(wider))
        .await;
    assert!(refused.is_err(), "a widening edit must be refused");
    let rejected = a
        .decide_plan(&session, &started.task, &request, PlanDecision::Reject)
        .await
        .unwrap();
    assert_eq!(rejected.phase, "rejected");
    assert!(s.pages_seen.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_6_a_reload_during_execution_reads_only_unsettled_sources_after_resume() {
    let s = servers_with(false, true).await;
    let data = tempfile::tempdir().unwrap();
    let session = SessionId::new("chat-5").unwrap();
    let app1 = Arc::new(app(data.path(), &s, false).await);
    let opened = app1.open_session(&session).await.unwrap();
    let started = app1
        .assembly()
        .start_research(&session, "Batteries", config())
        .await
        .unwrap();
    let view = app1
        .assembly()
        .advance_research(&session, &started.task)
        .await
        .unwrap();
    let request = view.plan_request.unwrap().id;
    let executing = {
        let app = app1.clone();
        let (session, task) = (session.clone(), started.task.clone());
        tokio::spawn(async move {
            app.assembly()
                .decide_plan(&session, &task, &request, PlanDecision::Approve)
                .await
        })
    };
    // The tab goes away while the second source is being read.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !s
        .pages_seen
        .lock()
        .unwrap()
        .iter()
        .any(|p| p["path"] == "/plant")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the slow read never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    executing.abort();
    let _ = executing.await;
    drop(opened);
    drop(app1);
    let requests_before = s.model_seen.lock().unwrap().len();
    let cells_reads = |s: &Servers| {
        s.pages_seen
            .lock()
            .unwrap()
            .iter()
            .filter(|p| p["path"] == "/cells")
            .count()
    };
    assert_eq!(cells_reads(&s), 1);

    let app2 = app(data.path(), &s, false).await;
    let _opened = open_after_release(&app2, &session).await;
    let a = app2.assembly();
    let view = a.research_view(&session, &started.task).await.unwrap();
    assert_eq!(view.phase, "interrupted");
    assert_eq!(view.resume_to, Some(agent_research::ActivePhase::Executing));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        s.model_seen.lock().unwrap().len(),
        requests_before,
        "nothing started by itself"
    );
    let done = a.resume_research(&session, &started.task).await.unwrap();
    assert_eq!(done.phase, "partial", "{done:?}");
    assert_eq!(cells_reads(&s), 1, "a settled source is never read twice");
    let read: Vec<&str> = done
        .sources
        .iter()
        .filter(|s| s.state == "read")
        .map(|s| s.url.as_str())
        .collect();
    assert_eq!(read.len(), 2, "{read:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_4_a_malformed_plan_interrupts_the_task_and_resume_asks_again() {
    let s = servers(false).await;
    let data = tempfile::tempdir().unwrap();
    let app = app(data.path(), &s, false).await;
    let session = SessionId::new("chat-7").unwrap();
    let _opened = app.open_session(&session).await.unwrap();
    let a = app.assembly();
    let started = a
        .start_research(&session, "malformed-first batteries", config())
        .await
        .unwrap();
    let view = a.advance_research(&session, &started.task).await.unwrap();
    assert_eq!(
        view.phase, "interrupted",
        "an unusable plan is no plan: {view:?}"
    );
    // The person sees why (issue 38).
    assert!(view.interrupted_because.is_some(), "{view:?}");
    // Resume does not take the refused answer again: a second attempt.
    let view = a.resume_research(&session, &started.task).await.unwrap();
    assert_eq!(view.phase, "awaiting_plan_approval", "{view:?}");
    let second = RunId::new(format!("{}-plan-2", started.task)).unwrap();
    let run = app.runtime().run(&second).await.unwrap();
    assert_eq!(run.parent.as_ref(), Some(&started.run));
}

/// Start a task, plan it and return it with its plan request, in an open
/// session of `app`.
async fn planned(
    app: &App,
    session: &SessionId,
) -> (agent_research::TaskId, agent_kernel::RequestId) {
    let a = app.assembly();
    let started = a
        .start_research(session, "Batteries", config())
        .await
        .unwrap();
    let view = a.advance_research(session, &started.task).await.unwrap();
    (started.task, view.plan_request.unwrap().id)
}

/// The report Artifact of a view, read back and validated.
async fn report_of(app: &App, view: &agent_research::view::ResearchView) -> Report {
    let reference = view.report.as_ref().expect("a report");
    let bytes = app
        .native()
        .host()
        .storage
        .get_blob(&reference.artifact)
        .await
        .unwrap()
        .expect("the report Artifact is stored");
    Report::from_bytes(&bytes).unwrap()
}

/// Wait (bounded) until `seen` holds an entry `matches` accepts.
async fn until_seen(seen: &Seen, what: &str, matches: impl Fn(&Value) -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !seen.lock().unwrap().iter().any(&matches) {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} never happened"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_6_a_draft_citing_unknown_evidence_ends_in_a_partial_report_with_the_reason() {
    let s = servers_answering(false, false, Synthesis::MalformedThenUnknownEvidence).await;
    let data = tempfile::tempdir().unwrap();
    let app = app(data.path(), &s, false).await;
    let session = SessionId::new("chat-8").unwrap();
    let _opened = app.open_session(&session).await.unwrap();
    let (task, request) = planned(&app, &session).await;
    let a = app.assembly();
    // The first draft is no JSON: the task waits for Resume and says why.
    let parked = a
        .decide_plan(&session, &task, &request, PlanDecision::Approve)
        .await
        .unwrap();
    assert_eq!(parked.phase, "interrupted", "{parked:?}");
    let why = parked.interrupted_because.clone().unwrap_or_default();
    assert!(!why.is_empty(), "the reason is shown: {parked:?}");
    // Resume asks the model again (a bounded new attempt), and the draft
    // citing ev-9, never read, ends in a partial report: the claim moved
    // to unverified material, the reason in the gaps.
    let done = a.resume_research(&session, &task).await.unwrap();
    assert_eq!(done.phase, "partial", "{done:?}");
    assert!(done.interrupted_because.is_none());
    let report = report_of(&app, &done).await;
    assert_eq!(report.findings.len(), 1);
    assert_eq!(report.findings[0].claim, "Lab cells reached 500 Wh/kg.");
    assert!(
        report.unverified[0]
            .text
            .starts_with("Prices halve by 2030."),
        "{:?}",
        report.unverified
    );
    let gap = report
        .gaps
        .iter()
        .find_map(|g| match g {
            Gap::UnsupportedClaims { count, reason } => Some((*count, reason.clone())),
            _ => None,
        })
        .expect("the unsupported claim is a gap");
    assert_eq!(gap.0, 1);
    assert!(gap.1.contains("ev-9"), "{}", gap.1);
    assert!(
        report
            .to_markdown()
            .contains("moved to unverified material")
    );
    // Two synthesis runs, no more: the task is final.
    let second = RunId::new(format!("{task}-synthesis-2")).unwrap();
    assert_eq!(
        app.runtime().run(&second).await.unwrap().status,
        RunStatus::Completed
    );
    let third = RunId::new(format!("{task}-synthesis-3")).unwrap();
    assert!(app.runtime().run(&third).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_6_a_stop_during_execution_lets_the_read_go_and_leaves_a_stopped_report() {
    let s = servers_with(false, true).await;
    let data = tempfile::tempdir().unwrap();
    let app = app(data.path(), &s, false).await;
    let session = SessionId::new("chat-9").unwrap();
    let _opened = app.open_session(&session).await.unwrap();
    let (task, request) = planned(&app, &session).await;
    let a = app.assembly();
    let model_before = s.model_seen.lock().unwrap().len();
    let approve = a.decide_plan(&session, &task, &request, PlanDecision::Approve);
    let stop = async {
        // The second source's read hangs: stop then.
        until_seen(&s.pages_seen, "the slow read", |p| p["path"] == "/plant").await;
        let reads = s.pages_seen.lock().unwrap().len();
        a.stop_research(&session, &task).await.unwrap();
        reads
    };
    let (done, reads_at_stop) = tokio::join!(approve, stop);
    let done = done.unwrap();
    assert_eq!(done.phase, "partial", "{done:?}");
    assert!(done.gaps.contains(&Gap::Stopped), "{done:?}");
    // No read after the stop, and no synthesis by the model.
    assert_eq!(s.pages_seen.lock().unwrap().len(), reads_at_stop);
    assert_eq!(s.model_seen.lock().unwrap().len(), model_before);
    let report = report_of(&app, &done).await;
    assert!(report.gaps.contains(&Gap::Stopped));
    assert!(report.findings.is_empty());
    assert!(
        report.unverified[0].text.contains("/cells"),
        "the source read before the stop is listed: {:?}",
        report.unverified
    );
    // A stopped task never resumes.
    assert!(a.resume_research(&session, &task).await.unwrap().phase == "partial");
    assert_eq!(s.pages_seen.lock().unwrap().len(), reads_at_stop);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_6_a_stop_during_synthesis_stops_its_run_and_leaves_a_stopped_report() {
    let s = servers_answering(false, false, Synthesis::Hangs).await;
    let data = tempfile::tempdir().unwrap();
    let app = app(data.path(), &s, false).await;
    let session = SessionId::new("chat-10").unwrap();
    let _opened = app.open_session(&session).await.unwrap();
    let (task, request) = planned(&app, &session).await;
    let a = app.assembly();
    let approve = a.decide_plan(&session, &task, &request, PlanDecision::Approve);
    let stop = async {
        until_seen(&s.model_seen, "the synthesis request", |r| {
            r["messages"].to_string().contains("You write the report")
        })
        .await;
        a.stop_research(&session, &task).await.unwrap();
        (
            s.model_seen.lock().unwrap().len(),
            s.pages_seen.lock().unwrap().len(),
        )
    };
    let (done, (model_at_stop, pages_at_stop)) = tokio::join!(approve, stop);
    let done = done.unwrap();
    assert_eq!(done.phase, "partial", "{done:?}");
    assert!(done.gaps.contains(&Gap::Stopped));
    let synthesis = RunId::new(format!("{task}-synthesis-1")).unwrap();
    assert_eq!(
        app.runtime().run(&synthesis).await.unwrap().status,
        RunStatus::Cancelled
    );
    let report = report_of(&app, &done).await;
    assert!(report.gaps.contains(&Gap::Stopped));
    assert_eq!(s.model_seen.lock().unwrap().len(), model_at_stop);
    assert_eq!(s.pages_seen.lock().unwrap().len(), pages_at_stop);
}
