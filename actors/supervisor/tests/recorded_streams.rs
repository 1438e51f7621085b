//! Whole runs against a loopback server that replays streams written from
//! each provider's public API reference (tests/fixtures/<format>/), issue 34:
//! the answer, the calls dispatched, the usage recorded and the history
//! sent back in the next request's body — Anthropic's signed thinking and
//! server-side blocks sent back as received and its zero-argument call as
//! `{}`, OpenAI-compatible parallel calls sharing an index and content as
//! typed parts, Gemini's streamed function-call arguments — and the
//! server-given retry delays and 4xx explanations of S13.2.
#![cfg(not(target_arch = "wasm32"))]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};

use agent_kernel::host::{Clock, ManualClock};
use agent_kernel::ids::{OwnerId, SessionId};
use agent_kernel::run::{AgentRun, RunStatus, StopReason};
use agent_supervisor::provider::{ModelProvider, ModelRequest, collect_response};
use agent_supervisor::sim::tools::{SimToolsConfig, ToolLog, spawn_sim_tools};
use agent_supervisor::transcript::Message;
use agent_supervisor::{
    AnthropicConfig, AnthropicProvider, GeminiConfig, GeminiProvider, OpenAiConfig, OpenAiProvider,
    ProviderError, RetryPolicy, RunConfig, Runtime, RuntimeOptions,
};

#[derive(Default)]
struct Server {
    bodies: Mutex<Vec<Value>>,
    hits: Mutex<u32>,
}

fn fixture(path: &str) -> String {
    let full = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// A body sent in pieces of 5 bytes, so events arrive split anywhere.
fn split_body(text: String) -> Body {
    let pieces: Vec<Result<Bytes, std::io::Error>> = text
        .into_bytes()
        .chunks(5)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    Body::from_stream(futures::stream::iter(pieces))
}

/// `/{format}/{mode}/...`: mode `run` replays `run_round{N}.sse` for the
/// N-th model round; `quota` answers Gemini's recorded 429 once, then the
/// final round; `unsupported` answers OpenAI's 400.
async fn answer(
    State(server): State<Arc<Server>>,
    Path((format, mode, _rest)): Path<(String, String, String)>,
    body: String,
) -> Response {
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    server.bodies.lock().unwrap().push(request.clone());
    let hit = {
        let mut hits = server.hits.lock().unwrap();
        *hits += 1;
        *hits
    };
    let (list, role) = match format.as_str() {
        "gemini" => ("contents", "model"),
        _ => ("messages", "assistant"),
    };
    let round = request[list]
        .as_array()
        .map(|m| m.iter().filter(|m| m["role"] == role).count())
        .unwrap_or(0);
    let error = |status: u16, body: String| {
        Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap()
    };
    match mode.as_str() {
        "quota" if hit == 1 => return error(429, fixture("gemini/retry_info_429.json")),
        "unsupported" => {
            return error(
                400,
                json!({"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
                                 "type": "invalid_request_error", "param": "max_tokens", "code": "unsupported_parameter"}})
                .to_string(),
            );
        }
        _ => {}
    }
    let round = if mode == "quota" { 1 } else { round };
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(split_body(fixture(&format!(
            "{format}/run_round{round}.sse"
        ))))
        .unwrap()
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

fn provider(
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
        "anthropic" => {
            let mut c = AnthropicConfig::new(format!("{base}/anthropic/{mode}/v1"));
            c.api_key = Some("anthropic-test-key".into());
            c.retry = retry;
            Arc::new(AnthropicProvider::new(c, clock).unwrap())
        }
        _ => {
            let mut c = OpenAiConfig::new(format!("{base}/openai/{mode}/v1"));
            c.api_key = Some("openai-test-key".into());
            c.max_retries = retry.max_retries;
            Arc::new(OpenAiProvider::new(c, clock).unwrap())
        }
    }
}

/// A run of `format` against the fixtures: its record and what the
/// server received.
async fn run(format: &str) -> (AgentRun, ToolLog, Arc<Server>, Option<String>) {
    let (base, server) = start_server().await;
    let clock = Arc::new(ManualClock::new(1_767_225_600_000));
    let host = agent_test_support::memory_host(clock.clone(), 1);
    let log = ToolLog::default();
    let tools = spawn_sim_tools(
        host.executor.clone(),
        clock.clone(),
        log.clone(),
        SimToolsConfig::default(),
    );
    let p = provider(&base, format, "run", clock, RetryPolicy::default());
    let runtime = Runtime::new(
        host,
        OwnerId::new("proc").unwrap(),
        tools,
        p,
        RuntimeOptions::default(),
    );
    let run = runtime
        .start(
            &SessionId::new("s").unwrap(),
            "write the notes",
            RunConfig::default(),
        )
        .await
        .unwrap();
    let record = tokio::time::timeout(Duration::from_secs(30), runtime.wait_settled(&run))
        .await
        .expect("the run settles")
        .unwrap();
    let output = runtime.output(&run).await.unwrap();
    (record, log, server, output)
}

fn executed(log: &ToolLog) -> Vec<String> {
    log.executions().into_iter().map(|e| e.tool).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anthropic_run_sends_signed_thinking_and_server_blocks_back_and_a_zero_argument_call_as_an_empty_object()
 {
    let (record, log, server, output) = run("anthropic").await;
    assert_eq!(record.status, RunStatus::Completed, "{record:?}");
    assert_eq!(
        output.as_deref(),
        Some("Done."),
        "reasoning is not the answer"
    );
    assert_eq!(
        executed(&log),
        ["write_note"],
        "the server-side tool use is never dispatched as ours"
    );
    // message_delta's 612 over message_start's 60,385, then round 2's 700.
    assert_eq!(record.usage.input_tokens, 612 + 700);
    assert_eq!(record.usage.output_tokens, 89 + 3);
    let bodies = server.bodies.lock().unwrap();
    assert_eq!(bodies.len(), 2);
    let turn = bodies[1]["messages"][1]["content"].as_array().unwrap();
    let kinds: Vec<&str> = turn.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "thinking",
            "server_tool_use",
            "web_search_tool_result",
            "tool_use",
            "tool_use"
        ]
    );
    assert_eq!(
        turn[0],
        json!({"type": "thinking", "thinking": "Search first, then write the note.",
               "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/=="}),
        "byte for byte"
    );
    assert_eq!(turn[1]["input"], json!({"query": "notes"}));
    assert_eq!(
        turn[2]["content"][0]["encrypted_content"],
        "Ev0DCioIAxgCIiQ3NmU4ZmI4OC1k"
    );
    assert_eq!(turn[3]["input"], json!({"path": "a.txt"}));
    assert_eq!(turn[4]["id"], "toolu_01NoArgs");
    assert_eq!(turn[4]["input"], json!({}), "never {{\"_raw\": \"\"}}");
    let results: Vec<&str> = bodies[1]["messages"][2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["tool_use_id"].as_str().unwrap())
        .collect();
    assert_eq!(results, ["toolu_01Write", "toolu_01NoArgs"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_compatible_run_keeps_parallel_calls_sharing_an_index_apart() {
    let (record, log, server, output) = run("openai").await;
    assert_eq!(record.status, RunStatus::Completed, "{record:?}");
    assert_eq!(
        output.as_deref(),
        Some("Done."),
        "text parts are the answer, thinking parts never"
    );
    assert_eq!(executed(&log), ["write_note", "write_note"]);
    assert_eq!(record.usage.input_tokens, 200 + 260);
    let bodies = server.bodies.lock().unwrap();
    let assistant = &bodies[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap()
        .clone();
    let ids: Vec<&str> = assistant["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["call_one", "call_two"]);
    let args: Vec<&str> = assistant["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["function"]["arguments"].as_str().unwrap())
        .collect();
    assert_eq!(args, [r#"{"path": "a.txt"}"#, r#"{"path": "b.txt"}"#]);
    assert!(
        !bodies[1].to_string().contains("Two notes at once."),
        "reasoning is not sent back as the answer"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gemini_run_assembles_streamed_arguments_and_sends_them_back() {
    let (record, log, server, output) = run("gemini").await;
    assert_eq!(record.status, RunStatus::Completed, "{record:?}");
    assert_eq!(output.as_deref(), Some("Done."));
    assert_eq!(executed(&log), ["write_note"]);
    assert_eq!(record.usage.input_tokens, 90 + 120);
    let bodies = server.bodies.lock().unwrap();
    let call = &bodies[1]["contents"][1]["parts"][0];
    assert_eq!(call["functionCall"]["name"], "write_note");
    assert_eq!(call["functionCall"]["args"], json!({"path": "a.txt"}));
    assert_eq!(call["thoughtSignature"], "Q2lRQjR5Nk5m");
}

fn one_request() -> ModelRequest {
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

/// S13.2: Gemini's `RetryInfo.retryDelay` (34 s) is waited for as given
/// when it fits the bound; when it does not, no early retry is made and the
/// error is an outage (the run is interrupted naming the provider).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_retry_delay_is_honoured_within_the_bound_and_never_shortened() {
    for (bound_s, honoured) in [(60, true), (34, true), (33, false)] {
        let (base, server) = start_server().await;
        let clock = agent_test_support::recording_clock();
        let retry = RetryPolicy {
            max_elapsed: Duration::from_secs(bound_s),
            ..RetryPolicy::default()
        };
        let p = provider(&base, "gemini", "quota", clock.clone(), retry);
        let result = match p.stream(one_request()).await {
            Ok(stream) => collect_response(stream, |_| {}).await,
            Err(e) => Err(e),
        };
        let sleeps = clock.sleeps.lock().unwrap().clone();
        if honoured {
            let r = result.expect("answered after the wait");
            assert_eq!(r.text, "Done.");
            assert_eq!(sleeps, [Duration::from_secs(34)], "bound {bound_s}");
            assert_eq!(*server.hits.lock().unwrap(), 2);
        } else {
            let e = result.expect_err("past the bound");
            assert!(
                matches!(e, ProviderError::Http { status: 429, .. }) && e.is_outage(),
                "{e}"
            );
            assert!(
                e.to_string().contains("You exceeded your current quota"),
                "{e}"
            );
            assert!(sleeps.is_empty(), "no early retry: {sleeps:?}");
            assert_eq!(*server.hits.lock().unwrap(), 1);
        }
    }
}

/// A 400's own explanation reaches the run's stop reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_4xx_explanation_is_kept_in_the_stop_reason() {
    let (base, _server) = start_server().await;
    let clock = Arc::new(ManualClock::new(1_767_225_600_000));
    let host = agent_test_support::memory_host(clock.clone(), 1);
    let tools = spawn_sim_tools(
        host.executor.clone(),
        clock.clone(),
        ToolLog::default(),
        SimToolsConfig::default(),
    );
    let p = provider(
        &base,
        "openai",
        "unsupported",
        clock,
        RetryPolicy::default(),
    );
    let runtime = Runtime::new(
        host,
        OwnerId::new("proc").unwrap(),
        tools,
        p,
        RuntimeOptions::default(),
    );
    let run = runtime
        .start(&SessionId::new("s").unwrap(), "hi", RunConfig::default())
        .await
        .unwrap();
    let record = tokio::time::timeout(Duration::from_secs(30), runtime.wait_settled(&run))
        .await
        .expect("the run settles")
        .unwrap();
    assert_eq!(record.status, RunStatus::Failed);
    match &record.stop_reason {
        Some(StopReason::RuntimeError { message, .. }) => {
            assert!(message.contains("HTTP 400"), "{message}");
            assert!(
                message.contains("Use 'max_completion_tokens' instead."),
                "{message}"
            );
            assert!(!message.contains("openai-test-key"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}
