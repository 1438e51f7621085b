//! The Gemini API's `streamGenerateContent` (SSE, `alt=sse`): the
//! conversation as `contents` of `user` and `model` turns, the system prompt
//! as `systemInstruction`, tools as `functionDeclarations` (with their JSON
//! Schema in `parametersJsonSchema`), calls as `functionCall` parts (with
//! the `thoughtSignature` sent back as it came), results as
//! `functionResponse` parts, usage from `usageMetadata`, and `finishReason`
//! (and a prompt's `blockReason`) mapped to the run's finish reasons. The
//! HTTP side and its retries are [`super::http`]'s.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use agent_kernel::host::Clock;

use super::capabilities::{CapabilityOverrides, ModelCapabilities, lookup};
use super::http::{EndpointConfig, ModelHttp, check_base_url};
use super::wire::{Answer, Step, WireDecoder, event_stream, json_payload};
use super::{FinishReason, ModelEvent, ModelProvider, ModelRequest, ModelStream, ProviderError};
use crate::transcript::Message;

/// The public endpoint's base URL.
pub const GEMINI_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";

/// Ids this provider makes up for calls Gemini sent without one; they are
/// not sent back (Gemini matches such responses by name and order).
const LOCAL_ID_PREFIX: &str = "gemini-local-";

/// Where and how to reach Gemini: the base URL (for example
/// [`GEMINI_BASE_URL`]; `/models/<model>:streamGenerateContent?alt=sse` is
/// appended) and the key, sent as `x-goog-api-key`.
pub type GeminiConfig = EndpointConfig;

/// The Gemini provider.
#[derive(Debug)]
pub struct GeminiProvider {
    base: String,
    api_key: Option<String>,
    http: ModelHttp,
    capabilities: CapabilityOverrides,
}

impl GeminiProvider {
    /// Check the configuration; backoff sleeps go through `clock`.
    pub fn new(config: GeminiConfig, clock: Arc<dyn Clock>) -> Result<Self, ProviderError> {
        Ok(Self {
            base: check_base_url(&config.base_url, GEMINI_BASE_URL)?,
            api_key: config.api_key,
            http: ModelHttp::new(clock, config.retry)?,
            capabilities: config.capabilities,
        })
    }

    /// The streaming endpoint of `model` (a bare name or `models/<name>`).
    pub fn endpoint(&self, model: &str) -> Result<String, ProviderError> {
        let name = model.strip_prefix("models/").unwrap_or(model);
        let valid = !name.is_empty()
            && name.len() <= 200
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
        if !valid {
            return Err(ProviderError::Config(format!(
                "Gemini model name {model:?} must be letters, digits, '-', '.' or '_' (for example gemini-2.5-flash)"
            )));
        }
        Ok(format!(
            "{}/models/{name}:streamGenerateContent?alt=sse",
            self.base
        ))
    }
}

/// The JSON body of a `streamGenerateContent` request.
pub fn request_body(request: &ModelRequest) -> Value {
    let mut system: Vec<Value> = request
        .system
        .iter()
        .map(|s| json!({"text": &**s}))
        .collect();
    let mut contents: Vec<Value> = Vec::new();
    let messages: &[Message] = &request.messages;
    for (i, m) in messages.iter().enumerate() {
        let (role, parts) = match m {
            // Gemini has one place for instructions: a note the runtime
            // added to the conversation joins the system instruction.
            Message::System { content } => {
                system.push(json!({"text": content}));
                continue;
            }
            Message::User { content } => ("user", vec![json!({"text": content})]),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut parts = Vec::new();
                if let Some(text) = content.as_deref().filter(|t| !t.is_empty()) {
                    parts.push(json!({"text": text}));
                }
                for c in tool_calls {
                    let mut call = json!({"name": c.name, "args": arguments_object(&c.arguments)});
                    if !c.id.starts_with(LOCAL_ID_PREFIX) {
                        call["id"] = json!(c.id);
                    }
                    let mut part = json!({"functionCall": call});
                    if let Some(sig) = &c.signature {
                        part["thoughtSignature"] = json!(sig);
                    }
                    parts.push(part);
                }
                if parts.is_empty() {
                    continue;
                }
                ("model", parts)
            }
            Message::Tool {
                tool_call_id,
                content,
            } => {
                let name = called_name(&messages[..i], tool_call_id).unwrap_or_default();
                let result = serde_json::from_str::<Value>(content)
                    .unwrap_or_else(|_| Value::String(content.clone()));
                let mut response = json!({"name": name, "response": {"result": result}});
                if !tool_call_id.starts_with(LOCAL_ID_PREFIX) {
                    response["id"] = json!(tool_call_id);
                }
                ("user", vec![json!({"functionResponse": response})])
            }
        };
        // Consecutive turns of one role are one turn (several function
        // responses answer one model turn together).
        match contents.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(existing) = last["parts"].as_array_mut() {
                    existing.extend(parts);
                }
            }
            _ => contents.push(json!({"role": role, "parts": parts})),
        }
    }
    let mut body = json!({"contents": contents});
    if !system.is_empty() {
        body["systemInstruction"] = json!({"parts": system});
    }
    if !request.tools.is_empty() {
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({"name": t.name, "description": t.description,
                       "parametersJsonSchema": t.parameters})
            })
            .collect();
        body["tools"] = json!([{"functionDeclarations": declarations}]);
    }
    let mut generation = Map::new();
    if let Some(t) = request.temperature {
        generation.insert("temperature".into(), json!(t));
    }
    if let Some(m) = request.max_output_tokens {
        generation.insert("maxOutputTokens".into(), json!(m));
    }
    if !generation.is_empty() {
        body["generationConfig"] = Value::Object(generation);
    }
    body
}

/// A call's arguments as the object Gemini wants back: the JSON object it
/// sent, or (for text that is not one) the text under `_raw`.
fn arguments_object(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({"_raw": arguments}),
    }
}

/// The tool name of the call `id` in the nearest earlier assistant turn.
fn called_name(before: &[Message], id: &str) -> Option<String> {
    before.iter().rev().find_map(|m| match m {
        Message::Assistant { tool_calls, .. } => tool_calls
            .iter()
            .find(|c| c.id == id)
            .map(|c| c.name.clone()),
        _ => None,
    })
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl ModelProvider for GeminiProvider {
    fn name(&self) -> &str {
        "gemini"
    }

    fn capabilities(&self, model: &str) -> ModelCapabilities {
        lookup(model).with(&self.capabilities)
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        let url = self.endpoint(&request.model)?;
        let body = request_body(&request);
        let headers: Vec<(&'static str, String)> = self
            .api_key
            .iter()
            .map(|key| ("x-goog-api-key", key.clone()))
            .collect();
        let bytes = self.http.post(&url, &headers, &body).await?;
        Ok(event_stream(bytes, GeminiDecoder::default()))
    }
}

/// Map a Gemini `finishReason`; `STOP` after function calls means "run them".
pub fn finish_from_wire(reason: &str, has_calls: bool) -> FinishReason {
    match reason {
        "STOP" if has_calls => FinishReason::ToolCalls,
        "STOP" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
            FinishReason::ContentFilter
        }
        other => FinishReason::Other(other.to_ascii_lowercase()),
    }
}

/// Reads `GenerateContentResponse` chunks. Gemini sends each function call
/// whole in one part; the stream has no end marker, so the answer is
/// complete when a finish reason was seen and the connection closes.
#[derive(Default)]
struct GeminiDecoder {
    answer: Answer,
    next_call: u64,
}

impl WireDecoder for GeminiDecoder {
    fn on_data(
        &mut self,
        data: &str,
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<Step, ProviderError> {
        let chunk = json_payload(data)?;
        if let Some(error) = chunk.get("error") {
            let status = error.get("status").and_then(Value::as_str).unwrap_or("");
            return Err(ProviderError::Malformed {
                detail: format!("Gemini sent an error inside the stream ({status})"),
            });
        }
        if let Some(u) = chunk.get("usageMetadata") {
            let output = u.get("candidatesTokenCount").and_then(Value::as_u64);
            let thoughts = u.get("thoughtsTokenCount").and_then(Value::as_u64);
            let output = match (output, thoughts) {
                (None, None) => None,
                (o, t) => Some(o.unwrap_or(0) + t.unwrap_or(0)),
            };
            self.answer
                .usage_at_least(u.get("promptTokenCount").and_then(Value::as_u64), output);
        }
        if chunk
            .pointer("/promptFeedback/blockReason")
            .and_then(Value::as_str)
            .is_some()
        {
            self.answer.finish = Some(FinishReason::ContentFilter);
        }
        let Some(candidate) = chunk
            .get("candidates")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(Step::More);
        };
        let parts = candidate
            .pointer("/content/parts")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for part in parts {
            if part.get("thought").and_then(Value::as_bool) == Some(true) {
                continue; // a thought summary, not the answer
            }
            if let Some(call) = part.get("functionCall") {
                let index = self.next_call;
                self.next_call += 1;
                let entry = self.answer.call(index);
                entry.name = call
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                entry.id = match call.get("id").and_then(Value::as_str) {
                    Some(id) if !id.is_empty() => id.to_owned(),
                    _ => format!("{LOCAL_ID_PREFIX}{index}"),
                };
                entry.arguments = match call.get("args") {
                    None | Some(Value::Null) => "{}".to_owned(),
                    Some(args) => args.to_string(),
                };
                entry.signature = part
                    .get("thoughtSignature")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            } else if let Some(text) = part.get("text").and_then(Value::as_str)
                && !text.is_empty()
            {
                out.push_back(ModelEvent::TextDelta(text.to_owned()));
            }
        }
        if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
            let has_calls = !self.answer.calls.is_empty();
            self.answer.finish = Some(finish_from_wire(reason, has_calls));
        }
        Ok(Step::More)
    }

    fn on_end(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ProviderError> {
        self.answer.complete(out)
    }
}
