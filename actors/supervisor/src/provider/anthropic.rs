//! Anthropic's Messages API, streaming: the conversation as alternating
//! `user` and `assistant` messages of content blocks (`text`, `tool_use`,
//! `tool_result`), the system prompt in `system`, tools with their
//! `input_schema`; the stream's `message_start` / `content_block_*` /
//! `message_delta` / `message_stop` events, tool inputs assembled from
//! `input_json_delta` fragments, usage from `message_start` and
//! `message_delta`, and `stop_reason` mapped to the run's finish reasons.
//! An `overloaded_error` inside the stream breaks it like a disconnect (the
//! round may be repeated; nothing of it was used). The HTTP side and its
//! retries are [`super::http`]'s.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::{Value, json};

use agent_kernel::host::Clock;

use super::capabilities::{CapabilityOverrides, ModelCapabilities, lookup};
use super::http::{EndpointConfig, ModelHttp, check_base_url};
use super::wire::{Answer, Step, WireDecoder, event_stream, json_payload};
use super::{FinishReason, ModelEvent, ModelProvider, ModelRequest, ModelStream, ProviderError};
use crate::transcript::Message;

/// The public endpoint's base URL.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com/v1";
/// The API version this client speaks (`anthropic-version`).
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// `max_tokens` is required by the API; this is sent when the run sets none.
pub const DEFAULT_MAX_TOKENS: u32 = 8_192;

/// Where and how to reach the Messages API: the base URL (for example
/// [`ANTHROPIC_BASE_URL`]; `/messages` is appended) and the key, sent as
/// `x-api-key`.
pub type AnthropicConfig = EndpointConfig;

/// The Messages provider.
#[derive(Debug)]
pub struct AnthropicProvider {
    endpoint: String,
    api_key: Option<String>,
    http: ModelHttp,
    capabilities: CapabilityOverrides,
}

impl AnthropicProvider {
    /// Check the configuration; backoff sleeps go through `clock`.
    pub fn new(config: AnthropicConfig, clock: Arc<dyn Clock>) -> Result<Self, ProviderError> {
        let base = check_base_url(&config.base_url, ANTHROPIC_BASE_URL)?;
        Ok(Self {
            endpoint: format!("{base}/messages"),
            api_key: config.api_key,
            http: ModelHttp::new(clock, config.retry)?,
            capabilities: config.capabilities,
        })
    }
}

/// The JSON body of a streaming Messages request.
pub fn request_body(request: &ModelRequest) -> Value {
    let mut system: Vec<String> = request.system.iter().map(|s| s.to_string()).collect();
    let mut messages: Vec<Value> = Vec::new();
    for m in request.messages.iter() {
        let (role, blocks) = match m {
            // A note the runtime added to the conversation joins `system`,
            // the API's one place for instructions.
            Message::System { content } => {
                system.push(content.clone());
                continue;
            }
            Message::User { content } => ("user", vec![json!({"type": "text", "text": content})]),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut blocks = Vec::new();
                if let Some(text) = content.as_deref().filter(|t| !t.trim().is_empty()) {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for c in tool_calls {
                    let input = match serde_json::from_str::<Value>(&c.arguments) {
                        Ok(v @ Value::Object(_)) => v,
                        _ => json!({"_raw": c.arguments}),
                    };
                    blocks.push(
                        json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}),
                    );
                }
                if blocks.is_empty() {
                    continue;
                }
                ("assistant", blocks)
            }
            Message::Tool {
                tool_call_id,
                content,
            } => (
                "user",
                vec![
                    json!({"type": "tool_result", "tool_use_id": tool_call_id, "content": content}),
                ],
            ),
        };
        // Roles alternate: consecutive messages of one role are one message
        // (all the tool results of a turn go back together).
        match messages.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(existing) = last["content"].as_array_mut() {
                    existing.extend(blocks);
                }
            }
            _ => messages.push(json!({"role": role, "content": blocks})),
        }
    }
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        "messages": messages,
        "stream": true,
    });
    if !system.is_empty() {
        body["system"] = json!(system.join("\n\n"));
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
    }
    if let Some(t) = request.temperature {
        body["temperature"] = json!(t);
    }
    body
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl ModelProvider for AnthropicProvider {
    fn name(&self) -> &str {
        "anthropic"
    }

    fn capabilities(&self, model: &str) -> ModelCapabilities {
        lookup(model).with(&self.capabilities)
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        let body = request_body(&request);
        let mut headers: Vec<(&'static str, String)> =
            vec![("anthropic-version", ANTHROPIC_VERSION.to_owned())];
        if let Some(key) = &self.api_key {
            headers.push(("x-api-key", key.clone()));
        }
        // A page calls the API directly (its key is the person's own, held
        // in the tab); the API allows that cross-origin only when asked so.
        #[cfg(target_arch = "wasm32")]
        headers.push((
            "anthropic-dangerous-direct-browser-access",
            "true".to_owned(),
        ));
        let bytes = self.http.post(&self.endpoint, &headers, &body).await?;
        Ok(event_stream(bytes, MessagesDecoder::default()))
    }
}

/// Map a Messages `stop_reason`.
pub fn finish_from_wire(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// Reads the Messages stream's events.
#[derive(Default)]
struct MessagesDecoder {
    answer: Answer,
    /// Indexes of `tool_use` blocks whose input arrived as deltas.
    streamed_input: std::collections::BTreeSet<u64>,
}

impl WireDecoder for MessagesDecoder {
    fn on_data(
        &mut self,
        data: &str,
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<Step, ProviderError> {
        let event = json_payload(data)?;
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        match event.get("type").and_then(Value::as_str).unwrap_or("") {
            "message_start" => {
                let usage = event.pointer("/message/usage");
                self.answer.usage_at_least(
                    usage
                        .and_then(|u| u.get("input_tokens"))
                        .and_then(Value::as_u64),
                    usage
                        .and_then(|u| u.get("output_tokens"))
                        .and_then(Value::as_u64),
                );
            }
            "content_block_start" => {
                let block = event.get("content_block").cloned().unwrap_or(Value::Null);
                match block.get("type").and_then(Value::as_str) {
                    Some("tool_use") => {
                        let call = self.answer.call(index);
                        call.id = block
                            .get("id")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned();
                        call.name = block
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned();
                        // The whole input when it is not streamed (usually `{}`).
                        call.arguments = match block.get("input") {
                            None | Some(Value::Null) => String::new(),
                            Some(input) => input.to_string(),
                        };
                    }
                    Some("text") => {
                        if let Some(text) = block.get("text").and_then(Value::as_str)
                            && !text.is_empty()
                        {
                            out.push_back(ModelEvent::TextDelta(text.to_owned()));
                        }
                    }
                    _ => {} // thinking and other blocks are not the answer
                }
            }
            "content_block_delta" => {
                let delta = event.get("delta").cloned().unwrap_or(Value::Null);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        if let Some(text) = delta.get("text").and_then(Value::as_str)
                            && !text.is_empty()
                        {
                            out.push_back(ModelEvent::TextDelta(text.to_owned()));
                        }
                    }
                    Some("input_json_delta") => {
                        let fragment = delta
                            .get("partial_json")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        if self.streamed_input.insert(index) {
                            // The first fragment replaces the placeholder `{}`.
                            self.answer.call(index).arguments.clear();
                        }
                        self.answer.call(index).arguments.push_str(fragment);
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.answer.finish = Some(finish_from_wire(reason));
                }
                let usage = event.get("usage");
                self.answer.usage_at_least(
                    usage
                        .and_then(|u| u.get("input_tokens"))
                        .and_then(Value::as_u64),
                    usage
                        .and_then(|u| u.get("output_tokens"))
                        .and_then(Value::as_u64),
                );
            }
            "message_stop" => {
                self.answer.complete(out)?;
                return Ok(Step::Done);
            }
            "error" => {
                let kind = event
                    .pointer("/error/type")
                    .and_then(Value::as_str)
                    .unwrap_or("error");
                return Err(match kind {
                    // The service broke the stream; the same request may be sent again.
                    "overloaded_error" | "api_error" => ProviderError::Disconnected { events: 0 },
                    other => ProviderError::Malformed {
                        detail: format!("the stream carried an error event ({other})"),
                    },
                });
            }
            // `ping`, `content_block_stop` and event types added later.
            _ => {}
        }
        Ok(Step::More)
    }

    fn on_end(&mut self, _out: &mut VecDeque<ModelEvent>) -> Result<(), ProviderError> {
        // Without `message_stop` the answer is incomplete.
        Err(ProviderError::Disconnected { events: 0 })
    }
}
