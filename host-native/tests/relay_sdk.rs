//! The official provider SDKs through the model relay (issue 34 item 5,
//! S13.3): `openai`, `@anthropic-ai/sdk` and `@google/genai` (pinned in
//! tests/sdk/package-lock.json, installed by `cargo xtask install`) run in
//! Node with the relay as their base URL and the gateway token as their API
//! key, against a loopback upstream that records what it receives and
//! streams a fixture in the provider's format (text, then one tool call;
//! the shapes of each provider's streaming reference). Each SDK must parse
//! the text and the call intact, read the relay's refusal of a
//! non-streaming request, and the upstream must receive the relay's key,
//! never the page's token nor the other key the page sent.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_fetch::{Limits, ReaderConfig, ScriptedResolver, UrlPolicy, WebReader};
use agent_host_native::serve::gateway::{self, GatewayState};
use agent_host_native::serve::relay::{Relay, RelayTarget};
use agent_kernel::host::ManualClock;
use axum::http::HeaderMap;
use serde_json::{Value, json};

const TOKEN: &str = "0123456789abcdef0123456789abcdef";
const SERVER_KEY: &str = "server-side-key-5b1e";
const PAGE_KEY: &str = "page-supplied-key";

/// One request the upstream received: path with query, every header, body.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    headers: Vec<(String, String)>,
    body: Value,
}

type Log = Arc<Mutex<Vec<Received>>>;

fn sse(events: &[(Option<&str>, Value)]) -> String {
    events
        .iter()
        .map(|(event, data)| match event {
            Some(e) => format!("event: {e}\ndata: {data}\n\n"),
            None => format!("data: {data}\n\n"),
        })
        .collect()
}

/// OpenAI chat completion chunks: a role, text in two pieces, one tool call
/// whose arguments stream in two pieces, the finish, `[DONE]`.
fn openai_fixture() -> String {
    let chunk = |delta: Value, finish: Value| {
        (
            None,
            json!({
                "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                "model": "gpt-test",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
            }),
        )
    };
    let mut s = sse(&[
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
        chunk(json!({"content": "Hello"}), Value::Null),
        chunk(json!({"content": ", world"}), Value::Null),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": ""}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"Paris\"}"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
    ]);
    s.push_str("data: [DONE]\n\n");
    s
}

/// Anthropic Messages events: a text block in two deltas, a ping, a
/// tool_use block whose input streams as two `input_json_delta`s, the
/// stop reason and final usage in `message_delta`.
fn anthropic_fixture() -> String {
    sse(&[
        (
            Some("message_start"),
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                "role": "assistant", "model": "claude-test", "content": [],
                "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 12, "output_tokens": 1}}}),
        ),
        (
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
        ),
        (Some("ping"), json!({"type": "ping"})),
        (
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": "Hello"}}),
        ),
        (
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": ", world"}}),
        ),
        (
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": 1,
                "content_block": {"type": "tool_use", "id": "toolu_1",
                    "name": "get_weather", "input": {}}}),
        ),
        (
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": "{\"city\":"}}),
        ),
        (
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": "\"Paris\"}"}}),
        ),
        (
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": 1}),
        ),
        (
            Some("message_delta"),
            json!({"type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                "usage": {"output_tokens": 20}}),
        ),
        (Some("message_stop"), json!({"type": "message_stop"})),
    ])
}

/// Gemini `streamGenerateContent?alt=sse` responses: text in two chunks,
/// then a `functionCall` part with the finish and the usage.
fn gemini_fixture() -> String {
    let part = |parts: Value| json!({"role": "model", "parts": parts});
    sse(&[
        (
            None,
            json!({"candidates": [{"content": part(json!([{"text": "Hello"}])), "index": 0}],
                "modelVersion": "gemini-2.5-flash"}),
        ),
        (
            None,
            json!({"candidates": [{"content": part(json!([{"text": ", world"}])), "index": 0}]}),
        ),
        (
            None,
            json!({"candidates": [{"content": part(json!([{"functionCall":
                    {"name": "get_weather", "args": {"city": "Paris"}}}])),
                "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": 12,
                    "totalTokenCount": 20}}),
        ),
    ])
}

/// The loopback upstream of all three formats: it records each request and
/// answers each streaming path with its format's fixture.
async fn upstream() -> (SocketAddr, Log) {
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    let app = axum::Router::new().fallback(
        move |uri: axum::http::Uri, headers: HeaderMap, body: String| {
            let l = l.clone();
            async move {
                let path = uri.to_string();
                l.lock().unwrap().push(Received {
                    path: path.clone(),
                    headers: headers
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_owned()))
                        .collect(),
                    body: serde_json::from_str(&body).unwrap_or(Value::Null),
                });
                let fixture = match path.as_str() {
                    "/openai/v1/chat/completions" => openai_fixture(),
                    "/anthropic/v1/messages" => anthropic_fixture(),
                    "/gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse" => {
                        gemini_fixture()
                    }
                    _ => {
                        return axum::response::Response::builder()
                            .status(404)
                            .body(axum::body::Body::from("no such fixture"))
                            .unwrap();
                    }
                };
                axum::response::Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(axum::body::Body::from(fixture))
                    .unwrap()
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, log)
}

/// A gateway relaying all three formats to the upstream with the server's key.
async fn gateway(up: SocketAddr) -> SocketAddr {
    let key = |_: &str| Some(SERVER_KEY.to_owned());
    let relay = Relay::new(vec![
        RelayTarget::parse(&format!("openai-compatible=http://{up}/openai/v1"), key).unwrap(),
        RelayTarget::parse(&format!("anthropic=http://{up}/anthropic/v1"), key).unwrap(),
        RelayTarget::parse(&format!("gemini=http://{up}/gemini/v1beta"), key).unwrap(),
    ])
    .unwrap();
    let reader = WebReader::new(
        UrlPolicy::public_web(Arc::new(ScriptedResolver::new())),
        ReaderConfig::direct_only(),
        Limits::spec(),
        Arc::new(ManualClock::new(0)),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state =
        GatewayState::new(Arc::new(reader), TOKEN, [gateway::page_origin(addr)]).with_relay(relay);
    tokio::spawn(async move { gateway::serve(listener, state).await.unwrap() });
    addr
}

fn sdk_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk");
    for package in ["openai", "@anthropic-ai/sdk", "@google/genai"] {
        assert!(
            dir.join("node_modules").join(package).is_dir(),
            "the SDK {package} is not installed in {}; run `cargo xtask install` (it runs `npm ci` there)",
            dir.display()
        );
    }
    dir
}

/// Run `drive.mjs` for `sdk` with `base` and the token; what the SDK parsed.
async fn drive(sdk: &'static str, base: String) -> Value {
    let dir = sdk_dir();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("node")
            .arg("drive.mjs")
            .args([sdk, base.as_str(), TOKEN])
            .current_dir(dir)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("node runs (Debian's nodejs)")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{sdk}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{sdk} printed {stdout}: {e}"))
}

/// The upstream got the relay's key in `key_header` (as `key_value`), and
/// no header carried the page's token or the page's other key.
fn assert_relay_key_only(seen: &Received, key_header: &str, key_value: &str) {
    let get = |name: &str| {
        seen.headers
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect::<Vec<_>>()
    };
    assert_eq!(get(key_header), [key_value], "{seen:?}");
    for (name, value) in &seen.headers {
        assert!(
            !value.contains(TOKEN) && !value.contains(PAGE_KEY),
            "{name}: {value} reached the upstream"
        );
        assert!(
            !name.starts_with("x-stainless"),
            "the SDK's {name} is not forwarded"
        );
    }
    for other in ["authorization", "x-api-key", "x-goog-api-key"] {
        if other != key_header {
            assert!(get(other).is_empty(), "{other} was forwarded: {seen:?}");
        }
    }
}

fn assert_streaming_only_refusal(parsed: &Value, sdk: &str) {
    let refused = &parsed["refused"];
    assert_eq!(refused["status"], 400, "{sdk}: {parsed}");
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains("only streaming requests")),
        "{sdk} read the relay's message: {refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_streams_text_and_a_tool_call_through_the_relay() {
    let (up, log) = upstream().await;
    let gw = gateway(up).await;
    // With the relay as the base URL, and with `/v1` after it (a base URL
    // copied from https://api.openai.com/v1).
    for base in [
        format!("http://{gw}/v1/relay/openai-compatible"),
        format!("http://{gw}/v1/relay/openai-compatible/v1"),
    ] {
        let parsed = drive("openai", base.clone()).await;
        assert_eq!(parsed["text"], "Hello, world", "{base}: {parsed}");
        assert_eq!(
            parsed["tool_calls"],
            json!([{"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}]),
            "{parsed}"
        );
        assert_eq!(parsed["finish"], "tool_calls");
        assert_streaming_only_refusal(&parsed, "openai");
        let seen = log.lock().unwrap().clone();
        assert_eq!(
            seen.len(),
            1,
            "the refused request never went upstream: {seen:?}"
        );
        log.lock().unwrap().clear();
        assert_eq!(seen[0].path, "/openai/v1/chat/completions");
        assert_eq!(seen[0].body["stream"], true);
        assert_eq!(seen[0].body["tools"][0]["function"]["name"], "get_weather");
        assert_relay_key_only(&seen[0], "authorization", &format!("Bearer {SERVER_KEY}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_anthropic_sdk_streams_text_and_a_tool_call_through_the_relay() {
    let (up, log) = upstream().await;
    let gw = gateway(up).await;
    let parsed = drive("anthropic", format!("http://{gw}/v1/relay/anthropic")).await;
    assert_eq!(parsed["text"], "Hello, world", "{parsed}");
    assert_eq!(
        parsed["tool_calls"],
        json!([{"id": "toolu_1", "name": "get_weather", "arguments": {"city": "Paris"}}]),
        "{parsed}"
    );
    assert_eq!(parsed["finish"], "tool_use");
    assert_eq!(parsed["usage"]["output_tokens"], 20);
    assert_streaming_only_refusal(&parsed, "anthropic");
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].path, "/anthropic/v1/messages");
    assert_eq!(seen[0].body["stream"], true);
    assert_relay_key_only(&seen[0], "x-api-key", SERVER_KEY);
    let version: Vec<&str> = seen[0]
        .headers
        .iter()
        .filter(|(k, _)| k == "anthropic-version")
        .map(|(_, v)| v.as_str())
        .collect();
    // The SDK's own version (1.17.0 sends 2026-10-21), passed on as sent.
    assert_eq!(version.len(), 1, "{seen:?}");
    assert!(
        version[0].len() == 10 && version[0].starts_with("20"),
        "{version:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_google_genai_sdk_streams_text_and_a_function_call_through_the_relay() {
    let (up, log) = upstream().await;
    let gw = gateway(up).await;
    let parsed = drive("gemini", format!("http://{gw}/v1/relay/gemini")).await;
    assert_eq!(parsed["text"], "Hello, world", "{parsed}");
    assert_eq!(
        parsed["tool_calls"],
        json!([{"name": "get_weather", "arguments": {"city": "Paris"}}]),
        "{parsed}"
    );
    assert_eq!(parsed["finish"], "STOP");
    assert_eq!(parsed["usage"], json!({"prompt": 8, "candidates": 12}));
    assert_streaming_only_refusal(&parsed, "gemini");
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        seen[0].path,
        "/gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(
        seen[0].body["tools"][0]["functionDeclarations"][0]["name"],
        "get_weather"
    );
    assert_relay_key_only(&seen[0], "x-goog-api-key", SERVER_KEY);
}

/// The SDK with a wrong token never reaches the upstream (the relay's
/// token check holds for the SDKs' paths too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sdk_path_without_the_token_never_reaches_the_upstream() {
    let (up, log) = upstream().await;
    let gw = gateway(up).await;
    let client = reqwest::Client::new();
    for (path, header, value) in [
        ("anthropic/v1/messages", "x-api-key", PAGE_KEY.to_owned()),
        (
            "gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
            "x-goog-api-key",
            PAGE_KEY.to_owned(),
        ),
        (
            "openai-compatible/v1/chat/completions",
            "authorization",
            format!("Bearer {PAGE_KEY}"),
        ),
    ] {
        let resp = client
            .post(format!("http://{gw}/v1/relay/{path}"))
            .header(header, &value)
            .body(r#"{"stream": true}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 401, "{path}");
        let echoed = format!("{:?}", resp.headers());
        assert!(!echoed.contains(PAGE_KEY), "{echoed}");
        assert!(!resp.text().await.unwrap().contains(PAGE_KEY));
    }
    assert!(log.lock().unwrap().is_empty());
}
