//! A session's conversation (S12): the turns of its earlier runs, so that a
//! new run in the session starts from what was said before.
//!
//! # The rules, in one place
//!
//! * **What a turn is.** One ended top-level Agent run of the session (child
//!   runs and Deep Research runs are not turns). Its messages are the run's
//!   own, as the person saw them on the run card: the prompt; each tool
//!   exchange, with every tool result cut to [`TOOL_RESULT_IN_HISTORY_BYTES`]
//!   (a note says how much was left out) and any tool call that never got a
//!   result left out; and the answer. A run that ended without an answer
//!   (stopped by the person, failed, out of budget) ends its turn with a
//!   bracketed note of how it ended ([`ended_note`]), added to its last
//!   assistant words, or else to an assistant message holding the text it
//!   had produced (its stored output, if any). A run
//!   that is still going (waiting for an approval, interrupted) is not yet a
//!   turn; it becomes one, after the turns that ended before it, once it
//!   ends and a later run starts.
//! * **Where turns are kept.** Each turn is one transcript segment at the top
//!   level ([`MAX_SEGMENT_LEVEL`], so no later append merges into it), whose
//!   `prev` is the turn before: the same append-only chain runs use, and a
//!   new run's first segment names the newest turn as its `prev`. Nothing is
//!   copied per turn. The [`SessionConversation`] record (Meta table) names
//!   the newest segment and lists each turn's run, position and size.
//! * **When turns are added.** When a run starts, under the session's lease:
//!   the turns of the runs that ended since are appended, in the order the
//!   runs were created, in the batch that creates the new run.
//! * **The context rule.** Earlier turns may take at most half the model's
//!   context window, counting [`BYTES_PER_TOKEN`] bytes of JSON per token
//!   ([`history_budget_bytes`]). The newest whole turns that fit are sent;
//!   older ones are dropped (never cut, never summarised), and the run
//!   records how many in a `conversation_trimmed` activity. A turn larger
//!   than the whole budget is dropped with everything before it.
//! * **An embedder's own history.** A run given `history` (user and
//!   assistant messages, [`validate_history`]) starts from exactly those
//!   messages instead, and the context rule does not touch them.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use agent_kernel::host::{BlobRef, Record, Storage, StorageExt, Table};
use agent_kernel::ids::{RunId, SessionId};
use agent_kernel::run::{AgentRun, RunStatus, StopReason};

use crate::blob::{put_blob, verified_blob};
use crate::error::RunError;
use crate::message::Message;
use crate::store::{RunMeta, latest_checkpoint};
use crate::transcript::{MAX_SEGMENT_LEVEL, Segment, TranscriptLog, Window};

// An embedder's history and the context window's bounds belong to a run's
// configuration; named here too, where the context rule reads them.
pub use crate::config::{
    DEFAULT_CONTEXT_WINDOW_TOKENS, HistoryError, HistoryMessage, HistoryRole, MAX_HISTORY_BYTES,
    MAX_HISTORY_MESSAGES, MIN_CONTEXT_WINDOW_TOKENS, validate_history,
};

/// How the context rule estimates tokens: this many bytes of JSON each.
pub const BYTES_PER_TOKEN: u64 = 4;
/// A tool result kept in the conversation is cut to this many bytes.
pub const TOOL_RESULT_IN_HISTORY_BYTES: usize = 2_048;
/// The bytes of earlier turns a run may send: half the context window.
pub fn history_budget_bytes(context_window_tokens: u32) -> u64 {
    u64::from(context_window_tokens) * BYTES_PER_TOKEN / 2
}

/// One turn of the conversation: the run it came from, where its messages
/// are in the chain, and their size in bytes of JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    pub run: RunId,
    pub start: u64,
    pub messages: u64,
    pub bytes: u64,
}

/// A session's conversation: its newest turn segment and every turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionConversation {
    pub session: SessionId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<BlobRef>,
    #[serde(default)]
    pub turns: Vec<Turn>,
}

impl Record for SessionConversation {
    const TABLE: Table = Table::Meta;
    fn key(&self) -> String {
        Self::key_for(&self.session)
    }
}

/// Which earlier turns a run sends, by the context rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kept {
    /// The run's window: from the oldest kept turn to its own prompt.
    pub window: Window,
    pub kept_turns: u64,
    pub dropped_turns: u64,
}

impl SessionConversation {
    pub fn key_for(session: &SessionId) -> String {
        format!("conversation/{session}")
    }

    /// The stored conversation of `session`, or an empty one.
    pub async fn load(
        storage: &dyn Storage,
        session: &SessionId,
    ) -> Result<SessionConversation, RunError> {
        Ok(storage
            .get_record(&Self::key_for(session))
            .await?
            .unwrap_or_else(|| SessionConversation {
                session: session.clone(),
                head: None,
                turns: Vec::new(),
            }))
    }

    /// Number of messages in the chain.
    pub fn len(&self) -> u64 {
        self.turns.last().map_or(0, |t| t.start + t.messages)
    }

    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }

    /// The context rule: the newest whole turns whose bytes fit in
    /// `budget_bytes`, for a run whose prompt comes right after them.
    pub fn kept(&self, budget_bytes: u64) -> Kept {
        let own_from = self.len();
        let mut used = 0u64;
        let mut from = own_from;
        let mut kept_turns = 0u64;
        for turn in self.turns.iter().rev() {
            used = used.saturating_add(turn.bytes);
            if used > budget_bytes {
                break;
            }
            from = turn.start;
            kept_turns += 1;
        }
        Kept {
            window: Window { from, own_from },
            kept_turns,
            dropped_turns: self.turns.len() as u64 - kept_turns,
        }
    }

    /// Append the turns of `runs` (the session's runs, any order) that
    /// ended and are not turns yet, in the order they were created. Each
    /// turn's segment is stored at once (content-addressed, harmless if
    /// the batch naming it never commits); the record itself is the
    /// caller's to commit. Returns how many turns were added.
    pub async fn catch_up(
        &mut self,
        storage: &dyn Storage,
        mut runs: Vec<AgentRun>,
    ) -> Result<usize, RunError> {
        let known: HashSet<RunId> = self.turns.iter().map(|t| t.run.clone()).collect();
        runs.retain(|r| {
            r.session == self.session
                && r.parent.is_none()
                && r.mode.is_conversation_turn()
                && r.status.is_final()
                && !known.contains(&r.id)
        });
        runs.sort_by(|a, b| {
            (a.created_at_ms, a.id.as_str()).cmp(&(b.created_at_ms, b.id.as_str()))
        });
        let added = runs.len();
        for run in runs {
            let own = own_messages(storage, &run.id).await?;
            let output = match &run.output {
                Some(blob) => verified_blob(storage, blob)
                    .await?
                    .map(|b| String::from_utf8_lossy(&b).into_owned()),
                None => None,
            };
            let messages = turn_messages(&own, &run, output.as_deref());
            self.append(storage, run.id, messages).await?;
        }
        Ok(added)
    }

    async fn append(
        &mut self,
        storage: &dyn Storage,
        run: RunId,
        messages: Vec<Message>,
    ) -> Result<(), RunError> {
        let bytes = serde_json::to_vec(&messages)
            .map_err(|e| RunError::Inconsistent {
                run: run.clone(),
                detail: format!("its turn does not encode ({e})"),
            })?
            .len() as u64;
        let start = self.len();
        let count = messages.len() as u64;
        let segment = Segment {
            prev: self.head.clone(),
            start,
            level: MAX_SEGMENT_LEVEL,
            messages,
            own_turns: None,
            turn_start: None,
        };
        let encoded = serde_json::to_vec(&segment).map_err(|e| RunError::Inconsistent {
            run: run.clone(),
            detail: format!("its turn does not encode ({e})"),
        })?;
        self.head = Some(put_blob(storage, encoded).await?);
        self.turns.push(Turn {
            run,
            start,
            messages: count,
            bytes,
        });
        Ok(())
    }
}

/// A stored run's own messages (its prompt and what followed).
async fn own_messages(storage: &dyn Storage, run: &RunId) -> Result<Vec<Message>, RunError> {
    let meta: RunMeta = storage
        .get_record(&format!("run_config/{run}"))
        .await?
        .ok_or_else(|| RunError::Inconsistent {
            run: run.clone(),
            detail: "its configuration record is missing".into(),
        })?;
    let Some(checkpoint) = latest_checkpoint(storage, run).await? else {
        return Ok(Vec::new());
    };
    let log = TranscriptLog::load(storage, run, &checkpoint.transcript, meta.window).await?;
    Ok(log.own().to_vec())
}

/// How a run that did not answer ended, as the conversation remembers it.
pub fn ended_note(status: RunStatus, reason: Option<&StopReason>) -> String {
    let how = match (status, reason) {
        (_, Some(StopReason::UserStopped)) => "the person stopped it".to_owned(),
        (_, Some(StopReason::BudgetExhausted { dimension })) => {
            format!("it ran out of its {dimension} budget")
        }
        (_, Some(StopReason::EffectUnknown { .. })) => {
            "a tool's effect was unknown and the person ended it".to_owned()
        }
        (_, Some(StopReason::RuntimeError { .. })) => "it failed".to_owned(),
        (_, Some(StopReason::ProviderUnavailable { provider, .. })) => {
            format!("the model provider {provider} was unavailable")
        }
        (_, Some(StopReason::ContentFiltered { provider })) => {
            format!("the model provider {provider} withheld the answer")
        }
        (status, _) => format!("it ended {status}"),
    };
    format!("[This turn ended before its answer: {how}.]")
}

/// A run's turn as the person saw it (the module's first rule).
pub fn turn_messages(own: &[Message], run: &AgentRun, output: Option<&str>) -> Vec<Message> {
    let answered: HashSet<&str> = own
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    let mut turn: Vec<Message> = Vec::with_capacity(own.len() + 1);
    for message in own {
        match message {
            Message::System { .. } => {}
            Message::User { .. } => turn.push(message.clone()),
            Message::Assistant {
                content,
                tool_calls,
                native,
            } => {
                let calls: Vec<_> = tool_calls
                    .iter()
                    .filter(|c| answered.contains(c.id.as_str()))
                    .cloned()
                    .collect();
                let content = content.clone().filter(|c| !c.is_empty());
                if content.is_some() || !calls.is_empty() {
                    turn.push(Message::Assistant {
                        content,
                        tool_calls: calls,
                        native: native.clone(),
                    });
                }
            }
            Message::Tool {
                tool_call_id,
                content,
            } => turn.push(Message::Tool {
                tool_call_id: tool_call_id.clone(),
                content: cut_tool_result(content),
            }),
        }
    }
    if run.status != RunStatus::Completed {
        let note = ended_note(run.status, run.stop_reason.as_ref());
        match turn.last_mut() {
            // The turn's last words were the assistant's: the note joins them.
            Some(Message::Assistant {
                content: Some(text),
                tool_calls,
                native,
            }) if tool_calls.is_empty() => {
                *text = format!("{text}\n\n{note}");
                // The text changed: the provider's own copy of it is stale.
                *native = None;
            }
            _ => {
                let content = match output.filter(|o| !o.is_empty()) {
                    Some(text) => format!("{text}\n\n{note}"),
                    None => note,
                };
                turn.push(Message::Assistant {
                    content: Some(content),
                    tool_calls: Vec::new(),
                    native: None,
                });
            }
        }
    }
    turn
}

/// A tool result cut to [`TOOL_RESULT_IN_HISTORY_BYTES`] at a character
/// boundary, with a note of what was left out.
fn cut_tool_result(content: &str) -> String {
    if content.len() <= TOOL_RESULT_IN_HISTORY_BYTES {
        return content.to_owned();
    }
    let mut end = TOOL_RESULT_IN_HISTORY_BYTES;
    while !content.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[{} more bytes of this result are not kept in the conversation]",
        &content[..end],
        content.len() - end
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation(sizes: &[u64]) -> SessionConversation {
        let mut start = 0;
        let turns = sizes
            .iter()
            .enumerate()
            .map(|(i, &bytes)| {
                let turn = Turn {
                    run: RunId::new(format!("run-{i}")).unwrap(),
                    start,
                    messages: 2,
                    bytes,
                };
                start += 2;
                turn
            })
            .collect();
        SessionConversation {
            session: SessionId::new("s").unwrap(),
            head: None,
            turns,
        }
    }

    #[test]
    fn the_newest_whole_turns_that_fit_are_kept() {
        let c = conversation(&[100, 300, 200]);
        // At the sum of the two newest: both kept, the oldest dropped.
        let at = c.kept(500);
        assert_eq!((at.kept_turns, at.dropped_turns), (2, 1));
        assert_eq!(
            at.window,
            Window {
                from: 2,
                own_from: 6
            }
        );
        // One byte below: only the newest fits.
        let below = c.kept(499);
        assert_eq!((below.kept_turns, below.dropped_turns), (1, 2));
        assert_eq!(below.window.from, 4);
        // One above: still two (the oldest needs 100 more).
        let above = c.kept(501);
        assert_eq!((above.kept_turns, above.dropped_turns), (2, 1));
        // Everything fits.
        assert_eq!(c.kept(600).dropped_turns, 0);
        assert_eq!(c.kept(600).window.from, 0);
    }

    #[test]
    fn a_turn_larger_than_the_budget_drops_it_and_all_before() {
        let c = conversation(&[10, 5_000, 10]);
        let kept = c.kept(1_000);
        assert_eq!((kept.kept_turns, kept.dropped_turns), (1, 2));
        let none = conversation(&[5_000]).kept(1_000);
        assert_eq!((none.kept_turns, none.dropped_turns), (0, 1));
        assert_eq!(
            none.window,
            Window {
                from: 2,
                own_from: 2
            }
        );
    }

    #[test]
    fn a_tool_result_is_cut_at_a_character_boundary() {
        let text = "é".repeat(TOOL_RESULT_IN_HISTORY_BYTES);
        let cut = cut_tool_result(&text);
        assert!(cut.starts_with(&"é".repeat(TOOL_RESULT_IN_HISTORY_BYTES / 2)));
        assert!(cut.contains(&format!(
            "[{} more bytes",
            text.len() - TOOL_RESULT_IN_HISTORY_BYTES
        )));
        let short = "é".repeat(10);
        assert_eq!(cut_tool_result(&short), short);
        // At the bound nothing is cut; one byte above, one byte is.
        let at = "x".repeat(TOOL_RESULT_IN_HISTORY_BYTES);
        assert_eq!(cut_tool_result(&at), at);
        let below = "x".repeat(TOOL_RESULT_IN_HISTORY_BYTES - 1);
        assert_eq!(cut_tool_result(&below), below);
        let above = "x".repeat(TOOL_RESULT_IN_HISTORY_BYTES + 1);
        assert!(cut_tool_result(&above).starts_with(&format!("{at}\n[1 more bytes")));
    }
}
