//! Reading runs back, straight from storage (the source of truth): a run
//! and its configuration, activities, journal, pending requests, evidence,
//! checkpoint, output, plan and blobs; the listing every host shows; the
//! one write of a read (pending requests marked as shown, S6.4); and
//! waiting until a run settles.

use serde_json::Value;

use agent_kernel::host::{BlobRef, StorageExt, Table};
use agent_kernel::ids::{RunId, SessionId};
use agent_kernel::journal::JournalRecord;
use agent_kernel::run::{
    Activity, ActivityKind, AgentRun, Checkpoint, Evidence, PendingRequest, RunStatus,
};

use super::Runtime;
use crate::blob::{json_blob, verified_blob};
use crate::config::RunConfig;
use crate::error::RunError;
use crate::store::{
    RunEvent, RunMeta, journal_of, latest_checkpoint, load_run, pending_of, run_prefix,
};
use crate::supervisor::pending_key;

/// What a test runs between `wait_settled`'s check of the run's
/// supervisor and its read of the run (feature `test-hooks` only).
#[cfg(feature = "test-hooks")]
pub type SettleHook = std::sync::Arc<
    dyn Fn(Runtime, RunId) -> agent_kernel::maybe_send::BoxFuture<'static, ()> + Send + Sync,
>;

/// Begins the message logged when the test-only settle hook runs; a string
/// only that hook puts in a binary.
#[cfg(feature = "test-hooks")]
pub const SETTLE_HOOK_MARKER: &str = "test hook between wait_settled's steps";

/// What woke a waiter of [`Runtime::wait_settled`].
enum Wake {
    Event(RunEvent),
    Released(RunId),
}

impl Runtime {
    pub async fn run(&self, run: &RunId) -> Result<AgentRun, RunError> {
        Ok(load_run(&*self.host().storage, run).await?.0)
    }

    /// Every run stored, in key order.
    pub async fn runs(&self) -> Result<Vec<AgentRun>, RunError> {
        Ok(self.host().storage.scan_records("").await?)
    }

    /// The runs a host lists, oldest first: every run, or those of
    /// `session` ([`crate::store::list_runs`], the one listing every host
    /// shows).
    pub async fn list_runs(&self, session: Option<&SessionId>) -> Result<Vec<AgentRun>, RunError> {
        crate::store::list_runs(&*self.host().storage, session).await
    }

    /// The configuration `run` was started with (its stored blob).
    pub async fn config(&self, run: &RunId) -> Result<RunConfig, RunError> {
        let storage = &*self.host().storage;
        let meta = storage
            .get_record::<RunMeta>(&format!("run_config/{run}"))
            .await?
            .ok_or_else(|| RunError::NotFound(run.clone()))?;
        json_blob(storage, run, &meta.config).await
    }

    pub async fn activities(&self, run: &RunId) -> Result<Vec<Activity>, RunError> {
        Ok(self.host().storage.scan_records(&run_prefix(run)).await?)
    }

    pub async fn journal(&self, run: &RunId) -> Result<Vec<JournalRecord>, RunError> {
        Ok(journal_of(&*self.host().storage, run).await?)
    }

    pub async fn pending(&self, run: &RunId) -> Result<Vec<PendingRequest>, RunError> {
        Ok(pending_of(&*self.host().storage, run).await?)
    }

    pub async fn evidence(&self, run: &RunId) -> Result<Vec<Evidence>, RunError> {
        Ok(self.host().storage.scan_records(&run_prefix(run)).await?)
    }

    /// The run's checkpoint: the latest it took (a run keeps one).
    pub async fn checkpoint(&self, run: &RunId) -> Result<Option<Checkpoint>, RunError> {
        Ok(latest_checkpoint(&*self.host().storage, run).await?)
    }

    /// Pending requests not yet shown, marked as shown: after a reload each
    /// request is presented once, not twice (S6.4).
    pub async fn present_pending(&self, run: &RunId) -> Result<Vec<PendingRequest>, RunError> {
        let record = self.run(run).await?;
        let fresh: Vec<PendingRequest> = self
            .pending(run)
            .await?
            .into_iter()
            .filter(|p| !p.presented)
            .collect();
        if fresh.is_empty() {
            return Ok(fresh);
        }
        let guard = self.inner.leases.acquire(&record.session).await?;
        let mut batch = agent_kernel::host::Batch::new().fenced(guard.fence());
        for p in &fresh {
            let mut shown = p.clone();
            shown.presented = true;
            batch = batch.put_record(&shown)?;
            batch = batch.expect_present(Table::Pending, pending_key(p));
        }
        self.host().storage.commit(batch).await?;
        Ok(fresh)
    }

    /// The run's readable output so far (final answer, or the latest text).
    pub async fn output(&self, run: &RunId) -> Result<Option<String>, RunError> {
        let record = self.run(run).await?;
        let Some(blob) = record.output else {
            return Ok(None);
        };
        let bytes = self.blob(run, &blob).await?;
        Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
    }

    /// The run's latest plan (`update_plan`).
    pub async fn plan(&self, run: &RunId) -> Result<Option<Value>, RunError> {
        let record = self.run(run).await?;
        let Some(blob) = record.plan else {
            return Ok(None);
        };
        Ok(Some(json_blob(&*self.host().storage, run, &blob).await?))
    }

    /// The bytes of a blob a record of `run` names, checked against its hash.
    pub async fn blob(&self, run: &RunId, blob: &BlobRef) -> Result<Vec<u8>, RunError> {
        verified_blob(&*self.host().storage, blob)
            .await?
            .ok_or_else(|| RunError::Inconsistent {
                run: run.clone(),
                detail: format!("blob {} is missing or does not match its hash", blob.hash),
            })
    }

    /// Wait until the run is not `running` (awaiting, interrupted or final),
    /// or until no supervisor of this runtime holds it (a run executed
    /// elsewhere, or whose supervisor ended without settling it, such as
    /// one that lost its lease): then the stored record, `running` or not.
    ///
    /// Whether the run is held is checked before the record is read, so
    /// that the record read after seeing it not held is final here: every
    /// write of its supervisors is durable by then. A supervisor that ends
    /// after the check is heard of by its release (or the status change it
    /// wrote), both subscribed to before the check. (Read first, then
    /// checked, a supervisor ending in between gave a stale `running`.)
    pub async fn wait_settled(&self, run: &RunId) -> Result<AgentRun, RunError> {
        use futures::StreamExt;
        let events = self.subscribe().map(Wake::Event);
        let released = self.inner.held.subscribe().map(Wake::Released);
        let wakes = futures::stream::select(events, released);
        futures::pin_mut!(wakes);
        loop {
            let held = self.inner.held.is_held(run);
            #[cfg(feature = "test-hooks")]
            self.run_settle_hook(run).await;
            let record = self.run(run).await?;
            if record.status != RunStatus::Running || !held {
                return Ok(record);
            }
            // Read the record again only when its status moved or a
            // supervisor of it ended: every other event (each activity of
            // every run) would cost a storage read, four per tool round,
            // queued before the run's own commits.
            loop {
                match wakes.next().await {
                    None => return self.run(run).await,
                    Some(Wake::Released(released)) if &released == run => break,
                    Some(Wake::Event(RunEvent::Activity(a)))
                        if &a.run == run
                            && matches!(a.kind, ActivityKind::StatusChanged { .. }) =>
                    {
                        break;
                    }
                    Some(_) => continue,
                }
            }
        }
    }

    /// Run `hook` between `wait_settled`'s check of the run's supervisors
    /// and its read of the run, from now on (`None`: no more). Test only
    /// (feature `test-hooks`): it lets a test end a supervisor exactly there.
    #[cfg(feature = "test-hooks")]
    pub fn set_settle_hook(&self, hook: Option<SettleHook>) {
        if let Ok(mut slot) = self.inner.settle_hook.lock() {
            *slot = hook;
        }
    }

    #[cfg(feature = "test-hooks")]
    async fn run_settle_hook(&self, run: &RunId) {
        let hook = self.inner.settle_hook.lock().ok().and_then(|h| h.clone());
        if let Some(hook) = hook {
            tracing::warn!(run = %run, "{SETTLE_HOOK_MARKER}");
            hook(self.clone(), run.clone()).await;
        }
    }

    /// Wait until no supervisor of this runtime holds `run` (its end
    /// handled). Test only (feature `test-hooks`).
    #[cfg(feature = "test-hooks")]
    pub async fn wait_released(&self, run: &RunId) {
        let released = self.inner.held.subscribe();
        while self.inner.held.is_held(run) {
            if released.recv().await.is_err() {
                return;
            }
        }
    }
}
