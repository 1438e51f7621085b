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
//!   context window ([`SessionConversation::plan`]). Their size is the
//!   provider's count where it reported one (the newest turn's run's last
//!   request and answer, `Usage::context_tokens`, when that run started
//!   from the same summary), else [`BYTES_PER_TOKEN`] bytes of JSON a token
//!   ([`estimate_tokens`]). Within the share, every turn after the newest
//!   summary is sent. Past it, the run first compacts
//!   ([`crate::compaction`]): the oldest turns are summarised by the model
//!   into a stored summary, sent in their place from then on, and the run
//!   records `conversation_compacted`; the newest whole turns within a
//!   quarter of the window stay as messages. Turns too large for the
//!   summarisation request itself are dropped, oldest first, and the run
//!   records how many in a `conversation_trimmed` activity. The raw turns
//!   stay in the chain ([`SessionConversation::messages`]).
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

/// One turn of the conversation: the run it came from, where its messages
/// are in the chain, and their size in bytes of JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    pub run: RunId,
    pub start: u64,
    pub messages: u64,
    pub bytes: u64,
    /// Where the run's own window began in the chain (what it sent before
    /// its prompt started there, after the summary ending there, if any).
    #[serde(default)]
    pub from: u64,
    /// The provider's count of the conversation as the run ended: its last
    /// request's input plus its output (0: none reported).
    #[serde(default)]
    pub context_tokens: u64,
}

/// Tokens of `bytes` of text never sent (or sent but not counted apart):
/// [`BYTES_PER_TOKEN`] bytes each, rounded up.
pub fn estimate_tokens(bytes: u64) -> u64 {
    bytes.div_ceil(BYTES_PER_TOKEN)
}

/// How a run's history fits its share of the context window, by
/// [`SessionConversation::plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextPlan {
    /// The run's window: from the first turn it sends as messages to its
    /// own prompt.
    pub window: Window,
    pub kept_turns: u64,
    /// Turns neither sent nor summarised (too large for a summarisation
    /// request): recorded `conversation_trimmed`.
    pub dropped_turns: u64,
    /// The summary sent before the window, stored or still to be made.
    pub summary: Option<SummaryUse>,
}

/// The summary a run sends before its window: it covers the first `turns`
/// turns, which end at message `upto` (the window's start). When
/// `folded_turns` is not 0 the run makes it first (a compaction), from the
/// summary ending at `fold_from` (if any) and the turns from there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SummaryUse {
    pub turns: u64,
    pub upto: u64,
    pub fold_from: u64,
    /// The previous summary's turns (0: none), which ends at `fold_from`
    /// unless turns were dropped.
    pub previous_turns: u64,
    pub folded_turns: u64,
    /// The conversation's size in tokens when the run started (the
    /// provider's count where there is one, [`estimate_tokens`] for the
    /// rest), its new prompt included.
    pub tokens_before: u64,
    /// Estimated tokens of what follows the summary: the kept turns and
    /// the prompt.
    pub tokens_kept: u64,
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

    /// The context rule with compaction (S12.2, S12.4), for a run whose
    /// prompt has `prompt_bytes` after the turns, `latest` being the
    /// session's newest stored summary. The history (the summary, then the
    /// turns after it) may take half of `context_window_tokens`; its size
    /// is the provider's count of the newest turn's conversation when that
    /// run started from the same summary, else the estimate. Within the
    /// share, everything after the summary is sent. Past it, the oldest
    /// turns are folded into a new summary: the newest whole turns within a
    /// quarter of the window stay as messages (at least one turn is
    /// folded), and folded turns that would not fit a summarisation request
    /// beside the previous summary are dropped, oldest first.
    pub fn plan(
        &self,
        latest: Option<&crate::compaction::ConversationSummary>,
        context_window_tokens: u32,
        prompt_bytes: u64,
    ) -> ContextPlan {
        self.plan_with(latest, context_window_tokens, prompt_bytes, false)
    }

    /// [`SessionConversation::plan`], folding every turn but the newest
    /// whatever the size when `force` (the embedder asked for it).
    pub fn plan_with(
        &self,
        latest: Option<&crate::compaction::ConversationSummary>,
        context_window_tokens: u32,
        prompt_bytes: u64,
        force: bool,
    ) -> ContextPlan {
        let own_from = self.len();
        let (s_turns, s_upto, s_tokens) = latest
            .filter(|s| s.turns as usize <= self.turns.len())
            .map_or((0, 0, 0), |s| (s.turns as usize, s.upto, s.tokens));
        let rest = &self.turns[s_turns..];
        let prompt = estimate_tokens(prompt_bytes);
        let estimated: u64 = s_tokens + rest.iter().map(|t| estimate_tokens(t.bytes)).sum::<u64>();
        let history = match rest.last() {
            Some(last) if last.context_tokens > 0 && last.from == s_upto => last.context_tokens,
            _ => estimated,
        };
        let before = history.saturating_add(prompt);
        let share = u64::from(context_window_tokens) / 2;
        let stored = latest.map(|s| SummaryUse {
            turns: s.turns,
            upto: s.upto,
            fold_from: s.upto,
            previous_turns: s.turns,
            folded_turns: 0,
            tokens_before: before,
            tokens_kept: before.saturating_sub(s.tokens),
        });
        let fits = if force {
            rest.len() < 2
        } else {
            before <= share
        };
        if fits || rest.is_empty() {
            return ContextPlan {
                window: Window {
                    from: s_upto,
                    own_from,
                },
                kept_turns: rest.len() as u64,
                dropped_turns: 0,
                summary: stored,
            };
        }
        // The newest whole turns within a quarter of the window stay.
        let keep_budget = share / 2;
        let mut kept = 0usize;
        let mut used = 0u64;
        // At least one turn is folded; asked for, all but the newest.
        let most = if force { 1 } else { rest.len() - 1 };
        for t in rest.iter().rev().take(most) {
            let e = estimate_tokens(t.bytes);
            if used + e > keep_budget {
                break;
            }
            used += e;
            kept += 1;
        }
        let fold_end = self.turns.len() - kept;
        // What the summarisation request may carry besides its output.
        let input_budget = u64::from(context_window_tokens)
            .saturating_sub(u64::from(crate::compaction::summary_bound_tokens(
                context_window_tokens,
            )))
            .saturating_sub(crate::compaction::SUMMARY_REQUEST_OVERHEAD_TOKENS);
        let mut fold_start = s_turns;
        let mut fold_tokens: u64 = s_tokens
            + self.turns[fold_start..fold_end]
                .iter()
                .map(|t| estimate_tokens(t.bytes))
                .sum::<u64>();
        while fold_tokens > input_budget && fold_start < fold_end {
            fold_tokens -= estimate_tokens(self.turns[fold_start].bytes);
            fold_start += 1;
        }
        let upto = self.turns.get(fold_end).map_or(own_from, |t| t.start);
        let fold_from = self.turns.get(fold_start).map_or(own_from, |t| t.start);
        ContextPlan {
            window: Window {
                from: upto,
                own_from,
            },
            kept_turns: kept as u64,
            dropped_turns: (fold_start - s_turns) as u64,
            summary: Some(SummaryUse {
                turns: fold_end as u64,
                upto,
                fold_from,
                previous_turns: if fold_start == s_turns {
                    s_turns as u64
                } else {
                    0
                },
                folded_turns: (fold_end - fold_start) as u64,
                tokens_before: before,
                tokens_kept: used + prompt,
            }),
        }
    }

    /// Every raw turn's messages, oldest first: what compaction summarised
    /// stays stored and readable here.
    pub async fn messages(&self, storage: &dyn Storage) -> Result<Vec<Message>, RunError> {
        let (Some(head), Some(first)) = (&self.head, self.turns.first()) else {
            return Ok(Vec::new());
        };
        let log = TranscriptLog::load(
            storage,
            &first.run,
            head,
            Window {
                from: 0,
                own_from: self.len(),
            },
        )
        .await?;
        Ok(log.messages().to_vec())
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
            let (own, from) = own_messages(storage, &run.id).await?;
            let output = match &run.output {
                Some(blob) => verified_blob(storage, blob)
                    .await?
                    .map(|b| String::from_utf8_lossy(&b).into_owned()),
                None => None,
            };
            let messages = turn_messages(&own, &run, output.as_deref());
            let context_tokens = run.usage.context_tokens;
            self.append(storage, run.id, messages).await?;
            if let Some(turn) = self.turns.last_mut() {
                turn.from = from;
                turn.context_tokens = context_tokens;
            }
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
            from: 0,
            context_tokens: 0,
        });
        Ok(())
    }
}

/// A stored run's own messages (its prompt and what followed), and where
/// its window began.
async fn own_messages(storage: &dyn Storage, run: &RunId) -> Result<(Vec<Message>, u64), RunError> {
    let meta: RunMeta = storage
        .get_record(&format!("run_config/{run}"))
        .await?
        .ok_or_else(|| RunError::Inconsistent {
            run: run.clone(),
            detail: "its configuration record is missing".into(),
        })?;
    let Some(checkpoint) = latest_checkpoint(storage, run).await? else {
        return Ok((Vec::new(), meta.window.from));
    };
    let log = TranscriptLog::load(storage, run, &checkpoint.transcript, meta.window).await?;
    Ok((log.own().to_vec(), meta.window.from))
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
                    from: 0,
                    context_tokens: 0,
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

    fn summary(turns: u64, upto: u64, tokens: u64) -> crate::compaction::ConversationSummary {
        crate::compaction::ConversationSummary {
            turns,
            upto,
            text: BlobRef::of(b"s"),
            tokens,
            measured: true,
            prompt_version: 1,
            run: None,
            tokens_before: 0,
            tokens_after: 0,
            created_at_ms: 0,
        }
    }

    /// S12.4: a 1,024-token window gives earlier turns 512 tokens (2,048
    /// bytes estimated). At the share nothing is summarised; one token
    /// above it the oldest turns are folded and the newest within a
    /// quarter of the window (256 tokens) stay.
    #[test]
    fn s12_4_within_the_share_all_is_sent_past_it_the_oldest_turns_are_folded() {
        // Three turns of 200, 400 and 400 bytes (50 + 100 + 100 tokens);
        // a prompt of 1,048 bytes (262 tokens): 512 in all.
        let c = conversation(&[200, 400, 400]);
        let at = c.plan(None, 1_024, 1_048);
        assert_eq!(at.summary, None);
        assert_eq!((at.kept_turns, at.dropped_turns), (3, 0));
        assert_eq!(
            at.window,
            Window {
                from: 0,
                own_from: 6
            }
        );
        let below = c.plan(None, 1_024, 1_044);
        assert_eq!(below.summary, None);
        let above = c.plan(None, 1_024, 1_049);
        let s = above.summary.expect("a compaction");
        // The two newest (200 tokens) fit in 256: the oldest is folded.
        assert_eq!((above.kept_turns, above.dropped_turns), (2, 0));
        assert_eq!((s.turns, s.upto, s.fold_from, s.folded_turns), (1, 2, 0, 1));
        assert_eq!(s.tokens_before, 513);
        assert_eq!(s.tokens_kept, 200 + 263);
        assert_eq!(
            above.window,
            Window {
                from: 2,
                own_from: 6
            }
        );
    }

    #[test]
    fn s12_4_a_stored_summary_replaces_the_turns_it_covers() {
        let c = conversation(&[400, 400, 400]);
        // The summary (40 tokens) covers the first turn; 240 tokens follow.
        let plan = c.plan(Some(&summary(1, 2, 40)), 1_024, 4);
        let s = plan.summary.expect("the stored summary");
        assert_eq!((s.turns, s.upto, s.folded_turns), (1, 2, 0));
        assert_eq!(
            plan.window,
            Window {
                from: 2,
                own_from: 6
            }
        );
        assert_eq!(plan.kept_turns, 2);
        // Past the share again: the next summary folds the previous one
        // and the turns after it, keeping the newest within 256 tokens.
        let big = conversation(&[400, 800, 800, 400]);
        let plan = big.plan(Some(&summary(1, 2, 40)), 1_024, 4);
        let s = plan.summary.expect("a compaction");
        assert_eq!(
            (s.turns, s.upto, s.fold_from, s.previous_turns),
            (3, 6, 2, 1)
        );
        assert_eq!(s.folded_turns, 2);
        assert_eq!(plan.kept_turns, 1);
    }

    #[test]
    fn s12_4_the_providers_count_decides_when_the_newest_turn_reported_one() {
        let mut c = conversation(&[400, 400, 400]);
        // Estimated 300 tokens: within the share. Measured 600: past it.
        assert_eq!(c.plan(None, 1_024, 4).summary, None);
        c.turns[2].context_tokens = 600;
        let plan = c.plan(None, 1_024, 4);
        assert_eq!(plan.summary.expect("a compaction").tokens_before, 601);
        // A count from a run that started elsewhere in the chain is not used.
        c.turns[2].from = 2;
        assert_eq!(c.plan(None, 1_024, 4).summary, None);
    }

    #[test]
    fn s12_4_turns_too_large_for_the_summary_request_are_dropped_and_counted() {
        // 1,530-byte turns (383 tokens): the request may carry 640.
        let c = conversation(&[1_530, 1_530]);
        let plan = c.plan(None, 1_024, 4);
        let s = plan.summary.expect("a compaction");
        assert_eq!((plan.kept_turns, plan.dropped_turns), (0, 1));
        assert_eq!((s.turns, s.fold_from, s.folded_turns), (2, 2, 1));
        assert_eq!(
            plan.window,
            Window {
                from: 4,
                own_from: 4
            }
        );
    }

    #[test]
    fn s12_4_asked_for_it_folds_all_but_the_newest_turn() {
        let c = conversation(&[40, 40, 40]);
        assert_eq!(c.plan(None, 1_024, 0).summary, None);
        let forced = c.plan_with(None, 1_024, 0, true);
        let s = forced.summary.expect("a compaction");
        assert_eq!((s.turns, s.folded_turns, forced.kept_turns), (2, 2, 1));
        // One turn: nothing to fold.
        assert_eq!(
            conversation(&[40]).plan_with(None, 1_024, 0, true).summary,
            None
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
