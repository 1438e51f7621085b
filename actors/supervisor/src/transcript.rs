//! The model conversation of a run: the messages sent to the model, stored
//! as one blob per checkpoint (never inline in a record), and the rule that
//! finds which tool calls of the last assistant turn still lack a result.

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
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
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
        let Some(last_assistant) = self
            .messages
            .iter()
            .rposition(|m| matches!(m, Message::Assistant { .. }))
        else {
            return Tail::ModelNext;
        };
        let Message::Assistant {
            content,
            tool_calls,
        } = &self.messages[last_assistant]
        else {
            return Tail::ModelNext;
        };
        if tool_calls.is_empty() {
            return Tail::Answered {
                text: content.clone().unwrap_or_default(),
            };
        }
        let answered: Vec<&str> = self.messages[last_assistant + 1..]
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> AssistantToolCall {
        AssistantToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: "{}".into(),
        }
    }

    #[test]
    fn tail_follows_the_conversation() {
        let mut t = Transcript::new(Some("sys"), "hi");
        assert_eq!(t.tail(), Tail::ModelNext);
        t.messages.push(Message::Assistant {
            content: None,
            tool_calls: vec![call("a"), call("b")],
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
