//! A provider that plays a JSON scenario, for demos, tests and the crash
//! simulator. The turn it plays is chosen from the request itself (the number
//! of assistant messages since the person's last message, the run's prompt),
//! so a replayed or resumed run gets the same answer for the same
//! conversation, and each run of a session starts at the first turn. The format is documented in the crate docs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use agent_kernel::host::Clock;

use super::capabilities::{CapabilityOverrides, ModelCapabilities};
use super::{
    FinishReason, ModelEvent, ModelProvider, ModelRequest, ModelStream, ModelUsage, ProviderError,
};
use crate::message::{AssistantToolCall, Message, Messages};

/// A scenario: the model's turns, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub turns: Vec<Turn>,
    /// Turns for runs whose prompt starts with a given text, instead of
    /// `turns` (a flow of several runs, such as Deep Research's planning
    /// and synthesis runs, whose prompts the runtime writes); the first
    /// entry that matches is played.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prompts: Vec<PromptTurns>,
    /// What the scripted model says it can do (S13.1), over
    /// [`ModelCapabilities::ASSUMED`]: a scenario can play a model
    /// without tool calling, or with a small context window.
    #[serde(default, skip_serializing_if = "is_default")]
    pub capabilities: CapabilityOverrides,
}

fn is_default(c: &CapabilityOverrides) -> bool {
    *c == CapabilityOverrides::default()
}

/// The turns of the runs whose prompt starts with `starts_with`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptTurns {
    pub starts_with: String,
    pub turns: Vec<Turn>,
}

/// One model answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// Reasoning streamed before the answer, apart from it (S13.4).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
    /// Assistant text, streamed in pieces of at most `chunk` characters.
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub tool_calls: Vec<ScriptedCall>,
    /// Reported usage; when absent, about one token per four characters.
    #[serde(default)]
    pub usage: Option<ModelUsage>,
    /// `stop`, `tool_calls`, `length`, …; default from whether there are tool calls.
    #[serde(default)]
    pub finish: Option<String>,
    /// Clock time the answer takes (slept on the host clock before finishing).
    #[serde(default)]
    pub delay_ms: u64,
    /// The first `disconnects` attempts at this turn break off mid-stream.
    #[serde(default)]
    pub disconnects: u32,
}

/// A tool call of a scripted turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    /// The provider call id; default `call_<turn>_<index>`.
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    /// An object (sent as its JSON text) or a string (sent as is, even if invalid JSON).
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// A scenario could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScenarioError {
    #[error("scenario is not valid JSON of the documented format: {0}")]
    Format(String),
    #[error("scenario has no turns; give at least one turn with a final answer")]
    Empty,
    #[error(
        "turn {turn}: unknown finish reason {finish:?}; use stop, tool_calls, length or content_filter"
    )]
    Finish { turn: usize, finish: String },
}

impl Scenario {
    /// Parse and check a scenario.
    pub fn from_json(text: &str) -> Result<Scenario, ScenarioError> {
        let scenario: Scenario =
            serde_json::from_str(text).map_err(|e| ScenarioError::Format(e.to_string()))?;
        scenario.check()?;
        Ok(scenario)
    }

    fn check(&self) -> Result<(), ScenarioError> {
        if self.turns.is_empty() || self.prompts.iter().any(|p| p.turns.is_empty()) {
            return Err(ScenarioError::Empty);
        }
        let every = self
            .turns
            .iter()
            .chain(self.prompts.iter().flat_map(|p| &p.turns));
        for (i, t) in every.enumerate() {
            if let Some(f) = &t.finish
                && !matches!(
                    f.as_str(),
                    "stop" | "tool_calls" | "length" | "content_filter"
                )
            {
                return Err(ScenarioError::Finish {
                    turn: i,
                    finish: f.clone(),
                });
            }
        }
        Ok(())
    }
}

/// Plays a [`Scenario`].
pub struct ScriptedProvider {
    scenario: Scenario,
    clock: Arc<dyn Clock>,
    chunk: usize,
    /// Attempts per turn, for `disconnects`.
    attempts: Mutex<HashMap<(Option<usize>, usize), u32>>,
    /// The lineage of the last request's messages and, for each message, the
    /// assistant turns and serialized characters up to and including it: a
    /// request of the same lineage measures only its new messages.
    seen: Mutex<(u64, Vec<(usize, usize)>)>,
}

impl std::fmt::Debug for ScriptedProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedProvider")
            .field("turns", &self.scenario.turns.len())
            .finish()
    }
}

impl ScriptedProvider {
    pub fn new(scenario: Scenario, clock: Arc<dyn Clock>) -> Self {
        Self {
            scenario,
            clock,
            chunk: 16,
            attempts: Mutex::new(HashMap::new()),
            seen: Mutex::new((0, Vec::new())),
        }
    }

    /// Assistant turns in `messages` and their serialized length.
    fn measure(&self, messages: &Messages) -> Result<(usize, usize), ProviderError> {
        let mut guard = self
            .seen
            .lock()
            .map_err(|_| ProviderError::Config("scripted provider state is poisoned".into()))?;
        let (lineage, seen) = &mut *guard;
        // Messages of one lineage are prefixes of one another (see `Messages`).
        if *lineage != messages.lineage() {
            *lineage = messages.lineage();
            seen.clear();
        }
        seen.truncate(messages.len());
        for m in &messages[seen.len()..] {
            let (turns, chars) = seen.last().copied().unwrap_or((0, 0));
            // A run's turns count from its prompt: the session's earlier
            // turns before it do not move the scenario on.
            let turns = match m {
                Message::User { .. } => 0,
                Message::Assistant { .. } => turns + 1,
                _ => turns,
            };
            let chars = chars + serde_json::to_string(m).map(|s| s.len()).unwrap_or(0);
            seen.push((turns, chars));
        }
        Ok(seen.last().copied().unwrap_or((0, 0)))
    }

    fn tokens(chars: usize) -> u64 {
        (chars as u64).div_ceil(4).max(1)
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl ModelProvider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    fn capabilities(&self, _model: &str) -> ModelCapabilities {
        ModelCapabilities::ASSUMED.with(&self.scenario.capabilities)
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        let (index, input_chars) = self.measure(&request.messages)?;
        // The run's prompt: the newest message of the person.
        let prompt = request.messages.iter().rev().find_map(|m| match m {
            Message::User { content } => Some(content.as_str()),
            _ => None,
        });
        let set = prompt.and_then(|prompt| {
            self.scenario
                .prompts
                .iter()
                .position(|p| prompt.starts_with(&p.starts_with))
        });
        let turns = match set {
            Some(set) => &self.scenario.prompts[set].turns,
            None => &self.scenario.turns,
        };
        let turn = turns
            .get(index)
            .ok_or(ProviderError::ScenarioExhausted {
                turn: index,
                turns: turns.len(),
            })?
            .clone();
        let attempt = {
            let mut attempts = self
                .attempts
                .lock()
                .map_err(|_| ProviderError::Config("scripted provider state is poisoned".into()))?;
            let n = attempts.entry((set, index)).or_insert(0);
            *n += 1;
            *n
        };
        if turn.delay_ms > 0 {
            self.clock.sleep(Duration::from_millis(turn.delay_ms)).await;
        }
        let mut events: Vec<Result<ModelEvent, ProviderError>> = Vec::new();
        let thought: Vec<char> = turn.reasoning.chars().collect();
        for piece in thought.chunks(self.chunk) {
            events.push(Ok(ModelEvent::ReasoningDelta(piece.iter().collect())));
        }
        let chars: Vec<char> = turn.text.chars().collect();
        for piece in chars.chunks(self.chunk) {
            events.push(Ok(ModelEvent::TextDelta(piece.iter().collect())));
        }
        if attempt <= turn.disconnects {
            let n = events.len().min(1);
            events.truncate(n);
            events.push(Err(ProviderError::Disconnected { events: n }));
            return Ok(Box::pin(futures::stream::iter(events)));
        }
        for (i, c) in turn.tool_calls.iter().enumerate() {
            events.push(Ok(ModelEvent::ToolCall(AssistantToolCall {
                id: c.id.clone().unwrap_or_else(|| format!("call_{index}_{i}")),
                name: c.name.clone(),
                arguments: match &c.arguments {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                },
                signature: None,
            })));
        }
        let usage = turn.usage.unwrap_or(ModelUsage {
            input_tokens: Self::tokens(input_chars),
            output_tokens: Self::tokens(turn.text.len()),
            ..ModelUsage::default()
        });
        events.push(Ok(ModelEvent::Usage(usage)));
        let finish = match &turn.finish {
            Some(f) => FinishReason::from_wire(f),
            None if turn.tool_calls.is_empty() => FinishReason::Stop,
            None => FinishReason::ToolCalls,
        };
        events.push(Ok(ModelEvent::Finish(finish)));
        Ok(Box::pin(futures::stream::iter(events)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_errors_name_the_problem() {
        assert!(matches!(
            Scenario::from_json("{"),
            Err(ScenarioError::Format(_))
        ));
        assert_eq!(
            Scenario::from_json(r#"{"turns": []}"#),
            Err(ScenarioError::Empty)
        );
        assert!(matches!(
            Scenario::from_json(r#"{"turns": [{"text": "x", "finish": "nope"}]}"#),
            Err(ScenarioError::Finish { turn: 0, .. })
        ));
        assert!(matches!(
            Scenario::from_json(r#"{"turns": [{"txt": "x"}]}"#),
            Err(ScenarioError::Format(_))
        ));
        let ok = Scenario::from_json(
            r#"{"turns": [{"text": "a", "tool_calls": [{"name": "t", "arguments": {"x": 1}}]}, {"text": "b"}]}"#,
        )
        .unwrap();
        assert_eq!(ok.turns.len(), 2);
        assert_eq!(
            Scenario::from_json(
                r#"{"turns": [{"text": "a"}], "prompts": [{"starts_with": "P", "turns": []}]}"#
            ),
            Err(ScenarioError::Empty)
        );
        assert!(matches!(
            Scenario::from_json(
                r#"{"turns": [{"text": "a"}], "prompts": [{"starts_with": "P", "turns": [{"finish": "x"}]}]}"#
            ),
            Err(ScenarioError::Finish { turn: 1, .. })
        ));
    }

    async fn answer(provider: &ScriptedProvider, prompt: &str) -> String {
        let request = ModelRequest {
            model: "m".into(),
            system: None,
            messages: vec![Message::User {
                content: prompt.into(),
            }]
            .into(),
            tools: Vec::new().into(),
            temperature: None,
            max_output_tokens: None,
            reasoning: Default::default(),
        };
        let stream = provider.stream(request).await.unwrap();
        super::super::collect_response(stream, |_| {})
            .await
            .unwrap()
            .text
    }

    #[test]
    fn a_run_whose_prompt_starts_with_a_listed_text_plays_that_text_s_turns() {
        let scenario = Scenario::from_json(
            r#"{"turns": [{"text": "main"}],
                "prompts": [{"starts_with": "You plan", "turns": [{"text": "a plan"}]},
                            {"starts_with": "You", "turns": [{"text": "you"}]}]}"#,
        )
        .unwrap();
        let mem = agent_kernel::memory::MemoryHost::fifo(1);
        let provider = ScriptedProvider::new(scenario, mem.host().clock);
        let answers = mem
            .block_on_advancing(async {
                (
                    answer(&provider, "You plan a task.").await,
                    answer(&provider, "You write.").await,
                    answer(&provider, "Hello").await,
                )
            })
            .unwrap();
        assert_eq!(
            answers,
            ("a plan".into(), "you".into(), "main".into()),
            "the first matching entry wins; others play `turns`"
        );
    }
}
