//! [`RunWriter`]: the one writer of a run under its session's lease fence.
//! It commits each [`Tx`] as one fenced batch with a compare-and-set on the
//! run record, owns the accounting of active time (S4.1), keeps a change
//! deferred to the next commit, writes the run's index rows in the batch
//! that creates the run ([`super::index`]), and announces the activities
//! once they are durable.

use std::sync::Arc;
use std::time::Duration;

use agent_kernel::host::{Batch, Clock, Fence, Record, Storage, StorageError, Table};
use agent_kernel::journal::JournalRecord;
use agent_kernel::run::{Activity, ActivityKind, AgentRun, Checkpoint, RunStatus, Usage};

use super::records::decision_pending;
use super::{EventBus, RunEvent, Tx, index, latest_checkpoint};
use crate::error::RunError;

/// Writes one run's records under a lease fence. The in-memory `run` is the
/// last durable version plus the change [`RunWriter::defer`]red, if any
/// (which every later change carries until one commits).
pub struct RunWriter {
    pub storage: Arc<dyn Storage>,
    pub clock: Arc<dyn Clock>,
    pub events: EventBus,
    fence: Fence,
    pub run: AgentRun,
    run_bytes: Option<Vec<u8>>,
    next_checkpoint: u64,
    /// Monotonic instant since which the run has been `running` unaccounted.
    running_since: Option<Duration>,
    /// A change not committed yet: the next commit carries it.
    deferred: Option<Deferred>,
    /// The checkpoint [`RunWriter::open`] read, until its supervisor takes
    /// it ([`RunWriter::take_opened_checkpoint`]) instead of reading it again.
    opened_with: Option<Checkpoint>,
}

/// What a deferred change adds to the next one.
struct Deferred {
    batch: Batch,
    activities: Vec<Activity>,
    latest: Option<Checkpoint>,
    now: u64,
}

impl std::fmt::Debug for RunWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunWriter")
            .field("run", &self.run.id)
            .field("status", &self.run.status)
            .finish()
    }
}

impl RunWriter {
    /// A writer for an existing run; `run_bytes` are its stored bytes.
    pub async fn open(
        storage: Arc<dyn Storage>,
        clock: Arc<dyn Clock>,
        events: EventBus,
        fence: Fence,
        run: AgentRun,
        run_bytes: Vec<u8>,
    ) -> Result<RunWriter, StorageError> {
        let opened_with = latest_checkpoint(&*storage, &run.id).await?;
        let next_checkpoint = opened_with.as_ref().map_or(0, |c| c.seq + 1);
        let running_since = (run.status == RunStatus::Running).then(|| clock.monotonic());
        Ok(RunWriter {
            storage,
            clock,
            events,
            fence,
            run,
            run_bytes: Some(run_bytes),
            next_checkpoint,
            running_since,
            deferred: None,
            opened_with,
        })
    }

    /// The run's latest checkpoint as [`RunWriter::open`] read it, once;
    /// `None` for a writer that did not read one (or after the first take).
    pub fn take_opened_checkpoint(&mut self) -> Option<Checkpoint> {
        self.opened_with.take()
    }

    /// A writer for a run not stored yet; the first commit must create it.
    pub fn create(
        storage: Arc<dyn Storage>,
        clock: Arc<dyn Clock>,
        events: EventBus,
        fence: Fence,
        run: AgentRun,
    ) -> RunWriter {
        let running_since = Some(clock.monotonic());
        RunWriter {
            storage,
            clock,
            events,
            fence,
            run,
            run_bytes: None,
            next_checkpoint: 0,
            running_since,
            deferred: None,
            opened_with: None,
        }
    }

    pub fn fence(&self) -> &Fence {
        &self.fence
    }

    /// `usage` with the active time not yet accounted added: the time the
    /// run has been `running` since the last commit, on the monotonic clock
    /// at `mono`. The one rule of active time (S4.1: time spent `running`):
    /// every commit applies it, so time awaiting approval or input,
    /// interrupted or final is never counted, and no span is counted twice.
    fn usage_at(&self, mut usage: Usage, mono: Duration) -> Usage {
        if let Some(since) = self.running_since {
            let ms = u64::try_from(mono.saturating_sub(since).as_millis()).unwrap_or(u64::MAX);
            usage.active_ms = usage.active_ms.saturating_add(ms);
        }
        usage
    }

    /// `usage` as a commit made now would store it (active time up to now).
    pub fn live_usage(&self, usage: Usage) -> Usage {
        self.usage_at(usage, self.clock.monotonic())
    }

    /// Make the active time so far durable while the run waits (a model
    /// stream, a call in flight): a crash then loses at most the time since
    /// the last commit. Writes only the run record; nothing when the run is
    /// not `running` or a deferred change waits for its own commit.
    pub async fn flush_active_time(&mut self) -> Result<(), RunError> {
        if self.running_since.is_none() || self.deferred.is_some() {
            return Ok(());
        }
        let tx = self.begin();
        self.commit(tx).await
    }

    /// The time stamp a change begun now would carry.
    pub fn now(&self) -> u64 {
        let now = self.clock.wall_ms().max(self.run.updated_at_ms);
        now.max(self.deferred.as_ref().map_or(0, |d| d.now))
    }

    /// Start a change from the last durable state (with the deferred
    /// change, if any, already in it).
    pub fn begin(&self) -> Tx {
        let now = self.clock.wall_ms().max(self.run.updated_at_ms);
        let (batch, activities, latest) = match &self.deferred {
            Some(d) => (d.batch.clone(), d.activities.clone(), d.latest.clone()),
            None => (Batch::new(), Vec::new(), None),
        };
        Tx {
            run: self.run.clone(),
            batch,
            activities,
            now: now.max(self.deferred.as_ref().map_or(0, |d| d.now)),
            next_checkpoint: self.next_checkpoint,
            latest,
            error: None,
        }
    }

    /// Keep `tx` for the next commit instead of committing it now: it becomes
    /// the in-memory state at once and durable with the next change (a crash
    /// before then loses it, as if it had never been made). Only for changes
    /// whose loss a resume repeats harmlessly (a model response, before any
    /// call of it is dispatched).
    pub fn defer(&mut self, mut tx: Tx) -> Result<(), RunError> {
        if let Some(e) = tx.error.take() {
            return Err(e);
        }
        tx.run.updated_at_ms = tx.now;
        self.run = tx.run;
        self.next_checkpoint = tx.next_checkpoint;
        self.deferred = Some(Deferred {
            batch: tx.batch,
            activities: tx.activities,
            latest: tx.latest,
            now: tx.now,
        });
        Ok(())
    }

    /// The one transaction step of "the effect is unknown: ask the person"
    /// (S2.3), added to `tx`: unless it is there already, `record` becomes
    /// `effect_unknown` (the journal record, then its `tool_call` activity);
    /// unless one is stored already, a decision is requested (the
    /// `decision_requested` activity, then the pending request). Used by the
    /// supervisor's loop and by recovery alike. The run's status stays the
    /// caller's: the loop interrupts the run naming the call
    /// (`effect_unknown`), recovery once for every call it settles
    /// (`page_interrupted`); `tx` commits both in one fenced batch.
    pub async fn mark_effect_unknown(
        &self,
        tx: &mut Tx,
        record: &mut JournalRecord,
    ) -> Result<(), RunError> {
        tx.mark_effect_unknown(record)?;
        let pending = decision_pending(&self.run.id, record, tx.now())?;
        let stored = self
            .storage
            .get(Table::Pending, &pending.key())
            .await?
            .is_some();
        if !stored {
            tx.activity(ActivityKind::DecisionRequested {
                request: pending.id.clone(),
                call_id: record.call_id.clone(),
            });
            tx.put(&pending);
        }
        Ok(())
    }

    /// Make `tx` durable in one fenced batch; on success it becomes the
    /// in-memory state and its activities are announced.
    pub async fn commit(&mut self, mut tx: Tx) -> Result<(), RunError> {
        let mono = self.clock.monotonic();
        tx.run.usage = self.usage_at(tx.run.usage, mono);
        // Of the checkpoints this batch took, the last one is stored: the
        // run's single checkpoint record, overwritten. It carries the usage
        // of this batch, active time included.
        if let Some(mut latest) = tx.latest.take() {
            latest.usage = tx.run.usage;
            tx.put(&latest);
        }
        if let Some(e) = tx.error.take() {
            return Err(e);
        }
        tx.run.updated_at_ms = tx.now;
        let bytes = serde_json::to_vec(&tx.run).map_err(|e| StorageError::Encode {
            table: Table::Runs,
            detail: e.to_string(),
        })?;
        let key = tx.run.id.to_string();
        let mut batch = tx.batch.fenced(self.fence.clone());
        batch = match &self.run_bytes {
            Some(old) => batch.expect_value(Table::Runs, key.clone(), old.clone()),
            // The batch that creates the run indexes it.
            None => index::new_run_rows(&tx.run).into_iter().fold(
                batch.expect_absent(Table::Runs, key.clone()),
                |batch, (table, key, value)| batch.put(table, key, value),
            ),
        };
        batch = batch.put(Table::Runs, key, bytes.clone());
        self.storage.commit(batch).await?;
        self.deferred = None;
        self.running_since = (tx.run.status == RunStatus::Running).then_some(mono);
        self.run = tx.run;
        self.run_bytes = Some(bytes);
        self.next_checkpoint = tx.next_checkpoint;
        for a in tx.activities {
            self.events.emit(RunEvent::Activity(a));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{decision_request, journal_of, load_run, pending_of, run_prefix};
    use agent_kernel::budget::{Budget, BudgetDimension};
    use agent_kernel::host::StorageExt;
    use agent_kernel::host::{BlobRef, ManualClock};
    use agent_kernel::ids::SessionId;
    use agent_kernel::ids::{CallId, RunId};
    use agent_kernel::journal::CallState;
    use agent_kernel::memory::MemoryStorage;
    use agent_kernel::run::{CheckpointStage, PendingKind, StopReason, check_transition};
    use agent_kernel::run::{RunMode, Usage};

    fn run_with(status: RunStatus) -> AgentRun {
        AgentRun {
            id: RunId::new("r").unwrap(),
            session: SessionId::new("s").unwrap(),
            parent: None,
            children: Vec::new(),
            mode: RunMode::Agent,
            status,
            stop_reason: None,
            usage: Usage::default(),
            budget: Budget::fallback(),
            prompt: BlobRef::of(b"p"),
            output: None,
            plan: None,
            next_activity: 0,
            status_history: vec![status],
            created_at_ms: 0,
            updated_at_ms: 0,
        }
    }

    /// A writer for a `running` run `r` of session `s`, fenced by a fresh
    /// lease on `storage`.
    async fn leased_writer(storage: &Arc<dyn Storage>, clock: &Arc<dyn Clock>) -> RunWriter {
        let session = SessionId::new("s").unwrap();
        let owner = agent_kernel::ids::OwnerId::new("o").unwrap();
        let lease = storage
            .try_acquire_lease(&session, &owner, 0, 60_000)
            .await
            .unwrap();
        let fence = Fence {
            session,
            epoch: lease.epoch,
        };
        RunWriter::create(
            storage.clone(),
            clock.clone(),
            EventBus::default(),
            fence,
            run_with(RunStatus::Running),
        )
    }

    fn reasons() -> Vec<Option<StopReason>> {
        vec![
            None,
            Some(StopReason::Completed),
            Some(StopReason::UserStopped),
            Some(StopReason::BudgetExhausted {
                dimension: BudgetDimension::Tokens,
            }),
            Some(StopReason::Offline),
            Some(StopReason::PageInterrupted),
            Some(StopReason::EffectUnknown {
                call_id: CallId::new("c").unwrap(),
            }),
            Some(StopReason::RuntimeError {
                actor: "a".into(),
                message: "m".into(),
            }),
        ]
    }

    /// S1.2: every transition outside the table (and every reason a status
    /// does not admit) is refused by `Tx::status`, and nothing is recorded.
    #[test]
    fn s1_2_every_illegal_transition_is_refused() {
        let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(0));
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        let fence = Fence {
            session: SessionId::new("s").unwrap(),
            epoch: 1,
        };
        let mut refused = 0;
        let mut allowed = 0;
        for from in RunStatus::ALL {
            for to in RunStatus::ALL {
                for reason in reasons() {
                    let writer = RunWriter::create(
                        storage.clone(),
                        clock.clone(),
                        EventBus::default(),
                        fence.clone(),
                        run_with(from),
                    );
                    let mut tx = writer.begin();
                    let legal = check_transition(from, to, reason.as_ref()).is_ok();
                    let result = tx.status(to, reason.clone());
                    assert_eq!(result.is_ok(), legal, "{from} -> {to} with {reason:?}");
                    if legal {
                        allowed += 1;
                        assert_eq!(tx.run.status_history, vec![from, to]);
                    } else {
                        refused += 1;
                        assert_eq!(tx.run.status, from);
                        assert!(tx.activities.is_empty());
                    }
                }
            }
        }
        assert!(
            refused > 300 && allowed > 20,
            "{refused} refused, {allowed} allowed"
        );
        // The table itself: final statuses never move; awaiting never completes directly.
        for to in RunStatus::ALL {
            for from in [
                RunStatus::Completed,
                RunStatus::Failed,
                RunStatus::Cancelled,
            ] {
                assert!(!from.can_transition_to(to));
            }
        }
        assert!(!RunStatus::AwaitingApproval.can_transition_to(RunStatus::Completed));
        assert!(!RunStatus::Interrupted.can_transition_to(RunStatus::AwaitingInput));
    }

    /// A run keeps one checkpoint record, overwritten by each batch that
    /// takes one (the last of the batch); `seq` still counts every
    /// checkpoint, and loading reads that one record.
    #[test]
    fn a_run_keeps_one_checkpoint_the_latest() {
        let exec = agent_kernel::memory::SimExecutor::new();
        let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(0));
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        let fence = Fence {
            session: SessionId::new("s").unwrap(),
            epoch: 1,
        };
        exec.block_on(async {
            let id = RunId::new("r").unwrap();
            let owner = agent_kernel::ids::OwnerId::new("o").unwrap();
            let lease = storage
                .try_acquire_lease(&fence.session, &owner, 0, 60_000)
                .await
                .unwrap();
            let fence = Fence {
                session: fence.session.clone(),
                epoch: lease.epoch,
            };
            assert_eq!(latest_checkpoint(&*storage, &id).await.unwrap(), None);
            let mut writer = RunWriter::create(
                storage.clone(),
                clock.clone(),
                EventBus::default(),
                fence.clone(),
                run_with(RunStatus::Running),
            );
            for round in 1..=3u64 {
                let mut tx = writer.begin();
                tx.checkpoint(
                    CheckpointStage::AfterModelResponse { round },
                    BlobRef::of(b"a"),
                );
                // Two checkpoints in one batch: the later one is the latest.
                tx.checkpoint(
                    CheckpointStage::BeforeModelRequest { round: round + 1 },
                    BlobRef::of(b"b"),
                );
                writer.commit(tx).await.unwrap();
            }
            let latest = latest_checkpoint(&*storage, &id).await.unwrap().unwrap();
            assert_eq!(latest.seq, 5);
            assert_eq!(
                latest.stage,
                CheckpointStage::BeforeModelRequest { round: 4 }
            );
            let all: Vec<Checkpoint> = storage.scan_records(&run_prefix(&id)).await.unwrap();
            assert_eq!(all, vec![latest], "one record per run, not one per stage");
            // A batch without a checkpoint keeps the one stored.
            writer.commit(writer.begin()).await.unwrap();
            assert_eq!(
                latest_checkpoint(&*storage, &id)
                    .await
                    .unwrap()
                    .map(|c| c.seq),
                Some(5)
            );
        })
        .unwrap();
    }

    /// A deferred change is in memory at once, durable only with the next
    /// commit (one batch, activities still gap-free), and lost with the
    /// writer if none follows.
    #[test]
    fn deferred_change_rides_with_the_next_commit() {
        let exec = agent_kernel::memory::SimExecutor::new();
        let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(0));
        let memory = Arc::new(MemoryStorage::new());
        let storage: Arc<dyn Storage> = memory.clone();
        exec.block_on(async {
            let id = RunId::new("r").unwrap();
            let mut writer = leased_writer(&storage, &clock).await;
            writer.commit(writer.begin()).await.unwrap();
            let commits = memory.commit_count();
            let mut tx = writer.begin();
            tx.activity(ActivityKind::ModelRequest { round: 1 });
            tx.checkpoint(
                CheckpointStage::AfterModelResponse { round: 1 },
                BlobRef::of(b"a"),
            );
            writer.defer(tx).unwrap();
            assert_eq!(memory.commit_count(), commits);
            assert_eq!(writer.run.next_activity, 1);
            assert_eq!(latest_checkpoint(&*storage, &id).await.unwrap(), None);
            let (stored, _) = load_run(&*storage, &id).await.unwrap();
            assert_eq!(stored.next_activity, 0);

            let mut tx = writer.begin();
            tx.activity(ActivityKind::ModelRequest { round: 2 });
            writer.commit(tx).await.unwrap();
            assert_eq!(memory.commit_count(), commits + 1);
            let activities: Vec<Activity> = storage.scan_records(&run_prefix(&id)).await.unwrap();
            assert_eq!(
                activities.iter().map(|a| a.seq).collect::<Vec<_>>(),
                vec![0, 1]
            );
            let latest = latest_checkpoint(&*storage, &id).await.unwrap().unwrap();
            assert_eq!(
                latest.stage,
                CheckpointStage::AfterModelResponse { round: 1 }
            );

            // Deferred and never followed: nothing of it is stored.
            let mut tx = writer.begin();
            tx.activity(ActivityKind::ModelRequest { round: 3 });
            writer.defer(tx).unwrap();
            drop(writer);
            let (stored, _) = load_run(&*storage, &id).await.unwrap();
            assert_eq!(stored.next_activity, 2);
        })
        .unwrap();
    }

    fn record_in(state: CallState) -> JournalRecord {
        JournalRecord {
            run: RunId::new("r").unwrap(),
            call_id: CallId::new("t1-c0").unwrap(),
            tool: "send_mail".into(),
            fingerprint: agent_capabilities::Fingerprint::of(&"send_mail").unwrap(),
            args: BlobRef::of(b"{}"),
            effects: [agent_capabilities::EffectClass::WriteExternal].into(),
            idempotency: agent_capabilities::Idempotency::NonIdempotent,
            attempt: 1,
            state,
            idempotency_key: "k".into(),
            target_summary: None,
            result: None,
            receipts: Vec::new(),
            error: None,
            updated_at_ms: 0,
        }
    }

    /// S2.3: "the effect is unknown, ask the person" is one step, owned
    /// here and used by the loop and by recovery. From `running` it adds,
    /// in this order, the `effect_unknown` record, its `tool_call`
    /// activity, the `decision_requested` activity and the pending
    /// decision, all in the caller's one batch; on a record already marked
    /// whose decision is stored it adds nothing; a record marked whose
    /// decision is missing gets only the decision; a settled record is
    /// refused as inconsistent.
    #[test]
    fn s2_3_mark_effect_unknown_is_one_step_and_never_doubles_a_decision() {
        let exec = agent_kernel::memory::SimExecutor::new();
        let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(5));
        let memory = Arc::new(MemoryStorage::new());
        let storage: Arc<dyn Storage> = memory.clone();
        exec.block_on(async {
            let id = RunId::new("r").unwrap();
            let mut writer = leased_writer(&storage, &clock).await;
            let mut record = record_in(CallState::Running);
            let mut tx = writer.begin();
            tx.put(&record);
            writer.commit(tx).await.unwrap();
            let commits = memory.commit_count();

            let mut tx = writer.begin();
            writer
                .mark_effect_unknown(&mut tx, &mut record)
                .await
                .unwrap();
            let call_id = record.call_id.clone();
            tx.status(
                RunStatus::Interrupted,
                Some(StopReason::EffectUnknown {
                    call_id: call_id.clone(),
                }),
            )
            .unwrap();
            writer.commit(tx).await.unwrap();
            assert_eq!(memory.commit_count(), commits + 1, "one batch");
            assert_eq!(record.state, CallState::EffectUnknown);
            assert_eq!(
                journal_of(&*storage, &id).await.unwrap(),
                vec![record.clone()]
            );
            let activities: Vec<Activity> = storage.scan_records(&run_prefix(&id)).await.unwrap();
            let request = decision_request(&call_id).unwrap();
            assert_eq!(
                activities.into_iter().map(|a| a.kind).collect::<Vec<_>>(),
                vec![
                    ActivityKind::ToolCall {
                        call_id: call_id.clone(),
                        tool: "send_mail".into(),
                        state: CallState::EffectUnknown,
                    },
                    ActivityKind::DecisionRequested {
                        request: request.clone(),
                        call_id: call_id.clone(),
                    },
                    ActivityKind::StatusChanged {
                        from: RunStatus::Running,
                        to: RunStatus::Interrupted,
                        reason: Some(StopReason::EffectUnknown {
                            call_id: call_id.clone(),
                        }),
                    },
                ]
            );
            let pending = pending_of(&*storage, &id).await.unwrap();
            assert_eq!(pending.len(), 1);
            assert_eq!(pending[0].id, request);
            assert_eq!(
                pending[0].kind,
                PendingKind::Decision {
                    call_id: call_id.clone(),
                    tool: "send_mail".into(),
                }
            );
            assert!(!pending[0].presented);

            // Again (a replay of the blocked call): nothing to add.
            let mut tx = writer.begin();
            let before = record.clone();
            writer
                .mark_effect_unknown(&mut tx, &mut record)
                .await
                .unwrap();
            assert_eq!(record, before);
            assert!(tx.activities.is_empty());
            assert_eq!(tx.run.next_activity, writer.run.next_activity);

            // Marked, but its decision is gone: only the decision is asked again.
            let mut tx = writer.begin();
            tx.delete(Table::Pending, pending[0].key());
            writer.commit(tx).await.unwrap();
            let mut tx = writer.begin();
            writer
                .mark_effect_unknown(&mut tx, &mut record)
                .await
                .unwrap();
            assert_eq!(
                tx.activities.iter().map(|a| &a.kind).collect::<Vec<_>>(),
                vec![&ActivityKind::DecisionRequested {
                    request: request.clone(),
                    call_id: call_id.clone(),
                }]
            );
            writer.commit(tx).await.unwrap();
            assert_eq!(pending_of(&*storage, &id).await.unwrap().len(), 1);

            // A settled call is never marked: a typed error, nothing added.
            let mut failed = record_in(CallState::Failed);
            let mut tx = writer.begin();
            let err = writer
                .mark_effect_unknown(&mut tx, &mut failed)
                .await
                .unwrap_err();
            assert!(matches!(err, RunError::Inconsistent { .. }), "{err:?}");
            assert_eq!(failed.state, CallState::Failed);
            assert!(tx.activities.is_empty());
        })
        .unwrap();
    }

    /// The batch that creates a run indexes it (its session's row and its
    /// live row) with no help from the caller, the one that makes it final
    /// removes its live row, and the listing every host shows reads the
    /// runs oldest first, ties in id order, all or one session's.
    #[test]
    fn the_writer_owns_the_index_rows_and_the_listing_reads_them() {
        let exec = agent_kernel::memory::SimExecutor::new();
        let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(0));
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        exec.block_on(async {
            let owner = agent_kernel::ids::OwnerId::new("o").unwrap();
            let mut created = Vec::new();
            for (id, session, at) in [("r-b", "s", 5), ("r-a", "s", 5), ("r-0", "t", 1)] {
                let session = SessionId::new(session).unwrap();
                let lease = storage
                    .try_acquire_lease(&session, &owner, 0, 60_000)
                    .await
                    .unwrap();
                let mut run = run_with(RunStatus::Running);
                run.id = RunId::new(id).unwrap();
                run.session = session.clone();
                run.created_at_ms = at;
                let mut writer = RunWriter::create(
                    storage.clone(),
                    clock.clone(),
                    EventBus::default(),
                    Fence {
                        session,
                        epoch: lease.epoch,
                    },
                    run,
                );
                let tx = writer.begin();
                writer.commit(tx).await.unwrap();
                created.push(writer);
            }
            let ids = |runs: Vec<AgentRun>| -> Vec<String> {
                runs.into_iter().map(|r| r.id.to_string()).collect()
            };
            let s = SessionId::new("s").unwrap();
            let of_s = super::index::runs_of_session(&*storage, &s).await.unwrap();
            assert_eq!(ids(of_s), ["r-a", "r-b"]);
            let live = super::index::live_runs(&*storage).await.unwrap();
            assert_eq!(ids(live).len(), 3);
            let all = super::index::list_runs(&*storage, None).await.unwrap();
            assert_eq!(ids(all), ["r-0", "r-a", "r-b"]);
            let listed = super::index::list_runs(&*storage, Some(&s)).await.unwrap();
            assert_eq!(ids(listed), ["r-a", "r-b"]);

            let writer = &mut created[0];
            let mut tx = writer.begin();
            tx.status(RunStatus::Completed, Some(StopReason::Completed))
                .unwrap();
            writer.commit(tx).await.unwrap();
            let live = super::index::live_runs(&*storage).await.unwrap();
            assert_eq!(ids(live), ["r-0", "r-a"]);
            assert!(
                storage
                    .get(
                        Table::Meta,
                        &super::index::live_key(&RunId::new("r-b").unwrap())
                    )
                    .await
                    .unwrap()
                    .is_none()
            );
        })
        .unwrap();
    }
}
