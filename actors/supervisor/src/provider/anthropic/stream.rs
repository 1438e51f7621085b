//! The Messages stream read back: `message_start` / `content_block_*` /
//! `message_delta` / `message_stop` events decoded by [`MessagesDecoder`]
//! into the run's model events. Tool inputs are assembled from the
//! `input_json_delta` fragments of their own block; thinking and
//! server-side blocks are kept, bounded, for the continuation (the turn's
//! [`NativeTurn`]); usage is taken per field from the latest report; the
//! `stop_reason` becomes the run's finish reason. An overload `error`
//! event or a spliced stream breaks it like a disconnect.

use std::collections::VecDeque;

use serde_json::{Value, json};

use super::NATIVE_FORMAT;
use crate::message::NativeTurn;
use crate::provider::wire::{Answer, Step, UsageReport, WireDecoder, json_payload};
use crate::provider::{FinishReason, ModelEvent, ProviderError};

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

/// The most bytes of a turn's server-side blocks kept for the
/// continuation. Past it they are all left out (a `server_tool_use` is
/// never sent back without its result), and the continuation goes on
/// without them; thinking blocks are always kept (the API requires them
/// with the tool use they led to).
pub const MAX_SERVER_BLOCK_BYTES: usize = 1024 * 1024;

/// One content block of the streamed message, by its `index`.
#[derive(Debug)]
enum Block {
    /// Answer text, with any citations the API attached.
    Text { text: String, citations: Vec<Value> },
    /// One of our tool calls: the slot in the answer's calls, the input
    /// given at the block's start, and the streamed input fragments.
    ToolUse {
        start_input: Option<Value>,
        streamed: String,
    },
    /// Reasoning, signed: sent back unchanged, never the answer.
    Thinking { thinking: String, signature: String },
    /// Encrypted reasoning: sent back unchanged.
    RedactedThinking { block: Value },
    /// A block the request did not ask for: server-side tool use and its
    /// results (`server_tool_use`, `web_search_tool_result`,
    /// `mcp_tool_use`, ...) or a type added later. Kept as received (its
    /// streamed input joined in), sent back as the API requires, never
    /// dispatched as our call.
    Opaque { block: Value, streamed: String },
}

/// Reads the Messages stream's events into the answer: text (citations
/// kept), our `tool_use` calls (their input from `content_block_start`,
/// replaced by streamed `input_json_delta` fragments when any carry text),
/// thinking and redacted thinking (signatures kept) and server-side blocks
/// kept for the continuation, usage (per field the later value wins, so
/// `message_delta` is authoritative over `message_start`), and
/// `stop_reason`. A second `message_start` inside an open message (a
/// spliced stream) breaks the stream like a disconnect, as does an
/// overload `error` event: the round may be repeated (S13.2).
#[derive(Default)]
pub(super) struct MessagesDecoder {
    answer: Answer,
    started: bool,
    blocks: std::collections::BTreeMap<u64, Block>,
}

/// The usage fields of a Messages `usage` object.
fn usage_report(usage: Option<&Value>) -> UsageReport {
    let Some(u) = usage else {
        return UsageReport::default();
    };
    UsageReport {
        input: UsageReport::field(u, "/input_tokens"),
        output: UsageReport::field(u, "/output_tokens"),
        cached_input: UsageReport::field(u, "/cache_read_input_tokens"),
        cache_write: UsageReport::field(u, "/cache_creation_input_tokens"),
        reasoning: None,
    }
}

/// A streamed input: the JSON object the fragments make, else `None`.
fn streamed_object(streamed: &str) -> Option<Value> {
    match serde_json::from_str::<Value>(streamed) {
        Ok(v @ Value::Object(_)) => Some(v),
        _ => None,
    }
}

impl MessagesDecoder {
    fn block_start(&mut self, index: u64, block: Value, out: &mut VecDeque<ModelEvent>) {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
        let entry = match kind {
            "text" => {
                let text = block
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                if !text.is_empty() {
                    out.push_back(ModelEvent::TextDelta(text.clone()));
                }
                let citations = block
                    .get("citations")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                Block::Text { text, citations }
            }
            "tool_use" => {
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
                Block::ToolUse {
                    start_input: block.get("input").filter(|v| !v.is_null()).cloned(),
                    streamed: String::new(),
                }
            }
            "thinking" => {
                let thinking = block
                    .get("thinking")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                if !thinking.is_empty() {
                    out.push_back(ModelEvent::ReasoningDelta(thinking.clone()));
                }
                Block::Thinking {
                    thinking,
                    signature: block
                        .get("signature")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                }
            }
            "redacted_thinking" => Block::RedactedThinking { block },
            _ => Block::Opaque {
                block,
                streamed: String::new(),
            },
        };
        self.blocks.insert(index, entry);
    }

    fn block_delta(&mut self, index: u64, delta: &Value, out: &mut VecDeque<ModelEvent>) {
        let kind = delta.get("type").and_then(Value::as_str).unwrap_or("");
        let str_field = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
        if kind == "text_delta" && !self.blocks.contains_key(&index) {
            // Text for a block whose start was not sent: a text block.
            self.blocks.insert(
                index,
                Block::Text {
                    text: String::new(),
                    citations: Vec::new(),
                },
            );
        }
        match (kind, self.blocks.get_mut(&index)) {
            ("text_delta", Some(Block::Text { text, .. })) => {
                let t = str_field("text");
                if !t.is_empty() {
                    text.push_str(t);
                    out.push_back(ModelEvent::TextDelta(t.to_owned()));
                }
            }
            ("citations_delta", Some(Block::Text { citations, .. })) => {
                if let Some(c) = delta.get("citation").filter(|c| !c.is_null()) {
                    citations.push(c.clone());
                }
            }
            ("input_json_delta", Some(Block::ToolUse { streamed, .. }))
            | ("input_json_delta", Some(Block::Opaque { streamed, .. })) => {
                streamed.push_str(str_field("partial_json"));
            }
            ("thinking_delta", Some(Block::Thinking { thinking, .. })) => {
                let t = str_field("thinking");
                if !t.is_empty() {
                    thinking.push_str(t);
                    out.push_back(ModelEvent::ReasoningDelta(t.to_owned()));
                }
            }
            ("signature_delta", Some(Block::Thinking { signature, .. })) => {
                signature.push_str(str_field("signature"));
            }
            // A delta for a block that was never started, of a kind the
            // block does not take, or of a type added later: not the
            // answer, and never a call.
            _ => {}
        }
    }

    /// The message is complete: our calls into the answer (in block
    /// order), and the turn's blocks as the continuation must send them.
    fn finish_blocks(&mut self) {
        let mut wire_blocks = Vec::new();
        let mut server_blocks = Vec::new();
        let mut needs_native = false;
        for (index, block) in std::mem::take(&mut self.blocks) {
            match block {
                Block::Text { text, citations } => {
                    let mut b = json!({"type": "text", "text": text});
                    if !citations.is_empty() {
                        b["citations"] = Value::Array(citations);
                    }
                    wire_blocks.push(b);
                }
                Block::ToolUse {
                    start_input,
                    streamed,
                } => {
                    // Streamed fragments with text replace the start's
                    // input (the placeholder `{}`); none, or only empty
                    // ones, leave it: a zero-argument call is `{}`.
                    let arguments = if !streamed.trim().is_empty() {
                        streamed
                    } else {
                        match start_input {
                            Some(v @ Value::Object(_)) => v.to_string(),
                            _ => "{}".to_owned(),
                        }
                    };
                    let call = self.answer.call(index);
                    call.arguments = arguments;
                    let input = streamed_object(&call.arguments).unwrap_or_else(|| json!({}));
                    wire_blocks.push(json!({"type": "tool_use", "id": call.id,
                                            "name": call.name, "input": input}));
                }
                Block::Thinking {
                    thinking,
                    signature,
                } => {
                    needs_native = true;
                    wire_blocks.push(
                        json!({"type": "thinking", "thinking": thinking, "signature": signature}),
                    );
                }
                Block::RedactedThinking { block } => {
                    needs_native = true;
                    wire_blocks.push(block);
                }
                Block::Opaque {
                    mut block,
                    streamed,
                } => {
                    if let Some(input) = streamed_object(&streamed) {
                        block["input"] = input;
                    }
                    server_blocks.push(wire_blocks.len());
                    wire_blocks.push(block);
                }
            }
        }
        let server_bytes: usize = server_blocks
            .iter()
            .map(|&i| wire_blocks[i].to_string().len())
            .sum();
        if server_bytes > MAX_SERVER_BLOCK_BYTES {
            tracing::warn!(
                server_bytes,
                "server-side tool blocks past the bound are left out of the history"
            );
            for i in server_blocks.iter().rev() {
                wire_blocks.remove(*i);
            }
        } else if !server_blocks.is_empty() {
            needs_native = true;
        }
        if needs_native {
            self.answer.native = Some(NativeTurn {
                format: NATIVE_FORMAT.to_owned(),
                blocks: Value::Array(wire_blocks).to_string(),
            });
        }
    }
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
                if self.started {
                    // Two messages spliced into one stream: nothing of it
                    // is used, and the round may be repeated.
                    tracing::warn!("a second message_start inside an open message");
                    return Err(ProviderError::Disconnected { events: 0 });
                }
                self.started = true;
                self.answer
                    .report_usage(usage_report(event.pointer("/message/usage")));
            }
            "content_block_start" => {
                let block = event.get("content_block").cloned().unwrap_or(Value::Null);
                self.block_start(index, block, out);
            }
            "content_block_delta" => {
                let delta = event.get("delta").cloned().unwrap_or(Value::Null);
                self.block_delta(index, &delta, out);
            }
            "message_delta" => {
                if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.answer.finish = Some(finish_from_wire(reason));
                }
                self.answer.report_usage(usage_report(event.get("usage")));
            }
            "message_stop" => {
                self.finish_blocks();
                self.answer.complete(out)?;
                return Ok(Step::Done);
            }
            "error" => {
                let kind = event
                    .pointer("/error/type")
                    .and_then(Value::as_str)
                    .unwrap_or("error");
                return Err(match kind {
                    // The service broke the stream (overloaded, failing,
                    // rate-limited, timed out): the same request may be
                    // sent again, then it is an outage (S13.2).
                    "overloaded_error" | "api_error" | "rate_limit_error" | "timeout_error" => {
                        ProviderError::Disconnected { events: 0 }
                    }
                    other => ProviderError::Malformed {
                        detail: format!(
                            "the stream carried an error event ({})",
                            other.chars().take(64).collect::<String>()
                        ),
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
