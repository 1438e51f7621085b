//! The OpenAI-compatible provider against a Chat Completions server on
//! loopback that this test starts (axum): normal streams, tool-call deltas
//! split across chunks, malformed and partial SSE, HTTP 429 and 5xx with
//! bounded retry and backoff on the host clock, a disconnect mid-stream, and
//! a whole run through the supervisor.
#![cfg(not(target_arch = "wasm32"))]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use futures::StreamExt;
use serde_json::{Value, json};

use agent_kernel::host::ManualClock;
use agent_kernel::ids::{OwnerId, SessionId};
use agent_kernel::run::RunStatus;
use agent_supervisor::provider::{
    FinishReason, ModelEvent, ModelProvider, ModelRequest, collect_response,
};
use agent_supervisor::sim::tools::{SimToolsConfig, ToolLog, spawn_sim_tools};
use agent_supervisor::transcript::Message;
use agent_supervisor::{
    OpenAiConfig, OpenAiProvider, ProviderError, RunConfig, Runtime, RuntimeOptions,
};

#[derive(Default)]
struct Server {
    hits: Mutex<HashMap<String, u32>>,
    bodies: Mutex<Vec<Value>>,
}

fn sse(chunks: &[Value], done: bool) -> String {
    let mut s = String::new();
    for c in chunks {
        s.push_str(&format!("data: {c}\n\n"));
    }
    if done {
        s.push_str("data: [DONE]\n\n");
    }
    s
}

fn text_chunk(t: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {"content": t}, "finish_reason": null}]})
}
fn finish_chunk(reason: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}
fn usage_chunk() -> Value {
    json!({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7}})
}

/// A body sent in small pieces (7 bytes each), so SSE lines arrive split.
fn split_body(text: String) -> Body {
    let pieces: Vec<Result<Bytes, std::io::Error>> = text
        .into_bytes()
        .chunks(7)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    Body::from_stream(futures::stream::iter(pieces))
}

fn stream_response(body: Body) -> Response {
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(body)
        .unwrap()
}

async fn completions(
    State(server): State<Arc<Server>>,
    Path(mode): Path<String>,
    body: String,
) -> Response {
    let hit = {
        let mut hits = server.hits.lock().unwrap();
        let n = hits.entry(mode.clone()).or_insert(0);
        *n += 1;
        *n
    };
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let turns = request["messages"]
        .as_array()
        .map(|m| m.iter().filter(|m| m["role"] == "assistant").count())
        .unwrap_or(0);
    server.bodies.lock().unwrap().push(request.clone());
    let normal = || {
        sse(
            &[
                text_chunk("Hel"),
                text_chunk("lo"),
                finish_chunk("stop"),
                usage_chunk(),
            ],
            true,
        )
    };
    match mode.as_str() {
        "normal" => stream_response(split_body(normal())),
        "tools" => {
            let chunks = [
                json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": null,
                    "tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "read_", "arguments": ""}}]}}]}),
                json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"name": "note", "arguments": "{\"pa"}}]}}]}),
                json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "th\": \"a.txt\"}"}}]}}]}),
                json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "call_2", "type": "function", "function": {"name": "send_ticket", "arguments": "{}"}}]}}]}),
                finish_chunk("tool_calls"),
                usage_chunk(),
            ];
            stream_response(split_body(sse(&chunks, true)))
        }
        // A whole agent run: a tool call first, then the answer.
        "agent" if turns == 0 => {
            let chunks = [
                json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "read_note", "arguments": "{\"path\": \"a.txt\"}"}}]}}]}),
                finish_chunk("tool_calls"),
            ];
            stream_response(split_body(sse(&chunks, true)))
        }
        "agent" => stream_response(split_body(normal())),
        // Answers with what the person said last, so each turn differs.
        "echo" => {
            let said = request["messages"]
                .as_array()
                .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
                .and_then(|m| m["content"].as_str())
                .unwrap_or_default()
                .to_owned();
            let chunks = [
                text_chunk(&format!("You said: {said}")),
                finish_chunk("stop"),
            ];
            stream_response(split_body(sse(&chunks, true)))
        }
        "malformed" => stream_response(Body::from("data: {not json\n\n")),
        "partial" => stream_response(Body::from(sse(&[text_chunk("Hel")], false))),
        "cut" => stream_response(Body::from(
            "data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"Hel",
        )),
        "disconnect" | "flaky" if mode == "disconnect" || hit == 1 => {
            let pieces: Vec<Result<Bytes, std::io::Error>> = vec![
                Ok(Bytes::from(sse(&[text_chunk("Hel")], false))),
                Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "server went away",
                )),
            ];
            // The error comes a little later, after the headers and the first
            // event went out: the connection is reset mid-stream.
            let paced = futures::stream::iter(pieces).then(|piece| async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                piece
            });
            stream_response(Body::from_stream(paced))
        }
        "flaky" => stream_response(split_body(normal())),
        "limited" if hit <= 2 => Response::builder()
            .status(StatusCode::TOO_MANY_REQUESTS)
            .header("retry-after", "1")
            .body(Body::empty())
            .unwrap(),
        "limited" => stream_response(split_body(normal())),
        "broken" => Response::builder().status(503).body(Body::empty()).unwrap(),
        _ => Response::builder()
            .status(400)
            .body(Body::from("bad request"))
            .unwrap(),
    }
}

async fn start_server() -> (String, Arc<Server>) {
    let server = Arc::new(Server::default());
    let app = Router::new()
        .route("/{mode}/v1/chat/completions", post(completions))
        .with_state(server.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (format!("http://{addr}"), server)
}

use agent_test_support::{RecordingClock, recording_clock};

fn provider(base: &str, mode: &str, clock: Arc<RecordingClock>) -> OpenAiProvider {
    let mut config = OpenAiConfig::new(format!("{base}/{mode}/v1"));
    config.api_key = Some("sk-test".into());
    config.max_retries = 2;
    OpenAiProvider::new(config, clock).unwrap()
}

fn request() -> ModelRequest {
    ModelRequest {
        model: "test-model".into(),
        system: None,
        messages: vec![Message::User {
            content: "hi".into(),
        }]
        .into(),
        tools: Vec::new().into(),
        temperature: None,
        max_output_tokens: None,
        reasoning: Default::default(),
    }
}

async fn ask(
    p: &OpenAiProvider,
) -> Result<agent_supervisor::provider::ModelResponse, ProviderError> {
    let stream = p.stream(request()).await?;
    collect_response(stream, |_| {}).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_normal_stream_gives_text_usage_and_finish() {
    let (base, server) = start_server().await;
    let clock = recording_clock();
    let p = provider(&base, "normal", clock.clone());
    let mut stream = p.stream(request()).await.unwrap();
    let mut events = Vec::new();
    while let Some(e) = stream.next().await {
        events.push(e.unwrap());
    }
    assert_eq!(
        events,
        vec![
            ModelEvent::TextDelta("Hel".into()),
            ModelEvent::TextDelta("lo".into()),
            ModelEvent::Usage(agent_supervisor::provider::ModelUsage {
                input_tokens: 11,
                output_tokens: 7,
                ..Default::default()
            }),
            ModelEvent::Finish(FinishReason::Stop),
        ]
    );
    let body = server.bodies.lock().unwrap()[0].clone();
    assert_eq!(body["stream"], true);
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert!(clock.sleeps.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_tool_call_deltas_split_across_chunks_are_assembled() {
    let (base, _server) = start_server().await;
    let r = ask(&provider(&base, "tools", recording_clock()))
        .await
        .unwrap();
    assert_eq!(r.finish, Some(FinishReason::ToolCalls));
    assert_eq!(r.tool_calls.len(), 2);
    assert_eq!(r.tool_calls[0].id, "call_1");
    assert_eq!(r.tool_calls[0].name, "read_note");
    assert_eq!(r.tool_calls[0].arguments, "{\"path\": \"a.txt\"}");
    assert_eq!(r.tool_calls[1].name, "send_ticket");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_malformed_and_partial_sse_are_errors_not_panics() {
    let (base, _server) = start_server().await;
    let clock = recording_clock();
    assert!(matches!(
        ask(&provider(&base, "malformed", clock.clone())).await,
        Err(ProviderError::Malformed { .. })
    ));
    for mode in ["partial", "cut", "disconnect"] {
        let e = ask(&provider(&base, mode, clock.clone()))
            .await
            .unwrap_err();
        assert!(
            matches!(e, ProviderError::Disconnected { .. }),
            "{mode}: {e:?}"
        );
        assert!(e.round_may_repeat());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_429_is_retried_with_backoff_on_the_host_clock() {
    let (base, server) = start_server().await;
    let clock = recording_clock();
    let r = ask(&provider(&base, "limited", clock.clone()))
        .await
        .unwrap();
    assert_eq!(r.text, "Hello");
    assert_eq!(server.hits.lock().unwrap()["limited"], 3);
    // Retry-After: 1 second, twice.
    assert_eq!(
        *clock.sleeps.lock().unwrap(),
        vec![Duration::from_secs(1); 2]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_5xx_retries_are_bounded_and_4xx_is_not_retried() {
    let (base, server) = start_server().await;
    let clock = recording_clock();
    match ask(&provider(&base, "broken", clock.clone())).await {
        Err(ProviderError::Http {
            status: 503,
            attempts: 3,
            ..
        }) => {}
        other => panic!("expected a bounded 503 failure, got {other:?}"),
    }
    assert_eq!(server.hits.lock().unwrap()["broken"], 3);
    // Exponential backoff of 500 ms, then 1 s, each jittered in its upper half.
    let sleeps = clock.sleeps.lock().unwrap().clone();
    assert_eq!(sleeps.len(), 2, "{sleeps:?}");
    for (slept, full) in sleeps
        .iter()
        .zip([Duration::from_millis(500), Duration::from_secs(1)])
    {
        assert!(*slept >= full / 2 && *slept <= full, "{sleeps:?}");
    }
    match ask(&provider(&base, "unknown", clock.clone())).await {
        Err(ProviderError::Http {
            status: 400,
            attempts: 1,
            ..
        }) => {}
        other => panic!("expected a 400 without retry, got {other:?}"),
    }
    assert!(OpenAiProvider::new(OpenAiConfig::new("ftp://x"), clock.clone()).is_err());
    assert!(OpenAiProvider::new(OpenAiConfig::new("not a url"), clock).is_err());
}

/// A runtime on the memory host whose provider calls the loopback server's
/// `mode`.
fn runtime_against(base: &str, mode: &str) -> (Runtime, ToolLog) {
    let clock = Arc::new(ManualClock::new(1_767_225_600_000));
    let host = agent_test_support::memory_host(clock.clone(), 1);
    let log = ToolLog::default();
    let tools = spawn_sim_tools(
        host.executor.clone(),
        clock.clone(),
        log.clone(),
        SimToolsConfig::default(),
    );
    let p = Arc::new(
        OpenAiProvider::new(OpenAiConfig::new(format!("{base}/{mode}/v1")), clock).unwrap(),
    );
    let runtime = Runtime::new(
        host,
        OwnerId::new("proc").unwrap(),
        tools,
        p,
        RuntimeOptions::default(),
    );
    (runtime, log)
}

async fn run_against(mode: &str) -> (RunStatus, Option<String>, Arc<Server>, ToolLog) {
    let (base, server) = start_server().await;
    let (runtime, log) = runtime_against(&base, mode);
    let run = runtime
        .start(
            &SessionId::new("s").unwrap(),
            "read a.txt",
            RunConfig::default(),
        )
        .await
        .unwrap();
    let record = tokio::time::timeout(Duration::from_secs(20), runtime.wait_settled(&run))
        .await
        .expect("the run settles")
        .unwrap();
    (
        record.status,
        runtime.output(&run).await.unwrap(),
        server,
        log,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_through_the_openai_provider_completes_with_a_tool_call() {
    let (status, output, server, _log) = run_against("agent").await;
    assert_eq!(status, RunStatus::Completed);
    assert_eq!(output.as_deref(), Some("Hello"));
    let bodies = server.bodies.lock().unwrap();
    assert_eq!(bodies.len(), 2);
    // The second request carries the tool result for the model's call id.
    let messages = bodies[1]["messages"].as_array().unwrap();
    assert_eq!(messages.last().unwrap()["role"], "tool");
    assert_eq!(messages.last().unwrap()["tool_call_id"], "c1");
    // Issue 14 item 2: every request of an Agent run, as the server receives
    // it, opens with the default Agent system prompt.
    for body in bodies.iter() {
        let first = &body["messages"][0];
        assert_eq!(first["role"], "system", "{first}");
        assert_eq!(
            first["content"].as_str(),
            Some(agent_supervisor::AGENT_SYSTEM_PROMPT.trim_end())
        );
    }
    assert!(
        bodies[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["function"]["name"] == "read_note")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disconnect_mid_stream_repeats_the_round_once_nothing_was_committed() {
    let (status, output, server, _log) = run_against("flaky").await;
    assert_eq!(status, RunStatus::Completed);
    assert_eq!(output.as_deref(), Some("Hello"));
    assert_eq!(server.hits.lock().unwrap()["flaky"], 2);
}

/// S12 (issue 14 item 1): the third turn of a session, as the server
/// receives it, carries the first two turns after the system prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_third_turn_reaches_the_server_with_the_first_two() {
    let (base, server) = start_server().await;
    let (runtime, _log) = runtime_against(&base, "echo");
    let session = SessionId::new("chat").unwrap();
    for prompt in ["first", "second", "third"] {
        let run = runtime
            .start(&session, prompt, RunConfig::default())
            .await
            .unwrap();
        let record = tokio::time::timeout(Duration::from_secs(20), runtime.wait_settled(&run))
            .await
            .expect("the run settles")
            .unwrap();
        assert_eq!(record.status, RunStatus::Completed);
    }
    let bodies = server.bodies.lock().unwrap();
    assert_eq!(bodies.len(), 3);
    let sent: Vec<(String, String)> = bodies[2]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("system", agent_supervisor::AGENT_SYSTEM_PROMPT.trim_end()),
        ("user", "first"),
        ("assistant", "You said: first"),
        ("user", "second"),
        ("assistant", "You said: second"),
        ("user", "third"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(r, c)| ((*r).to_owned(), (*c).to_owned()))
        .collect();
    assert_eq!(sent, expected);
}
