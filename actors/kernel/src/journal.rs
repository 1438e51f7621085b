//! The journal record of one tool call (SPEC S2), its state machine, the
//! prepare-twice rule, and the replay decision applied on resume.

use serde::{Deserialize, Serialize};

use agent_capabilities::{EffectClass, EffectSet, Fingerprint, Idempotency, is_read_only};

use crate::host::storage::{BlobRef, Record, Table};
use crate::ids::{CallId, RunId};
use crate::protocol::EffectReceipt;

/// `prepared` → `running` → `committed` | `failed` | `effect_unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallState {
    Prepared,
    Running,
    Committed,
    Failed,
    EffectUnknown,
}

impl CallState {
    /// Legal journal moves. `effect_unknown` → `running` is the person's
    /// "retry anyway"; `effect_unknown` → `committed` is "mark as done";
    /// `running` → `running` is a retry with a higher attempt. `committed` →
    /// `running` / `effect_unknown` happen only on resume, when a committed
    /// result no longer verifies (see [`replay_decision`]).
    pub fn can_advance_to(self, to: CallState) -> bool {
        use CallState::*;
        matches!(
            (self, to),
            (Prepared, Running)
                | (Prepared, Failed)
                | (Running, Running)
                | (Running, Committed)
                | (Running, Failed)
                | (Running, EffectUnknown)
                | (Committed, Running)
                | (Committed, EffectUnknown)
                | (EffectUnknown, Running)
                | (EffectUnknown, Committed)
                | (EffectUnknown, Failed)
        )
    }

    /// `committed`, `failed`: nothing more will happen to the call by itself.
    pub fn is_settled(self) -> bool {
        matches!(self, CallState::Committed | CallState::Failed)
    }
}

/// The stable error of a failed call (no message text from tools: codes only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallError {
    pub code: String,
    pub retryable: bool,
}

/// One tool call in the journal. Hashes and references only (S2.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalRecord {
    pub run: RunId,
    pub call_id: CallId,
    pub tool: String,
    pub fingerprint: Fingerprint,
    /// SHA-256 of the canonical arguments; the arguments themselves are a blob.
    pub args: BlobRef,
    pub effects: EffectSet,
    pub idempotency: Idempotency,
    pub attempt: u32,
    pub state: CallState,
    /// Derived from the call id; sent with idempotent external writes, the same on every retry.
    pub idempotency_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<BlobRef>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub receipts: Vec<EffectReceipt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<CallError>,
    pub updated_at_ms: u64,
}

impl JournalRecord {
    pub fn key_for(run: &RunId, call: &CallId) -> String {
        format!("{run}/{call}")
    }

    /// Read-only work, or work declared idempotent that has no external or
    /// destructive effect: the only work a resume may retry by itself.
    pub fn retry_is_safe(&self) -> bool {
        if is_read_only(&self.effects) {
            return true;
        }
        let external_or_destructive = self.effects.iter().any(|e| {
            matches!(
                e,
                EffectClass::WriteExternal | EffectClass::CredentialExposure
            ) || e.is_destructive()
        });
        self.idempotency == Idempotency::Idempotent && !external_or_destructive
    }

    /// S2.1: preparing the same call id again is a no-op when it names the same
    /// tool, fingerprint and argument hash, and an error otherwise.
    pub fn check_prepare_again(
        &self,
        tool: &str,
        fingerprint: &Fingerprint,
        args_hash: &str,
    ) -> Result<(), JournalError> {
        if self.tool != tool || &self.fingerprint != fingerprint || self.args.hash != args_hash {
            return Err(JournalError::PrepareConflict {
                call_id: self.call_id.clone(),
                stored_tool: self.tool.clone(),
                tool: tool.to_owned(),
            });
        }
        Ok(())
    }

    /// Move to `to`, refusing illegal moves.
    pub fn advance(&mut self, to: CallState, now_ms: u64) -> Result<(), JournalError> {
        if !self.state.can_advance_to(to) {
            return Err(JournalError::IllegalMove {
                call_id: self.call_id.clone(),
                from: self.state,
                to,
            });
        }
        self.state = to;
        self.updated_at_ms = now_ms;
        Ok(())
    }
}

impl Record for JournalRecord {
    const TABLE: Table = Table::Journal;
    fn key(&self) -> String {
        JournalRecord::key_for(&self.run, &self.call_id)
    }
}

/// A journal rule was broken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JournalError {
    #[error(
        "call {call_id} was already prepared for tool {stored_tool:?} with other arguments or definition; refusing to prepare it for {tool:?}"
    )]
    PrepareConflict {
        call_id: CallId,
        stored_tool: String,
        tool: String,
    },
    #[error("call {call_id} cannot move from {from:?} to {to:?}")]
    IllegalMove {
        call_id: CallId,
        from: CallState,
        to: CallState,
    },
}

/// What a resume does with one journal record (DESIGN.md, "On resume").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayDecision {
    /// `committed` and its result still verifies: hand the stored result to the model.
    Reuse,
    /// `failed`: the model already has (or gets again) the stored error.
    KeepFailed,
    /// `prepared` only: never dispatched, so dispatch it now as the same attempt.
    Dispatch,
    /// In flight, read-only or safely idempotent: run again with `attempt + 1`.
    Retry { attempt: u32 },
    /// In flight and unsafe to repeat, or committed with a result that no
    /// longer verifies and unsafe to repeat: record `effect_unknown` and ask.
    MarkEffectUnknown,
    /// Already `effect_unknown`: blocked until the person decides.
    Blocked,
}

/// Decide what to do with `record` on resume. `result_verifies` says whether a
/// committed result's blob is present and matches its hash.
pub fn replay_decision(record: &JournalRecord, result_verifies: bool) -> ReplayDecision {
    match record.state {
        CallState::Committed if result_verifies => ReplayDecision::Reuse,
        CallState::Committed | CallState::Running => {
            if record.retry_is_safe() {
                ReplayDecision::Retry {
                    attempt: record.attempt.saturating_add(1),
                }
            } else {
                ReplayDecision::MarkEffectUnknown
            }
        }
        CallState::Failed => ReplayDecision::KeepFailed,
        CallState::Prepared => ReplayDecision::Dispatch,
        CallState::EffectUnknown => ReplayDecision::Blocked,
    }
}
