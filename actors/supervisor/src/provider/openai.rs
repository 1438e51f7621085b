//! An OpenAI-compatible Chat Completions client: streaming (SSE) with tool
//! calls, through reqwest so that it builds natively and for wasm32 (where
//! reqwest uses the browser's fetch). Refused requests (HTTP 429 and 5xx,
//! connection failures) are retried a bounded number of times with
//! exponential backoff, sleeping through the host clock.

use std::collections::{BTreeMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use serde_json::{Value, json};

use agent_kernel::host::Clock;

use super::sse::SseDecoder;
use super::{
    FinishReason, ModelEvent, ModelProvider, ModelRequest, ModelStream, ModelUsage, ProviderError,
};
use crate::transcript::{AssistantToolCall, Message};

/// Where and how to reach the model.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// For example `https://api.openai.com/v1` or `http://127.0.0.1:8080/v1`;
    /// `/chat/completions` is appended.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` when present. Never logged.
    pub api_key: Option<String>,
    /// Retries after the first attempt for 429, 5xx and connection failures.
    pub max_retries: u32,
    /// Delay before the first retry; doubles each time up to `max_backoff`.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("max_retries", &self.max_retries)
            .finish()
    }
}

impl OpenAiConfig {
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
        }
    }
}

/// The Chat Completions provider.
pub struct OpenAiProvider {
    config: OpenAiConfig,
    endpoint: String,
    client: reqwest::Client,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("config", &self.config)
            .finish()
    }
}

impl OpenAiProvider {
    /// Check the configuration; backoff sleeps go through `clock`.
    pub fn new(config: OpenAiConfig, clock: Arc<dyn Clock>) -> Result<Self, ProviderError> {
        let base = config.base_url.trim_end_matches('/');
        let parsed = reqwest::Url::parse(base).map_err(|e| {
            ProviderError::Config(format!(
                "base URL {base:?} is not a URL ({e}); use for example http://127.0.0.1:8080/v1"
            ))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ProviderError::Config(format!(
                "base URL scheme {:?} is not http or https",
                parsed.scheme()
            )));
        }
        if config.max_retries > 10 {
            return Err(ProviderError::Config(format!(
                "max_retries {} is more than 10; use a smaller bound",
                config.max_retries
            )));
        }
        Ok(Self {
            endpoint: format!("{base}/chat/completions"),
            config,
            client: reqwest::Client::new(),
            clock,
        })
    }

    fn backoff(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        let exp = self
            .config
            .initial_backoff
            .saturating_mul(1u32 << retry.min(16));
        retry_after.unwrap_or(exp).min(self.config.max_backoff)
    }
}

/// The JSON body of a streaming Chat Completions request.
pub fn request_body(request: &ModelRequest) -> Value {
    let system = request
        .system
        .as_deref()
        .map(|content| json!({"role": "system", "content": content}));
    let messages: Vec<Value> = system
        .into_iter()
        .chain(request.messages.iter().map(wire_message))
        .collect();
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters}})
            })
            .collect();
    }
    if let Some(t) = request.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(m) = request.max_output_tokens {
        body["max_tokens"] = json!(m);
    }
    body
}

fn wire_message(m: &Message) -> Value {
    match m {
        Message::System { content } => json!({"role": "system", "content": content}),
        Message::User { content } => json!({"role": "user", "content": content}),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            let mut v = json!({"role": "assistant", "content": content});
            if !tool_calls.is_empty() {
                v["tool_calls"] = tool_calls
                    .iter()
                    .map(|c| {
                        json!({"id": c.id, "type": "function",
                               "function": {"name": c.name, "arguments": c.arguments}})
                    })
                    .collect();
            }
            v
        }
        Message::Tool {
            tool_call_id,
            content,
        } => json!({"role": "tool", "tool_call_id": tool_call_id, "content": content}),
    }
}

#[cfg(not(target_arch = "wasm32"))]
type ByteStream = Pin<Box<dyn Stream<Item = Result<bytes::Bytes, reqwest::Error>> + Send>>;
#[cfg(target_arch = "wasm32")]
type ByteStream = Pin<Box<dyn Stream<Item = Result<bytes::Bytes, reqwest::Error>>>>;

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl ModelProvider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai-compatible"
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        let body = request_body(&request);
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let mut req = self.client.post(&self.endpoint).json(&body);
            if let Some(key) = &self.config.api_key {
                req = req.bearer_auth(key);
            }
            let retries_left = attempt <= self.config.max_retries;
            match req.send().await {
                Err(e) => {
                    if !retries_left {
                        return Err(ProviderError::Transport {
                            attempts: attempt,
                            detail: e.without_url().to_string(),
                        });
                    }
                    tracing::warn!(attempt, "model endpoint unreachable; retrying");
                    self.clock.sleep(self.backoff(attempt - 1, None)).await;
                }
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    if (200..300).contains(&status) {
                        let bytes: ByteStream = Box::pin(resp.bytes_stream());
                        return Ok(event_stream(bytes));
                    }
                    let refusable = status == 429 || (500..600).contains(&status);
                    if !refusable {
                        return Err(ProviderError::Http {
                            status,
                            attempts: attempt,
                            hint: "check the base URL, the model name and the API key",
                        });
                    }
                    if !retries_left {
                        return Err(ProviderError::Http {
                            status,
                            attempts: attempt,
                            hint: "the endpoint is overloaded or failing; try again later",
                        });
                    }
                    let retry_after = resp
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|s| s.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    tracing::warn!(
                        attempt,
                        status,
                        "model endpoint refused the request; retrying"
                    );
                    self.clock
                        .sleep(self.backoff(attempt - 1, retry_after))
                        .await;
                }
            }
        }
    }
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

struct StreamState {
    body: ByteStream,
    decoder: SseDecoder,
    out: VecDeque<Result<ModelEvent, ProviderError>>,
    calls: BTreeMap<u64, PartialCall>,
    finish: Option<FinishReason>,
    usage: Option<ModelUsage>,
    events: usize,
    closed: bool,
}

impl StreamState {
    fn fail(&mut self, e: ProviderError) {
        self.out.push_back(Err(e));
        self.closed = true;
    }

    /// Emit the assembled tool calls, the usage and the finish reason.
    fn complete(&mut self) {
        let Some(finish) = self.finish.take() else {
            let events = self.events;
            self.fail(ProviderError::Disconnected { events });
            return;
        };
        for (index, call) in std::mem::take(&mut self.calls) {
            if call.id.is_empty() || call.name.is_empty() {
                self.fail(ProviderError::Malformed {
                    detail: format!("tool call {index} has no id or no function name"),
                });
                return;
            }
            self.out
                .push_back(Ok(ModelEvent::ToolCall(AssistantToolCall {
                    id: call.id,
                    name: call.name,
                    arguments: call.arguments,
                })));
        }
        if let Some(usage) = self.usage.take() {
            self.out.push_back(Ok(ModelEvent::Usage(usage)));
        }
        self.out.push_back(Ok(ModelEvent::Finish(finish)));
        self.closed = true;
    }

    fn on_data(&mut self, data: &str) {
        if data.trim() == "[DONE]" {
            self.complete();
            return;
        }
        let chunk: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(e) => {
                self.fail(ProviderError::Malformed {
                    detail: format!("a data event is not JSON ({e})"),
                });
                return;
            }
        };
        if chunk.get("error").is_some() {
            self.fail(ProviderError::Malformed {
                detail: "the endpoint sent an error event inside the stream".into(),
            });
            return;
        }
        self.events += 1;
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.usage = Some(ModelUsage {
                input_tokens: u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
                output_tokens: u
                    .get("completion_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
            });
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return;
        };
        let delta = choice.get("delta").cloned().unwrap_or(Value::Null);
        if let Some(text) = delta.get("content").and_then(Value::as_str)
            && !text.is_empty()
        {
            self.out
                .push_back(Ok(ModelEvent::TextDelta(text.to_owned())));
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for (pos, c) in calls.iter().enumerate() {
                let index = c.get("index").and_then(Value::as_u64).unwrap_or(pos as u64);
                let entry = self.calls.entry(index).or_default();
                if let Some(id) = c.get("id").and_then(Value::as_str) {
                    entry.id.push_str(id);
                }
                if let Some(f) = c.get("function") {
                    if let Some(n) = f.get("name").and_then(Value::as_str) {
                        entry.name.push_str(n);
                    }
                    if let Some(a) = f.get("arguments").and_then(Value::as_str) {
                        entry.arguments.push_str(a);
                    }
                }
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(FinishReason::from_wire(reason));
        }
    }
}

fn event_stream(body: ByteStream) -> ModelStream {
    let state = StreamState {
        body,
        decoder: SseDecoder::new(),
        out: VecDeque::new(),
        calls: BTreeMap::new(),
        finish: None,
        usage: None,
        events: 0,
        closed: false,
    };
    Box::pin(futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(item) = st.out.pop_front() {
                return Some((item, st));
            }
            if st.closed {
                return None;
            }
            match st.body.next().await {
                Some(Ok(bytes)) => match st.decoder.push(&bytes) {
                    Ok(payloads) => {
                        for p in payloads {
                            if st.closed {
                                break;
                            }
                            st.on_data(&p);
                        }
                    }
                    Err(e) => st.fail(ProviderError::Malformed {
                        detail: e.to_string(),
                    }),
                },
                Some(Err(_)) | None => {
                    // The connection ended. Without a finish reason the answer is
                    // incomplete; with one (some servers omit `[DONE]`) it is whole.
                    if st.decoder.has_partial() || st.finish.is_none() {
                        let events = st.events;
                        st.fail(ProviderError::Disconnected { events });
                    } else {
                        st.complete();
                    }
                }
            }
        }
    }))
}
