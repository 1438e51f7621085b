//! Anthropic's Messages API, streaming: the conversation as alternating
//! `user` and `assistant` messages of content blocks (`text`, `tool_use`,
//! `tool_result`), the system prompt in `system`, tools with their
//! `input_schema`; the stream's `message_start` / `content_block_*` /
//! `message_delta` / `message_stop` events read by `MessagesDecoder`:
//! tool inputs assembled from `input_json_delta` fragments of their own
//! block, thinking and server-side blocks kept for the continuation (an
//! assistant turn's [`NativeTurn`], sent back as received), usage per field
//! from the latest report, and `stop_reason` mapped to the run's finish
//! reasons. An overload `error` event or a spliced stream breaks it like a
//! disconnect (the round may be repeated; nothing of it was used). The
//! HTTP side and its retries are [`super::http`]'s.

use std::sync::Arc;

use serde_json::{Value, json};

use agent_kernel::host::Clock;

mod stream;

use super::capabilities::{CapabilityOverrides, ModelCapabilities, lookup};
use super::http::{EndpointConfig, ModelHttp, check_base_url};
use super::wire::event_stream;
use super::{ModelProvider, ModelRequest, ModelStream, ProviderError};
use crate::message::{AssistantToolCall, Message, NativeTurn};
use stream::MessagesDecoder;
pub use stream::{MAX_SERVER_BLOCK_BYTES, finish_from_wire};

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
                native,
            } => {
                let blocks = assistant_blocks(content.as_deref(), tool_calls, native.as_ref());
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
    // With thinking on, `max_tokens` covers the thinking and the answer
    // (the API wants the budget below it): the run's output limit is the
    // answer's share, the budget comes on top.
    let answer_tokens = request.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    let thinking_budget = request.reasoning.thinking_budget();
    let mut body = json!({
        "model": request.model,
        "max_tokens": answer_tokens.saturating_add(thinking_budget.unwrap_or(0)),
        "messages": messages,
        "stream": true,
    });
    if let Some(budget) = thinking_budget {
        body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
    }
    if !system.is_empty() {
        body["system"] = json!([{"type": "text", "text": system.join("\n\n")}]);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
    }
    // Thinking does not take a changed temperature: the API refuses it.
    if let Some(t) = request.temperature.filter(|_| thinking_budget.is_none()) {
        body["temperature"] = json!(t);
    }
    mark_cache_breakpoints(&mut body);
    body
}

/// The most `cache_control` breakpoints one request may carry (the API's
/// limit).
pub const MAX_CACHE_BREAKPOINTS: usize = 4;

/// Put `cache_control: {type: "ephemeral"}` breakpoints on the stable
/// prefix of a request body, in the API's order tools → system →
/// messages: the last tool, the system prompt, the last block of the
/// previous round's last message (the user message before the last
/// assistant turn) and the last block of the request. A round then reads
/// from the cache what the round before wrote, however many blocks it
/// added (the API looks back only about 20 blocks from a breakpoint).
/// Thinking blocks are never marked (the API refuses it); at most
/// [`MAX_CACHE_BREAKPOINTS`].
fn mark_cache_breakpoints(body: &mut Value) {
    let ephemeral = || json!({"type": "ephemeral"});
    if let Some(last) = body["tools"].as_array_mut().and_then(|t| t.last_mut()) {
        last["cache_control"] = ephemeral();
    }
    if let Some(last) = body["system"].as_array_mut().and_then(|s| s.last_mut()) {
        last["cache_control"] = ephemeral();
    }
    let Some(messages) = body["messages"].as_array_mut() else {
        return;
    };
    let mut marked = Vec::new();
    if let Some(last) = messages.len().checked_sub(1) {
        marked.push(last);
        let previous_assistant = messages[..last]
            .iter()
            .rposition(|m| m["role"] == "assistant");
        if let Some(earlier) = previous_assistant.and_then(|a| a.checked_sub(1)) {
            marked.push(earlier);
        }
    }
    for i in marked {
        let block = messages[i]["content"].as_array_mut().and_then(|blocks| {
            blocks
                .iter_mut()
                .rev()
                .find(|b| !matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking")))
        });
        if let Some(block) = block {
            block["cache_control"] = ephemeral();
        }
    }
}

/// The `format` of a [`NativeTurn`] this provider writes and reads.
pub const NATIVE_FORMAT: &str = "anthropic";

/// A call's arguments as the `input` object the API wants back: the JSON
/// object it is; empty arguments are `{}` (a zero-argument call); other
/// text (never sent by the API itself) under `_raw`.
fn tool_input(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({"_raw": arguments}),
    }
}

/// An assistant turn's content blocks. With a native turn of this format
/// its blocks go back as received (signed thinking byte for byte,
/// server-side blocks, text with citations), except that its `tool_use`
/// blocks are the turn's calls as the runtime kept them (a call the
/// runtime dropped is not sent, one it added goes at the end); without one,
/// the text and the calls.
fn assistant_blocks(
    content: Option<&str>,
    tool_calls: &[AssistantToolCall],
    native: Option<&NativeTurn>,
) -> Vec<Value> {
    let tool_use = |c: &AssistantToolCall| json!({"type": "tool_use", "id": c.id, "name": c.name, "input": tool_input(&c.arguments)});
    let received = native
        .filter(|n| n.format == NATIVE_FORMAT)
        .and_then(|n| serde_json::from_str::<Vec<Value>>(&n.blocks).ok());
    if let Some(received) = received {
        let mut blocks = Vec::with_capacity(received.len());
        let mut sent = std::collections::BTreeSet::new();
        for b in received {
            if b.get("type").and_then(Value::as_str) == Some("tool_use") {
                let id = b.get("id").and_then(Value::as_str).unwrap_or_default();
                if let Some(c) = tool_calls.iter().find(|c| c.id == id) {
                    sent.insert(c.id.clone());
                    blocks.push(tool_use(c));
                }
                continue;
            }
            // An empty text block is refused by the API.
            if b.get("type").and_then(Value::as_str) == Some("text")
                && b.get("text")
                    .and_then(Value::as_str)
                    .is_none_or(|t| t.trim().is_empty())
            {
                continue;
            }
            blocks.push(b);
        }
        blocks.extend(
            tool_calls
                .iter()
                .filter(|c| !sent.contains(&c.id))
                .map(tool_use),
        );
        return blocks;
    }
    let mut blocks = Vec::new();
    if let Some(text) = content.filter(|t| !t.trim().is_empty()) {
        blocks.push(json!({"type": "text", "text": text}));
    }
    blocks.extend(tool_calls.iter().map(tool_use));
    blocks
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

/// The model events of a Messages response body, read as `stream` reads
/// one once its request is sent: for callers that already hold the
/// body's bytes (the fuzz targets of `fuzz/` feed bytes through here).
pub fn decode_body(body: super::http::ByteStream) -> ModelStream {
    event_stream(body, MessagesDecoder::default())
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::message::Messages;
    use crate::provider::FinishReason;
    use crate::provider::ModelUsage;
    use crate::provider::wire::decode_fixture;

    const SERVER_TOOLS: &str =
        include_str!("../../../tests/fixtures/anthropic/server_tools_web_search.sse");
    const THINKING_TOOL_USE: &str =
        include_str!("../../../tests/fixtures/anthropic/thinking_tool_use.sse");
    const SPLICED: &str = include_str!("../../../tests/fixtures/anthropic/spliced.sse");
    const OVERLOADED: &str = include_str!("../../../tests/fixtures/anthropic/overloaded.sse");

    fn decode(body: &str) -> Result<crate::provider::ModelResponse, ProviderError> {
        decode_fixture(body, MessagesDecoder::default())
    }

    fn continuation(response: &crate::provider::ModelResponse) -> Value {
        let request = ModelRequest {
            model: "claude-sonnet-4-5".into(),
            system: None,
            messages: Messages::from(vec![
                Message::User {
                    content: "weather?".into(),
                },
                Message::Assistant {
                    content: Some(response.text.clone()).filter(|t| !t.is_empty()),
                    tool_calls: response.tool_calls.clone(),
                    native: response.native.clone(),
                },
            ]),
            tools: Arc::from(Vec::new()),
            temperature: None,
            max_output_tokens: None,
            reasoning: Default::default(),
        };
        request_body(&request)["messages"][1]["content"].clone()
    }

    #[test]
    fn server_side_blocks_are_kept_opaque_never_dispatched_and_sent_back() {
        let r = decode(SERVER_TOOLS).expect("server-side blocks are not a failure");
        assert!(
            r.tool_calls.is_empty(),
            "never our calls: {:?}",
            r.tool_calls
        );
        assert_eq!(r.finish, Some(FinishReason::Stop));
        assert_eq!(
            r.text,
            "I'll check the current weather in New York City for you.Here's the current weather information for New York City: it is sunny."
        );
        let blocks = continuation(&r);
        let kinds: Vec<&str> = blocks
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "text",
                "server_tool_use",
                "web_search_tool_result",
                "text",
                "mcp_tool_use",
                "mcp_tool_result",
                "code_execution_tool_result",
                "web_fetch_tool_result",
                "bash_code_execution_tool_result",
                "text_editor_code_execution_tool_result",
                "container_upload",
            ]
        );
        assert_eq!(
            blocks[1]["input"],
            json!({"query": "weather NYC today"}),
            "streamed input joined"
        );
        assert_eq!(
            blocks[2]["content"][0]["encrypted_content"],
            "Ev0DCioIAxgCIiQ3NmU4ZmI4OC1k"
        );
        assert_eq!(
            blocks[3]["citations"][0]["encrypted_index"], "EpMBCioIAxgCIiQ0",
            "citations kept"
        );
        assert_eq!(blocks[4]["input"], json!({"param1": "value1"}));
    }

    #[test]
    fn usage_of_message_delta_wins_per_field_over_message_start() {
        let r = decode(THINKING_TOOL_USE).unwrap();
        assert_eq!(
            r.usage,
            ModelUsage {
                input_tokens: 612,
                output_tokens: 89,
                cached_input_tokens: 59_773,
                // `null` in message_delta: message_start's value stays.
                cache_write_tokens: 1200,
                reasoning_tokens: 0,
            }
        );
        let r = decode(SERVER_TOOLS).unwrap();
        assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (10_682, 510));
    }

    #[test]
    fn a_zero_argument_call_is_an_empty_object_in_the_history() {
        let r = decode(THINKING_TOOL_USE).unwrap();
        assert_eq!(r.finish, Some(FinishReason::ToolCalls));
        let names: Vec<(&str, &str)> = r
            .tool_calls
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("get_weather", r#"{"location": "San Francisco, CA"}"#),
                ("get_time", "{}")
            ]
        );
        let blocks = continuation(&r);
        assert_eq!(blocks[3]["input"], json!({"location": "San Francisco, CA"}));
        assert_eq!(blocks[4]["input"], json!({}), "never {{\"_raw\": \"\"}}");
        // Without a native turn too: empty arguments are `{}`.
        assert_eq!(tool_input(""), json!({}));
    }

    #[test]
    fn thinking_is_apart_from_the_answer_and_goes_back_byte_for_byte() {
        let r = decode(THINKING_TOOL_USE).unwrap();
        assert_eq!(r.text, "Let me check.");
        assert_eq!(
            r.reasoning,
            "I need the weather, so I'll call get_weather.\n\nThen the time."
        );
        let blocks = continuation(&r);
        assert_eq!(
            blocks[0],
            json!({"type": "thinking",
                   "thinking": "I need the weather, so I'll call get_weather.\n\nThen the time.",
                   "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/=="})
        );
        assert_eq!(
            blocks[1],
            json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"})
        );
        assert_eq!(blocks[2], json!({"type": "text", "text": "Let me check."}));
        // Another format never sees it.
        let other = crate::provider::openai::request_body(&ModelRequest {
            model: "m".into(),
            system: None,
            messages: Messages::from(vec![Message::Assistant {
                content: Some(r.text.clone()),
                tool_calls: vec![],
                native: r.native.clone(),
            }]),
            tools: Arc::from(Vec::new()),
            temperature: None,
            max_output_tokens: None,
            reasoning: Default::default(),
        });
        assert!(!other.to_string().contains("EqQBCgIYAhIM"), "{other}");
    }

    #[test]
    fn a_block_type_this_client_does_not_know_is_kept_opaque() {
        // Not a documented shape: the rule for any type added later.
        let body = SERVER_TOOLS.replace(
            "\"type\":\"container_upload\"",
            "\"type\":\"a_type_added_later\"",
        );
        let r = decode(&body).expect("an unknown block is not a failure");
        assert!(r.tool_calls.is_empty());
        let blocks = continuation(&r);
        assert_eq!(blocks[10]["type"], "a_type_added_later");
        assert_eq!(blocks[10]["file_id"], "file_011CNha8iCJcU1wXNR6q4V8w");
    }

    #[test]
    fn input_json_delta_never_opens_a_call() {
        // A delta at an index whose block is text, and at one never started.
        let body = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n\
            data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"ok\"}}\n\n\
            data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n\
            data: {\"type\":\"content_block_delta\",\"index\":7,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n\
            data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n\
            data: {\"type\":\"message_stop\"}\n\n";
        let r = decode(body).unwrap();
        assert!(r.tool_calls.is_empty());
        assert_eq!(r.text, "ok");
    }

    #[test]
    fn a_spliced_stream_is_a_repeatable_break_never_a_call() {
        let e = decode(SPLICED).expect_err("spliced");
        assert!(matches!(e, ProviderError::Disconnected { .. }), "{e}");
        assert!(e.round_may_repeat());
    }

    #[test]
    fn an_overload_error_event_breaks_the_stream_repeatably() {
        let e = decode(OVERLOADED).expect_err("overloaded");
        assert!(e.round_may_repeat() && e.is_outage(), "{e}");
        let invalid = OVERLOADED.replace("overloaded_error", "invalid_request_error");
        let e = decode(&invalid).expect_err("invalid");
        assert!(matches!(e, ProviderError::Malformed { .. }), "{e}");
    }

    #[test]
    fn server_blocks_are_kept_at_their_bound_and_left_out_past_it() {
        // `{"d":"…","type":"x"}` is 19 bytes and the padding.
        let with_block = |size: usize| {
            let block = json!({"type": "x", "d": "p".repeat(size - 19)});
            assert_eq!(block.to_string().len(), size);
            format!(
                "data: {{\"type\":\"message_start\",\"message\":{{\"usage\":{{\"input_tokens\":1}}}}}}\n\n\
                 data: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{block}}}\n\n\
                 data: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"end_turn\"}}}}\n\n\
                 data: {{\"type\":\"message_stop\"}}\n\n"
            )
        };
        for (size, kept) in [
            (MAX_SERVER_BLOCK_BYTES - 1, true),
            (MAX_SERVER_BLOCK_BYTES, true),
            (MAX_SERVER_BLOCK_BYTES + 1, false),
        ] {
            let r = decode(&with_block(size)).unwrap();
            assert_eq!(r.native.is_some(), kept, "{size}");
        }
    }

    #[test]
    fn server_blocks_past_the_bound_are_left_out_together() {
        let big = "x".repeat(MAX_SERVER_BLOCK_BYTES);
        let body = SERVER_TOOLS.replace("Ev0DCioIAxgCIiQ3NmU4ZmI4OC1k", &big);
        let r = decode(&body).unwrap();
        let blocks = continuation(&r);
        let kinds: Vec<&str> = blocks
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            ["text"],
            "the text blocks stay; no server block is sent half"
        );
        // Just under the bound they are all kept.
        let r = decode(SERVER_TOOLS).unwrap();
        assert!(r.native.unwrap().blocks.len() < MAX_SERVER_BLOCK_BYTES);
    }
}
