//! The conversation's message model, as every provider and the run loop
//! see it: [`Message`] and the assistant's [`AssistantToolCall`]s, the
//! shared growing [`Messages`] a request carries, and the rule that finds
//! which tool calls of the last assistant turn still lack a result
//! ([`tail_of`]). Nothing here touches storage: how the messages are stored
//! is [`crate::transcript`]'s.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A tool call as the assistant message carries it (the provider's id, not the journal's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssistantToolCall {
    /// The provider's call id, echoed back in the tool message.
    pub id: String,
    /// The model-facing tool name.
    pub name: String,
    /// The raw arguments text.
    pub arguments: String,
    /// An opaque token the provider wants sent back with this call (Gemini's
    /// `thoughtSignature`); other formats have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// An assistant turn's content blocks exactly as one wire format sent them
/// (see `Message::Assistant::native`): opaque to the runtime, bounded by
/// the format's decoder, and sent back only to that format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NativeTurn {
    /// The wire format that wrote it ("anthropic").
    pub format: String,
    /// The turn's content blocks as a JSON array, in the order received.
    pub blocks: String,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<AssistantToolCall>,
        /// The turn as the provider's own wire format sent it, when that
        /// format wants parts back that are not the answer nor our calls
        /// (Anthropic's signed thinking and server-side tool blocks). Only
        /// the format named in it reads it; every other format ignores it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        native: Option<NativeTurn>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

/// The conversation as a request carries it: shared with the run that sent
/// it, so a request costs no copy of the history. Reads as a slice.
///
/// It only ever grows, so every `Messages` with the same [`Messages::lineage`]
/// is a prefix of every longer one: a consumer that saw one may look only at
/// the messages after it. Equality compares the messages alone.
#[derive(Debug, Clone)]
pub struct Messages {
    messages: Arc<Vec<Message>>,
    lineage: u64,
}

/// The next lineage to hand out.
static LINEAGES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Messages {
    /// Append, copying the messages only if a request still holds them.
    pub(crate) fn extend(&mut self, more: Vec<Message>) {
        Arc::make_mut(&mut self.messages).extend(more);
    }

    /// Same for two values when one grew from the other (or both from one).
    pub fn lineage(&self) -> u64 {
        self.lineage
    }
}

impl Default for Messages {
    fn default() -> Messages {
        Messages::from(Vec::new())
    }
}

impl PartialEq for Messages {
    fn eq(&self, other: &Messages) -> bool {
        self.messages == other.messages
    }
}

impl Eq for Messages {}

impl std::ops::Deref for Messages {
    type Target = [Message];
    fn deref(&self) -> &[Message] {
        &self.messages
    }
}

impl From<Vec<Message>> for Messages {
    fn from(messages: Vec<Message>) -> Messages {
        Messages {
            messages: Arc::new(messages),
            lineage: LINEAGES.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }
}

impl Serialize for Messages {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.messages.as_slice().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Messages {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Messages, D::Error> {
        Vec::<Message>::deserialize(deserializer).map(Messages::from)
    }
}

/// The whole conversation so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transcript {
    pub messages: Vec<Message>,
}

/// Where the conversation stands, as far as the run loop cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tail {
    /// The model speaks next.
    ModelNext,
    /// The last assistant turn asked for tools; these (by position in that
    /// turn) have no result message yet.
    ToolsPending {
        round_calls: Vec<AssistantToolCall>,
        pending: Vec<usize>,
    },
    /// The last assistant turn was a final answer.
    Answered { text: String },
}

impl Transcript {
    pub fn new(system: Option<&str>, prompt: &str) -> Transcript {
        let mut messages = Vec::new();
        if let Some(system) = system {
            messages.push(Message::System {
                content: system.to_owned(),
            });
        }
        messages.push(Message::User {
            content: prompt.to_owned(),
        });
        Transcript { messages }
    }

    /// Number of assistant turns so far (the model rounds that completed).
    pub fn assistant_turns(&self) -> usize {
        self.messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count()
    }

    /// What happens next, from the messages alone.
    pub fn tail(&self) -> Tail {
        tail_of(&self.messages)
    }
}

/// What happens next after `messages`.
pub fn tail_of(messages: &[Message]) -> Tail {
    let Some(last_assistant) = messages
        .iter()
        .rposition(|m| matches!(m, Message::Assistant { .. }))
    else {
        return Tail::ModelNext;
    };
    let Message::Assistant {
        content,
        tool_calls,
        ..
    } = &messages[last_assistant]
    else {
        return Tail::ModelNext;
    };
    if tool_calls.is_empty() {
        return Tail::Answered {
            text: content.clone().unwrap_or_default(),
        };
    }
    let answered: Vec<&str> = messages[last_assistant + 1..]
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    let pending: Vec<usize> = tool_calls
        .iter()
        .enumerate()
        .filter(|(_, c)| !answered.contains(&c.id.as_str()))
        .map(|(i, _)| i)
        .collect();
    if pending.is_empty() {
        Tail::ModelNext
    } else {
        Tail::ToolsPending {
            round_calls: tool_calls.clone(),
            pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> AssistantToolCall {
        AssistantToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: "{}".into(),
            signature: None,
        }
    }

    #[test]
    fn tail_follows_the_conversation() {
        let mut t = Transcript::new(Some("sys"), "hi");
        assert_eq!(t.tail(), Tail::ModelNext);
        t.messages.push(Message::Assistant {
            content: None,
            tool_calls: vec![call("a"), call("b")],
            native: None,
        });
        assert!(
            matches!(t.tail(), Tail::ToolsPending { ref pending, .. } if pending == &vec![0, 1])
        );
        t.messages.push(Message::Tool {
            tool_call_id: "a".into(),
            content: "r".into(),
        });
        assert!(matches!(t.tail(), Tail::ToolsPending { ref pending, .. } if pending == &vec![1]));
        t.messages.push(Message::Tool {
            tool_call_id: "b".into(),
            content: "r".into(),
        });
        assert_eq!(t.tail(), Tail::ModelNext);
        t.messages.push(Message::Assistant {
            content: Some("done".into()),
            tool_calls: vec![],
            native: None,
        });
        assert_eq!(
            t.tail(),
            Tail::Answered {
                text: "done".into()
            }
        );
        assert_eq!(t.assistant_turns(), 2);
    }
}
