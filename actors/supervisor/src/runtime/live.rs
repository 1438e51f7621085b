//! The live supervisors of one runtime, owned by an actor: the map from
//! run to its supervisor's address lives in [`Supervisors`], the one
//! place a supervisor is spawned. Its mailbox serialises what must not
//! interleave: a run never gets two supervisors, a session's conversation
//! has one writer at a time (a start), and a run is never interrupted by
//! recovery while a supervisor is spawned for it. The steps it runs are
//! in `super::start` (the start's durable part) and `super::recover`
//! (one run's interruption); here are the actor, spawning, the holds
//! [`super::Runtime::wait_settled`] reads, and the watcher of the
//! supervisors' ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agent_kernel::actor::{ActorExit, ActorReport, Addr, ParentLink, Reply, spawn_actor};
use agent_kernel::host::{Fence, LeaseGuard, LeaseManager};
use agent_kernel::ids::{RunId, SessionId};
use agent_kernel::maybe_send::BoxFuture;
use agent_kernel::run::AgentRun;

use super::Runtime;
use crate::config::RunConfig;
use crate::error::RunError;
use crate::store::{RunWriter, load_run};
use crate::supervisor::{Ctx, Msg, STORAGE_LOST, Supervisor};

/// What the live supervisors' actor is asked.
pub(super) enum LiveMsg {
    /// The run's supervisor, spawned (taking the lease) when none is live.
    Supervisor {
        run: RunId,
        reply: Reply<Result<Addr<Msg>, RunError>>,
    },
    /// The run's supervisor if one is live; none is spawned.
    Find {
        run: RunId,
        reply: Reply<Option<Addr<Msg>>>,
    },
    /// Store a new run and spawn its supervisor (`super::start`).
    Start {
        request: Box<StartRequest>,
        reply: Reply<Result<RunId, RunError>>,
    },
    /// Interrupt the run if it is left `running` with no supervisor here
    /// nor a live lease elsewhere (`super::recover`); answers whether it
    /// was.
    Recover {
        run: Box<AgentRun>,
        lost: Option<&'static str>,
        reply: Reply<Result<bool, RunError>>,
    },
}

/// A start handed to the live supervisors' actor, its checks passed.
pub(super) struct StartRequest {
    pub(super) session: SessionId,
    pub(super) parent: Option<RunId>,
    pub(super) chosen: Option<RunId>,
    pub(super) prompt: String,
    pub(super) config: RunConfig,
}

/// The actor's state: the live supervisors by run, and what spawning one
/// needs.
pub(super) struct Supervisors {
    pub(super) ctx: Arc<Ctx>,
    pub(super) leases: LeaseManager,
    /// Where every supervisor reports its end (read by
    /// [`watch_supervisors`]).
    reports: ParentLink,
    held: Arc<Held>,
    live: HashMap<RunId, Addr<Msg>>,
}

/// Spawn the live supervisors' actor of a runtime over `ctx`.
pub(super) fn spawn_live(
    ctx: Arc<Ctx>,
    leases: LeaseManager,
    reports: ParentLink,
    held: Arc<Held>,
) -> Addr<LiveMsg> {
    let executor = ctx.host.executor.clone();
    let mailbox = ctx.options.mailbox;
    let mut state = Supervisors {
        ctx,
        leases,
        reports,
        held,
        live: HashMap::new(),
    };
    spawn_actor(
        &*executor,
        "supervisors",
        mailbox,
        None,
        move |inbox| async move {
            // Ends with the runtime: its last address is the runtime's.
            while let Ok(msg) = inbox.recv().await {
                // Natively a step that panics drops its reply (the asker
                // hears `NoReply`); the map and the runtime go on.
                #[cfg(not(target_arch = "wasm32"))]
                {
                    use futures::FutureExt;
                    if let Err(panic) = std::panic::AssertUnwindSafe(state.handle(msg))
                        .catch_unwind()
                        .await
                    {
                        let message = agent_kernel::actor::panic_message(panic.as_ref());
                        tracing::error!(%message, "a step of the live supervisors panicked");
                    }
                }
                #[cfg(target_arch = "wasm32")]
                state.handle(msg).await;
            }
            Ok::<(), std::convert::Infallible>(())
        },
    )
}

impl Supervisors {
    async fn handle(&mut self, msg: LiveMsg) {
        match msg {
            LiveMsg::Supervisor { run, reply } => reply.send(self.supervisor(&run).await),
            LiveMsg::Find { run, reply } => reply.send(self.live_addr(&run)),
            LiveMsg::Start { request, reply } => reply.send(self.start(*request).await),
            LiveMsg::Recover { run, lost, reply } => {
                reply.send(self.recover(*run, lost).await);
            }
        }
    }

    pub(super) fn live_addr(&self, run: &RunId) -> Option<Addr<Msg>> {
        self.live.get(run).filter(|a| !a.is_stopped()).cloned()
    }

    /// The run's supervisor, spawned (taking the lease) when none is live.
    async fn supervisor(&mut self, run: &RunId) -> Result<Addr<Msg>, RunError> {
        if let Some(addr) = self.live_addr(run) {
            return Ok(addr);
        }
        let storage = self.ctx.host.storage.clone();
        let (record, bytes) = load_run(&*storage, run).await?;
        if record.status.is_final() {
            return Err(RunError::WrongStatus {
                run: run.clone(),
                status: record.status,
                expected: "not final",
                action: "this command",
            });
        }
        let guard = self.leases.acquire(&record.session).await?;
        // Reload under the lease: another tab may have written meanwhile.
        let (record, bytes) = match load_run(&*storage, run).await {
            Ok(r) => r,
            Err(_) => (record, bytes),
        };
        let writer = open_writer(&self.ctx, guard.fence(), record, bytes).await?;
        self.spawn(writer, guard).await
    }

    /// Spawn the supervisor of `writer`'s run, fenced by `guard`.
    pub(super) async fn spawn(
        &mut self,
        writer: RunWriter,
        guard: LeaseGuard,
    ) -> Result<Addr<Msg>, RunError> {
        let id = writer.run.id.clone();
        let sup = Supervisor::load(self.ctx.clone(), writer, guard).await?;
        // Held before it can end: its end report releases it (or its task,
        // dropped unfinished).
        self.held.hold(&id);
        let abandoned = ReleaseIfAbandoned(Release::new(self.held.clone(), id.clone()));
        let addr = spawn_actor(
            &*self.ctx.host.executor,
            &supervisor_name(&id),
            self.ctx.options.mailbox,
            Some(self.reports.clone()),
            move |inbox| async move {
                // Natively a panic is reported too (the actor's wrapper
                // catches it again): the run stays held until it is handled.
                #[cfg(not(target_arch = "wasm32"))]
                let ended = {
                    use futures::FutureExt;
                    match std::panic::AssertUnwindSafe(sup.run(inbox))
                        .catch_unwind()
                        .await
                    {
                        Ok(ended) => ended,
                        Err(panic) => {
                            abandoned.reported();
                            std::panic::resume_unwind(panic)
                        }
                    }
                };
                #[cfg(target_arch = "wasm32")]
                let ended = sup.run(inbox).await;
                abandoned.reported();
                ended
            },
        );
        self.live.insert(id, addr.clone());
        Ok(addr)
    }
}

/// A writer for a stored run (`bytes` its stored record), under `fence`.
pub(super) async fn open_writer(
    ctx: &Ctx,
    fence: Fence,
    run: AgentRun,
    bytes: Vec<u8>,
) -> Result<RunWriter, RunError> {
    Ok(RunWriter::open(
        ctx.host.storage.clone(),
        ctx.host.clock.clone(),
        ctx.events.clone(),
        fence,
        run,
        bytes,
    )
    .await?)
}

/// The runs a supervisor of this runtime holds, counted from just before
/// the supervisor is spawned until its end has been handled (its report
/// read and, for a supervisor lost by a panic or its storage, its run
/// interrupted). While a run is held its stored status may still change
/// here; once it is not, every write this runtime made to it is durable, so
/// a read after seeing it not held is final. Each release is announced to
/// the subscribers, so that a waiter hears of a supervisor that ended
/// without changing its run's status (a lost lease, a failure).
#[derive(Default)]
pub(super) struct Held {
    counts: Mutex<HashMap<RunId, usize>>,
    released: Mutex<Vec<async_channel::Sender<RunId>>>,
}

impl Held {
    pub(super) fn hold(&self, run: &RunId) {
        if let Ok(mut counts) = self.counts.lock() {
            *counts.entry(run.clone()).or_default() += 1;
        }
    }

    pub(super) fn release(&self, run: &RunId) {
        if let Ok(mut counts) = self.counts.lock()
            && let Some(n) = counts.get_mut(run)
        {
            *n -= 1;
            if *n == 0 {
                counts.remove(run);
            }
        }
        if let Ok(mut subs) = self.released.lock() {
            subs.retain(|tx| tx.try_send(run.clone()).is_ok());
        }
    }

    pub(super) fn is_held(&self, run: &RunId) -> bool {
        self.counts.lock().is_ok_and(|c| c.contains_key(run))
    }

    pub(super) fn subscribe(&self) -> async_channel::Receiver<RunId> {
        let (tx, rx) = async_channel::unbounded();
        if let Ok(mut subs) = self.released.lock() {
            subs.push(tx);
        }
        rx
    }
}

/// Releases its run's hold when dropped: however the handling of a
/// supervisor's end goes (returns early, fails, its task is dropped), the
/// run is released exactly once.
struct Release {
    held: Arc<Held>,
    run: RunId,
    /// False once another release took over (see [`ReleaseIfAbandoned`]).
    armed: bool,
}

impl Release {
    fn new(held: Arc<Held>, run: RunId) -> Release {
        Release {
            held,
            run,
            armed: true,
        }
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        if self.armed {
            self.held.release(&self.run);
        }
    }
}

/// Carried by a supervisor's task: releases its run when the task is
/// dropped before the supervisor's loop ended (its executor killed, so no
/// end report will come). A loop that returns or panics is reported, and
/// the watcher of the reports releases the run after handling its end.
struct ReleaseIfAbandoned(Release);

impl ReleaseIfAbandoned {
    /// The loop ended: its report will follow.
    fn reported(mut self) {
        self.0.armed = false;
    }
}

/// The actor name of `run`'s supervisor; [`run_of_supervisor`] reads it back.
fn supervisor_name(run: &RunId) -> String {
    format!("supervisor:{run}")
}

fn run_of_supervisor(actor: &str) -> Option<RunId> {
    RunId::new(actor.strip_prefix("supervisor:")?).ok()
}

/// Natively a supervisor that panics is reported here: its run is lost
/// with it, so it is interrupted as a lost tab's would be (S2.5: the
/// replay rule settles its call in flight) with an `executor_lost`
/// activity, and waits for Resume. (In wasm32 a panic aborts the page;
/// the next page load recovers the run.)
///
/// One watcher reads every supervisor's end report for the runtime's
/// life (it holds the runtime weakly and ends with the last sender); a
/// run costs it nothing while it runs (issue 18 item 6). Each lost run
/// is interrupted in a task of its own, so that one waiting for its
/// store does not hold up the others.
pub(super) fn watch_supervisors(
    runtime: &Runtime,
    ends: async_channel::Receiver<ActorReport>,
) -> BoxFuture<'static, ()> {
    let weak = Arc::downgrade(&runtime.inner);
    let held = runtime.inner.held.clone();
    let executor = runtime.host().executor.clone();
    Box::pin(async move {
        while let Ok(report) = ends.recv().await {
            let Some(run) = run_of_supervisor(&report.actor) else {
                continue;
            };
            let release = Release::new(held.clone(), run.clone());
            if matches!(report.exit, ActorExit::Stopped) {
                drop(release);
                continue;
            }
            executor.spawn(Box::pin(interrupt_lost(weak.clone(), run, report, release)));
        }
    })
}

/// The run of a supervisor that ended as `report` says, interrupted if
/// it panicked or lost its storage; `_release` releases the run's hold
/// once that is done (or given up).
async fn interrupt_lost(
    weak: std::sync::Weak<super::Inner>,
    run: RunId,
    report: ActorReport,
    _release: Release,
) {
    let lost = match report.exit {
        ActorExit::Panicked(message) => {
            tracing::error!(run = %run, %message, "the supervisor panicked; its run is interrupted");
            "supervisor"
        }
        // A supervisor that could not reach its storage stopped without
        // writing (the outcome of its last write may be unknown): once the
        // store answers again, the run, if still `running`, is interrupted
        // from what is durable, and waits for Resume (S2.5, S14.1).
        ActorExit::Failed(message) if message.contains(STORAGE_LOST) => {
            tracing::warn!(run = %run, %message, "the supervisor lost its storage; its run is interrupted once the store answers");
            "storage"
        }
        _ => return,
    };
    loop {
        let Some(inner) = weak.upgrade() else { return };
        let runtime = Runtime { inner };
        let recovered = match load_run(&*runtime.host().storage, &run).await {
            Ok((record, _)) => runtime.recover_runs(vec![record], Some(lost)).await,
            Err(e) => Err(e),
        };
        match recovered {
            Ok(_) => return,
            Err(e) if e.is_storage_unavailable() => {
                let clock = runtime.host().clock.clone();
                drop(runtime);
                clock.sleep(std::time::Duration::from_millis(500)).await;
            }
            Err(e) => {
                tracing::error!(run = %run, error = %e, "could not interrupt the run of a lost supervisor");
                return;
            }
        }
    }
}
