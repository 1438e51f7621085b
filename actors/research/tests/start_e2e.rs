//! S9.3 end to end, natively: a chat turn's model, an OpenAI-compatible
//! server on loopback that this test starts, is shown only
//! `start_deep_research`; whether it calls it or answers without it, the
//! same `start_deep_research` call goes through the tool shell (capability
//! verified) and creates the `ResearchTask` on SQLite on disk, under the
//! session lease the turn holds (reentrant, S3.2), with the host's session
//! and message identity (S9.5) and only the task's reference as the result
//! (S9.2). A replay of the call finds the same task.
#![cfg(not(target_arch = "wasm32"))]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_capabilities::{
    Authority, EffectSet, Grant, Origin, Target, TargetScope, Uses, sha256_hex,
};
use agent_host_native::sqlite::SqliteStorage;
use agent_kernel::host::{Clock, LeaseManager, Storage};
use agent_kernel::protocol::{InvocationDraft, ToolCall, ToolInvocation, ToolMsg, ToolResult};
use agent_kernel::{CallId, OwnerId, RunId, SessionId};
use agent_research::start::{
    START_DEEP_RESEARCH, StartCall, StartDeepResearch, ensure_start_call, start_turn_schemas,
    task_id_for,
};
use agent_research::{Phase, ResearchStore};
use agent_supervisor::provider::{ModelProvider, ModelRequest, collect_response};
use agent_supervisor::transcript::Message;
use agent_supervisor::{OpenAiConfig, OpenAiProvider};
use axum::Router;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};

type Bodies = Arc<Mutex<Vec<Value>>>;

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

/// `/answers/…`: the model answers in text and calls nothing.
/// `/calls/…`: it calls `start_deep_research` (and, wrongly, `fetch_url`).
async fn completions(
    State(bodies): State<Bodies>,
    Path(mode): Path<String>,
    body: String,
) -> Response {
    bodies
        .lock()
        .unwrap()
        .push(serde_json::from_str(&body).unwrap_or(Value::Null));
    let finish = |r: &str| json!({"choices": [{"index": 0, "delta": {}, "finish_reason": r}]});
    match mode.as_str() {
        "answers" => sse(&[
            json!({"choices": [{"index": 0, "delta": {"content": "Sure, here is what I know about"}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": " solid-state batteries..."}}]}),
            finish("stop"),
        ]),
        _ => sse(&[
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "id": "call_fetch", "type": "function",
                 "function": {"name": "fetch_url", "arguments": "{\"url\": \"https://example.org/\"}"}},
                {"index": 1, "id": "call_start", "type": "function",
                 "function": {"name": "start_deep_research",
                              "arguments": "{\"topic\": \"solid-state batteries in 2025\", \"urls\": [\"https://batteries.example.org/review\"]}"}}
            ]}}]}),
            finish("tool_calls"),
        ]),
    }
}

async fn model_server() -> (std::net::SocketAddr, Bodies) {
    let bodies: Bodies = Arc::default();
    let app = Router::new()
        .route("/{mode}/v1/chat/completions", post(completions))
        .with_state(bodies.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, bodies)
}

const PROMPT: &str = "What is the state of solid-state batteries?";

/// One start turn: ask the model, settle the start call, dispatch it.
async fn start_turn(mode: &str) -> (StartCall, agent_research::ResearchTask, Vec<String>) {
    let (addr, bodies) = model_server().await;
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(
        SqliteStorage::open(dir.path().join("db.sqlite"))
            .await
            .unwrap(),
    );
    let clock: Arc<dyn Clock> = agent_test_support::clock();
    let leases = LeaseManager::new(
        storage.clone(),
        clock.clone(),
        agent_test_support::executor(),
        OwnerId::new("tab-1").unwrap(),
        Duration::from_secs(30),
    );
    let session = SessionId::new("chat-7").unwrap();
    let run = RunId::new("turn-42").unwrap();
    // The turn's run holds the session's lease.
    let turn_lease = leases.acquire(&session).await.unwrap();

    // The model sees only start_deep_research.
    let provider = OpenAiProvider::new(
        OpenAiConfig::new(format!("http://{addr}/{mode}/v1")),
        clock.clone(),
    )
    .unwrap();
    let request = ModelRequest {
        model: "test-model".into(),
        system: None,
        messages: vec![Message::User {
            content: PROMPT.into(),
        }]
        .into(),
        tools: start_turn_schemas().unwrap().into(),
        temperature: None,
        max_output_tokens: None,
    };
    let response = collect_response(provider.stream(request).await.unwrap(), |_| {})
        .await
        .unwrap();
    let sent = bodies.lock().unwrap()[0].clone();
    let tools: Vec<&str> = sent["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, vec![START_DEEP_RESEARCH]);

    let calls: Vec<ToolCall> = response
        .tool_calls
        .iter()
        .map(|c| ToolCall {
            call_id: CallId::new(c.id.clone()).unwrap(),
            name: c.name.clone(),
            arguments: c.arguments.clone(),
        })
        .collect();
    let start = ensure_start_call(&run, &calls, PROMPT);

    // The same tool path either way: the tool shell, a verified capability.
    let store = ResearchStore::new(storage.clone(), clock.clone());
    let tool = StartDeepResearch::new(store.clone(), leases.clone(), clock.clone())
        .spawn(agent_test_support::executor(), None)
        .unwrap();
    let authority = Authority::new(run.as_str(), [5; 32]);
    let dispatch = |attempt: u32| {
        let call = start.call().clone();
        let cap = authority.mint(Grant {
            tool: START_DEEP_RESEARCH.into(),
            fingerprint: StartDeepResearch::fingerprint().unwrap(),
            origin: Origin::Builtin,
            effects: EffectSet::new(),
            scope: TargetScope::NoTarget,
            uses: Uses::Once,
            expires_at_ms: clock.wall_ms() + 60_000,
        });
        let arguments: Value = serde_json::from_str(&call.arguments).unwrap();
        let args_hash = sha256_hex(&agent_capabilities::canonical_bytes(&arguments).unwrap());
        let invocation = ToolInvocation {
            draft: InvocationDraft {
                run: run.clone(),
                session: session.clone(),
                call_id: call.call_id.clone(),
                tool: START_DEEP_RESEARCH.into(),
                fingerprint: StartDeepResearch::fingerprint().unwrap(),
                args_hash,
                arguments,
                effects: EffectSet::new(),
                idempotency: agent_capabilities::Idempotency::Idempotent,
                sensitivity: agent_capabilities::Sensitivity::Public,
                origin: Origin::Builtin,
                provider: None,
                target: Target::Nothing,
                scope: TargetScope::NoTarget,
                attempt,
                idempotency_key: format!("{run}/{}", call.call_id),
            },
            capability: cap,
            verifier: authority.verifier(),
            progress: Default::default(),
        };
        let tool = tool.clone();
        async move {
            tool.ask(|reply| ToolMsg::Invoke { invocation, reply })
                .await
                .unwrap()
        }
    };
    let result = dispatch(1).await;
    let ToolResult::Success(success) = result else {
        panic!("{result:?}")
    };
    let id = task_id_for(&run, &start.call().call_id);
    // Only the reference goes back to the chat (S9.2).
    assert_eq!(success.content["research_task"], json!(id.as_str()));
    assert_eq!(success.content["phase"], json!("planning"));
    // The tool joined the turn's lease and let go of its share.
    assert_eq!(leases.depth(&session), 1);

    // A replay of the same call (attempt 2) finds the same task.
    let ToolResult::Success(again) = dispatch(2).await else {
        panic!("the replay failed")
    };
    assert_eq!(again.content["research_task"], json!(id.as_str()));
    let tasks = store.list(&session).await.unwrap();
    assert_eq!(tasks.len(), 1);
    let task = tasks.into_iter().next().unwrap();
    assert_eq!(task.id, id);
    assert_eq!(task.phase, Phase::Planning);
    // Host-supplied identity: the invocation's session and the turn's run.
    assert_eq!(task.session, session);
    assert_eq!(task.message.as_str(), run.as_str());
    let topic = store.topic(&task).await.unwrap();
    let urls = store.seed_urls(&task).await.unwrap();
    drop(turn_lease);
    drop(dir);
    (start, task, vec![topic].into_iter().chain(urls).collect())
}

#[tokio::test]
async fn the_host_starts_research_when_the_model_answers_without_calling_it() {
    let (start, _task, topic_and_urls) = start_turn("answers").await;
    assert!(matches!(start, StartCall::FromHost(_)));
    assert_eq!(topic_and_urls, vec![PROMPT.to_string()]);
}

#[tokio::test]
async fn the_model_s_own_start_call_takes_the_same_path() {
    let (start, _task, topic_and_urls) = start_turn("calls").await;
    let StartCall::FromModel(call) = &start else {
        panic!("the model's call expected")
    };
    assert_eq!(call.call_id.as_str(), "call_start");
    assert_eq!(
        topic_and_urls,
        vec![
            "solid-state batteries in 2025".to_string(),
            "https://batteries.example.org/review".to_string()
        ]
    );
}
