//! An OpenAI-compatible Chat Completions client: streaming (SSE) with tool
//! calls, for OpenAI and the servers that speak its format (llama.cpp,
//! Ollama, vLLM, ...; a keyless local server needs no API key). The HTTP
//! side and its retries are [`super::http`]'s; the stream loop and the
//! answer's assembly are [`super::wire`]'s.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use agent_kernel::host::Clock;

use super::http::{ModelHttp, RetryPolicy, check_base_url};
use super::wire::{Answer, Step, WireDecoder, event_stream, json_payload};
use super::{FinishReason, ModelEvent, ModelProvider, ModelRequest, ModelStream, ProviderError};
use crate::transcript::Message;

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
        let retry = RetryPolicy::default();
        Self {
            base_url: base_url.into(),
            api_key: None,
            max_retries: retry.max_retries,
            initial_backoff: retry.initial_backoff,
            max_backoff: retry.max_backoff,
        }
    }
}

/// The Chat Completions provider.
pub struct OpenAiProvider {
    config: OpenAiConfig,
    endpoint: String,
    http: ModelHttp,
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
        let base = check_base_url(&config.base_url, "http://127.0.0.1:8080/v1")?;
        let http = ModelHttp::new(
            clock,
            RetryPolicy {
                max_retries: config.max_retries,
                initial_backoff: config.initial_backoff,
                max_backoff: config.max_backoff,
                ..RetryPolicy::default()
            },
        )?;
        Ok(Self {
            endpoint: format!("{base}/chat/completions"),
            config,
            http,
        })
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

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl ModelProvider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai-compatible"
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        let body = request_body(&request);
        let headers: Vec<(&'static str, String)> = self
            .config
            .api_key
            .iter()
            .map(|key| ("authorization", format!("Bearer {key}")))
            .collect();
        let bytes = self.http.post(&self.endpoint, &headers, &body).await?;
        Ok(event_stream(bytes, ChatDecoder::default()))
    }
}

/// Reads Chat Completions chunks: text and tool-call deltas by index, the
/// usage chunk, `finish_reason`, and `[DONE]`.
#[derive(Default)]
struct ChatDecoder {
    answer: Answer,
}

impl WireDecoder for ChatDecoder {
    fn on_data(
        &mut self,
        data: &str,
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<Step, ProviderError> {
        if data.trim() == "[DONE]" {
            self.answer.complete(out)?;
            return Ok(Step::Done);
        }
        let chunk = json_payload(data)?;
        if chunk.get("error").is_some() {
            return Err(ProviderError::Malformed {
                detail: "the endpoint sent an error event inside the stream".into(),
            });
        }
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.answer.usage_at_least(
                u.get("prompt_tokens").and_then(Value::as_u64),
                u.get("completion_tokens").and_then(Value::as_u64),
            );
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(Step::More);
        };
        let delta = choice.get("delta").cloned().unwrap_or(Value::Null);
        if let Some(text) = delta.get("content").and_then(Value::as_str)
            && !text.is_empty()
        {
            out.push_back(ModelEvent::TextDelta(text.to_owned()));
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for (pos, c) in calls.iter().enumerate() {
                let index = c.get("index").and_then(Value::as_u64).unwrap_or(pos as u64);
                let entry = self.answer.call(index);
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
            self.answer.finish = Some(FinishReason::from_wire(reason));
        }
        Ok(Step::More)
    }

    fn on_end(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ProviderError> {
        // Some servers omit `[DONE]`: with a finish reason the answer is whole.
        self.answer.complete(out)
    }
}
