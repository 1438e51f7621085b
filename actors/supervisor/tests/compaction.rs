//! Compaction on the wire (S12.2, S12.4; issue 37 part 1 acceptance): a
//! 60-turn chat session over the smallest context window, against an
//! OpenAI-compatible streaming server on loopback that this test starts
//! and that records every request body. It reports usage the way a real
//! server does (prompt tokens counted from what it received), so the
//! context rule runs on the provider's counts. Checked on what the server
//! received: compaction happens and each is recorded
//! (`conversation_compacted`, fewer tokens after than before); a
//! summarisation request carries no tools, the versioned prompt, and the
//! previous summary; every later turn sends the newest summary in place of
//! the old turns and never the first turn's words; the raw turns all stay
//! stored and readable.
#![cfg(not(target_arch = "wasm32"))]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};

use agent_kernel::host::ManualClock;
use agent_kernel::ids::{OwnerId, SessionId};
use agent_kernel::run::{ActivityKind, RunMode, RunStatus};
use agent_supervisor::compaction::{SUMMARY_PROMPT, SessionSummaries};
use agent_supervisor::config::ModelSettings;
use agent_supervisor::conversation::{MIN_CONTEXT_WINDOW_TOKENS, SessionConversation};
use agent_supervisor::sim::tools::{SimToolsConfig, ToolLog, spawn_sim_tools};
use agent_supervisor::transcript::Message;
use agent_supervisor::{OpenAiConfig, OpenAiProvider, RunConfig, Runtime, RuntimeOptions};

#[derive(Default)]
struct Server {
    bodies: Mutex<Vec<Value>>,
    summaries: Mutex<u32>,
}

fn sse(chunks: &[Value]) -> String {
    chunks
        .iter()
        .map(|c| format!("data: {c}\n\n"))
        .collect::<String>()
        + "data: [DONE]\n\n"
}

/// Answers "You said: <the last user message>", or, to a summarisation
/// request, "Summary N: …"; usage counts four bytes of the body a token.
async fn completions(State(server): State<Arc<Server>>, body: String) -> Response {
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    server.bodies.lock().unwrap().push(request.clone());
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let summarising = messages
        .first()
        .is_some_and(|m| m["role"] == "system" && m["content"] == SUMMARY_PROMPT);
    let text = if summarising {
        let mut n = server.summaries.lock().unwrap();
        *n += 1;
        format!("Summary {n}: the person asked numbered questions and was echoed.")
    } else {
        let said = messages
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned();
        format!("You said: {said}")
    };
    let chunks = [
        json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        json!({"choices": [], "usage": {"prompt_tokens": body.len() / 4, "completion_tokens": text.len().div_ceil(4)}}),
    ];
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from(sse(&chunks)))
        .unwrap()
}

async fn start_server() -> (String, Arc<Server>) {
    let server = Arc::new(Server::default());
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(server.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (format!("http://{addr}/v1"), server)
}

fn system_of(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.first())
        .filter(|m| m["role"] == "system")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

fn question(i: usize) -> String {
    format!("Question {i}: what comes after {i}? {}", "x".repeat(60))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s12_4_a_60_turn_conversation_compacts_and_sends_the_summary_on_the_wire() {
    let (base, server) = start_server().await;
    let clock = Arc::new(ManualClock::new(1_767_225_600_000));
    let host = agent_test_support::memory_host(clock.clone(), 1);
    let storage = host.storage.clone();
    let tools = spawn_sim_tools(
        host.executor.clone(),
        clock.clone(),
        ToolLog::default(),
        SimToolsConfig::default(),
    );
    let provider = Arc::new(OpenAiProvider::new(OpenAiConfig::new(base), clock).unwrap());
    let runtime = Runtime::new(
        host,
        OwnerId::new("proc").unwrap(),
        tools,
        provider,
        RuntimeOptions::default(),
    );
    let session = SessionId::new("long-chat").unwrap();
    let config = RunConfig {
        mode: RunMode::Chat,
        model: ModelSettings {
            context_window_tokens: Some(MIN_CONTEXT_WINDOW_TOKENS),
            ..ModelSettings::default()
        },
        ..RunConfig::default()
    };
    let mut compactions = Vec::new();
    for i in 1..=60 {
        let run = runtime
            .start(&session, &question(i), config.clone())
            .await
            .unwrap();
        let record = tokio::time::timeout(Duration::from_secs(30), runtime.wait_settled(&run))
            .await
            .expect("the run settles")
            .unwrap();
        assert_eq!(record.status, RunStatus::Completed, "turn {i}");
        for a in runtime.activities(&run).await.unwrap() {
            if let ActivityKind::ConversationCompacted {
                turns_covered,
                tokens_before,
                tokens_after,
                summary,
            } = a.kind
            {
                compactions.push((i, turns_covered, tokens_before, tokens_after, summary));
            }
        }
    }
    let bodies = server.bodies.lock().unwrap().clone();
    let summaries = *server.summaries.lock().unwrap();
    // Compaction happened, more than once, each recorded by its run.
    assert!(compactions.len() >= 3, "{compactions:?}");
    assert_eq!(compactions.len() as u32, summaries);
    assert_eq!(bodies.len(), 60 + summaries as usize);
    let mut covered = 0;
    for (turn, turns_covered, before, after, _) in &compactions {
        assert!(after < before, "turn {turn}: {before} -> {after}");
        assert!(*turns_covered > covered, "turn {turn}");
        assert!(*turns_covered < *turn as u64);
        covered = *turns_covered;
    }
    // On the wire: each summarisation request is tool-less, under the
    // versioned prompt, bounded, and carries the summary before it.
    let mut seen_summaries = 0;
    let mut latest_summary: Option<String> = None;
    for body in &bodies {
        let system = system_of(body);
        if system == SUMMARY_PROMPT {
            assert!(body.get("tools").is_none(), "{body}");
            assert_eq!(body["max_tokens"], json!(128), "{body}");
            let asked = body["messages"][1]["content"].as_str().unwrap();
            match &latest_summary {
                Some(previous) => assert!(asked.contains(previous.as_str()), "{asked}"),
                None => assert!(!asked.contains("Summary of the conversation so far")),
            }
            seen_summaries += 1;
            latest_summary = Some(format!(
                "Summary {seen_summaries}: the person asked numbered questions and was echoed."
            ));
            continue;
        }
        let sent = body["messages"].to_string();
        match &latest_summary {
            // Later turns send the newest summary in place of the old
            // turns: never the first question again.
            Some(summary) => {
                assert!(system.contains(summary.as_str()), "{system}");
                assert!(
                    system.contains("Summary of the earlier conversation"),
                    "{system}"
                );
                assert!(!sent.contains("Question 1: "), "{sent}");
            }
            None => assert!(!system.contains("Summary of the earlier conversation")),
        }
    }
    assert_eq!(seen_summaries, summaries);
    // The last turn sent far fewer than 60 turns as messages.
    let last = bodies.last().unwrap();
    let users = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .count();
    assert!(users < 20, "{users}");
    assert!(last["messages"].to_string().contains("Question 60: "));
    // Stored: one summary per compaction, each made once; the raw turns all
    // stay readable (the 60th joins when a later run starts).
    let stored = SessionSummaries::load(&*storage, &session).await.unwrap();
    assert_eq!(stored.summaries.len() as u32, summaries);
    let conversation = SessionConversation::load(&*storage, &session)
        .await
        .unwrap();
    assert_eq!(conversation.turns.len(), 59);
    let raw = conversation.messages(&*storage).await.unwrap();
    assert_eq!(raw.len(), 118);
    assert_eq!(
        raw[0],
        Message::User {
            content: question(1)
        }
    );
    assert_eq!(
        raw[117],
        Message::Assistant {
            content: Some(format!("You said: {}", question(59))),
            tool_calls: Vec::new(),
            native: None,
        }
    );
}
