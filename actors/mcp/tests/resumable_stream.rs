//! Resumable streams (MCP 2025-11-25, Streamable HTTP, "Resumability and
//! Redelivery") against a server written here (axum on loopback): a
//! `tools/call` answered as an event stream that the server closes after a
//! priming event (`id:` and `retry:`) is resumed with `GET` and
//! `Last-Event-ID`; resumption is bounded ([`MAX_RESUME_ATTEMPTS`], tested
//! at and above); a call whose stream cannot be resumed fails as sent, so
//! an unknown (assumed writing) function's effect may have happened.

#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use agent_capabilities::ApprovalMode;
use agent_kernel::protocol::ToolResult;
use agent_mcp::transport::http::MAX_RESUME_ATTEMPTS;
use agent_mcp::{McpClient, McpError, McpServerConfig, spawn_mcp_server};
use common::*;

#[derive(Default)]
struct Script {
    /// The resuming GET (1-based) whose stream carries the answer; `None`:
    /// no resumption ever answers.
    answer_on: Option<usize>,
    /// The `Last-Event-ID` of every resuming GET, in order.
    resumed_from: Vec<String>,
    /// The id of the pending `tools/call`.
    pending: Option<Value>,
    /// Offer a notification stream (GET without `Last-Event-ID`) that
    /// closes after its priming event `n-0`; reopened from `n-0` it sends
    /// `tools/list_changed`.
    notify: bool,
    /// The `Last-Event-ID` of every reopening of the notification stream.
    reopened_from: Vec<String>,
    /// Answer `tools/call` at once, and in the same chunk send a line that
    /// is not UTF-8 (the stream is broken after the answer).
    garbage_after_answer: bool,
}

type Shared = Arc<Mutex<Script>>;

fn sse(body: String) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("mcp-session-id", "s-1")
        .body(Body::from(body))
        .unwrap()
}

fn json_answer(v: Value) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .header("mcp-session-id", "s-1")
        .body(Body::from(v.to_string()))
        .unwrap()
}

async fn handle(
    State(state): State<Shared>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if method == Method::GET {
        let last = headers.get("last-event-id").and_then(|v| v.to_str().ok());
        let mut s = state.lock().unwrap();
        if s.notify {
            let Some(last) = last else {
                return sse("id: n-0\nretry: 10\ndata: \n\n".to_owned());
            };
            s.reopened_from.push(last.to_owned());
            if last == "n-0" {
                let note = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
                return sse(format!("id: n-1\ndata: {note}\n\n"));
            }
            let n = s.reopened_from.len();
            return sse(format!("id: n-{n}\nretry: 10\ndata: \n\n"));
        }
        let Some(last) = last else {
            // No notification stream on this server.
            return Response::builder()
                .status(StatusCode::METHOD_NOT_ALLOWED)
                .body(Body::empty())
                .unwrap();
        };
        s.resumed_from.push(last.to_owned());
        let n = s.resumed_from.len();
        if s.answer_on == Some(n) {
            let id = s.pending.clone().unwrap();
            let answer = json!({"jsonrpc": "2.0", "id": id,
                "result": {"content": [{"type": "text", "text": "resumed"}]}});
            return sse(format!("id: r-{n}\ndata: {answer}\n\n"));
        }
        // Another priming event, then the stream closes again.
        return sse(format!("id: r-{n}\nretry: 10\ndata: \n\n"));
    }
    let message: Value = serde_json::from_slice(&body).unwrap();
    let id = message.get("id").cloned();
    match message["method"].as_str().unwrap_or("") {
        "initialize" => json_answer(json!({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": "2025-11-25", "serverInfo": {"name": "cutter", "version": "1"},
            "capabilities": {"tools": {}}}})),
        "tools/list" => json_answer(json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [
            {"name": "cut", "description": "Its answer's stream is cut.",
             "inputSchema": {"type": "object", "properties": {}}}]}})),
        "tools/call" if state.lock().unwrap().garbage_after_answer => {
            let answer = json!({"jsonrpc": "2.0", "id": id,
                "result": {"content": [{"type": "text", "text": "answered"}]}});
            let mut body = format!("id: a-1\ndata: {answer}\n\n").into_bytes();
            body.extend_from_slice(b"data: \xff\xfe\n\n");
            Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "text/event-stream")
                .header("mcp-session-id", "s-1")
                .body(Body::from(body))
                .unwrap()
        }
        "tools/call" => {
            state.lock().unwrap().pending = id;
            // The priming event, then the stream is closed before the answer.
            sse("id: p-1\nretry: 10\ndata: \n\n".to_owned())
        }
        _ => Response::builder()
            .status(StatusCode::ACCEPTED)
            .body(Body::empty())
            .unwrap(),
    }
}

async fn start(answer_on: Option<usize>) -> (Shared, String) {
    start_with(Script {
        answer_on,
        ..Script::default()
    })
    .await
}

async fn start_with(script: Script) -> (Shared, String) {
    let state: Shared = Arc::new(Mutex::new(script));
    let app = axum::Router::new()
        .route("/mcp", axum::routing::any(handle))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (state, url)
}

#[tokio::test]
async fn a_cut_stream_is_resumed_with_last_event_id_at_and_below_the_bound() {
    for answer_on in [1, MAX_RESUME_ATTEMPTS as usize] {
        let (state, url) = start(Some(answer_on)).await;
        let client = McpClient::connect(&McpServerConfig::http("cutter", &url), &env())
            .await
            .unwrap();
        let result = client
            .call_tool("cut", json!({}), Default::default())
            .await
            .unwrap_or_else(|e| panic!("answer_on {answer_on}: {e}"));
        assert_eq!(
            serde_json::to_value(&result.content).unwrap()[0]["text"],
            "resumed"
        );
        let resumed = state.lock().unwrap().resumed_from.clone();
        assert_eq!(resumed.len(), answer_on);
        // The first GET names the priming event; each later one the last
        // event of the stream before it.
        assert_eq!(resumed[0], "p-1");
        for (i, last) in resumed.iter().enumerate().skip(1) {
            assert_eq!(*last, format!("r-{i}"));
        }
    }
}

#[tokio::test]
async fn a_stream_that_cannot_be_resumed_within_the_bound_is_an_unknown_effect() {
    // Above the bound: the answer would come on one resumption too many.
    let (state, url) = start(Some(MAX_RESUME_ATTEMPTS as usize + 1)).await;
    let config = McpServerConfig::http("cutter", &url);
    let client = McpClient::connect(&config, &env()).await.unwrap();
    let e = client
        .call_tool("cut", json!({}), Default::default())
        .await
        .unwrap_err();
    assert!(matches!(e, McpError::Transport { sent: true, .. }), "{e:?}");
    assert!(e.may_have_reached_server());
    assert_eq!(
        state.lock().unwrap().resumed_from.len(),
        MAX_RESUME_ATTEMPTS as usize
    );

    // Through the tool shell: the unknown function is assumed to write, so
    // the journal is told its effect may have happened (not retryable).
    let (_, url) = start(None).await;
    let mcp = spawn_mcp_server(&env(), &McpServerConfig::http("cutter", &url))
        .await
        .unwrap();
    let run = Run::new(tools_over(&mcp.load), "run-cut", ApprovalMode::Permissive);
    run.search_and_load("cut", &["cut"]).await;
    let r = run.call("c1", "cut", json!({})).await;
    assert_eq!(error_code(&r), agent_mcp::codes::MCP_UNREACHABLE, "{r:?}");
    let ToolResult::Error(e) = &r else {
        unreachable!()
    };
    assert!(e.effect_may_have_happened, "{e:?}");
    assert!(!e.retryable, "{e:?}");
}

#[tokio::test]
async fn the_notification_stream_is_reopened_from_its_last_event() {
    let (state, url) = start_with(Script {
        notify: true,
        ..Script::default()
    })
    .await;
    let client = McpClient::connect(&McpServerConfig::http("cutter", &url), &env())
        .await
        .unwrap();
    let events = client.events();
    // Sent only on the stream reopened with Last-Event-ID n-0.
    let event = tokio::time::timeout(std::time::Duration::from_secs(20), events.recv())
        .await
        .expect("tools/list_changed on the reopened stream")
        .unwrap();
    assert_eq!(event, agent_mcp::ServerEvent::ToolsListChanged);
    assert_eq!(state.lock().unwrap().reopened_from[0], "n-0");
}

#[tokio::test]
async fn an_answer_before_a_broken_line_in_the_same_chunk_is_delivered() {
    let (_, url) = start_with(Script {
        garbage_after_answer: true,
        ..Script::default()
    })
    .await;
    let client = McpClient::connect(&McpServerConfig::http("cutter", &url), &env())
        .await
        .unwrap();
    let result = client
        .call_tool("cut", json!({}), Default::default())
        .await
        .expect("the answer came before the broken line");
    assert_eq!(
        serde_json::to_value(&result.content).unwrap()[0]["text"],
        "answered"
    );
}
