//! Executing one claimed request under the session's lease: start or
//! resume the run, drop the queue entry at the moment S2.5 allows, refuse a
//! record that cannot be run, and wait for the run to settle ([`Outcome`]).

use std::time::Duration;

use agent_kernel::RunId;
use agent_kernel::host::{Batch, Record, StorageError, StorageExt, Table};
use agent_kernel::run::{AgentRun, RunStatus, StopReason};
use agent_supervisor::RunError;

use crate::app::App;
use crate::workers::queue::{QueuedAction, QueuedRun, RefusedEntry, StartRequest};

use super::route::Route;

/// What became of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    Settled(RunStatus, bool),
    Refused,
    AlreadyStarted,
    /// Left in the queue: the store failed, taken again later.
    Retry,
    /// Taken by another worker meanwhile.
    Gone,
}

/// Execute one request under the session's lease `guard`.
pub(super) async fn execute(
    route: &Route,
    guard: &agent_kernel::host::LeaseGuard,
    entry: &QueuedRun,
) -> Outcome {
    let app = route.app.as_ref();
    let storage = app.native().host().storage.clone();
    let key = entry.key();
    // Taken and finished by another worker between our read and our lease?
    match storage.get(Table::Meta, &key).await {
        Ok(Some(_)) => {}
        Ok(None) => return Outcome::Gone,
        Err(e) => {
            tracing::warn!(run = %entry.run, error = %e, "cannot read the request; it waits");
            return Outcome::Retry;
        }
    }
    let dequeue = || async {
        storage
            .commit(
                Batch::new()
                    .fenced(guard.fence())
                    .delete(Table::Meta, key.clone()),
            )
            .await
    };
    let runtime = app.runtime();
    match &entry.action {
        QueuedAction::Start { prompt, request } => {
            match storage.get(Table::Runs, entry.run.as_str()).await {
                Ok(Some(_)) => {
                    // A lost worker started it: never a second start.
                    return match dequeue().await {
                        Ok(()) => Outcome::AlreadyStarted,
                        Err(_) => Outcome::Retry,
                    };
                }
                Ok(None) => {}
                Err(_) => return Outcome::Retry,
            }
            let loaded = async {
                let prompt = runtime.blob(&entry.run, prompt).await?;
                let request = runtime.blob(&entry.run, request).await?;
                let prompt = String::from_utf8(prompt).map_err(|_| RunError::Inconsistent {
                    run: entry.run.clone(),
                    detail: "the queued prompt is not UTF-8".into(),
                })?;
                let request: StartRequest =
                    serde_json::from_slice(&request).map_err(|e| RunError::Inconsistent {
                        run: entry.run.clone(),
                        detail: format!("the queued run configuration does not decode: {e}"),
                    })?;
                Ok::<_, RunError>((prompt, request))
            }
            .await;
            let (prompt, request) = match loaded {
                Ok(loaded) => loaded,
                Err(e) if e.is_storage_unavailable() => return Outcome::Retry,
                Err(e) => return refuse(&dequeue, entry, &e).await,
            };
            let mut config = request.config;
            config.history = request.history;
            // The worker's own choice of model and provider (S14.2).
            if let Some(model) = &route.model {
                config.model.model = model.clone();
            }
            config.model.provider = None;
            if let Some(missing) = &route.missing {
                tracing::error!(run = %entry.run, error = %missing.error, "the queued start names a provider this worker lacks; the run fails");
                eprintln!(
                    "agentrt worker: run {} names a provider this worker lacks ({}); the run fails",
                    entry.run, missing.error
                );
                // Through `named`, so that the failure names it.
                config.model.provider = missing.name.clone();
            }
            match runtime
                .start_as(entry.run.clone(), &entry.session, &prompt, config)
                .await
            {
                Ok(_) => {}
                Err(RunError::AlreadyExists(_)) => {
                    return match dequeue().await {
                        Ok(()) => Outcome::AlreadyStarted,
                        Err(_) => Outcome::Retry,
                    };
                }
                Err(e) if e.is_storage_unavailable() => return Outcome::Retry,
                Err(e) => return refuse(&dequeue, entry, &e).await,
            }
            // The run exists now; a failure here leaves an entry that the
            // next worker drops as already started.
            if let Err(e) = dequeue().await {
                tracing::warn!(run = %entry.run, error = %e, "cannot remove the started request; the next worker drops it");
            }
        }
        QueuedAction::Resume => {
            if let Some(missing) = &route.missing {
                // Never resumed on a provider that cannot answer: the run
                // stays interrupted for a worker that has it.
                let why = format!("this worker: {}", missing.error);
                return refuse(&dequeue, entry, &why).await;
            }
            // Removed first: a worker lost from here on leaves the run
            // interrupted, waiting for the person's next Resume (S2.5).
            if let Err(e) = dequeue().await {
                tracing::warn!(run = %entry.run, error = %e, "cannot take the resume request; it waits");
                return Outcome::Retry;
            }
            if let Err(e) = runtime.resume(&entry.run).await {
                tracing::warn!(run = %entry.run, error = %e, "the queued resume was refused");
                return match e {
                    RunError::DecisionPending { .. } => {
                        Outcome::Settled(RunStatus::Interrupted, true)
                    }
                    _ => Outcome::Refused,
                };
            }
        }
    }
    settle(app, &entry.run).await
}

/// Drop a stored record whose provider is refused (S14.2), under the
/// session's lease `guard`, saying why; nothing else of it is read.
pub(super) async fn drop_refused(
    app: &App,
    guard: &agent_kernel::host::LeaseGuard,
    refused: &RefusedEntry,
) -> Outcome {
    let storage = app.native().host().storage.clone();
    match storage.get(Table::Meta, &refused.key).await {
        Ok(Some(_)) => {}
        Ok(None) => return Outcome::Gone,
        Err(_) => return Outcome::Retry,
    }
    tracing::error!(run = %refused.run, error = %refused.error, "the queued {} is refused and removed", refused.action);
    eprintln!(
        "agentrt worker: the queued {} of run {} is refused and removed: {}",
        refused.action, refused.run, refused.error
    );
    match storage
        .commit(
            Batch::new()
                .fenced(guard.fence())
                .delete(Table::Meta, refused.key.clone()),
        )
        .await
    {
        Ok(()) => Outcome::Refused,
        Err(_) => Outcome::Retry,
    }
}

/// Drop a request that cannot run, saying why in the log.
pub(super) async fn refuse<F, Fut>(
    dequeue: &F,
    entry: &QueuedRun,
    e: &(dyn std::fmt::Display + Sync),
) -> Outcome
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<(), StorageError>>,
{
    tracing::error!(run = %entry.run, error = %e, "the queued {} is refused and removed", entry.action_name());
    eprintln!(
        "agentrt worker: the queued {} of run {} is refused and removed: {e}",
        entry.action_name(),
        entry.run
    );
    match dequeue().await {
        Ok(()) => Outcome::Refused,
        Err(_) => Outcome::Retry,
    }
}

/// Wait until the run is no longer executing here: settled (completed,
/// waiting, interrupted, failed), or `running` with its supervisor gone
/// (a lost store: the runtime interrupts it once the store answers; this
/// waits for that, within a bound). The store is read again every second,
/// since the run may be settled by another runtime (this worker's recovery
/// or another worker's, after this one's lease ended) whose events this
/// runtime never hears.
pub(super) async fn settle(app: &App, run: &RunId) -> Outcome {
    let runtime = app.runtime();
    let clock = app.native().host().clock.clone();
    let storage = app.native().host().storage.clone();
    let settled = |r: AgentRun| {
        let effect_unknown = matches!(r.stop_reason, Some(StopReason::EffectUnknown { .. }));
        Outcome::Settled(r.status, effect_unknown)
    };
    // Polls that found it `running` with no supervisor here.
    let mut orphaned = 0u32;
    loop {
        match tokio::time::timeout(Duration::from_secs(1), runtime.wait_settled(run)).await {
            Ok(Ok(r)) if r.status != RunStatus::Running => return settled(r),
            Ok(Ok(_)) => {
                orphaned += 1;
                if orphaned > 480 {
                    // Two minutes: the periodic recovery of some worker takes it.
                    return Outcome::Settled(RunStatus::Running, false);
                }
                clock.sleep(Duration::from_millis(250)).await;
            }
            Ok(Err(_)) => clock.sleep(Duration::from_millis(250)).await,
            Err(_) => {}
        }
        if let Ok(Some(r)) = storage.get_record::<AgentRun>(run.as_str()).await
            && r.status != RunStatus::Running
        {
            return settled(r);
        }
    }
}
