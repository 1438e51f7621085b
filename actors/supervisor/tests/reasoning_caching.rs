//! Reasoning and prompt caching end to end, checked on what leaves the
//! process: a run in each wire format against a loopback server this test
//! starts (issue 34 items 2 and 4).
//!
//! - S10.1: the run's reasoning setting reaches the request in the
//!   format's own field (OpenAI `reasoning_effort`, Anthropic `thinking`
//!   with `budget_tokens`, Gemini `generationConfig.thinkingConfig`).
//! - S13.4: the continuation sends the signed thinking blocks back byte for
//!   byte (Anthropic thinking and redacted thinking, Gemini thought
//!   signatures) and never the reasoning text otherwise; the reasoning is
//!   streamed as its own event and stored apart from the answer.
//! - Prompt caching: Anthropic requests carry at most four `cache_control`
//!   breakpoints on the stable prefix and usage shows cache reads from
//!   round 2 on; OpenAI and Gemini requests of consecutive rounds share
//!   their prefix byte for byte, so the providers' automatic caching works.
#![cfg(not(target_arch = "wasm32"))]

#[path = "loopback/anthropic_cache.rs"]
mod anthropic_cache;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};

use agent_kernel::host::ManualClock;
use agent_kernel::ids::{OwnerId, RunId, SessionId};
use agent_kernel::reasoning::{Reasoning, ReasoningEffort};
use agent_kernel::run::{ActivityKind, AgentRun, RunStatus};
use agent_supervisor::provider::{ModelProvider, anthropic};
use agent_supervisor::sim::tools::{SimToolsConfig, ToolLog, spawn_sim_tools};
use agent_supervisor::{
    AnthropicConfig, AnthropicProvider, GeminiConfig, GeminiProvider, ModelSettings, OpenAiConfig,
    OpenAiProvider, RunConfig, RunEvent, Runtime, RuntimeOptions,
};

const THOUGHT_1: [&str; 2] = ["Let me think. ", "I will read a.txt first."];
const THOUGHT_2: &str = "The note is read; I can answer.";
const SIGNATURE: &str = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/Z9X/ep==";
const REDACTED: &str = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP";
const GEMINI_SIGNATURE: &str = "CiQBVKhc7Q0j1f3JvR1o+5Nf/w==";

/// What the reasoning server received: each body as bytes and as JSON.
#[derive(Default)]
struct Received {
    raw: Mutex<Vec<String>>,
    bodies: Mutex<Vec<Value>>,
}

fn sse(events: &[Value], named: bool) -> String {
    events
        .iter()
        .map(|e| match e["type"].as_str().filter(|_| named) {
            Some(kind) => format!("event: {kind}\ndata: {e}\n\n"),
            None => format!("data: {e}\n\n"),
        })
        .collect()
}

/// Round 1 reasons and calls `read_note`; round 2 reasons and answers.
fn openai_stream(turn: usize) -> String {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "o-test",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": null}),
        Value::Null,
    )];
    let usage = |reasoning: u64| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "o-test",
               "choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 40, "total_tokens": 160,
               "prompt_tokens_details": {"cached_tokens": 64},
               "completion_tokens_details": {"reasoning_tokens": reasoning}}})
    };
    if turn == 0 {
        for t in THOUGHT_1 {
            events.push(chunk(json!({"reasoning_content": t}), Value::Null));
        }
        events.push(chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                   "function": {"name": "read_note", "arguments": "{\"path\": \"a.txt\"}"}}]}),
            Value::Null,
        ));
        events.push(chunk(json!({}), json!("tool_calls")));
        events.push(usage(30));
    } else {
        events.push(chunk(json!({"reasoning_content": THOUGHT_2}), Value::Null));
        events.push(chunk(json!({"content": "Done."}), Value::Null));
        events.push(chunk(json!({}), json!("stop")));
        events.push(usage(12));
    }
    let mut text = sse(&events, false);
    text.push_str("data: [DONE]\n\n");
    text
}

/// Round 1: signed thinking, redacted thinking and a `read_note` call;
/// round 2: thinking and the answer.
fn anthropic_stream(turn: usize) -> String {
    let mut events = vec![
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
        "role": "assistant", "content": [], "model": "claude-test", "stop_reason": null,
        "usage": {"input_tokens": 120, "output_tokens": 1}}}),
    ];
    let thinking = |index: u64, parts: &[&str], signature: &str| {
        let mut v = vec![json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""}})];
        for p in parts {
            v.push(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "thinking_delta", "thinking": p}}));
        }
        v.push(json!({"type": "content_block_delta", "index": index,
            "delta": {"type": "signature_delta", "signature": signature}}));
        v.push(json!({"type": "content_block_stop", "index": index}));
        v
    };
    let reason = if turn == 0 {
        events.extend(thinking(0, &THOUGHT_1, SIGNATURE));
        events.push(json!({"type": "content_block_start", "index": 1,
            "content_block": {"type": "redacted_thinking", "data": REDACTED}}));
        events.push(json!({"type": "content_block_stop", "index": 1}));
        events.push(
            json!({"type": "content_block_start", "index": 2, "content_block":
            {"type": "tool_use", "id": "toolu_1", "name": "read_note", "input": {}}}),
        );
        events.push(json!({"type": "content_block_delta", "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"a.txt\"}"}}));
        events.push(json!({"type": "content_block_stop", "index": 2}));
        "tool_use"
    } else {
        events.extend(thinking(0, &[THOUGHT_2], "ErUBCkYIBhgCIkBz"));
        events.push(json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}));
        events.push(json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Done."}}));
        events.push(json!({"type": "content_block_stop", "index": 1}));
        "end_turn"
    };
    events.push(
        json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null},
        "usage": {"output_tokens": 40}}),
    );
    events.push(json!({"type": "message_stop"}));
    sse(&events, true)
}

/// Round 1: a thought summary, then a signed `read_note` call; round 2: a
/// thought and the answer.
fn gemini_stream(turn: usize) -> String {
    let chunk = |parts: Value, finish: Option<&str>, usage: Option<Value>| {
        let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        if let Some(f) = finish {
            candidate["finishReason"] = json!(f);
        }
        let mut c = json!({"candidates": [candidate], "modelVersion": "gemini-test"});
        if let Some(u) = usage {
            c["usageMetadata"] = u;
        }
        c
    };
    let usage = |thoughts: u64| {
        json!({"promptTokenCount": 120, "candidatesTokenCount": 10, "thoughtsTokenCount": thoughts,
               "cachedContentTokenCount": 64, "totalTokenCount": 130 + thoughts})
    };
    let events = if turn == 0 {
        vec![
            chunk(json!([{"text": THOUGHT_1[0], "thought": true}]), None, None),
            chunk(json!([{"text": THOUGHT_1[1], "thought": true}]), None, None),
            chunk(
                json!([{"functionCall": {"name": "read_note", "args": {"path": "a.txt"}},
                        "thoughtSignature": GEMINI_SIGNATURE}]),
                Some("STOP"),
                Some(usage(30)),
            ),
        ]
    } else {
        vec![
            chunk(json!([{"text": THOUGHT_2, "thought": true}]), None, None),
            chunk(json!([{"text": "Done."}]), Some("STOP"), Some(usage(12))),
        ]
    };
    sse(&events, false)
}

async fn answer(
    State(received): State<Arc<Received>>,
    Path((format, _rest)): Path<(String, String)>,
    body: String,
) -> Response {
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    received.raw.lock().unwrap().push(body);
    received.bodies.lock().unwrap().push(request.clone());
    let (list, role) = match format.as_str() {
        "gemini" => ("contents", "model"),
        _ => ("messages", "assistant"),
    };
    let turn = request[list]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == role).count());
    let text = match format.as_str() {
        "openai" => openai_stream(turn),
        "anthropic" => anthropic_stream(turn),
        _ => gemini_stream(turn),
    };
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(Body::from(text))
        .unwrap()
}

async fn start_server() -> (String, Arc<Received>) {
    let received = Arc::new(Received::default());
    let app = Router::new()
        .route("/{format}/{*rest}", post(answer))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (format!("http://{addr}"), received)
}

fn provider(base: &str, format: &str, clock: Arc<ManualClock>) -> Arc<dyn ModelProvider> {
    match format {
        "openai" => Arc::new(
            OpenAiProvider::new(OpenAiConfig::new(format!("{base}/openai/v1")), clock).unwrap(),
        ),
        "anthropic" => Arc::new(
            AnthropicProvider::new(AnthropicConfig::new(format!("{base}/anthropic/v1")), clock)
                .unwrap(),
        ),
        _ => Arc::new(
            GeminiProvider::new(GeminiConfig::new(format!("{base}/gemini/v1beta")), clock).unwrap(),
        ),
    }
}

fn runtime_with(provider_for: impl FnOnce(Arc<ManualClock>) -> Arc<dyn ModelProvider>) -> Runtime {
    let clock = Arc::new(ManualClock::new(1_767_225_600_000));
    let host = agent_test_support::memory_host(clock.clone(), 1);
    let tools = spawn_sim_tools(
        host.executor.clone(),
        clock.clone(),
        ToolLog::default(),
        SimToolsConfig::default(),
    );
    Runtime::new(
        host,
        OwnerId::new("proc").unwrap(),
        tools,
        provider_for(clock),
        RuntimeOptions::default(),
    )
}

async fn run_to_end(runtime: &Runtime, config: RunConfig) -> (RunId, AgentRun) {
    let run = runtime
        .start(&SessionId::new("s").unwrap(), "read a.txt", config)
        .await
        .unwrap();
    let record = tokio::time::timeout(Duration::from_secs(30), runtime.wait_settled(&run))
        .await
        .expect("the run settles")
        .unwrap();
    assert_eq!(record.status, RunStatus::Completed, "{record:?}");
    (run, record)
}

/// The reasoning each model response of `run` stored apart, by round.
async fn stored_reasoning(runtime: &Runtime, run: &RunId) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    for a in runtime.activities(run).await.unwrap() {
        if let ActivityKind::ModelResponse {
            round,
            reasoning: Some(blob),
            ..
        } = a.kind
        {
            let text = runtime.blob(run, &blob).await.unwrap();
            out.push((round, String::from_utf8(text).unwrap()));
        }
    }
    out
}

struct ReasoningRun {
    received: Arc<Received>,
    record: AgentRun,
    output: String,
    stored: Vec<(u64, String)>,
    /// The reasoning and the text the run's events streamed.
    streamed_reasoning: String,
    streamed_text: String,
}

async fn reasoning_run(format: &str, reasoning: Reasoning) -> ReasoningRun {
    let (base, received) = start_server().await;
    let runtime = runtime_with(|clock| provider(&base, format, clock));
    let events = runtime.subscribe();
    let config = RunConfig {
        model: ModelSettings {
            reasoning,
            temperature: Some(0.5),
            ..ModelSettings::default()
        },
        ..RunConfig::default()
    };
    let (run, record) = run_to_end(&runtime, config).await;
    let (mut streamed_reasoning, mut streamed_text) = (String::new(), String::new());
    while let Ok(event) = events.try_recv() {
        match event {
            RunEvent::ReasoningDelta { run: r, text } if r == run => {
                streamed_reasoning.push_str(&text)
            }
            RunEvent::TextDelta { run: r, text } if r == run => streamed_text.push_str(&text),
            _ => {}
        }
    }
    ReasoningRun {
        received,
        output: runtime.output(&run).await.unwrap().unwrap_or_default(),
        stored: stored_reasoning(&runtime, &run).await,
        record,
        streamed_reasoning,
        streamed_text,
    }
}

/// What every format shares: the reasoning streamed and stored apart,
/// never in the answer, counted in usage.
fn assert_reasoning_apart(r: &ReasoningRun, reasoning_tokens: u64) {
    let first = THOUGHT_1.concat();
    assert_eq!(r.output, "Done.", "the answer is the answer only");
    assert_eq!(
        r.stored,
        [(1, first.clone()), (2, THOUGHT_2.to_owned())],
        "each round's reasoning is stored apart, on its response activity"
    );
    assert_eq!(r.streamed_reasoning, format!("{first}{THOUGHT_2}"));
    assert_eq!(r.streamed_text, "Done.", "no reasoning in the text stream");
    assert_eq!(r.record.usage.reasoning_tokens, reasoning_tokens);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_reasoning_effort_is_sent_and_the_reasoning_never_goes_back() {
    let setting = Reasoning {
        effort: Some(ReasoningEffort::High),
        budget_tokens: None,
    };
    let r = reasoning_run("openai", setting).await;
    let bodies = r.received.bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 2);
    for b in &bodies {
        assert_eq!(b["reasoning_effort"], "high", "every round carries it");
    }
    let raw = r.received.raw.lock().unwrap().clone();
    assert!(
        !raw[1].contains("Let me think") && !raw[1].contains("read a.txt first"),
        "the reasoning is not part of the history: {}",
        raw[1]
    );
    let assistant = &bodies[1]["messages"][2];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["tool_calls"][0]["id"], "call_1");
    assert_reasoning_apart(&r, 30 + 12);
    assert_eq!(r.record.usage.cached_input_tokens, 128);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_thinking_is_enabled_and_signed_blocks_go_back_byte_for_byte() {
    let setting = Reasoning {
        effort: Some(ReasoningEffort::Low),
        budget_tokens: Some(2_048),
    };
    let r = reasoning_run("anthropic", setting).await;
    let bodies = r.received.bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 2);
    for b in &bodies {
        assert_eq!(
            b["thinking"],
            json!({"type": "enabled", "budget_tokens": 2_048})
        );
        assert_eq!(
            b["max_tokens"],
            anthropic::DEFAULT_MAX_TOKENS + 2_048,
            "the budget comes on top of the answer's share"
        );
        assert!(
            b.get("temperature").is_none(),
            "thinking takes no temperature"
        );
    }
    let continuation = &bodies[1]["messages"][1];
    assert_eq!(continuation["role"], "assistant");
    let blocks = continuation["content"].as_array().unwrap();
    assert_eq!(
        blocks[0],
        json!({"type": "thinking", "thinking": THOUGHT_1.concat(), "signature": SIGNATURE}),
        "the signed thinking block, unchanged and unmarked"
    );
    assert_eq!(
        blocks[1],
        json!({"type": "redacted_thinking", "data": REDACTED})
    );
    assert_eq!(blocks[2]["type"], "tool_use");
    assert_eq!(blocks[2]["id"], "toolu_1");
    // Byte for byte in what left the process: the signature and the
    // encrypted data as the server sent them, and the thinking text only
    // inside its block.
    let raw = r.received.raw.lock().unwrap().clone();
    assert!(raw[1].contains(&format!("\"signature\":\"{SIGNATURE}\"")));
    assert!(raw[1].contains(&format!("\"data\":\"{REDACTED}\"")));
    assert_eq!(raw[1].matches(&THOUGHT_1.concat()).count(), 1);
    assert_reasoning_apart(&r, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_thinking_config_is_sent_and_only_the_signature_goes_back() {
    let setting = Reasoning {
        effort: Some(ReasoningEffort::Medium),
        budget_tokens: None,
    };
    let r = reasoning_run("gemini", setting).await;
    let bodies = r.received.bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 2);
    for b in &bodies {
        assert_eq!(
            b["generationConfig"]["thinkingConfig"],
            json!({"thinkingBudget": ReasoningEffort::Medium.thinking_budget(), "includeThoughts": true}),
            "the effort's budget, and the thoughts asked for"
        );
    }
    let model_turn = &bodies[1]["contents"][1];
    assert_eq!(model_turn["role"], "model");
    let call = model_turn["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p.get("functionCall").is_some())
        .expect("the call goes back");
    assert_eq!(call["thoughtSignature"], GEMINI_SIGNATURE);
    let raw = r.received.raw.lock().unwrap().clone();
    assert!(raw[1].contains(&format!("\"thoughtSignature\":\"{GEMINI_SIGNATURE}\"")));
    assert!(
        !raw[1].contains("Let me think") && !raw[1].contains("read a.txt first"),
        "thought summaries are not sent back: {}",
        raw[1]
    );
    assert_reasoning_apart(&r, 30 + 12);
    assert_eq!(r.record.usage.cached_input_tokens, 128);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_setting_no_request_carries_a_reasoning_field() {
    for format in ["openai", "anthropic", "gemini"] {
        let (base, received) = start_server().await;
        let runtime = runtime_with(|clock| provider(&base, format, clock));
        run_to_end(&runtime, RunConfig::default()).await;
        for b in received.bodies.lock().unwrap().iter() {
            assert!(b.get("reasoning_effort").is_none(), "{format}: {b}");
            assert!(b.get("thinking").is_none(), "{format}: {b}");
            assert!(
                b.pointer("/generationConfig/thinkingConfig").is_none(),
                "{format}: {b}"
            );
        }
    }
}

/// The blocks of a Messages request that carry `cache_control`, named.
fn breakpoints(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for (i, t) in body["tools"].as_array().into_iter().flatten().enumerate() {
        if t.get("cache_control").is_some() {
            out.push(format!("tools[{i}]"));
        }
    }
    for (i, s) in body["system"].as_array().into_iter().flatten().enumerate() {
        if s.get("cache_control").is_some() {
            out.push(format!("system[{i}]"));
        }
    }
    for (m, message) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for (b, block) in message["content"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            if block.get("cache_control").is_some() {
                assert_eq!(block["cache_control"], json!({"type": "ephemeral"}));
                out.push(format!("messages[{m}][{b}]"));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_requests_carry_breakpoints_and_read_the_cache_from_round_two() {
    const ROUNDS: usize = 6;
    let (base, server) = anthropic_cache::start(ROUNDS).await;
    let runtime = runtime_with(|clock| {
        Arc::new(AnthropicProvider::new(AnthropicConfig::new(base.clone()), clock).unwrap())
    });
    let (_, record) = run_to_end(&runtime, RunConfig::default()).await;
    let bodies = server.bodies.lock().unwrap().clone();
    let usages = server.usages.lock().unwrap().clone();
    assert_eq!(bodies.len(), ROUNDS);
    for (round, body) in bodies.iter().enumerate() {
        let marks = breakpoints(body);
        assert!(marks.len() <= anthropic::MAX_CACHE_BREAKPOINTS, "{marks:?}");
        let tools = body["tools"].as_array().unwrap().len();
        let last = body["messages"].as_array().unwrap().len() - 1;
        let mut expected = vec![format!("tools[{}]", tools - 1), "system[0]".to_owned()];
        if round > 0 {
            // The previous round's last message: the user turn before the
            // last assistant turn.
            expected.push(format!("messages[{}][0]", last - 2));
        }
        expected.push(format!("messages[{last}][0]"));
        assert_eq!(marks, expected, "round {}", round + 1);
    }
    assert_eq!(usages[0].cache_read_input_tokens, 0);
    assert!(usages[0].cache_creation_input_tokens > 0);
    for n in 1..ROUNDS {
        assert_eq!(
            usages[n].cache_read_input_tokens,
            usages[n - 1].cache_read_input_tokens + usages[n - 1].cache_creation_input_tokens,
            "round {} reads all that round {} cached",
            n + 1,
            n
        );
        assert!(usages[n].billed() < usages[n].total() as f64);
    }
    let reads: u64 = usages.iter().map(|u| u.cache_read_input_tokens).sum();
    let writes: u64 = usages.iter().map(|u| u.cache_creation_input_tokens).sum();
    let uncached: u64 = usages.iter().map(|u| u.input_tokens).sum();
    assert_eq!(record.usage.cached_input_tokens, reads, "recorded in usage");
    assert_eq!(record.usage.cache_write_tokens, writes);
    assert_eq!(
        record.usage.input_tokens, uncached,
        "Anthropic's input_tokens as reported"
    );
}

/// The request bodies' bytes: round 2 starts with round 1's conversation,
/// byte for byte, and the tools and system instructions are the same bytes.
fn assert_prefix_shared(raw: &[String], list: &str) {
    let first: Value = serde_json::from_str(&raw[0]).unwrap();
    let second: Value = serde_json::from_str(&raw[1]).unwrap();
    let history = serde_json::to_string(&first[list]).unwrap();
    let open = format!("{{\"{list}\":{}", history.trim_end_matches(']'));
    assert!(
        raw[0].starts_with(&format!("{{\"{list}\":{history}")),
        "{}",
        raw[0]
    );
    assert!(
        raw[1].starts_with(&open),
        "round 2 does not start with round 1's bytes:\n{}\n{}",
        raw[0],
        raw[1]
    );
    for key in ["tools", "systemInstruction"] {
        assert_eq!(
            serde_json::to_string(&first[key]).unwrap(),
            serde_json::to_string(&second[key]).unwrap(),
            "{key}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_and_gemini_rounds_share_their_prefix_byte_for_byte() {
    for (format, list) in [("openai", "messages"), ("gemini", "contents")] {
        let (base, received) = start_server().await;
        let runtime = runtime_with(|clock| provider(&base, format, clock));
        run_to_end(&runtime, RunConfig::default()).await;
        let raw = received.raw.lock().unwrap().clone();
        assert_eq!(raw.len(), 2, "{format}");
        assert_prefix_shared(&raw, list);
    }
}
