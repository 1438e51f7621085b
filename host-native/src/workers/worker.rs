//! `agentrt worker` (S14.1): a long-running process that executes the runs
//! queued in a shared store ([`crate::workers::queue`]), many workers on many
//! machines sharing one database. This module owns the worker loop (claim,
//! execute, release), its shutdown on SIGTERM and its health report
//! ([`WorkerStatus`]); running a run is the runtime's own `start_as` and
//! `resume`, nothing here runs a model or a tool.
//!
//! * **Claiming is taking the session's lease.** A worker takes the oldest
//!   queued request of a session by taking that session's stored lease
//!   (`Assembly::open_session`, which also interrupts what a dead holder
//!   left `running` there); another live worker holding it is `Held`, and
//!   the request waits. Every write of the run then carries that lease's
//!   epoch, so a worker that lost the session (paused past its lease, cut
//!   off from the database) is refused by the fence: one executor per
//!   session at a time.
//! * **Never a resume by itself (S2.5).** A queued start is started under
//!   its queued id, then its entry is deleted; a start taken again after a
//!   lost worker finds its run and only drops the entry. A queued resume's
//!   entry is deleted *before* the run resumes: a worker lost meanwhile
//!   leaves the run interrupted, waiting for the person's next Resume,
//!   never resumed twice. Runs a dead worker left `running` are interrupted
//!   (`page_interrupted`) by the next worker that takes the session, or by
//!   the periodic recovery once the dead worker's lease has expired.
//! * **Store outages.** A run whose store cannot be reached stops without
//!   writing and is interrupted from what is durable once the store answers
//!   again (the runtime does it); the worker keeps polling, counts the
//!   failure, and carries on when the database is back.
//! * **Its own providers (S14.2).** A queued run names its model by a name
//!   of this worker's configuration (`[providers.NAME]`, or `[provider]`
//!   for none), never an endpoint or a key's variable; the worker builds
//!   the provider from its own configuration (a `Route`). A start naming a
//!   provider the worker lacks is started on a provider that fails every
//!   request, so the run ends `failed` and its record says why; a resume
//!   naming one is refused and the run stays interrupted. A stored record
//!   naming an endpoint or a variable ([`crate::workers::queue::RefusedEntry`]) is
//!   dropped under the session's lease, with no provider built for it.
//! * **SIGTERM / SIGINT**: stop claiming, let the runs held finish for
//!   [`WorkerOptions::drain`], interrupt the rest (the host's `shut_down`,
//!   as `agentrt run` does on a signal), wait for them to settle, write the
//!   last status, exit 0. A second signal exits at once.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent_assembly::NoModel;
use agent_kernel::host::{Batch, LeaseError};
use agent_kernel::run::RunStatus;
use agent_kernel::{RunId, SessionId};
use agent_supervisor::RunError;
use tokio::task::JoinSet;

use agent_supervisor::ModelProvider;

use super::execute::{Outcome, drop_refused, execute};
use super::route::{Job, Missing, Route, UNCONFIGURED, Unconfigured};
use super::status::{StatusRecord, WorkerStatus};
use crate::app::{App, AppError, AppOptions, provider_for};
use crate::workers::queue::{QueueItem, QueuedProvider, read_queue};

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Most runs executed at once (each in its own session).
    pub concurrency: usize,
    /// How often the queue is read when there is nothing to do.
    pub poll: Duration,
    /// On SIGTERM, how long the runs held may go on before they are
    /// interrupted.
    pub drain: Duration,
    /// Write the status here (JSON, replaced atomically) as it changes.
    pub status_file: Option<PathBuf>,
    /// How often the status is written (file and store) and runs left
    /// `running` by lost workers are looked for.
    pub status_every: Duration,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self {
            concurrency: 4,
            poll: Duration::from_millis(250),
            drain: Duration::from_secs(10),
            status_file: None,
            status_every: Duration::from_secs(1),
        }
    }
}

/// A worker: its base runtime (no model: queue reads, recovery), and one
/// runtime per model provider that queued runs name.
pub struct Worker {
    data_dir: PathBuf,
    app_options: AppOptions,
    options: WorkerOptions,
    base: Arc<App>,
    apps: HashMap<String, Arc<App>>,
    status: WorkerStatus,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("owner", &self.status.owner)
            .finish_non_exhaustive()
    }
}

/// Starting the worker failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    #[error(transparent)]
    App(#[from] AppError),
    #[error("cannot write the status file {path}: {detail}")]
    StatusFile { path: PathBuf, detail: String },
    #[error("--concurrency must be at least 1")]
    Concurrency,
}

impl Worker {
    /// Open the worker's base runtime over `data_dir` and the store that
    /// `app_options.config.store` names (SQLite in `data_dir` without one).
    pub async fn open(
        data_dir: &Path,
        app_options: AppOptions,
        options: WorkerOptions,
    ) -> Result<Worker, WorkerError> {
        if options.concurrency == 0 {
            return Err(WorkerError::Concurrency);
        }
        let base = Arc::new(App::open(data_dir, app_options.clone(), Arc::new(NoModel)).await?);
        let now = base.native().host().clock.wall_ms();
        let status = WorkerStatus {
            owner: base.native().owner().to_string(),
            pid: std::process::id(),
            state: "running".into(),
            started_at_ms: now,
            updated_at_ms: now,
            ..WorkerStatus::default()
        };
        Ok(Worker {
            data_dir: data_dir.to_owned(),
            app_options,
            options,
            base,
            apps: HashMap::new(),
            status,
        })
    }

    /// The status as last written.
    pub fn status(&self) -> &WorkerStatus {
        &self.status
    }

    /// Where a run naming `queued` goes: the runtime for it (opened on
    /// first use) and what its start is given, from this worker's own
    /// configuration only (S14.2).
    async fn route(&mut self, queued: &QueuedProvider) -> Result<Route, AppError> {
        let (key, model, missing) = match queued {
            QueuedProvider::Scripted { .. } => (
                serde_json::to_string(queued).unwrap_or_default(),
                None,
                None,
            ),
            QueuedProvider::Configured { name, model } => {
                match self.app_options.config.provider_named(name.as_deref()) {
                    Ok(p) => (
                        format!("configured:{}", name.as_deref().unwrap_or("")),
                        Some(model.clone().unwrap_or_else(|| p.model.clone())),
                        None,
                    ),
                    // One runtime for every name this worker lacks: its
                    // provider fails each request, naming what is missing.
                    Err(error) => (
                        UNCONFIGURED.to_owned(),
                        Some(model.clone().unwrap_or_else(|| UNCONFIGURED.into())),
                        Some(Missing {
                            name: name.clone(),
                            error,
                        }),
                    ),
                }
            }
        };
        let app = self.app_for(&key, queued).await?;
        Ok(Route {
            app,
            model,
            missing,
        })
    }

    /// The runtime opened under `key` for runs naming `queued`.
    async fn app_for(&mut self, key: &str, queued: &QueuedProvider) -> Result<Arc<App>, AppError> {
        if let Some(app) = self.apps.get(key) {
            return Ok(app.clone());
        }
        let native = self.base.native();
        let config = &self.app_options.config;
        let provider: Arc<dyn ModelProvider> = match queued {
            QueuedProvider::Configured { .. } if key == UNCONFIGURED => Arc::new(Unconfigured {
                known: config.providers.keys().cloned().collect(),
            }),
            _ => {
                provider_for(
                    &queued.spec(),
                    config,
                    native.host().storage.as_ref(),
                    native.host().clock.clone(),
                )
                .await?
            }
        };
        let app = Arc::new(App::open(&self.data_dir, self.app_options.clone(), provider).await?);
        for status in app.assembly().connect_mcp().await {
            if let Some(error) = &status.error {
                tracing::warn!(server = %status.id, %error, "MCP server not connected");
            }
        }
        self.apps.insert(key.to_owned(), app.clone());
        Ok(app)
    }

    /// Run until `stop` resolves (a signal), then drain and return.
    pub async fn run(mut self, stop: impl std::future::Future<Output = ()>) -> WorkerStatus {
        let mut tasks: JoinSet<(SessionId, RunId, Outcome)> = JoinSet::new();
        let mut held: BTreeMap<SessionId, RunId> = BTreeMap::new();
        let clock = self.base.native().host().clock.clone();
        let mut last_status = clock.monotonic();
        let mut rotate: usize = 0;
        tokio::pin!(stop);
        self.recover().await;
        self.write_status(&held).await;
        loop {
            if held.len() < self.options.concurrency {
                self.claim(&mut tasks, &mut held, &mut rotate).await;
            }
            if clock.monotonic().saturating_sub(last_status) >= self.options.status_every {
                self.recover().await;
                self.write_status(&held).await;
                last_status = clock.monotonic();
            }
            tokio::select! {
                _ = &mut stop => break,
                Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                    self.count(done, &mut held);
                }
                _ = tokio::time::sleep(self.options.poll) => {}
            }
        }
        // Draining: no more claims; the runs held may finish for a while.
        self.status.state = "draining".into();
        self.write_status(&held).await;
        let deadline = tokio::time::Instant::now() + self.options.drain;
        while !tasks.is_empty() {
            match tokio::time::timeout_at(deadline, tasks.join_next()).await {
                Ok(Some(done)) => self.count(done, &mut held),
                Ok(None) | Err(_) => break,
            }
        }
        if !tasks.is_empty() {
            // Interrupted, as `agentrt run` on a signal: they wait for Resume.
            for app in self.apps.values() {
                app.native().shut_down();
            }
            let settle =
                tokio::time::Instant::now() + self.options.drain.max(Duration::from_secs(5));
            while !tasks.is_empty() {
                match tokio::time::timeout_at(settle, tasks.join_next()).await {
                    Ok(Some(done)) => self.count(done, &mut held),
                    Ok(None) | Err(_) => break,
                }
            }
            tasks.abort_all();
        }
        self.status.state = "stopped".into();
        self.write_status(&held).await;
        self.status
    }

    fn count(
        &mut self,
        done: Result<(SessionId, RunId, Outcome), tokio::task::JoinError>,
        held: &mut BTreeMap<SessionId, RunId>,
    ) {
        let (session, run, outcome) = match done {
            Ok(done) => done,
            Err(e) => {
                tracing::error!(error = %e, "a worker task ended abnormally");
                // Which session it held is unknown here: forget the ones
                // whose runs are no longer executing at the next status.
                return;
            }
        };
        held.remove(&session);
        let s = &mut self.status;
        match outcome {
            Outcome::Settled(RunStatus::Completed, _) => s.completed += 1,
            Outcome::Settled(RunStatus::Interrupted, _)
            | Outcome::Settled(RunStatus::Running, _) => s.interrupted += 1,
            Outcome::Settled(RunStatus::AwaitingApproval | RunStatus::AwaitingInput, _) => {
                s.waiting += 1
            }
            Outcome::Settled(RunStatus::Failed | RunStatus::Cancelled, _) => s.failed += 1,
            Outcome::Refused => s.refused += 1,
            Outcome::AlreadyStarted => s.already_started += 1,
            Outcome::Retry => s.store_errors += 1,
            Outcome::Gone => {}
        }
        tracing::debug!(%run, ?outcome, "request done");
    }

    /// Take what may be taken now: the oldest request of each session not
    /// held by another live worker, up to the concurrency.
    async fn claim(
        &mut self,
        tasks: &mut JoinSet<(SessionId, RunId, Outcome)>,
        held: &mut BTreeMap<SessionId, RunId>,
        rotate: &mut usize,
    ) {
        let storage = self.base.native().host().storage.clone();
        let queue = match read_queue(storage.as_ref()).await {
            Ok(q) => q,
            Err(e) => {
                self.status.store_errors += 1;
                tracing::warn!(error = %e, "cannot read the queue; trying again");
                return;
            }
        };
        self.status.queue_length = queue.items.len() as u64;
        self.status.queue_corrupt = queue.corrupt.len() as u64;
        let mut candidates: Vec<QueueItem> = queue
            .heads()
            .into_iter()
            .filter(|e| !held.contains_key(e.session()))
            .cloned()
            .collect();
        if candidates.is_empty() {
            return;
        }
        // Workers start their scan at different heads, so that they do not
        // all contend for the same session's lease.
        *rotate = rotate.wrapping_add(1 + std::process::id() as usize);
        let shift = *rotate % candidates.len();
        candidates.rotate_left(shift);
        for item in candidates {
            if held.len() >= self.options.concurrency {
                break;
            }
            let job = match item {
                QueueItem::Run(entry) => match self.route(&entry.provider).await {
                    Ok(route) => Job::Run(entry, route),
                    Err(e) => {
                        tracing::warn!(run = %entry.run, error = %e, "cannot open the run's model provider; the request waits");
                        continue;
                    }
                },
                // Dropped under the session's lease; no provider is built.
                QueueItem::Refused(refused) => Job::Refused(refused, self.base.clone()),
            };
            let (session, run) = job.names();
            let opened = match job.app().open_session(&session).await {
                Ok(opened) => opened,
                Err(AppError::Run(RunError::Lease(LeaseError::Held { .. }))) => continue,
                Err(e) => {
                    self.status.store_errors += 1;
                    tracing::warn!(%session, error = %e, "cannot take the session; trying again later");
                    continue;
                }
            };
            self.status.recovered += opened.recovered.len() as u64;
            held.insert(session.clone(), run.clone());
            tasks.spawn(async move {
                let outcome = match &job {
                    Job::Run(entry, route) => execute(route, &opened.guard, entry).await,
                    Job::Refused(refused, app) => drop_refused(app, &opened.guard, refused).await,
                };
                drop(opened);
                (session, run, outcome)
            });
        }
    }

    /// Interrupt runs that lost workers left `running` once their leases
    /// have ended; never resumes anything.
    async fn recover(&mut self) {
        match self.base.runtime().recover().await {
            Ok(runs) => self.status.recovered += runs.len() as u64,
            Err(e) => {
                self.status.store_errors += 1;
                tracing::warn!(error = %e, "cannot look for runs left running; trying again");
            }
        }
    }

    /// Write the status file and the store record (best effort: a store
    /// that is down is counted, the file is still written).
    async fn write_status(&mut self, held: &BTreeMap<SessionId, RunId>) {
        let native = self.base.native();
        self.status.updated_at_ms = native.host().clock.wall_ms();
        self.status.held = held.values().map(|r| r.to_string()).collect();
        self.status.runs_held = held.len() as u64;
        let (mut commits, mut stale) = (0, 0);
        for app in std::iter::once(&self.base).chain(self.apps.values()) {
            if let Some(pg) = app.native().postgres() {
                let counts = pg.counts();
                commits += counts.commits;
                stale += counts.stale_refusals;
            }
        }
        self.status.commits = commits;
        self.status.stale_refusals = stale;
        let record = StatusRecord(self.status.clone());
        match Batch::new().put_record(&record) {
            Ok(batch) => {
                if let Err(e) = native.host().storage.commit(batch).await {
                    self.status.store_errors += 1;
                    tracing::warn!(error = %e, "cannot store the worker status");
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot encode the worker status"),
        }
        if let Some(path) = &self.options.status_file
            && let Err(e) = write_file_atomically(path, &self.status)
        {
            tracing::warn!(error = %e, "cannot write the status file");
        }
    }
}

/// Write `status` to `path` through a temporary file and a rename, so a
/// reader never sees half of it.
pub fn write_file_atomically(path: &Path, status: &WorkerStatus) -> Result<(), WorkerError> {
    let fail = |detail: String| WorkerError::StatusFile {
        path: path.to_owned(),
        detail,
    };
    let json = serde_json::to_vec_pretty(status).map_err(|e| fail(e.to_string()))?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, json).map_err(|e| fail(e.to_string()))?;
    std::fs::rename(&tmp, path).map_err(|e| fail(e.to_string()))
}
