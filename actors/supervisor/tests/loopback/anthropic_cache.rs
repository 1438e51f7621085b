//! A loopback Anthropic Messages server that reports prompt caching the way
//! the API documents it, for the caching tests (`tests/reasoning_caching.rs`)
//! and the bench line (`host-native/benches/prompt_caching.rs`, which
//! includes this file by path).
//!
//! The ledger: the prompt is read in the API's order (tools, system,
//! messages) as content blocks; a block carrying `cache_control` is a
//! breakpoint. A request reads from the cache the longest prefix that an
//! earlier request wrote, found at a breakpoint or up to
//! [`LOOKBACK_BLOCKS`] blocks before one; it writes the prefix up to its
//! last breakpoint, less what it read. `input_tokens` is what is left:
//! Anthropic's `input_tokens` never includes the cached or written tokens.
//! A block's `cache_control` is not part of the cached content. Tokens are
//! counted as one per four bytes of a block's JSON; the API's minimum
//! cacheable length is not modelled.
//!
//! The scripted loop: while the conversation has fewer than `rounds - 1`
//! assistant turns the model calls `read_note`; then it answers `Done.`.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};

/// How many blocks before a breakpoint the API looks for an earlier write.
pub const LOOKBACK_BLOCKS: usize = 20;

/// The input side of one response's `usage`, as the API reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheUsage {
    /// Input tokens neither read from nor written to the cache.
    pub input_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub cache_creation_input_tokens: u64,
}

impl CacheUsage {
    /// Every input token of the request.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens
    }

    /// Input billed, in uncached input tokens: cache reads at 0.1×, cache
    /// writes (the five-minute cache) at 1.25× the base input price.
    pub fn billed(&self) -> f64 {
        self.input_tokens as f64
            + 0.1 * self.cache_read_input_tokens as f64
            + 1.25 * self.cache_creation_input_tokens as f64
    }
}

/// One token per four bytes, rounded up.
pub fn tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// A block's cached content: itself without its `cache_control`.
fn canonical(prefix: &str, block: &Value) -> String {
    let mut b = block.clone();
    if let Some(o) = b.as_object_mut() {
        o.remove("cache_control");
    }
    format!("{prefix}{b}")
}

fn breakpoint(block: &Value) -> bool {
    block.get("cache_control").is_some()
}

/// What the server has cached: prefix hashes written at breakpoints.
#[derive(Debug, Default)]
pub struct Ledger {
    cached: HashSet<u64>,
}

impl Ledger {
    /// Account for one request body, as the API does, and remember what
    /// it wrote.
    pub fn account(&mut self, request: &Value) -> CacheUsage {
        let mut blocks: Vec<(String, bool)> = Vec::new();
        for tool in request["tools"].as_array().into_iter().flatten() {
            blocks.push((canonical("tool:", tool), breakpoint(tool)));
        }
        match &request["system"] {
            Value::String(s) => blocks.push((format!("system:{s}"), false)),
            Value::Array(parts) => {
                for p in parts {
                    blocks.push((canonical("system:", p), breakpoint(p)));
                }
            }
            _ => {}
        }
        for m in request["messages"].as_array().into_iter().flatten() {
            let role = format!("{}:", m["role"].as_str().unwrap_or(""));
            match &m["content"] {
                Value::Array(content) => {
                    for b in content {
                        blocks.push((canonical(&role, b), breakpoint(b)));
                    }
                }
                other => blocks.push((canonical(&role, other), false)),
            }
        }
        let mut hasher = DefaultHasher::new();
        let mut total = 0u64;
        let mut prefix_hashes = Vec::with_capacity(blocks.len());
        let mut prefix_tokens = Vec::with_capacity(blocks.len());
        for (text, _) in &blocks {
            text.hash(&mut hasher);
            total += tokens(text);
            prefix_hashes.push(hasher.finish());
            prefix_tokens.push(total);
        }
        let breakpoints: Vec<usize> = blocks
            .iter()
            .enumerate()
            .filter(|(_, (_, b))| *b)
            .map(|(i, _)| i)
            .collect();
        let mut read = 0;
        for &b in &breakpoints {
            let from = b.saturating_sub(LOOKBACK_BLOCKS - 1);
            if let Some(j) = (from..=b)
                .rev()
                .find(|&j| self.cached.contains(&prefix_hashes[j]))
            {
                read = read.max(prefix_tokens[j]);
            }
        }
        let written_to = breakpoints.last().map_or(0, |&b| prefix_tokens[b]);
        let write = written_to.saturating_sub(read);
        for &b in &breakpoints {
            self.cached.insert(prefix_hashes[b]);
        }
        CacheUsage {
            input_tokens: total - read - write,
            cache_read_input_tokens: read,
            cache_creation_input_tokens: write,
        }
    }
}

/// The scripted loop's server and what it received.
#[derive(Debug, Default)]
pub struct CachingServer {
    pub rounds: usize,
    pub ledger: Mutex<Ledger>,
    /// Each request body as received, and its accounted usage.
    pub bodies: Mutex<Vec<Value>>,
    pub usages: Mutex<Vec<CacheUsage>>,
}

fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect()
}

async fn messages(State(server): State<Arc<CachingServer>>, body: String) -> Response {
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let usage = server.ledger.lock().unwrap().account(&request);
    server.bodies.lock().unwrap().push(request.clone());
    server.usages.lock().unwrap().push(usage);
    let turn = request["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
    let usage_json = json!({
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
    });
    let mut start_usage = usage_json.clone();
    start_usage["output_tokens"] = json!(1);
    let mut events = vec![json!({"type": "message_start", "message": {
        "id": format!("msg_{turn}"), "type": "message", "role": "assistant", "content": [],
        "model": "claude-test", "stop_reason": null, "usage": start_usage}})];
    let reason = if turn + 1 < server.rounds {
        let input = json!({"path": format!("notes/round-{turn}.txt")}).to_string();
        events.push(
            json!({"type": "content_block_start", "index": 0, "content_block":
            {"type": "tool_use", "id": format!("toolu_{turn}"), "name": "read_note", "input": {}}}),
        );
        events.push(json!({"type": "content_block_delta", "index": 0, "delta":
            {"type": "input_json_delta", "partial_json": input}}));
        "tool_use"
    } else {
        events.push(json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}));
        events.push(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Done."}}));
        "end_turn"
    };
    events.push(json!({"type": "content_block_stop", "index": 0}));
    let mut end_usage = usage_json;
    end_usage["output_tokens"] = json!(12);
    events.push(
        json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null},
        "usage": end_usage}),
    );
    events.push(json!({"type": "message_stop"}));
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(Body::from(sse(&events)))
        .unwrap()
}

/// Start the scripted loop of `rounds` model rounds on a loopback port;
/// the base URL to configure (`/messages` is appended) and the server.
pub async fn start(rounds: usize) -> (String, Arc<CachingServer>) {
    let server = Arc::new(CachingServer {
        rounds,
        ..CachingServer::default()
    });
    let app = Router::new()
        .route("/v1/messages", post(messages))
        .with_state(server.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (format!("http://{addr}/v1"), server)
}
