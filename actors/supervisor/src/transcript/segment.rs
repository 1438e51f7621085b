//! The stored form of a run's conversation: the [`Segment`] blobs of its
//! append-only chain, how one is encoded, and how the chain is read back
//! from its newest segment, checked to join up and to stay within its
//! [`Window`]. What is appended when is the [`super::TranscriptLog`]'s.

use serde::{Deserialize, Serialize};

use agent_kernel::host::{BlobRef, Storage, StorageError, Table};
use agent_kernel::ids::RunId;
use agent_kernel::maybe_send::MaybeSend;

use super::Window;
use crate::blob::verified_blob;
use crate::error::RunError;
use crate::message::Message;

/// Completed turns merge like a binary counter up to this level: a segment
/// covers at most 2^(MAX_LEVEL-1) turns, so a chain holds at most
/// `turns / 2^(MAX_LEVEL-1) + MAX_LEVEL + 1` history segments (plus the
/// pieces of the turn in progress) and each message is stored at most
/// `MAX_LEVEL + 1` times, whatever the run's length.
pub const MAX_SEGMENT_LEVEL: u8 = 7;

/// One stored piece of the conversation: the messages from position `start`
/// on, and the segment holding the messages before them (`None` for the
/// first). A checkpoint names the newest segment; the whole conversation is
/// the chain read back to the first. A blob holding a whole `Transcript`
/// (`{"messages": [...]}`) reads as a first segment.
///
/// Level 0 is a piece of the turn in progress (one append); when the next
/// assistant turn begins, those pieces are sealed into one level-1 segment
/// and carried into the older ones of equal level. So the newest pieces
/// are always the current turn's, and what a resume needs (the current
/// turn, [`Segment::own_turns`], [`Segment::turn_start`]) is read from them
/// alone, whatever the run's length.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev: Option<BlobRef>,
    #[serde(default)]
    pub start: u64,
    #[serde(default)]
    pub level: u8,
    pub messages: Vec<Message>,
    /// The writing run's own assistant turns up to this segment's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_turns: Option<u64>,
    /// The absolute position of the writing run's last assistant message up
    /// to this segment's end (its first own message when it has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_start: Option<u64>,
}

/// One segment of the chain, as the log remembers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Link {
    pub(super) blob: BlobRef,
    pub(super) prev: Option<BlobRef>,
    /// Where its messages begin in the log's `messages`.
    pub(super) start: usize,
    pub(super) level: u8,
}

pub(super) fn encode(segment: &Segment) -> Result<Vec<u8>, StorageError> {
    serde_json::to_vec(segment).map_err(|e| StorageError::Encode {
        table: Table::Checkpoints,
        detail: e.to_string(),
    })
}

/// Read segments from `head` back, newest first, while `more` says the
/// segment just read is not enough, checking that they join up and stay
/// within `window`; returns them oldest first with the segment before the
/// oldest (`None` when the window's start was reached).
pub(super) async fn read_chain(
    storage: &dyn Storage,
    run: &RunId,
    head: &BlobRef,
    window: Window,
    mut more: impl FnMut(&Segment) -> bool + MaybeSend,
) -> Result<(Vec<(BlobRef, Segment)>, Option<BlobRef>), RunError> {
    let inconsistent = |detail: String| RunError::Inconsistent {
        run: run.clone(),
        detail,
    };
    let mut segments: Vec<(BlobRef, Segment)> = Vec::new();
    let mut next = Some(head.clone());
    while let Some(blob) = next {
        let bytes = verified_blob(storage, &blob).await?.ok_or_else(|| {
            inconsistent(format!(
                "transcript segment {} is missing or does not match its hash",
                blob.hash
            ))
        })?;
        let segment: Segment = serde_json::from_slice(&bytes).map_err(|e| {
            inconsistent(format!(
                "transcript segment {} does not decode ({e})",
                blob.hash
            ))
        })?;
        if let Some((later_ref, later)) = segments.last() {
            let end = segment.start.saturating_add(segment.messages.len() as u64);
            if end != later.start {
                return Err(inconsistent(format!(
                    "transcript segment {} ends at message {end} but {} starts at {}",
                    blob.hash, later_ref.hash, later.start
                )));
            }
        }
        if segment.start < window.from {
            return Err(inconsistent(format!(
                "transcript segment {} starts at message {}, before its window at {}",
                blob.hash, segment.start, window.from
            )));
        }
        if segment.prev.is_none() && segment.start != window.from {
            return Err(inconsistent(format!(
                "transcript segment {} is the first but starts at message {}",
                blob.hash, segment.start
            )));
        }
        let reached_start = segment.start <= window.from;
        next = segment.prev.clone().filter(|_| !reached_start);
        let enough = !more(&segment);
        segments.push((blob, segment));
        if enough && next.is_some() {
            segments.reverse();
            return Ok((segments, next));
        }
    }
    segments.reverse();
    Ok((segments, None))
}
