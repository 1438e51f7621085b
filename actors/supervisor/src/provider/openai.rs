//! An OpenAI-compatible Chat Completions client: streaming (SSE) with tool
//! calls, for OpenAI and the servers that speak its format (llama.cpp,
//! Ollama, vLLM, ...; a keyless local server needs no API key). The HTTP
//! side and its retries are [`super::http`]'s; the stream loop and the
//! answer's assembly are [`super::wire`]'s.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use agent_kernel::host::Clock;

use super::capabilities::{CapabilityOverrides, ModelCapabilities, lookup};
use super::http::{ModelHttp, RetryPolicy, check_base_url};
use super::wire::{Answer, Step, UsageReport, WireDecoder, event_stream, json_payload};
use super::{FinishReason, ModelEvent, ModelProvider, ModelRequest, ModelStream, ProviderError};
use crate::message::Message;

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
    /// What the host says its model can do, over the built-in table.
    pub capabilities: CapabilityOverrides,
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
            capabilities: CapabilityOverrides::default(),
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
    // Chat Completions takes an effort, not a budget.
    if let Some(effort) = request.reasoning.effort {
        body["reasoning_effort"] = json!(effort.as_str());
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
            ..
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

    fn capabilities(&self, model: &str) -> ModelCapabilities {
        lookup(model).with(&self.config.capabilities)
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

/// The model events of a Chat Completions response body, read as `stream` reads
/// one once its request is sent: for callers that already hold the
/// body's bytes (the fuzz targets of `fuzz/` feed bytes through here).
pub fn decode_body(body: super::http::ByteStream) -> ModelStream {
    event_stream(body, ChatDecoder::default())
}

/// Reads Chat Completions chunks: text deltas (a string, or an array of
/// typed parts whose `text` parts are the answer and whose reasoning-like
/// parts never are), reasoning (`reasoning_content` / `reasoning` strings,
/// `reasoning_details`), tool-call deltas by index (a new `id` at an index
/// that already holds a call with another id starts a new call, as servers
/// that stream parallel calls all at `index: 0` send them), the usage chunk
/// (with cached and reasoning tokens), `finish_reason`, and `[DONE]`.
#[derive(Default)]
struct ChatDecoder {
    answer: Answer,
    /// For each wire `index`, the slot in `answer.calls` of its latest call.
    latest_at_index: BTreeMap<u64, u64>,
}

/// The part types that carry reasoning, never the answer.
const REASONING_PART_TYPES: &[&str] = &[
    "thinking",
    "reasoning",
    "reasoning_text",
    "reasoning_content",
    "reasoning.text",
    "reasoning.summary",
    "summary_text",
];

/// The text of a reasoning part or field: a string, or the text found in
/// its `thinking` / `reasoning` / `text` / `content` / `summary` fields,
/// nested parts included.
fn reasoning_text(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => out.push_str(s),
        Value::Array(items) => items.iter().for_each(|i| reasoning_text(i, out)),
        Value::Object(map) => {
            for key in ["thinking", "reasoning", "text", "content", "summary"] {
                if let Some(inner) = map.get(key) {
                    reasoning_text(inner, out);
                }
            }
        }
        _ => {}
    }
}

impl ChatDecoder {
    /// The `delta.content` value: a string is answer text; an array of
    /// typed parts is split into answer text and reasoning.
    fn content(&mut self, content: &Value, out: &mut VecDeque<ModelEvent>) {
        let mut text = String::new();
        let mut reasoning = String::new();
        match content {
            Value::String(s) => text.push_str(s),
            Value::Array(parts) => {
                for part in parts {
                    let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
                    if REASONING_PART_TYPES.contains(&kind) {
                        reasoning_text(part, &mut reasoning);
                    } else if matches!(kind, "text" | "output_text")
                        && let Some(t) = part.get("text").and_then(Value::as_str)
                    {
                        text.push_str(t);
                    }
                    // Other parts (images, audio, refusals, unknown types)
                    // are not answer text.
                }
            }
            _ => {}
        }
        if !reasoning.is_empty() {
            out.push_back(ModelEvent::ReasoningDelta(reasoning));
        }
        if !text.is_empty() {
            out.push_back(ModelEvent::TextDelta(text));
        }
    }

    /// One entry of `delta.tool_calls`.
    fn tool_call(&mut self, position: usize, c: &Value) {
        let index = c
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(position as u64);
        let id = c
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let slot = match self.latest_at_index.get(&index).copied() {
            // A new id where a call with another id already is: a new call.
            Some(slot) => match (id, self.answer.calls.get(&slot)) {
                (Some(id), Some(held)) if !held.id.is_empty() && held.id != id => None,
                _ => Some(slot),
            },
            None => None,
        };
        let slot = slot.unwrap_or_else(|| {
            let next = self.answer.calls.len() as u64;
            self.latest_at_index.insert(index, next);
            next
        });
        let entry = self.answer.call(slot);
        if let Some(id) = id
            && entry.id.is_empty()
        {
            entry.id.push_str(id);
        }
        if let Some(f) = c.get("function") {
            if let Some(n) = f.get("name").and_then(Value::as_str)
                && entry.name != n
            {
                // The name comes whole in the first delta; a server that
                // repeats it on later deltas does not double it.
                entry.name.push_str(n);
            }
            match f.get("arguments") {
                Some(Value::String(a)) => entry.arguments.push_str(a),
                // A server that sends the arguments as an object.
                Some(v @ Value::Object(_)) => entry.arguments.push_str(&v.to_string()),
                _ => {}
            }
        }
    }
}

/// An error object inside the stream: an overload, rate limit or server
/// failure breaks the stream like a disconnect (the round may be repeated,
/// then it is an outage, S13.2); any other is a malformed answer.
fn stream_error(error: &Value) -> ProviderError {
    let code = error.get("code");
    let numeric = code
        .and_then(Value::as_u64)
        .or_else(|| code.and_then(Value::as_str).and_then(|c| c.parse().ok()));
    let kind = [error.get("type"), code]
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>();
    let transient = numeric.is_some_and(|c| c == 429 || (500..600).contains(&c))
        || kind.iter().any(|k| {
            matches!(
                *k,
                "server_error" | "overloaded_error" | "rate_limit_exceeded" | "rate_limit_error"
            )
        });
    if transient {
        ProviderError::Disconnected { events: 0 }
    } else {
        ProviderError::Malformed {
            detail: "the endpoint sent an error event inside the stream".into(),
        }
    }
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
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(stream_error(error));
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            self.answer.report_usage(UsageReport {
                input: UsageReport::field(u, "/prompt_tokens"),
                output: UsageReport::field(u, "/completion_tokens"),
                cached_input: UsageReport::field(u, "/prompt_tokens_details/cached_tokens")
                    // DeepSeek's name for the same count.
                    .or_else(|| UsageReport::field(u, "/prompt_cache_hit_tokens")),
                cache_write: None,
                reasoning: UsageReport::field(u, "/completion_tokens_details/reasoning_tokens"),
            });
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(Step::More);
        };
        let delta = choice.get("delta").cloned().unwrap_or(Value::Null);
        let mut reasoning = String::new();
        for key in ["reasoning_content", "reasoning"] {
            if let Some(Value::String(r)) = delta.get(key) {
                reasoning.push_str(r);
            }
        }
        if let Some(details) = delta.get("reasoning_details").and_then(Value::as_array) {
            for d in details {
                if let Some(t) = d
                    .get("text")
                    .or_else(|| d.get("summary"))
                    .and_then(Value::as_str)
                {
                    reasoning.push_str(t);
                }
            }
        }
        if !reasoning.is_empty() {
            out.push_back(ModelEvent::ReasoningDelta(reasoning));
        }
        if let Some(content) = delta.get("content") {
            self.content(content, out);
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for (pos, c) in calls.iter().enumerate() {
                self.tool_call(pos, c);
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

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::provider::ModelUsage;
    use crate::provider::wire::decode_fixture;

    fn decode(body: &str) -> Result<crate::provider::ModelResponse, ProviderError> {
        decode_fixture(body, ChatDecoder::default())
    }

    fn calls(r: &crate::provider::ModelResponse) -> Vec<(&str, &str, &str)> {
        r.tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
            .collect()
    }

    #[test]
    fn parallel_calls_by_index_and_the_final_usage_chunk_with_cached_tokens() {
        let r = decode(include_str!(
            "../../tests/fixtures/openai/parallel_tool_calls.sse"
        ))
        .unwrap();
        assert_eq!(
            calls(&r),
            [
                ("call_aaa", "get_weather", r#"{"location": "Paris"}"#),
                ("call_bbb", "get_time", "{}")
            ]
        );
        assert_eq!(r.finish, Some(FinishReason::ToolCalls));
        assert_eq!(
            r.usage,
            ModelUsage {
                input_tokens: 2006,
                output_tokens: 300,
                cached_input_tokens: 1920,
                ..ModelUsage::default()
            }
        );
    }

    #[test]
    fn calls_sharing_an_index_with_distinct_ids_stay_apart() {
        let r = decode(include_str!(
            "../../tests/fixtures/openai/shared_index_parallel_calls.sse"
        ))
        .unwrap();
        assert_eq!(
            calls(&r),
            [
                ("call_foo", "foo", "{}"),
                ("call_Foo", "Foo", "{}"),
                // A delta without an id goes on with the latest call at its index.
                ("call_bar", "bar", r#"{"a":1}"#),
            ]
        );
    }

    #[test]
    fn content_as_typed_parts_gives_the_text_and_keeps_reasoning_apart() {
        let r = decode(include_str!(
            "../../tests/fixtures/openai/content_parts_reasoning.sse"
        ))
        .unwrap();
        assert_eq!(r.text, "Hello there!");
        assert_eq!(r.reasoning, "The user greets me; answer briefly.");
        assert_eq!(r.finish, Some(FinishReason::Stop));
    }

    #[test]
    fn reasoning_content_fields_are_never_the_answer() {
        let r = decode(include_str!(
            "../../tests/fixtures/openai/reasoning_content.sse"
        ))
        .unwrap();
        assert_eq!(r.text, "9.8 is larger.");
        assert_eq!(r.reasoning, "Okay, 9.11 vs 9.8 (checked)");
        assert_eq!(r.finish, Some(FinishReason::Length));
        assert_eq!(r.usage.reasoning_tokens, 280);
        assert_eq!(r.usage.output_tokens, 300);
    }

    #[test]
    fn an_overload_inside_the_stream_may_be_repeated_and_another_error_may_not() {
        let head = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n";
        for (error, repeatable) in [
            (r#"{"message":"Provider returned error","code":502}"#, true),
            (r#"{"message":"Rate limit","code":429}"#, true),
            (
                r#"{"message":"The server had an error","type":"server_error"}"#,
                true,
            ),
            (
                r#"{"message":"Bad input","type":"invalid_request_error","code":"invalid_value"}"#,
                false,
            ),
        ] {
            let body = format!("{head}data: {{\"error\":{error}}}\n\n");
            let e = decode(&body).expect_err(error);
            assert_eq!(e.round_may_repeat(), repeatable, "{error}: {e}");
        }
    }

    #[test]
    fn finish_reason_variants_map_to_the_runs_reasons() {
        for (wire, ours) in [
            ("stop", FinishReason::Stop),
            ("eos", FinishReason::Stop),
            ("length", FinishReason::Length),
            ("tool_calls", FinishReason::ToolCalls),
            ("function_call", FinishReason::ToolCalls),
            ("content_filter", FinishReason::ContentFilter),
            ("weird", FinishReason::Other("weird".into())),
        ] {
            let body = format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"x\"}},\"finish_reason\":\"{wire}\"}}]}}\n\ndata: [DONE]\n\n"
            );
            assert_eq!(decode(&body).unwrap().finish, Some(ours), "{wire}");
        }
    }
}
