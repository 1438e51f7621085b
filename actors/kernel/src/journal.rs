//! The journal record of one tool call (SPEC S2), its state machine, the
//! prepare-twice rule, the replay decision applied on resume, and the call's
//! idempotency key ([`idempotency_key`], the one place it is derived).

use serde::{Deserialize, Serialize};

use agent_capabilities::{
    EffectClass, EffectSet, Fingerprint, Idempotency, is_read_only, sha256_hex,
};

use crate::host::storage::{BlobRef, Record, Table};
use crate::ids::{CallId, RunId};
use crate::protocol::EffectReceipt;

/// The idempotency key of one tool call: what an idempotent write sends its
/// service (a plugin's `Idempotency-Key` header) so that attempts of the same
/// call are recognised as one (S2.3: retries are limited to read-only or
/// explicitly idempotent work and an uncertain side effect is never replayed
/// automatically, so a retry of one is the person's choice; S5.3: every
/// invocation carries its idempotency).
///
/// Derived from the run id and the call id only. Those two name the call
/// (S2.1: the same call id in a run is the same call), so every attempt of
/// it, a person-chosen retry of an `effect_unknown` write and a resume after
/// a restart included, gets the same key; another call, or the same call id
/// in another run, gets another. The attempt number, the clock and the
/// arguments are not inputs (a retry changes the attempt; the arguments of a
/// call id cannot change, S2.1).
///
/// The key is the first 128 bits of a SHA-256 over a domain tag and both ids,
/// in hex: a fixed 32 characters safe in any header, that shows a third-party
/// service neither the run id nor the model's call id. `/` separates the ids
/// and is outside their alphabet, so no two (run, call) pairs share an input.
pub fn idempotency_key(run: &RunId, call: &CallId) -> String {
    let mut key = sha256_hex(format!("agent-kernel/idempotency-key/{run}/{call}").as_bytes());
    key.truncate(IDEMPOTENCY_KEY_LEN);
    key
}

/// Characters in an [`idempotency_key`]: 32 hex digits, 128 bits.
pub const IDEMPOTENCY_KEY_LEN: usize = 32;

/// `prepared` → `running` → `committed` | `failed` | `effect_unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
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
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct CallError {
    pub code: String,
    pub retryable: bool,
}

/// One tool call in the journal. Hashes and references only (S2.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
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
    /// [`idempotency_key`] of the run and call id, fixed when the record is
    /// first written; sent with idempotent writes, the same on every retry.
    pub idempotency_key: String,
    /// What the call acts on, in the person's words (a URL's origin, a
    /// workspace file), derived from its arguments by the tool's target
    /// rule and journaled with the record before anything is dispatched, so
    /// an automatic external write is shown as clearly as an approved one.
    /// `None` for the supervisor's own tools and records older than it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_summary: Option<String>,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn run(s: &str) -> RunId {
        RunId::new(s).unwrap()
    }
    fn call(s: &str) -> CallId {
        CallId::new(s).unwrap()
    }

    #[test]
    fn idempotency_key_is_the_same_for_every_attempt_of_a_call() {
        // S2.3: a person-chosen retry is the same run and call id again.
        let first = idempotency_key(&run("run-1"), &call("call-1"));
        let retry = idempotency_key(&run("run-1"), &call("call-1"));
        assert_eq!(first, retry);
    }

    #[test]
    fn idempotency_key_differs_between_calls_and_runs() {
        let key = idempotency_key(&run("run-1"), &call("call-1"));
        assert_ne!(key, idempotency_key(&run("run-1"), &call("call-2")));
        assert_ne!(key, idempotency_key(&run("run-2"), &call("call-1")));
        // Ids may hold `:` and `.`; moving text across the run/call boundary
        // is another call (a `{run}:{call}` key would collide here).
        assert_ne!(
            idempotency_key(&run("a:b"), &call("c")),
            idempotency_key(&run("a"), &call("b:c"))
        );
        assert_ne!(
            idempotency_key(&run("a"), &call("b")),
            idempotency_key(&run("b"), &call("a"))
        );
    }

    #[test]
    fn idempotency_key_is_fixed_length_hex_and_shows_neither_id() {
        let longest = "r".repeat(128);
        for (r, c) in [
            ("r", "c"),
            ("run-7f3a9c21e5d04b1a", "call_Xy.9:z-_"),
            (longest.as_str(), longest.as_str()),
        ] {
            let key = idempotency_key(&run(r), &call(c));
            assert_eq!(key.len(), IDEMPOTENCY_KEY_LEN, "{key}");
            assert!(
                key.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
                "{key}"
            );
        }
        // Neither id reaches the service (ids with non-hex letters, so the
        // check can fail only by the key holding them).
        let (r, c) = ("run-7f3a9c21e5d04b1a", "call_Xy.9:z-_");
        let key = idempotency_key(&run(r), &call(c));
        assert!(!key.contains(r) && !key.contains(c), "{key}");
        assert!(!key.contains("7f3a9c21e5d04b1a"), "{key}");
    }

    #[test]
    fn idempotency_key_is_stable_across_builds() {
        // A key already sent must match after an upgrade: this pins the
        // derivation (computed outside Rust: the first 32 hex digits of
        // SHA-256 of "agent-kernel/idempotency-key/run-1/call-1").
        assert_eq!(
            idempotency_key(&run("run-1"), &call("call-1")),
            "bfd0454266e07101e77f7eaa44e3d73f"
        );
    }
}
