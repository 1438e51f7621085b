//! The Gemini and Anthropic providers against loopback servers this test
//! starts (axum), each speaking its provider's streaming format (S13,
//! issue 15 item 1): text split at any byte, two tool calls in one turn
//! (Anthropic's input fragments split inside keys, Gemini's thought
//! signature), usage, finish reasons, malformed and cut streams, an
//! overload inside the stream, 429 retried on the host clock and 401 not,
//! and a whole run through the supervisor whose second request carries the
//! transcript in the format's own shape (and a malformed call answered with
//! `invalid_arguments`, never dispatched).
#![cfg(not(target_arch = "wasm32"))]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use futures::StreamExt;
use serde_json::{Value, json};

use agent_kernel::host::{Clock, ManualClock};
use agent_kernel::ids::{OwnerId, SessionId};
use agent_kernel::run::RunStatus;
use agent_supervisor::provider::{
    FinishReason, ModelProvider, ModelRequest, ModelResponse, anthropic, collect_response, gemini,
};
use agent_supervisor::sim::tools::{SimToolsConfig, ToolLog, spawn_sim_tools};
use agent_supervisor::transcript::Message;
use agent_supervisor::{
    AnthropicConfig, AnthropicProvider, GeminiConfig, GeminiProvider, ProviderError, RetryPolicy,
    RunConfig, Runtime, RuntimeOptions,
};

#[derive(Default)]
struct Server {
    /// While set, mode `outage` answers 503 with `retry-after: 10`.
    down: std::sync::atomic::AtomicBool,
    hits: Mutex<HashMap<String, u32>>,
    bodies: Mutex<Vec<Value>>,
    headers: Mutex<Vec<HeaderMap>>,
}

fn sse_events(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| match e.get("type").and_then(Value::as_str) {
            // Anthropic names each event; Gemini sends data only.
            Some(kind) => format!("event: {kind}\ndata: {e}\n\n"),
            None => format!("data: {e}\n\n"),
        })
        .collect()
}

/// A body sent in pieces of `size` bytes, so events and UTF-8 characters
/// arrive split anywhere.
fn split_body(text: String, size: usize) -> Body {
    let pieces: Vec<Result<Bytes, std::io::Error>> = text
        .into_bytes()
        .chunks(size)
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

fn status(code: u16, retry_after: Option<&str>) -> Response {
    let mut r = Response::builder().status(StatusCode::from_u16(code).unwrap());
    if let Some(after) = retry_after {
        r = r.header("retry-after", after);
    }
    r.body(Body::from("{\"error\": {}}")).unwrap()
}

// ---- Gemini's format ----

fn g_text(t: &str) -> Value {
    json!({"candidates": [{"content": {"role": "model", "parts": [{"text": t}]}, "index": 0}]})
}
fn g_finish(reason: &str) -> Value {
    json!({"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": reason, "index": 0}],
           "usageMetadata": {"promptTokenCount": 11, "candidatesTokenCount": 5, "thoughtsTokenCount": 2, "totalTokenCount": 18}})
}

fn gemini_stream(mode: &str, turn: usize) -> Option<String> {
    let events = match mode {
        "normal" | "bytewise" => vec![g_text("Héllo, "), g_text("wörld"), g_finish("STOP")],
        "tools" => vec![
            json!({"candidates": [{"content": {"role": "model", "parts": [
                {"functionCall": {"name": "read_note", "args": {"path": "a.txt"}, "id": "fc-1"}, "thoughtSignature": "c2lnLTE="},
                {"functionCall": {"name": "send_ticket", "args": {}}}
            ]}, "index": 0}]}),
            g_finish("STOP"),
        ],
        "length" => vec![g_text("Cut"), g_finish("MAX_TOKENS")],
        "safety" => vec![g_finish("SAFETY")],
        "blocked" => vec![json!({"promptFeedback": {"blockReason": "SAFETY"}})],
        "agent" if turn == 0 => vec![
            json!({"candidates": [{"content": {"role": "model", "parts": [
                {"functionCall": {"name": "write_note", "args": {"path": "a.txt"}, "id": "fc-1"}, "thoughtSignature": "c2lnLTE="}
            ]}, "index": 0}]}),
            g_finish("STOP"),
        ],
        "agent" => vec![g_text("Done."), g_finish("STOP")],
        "partial" => vec![g_text("Hel")],
        _ => return None,
    };
    Some(sse_events(&events))
}

// ---- Anthropic's format ----

fn a_start() -> Value {
    json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
        "content": [], "model": "claude-test", "stop_reason": null,
        "usage": {"input_tokens": 13, "output_tokens": 1}}})
}
fn a_text_block(index: u64, parts: &[&str]) -> Vec<Value> {
    let mut v = vec![
        json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
    ];
    for p in parts {
        v.push(json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}}));
    }
    v.push(json!({"type": "content_block_stop", "index": index}));
    v
}
fn a_tool_block(index: u64, id: &str, name: &str, fragments: &[&str]) -> Vec<Value> {
    let mut v = vec![
        json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
    ];
    for f in fragments {
        v.push(json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": f}}));
    }
    v.push(json!({"type": "content_block_stop", "index": index}));
    v
}
fn a_end(reason: &str) -> Vec<Value> {
    vec![
        json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null}, "usage": {"output_tokens": 9}}),
        json!({"type": "message_stop"}),
    ]
}

fn anthropic_stream(mode: &str, turn: usize) -> Option<String> {
    let mut events = vec![a_start(), json!({"type": "ping"})];
    match mode {
        "normal" | "bytewise" => {
            events.extend(a_text_block(0, &["Héllo, ", "wörld"]));
            events.extend(a_end("end_turn"));
        }
        "tools" => {
            events.extend(a_text_block(0, &["Let me check."]));
            events.extend(a_tool_block(
                1,
                "toolu_1",
                "read_note",
                &["", "{\"pa", "th\": \"a.", "txt\"}"],
            ));
            events.extend(a_tool_block(2, "toolu_2", "send_ticket", &[]));
            events.extend(a_end("tool_use"));
        }
        "length" => {
            events.extend(a_text_block(0, &["Cut"]));
            events.extend(a_end("max_tokens"));
        }
        "refusal" => events.extend(a_end("refusal")),
        "overloaded" => {
            events.extend(a_text_block(0, &["Hel"]));
            events.push(json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}));
        }
        "agent" if turn == 0 => {
            events.extend(a_tool_block(
                0,
                "toolu_1",
                "write_note",
                &["{\"path\"", ": \"a.txt\"}"],
            ));
            events.extend(a_tool_block(1, "toolu_2", "write_note", &["{\"path\": "]));
            events.extend(a_end("tool_use"));
        }
        "agent" => {
            events.extend(a_text_block(0, &["Done."]));
            events.extend(a_end("end_turn"));
        }
        "partial" => events.extend(a_text_block(0, &["Hel"])),
        _ => return None,
    }
    Some(sse_events(&events))
}

async fn answer(
    State(server): State<Arc<Server>>,
    Path((format, mode, _rest)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let hit = {
        let mut hits = server.hits.lock().unwrap();
        let n = hits.entry(format!("{format}/{mode}")).or_insert(0);
        *n += 1;
        *n
    };
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    server.bodies.lock().unwrap().push(request.clone());
    server.headers.lock().unwrap().push(headers);
    // Model turns so far: Gemini's `model` contents, Anthropic's `assistant` messages.
    let (list, role) = if format == "gemini" {
        ("contents", "model")
    } else {
        ("messages", "assistant")
    };
    let turn = request[list]
        .as_array()
        .map(|m| m.iter().filter(|m| m["role"] == role).count())
        .unwrap_or(0);
    match mode.as_str() {
        "limited" if hit <= 2 => return status(429, Some("1")),
        "limited" => {}
        "unauthorised" => return status(401, None),
        "outage" if server.down.load(std::sync::atomic::Ordering::SeqCst) => {
            return status(503, Some("10"));
        }
        "malformed" => return stream_response(Body::from("data: {not json\n\n")),
        // Accepts the request and never answers.
        "silent" => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            return status(500, None);
        }
        // Answers, streams the start of the answer, then stalls for good.
        "stall" => {
            let first = if format == "gemini" {
                gemini_stream("partial", 0)
            } else {
                anthropic_stream("partial", 0)
            };
            let head = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from(
                first.unwrap_or_default(),
            ))]);
            let forever = futures::stream::pending::<Result<Bytes, std::io::Error>>();
            return stream_response(Body::from_stream(head.chain(forever)));
        }
        _ => {}
    }
    let mode = match mode.as_str() {
        "limited" => "normal",
        "outage" => "agent",
        other => other,
    };
    let text = if format == "gemini" {
        gemini_stream(mode, turn)
    } else {
        anthropic_stream(mode, turn)
    };
    let size = if mode == "bytewise" { 1 } else { 7 };
    match text {
        Some(t) => stream_response(split_body(t, size)),
        None => status(400, None),
    }
}

async fn start_server() -> (String, Arc<Server>) {
    let server = Arc::new(Server::default());
    let app = Router::new()
        .route("/{format}/{mode}/{*rest}", post(answer))
        .with_state(server.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (format!("http://{addr}"), server)
}

use agent_test_support::recording_clock;

const FORMATS: [&str; 2] = ["gemini", "anthropic"];

fn provider(base: &str, format: &str, mode: &str, clock: Arc<dyn Clock>) -> Arc<dyn ModelProvider> {
    let retry = RetryPolicy {
        max_retries: 2,
        ..RetryPolicy::default()
    };
    provider_with(base, format, mode, clock, retry)
}

fn provider_with(
    base: &str,
    format: &str,
    mode: &str,
    clock: Arc<dyn Clock>,
    retry: RetryPolicy,
) -> Arc<dyn ModelProvider> {
    match format {
        "gemini" => {
            let mut c = GeminiConfig::new(format!("{base}/gemini/{mode}/v1beta"));
            c.api_key = Some("gemini-test-key".into());
            c.retry = retry;
            Arc::new(GeminiProvider::new(c, clock).unwrap())
        }
        _ => {
            let mut c = AnthropicConfig::new(format!("{base}/anthropic/{mode}/v1"));
            c.api_key = Some("anthropic-test-key".into());
            c.retry = retry;
            Arc::new(AnthropicProvider::new(c, clock).unwrap())
        }
    }
}

fn request() -> ModelRequest {
    ModelRequest {
        model: "test-model".into(),
        system: Some("Be brief.".into()),
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

async fn ask(p: &dyn ModelProvider) -> Result<ModelResponse, ProviderError> {
    let stream = p.stream(request()).await?;
    collect_response(stream, |_| {}).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_split_at_any_byte_gives_the_text_the_usage_and_stop() {
    let (base, _server) = start_server().await;
    for format in FORMATS {
        for mode in ["normal", "bytewise"] {
            let p = provider(&base, format, mode, recording_clock());
            let r = ask(&*p)
                .await
                .unwrap_or_else(|e| panic!("{format}/{mode}: {e}"));
            assert_eq!(r.text, "Héllo, wörld", "{format}/{mode}");
            assert_eq!(r.finish, Some(FinishReason::Stop), "{format}/{mode}");
            let usage = r.usage;
            let expected = if format == "gemini" { (11, 7) } else { (13, 9) };
            assert_eq!(
                (usage.input_tokens, usage.output_tokens),
                expected,
                "{format}/{mode}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_calls_in_one_turn_are_assembled_with_ids_and_arguments() {
    let (base, _server) = start_server().await;
    for format in FORMATS {
        let p = provider(&base, format, "tools", recording_clock());
        let r = ask(&*p).await.unwrap_or_else(|e| panic!("{format}: {e}"));
        assert_eq!(r.finish, Some(FinishReason::ToolCalls), "{format}");
        assert_eq!(r.tool_calls.len(), 2, "{format}: {:?}", r.tool_calls);
        let (first, second) = (&r.tool_calls[0], &r.tool_calls[1]);
        assert_eq!(first.name, "read_note");
        let args: Value = serde_json::from_str(&first.arguments).expect("JSON arguments");
        assert_eq!(args, json!({"path": "a.txt"}), "{format}");
        assert_eq!(second.name, "send_ticket");
        assert_eq!(
            serde_json::from_str::<Value>(&second.arguments).unwrap(),
            json!({})
        );
        assert_ne!(first.id, second.id, "{format}: ids are distinct");
        if format == "gemini" {
            assert_eq!(first.id, "fc-1");
            assert_eq!(first.signature.as_deref(), Some("c2lnLTE="));
            assert_eq!(second.signature, None);
        } else {
            assert_eq!(
                (first.id.as_str(), second.id.as_str()),
                ("toolu_1", "toolu_2")
            );
            assert_eq!(r.text, "Let me check.");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_finish_reason_maps_to_the_runs_finish_reasons() {
    let (base, _server) = start_server().await;
    let cases = [
        ("gemini", "length", FinishReason::Length),
        ("gemini", "safety", FinishReason::ContentFilter),
        ("gemini", "blocked", FinishReason::ContentFilter),
        ("anthropic", "length", FinishReason::Length),
        ("anthropic", "refusal", FinishReason::ContentFilter),
    ];
    for (format, mode, expected) in cases {
        let p = provider(&base, format, mode, recording_clock());
        let r = ask(&*p)
            .await
            .unwrap_or_else(|e| panic!("{format}/{mode}: {e}"));
        assert_eq!(r.finish, Some(expected), "{format}/{mode}");
    }
    // Every documented value has a mapping; unknown ones are kept by name.
    for (wire, has_calls, expected) in [
        ("STOP", false, FinishReason::Stop),
        ("STOP", true, FinishReason::ToolCalls),
        ("MAX_TOKENS", false, FinishReason::Length),
        ("RECITATION", false, FinishReason::ContentFilter),
        ("BLOCKLIST", false, FinishReason::ContentFilter),
        ("PROHIBITED_CONTENT", false, FinishReason::ContentFilter),
        ("SPII", false, FinishReason::ContentFilter),
        (
            "MALFORMED_FUNCTION_CALL",
            true,
            FinishReason::Other("malformed_function_call".into()),
        ),
    ] {
        assert_eq!(
            gemini::finish_from_wire(wire, has_calls),
            expected,
            "{wire}"
        );
    }
    for (wire, expected) in [
        ("end_turn", FinishReason::Stop),
        ("stop_sequence", FinishReason::Stop),
        ("tool_use", FinishReason::ToolCalls),
        ("max_tokens", FinishReason::Length),
        ("model_context_window_exceeded", FinishReason::Length),
        ("refusal", FinishReason::ContentFilter),
        ("pause_turn", FinishReason::Other("pause_turn".into())),
    ] {
        assert_eq!(anthropic::finish_from_wire(wire), expected, "{wire}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_cut_and_overloaded_streams_are_errors_not_answers() {
    let (base, _server) = start_server().await;
    for format in FORMATS {
        let p = provider(&base, format, "malformed", recording_clock());
        let e = ask(&*p).await.expect_err("malformed");
        assert!(
            matches!(e, ProviderError::Malformed { .. }),
            "{format}: {e}"
        );

        let p = provider(&base, format, "partial", recording_clock());
        let e = ask(&*p).await.expect_err("cut before the end");
        assert!(e.round_may_repeat(), "{format}: {e}");
    }
    let p = provider(&base, "anthropic", "overloaded", recording_clock());
    let e = ask(&*p).await.expect_err("overloaded mid-stream");
    assert!(
        matches!(e, ProviderError::Disconnected { events } if events > 0),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_retried_on_the_host_clock_and_a_401_fails_at_once() {
    let (base, server) = start_server().await;
    for format in FORMATS {
        let clock = recording_clock();
        let p = provider(&base, format, "limited", clock.clone());
        let r = ask(&*p).await.unwrap_or_else(|e| panic!("{format}: {e}"));
        assert_eq!(r.text, "Héllo, wörld");
        // Two refusals, each followed by the server's retry-after of 1 s.
        assert_eq!(
            *clock.sleeps.lock().unwrap(),
            [Duration::from_secs(1), Duration::from_secs(1)],
            "{format}"
        );

        let clock = recording_clock();
        let p = provider(&base, format, "unauthorised", clock.clone());
        let e = ask(&*p).await.expect_err("401");
        assert!(
            matches!(
                e,
                ProviderError::Http {
                    status: 401,
                    attempts: 1,
                    ..
                }
            ),
            "{format}: {e}"
        );
        assert!(
            clock.sleeps.lock().unwrap().is_empty(),
            "{format}: no retry"
        );
    }
    let hits = server.hits.lock().unwrap();
    assert_eq!(hits["gemini/limited"], 3);
    assert_eq!(hits["anthropic/unauthorised"], 1);
}

/// A runtime on the memory host whose provider calls the loopback server.
fn runtime_against(base: &str, format: &str) -> (Runtime, ToolLog) {
    let clock = Arc::new(ManualClock::new(1_767_225_600_000));
    let host = agent_test_support::memory_host(clock.clone(), 1);
    let log = ToolLog::default();
    let tools = spawn_sim_tools(
        host.executor.clone(),
        clock.clone(),
        log.clone(),
        SimToolsConfig::default(),
    );
    let runtime = Runtime::new(
        host,
        OwnerId::new("proc").unwrap(),
        tools,
        provider(base, format, "agent", clock),
        RuntimeOptions::default(),
    );
    (runtime, log)
}

async fn run_through(format: &str) -> (Runtime, ToolLog, Arc<Server>) {
    let (base, server) = start_server().await;
    let (runtime, log) = runtime_against(&base, format);
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
    assert_eq!(record.status, RunStatus::Completed, "{format}: {record:?}");
    assert_eq!(
        runtime.output(&run).await.unwrap().as_deref(),
        Some("Done.")
    );
    (runtime, log, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gemini_run_sends_back_function_responses_with_ids_names_and_signatures() {
    let (_runtime, log, server) = run_through("gemini").await;
    assert_eq!(log.executions().len(), 1);
    let bodies = server.bodies.lock().unwrap();
    assert_eq!(bodies.len(), 2);
    let system = bodies[0]["systemInstruction"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert_eq!(system, agent_supervisor::AGENT_SYSTEM_PROMPT.trim_end());
    let declarations = bodies[0]["tools"][0]["functionDeclarations"]
        .as_array()
        .unwrap();
    let read = declarations
        .iter()
        .find(|d| d["name"] == "read_note")
        .expect("read_note declared");
    assert_eq!(read["parametersJsonSchema"]["type"], "object");
    let contents = bodies[1]["contents"].as_array().unwrap();
    let roles: Vec<&str> = contents
        .iter()
        .map(|c| c["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "model", "user"]);
    let call = &contents[1]["parts"][0];
    assert_eq!(call["functionCall"]["id"], "fc-1");
    assert_eq!(call["functionCall"]["args"], json!({"path": "a.txt"}));
    assert_eq!(call["thoughtSignature"], "c2lnLTE=", "sent back as it came");
    let response = &contents[2]["parts"][0]["functionResponse"];
    assert_eq!(response["id"], "fc-1");
    assert_eq!(response["name"], "write_note");
    assert!(response["response"]["result"].is_object(), "{response}");
    let headers = server.headers.lock().unwrap();
    assert_eq!(headers[0]["x-goog-api-key"], "gemini-test-key");
    assert!(headers[0].get("authorization").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anthropic_run_sends_back_tool_results_and_never_dispatches_a_malformed_call() {
    let (_runtime, log, server) = run_through("anthropic").await;
    let executed: Vec<String> = log.executions().into_iter().map(|e| e.tool).collect();
    assert_eq!(
        executed,
        ["write_note"],
        "the malformed call is not dispatched"
    );
    let bodies = server.bodies.lock().unwrap();
    assert_eq!(bodies.len(), 2);
    assert_eq!(
        bodies[0]["system"][0]["text"].as_str(),
        Some(agent_supervisor::AGENT_SYSTEM_PROMPT.trim_end())
    );
    assert_eq!(bodies[0]["max_tokens"], anthropic::DEFAULT_MAX_TOKENS);
    let read = bodies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "read_note")
        .expect("read_note offered");
    assert_eq!(read["input_schema"]["type"], "object");
    let messages = bodies[1]["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"], "roles alternate");
    let uses = messages[1]["content"].as_array().unwrap();
    assert_eq!(uses[0]["type"], "tool_use");
    assert_eq!(uses[0]["id"], "toolu_1");
    assert_eq!(uses[0]["input"], json!({"path": "a.txt"}));
    // Both results go back in one user message, in call order.
    let results = messages[2]["content"].as_array().unwrap();
    let ids: Vec<&str> = results
        .iter()
        .map(|r| r["tool_use_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["toolu_1", "toolu_2"]);
    assert!(
        results[1]["content"]
            .as_str()
            .unwrap()
            .contains("invalid_arguments"),
        "{}",
        results[1]
    );
    let headers = server.headers.lock().unwrap();
    assert_eq!(headers[0]["x-api-key"], "anthropic-test-key");
    assert_eq!(
        headers[0]["anthropic-version"],
        anthropic::ANTHROPIC_VERSION
    );
}

/// S13.2: no retry starts whose wait would end past `max_elapsed` from the
/// first attempt. The server asks for 10 s between attempts, so a bound of
/// 30 s allows attempts at 0, 10, 20 and 30 s; 29 s one fewer; 40 s one more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retry_bound_in_time_is_held_at_below_and_above() {
    let (base, server) = start_server().await;
    server.down.store(true, std::sync::atomic::Ordering::SeqCst);
    for (i, (bound_s, attempts)) in [(30, 4u32), (29, 3), (40, 5)].into_iter().enumerate() {
        let format = FORMATS[i % 2];
        let clock = recording_clock();
        let retry = RetryPolicy {
            max_retries: 10,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            max_elapsed: Duration::from_secs(bound_s),
            ..RetryPolicy::default()
        };
        let p = provider_with(&base, format, "outage", clock.clone(), retry);
        let e = ask(&*p).await.expect_err("down the whole time");
        assert!(
            matches!(e, ProviderError::Http { status: 503, attempts: a, .. } if a == attempts),
            "bound {bound_s} s: {e}"
        );
        assert!(e.is_outage());
        let slept: Duration = clock.sleeps.lock().unwrap().iter().sum();
        assert!(
            slept <= Duration::from_secs(bound_s),
            "bound {bound_s} s: slept {slept:?}"
        );
    }
}

#[test]
fn backoff_doubles_with_jitter_in_its_upper_half_and_honours_retry_after() {
    let retry = RetryPolicy {
        max_retries: 10,
        initial_backoff: Duration::from_secs(1),
        max_backoff: Duration::from_secs(8),
        max_elapsed: Duration::from_secs(60),
        ..RetryPolicy::default()
    };
    for (n, full) in [(0, 1), (1, 2), (2, 4), (3, 8), (4, 8), (9, 8)] {
        let full = Duration::from_secs(full);
        assert_eq!(retry.backoff(n, None, 0.0), full / 2, "retry {n}");
        assert_eq!(retry.backoff(n, None, 1.0), full, "retry {n}");
        let mid = retry.backoff(n, None, 0.5);
        assert!(mid > full / 2 && mid < full, "retry {n}: {mid:?}");
    }
    assert_eq!(
        retry.backoff(0, Some(Duration::from_secs(3)), 0.9),
        Duration::from_secs(3),
        "retry-after is honoured as sent"
    );
    assert_eq!(
        retry.backoff(0, Some(Duration::from_secs(300)), 0.0),
        Duration::from_secs(300),
        "a server-given delay is never shortened (past max_elapsed it is not retried at all)"
    );
}

/// S13.2: an outage past the bound interrupts the run naming the provider;
/// Resume, once the provider is back, completes it. A 401 fails at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_interrupts_the_run_and_resume_completes_it_but_a_401_fails() {
    use agent_kernel::run::StopReason;
    for format in FORMATS {
        let (base, server) = start_server().await;
        server.down.store(true, std::sync::atomic::Ordering::SeqCst);
        let clock = Arc::new(ManualClock::new(1_767_225_600_000));
        let host = agent_test_support::memory_host(clock.clone(), 1);
        let log = ToolLog::default();
        let tools = spawn_sim_tools(
            host.executor.clone(),
            clock.clone(),
            log.clone(),
            SimToolsConfig::default(),
        );
        let retry = RetryPolicy {
            max_retries: 10,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            max_elapsed: Duration::from_secs(30),
            ..RetryPolicy::default()
        };
        // Backoff sleeps pass at once on their own clock.
        let p = provider_with(&base, format, "outage", recording_clock(), retry);
        let runtime = Runtime::new(
            host,
            OwnerId::new("proc").unwrap(),
            tools,
            p,
            RuntimeOptions::default(),
        );
        let session = SessionId::new("s").unwrap();
        let run = runtime
            .start(&session, "read a.txt", RunConfig::default())
            .await
            .unwrap();
        let record = tokio::time::timeout(Duration::from_secs(20), runtime.wait_settled(&run))
            .await
            .expect("settles")
            .unwrap();
        assert_eq!(
            record.status,
            RunStatus::Interrupted,
            "{format}: {record:?}"
        );
        match &record.stop_reason {
            Some(StopReason::ProviderUnavailable { provider, message }) => {
                assert_eq!(provider, format);
                assert!(message.contains("503"), "{message}");
            }
            other => panic!("{format}: {other:?}"),
        }
        let hits_while_down = server.hits.lock().unwrap()[&format!("{format}/outage")];
        assert_eq!(hits_while_down, 4, "{format}: attempts at 0, 10, 20, 30 s");

        server
            .down
            .store(false, std::sync::atomic::Ordering::SeqCst);
        runtime.resume(&run).await.unwrap();
        let record = tokio::time::timeout(Duration::from_secs(20), runtime.wait_settled(&run))
            .await
            .expect("settles")
            .unwrap();
        assert_eq!(record.status, RunStatus::Completed, "{format}: {record:?}");
        assert_eq!(
            runtime.output(&run).await.unwrap().as_deref(),
            Some("Done.")
        );

        // An authentication failure is not an outage: failed, one attempt.
        let p = provider_with(&base, format, "unauthorised", recording_clock(), retry);
        let clock = Arc::new(ManualClock::new(1_767_225_600_000));
        let host = agent_test_support::memory_host(clock.clone(), 2);
        let tools = spawn_sim_tools(
            host.executor.clone(),
            clock,
            ToolLog::default(),
            SimToolsConfig::default(),
        );
        let runtime = Runtime::new(
            host,
            OwnerId::new("proc").unwrap(),
            tools,
            p,
            RuntimeOptions::default(),
        );
        let run = runtime
            .start(&session, "read a.txt", RunConfig::default())
            .await
            .unwrap();
        let record = tokio::time::timeout(Duration::from_secs(20), runtime.wait_settled(&run))
            .await
            .expect("settles")
            .unwrap();
        assert_eq!(record.status, RunStatus::Failed, "{format}: {record:?}");
        assert!(
            matches!(&record.stop_reason, Some(StopReason::RuntimeError { message, .. }) if message.contains("401")),
            "{format}: {:?}",
            record.stop_reason
        );
        assert_eq!(
            server.hits.lock().unwrap()[&format!("{format}/unauthorised")],
            1
        );
    }
}

/// S13.2: natively, a provider that accepts a request and never answers,
/// or stalls in the middle of its answer, is a transport failure after the
/// idle timeout, not a hang: retried before the answer, then an outage
/// (which interrupts the run); a stalled answer is a disconnect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_or_stalled_provider_times_out_instead_of_hanging() {
    let (base, server) = start_server().await;
    let retry = RetryPolicy {
        max_retries: 1,
        idle_timeout: Duration::from_millis(300),
        ..RetryPolicy::default()
    };
    for format in FORMATS {
        let started = std::time::Instant::now();
        let p = provider_with(&base, format, "silent", recording_clock(), retry);
        let e = ask(&*p).await.expect_err("never answers");
        assert!(
            matches!(e, ProviderError::Transport { attempts: 2, .. }),
            "{format}: {e}"
        );
        assert!(e.is_outage(), "{format}: {e}");
        let p = provider_with(&base, format, "stall", recording_clock(), retry);
        let e = ask(&*p).await.expect_err("stalls");
        assert!(e.round_may_repeat() && e.is_outage(), "{format}: {e}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{format}: {:?}",
            started.elapsed()
        );
    }
    assert_eq!(server.hits.lock().unwrap()["gemini/silent"], 2);
}
