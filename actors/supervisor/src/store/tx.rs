//! [`Tx`]: one pending change to a run, committed by its
//! [`super::RunWriter`]: the new run record, the records to put or delete,
//! blobs, the activities it appends (numbered gap-free, time-stamped
//! monotonically), its checkpoint, and the steps of a call's journal
//! record (S2), each written here once.

use serde::Serialize;

use agent_kernel::host::{Batch, BlobRef, Record, StorageError, Table};
use agent_kernel::journal::{CallError, CallState, JournalRecord, idempotency_key};
use agent_kernel::protocol::{PreparedCall, ToolResult};
use agent_kernel::run::{
    Activity, ActivityKind, AgentRun, Checkpoint, CheckpointStage, Evidence, RunStatus, StopReason,
    check_transition,
};

use crate::error::RunError;

/// One pending change to a run: the new run record, the records to put or
/// delete, and the activities to append.
pub struct Tx {
    pub run: AgentRun,
    pub(super) batch: Batch,
    pub(super) activities: Vec<Activity>,
    pub(super) now: u64,
    pub(super) next_checkpoint: u64,
    /// The last checkpoint this change writes (copied at commit).
    pub(super) latest: Option<Checkpoint>,
    pub(super) error: Option<RunError>,
}

impl Tx {
    /// The (monotonic) time stamp of this change.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Append an activity with the next sequence number.
    pub fn activity(&mut self, kind: ActivityKind) {
        let activity = Activity {
            run: self.run.id.clone(),
            seq: self.run.next_activity,
            at_ms: self.now,
            kind,
        };
        self.run.next_activity += 1;
        self.put(&activity);
        self.activities.push(activity);
    }

    /// Put a typed record.
    pub fn put<R: Record>(&mut self, record: &R) {
        match serde_json::to_vec(record) {
            Ok(bytes) => {
                let batch = std::mem::take(&mut self.batch);
                self.batch = batch.put(R::TABLE, record.key(), bytes);
            }
            Err(e) => {
                self.error
                    .get_or_insert(RunError::Storage(StorageError::Encode {
                        table: R::TABLE,
                        detail: e.to_string(),
                    }));
            }
        }
    }

    /// Store `bytes` as a blob in this change: durable with the records
    /// that name it, in the same commit.
    pub fn blob(&mut self, bytes: Vec<u8>) -> BlobRef {
        self.batch.add_blob(bytes)
    }

    /// [`Tx::blob`] of `value` as JSON.
    pub fn json_blob<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<BlobRef, RunError> {
        let bytes = serde_json::to_vec(value).map_err(|e| StorageError::Encode {
            table: Table::Meta,
            detail: e.to_string(),
        })?;
        Ok(self.blob(bytes))
    }

    pub fn delete(&mut self, table: Table, key: String) {
        let batch = std::mem::take(&mut self.batch);
        self.batch = batch.delete(table, key);
    }

    /// Change status, checked against the transition table, with an activity.
    pub fn status(&mut self, to: RunStatus, reason: Option<StopReason>) -> Result<(), RunError> {
        let from = self.run.status;
        check_transition(from, to, reason.as_ref())?;
        self.run.status = to;
        self.run.stop_reason = reason.clone();
        self.run.status_history.push(to);
        if to.is_final() && !from.is_final() {
            let key = super::index::live_key(&self.run.id);
            self.delete(Table::Meta, key);
        }
        self.activity(ActivityKind::StatusChanged { from, to, reason });
        Ok(())
    }

    /// Write a checkpoint of the conversation (its blob stored already or
    /// in this change).
    pub fn checkpoint(&mut self, stage: CheckpointStage, transcript: BlobRef) {
        let cp = Checkpoint {
            run: self.run.id.clone(),
            seq: self.next_checkpoint,
            stage,
            transcript,
            usage: self.run.usage,
            at_ms: self.now,
        };
        self.next_checkpoint += 1;
        self.latest = Some(cp);
    }

    /// Record the evidence of a result.
    pub fn evidence(&mut self, evidence: Evidence) {
        self.put(&evidence);
    }

    // ------------------------------------------------ journal transitions
    //
    // Each step of a call's journal record (S2) is written here once: the
    // record advanced, put in this change, and announced by its `tool_call`
    // activity where the step has one.

    /// Advance `record` to `to` at this change's time; an illegal move is
    /// the run's inconsistency.
    fn advance(&self, record: &mut JournalRecord, to: CallState) -> Result<(), RunError> {
        record
            .advance(to, self.now)
            .map_err(|e| RunError::Inconsistent {
                run: self.run.id.clone(),
                detail: e.to_string(),
            })
    }

    /// Announce a call's record in its present state: its `tool_call` activity.
    fn call_activity(&mut self, record: &JournalRecord) {
        self.activity(ActivityKind::ToolCall {
            call_id: record.call_id.clone(),
            tool: record.tool.clone(),
            state: record.state,
        });
    }

    /// A fresh `prepared` record for a prepared call, with its target
    /// summary; its arguments blob goes in this change (the record itself
    /// is put by the step that follows).
    pub fn new_record(&mut self, prepared: &PreparedCall) -> Result<JournalRecord, RunError> {
        let draft = &prepared.draft;
        let canonical = agent_capabilities::canonical_json(&draft.arguments).map_err(|e| {
            RunError::Inconsistent {
                run: self.run.id.clone(),
                detail: format!("arguments are not canonical JSON ({e})"),
            }
        })?;
        let args = self.blob(canonical.into_bytes());
        Ok(JournalRecord {
            run: self.run.id.clone(),
            call_id: draft.call_id.clone(),
            tool: draft.tool.clone(),
            fingerprint: draft.fingerprint.clone(),
            args,
            effects: draft.effects.clone(),
            idempotency: draft.idempotency,
            attempt: draft.attempt.max(1),
            state: CallState::Prepared,
            idempotency_key: idempotency_key(&self.run.id, &draft.call_id),
            target_summary: Some(prepared.target_summary.clone()),
            result: None,
            receipts: Vec::new(),
            error: None,
            updated_at_ms: self.now,
        })
    }

    /// Journal a call that waits at `prepared` (for an approval or an
    /// answer). A `fresh` call is counted (S4) and announced first.
    pub fn put_prepared(&mut self, record: &JournalRecord, fresh: bool) {
        if fresh {
            self.run.usage.tool_calls += 1;
            self.call_activity(record);
        }
        self.put(record);
    }

    /// Make `record` `running` before its dispatch: a record past `prepared`
    /// starts its next attempt; a `fresh` call is counted (S4).
    pub fn mark_running(
        &mut self,
        record: &mut JournalRecord,
        fresh: bool,
    ) -> Result<(), RunError> {
        if record.state != CallState::Prepared {
            record.attempt = record.attempt.saturating_add(1);
        }
        self.advance(record, CallState::Running)?;
        if fresh {
            self.run.usage.tool_calls += 1;
        }
        self.put(&*record);
        self.call_activity(record);
        Ok(())
    }

    /// Settle `record` with `result` (stored as `result_blob`): `committed`
    /// (through `running` when it never ran, as the supervisor's own tools)
    /// with its receipts, or `failed` with its code. The activity is the
    /// outcome's to append, with its evidence.
    pub fn settle(
        &mut self,
        record: &mut JournalRecord,
        result: &ToolResult,
        result_blob: BlobRef,
    ) -> Result<(), RunError> {
        match result {
            ToolResult::Success(s) => {
                if record.state == CallState::Prepared {
                    self.advance(record, CallState::Running)?;
                }
                self.advance(record, CallState::Committed)?;
                record.receipts = s.receipts.clone();
            }
            ToolResult::Error(f) => {
                self.advance(record, CallState::Failed)?;
                record.error = Some(CallError {
                    code: f.code.clone(),
                    retryable: f.retryable,
                });
            }
        }
        record.result = Some(result_blob);
        self.put(&*record);
        Ok(())
    }

    /// Settle a call that will not finish (its run ends): `failed` with
    /// `code` when repeating it is safe, else `effect_unknown`.
    pub fn settle_unfinished(
        &mut self,
        record: &mut JournalRecord,
        code: &str,
    ) -> Result<(), RunError> {
        if record.retry_is_safe() {
            self.advance(record, CallState::Failed)?;
            record.error = Some(CallError {
                code: code.into(),
                retryable: true,
            });
            self.put(&*record);
            self.call_activity(record);
            Ok(())
        } else {
            self.mark_effect_unknown(record)
        }
    }

    /// Move `record` to `effect_unknown` (from `running`, or from `committed`
    /// when its result no longer verifies and the work is unsafe to repeat),
    /// put it and announce it. A record already there stays as it is and
    /// adds nothing. Asking the person to decide is
    /// [`super::RunWriter::mark_effect_unknown`]'s.
    pub fn mark_effect_unknown(&mut self, record: &mut JournalRecord) -> Result<(), RunError> {
        if record.state == CallState::EffectUnknown {
            return Ok(());
        }
        self.advance(record, CallState::EffectUnknown)?;
        self.put(&*record);
        self.call_activity(record);
        Ok(())
    }
}
