//! How a run's conversation is stored: the messages sent to the model
//! ([`crate::message`]), kept append-only as a chain of segment blobs (never
//! inline in a record) by the [`TranscriptLog`].
//!
//! A run's chain may continue its session's conversation (S12): its first
//! segment names the newest segment of the earlier turns as `prev`, and a
//! [`Window`] says where the messages the model sees begin and where the
//! run's own begin. The run's loop (what comes next, how many rounds) looks
//! at its own messages only; the model sees the whole window.

mod segment;

use serde::{Deserialize, Serialize};

use agent_kernel::host::{Batch, BlobRef, Storage, StorageError};
use agent_kernel::ids::RunId;

use crate::error::RunError;
// The message model the chain stores, at the path its users have always named.
pub use crate::message::{
    AssistantToolCall, Message, Messages, NativeTurn, Tail, Transcript, tail_of,
};
use segment::{Link, encode, read_chain};
pub use segment::{MAX_SEGMENT_LEVEL, Segment};

/// Where a run's conversation begins, as absolute message positions in its
/// chain: `from`, the first message the model sees (earlier turns dropped
/// by the context rule are before it), and `own_from`, the run's own first
/// message (its prompt). The default, both 0, is a run without history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub from: u64,
    pub own_from: u64,
}

/// The conversation in memory together with the chain of segments that
/// stores it. Appends store only the new messages (sealing the previous
/// turn's pieces when a turn begins); the chain is read only when a run is
/// loaded, and a run loaded to continue reads only its current turn
/// ([`TranscriptLog::load_recent`]) until the model needs the rest
/// ([`TranscriptLog::complete`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptLog {
    /// The messages held: the window's, from [`Window::from`] on, or (not
    /// complete) the newest ones, from `base` on.
    messages: Messages,
    chain: Vec<Link>,
    /// The absolute position of `messages[0]`.
    base: u64,
    window: Window,
    /// Not complete: the segment before the oldest one held.
    older: Option<BlobRef>,
    /// Where the run's own messages begin in `messages`.
    own_start: usize,
    /// The run's own assistant turns.
    assistant_turns: usize,
    /// The absolute position of the run's last assistant message (its first
    /// own message when it has none).
    turn_start: u64,
}

/// An append made durable as blobs but not yet applied: apply it once the
/// checkpoint naming `head` is committed.
#[derive(Debug)]
pub struct StagedAppend {
    messages: Vec<Message>,
    /// The previous turn's pieces and the segments carried with them, sealed
    /// into one segment (at the start of a turn).
    sealed: Option<(Link, usize)>,
    link: Link,
}

impl StagedAppend {
    /// The blob of the new newest segment (for the checkpoint).
    pub fn head(&self) -> &BlobRef {
        &self.link.blob
    }
}

fn is_assistant(m: &Message) -> bool {
    matches!(m, Message::Assistant { .. })
}

impl TranscriptLog {
    /// Store the first segment of a new conversation; returns the log and
    /// the blob a first checkpoint names.
    pub async fn start(
        storage: &dyn Storage,
        transcript: Transcript,
    ) -> Result<(TranscriptLog, BlobRef), StorageError> {
        let mut batch = Batch::new();
        let started = Self::start_after(None, 0, transcript.messages, |b| batch.add_blob(b))?;
        storage.commit(batch).await?;
        Ok(started)
    }

    /// A run's first segment, `messages`, after the earlier turns of its
    /// conversation: `earlier` is their newest segment and `len` their
    /// number of messages (`None` and 0 for a run without them). `store`
    /// keeps the segment's bytes (in the batch that starts the run) and
    /// names them. The log returned holds the new messages only; a load
    /// with the run's [`Window`] reads the earlier ones back.
    pub fn start_after(
        earlier: Option<BlobRef>,
        len: u64,
        messages: Vec<Message>,
        store: impl FnOnce(Vec<u8>) -> BlobRef,
    ) -> Result<(TranscriptLog, BlobRef), StorageError> {
        let own_turns = messages.iter().filter(|m| is_assistant(m)).count() as u64;
        let turn_start = messages
            .iter()
            .rposition(is_assistant)
            .map_or(len, |i| len + i as u64);
        let segment = Segment {
            prev: earlier,
            start: len,
            level: 0,
            messages,
            own_turns: Some(own_turns),
            turn_start: Some(turn_start),
        };
        let blob = store(encode(&segment)?);
        let window = Window {
            from: len,
            own_from: len,
        };
        let log = TranscriptLog::from_segments(vec![(blob.clone(), segment)], window, None);
        Ok((log, blob))
    }

    /// Read the chain ending at `head` back to the segment where `window`
    /// begins (the first segment for a run without history) and check that
    /// the segments join up.
    pub async fn load(
        storage: &dyn Storage,
        run: &RunId,
        head: &BlobRef,
        window: Window,
    ) -> Result<TranscriptLog, RunError> {
        let (segments, _) = read_chain(storage, run, head, window, |_| true).await?;
        Ok(TranscriptLog::from_segments(segments, window, None))
    }

    /// Read only what continuing the run needs: the segments of its
    /// current turn (back to its last assistant message), a number that
    /// does not grow with the run. The rest is read by
    /// [`TranscriptLog::complete`] when the model needs it. A chain stored
    /// before segments named their turn is read whole.
    pub async fn load_recent(
        storage: &dyn Storage,
        run: &RunId,
        head: &BlobRef,
        window: Window,
    ) -> Result<TranscriptLog, RunError> {
        // The head's turn start; `None` (a head without the marks): all.
        let mut target: Option<Option<u64>> = None;
        let (segments, older) = read_chain(storage, run, head, window, move |segment| {
            let turn_start = *target
                .get_or_insert_with(|| segment.turn_start.filter(|_| segment.own_turns.is_some()));
            turn_start.is_none_or(|t| segment.start > t)
        })
        .await?;
        Ok(TranscriptLog::from_segments(segments, window, older))
    }

    /// Read the rest of the chain if only the newest part is held.
    pub async fn complete(&mut self, storage: &dyn Storage, run: &RunId) -> Result<(), RunError> {
        let Some(older) = self.older.clone() else {
            return Ok(());
        };
        let (segments, _) = read_chain(storage, run, &older, self.window, |_| true).await?;
        let held = self.base;
        let mut all: Vec<(BlobRef, Segment)> = segments;
        let joined = all
            .last()
            .map(|(_, s)| s.start.saturating_add(s.messages.len() as u64));
        if joined != Some(held) {
            return Err(RunError::Inconsistent {
                run: run.clone(),
                detail: format!(
                    "the older transcript segments end at message {joined:?} but the newer begin at {held}"
                ),
            });
        }
        let older_len = all.iter().map(|(_, s)| s.messages.len()).sum::<usize>();
        let mut messages: Vec<Message> = Vec::with_capacity(older_len + self.messages.len());
        let mut chain = Vec::with_capacity(all.len() + self.chain.len());
        for (blob, segment) in all.drain(..) {
            chain.push(Link {
                blob,
                prev: segment.prev,
                start: messages.len(),
                level: segment.level,
            });
            messages.extend(segment.messages);
        }
        for link in &self.chain {
            chain.push(Link {
                start: link.start + older_len,
                ..link.clone()
            });
        }
        messages.extend(self.messages.iter().cloned());
        self.messages = messages.into();
        self.chain = chain;
        self.base = self.window.from;
        self.older = None;
        self.own_start = usize::try_from(self.window.own_from.saturating_sub(self.base))
            .unwrap_or(usize::MAX)
            .min(self.messages.len());
        Ok(())
    }

    /// Whether the whole window is held (see [`TranscriptLog::complete`]).
    pub fn is_complete(&self) -> bool {
        self.older.is_none()
    }

    fn from_segments(
        segments: Vec<(BlobRef, Segment)>,
        window: Window,
        older: Option<BlobRef>,
    ) -> TranscriptLog {
        let base = segments.first().map_or(window.from, |(_, s)| s.start);
        let marks = segments
            .last()
            .and_then(|(_, s)| Some((s.own_turns?, s.turn_start?)));
        let mut messages = Vec::new();
        let mut chain = Vec::with_capacity(segments.len());
        for (blob, segment) in segments {
            chain.push(Link {
                blob,
                prev: segment.prev,
                start: messages.len(),
                level: segment.level,
            });
            messages.extend(segment.messages);
        }
        let own_start = usize::try_from(window.own_from.saturating_sub(base))
            .unwrap_or(usize::MAX)
            .min(messages.len());
        let (assistant_turns, turn_start) = match marks.filter(|_| older.is_some()) {
            Some((turns, start)) => (usize::try_from(turns).unwrap_or(usize::MAX), start),
            None => {
                let own = &messages[own_start..];
                let turns = own.iter().filter(|m| is_assistant(m)).count();
                let start = own
                    .iter()
                    .rposition(is_assistant)
                    .map_or(base + own_start as u64, |i| base + (own_start + i) as u64);
                (turns, start)
            }
        };
        TranscriptLog {
            messages: messages.into(),
            chain,
            base,
            window,
            older,
            own_start,
            assistant_turns,
            turn_start,
        }
    }

    /// The conversation the model sees (the window), shared: a clone
    /// copies no message. Only the newest part until
    /// [`TranscriptLog::complete`] when loaded with
    /// [`TranscriptLog::load_recent`].
    pub fn messages(&self) -> &Messages {
        &self.messages
    }

    /// The run's own messages: its prompt and what followed (from its
    /// current turn on, when not complete).
    pub fn own(&self) -> &[Message] {
        &self.messages[self.own_start..]
    }

    /// The blob of the newest segment (what a checkpoint names).
    pub fn head(&self) -> Option<&BlobRef> {
        self.chain.last().map(|l| &l.blob)
    }

    /// Number of segments held (a load reads this many).
    pub fn chain_len(&self) -> usize {
        self.chain.len()
    }

    /// Number of the run's own assistant turns so far (kept as messages are
    /// appended).
    pub fn assistant_turns(&self) -> usize {
        self.assistant_turns
    }

    /// What happens next in the run, from its own messages.
    pub fn tail(&self) -> Tail {
        tail_of(self.own())
    }

    /// What happens next once `added` is appended (without appending it).
    pub fn tail_after(&self, added: &[Message]) -> Tail {
        let own = self.own();
        let from = own.iter().rposition(is_assistant).unwrap_or(0);
        let mut recent = own[from..].to_vec();
        recent.extend_from_slice(added);
        tail_of(&recent)
    }

    /// The turn marks after `added` is appended.
    fn marks_after(&self, added: &[Message]) -> (u64, u64) {
        let end = self.base + self.messages.len() as u64;
        let turns = self.assistant_turns + added.iter().filter(|m| is_assistant(m)).count();
        let turn_start = added
            .iter()
            .rposition(is_assistant)
            .map_or(self.turn_start, |i| end + i as u64);
        (turns as u64, turn_start)
    }

    /// Encode `messages` as the new newest segment, hand its bytes to
    /// `store` (which makes them durable with the checkpoint naming them and
    /// returns their reference), and return the append to apply once that
    /// checkpoint is durable. When `messages` begins a turn, the previous
    /// turn's pieces are first sealed into one segment, carried into the
    /// older ones of equal level, and stored the same way. Nothing changes
    /// in memory here.
    pub fn stage(
        &self,
        messages: Vec<Message>,
        mut store: impl FnMut(Vec<u8>) -> BlobRef,
    ) -> Result<StagedAppend, StorageError> {
        let end = self.messages.len();
        let mut prev = self.chain.last().map(|l| l.blob.clone());
        let mut sealed = None;
        if messages.iter().any(is_assistant) {
            // The previous turn's pieces (level 0), then older segments of
            // the level reached, as a binary counter carries.
            let mut first = self.chain.len();
            while first > 0 && self.chain[first - 1].level == 0 {
                first -= 1;
            }
            if first < self.chain.len() {
                let mut level = 1u8;
                while first > 0 && self.chain[first - 1].level == level && level < MAX_SEGMENT_LEVEL
                {
                    first -= 1;
                    level += 1;
                }
                let from = &self.chain[first];
                let segment = Segment {
                    prev: from.prev.clone(),
                    start: self.base + from.start as u64,
                    level,
                    messages: self.messages[from.start..end].to_vec(),
                    own_turns: Some(self.assistant_turns as u64),
                    turn_start: Some(self.turn_start),
                };
                let blob = store(encode(&segment)?);
                let link = Link {
                    blob: blob.clone(),
                    prev: from.prev.clone(),
                    start: from.start,
                    level,
                };
                sealed = Some((link, self.chain.len() - first));
                prev = Some(blob);
            }
        }
        let (own_turns, turn_start) = self.marks_after(&messages);
        let segment = Segment {
            prev: prev.clone(),
            start: self.base + end as u64,
            level: 0,
            messages,
            own_turns: Some(own_turns),
            turn_start: Some(turn_start),
        };
        let blob = store(encode(&segment)?);
        Ok(StagedAppend {
            messages: segment.messages,
            sealed,
            link: Link {
                blob,
                prev,
                start: end,
                level: 0,
            },
        })
    }

    /// Apply an append whose checkpoint is durable.
    pub fn apply(&mut self, staged: StagedAppend) {
        let (turns, turn_start) = self.marks_after(&staged.messages);
        self.assistant_turns = usize::try_from(turns).unwrap_or(usize::MAX);
        self.turn_start = turn_start;
        if let Some((link, replaced)) = staged.sealed {
            let keep = self.chain.len().saturating_sub(replaced);
            self.chain.truncate(keep);
            self.chain.push(link);
        }
        self.chain.push(staged.link);
        self.messages.extend(staged.messages);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob::put_blob;

    /// Stage `added` with its segment stored at once (the supervisor stores
    /// it in the batch of the checkpoint naming it).
    async fn stage_stored(
        log: &TranscriptLog,
        storage: &dyn Storage,
        added: Vec<Message>,
    ) -> StagedAppend {
        let mut segments = Vec::new();
        let staged = log
            .stage(added, |bytes| {
                let blob = BlobRef::of(&bytes);
                segments.push(bytes);
                blob
            })
            .unwrap();
        for segment in segments {
            put_blob(storage, segment).await.unwrap();
        }
        staged
    }

    fn call(id: &str) -> AssistantToolCall {
        AssistantToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: "{}".into(),
            signature: None,
        }
    }

    fn tool(i: usize) -> Message {
        Message::Tool {
            tool_call_id: format!("c{i}"),
            content: format!("result {i}"),
        }
    }

    fn assistant(id: &str) -> Message {
        Message::Assistant {
            content: None,
            tool_calls: vec![call(id)],
            native: None,
        }
    }

    /// Resume's read (issue 18 item 3): `load_recent` reads only the
    /// current turn's pieces, however long the run, and gives the same
    /// tail and turn count as a whole load; appends on it and a later
    /// `complete` give exactly the log a whole load gives.
    #[test]
    fn load_recent_reads_the_current_turn_only_and_completes_to_the_whole() {
        let exec = agent_kernel::memory::SimExecutor::new();
        let storage = agent_kernel::memory::MemoryStorage::new();
        let run = RunId::new("r").unwrap();
        exec.block_on(async {
            for turns in [1usize, 7, 300] {
                let (mut log, _) = TranscriptLog::start(&storage, Transcript::new(Some("s"), "p"))
                    .await
                    .unwrap();
                for t in 0..turns {
                    // A turn of three calls: the assistant message rides with
                    // the first result, the others come one by one.
                    let id = format!("t{t}");
                    let staged = stage_stored(
                        &log,
                        &storage,
                        vec![
                            Message::Assistant {
                                content: None,
                                tool_calls: vec![
                                    call(&id),
                                    call(&format!("{id}b")),
                                    call(&format!("{id}c")),
                                ],
                                native: None,
                            },
                            Message::Tool {
                                tool_call_id: id.clone(),
                                content: "r".into(),
                            },
                        ],
                    )
                    .await;
                    log.apply(staged);
                    if t + 1 < turns {
                        for suffix in ["b", "c"] {
                            let staged = stage_stored(
                                &log,
                                &storage,
                                vec![Message::Tool {
                                    tool_call_id: format!("{id}{suffix}"),
                                    content: "r".into(),
                                }],
                            )
                            .await;
                            log.apply(staged);
                        }
                    }
                }
                let head = log.head().unwrap().clone();
                let whole = TranscriptLog::load(&storage, &run, &head, Window::default())
                    .await
                    .unwrap();
                assert_eq!(whole, log);
                let mut recent =
                    TranscriptLog::load_recent(&storage, &run, &head, Window::default())
                        .await
                        .unwrap();
                assert_eq!(
                    recent.chain_len(),
                    1,
                    "{turns} turns: only the current piece"
                );
                assert_eq!(recent.tail(), whole.tail());
                assert_eq!(recent.assistant_turns(), whole.assistant_turns());
                assert_eq!(recent.is_complete(), turns == 0);
                // Answer the two open calls on the partial log.
                let mut expected = whole.clone();
                for suffix in ["b", "c"] {
                    let added = vec![Message::Tool {
                        tool_call_id: format!("t{}{suffix}", turns - 1),
                        content: "late".into(),
                    }];
                    let staged = stage_stored(&recent, &storage, added.clone()).await;
                    recent.apply(staged);
                    let staged = stage_stored(&expected, &storage, added).await;
                    expected.apply(staged);
                }
                assert_eq!(recent.tail(), Tail::ModelNext);
                recent.complete(&storage, &run).await.unwrap();
                assert!(recent.is_complete());
                assert_eq!(&recent.messages()[..], &expected.messages()[..]);
                assert_eq!(recent, expected);
                // The next turn seals on the completed log as on the whole one.
                let staged = stage_stored(&recent, &storage, vec![assistant("next")]).await;
                recent.apply(staged);
                let again =
                    TranscriptLog::load(&storage, &run, recent.head().unwrap(), Window::default())
                        .await
                        .unwrap();
                assert_eq!(again, recent);
            }
        })
        .unwrap();
    }

    /// The chain: every append stores only a bounded amount, a load rebuilds
    /// exactly what was appended, and the chain a load reads stays short.
    #[test]
    fn appends_store_only_new_messages_and_load_rebuilds_the_conversation() {
        let exec = agent_kernel::memory::SimExecutor::new();
        let storage = agent_kernel::memory::MemoryStorage::new();
        let run = RunId::new("r").unwrap();
        exec.block_on(async {
            let (mut log, first) = TranscriptLog::start(&storage, Transcript::new(Some("s"), "p"))
                .await
                .unwrap();
            assert_eq!(log.head(), Some(&first));
            let mut expected = Transcript::new(Some("s"), "p");
            let mut largest = 0u64;
            let appends = 1000usize;
            for i in 0..appends {
                let added = if i % 2 == 0 {
                    vec![Message::Assistant {
                        content: None,
                        tool_calls: vec![call(&format!("c{i}"))],
                        native: None,
                    }]
                } else {
                    vec![tool(i)]
                };
                let staged = stage_stored(&log, &storage, added.clone()).await;
                // Nothing changes in memory before the checkpoint is applied.
                assert_eq!(log.messages().len(), expected.messages.len());
                let head = staged.head().clone();
                largest = largest.max(head.size);
                log.apply(staged);
                expected.messages.extend(added);
                assert_eq!(log.head(), Some(&head));
                let bound = appends / (1 << MAX_SEGMENT_LEVEL) + MAX_SEGMENT_LEVEL as usize + 2;
                assert!(log.chain_len() <= bound, "{} > {bound}", log.chain_len());
            }
            assert_eq!(&log.messages()[..], &expected.messages[..]);
            assert_eq!(log.assistant_turns(), expected.assistant_turns());
            // A segment holds at most 2^MAX_SEGMENT_LEVEL appends: its size
            // does not grow with the run.
            assert!(largest < 128 * 200, "largest segment {largest} bytes");
            let loaded =
                TranscriptLog::load(&storage, &run, log.head().unwrap(), Window::default())
                    .await
                    .unwrap();
            assert_eq!(loaded, log);
            // Loading from an earlier head gives the earlier conversation.
            let early = TranscriptLog::load(&storage, &run, &first, Window::default())
                .await
                .unwrap();
            assert_eq!(
                &early.messages()[..],
                &Transcript::new(Some("s"), "p").messages[..]
            );
        })
        .unwrap();
    }

    /// A blob holding a whole transcript (as stored before segments) loads
    /// as a first segment; a missing segment is an inconsistency, not a panic.
    #[test]
    fn whole_transcript_blobs_load_and_missing_segments_are_reported() {
        let exec = agent_kernel::memory::SimExecutor::new();
        let storage = agent_kernel::memory::MemoryStorage::new();
        let run = RunId::new("r").unwrap();
        exec.block_on(async {
            let whole = Transcript::new(None, "p");
            let blob = crate::blob::put_json_blob(&storage, &whole).await.unwrap();
            let mut log = TranscriptLog::load(&storage, &run, &blob, Window::default())
                .await
                .unwrap();
            assert_eq!(&log.messages()[..], &whole.messages[..]);
            let staged = stage_stored(&log, &storage, vec![tool(1)]).await;
            log.apply(staged);
            let staged = stage_stored(&log, &storage, vec![tool(2)]).await;
            log.apply(staged);
            let head = log.head().unwrap().clone();
            assert_eq!(
                TranscriptLog::load(&storage, &run, &head, Window::default())
                    .await
                    .unwrap(),
                log
            );
            // Pieces of one turn are not merged.
            assert_eq!(log.chain_len(), 3);
            // A new turn seals them into one segment before its own piece.
            let staged = stage_stored(&log, &storage, vec![assistant("a3")]).await;
            log.apply(staged);
            assert_eq!(log.chain_len(), 2);
            let older = log.chain[0].blob.clone();
            let staged = stage_stored(&log, &storage, vec![tool(4)]).await;
            log.apply(staged);
            assert_eq!(log.chain_len(), 3);
            // Drop the older segment: the chain no longer reaches the start.
            use agent_kernel::host::Storage as _;
            assert!(storage.delete_blob(&older.hash).await.unwrap());
            let err = TranscriptLog::load(&storage, &run, log.head().unwrap(), Window::default())
                .await
                .unwrap_err();
            assert!(matches!(err, RunError::Inconsistent { .. }), "{err}");
        })
        .unwrap();
    }

    /// A request's messages share the log's (no copy); appending after the
    /// request is gone copies nothing, and what a request saw stays a prefix
    /// of the same lineage.
    #[test]
    fn messages_are_shared_and_grow_in_one_lineage() {
        let exec = agent_kernel::memory::SimExecutor::new();
        let storage = agent_kernel::memory::MemoryStorage::new();
        exec.block_on(async {
            let (mut log, _) = TranscriptLog::start(&storage, Transcript::new(None, "p"))
                .await
                .unwrap();
            let request = log.messages().clone();
            assert!(std::ptr::eq(request.as_ptr(), log.messages().as_ptr()));
            let staged = stage_stored(&log, &storage, vec![tool(1)]).await;
            log.apply(staged);
            // The request still holds one message, the log two, one lineage.
            assert_eq!(request.len(), 1);
            assert_eq!(log.messages().len(), 2);
            assert_eq!(request.lineage(), log.messages().lineage());
            assert_eq!(&log.messages()[..1], &request[..]);
            drop(request);
            let staged = stage_stored(&log, &storage, vec![tool(2)]).await;
            log.apply(staged);
            assert_eq!(log.messages().len(), 3);
            // Equal messages built apart: equal, but not one lineage.
            let apart = Messages::from(log.messages().to_vec());
            assert_eq!(&apart, log.messages());
            assert_ne!(apart.lineage(), log.messages().lineage());
            assert_ne!(Messages::default().lineage(), Messages::default().lineage());
        })
        .unwrap();
    }
}
