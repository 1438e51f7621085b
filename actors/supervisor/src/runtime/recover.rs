//! Recovery: runs left `running` by a page or process that is gone become
//! `interrupted` / `page_interrupted` (S2.5), their calls in flight settled
//! by the replay rule; nothing is resumed and no network work starts. The
//! runs come from the store's index ([`crate::store::index`]); each one's
//! interruption is a step of the live supervisors' actor
//! (`super::live`), so that no supervisor is spawned for a run while it
//! is interrupted. A server's elicitation still pending is withdrawn with
//! the interruption: the call that asked is gone, so it can no longer be
//! answered (a call run again asks again).

use agent_kernel::host::Table;
use agent_kernel::ids::{RunId, SessionId};
use agent_kernel::journal::{CallState, ReplayDecision, replay_decision};
use agent_kernel::run::{
    ActivityKind, AgentRun, CheckpointStage, PendingKind, RunStatus, StopReason,
};

use super::Runtime;
use super::live::{LiveMsg, Supervisors, open_writer};
use crate::blob::verified_blob;
use crate::error::RunError;
use crate::store::{journal_of, live_runs, load_run, pending_of, runs_of_session};

impl Runtime {
    /// At page load (or process start): every run found `running` without a
    /// live lease of another owner becomes `interrupted` / `page_interrupted`;
    /// its in-flight journal records are settled by the replay rule. Nothing
    /// is resumed and no network work starts. Returns the runs recovered.
    pub async fn recover(&self) -> Result<Vec<RunId>, RunError> {
        let runs = live_runs(&*self.host().storage).await?;
        self.recover_runs(runs, None).await
    }

    /// [`Runtime::recover`] for one session's runs: what a tab does when it
    /// takes over a session another tab left (closed or crashed) without
    /// waiting for the next page load.
    pub async fn recover_session(&self, session: &SessionId) -> Result<Vec<RunId>, RunError> {
        let runs = runs_of_session(&*self.host().storage, session).await?;
        self.recover_runs(runs, None).await
    }

    /// Interrupt those of `runs` left `running` with no live supervisor
    /// here nor a live lease of another owner; `lost` names the executor
    /// lost with them when it is known (an `executor_lost` activity).
    pub(super) async fn recover_runs(
        &self,
        runs: Vec<AgentRun>,
        lost: Option<&'static str>,
    ) -> Result<Vec<RunId>, RunError> {
        let mut recovered = Vec::new();
        for run in runs {
            if run.status != RunStatus::Running {
                continue;
            }
            let id = run.id.clone();
            let interrupted = self
                .inner
                .live
                .ask(|reply| LiveMsg::Recover {
                    run: Box::new(run),
                    lost,
                    reply,
                })
                .await??;
            if interrupted {
                tracing::info!(run = %id, "recovered a run left running; it waits for resume");
                recovered.push(id);
            }
        }
        Ok(recovered)
    }
}

impl Supervisors {
    /// Interrupt `run` if it is still `running` with no supervisor here nor
    /// a live lease of another owner. A step of the live supervisors'
    /// actor, so that no supervisor is spawned for the run between the
    /// check that none is live and the interruption (a command's, which
    /// would run it on a record this then interrupts); the record is read
    /// again under the lease, after the check: a supervisor that ended
    /// just before it has made its writes durable.
    pub(super) async fn recover(
        &mut self,
        run: AgentRun,
        lost: Option<&'static str>,
    ) -> Result<bool, RunError> {
        let storage = self.ctx.host.storage.clone();
        if self.live_addr(&run.id).is_some() {
            return Ok(false);
        }
        let now = self.ctx.host.clock.wall_ms();
        if let Some(lease) = storage.current_lease(&run.session).await?
            && lease.is_live(now)
            && &lease.owner != self.leases.owner()
        {
            return Ok(false);
        }
        let guard = self.leases.acquire(&run.session).await?;
        let (record, bytes) = load_run(&*storage, &run.id).await?;
        if record.status != RunStatus::Running {
            return Ok(false);
        }
        let mut writer = open_writer(&self.ctx, guard.fence(), record, bytes).await?;
        let mut tx = writer.begin();
        for mut rec in journal_of(&*storage, &run.id).await? {
            if rec.state != CallState::Running {
                continue;
            }
            let verifies = match &rec.result {
                Some(b) => verified_blob(&*storage, b).await?.is_some(),
                None => false,
            };
            if replay_decision(&rec, verifies) == ReplayDecision::MarkEffectUnknown
                && !self.ctx.retries_unsafely_on_resume()
            {
                writer.mark_effect_unknown(&mut tx, &mut rec).await?;
            }
        }
        for p in pending_of(&*storage, &run.id).await? {
            if matches!(p.kind, PendingKind::Elicitation { .. }) {
                tx.delete(Table::Pending, format!("{}/{}", p.run, p.id));
            }
        }
        if let Some(cp) = writer.take_opened_checkpoint() {
            tx.checkpoint(CheckpointStage::Interrupted, cp.transcript);
        }
        if let Some(executor) = lost {
            tx.activity(ActivityKind::ExecutorLost {
                executor: executor.to_owned(),
            });
        }
        tx.status(RunStatus::Interrupted, Some(StopReason::PageInterrupted))?;
        writer.commit(tx).await?;
        Ok(true)
    }
}
