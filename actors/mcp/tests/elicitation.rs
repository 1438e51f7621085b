//! Elicitation (MCP 2025-11-25, form mode) at the client, against a server
//! written here (axum on loopback) that asks during a `tools/call` on the
//! call's event stream and finishes the call once it has the answer: the
//! capability is declared only with a handler; accept (content checked
//! against the requested schema), decline and cancel reach the server;
//! content that does not match is refused -32602 and never sent; without a
//! handler the request is answered -32601. The origin (run and call) given
//! with the call reaches the handler with the request that came on the
//! call's stream, so a host knows which run asks.

#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use agent_mcp::client::RequestOptions;
use agent_mcp::elicitation::{
    ElicitationAnswer, ElicitationHandler, ElicitationOrigin, ElicitationRequest,
};
use agent_mcp::{McpClient, McpServerConfig};

#[derive(Default)]
struct Server {
    capabilities: Option<Value>,
    /// The client's answer to the elicitation, once it came.
    answer: Option<Value>,
    waiting: Option<futures::channel::oneshot::Sender<Value>>,
}

type Shared = Arc<Mutex<Server>>;

fn sse(event: &Value) -> String {
    format!("data: {event}\n\n")
}

async fn mcp(State(s): State<Shared>, body: String) -> Response {
    let msg: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let id = msg["id"].clone();
    match msg["method"].as_str() {
        Some("initialize") => {
            s.lock().unwrap().capabilities = Some(msg["params"]["capabilities"].clone());
            axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "asks", "version": "1"}
            }}))
            .into_response()
        }
        Some("tools/list") => axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [
            {"name": "sign_up", "inputSchema": {"type": "object"}}
        ]}}))
        .into_response(),
        Some("tools/call") => {
            let (tx, rx) = futures::channel::oneshot::channel();
            s.lock().unwrap().waiting = Some(tx);
            let ask = json!({"jsonrpc": "2.0", "id": "e1", "method": "elicitation/create", "params": {
                "message": "Your name, please.",
                "requestedSchema": {"type": "object", "properties": {
                    "name": {"type": "string", "minLength": 1}
                }, "required": ["name"]}
            }});
            use futures::StreamExt as _;
            let stream = futures::stream::once(async move { Ok::<_, std::io::Error>(sse(&ask)) })
                .chain(futures::stream::once(async move {
                    let answer = rx.await.unwrap_or(Value::Null);
                    let done = json!({"jsonrpc": "2.0", "id": id, "result": {
                        "content": [{"type": "text", "text": format!("got {answer}")}]
                    }});
                    Ok(sse(&done))
                }));
            (
                [(header::CONTENT_TYPE, "text/event-stream")],
                Body::from_stream(stream),
            )
                .into_response()
        }
        // The client's answer to the elicitation, or a notification.
        _ => {
            if msg["id"] == "e1" {
                let mut server = s.lock().unwrap();
                server.answer = Some(msg.clone());
                if let Some(tx) = server.waiting.take() {
                    let _ = tx.send(msg);
                }
            }
            StatusCode::ACCEPTED.into_response()
        }
    }
}

async fn start() -> (Shared, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://127.0.0.1:{}/mcp",
        listener.local_addr().unwrap().port()
    );
    let shared: Shared = Arc::default();
    let app = Router::new()
        .route(
            "/mcp",
            axum::routing::post(mcp).get(|| async { StatusCode::METHOD_NOT_ALLOWED }),
        )
        .with_state(shared.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (shared, url)
}

/// The person: answers with what the test set, and remembers the request.
struct Person {
    answer: ElicitationAnswer,
    seen: Mutex<Vec<ElicitationRequest>>,
}

#[async_trait::async_trait]
impl ElicitationHandler for Person {
    async fn elicit(&self, request: ElicitationRequest) -> ElicitationAnswer {
        self.seen.lock().unwrap().push(request);
        self.answer.clone()
    }
}

/// Call the tool with `handler`; what the server received as the answer.
async fn ask(handler: Option<Arc<Person>>) -> (Value, Option<Value>) {
    ask_with(handler, RequestOptions::default()).await
}

async fn ask_with(handler: Option<Arc<Person>>, options: RequestOptions) -> (Value, Option<Value>) {
    let (shared, url) = start().await;
    let mut env = common::env();
    env.elicitation = handler.map(|h| h as Arc<dyn ElicitationHandler>);
    let client = McpClient::connect(&McpServerConfig::http("asks", url), &env)
        .await
        .unwrap();
    client
        .call_tool("sign_up", json!({}), options)
        .await
        .unwrap();
    let server = shared.lock().unwrap();
    (server.answer.clone().unwrap(), server.capabilities.clone())
}

fn person(answer: ElicitationAnswer) -> Arc<Person> {
    Arc::new(Person {
        answer,
        seen: Mutex::new(Vec::new()),
    })
}

#[tokio::test]
async fn accepted_content_reaches_the_server_and_the_capability_is_declared() {
    let p = person(ElicitationAnswer::Accept(json!({"name": "Ann"})));
    let (answer, capabilities) = ask(Some(p.clone())).await;
    assert_eq!(
        answer["result"],
        json!({"action": "accept", "content": {"name": "Ann"}})
    );
    assert_eq!(capabilities.unwrap()["elicitation"], json!({"form": {}}));
    let seen = p.seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "shown once");
    assert_eq!(seen[0].message, "Your name, please.");
    assert_eq!(seen[0].server_id, "asks");
    assert_eq!(seen[0].origin, None, "the call named no origin");
}

#[tokio::test]
async fn the_origin_given_with_the_call_reaches_the_handler() {
    let p = person(ElicitationAnswer::Decline);
    let origin = ElicitationOrigin {
        run: "run-7".into(),
        call_id: "t0-c1".into(),
    };
    ask_with(
        Some(p.clone()),
        RequestOptions {
            origin: Some(origin.clone()),
            ..RequestOptions::default()
        },
    )
    .await;
    let seen = p.seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].origin, Some(origin));
}

#[tokio::test]
async fn decline_and_cancel_reach_the_server() {
    for (given, action) in [
        (ElicitationAnswer::Decline, "decline"),
        (ElicitationAnswer::Cancel, "cancel"),
    ] {
        let (answer, _) = ask(Some(person(given))).await;
        assert_eq!(answer["result"], json!({"action": action}));
    }
}

#[tokio::test]
async fn content_that_does_not_match_the_schema_is_refused_not_sent() {
    let (answer, _) = ask(Some(person(ElicitationAnswer::Accept(json!({"name": ""}))))).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(!answer.to_string().contains("\"content\""), "{answer}");
}

#[tokio::test]
async fn without_a_handler_the_capability_is_absent_and_the_request_is_method_not_found() {
    let (answer, capabilities) = ask(None).await;
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    assert!(capabilities.unwrap().get("elicitation").is_none());
}
