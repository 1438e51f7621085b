//! How a run ends before its own course, and how it is interrupted: a
//! person's stop or a budget run out ([`Supervisor::end_early`], with a call
//! in flight given the stop grace first, [`Supervisor::end_in_flight`]), the
//! tools actor lost mid-dispatch, a runtime failure, and an interruption
//! (offline, page hidden, an executor lost) that waits for a resume. The output so far stays
//! readable.

use agent_kernel::actor::ActorError;
use agent_kernel::budget::BudgetDimension;
use agent_kernel::host::{Table, timeout};
use agent_kernel::journal::{CallState, JournalRecord};
use agent_kernel::maybe_send::BoxFuture;
use agent_kernel::protocol::ToolResult;
use agent_kernel::run::{ActivityKind, CheckpointStage, RunStatus, StopReason};

use super::{Answer, Ending, Interruption, Supervisor, pending_key};
use crate::error::RunError;
use crate::message::{AssistantToolCall, Message};
use crate::store::{Tx, pending_of};

impl Supervisor {
    /// The latest assistant text becomes the run's readable output.
    pub(super) async fn set_output_so_far(&mut self, tx: &mut Tx) -> Result<(), RunError> {
        if tx.run.output.is_some() {
            return Ok(());
        }
        // The latest text may be older than what a resume read.
        let run = self.id();
        self.transcript
            .complete(&*self.ctx.host.storage, &run)
            .await?;
        let last = self
            .transcript
            .messages()
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::Assistant {
                    content: Some(text),
                    ..
                } if !text.is_empty() => Some(text.clone()),
                _ => None,
            });
        if let Some(text) = last {
            tx.run.output = Some(tx.blob(text.into_bytes()));
        }
        Ok(())
    }

    /// End the run `failed` / `budget_exhausted` naming `dimension` (S4.4).
    pub(super) async fn exhaust(&mut self, dimension: BudgetDimension) -> Result<(), RunError> {
        tracing::info!(%dimension, "budget exhausted");
        self.end_early(Ending::Budget(dimension), None).await
    }

    pub(super) async fn fail_runtime(
        &mut self,
        actor: &str,
        message: &str,
    ) -> Result<(), RunError> {
        let mut tx = self.writer.begin();
        self.set_output_so_far(&mut tx).await?;
        tx.status(
            RunStatus::Failed,
            Some(StopReason::RuntimeError {
                actor: actor.to_owned(),
                message: message.to_owned(),
            }),
        )?;
        self.writer.commit(tx).await
    }

    /// Interrupt the run (S2.5). A call in flight stays `running`: Resume
    /// settles it by the replay rule (a call safe to repeat runs again, any
    /// other is `effect_unknown` and waits for the person's decision).
    pub(super) async fn interrupt(&mut self, why: Interruption) -> Result<(), RunError> {
        tracing::info!(?why, "run interrupted");
        let mut tx = self.writer.begin();
        if let Interruption::ExecutorLost(executor) = &why {
            tx.activity(ActivityKind::ExecutorLost {
                executor: executor.clone(),
            });
        }
        tx.checkpoint(CheckpointStage::Interrupted, self.transcript_ref.clone());
        tx.status(RunStatus::Interrupted, Some(why.reason()))?;
        self.writer.commit(tx).await
    }

    /// End the run `cancelled` / `user_stopped`; a call whose effect did not
    /// finish within the grace period is recorded `effect_unknown`.
    pub(super) async fn cancel(
        &mut self,
        reply: Answer,
        in_flight: Option<JournalRecord>,
    ) -> Result<(), RunError> {
        self.end_early(Ending::Stop(reply), in_flight).await
    }

    /// A person stopped the run while round `round`'s answer was streaming:
    /// the text streamed so far is kept as the run's output, recorded as
    /// that round's response marked incomplete, so the run card shows it
    /// and the session's conversation carries it with the note of how the
    /// turn ended (issue 37 part 6). Nothing streamed: a plain stop.
    pub(super) async fn cancel_mid_answer(
        &mut self,
        reply: Answer,
        round: u64,
        streamed: String,
    ) -> Result<(), RunError> {
        let partial = (!streamed.is_empty()).then_some((round, streamed));
        self.end_early_keeping(Ending::Stop(reply), None, partial)
            .await
    }

    /// End the run as `ending` says. Records still `running` (the call in
    /// flight, or one left by an interruption) are settled as unfinished,
    /// pending requests are withdrawn, and the output so far stays readable.
    async fn end_early(
        &mut self,
        ending: Ending,
        in_flight: Option<JournalRecord>,
    ) -> Result<(), RunError> {
        self.end_early_keeping(ending, in_flight, None).await
    }

    /// [`Supervisor::end_early`], keeping `partial` (a round and the text
    /// it had streamed) as the run's incomplete answer.
    async fn end_early_keeping(
        &mut self,
        ending: Ending,
        in_flight: Option<JournalRecord>,
        partial: Option<(u64, String)>,
    ) -> Result<(), RunError> {
        let run = self.id();
        let storage = self.ctx.host.storage.clone();
        let pending = pending_of(&*storage, &run).await?;
        let mut tx = self.writer.begin();
        // Records still `running` (the call in flight now, or one left by an
        // interruption) are settled: a final run has nothing in flight.
        let mut running: Vec<JournalRecord> = crate::store::journal_of(&*storage, &run)
            .await?
            .into_iter()
            .filter(|r| r.state == CallState::Running)
            .collect();
        if let Some(record) = in_flight {
            running.retain(|r| r.call_id != record.call_id);
            running.push(record);
        }
        for mut record in running {
            tx.settle_unfinished(&mut record, ending.unfinished_code())?;
        }
        for p in &pending {
            tx.delete(Table::Pending, pending_key(p));
        }
        if let Some((round, text)) = partial {
            let blob = tx.blob(text.into_bytes());
            tx.activity(ActivityKind::ModelResponse {
                round,
                text: Some(blob.clone()),
                tool_calls: 0,
                reasoning: None,
                incomplete: true,
            });
            tx.run.output = Some(blob);
        }
        self.set_output_so_far(&mut tx).await?;
        let (status, reason) = ending.final_status();
        tx.status(status, Some(reason))?;
        let result = self.writer.commit(tx).await;
        ending.answer(result.clone());
        result
    }

    /// End the run while a call is in flight (a stop, or the duration budget
    /// run out): the call gets `RuntimeOptions::stop_grace` to finish and its
    /// outcome is recorded; past the grace it is settled as unfinished
    /// (`failed` when safe to repeat, else `effect_unknown`: never replayed,
    /// S2.3).
    pub(super) async fn end_in_flight(
        &mut self,
        ending: Ending,
        record: JournalRecord,
        call: &AssistantToolCall,
        fut: BoxFuture<'static, Result<ToolResult, ActorError>>,
    ) -> Result<(), RunError> {
        let grace = self.ctx.options.stop_grace;
        match timeout(&*self.ctx.host.clock, grace, fut).await {
            Ok(Ok(result)) => {
                self.settle(record, call, result).await?;
                if self.writer.run.status.is_final() {
                    ending.answer(Ok(()));
                    return Ok(());
                }
                self.end_early(ending, None).await
            }
            _ => self.end_early(ending, Some(record)).await,
        }
    }

    /// The tools actor went away mid-dispatch: the effect is uncertain unless
    /// the call was safe to repeat; the run fails naming the actor.
    pub(super) async fn tools_lost(
        &mut self,
        mut record: JournalRecord,
        actor: &str,
        message: &str,
    ) -> Result<(), RunError> {
        let mut tx = self.writer.begin();
        tx.settle_unfinished(&mut record, "tools_actor_lost")?;
        self.set_output_so_far(&mut tx).await?;
        tx.status(
            RunStatus::Failed,
            Some(StopReason::RuntimeError {
                actor: actor.to_owned(),
                message: message.to_owned(),
            }),
        )?;
        self.writer.commit(tx).await
    }
}
