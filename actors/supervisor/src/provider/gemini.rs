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
use super::wire::{Answer, Step, UsageReport, WireDecoder, event_stream, json_payload};
use super::{FinishReason, ModelEvent, ModelProvider, ModelRequest, ModelStream, ProviderError};
use crate::message::Message;

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
                native,
            } => {
                let call_part = |c: &crate::message::AssistantToolCall| {
                    let mut call = json!({"name": c.name, "args": arguments_object(&c.arguments)});
                    if !c.id.starts_with(LOCAL_ID_PREFIX) {
                        call["id"] = json!(c.id);
                    }
                    let mut part = json!({"functionCall": call});
                    if let Some(sig) = &c.signature {
                        part["thoughtSignature"] = json!(sig);
                    }
                    part
                };
                let received = native
                    .as_ref()
                    .filter(|n| n.format == NATIVE_FORMAT)
                    .and_then(|n| serde_json::from_str::<Vec<Value>>(&n.blocks).ok());
                let mut parts = Vec::new();
                if let Some(received) = received {
                    // The parts as received (signed text parts apart), the
                    // calls as the runtime kept them.
                    let mut sent = std::collections::BTreeSet::new();
                    for p in received {
                        match p.pointer("/functionCall/id").and_then(Value::as_str) {
                            Some(id) => {
                                if let Some(c) = tool_calls.iter().find(|c| c.id == id) {
                                    sent.insert(c.id.clone());
                                    parts.push(call_part(c));
                                }
                            }
                            None => parts.push(p),
                        }
                    }
                    parts.extend(
                        tool_calls
                            .iter()
                            .filter(|c| !sent.contains(&c.id))
                            .map(call_part),
                    );
                } else {
                    if let Some(text) = content.as_deref().filter(|t| !t.is_empty()) {
                        parts.push(json!({"text": text}));
                    }
                    parts.extend(tool_calls.iter().map(call_part));
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
    // A budget in tokens (the run's, else its effort's), and the thoughts
    // streamed as `thought` parts so that they can be shown apart.
    if let Some(budget) = request.reasoning.thinking_budget() {
        generation.insert(
            "thinkingConfig".into(),
            json!({"thinkingBudget": budget, "includeThoughts": true}),
        );
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

/// The model events of a streamGenerateContent response body, read as `stream` reads
/// one once its request is sent: for callers that already hold the
/// body's bytes (the fuzz targets of `fuzz/` feed bytes through here).
pub fn decode_body(body: super::http::ByteStream) -> ModelStream {
    event_stream(body, GeminiDecoder::default())
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

/// Reads `GenerateContentResponse` chunks: answer text, `thought: true`
/// parts as reasoning (never the answer), function calls — whole in one
/// part, or streamed: a part with `willContinue: true` opens a call whose
/// later `functionCall` parts (without a name of their own) add
/// `partialArgs` (a JSON path and a value; a string with `willContinue`
/// goes on in the next one) until a part without `willContinue` closes
/// it — several in one candidate, each with its `thoughtSignature`; a
/// signature on a text part keeps the turn's parts for the continuation;
/// usage (the last `usageMetadata` wins per field); `finishReason`. The
/// stream has no end marker, so the answer is complete when a finish
/// reason was seen and the connection closes.
#[derive(Default)]
struct GeminiDecoder {
    answer: Answer,
    next_call: u64,
    /// The arguments of each call, by its slot, as they are assembled.
    args: std::collections::BTreeMap<u64, Value>,
    /// The slot of a streamed call still open (`willContinue`).
    open_call: Option<u64>,
    /// The turn's parts as they go back (text, signatures, calls by id).
    parts: Vec<Value>,
    /// Whether a part other than a call carried a thought signature.
    signed_text: bool,
}

/// The format of a [`crate::message::NativeTurn`] this provider writes.
pub const NATIVE_FORMAT: &str = "gemini";

/// One step of a `PartialArg.jsonPath`.
#[derive(Debug, Clone, PartialEq)]
enum PathStep {
    Key(String),
    Index(usize),
}

/// Parse the RFC 9535 paths `partialArgs` use: `$`, then `.name`,
/// `['name']` / `["name"]` and `[n]` steps. `None` for anything else.
fn parse_json_path(path: &str) -> Option<Vec<PathStep>> {
    let mut rest = path.trim().strip_prefix('$')?;
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return None;
            }
            steps.push(PathStep::Key(r[..end].to_owned()));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let close = r.find(']')?;
            let inner = r[..close].trim();
            let step = if let Some(q) = inner
                .strip_prefix('\'')
                .and_then(|i| i.strip_suffix('\''))
                .or_else(|| inner.strip_prefix('"').and_then(|i| i.strip_suffix('"')))
            {
                PathStep::Key(q.to_owned())
            } else {
                PathStep::Index(inner.parse().ok()?)
            };
            steps.push(step);
            rest = &r[close + 1..];
        } else {
            return None;
        }
    }
    Some(steps)
}

/// The most array index a path may name (a bound on what a malformed
/// stream can make the decoder allocate).
const MAX_PATH_INDEX: usize = 10_000;

/// The value at `steps` inside `root`, created (objects, arrays padded
/// with `null`) as needed; `None` when the path crosses a scalar.
fn slot_at<'a>(root: &'a mut Value, steps: &[PathStep]) -> Option<&'a mut Value> {
    let mut here = root;
    for step in steps {
        here = match step {
            PathStep::Key(k) => {
                if here.is_null() {
                    *here = Value::Object(Map::new());
                }
                here.as_object_mut()?
                    .entry(k.clone())
                    .or_insert(Value::Null)
            }
            PathStep::Index(i) => {
                if *i > MAX_PATH_INDEX {
                    return None;
                }
                if here.is_null() {
                    *here = Value::Array(Vec::new());
                }
                let items = here.as_array_mut()?;
                if items.len() <= *i {
                    items.resize(*i + 1, Value::Null);
                }
                &mut items[*i]
            }
        };
    }
    Some(here)
}

/// Apply one `PartialArg` to a call's arguments: a string value is
/// appended to the string already at its path (it may come in pieces),
/// any other value replaces what is there.
fn apply_partial_arg(args: &mut Value, partial: &Value) -> Result<(), ProviderError> {
    let malformed = |what: &str| ProviderError::Malformed {
        detail: format!("a streamed function-call argument has {what}"),
    };
    let path = partial
        .get("jsonPath")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("no jsonPath"))?;
    let steps =
        parse_json_path(path).ok_or_else(|| malformed("a JSON path this client does not read"))?;
    let slot = slot_at(args, &steps)
        .ok_or_else(|| malformed("a path through a value that is not an object or a list"))?;
    if let Some(piece) = partial.get("stringValue").and_then(Value::as_str) {
        match slot {
            Value::String(s) => s.push_str(piece),
            other => *other = Value::String(piece.to_owned()),
        }
    } else if let Some(n) = partial.get("numberValue").filter(|v| v.is_number()) {
        *slot = n.clone();
    } else if let Some(b) = partial.get("boolValue").filter(|v| v.is_boolean()) {
        *slot = b.clone();
    } else if partial.get("nullValue").is_some() {
        *slot = Value::Null;
    }
    Ok(())
}

impl GeminiDecoder {
    fn function_call(&mut self, part: &Value, call: &Value) -> Result<(), ProviderError> {
        let name = call
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty());
        let continues = call.get("willContinue").and_then(Value::as_bool) == Some(true);
        let slot = match (self.open_call, name) {
            // A part without a name of its own goes on with the open call.
            (Some(slot), None) => slot,
            (Some(slot), Some(n))
                if self.answer.call(slot).name == n && call.get("args").is_none() =>
            {
                slot
            }
            _ => {
                let slot = self.next_call;
                self.next_call += 1;
                let entry = self.answer.call(slot);
                entry.name = name.unwrap_or_default().to_owned();
                entry.id = match call.get("id").and_then(Value::as_str) {
                    Some(id) if !id.is_empty() => id.to_owned(),
                    _ => format!("{LOCAL_ID_PREFIX}{slot}"),
                };
                self.args.insert(
                    slot,
                    match call.get("args") {
                        Some(v @ Value::Object(_)) => v.clone(),
                        _ => Value::Object(Map::new()),
                    },
                );
                self.parts.push(json!({"functionCall": {"id": entry.id}}));
                slot
            }
        };
        if let Some(sig) = part.get("thoughtSignature").and_then(Value::as_str) {
            self.answer.call(slot).signature = Some(sig.to_owned());
        }
        if let Some(partials) = call.get("partialArgs").and_then(Value::as_array) {
            let args = self
                .args
                .entry(slot)
                .or_insert_with(|| Value::Object(Map::new()));
            for partial in partials {
                apply_partial_arg(args, partial)?;
            }
        }
        self.open_call = continues.then_some(slot);
        Ok(())
    }

    /// A text part of the answer (or a signature-only part): kept for the
    /// continuation; unsigned text joins an unsigned text part before it.
    fn keep_text_part(&mut self, part: &Value, text: &str) {
        let signature = part.get("thoughtSignature").and_then(Value::as_str);
        if signature.is_some() {
            self.signed_text = true;
        }
        if signature.is_none()
            && let Some(last) = self.parts.last_mut()
            && last.get("thoughtSignature").is_none()
            && let Some(Value::String(t)) = last.get_mut("text")
        {
            t.push_str(text);
            return;
        }
        let mut kept = json!({"text": text});
        if let Some(sig) = signature {
            kept["thoughtSignature"] = json!(sig);
        }
        self.parts.push(kept);
    }

    /// The streamed calls' arguments into the answer, and the turn's parts
    /// when a text part was signed.
    fn finish_calls(&mut self) -> Result<(), ProviderError> {
        if self.open_call.is_some() {
            // The stream ended inside a call's arguments.
            return Err(ProviderError::Disconnected { events: 0 });
        }
        for (slot, args) in std::mem::take(&mut self.args) {
            self.answer.call(slot).arguments = args.to_string();
        }
        if self.signed_text {
            self.answer.native = Some(crate::message::NativeTurn {
                format: NATIVE_FORMAT.to_owned(),
                blocks: Value::Array(std::mem::take(&mut self.parts)).to_string(),
            });
        }
        Ok(())
    }
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
            if matches!(
                status,
                "UNAVAILABLE" | "RESOURCE_EXHAUSTED" | "INTERNAL" | "DEADLINE_EXCEEDED"
            ) {
                // The service broke the stream: the round may be repeated (S13.2).
                return Err(ProviderError::Disconnected { events: 0 });
            }
            return Err(ProviderError::Malformed {
                detail: format!(
                    "Gemini sent an error inside the stream ({})",
                    status.chars().take(64).collect::<String>()
                ),
            });
        }
        if let Some(u) = chunk.get("usageMetadata").filter(|u| u.is_object()) {
            let candidates = UsageReport::field(u, "/candidatesTokenCount");
            let thoughts = UsageReport::field(u, "/thoughtsTokenCount");
            let output = match (candidates, thoughts) {
                (None, None) => None,
                (o, t) => Some(o.unwrap_or(0) + t.unwrap_or(0)),
            };
            self.answer.report_usage(UsageReport {
                input: UsageReport::field(u, "/promptTokenCount"),
                output,
                cached_input: UsageReport::field(u, "/cachedContentTokenCount"),
                cache_write: None,
                reasoning: thoughts,
            });
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
            let text = part.get("text").and_then(Value::as_str);
            if part.get("thought").and_then(Value::as_bool) == Some(true) {
                // A thought summary: reasoning, never the answer.
                if let Some(t) = text.filter(|t| !t.is_empty()) {
                    out.push_back(ModelEvent::ReasoningDelta(t.to_owned()));
                }
                if let Some(sig) = part.get("thoughtSignature").and_then(Value::as_str) {
                    self.signed_text = true;
                    self.parts
                        .push(json!({"text": "", "thoughtSignature": sig}));
                }
                continue;
            }
            if let Some(call) = part.get("functionCall") {
                self.function_call(part, call)?;
            } else if let Some(text) = text {
                if !text.is_empty() {
                    out.push_back(ModelEvent::TextDelta(text.to_owned()));
                }
                self.keep_text_part(part, text);
            } else if part.get("thoughtSignature").is_some() {
                self.keep_text_part(part, "");
            }
        }
        if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
            let has_calls = !self.answer.calls.is_empty();
            self.answer.finish = Some(finish_from_wire(reason, has_calls));
        }
        Ok(Step::More)
    }

    fn on_end(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ProviderError> {
        self.finish_calls()?;
        self.answer.complete(out)
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::message::Messages;
    use crate::provider::wire::decode_fixture;
    use crate::provider::{ModelResponse, ModelUsage};

    fn decode(body: &str) -> Result<ModelResponse, ProviderError> {
        decode_fixture(body, GeminiDecoder::default())
    }

    fn continuation(r: &ModelResponse) -> Value {
        let request = ModelRequest {
            model: "gemini-2.5-flash".into(),
            system: None,
            messages: Messages::from(vec![
                Message::User {
                    content: "hi".into(),
                },
                Message::Assistant {
                    content: Some(r.text.clone()).filter(|t| !t.is_empty()),
                    tool_calls: r.tool_calls.clone(),
                    native: r.native.clone(),
                },
            ]),
            tools: Arc::from(Vec::new()),
            temperature: None,
            max_output_tokens: None,
            reasoning: Default::default(),
        };
        request_body(&request)["contents"][1]["parts"].clone()
    }

    #[test]
    fn streamed_arguments_are_assembled_and_several_calls_kept_apart() {
        let r = decode(include_str!(
            "../../tests/fixtures/gemini/streamed_function_calls.sse"
        ))
        .expect("partialArgs are not a failure");
        assert_eq!(r.text, "Checking both cities.");
        assert_eq!(r.finish, Some(FinishReason::ToolCalls));
        let calls: Vec<(&str, Value)> = r
            .tool_calls
            .iter()
            .map(|c| (c.name.as_str(), serde_json::from_str(&c.arguments).unwrap()))
            .collect();
        assert_eq!(
            calls,
            [
                (
                    "get_weather",
                    json!({"location": "Boston, MA", "days": 3, "metric": true, "hours": [null, "noon"]})
                ),
                ("get_weather", json!({"location": "Paris"})),
                ("get_time", json!({})),
            ]
        );
        assert_eq!(r.tool_calls[0].signature.as_deref(), Some("Q2lRQjR5Nk5m"));
        assert_eq!(
            r.usage,
            ModelUsage {
                input_tokens: 80,
                output_tokens: 72,
                cached_input_tokens: 64,
                cache_write_tokens: 0,
                reasoning_tokens: 32,
            },
            "the last usageMetadata wins"
        );
        let parts = continuation(&r);
        assert_eq!(parts[1]["thoughtSignature"], "Q2lRQjR5Nk5m");
        assert_eq!(parts[1]["functionCall"]["args"]["location"], "Boston, MA");
    }

    #[test]
    fn a_stream_ending_inside_a_streamed_call_is_incomplete() {
        let body = include_str!("../../tests/fixtures/gemini/streamed_function_calls.sse");
        let cut: String = body
            .split("\n\n")
            .take(3)
            .map(|e| format!("{e}\n\n"))
            .collect();
        let cut = format!(
            "{cut}data: {{\"candidates\": [{{\"content\": {{\"parts\": []}}, \"finishReason\": \"STOP\"}}]}}\n\n"
        );
        let e = decode(&cut).expect_err("open call");
        assert!(matches!(e, ProviderError::Disconnected { .. }), "{e}");
    }

    #[test]
    fn thoughts_are_reasoning_and_a_signed_text_part_goes_back() {
        let r = decode(include_str!(
            "../../tests/fixtures/gemini/thought_signed_text.sse"
        ))
        .unwrap();
        assert_eq!(r.text, "Autumn moon rises, silver on the pond.");
        assert!(r.reasoning.starts_with("**Weighing the question**"));
        assert_eq!(r.usage.reasoning_tokens, 120);
        assert_eq!(r.usage.output_tokens, 132);
        let parts = continuation(&r);
        assert_eq!(
            parts,
            json!([{"text": "Autumn moon rises, silver on the pond."},
                   {"text": "", "thoughtSignature": "EpYCCpMCAdHtim8b"}])
        );
    }

    #[test]
    fn safety_and_malformed_function_call_are_typed_finishes() {
        let r = decode(include_str!("../../tests/fixtures/gemini/safety.sse")).unwrap();
        assert_eq!(r.finish, Some(FinishReason::ContentFilter));
        let r = decode(include_str!(
            "../../tests/fixtures/gemini/malformed_function_call.sse"
        ))
        .unwrap();
        assert_eq!(
            r.finish,
            Some(FinishReason::Other("malformed_function_call".into()))
        );
        assert!(r.tool_calls.is_empty());
    }

    #[test]
    fn json_paths_of_partial_args() {
        assert_eq!(
            parse_json_path("$.foo.bar[0].data"),
            Some(vec![
                PathStep::Key("foo".into()),
                PathStep::Key("bar".into()),
                PathStep::Index(0),
                PathStep::Key("data".into()),
            ])
        );
        assert_eq!(
            parse_json_path("$['a b']"),
            Some(vec![PathStep::Key("a b".into())])
        );
        assert_eq!(parse_json_path("foo"), None);
        assert_eq!(parse_json_path("$..x"), None);
        // The index bound: at it, and past it.
        let mut v = Value::Null;
        assert!(slot_at(&mut v, &[PathStep::Index(MAX_PATH_INDEX)]).is_some());
        let mut v = Value::Null;
        assert!(slot_at(&mut v, &[PathStep::Index(MAX_PATH_INDEX + 1)]).is_none());
    }
}
