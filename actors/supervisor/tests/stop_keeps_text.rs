//! Stop keeps what was said (issue 37 part 6; S1.1, S4.4's "output so far
//! stays readable", S12.1): against an OpenAI-compatible server on
//! loopback that streams the start of an answer and then holds the stream
//! open, a person stops the run once the text has arrived. The text is
//! kept as the run's output, recorded as the round's response marked
//! incomplete, and the session's next run sends it, with the note of how
//! the turn ended, as the server receives it. A stop before any text keeps
//! nothing and marks nothing.
#![cfg(not(target_arch = "wasm32"))]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use futures::StreamExt;
use serde_json::{Value, json};

use agent_kernel::host::ManualClock;
use agent_kernel::ids::{OwnerId, RunId, SessionId};
use agent_kernel::run::{ActivityKind, RunStatus, StopReason};
use agent_supervisor::sim::tools::{SimToolsConfig, ToolLog, spawn_sim_tools};
use agent_supervisor::store::RunEvent;
use agent_supervisor::{OpenAiConfig, OpenAiProvider, RunConfig, Runtime, RuntimeOptions};

#[derive(Default)]
struct Server {
    bodies: Mutex<Vec<Value>>,
}

fn event(chunk: Value) -> Bytes {
    Bytes::from(format!("data: {chunk}\n\n"))
}

/// "hang": streams `PARTIAL` (when the prompt says "talk") then nothing,
/// never finishing; any other request gets "Fine." at once.
async fn completions(State(server): State<Arc<Server>>, body: String) -> Response {
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    server.bodies.lock().unwrap().push(request.clone());
    let last_user = request["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    let body = if last_user.starts_with("hang") {
        let first: Vec<Result<Bytes, std::io::Error>> = if last_user == "hang and talk" {
            PARTIAL
                .iter()
                .map(|t| {
                    Ok(event(
                        json!({"choices": [{"index": 0, "delta": {"content": t}}]}),
                    ))
                })
                .collect()
        } else {
            Vec::new()
        };
        Body::from_stream(futures::stream::iter(first).chain(futures::stream::pending()))
    } else {
        let done = [
            json!({"choices": [{"index": 0, "delta": {"content": "Fine."}, "finish_reason": null}]}),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        ];
        Body::from(
            done.iter()
                .map(|c| format!("data: {c}\n\n"))
                .collect::<String>()
                + "data: [DONE]\n\n",
        )
    };
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(body)
        .unwrap()
}

const PARTIAL: [&str; 2] = ["The first half ", "of an answer"];

async fn setup() -> (Runtime, Arc<Server>) {
    let server = Arc::new(Server::default());
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(server.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    let clock = Arc::new(ManualClock::new(1_767_225_600_000));
    let host = agent_test_support::memory_host(clock.clone(), 1);
    let tools = spawn_sim_tools(
        host.executor.clone(),
        clock.clone(),
        ToolLog::default(),
        SimToolsConfig::default(),
    );
    let provider = Arc::new(
        OpenAiProvider::new(OpenAiConfig::new(format!("http://{addr}/v1")), clock).unwrap(),
    );
    let runtime = Runtime::new(
        host,
        OwnerId::new("proc").unwrap(),
        tools,
        provider,
        RuntimeOptions::default(),
    );
    (runtime, server)
}

/// Start `prompt` and stop it once `text` has streamed (or, with no text,
/// once the server has the request).
async fn start_and_stop(
    runtime: &Runtime,
    server: &Server,
    session: &SessionId,
    prompt: &str,
    text: &str,
) -> RunId {
    let events = runtime.subscribe();
    let before = server.bodies.lock().unwrap().len();
    let run = runtime
        .start(session, prompt, RunConfig::default())
        .await
        .unwrap();
    let mut streamed = String::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if !text.is_empty() {
                if let Ok(RunEvent::TextDelta { run: r, text: t }) = events.recv().await
                    && r == run
                {
                    streamed.push_str(&t);
                }
                if streamed == text {
                    return;
                }
            } else if server.bodies.lock().unwrap().len() > before {
                return;
            } else {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    })
    .await
    .expect("the stream reached the page");
    runtime.stop(&run).await.unwrap();
    run
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_37_6_text_streamed_before_a_stop_is_kept_marked_incomplete_and_sent_next() {
    let (runtime, server) = setup().await;
    let session = SessionId::new("stopped").unwrap();
    let partial: String = PARTIAL.concat();
    let run = start_and_stop(&runtime, &server, &session, "hang and talk", &partial).await;
    let record = runtime.run(&run).await.unwrap();
    assert_eq!(record.status, RunStatus::Cancelled);
    assert_eq!(record.stop_reason, Some(StopReason::UserStopped));
    // Kept as the run's output, and recorded as round 1's answer, incomplete.
    assert_eq!(
        runtime.output(&run).await.unwrap().as_deref(),
        Some(partial.as_str())
    );
    let responses: Vec<_> = runtime
        .activities(&run)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|a| match a.kind {
            ActivityKind::ModelResponse {
                round,
                text,
                incomplete,
                ..
            } => Some((round, text, incomplete)),
            _ => None,
        })
        .collect();
    assert_eq!(responses.len(), 1);
    let (round, text, incomplete) = &responses[0];
    assert_eq!((*round, *incomplete), (1, true));
    let text = text.clone().expect("the text's blob");
    assert_eq!(runtime.blob(&run, &text).await.unwrap(), partial.as_bytes());

    // The next run of the session sends it, as the server receives it.
    let next = runtime
        .start(&session, "go on", RunConfig::default())
        .await
        .unwrap();
    let next_record = tokio::time::timeout(Duration::from_secs(30), runtime.wait_settled(&next))
        .await
        .expect("settles")
        .unwrap();
    assert_eq!(next_record.status, RunStatus::Completed);
    let bodies = server.bodies.lock().unwrap().clone();
    let sent: Vec<(String, String)> = bodies.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        sent,
        [
            ("user".to_owned(), "hang and talk".to_owned()),
            (
                "assistant".to_owned(),
                format!("{partial}\n\n[This turn ended before its answer: the person stopped it.]")
            ),
            ("user".to_owned(), "go on".to_owned()),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_37_6_a_stop_before_any_text_keeps_nothing_and_marks_nothing() {
    let (runtime, server) = setup().await;
    let session = SessionId::new("silent").unwrap();
    let run = start_and_stop(&runtime, &server, &session, "hang quietly", "").await;
    assert_eq!(
        runtime.run(&run).await.unwrap().status,
        RunStatus::Cancelled
    );
    assert_eq!(runtime.output(&run).await.unwrap(), None);
    assert!(
        runtime
            .activities(&run)
            .await
            .unwrap()
            .iter()
            .all(|a| !matches!(a.kind, ActivityKind::ModelResponse { .. }))
    );
}
