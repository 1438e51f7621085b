//! `agentrt run --profile` with a reasoning setting (S10.1, S13.4), on what
//! leaves the process: a profile whose reasoning is `high` with a thinking
//! budget of 3,000 tokens, a run under it against a loopback Anthropic
//! server this test starts; the request carries `thinking` with that
//! budget, the run streams the reasoning as its own JSON event, and
//! `agentrt show` prints it apart from the answer, with the reasoning and
//! prompt-cache tokens in the usage.

use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");
const THOUGHT: &str = "The person wants a greeting.";

fn agentrt(dir: &std::path::Path, args: &[&str]) -> Output {
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod data dir");
    Command::new(BIN)
        .args(args)
        .env("AGENTRT_DATA_DIR", dir)
        .env_remove("RUST_LOG")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::null())
        .output()
        .expect("agentrt")
}

fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect()
}

/// A Messages server that thinks, then answers; it keeps each request body.
fn start_model() -> (u16, Arc<Mutex<Vec<Value>>>) {
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let seen = bodies.clone();
    let app = axum::Router::new().route(
        "/an/v1/messages",
        axum::routing::post(move |body: String| {
            let seen = seen.clone();
            async move {
                seen.lock()
                    .expect("bodies")
                    .push(serde_json::from_str::<Value>(&body).unwrap_or(Value::Null));
                let events = [
                    json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                        "content": [], "model": "claude-test", "stop_reason": null,
                        "usage": {"input_tokens": 9, "cache_read_input_tokens": 2048, "cache_creation_input_tokens": 0, "output_tokens": 1}}}),
                    json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": THOUGHT}}),
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM"}}),
                    json!({"type": "content_block_stop", "index": 0}),
                    json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
                    json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hello there."}}),
                    json!({"type": "content_block_stop", "index": 1}),
                    json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 14}}),
                    json!({"type": "message_stop"}),
                ];
                axum::response::Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(axum::body::Body::from(sse(&events)))
                    .expect("response")
            }
        }),
    );
    (common::serve_on_loopback(app), bodies)
}

fn stdout(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_profiles_reasoning_reaches_the_request_and_the_card_shows_it_apart() {
    let (port, bodies) = start_model();
    let data = tempfile::tempdir().expect("dir");
    let dir = data.path();
    let base = format!("http://127.0.0.1:{port}/an/v1");
    let config = dir.join("agentrt.toml");
    std::fs::write(
        &config,
        format!(
            "[provider]\nkind = \"anthropic\"\nbase_url = \"{base}/\"\nmodel = \"claude-test\"\n"
        ),
    )
    .expect("config");
    let profile = dir.join("thinker.json");
    std::fs::write(
        &profile,
        json!({
            "id": "thinker", "name": "Thinker", "mode": "chat",
            "model": {"model": "claude-test"},
            "reasoning": {"effort": "high", "budget_tokens": 3000},
            "search": {"web_search": false}, "approval": "strict",
            "budget": {"max_tool_rounds": 5, "max_tool_calls": 5},
            "memory": {"read": [], "write": []},
        })
        .to_string(),
    )
    .expect("profile");
    stdout(&agentrt(
        dir,
        &["--json", "profile", "save", profile.to_str().unwrap()],
    ));
    let config = config.to_string_lossy().into_owned();
    let run = stdout(&agentrt(
        dir,
        &[
            "--json",
            "--config",
            &config,
            "run",
            "Say hello.",
            "--provider",
            "anthropic",
            "--base-url",
            &base,
            "--model",
            "claude-test",
            "--profile",
            "thinker",
        ],
    ));
    let events: Vec<Value> = run
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let streamed: String = events
        .iter()
        .filter(|e| e["event"] == "reasoning")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(streamed, THOUGHT, "the reasoning streams as its own event");
    let answer = events
        .iter()
        .find(|e| e["event"] == "answer")
        .expect("an answer event");
    assert_eq!(answer["text"], "Hello there.", "never the reasoning");
    let run_id = answer["run"].as_str().expect("run id").to_owned();

    // What left the process: the profile's budget as Anthropic's thinking.
    let sent = bodies.lock().expect("bodies").clone();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0]["thinking"],
        json!({"type": "enabled", "budget_tokens": 3000})
    );

    // The run card: the reasoning apart from the answer, and the tokens.
    let card = stdout(&agentrt(dir, &["show", &run_id]));
    let reasoning_at = card.find("reasoning (round 1):").expect(&card);
    let answer_at = card.find("answer:   Hello there.").expect(&card);
    assert!(
        card[reasoning_at..answer_at].contains(&format!("| {THOUGHT}")),
        "{card}"
    );
    assert!(!card[answer_at..].contains(THOUGHT), "{card}");
    assert!(card.contains("2048 read from the prompt cache"), "{card}");
    let json_card: Value =
        serde_json::from_str(&stdout(&agentrt(dir, &["--json", "show", &run_id]))).expect("json");
    assert_eq!(
        json_card["reasoning"],
        json!([{"round": 1, "text": THOUGHT}])
    );
    assert_eq!(json_card["answer"], "Hello there.");
    assert_eq!(json_card["usage"]["cached_input_tokens"], 2048);
}
