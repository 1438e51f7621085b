//! Model providers behind one streaming trait: a request (transcript and tool
//! schemas) in, a stream of text deltas, complete tool calls, usage and a
//! finish reason out. [`openai`] speaks Chat Completions over SSE,
//! [`gemini`] `streamGenerateContent`, [`anthropic`] the Messages API;
//! [`scripted`] plays a JSON scenario. [`http`] and [`wire`] are what the
//! remote ones share; [`capabilities`] says what a model can do; [`select`]
//! builds a provider from a host's settings.

pub mod anthropic;
pub mod capabilities;
pub mod gemini;
pub mod http;
pub mod openai;
pub mod scripted;
pub mod select;
pub mod set;
pub mod wire;

use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};

use agent_kernel::protocol::ModelToolSchema;
use agent_kernel::reasoning::Reasoning;
use agent_kernel::{MaybeSend, MaybeSync};

use crate::message::{AssistantToolCall, Messages, NativeTurn};

/// One request to the model: the whole conversation and the tools it may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    pub model: String,
    /// The run's system prompt, sent before `messages` in each wire
    /// format's own place for it. Not part of the conversation: a session's
    /// later turns carry their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<Arc<str>>,
    pub messages: Messages,
    /// Shared: the same schemas go with every round of a run (a clone copies none).
    pub tools: Arc<[ModelToolSchema]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// The run's reasoning setting, sent in each format's own field
    /// (OpenAI `reasoning_effort`, Anthropic `thinking`, Gemini
    /// `thinkingConfig`); unset: nothing is sent.
    #[serde(default, skip_serializing_if = "Reasoning::is_unset")]
    pub reasoning: Reasoning,
}

/// Tokens the provider reported for one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache (OpenAI
    /// `prompt_tokens_details.cached_tokens` and Gemini
    /// `cachedContentTokenCount`, both inside `input_tokens`; Anthropic
    /// `cache_read_input_tokens`, which its `input_tokens` leaves out).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
    /// Input tokens written to the prompt cache (Anthropic
    /// `cache_creation_input_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// Of the output, reasoning tokens (OpenAI
    /// `completion_tokens_details.reasoning_tokens`, Gemini
    /// `thoughtsTokenCount`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Why the model stopped producing output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A final answer.
    Stop,
    /// The model wants its tool calls run.
    ToolCalls,
    /// The output token limit cut the answer short.
    Length,
    /// The provider filtered the output.
    ContentFilter,
    /// Any other reason the provider named.
    Other(String),
}

impl FinishReason {
    /// Map a Chat Completions `finish_reason` string.
    pub fn from_wire(s: &str) -> FinishReason {
        match s {
            // `eos`, `end_turn`, `stop_sequence`: what some compatible
            // servers send for a natural end.
            "stop" | "eos" | "end_turn" | "stop_sequence" => FinishReason::Stop,
            "tool_calls" | "function_call" | "tool_use" => FinishReason::ToolCalls,
            "length" | "max_tokens" => FinishReason::Length,
            "content_filter" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_owned()),
        }
    }
}

/// One item of a model stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelEvent {
    /// More assistant text.
    TextDelta(String),
    /// A complete tool call (deltas are assembled by the provider).
    ToolCall(AssistantToolCall),
    /// Token counts for the request.
    Usage(ModelUsage),
    /// Reasoning text (a thinking model's thoughts): never the answer.
    ReasoningDelta(String),
    /// The turn's content as the wire format wants it sent back (signed
    /// thinking, server-side tool blocks); emitted before `Finish`.
    Native(NativeTurn),
    /// The end of the answer.
    Finish(FinishReason),
}

/// A model request failed. Messages never contain prompt or output text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    #[error(
        "model endpoint answered HTTP {status} after {attempts} attempt(s); {hint}{}",
        message.as_deref().map(|m| format!("; the endpoint said: {m}")).unwrap_or_default()
    )]
    Http {
        status: u16,
        attempts: u32,
        hint: &'static str,
        /// The provider's own explanation from the error body, bounded and
        /// sanitised ([`http::provider_message`]).
        message: Option<String>,
    },
    #[error("could not reach the model endpoint after {attempts} attempt(s): {detail}")]
    Transport { attempts: u32, detail: String },
    /// The endpoint answered with a redirect; it was not followed, so
    /// neither the key nor the prompt went anywhere else (S13.5). `status`
    /// is `None` in the browser, where the redirect is opaque.
    #[error(
        "the model endpoint answered with a redirect{}; model requests never follow redirects (the key and the prompt stay with the configured endpoint): configure the base URL the endpoint redirects to",
        status.map(|s| format!(" ({s})")).unwrap_or_default()
    )]
    Redirected { status: Option<u16> },
    #[error(
        "the model stream ended before the answer was complete (after {events} event(s)); the round can be repeated"
    )]
    Disconnected { events: usize },
    #[error("the model stream was malformed: {detail}")]
    Malformed { detail: String },
    #[error("model provider configuration is invalid: {0}")]
    Config(String),
    /// A run names a provider this host did not configure (S13.3).
    #[error(
        "no model provider named {0:?} is configured in this runtime; configure it (for example in `models` when the runtime is created) or start the run without one"
    )]
    UnknownProvider(String),
    #[error(
        "scripted scenario has no turn {turn} (it has {turns}); add a turn or end with a final answer"
    )]
    ScenarioExhausted { turn: usize, turns: usize },
}

impl ProviderError {
    /// True when the same request may simply be sent again: the stream broke
    /// before the answer was complete, so nothing of it was used.
    pub fn round_may_repeat(&self) -> bool {
        matches!(self, ProviderError::Disconnected { .. })
    }

    /// True when the provider is down or overloaded rather than refusing
    /// this request: unreachable, 429, 5xx, or a stream that kept breaking.
    /// The run is then `interrupted` (and continues on Resume) instead of
    /// failed (S13.2); an authentication or request error fails at once.
    pub fn is_outage(&self) -> bool {
        match self {
            ProviderError::Transport { .. } | ProviderError::Disconnected { .. } => true,
            ProviderError::Http { status, .. } => *status == 429 || (500..600).contains(status),
            ProviderError::Malformed { .. }
            | ProviderError::Redirected { .. }
            | ProviderError::Config(_)
            | ProviderError::UnknownProvider(_)
            | ProviderError::ScenarioExhausted { .. } => false,
        }
    }
}

/// The stream of one model answer.
#[cfg(not(target_arch = "wasm32"))]
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, ProviderError>> + Send>>;
/// The stream of one model answer.
#[cfg(target_arch = "wasm32")]
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, ProviderError>>>>;

/// A chat model that streams its answer.
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
pub trait ModelProvider: MaybeSend + MaybeSync {
    /// A short name for logs ("openai-compatible", "scripted").
    fn name(&self) -> &str;
    /// What `model` can do (S13.1): the built-in table unless the provider
    /// was told otherwise.
    fn capabilities(&self, model: &str) -> capabilities::ModelCapabilities {
        capabilities::lookup(model)
    }
    /// The provider configured under `name` beside this one, for a run that
    /// chooses it ([`set::ProviderSet`]); a plain provider has none.
    fn named(&self, _name: &str) -> Option<set::NamedProvider> {
        None
    }
    /// Send the request; retries of refused requests (429, 5xx) happen inside.
    /// The stream ends after `Finish`, or with an error.
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError>;
}

/// A complete model answer, assembled from a stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelResponse {
    pub text: String,
    pub tool_calls: Vec<AssistantToolCall>,
    pub usage: ModelUsage,
    pub finish: Option<FinishReason>,
    /// Reasoning text the model streamed apart from its answer.
    pub reasoning: String,
    /// What the wire format wants sent back with this turn.
    pub native: Option<NativeTurn>,
}

/// Read a stream to its end, handing each text delta to `on_delta`. A stream
/// that ends without a finish reason is `Disconnected`.
pub async fn collect_response(
    stream: ModelStream,
    on_delta: impl FnMut(&str),
) -> Result<ModelResponse, ProviderError> {
    collect_response_apart(stream, on_delta, |_| {}).await
}

/// [`collect_response`], handing each reasoning delta to `on_reasoning`
/// apart from the answer's text (S13.4).
pub async fn collect_response_apart(
    mut stream: ModelStream,
    mut on_delta: impl FnMut(&str),
    mut on_reasoning: impl FnMut(&str),
) -> Result<ModelResponse, ProviderError> {
    let mut response = ModelResponse::default();
    let mut events = 0usize;
    while let Some(event) = stream.next().await {
        events += 1;
        match event? {
            ModelEvent::TextDelta(text) => {
                on_delta(&text);
                response.text.push_str(&text);
            }
            ModelEvent::ToolCall(call) => response.tool_calls.push(call),
            ModelEvent::Usage(usage) => response.usage = usage,
            ModelEvent::ReasoningDelta(text) => {
                on_reasoning(&text);
                response.reasoning.push_str(&text);
            }
            ModelEvent::Native(turn) => response.native = Some(turn),
            ModelEvent::Finish(reason) => response.finish = Some(reason),
        }
    }
    if response.finish.is_none() {
        return Err(ProviderError::Disconnected { events });
    }
    Ok(response)
}
