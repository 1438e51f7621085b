//! The public handle API used by hosts, the CLI and the browser: start runs
//! (and nested child runs), answer approvals, input and decisions, stop,
//! resume, recover after a reload, read runs back, and subscribe to events.
//! Commands go to the run's supervisor, spawned on demand; reads go straight
//! to storage, the source of truth.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use agent_kernel::actor::{Addr, spawn_actor};
use agent_kernel::host::{BlobRef, Host, LeaseManager, StorageExt, Table};
use agent_kernel::ids::{CallId, OwnerId, RequestId, RunId, SessionId};
use agent_kernel::journal::{CallState, JournalRecord, ReplayDecision, replay_decision};
use agent_kernel::protocol::ToolsAddr;
use agent_kernel::run::{
    Activity, ActivityKind, AgentRun, Checkpoint, CheckpointStage, Evidence, PendingRequest,
    RunMode, RunStatus, StopReason, Usage,
};

use crate::config::{RunConfig, RuntimeOptions};
use crate::conversation::{HistoryMessage, SessionConversation, history_budget_bytes};
use crate::error::RunError;
use crate::provider::ModelProvider;
use crate::store::{
    EventBus, RunEvent, RunMeta, RunWriter, journal_of, latest_checkpoint, load_run, pending_of,
    run_prefix, verified_blob,
};
use crate::supervisor::{Choice, Ctx, Msg, Supervisor, pending_key};
use crate::transcript::{Message, TranscriptLog, Window};

#[cfg(feature = "sim")]
use crate::sabotage::Sabotage;

/// How the message of a supervisor that stopped because its storage was
/// unreachable begins (see `Supervisor::fail_on_error`).
pub(crate) const STORAGE_LOST: &str = "storage lost: ";

struct Inner {
    ctx: Arc<Ctx>,
    leases: LeaseManager,
    live: Mutex<HashMap<RunId, Addr<Msg>>>,
    /// Serialises spawning, so that one run never gets two supervisors, and
    /// starts, so that a session's conversation has one writer at a time.
    spawning: futures::lock::Mutex<()>,
    /// Where every supervisor reports its end: one watcher per runtime
    /// ([`Runtime::watch_supervisors`]), not one task per run.
    reports: agent_kernel::actor::ParentLink,
    /// Which runs a supervisor of this runtime may still move: the one
    /// source of truth of [`Runtime::wait_settled`].
    held: Held,
    /// Called between the two steps of [`Runtime::wait_settled`] (tests only).
    #[cfg(feature = "test-hooks")]
    settle_hook: Mutex<Option<SettleHook>>,
}

/// What a test runs between `wait_settled`'s check of the run's
/// supervisor and its read of the run (feature `test-hooks` only).
#[cfg(feature = "test-hooks")]
pub type SettleHook =
    Arc<dyn Fn(Runtime, RunId) -> agent_kernel::maybe_send::BoxFuture<'static, ()> + Send + Sync>;

/// Begins the message logged when the test-only settle hook runs; a string
/// only that hook puts in a binary.
#[cfg(feature = "test-hooks")]
pub const SETTLE_HOOK_MARKER: &str = "test hook between wait_settled's steps";

/// The runs a supervisor of this runtime holds, counted from just before
/// the supervisor is spawned until its end has been handled (its report
/// read and, for a supervisor lost by a panic or its storage, its run
/// interrupted). While a run is held its stored status may still change
/// here; once it is not, every write this runtime made to it is durable, so
/// a read after seeing it not held is final. Each release is announced to
/// the subscribers, so that a waiter hears of a supervisor that ended
/// without changing its run's status (a lost lease, a failure).
#[derive(Default)]
struct Held {
    counts: Mutex<HashMap<RunId, usize>>,
    released: Mutex<Vec<async_channel::Sender<RunId>>>,
}

impl Held {
    fn hold(&self, run: &RunId) {
        if let Ok(mut counts) = self.counts.lock() {
            *counts.entry(run.clone()).or_default() += 1;
        }
    }

    fn release(&self, run: &RunId) {
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

    fn is_held(&self, run: &RunId) -> bool {
        self.counts.lock().is_ok_and(|c| c.contains_key(run))
    }

    fn subscribe(&self) -> async_channel::Receiver<RunId> {
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
    inner: std::sync::Weak<Inner>,
    run: RunId,
    /// False once another release took over (see [`ReleaseIfAbandoned`]).
    armed: bool,
}

impl Release {
    fn new(inner: std::sync::Weak<Inner>, run: RunId) -> Release {
        Release {
            inner,
            run,
            armed: true,
        }
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        if self.armed
            && let Some(inner) = self.inner.upgrade()
        {
            inner.held.release(&self.run);
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

/// What woke a waiter of [`Runtime::wait_settled`].
enum Wake {
    Event(RunEvent),
    Released(RunId),
}

/// The actor name of `run`'s supervisor; [`run_of_supervisor`] reads it back.
fn supervisor_name(run: &RunId) -> String {
    format!("supervisor:{run}")
}

fn run_of_supervisor(actor: &str) -> Option<RunId> {
    RunId::new(actor.strip_prefix("supervisor:")?).ok()
}

/// The runtime of one tab or process: every run it executes, over one host.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("owner", self.inner.leases.owner())
            .finish()
    }
}

/// A handle on one run: the same commands as [`Runtime`], bound to the run.
#[derive(Clone, Debug)]
pub struct RunHandle {
    runtime: Runtime,
    id: RunId,
}

impl RunHandle {
    pub fn id(&self) -> &RunId {
        &self.id
    }
    pub async fn get(&self) -> Result<AgentRun, RunError> {
        self.runtime.run(&self.id).await
    }
    pub async fn approve(&self, request: &RequestId) -> Result<(), RunError> {
        self.runtime.approve(&self.id, request).await
    }
    pub async fn deny(&self, request: &RequestId) -> Result<(), RunError> {
        self.runtime.deny(&self.id, request).await
    }
    pub async fn respond(&self, request: &RequestId, text: &str) -> Result<(), RunError> {
        self.runtime.respond(&self.id, request, text).await
    }
    pub async fn decide(&self, call: &CallId, choice: Choice) -> Result<(), RunError> {
        self.runtime.decide(&self.id, call, choice).await
    }
    pub async fn stop(&self) -> Result<(), RunError> {
        self.runtime.stop(&self.id).await
    }
    pub async fn resume(&self) -> Result<(), RunError> {
        self.runtime.resume(&self.id).await
    }
    pub async fn start_child(
        &self,
        prompt: &str,
        config: RunConfig,
    ) -> Result<RunHandle, RunError> {
        let child = self.runtime.start_child(&self.id, prompt, config).await?;
        Ok(self.runtime.handle(&child))
    }
    pub async fn wait_settled(&self) -> Result<AgentRun, RunError> {
        self.runtime.wait_settled(&self.id).await
    }
}

/// What a new run's transcript starts from.
#[derive(Default)]
struct ConversationStart {
    /// An embedder's history, first in the run's own first segment.
    history: Vec<Message>,
    /// The newest segment of the session's earlier turns.
    earlier: Option<BlobRef>,
    window: StartWindow,
    /// The session's conversation, when this start added turns to it.
    conversation: Option<SessionConversation>,
}

#[derive(Default)]
struct StartWindow {
    /// Messages before the run's first segment in its chain.
    from_len: u64,
    window: Window,
    kept_turns: u64,
    dropped_turns: u64,
}

impl Runtime {
    /// A runtime for `owner` (a tab or process) on `host`, talking to the
    /// tools actor at `tools` and the model through `provider`.
    pub fn new(
        host: Host,
        owner: OwnerId,
        tools: ToolsAddr,
        provider: Arc<dyn ModelProvider>,
        options: RuntimeOptions,
    ) -> Runtime {
        let leases = LeaseManager::new(
            host.storage.clone(),
            host.clock.clone(),
            host.executor.clone(),
            owner,
            options.lease_ttl,
        );
        Self::with_leases(host, leases, tools, provider, options)
    }

    /// [`Runtime::new`] with a lease manager the host built beforehand and
    /// shares with tools that take the session's lease themselves (the
    /// lease is reentrant per manager, S3.2: `start_deep_research` joins
    /// the lease of the turn that called it).
    pub fn with_leases(
        host: Host,
        leases: LeaseManager,
        tools: ToolsAddr,
        provider: Arc<dyn ModelProvider>,
        options: RuntimeOptions,
    ) -> Runtime {
        Self::from_parts(
            Ctx {
                host,
                tools,
                provider,
                options,
                events: EventBus::default(),
                #[cfg(feature = "sabotage")]
                sabotage: Sabotage::default(),
            },
            leases,
        )
    }

    /// A runtime over `ctx`, with its supervisors' watcher spawned.
    fn from_parts(ctx: Ctx, leases: LeaseManager) -> Runtime {
        let (reports, ends) = async_channel::unbounded();
        let runtime = Runtime {
            inner: Arc::new(Inner {
                ctx: Arc::new(ctx),
                leases,
                live: Mutex::new(HashMap::new()),
                spawning: futures::lock::Mutex::new(()),
                reports,
                held: Held::default(),
                #[cfg(feature = "test-hooks")]
                settle_hook: Mutex::new(None),
            }),
        };
        runtime
            .host()
            .executor
            .spawn(runtime.watch_supervisors(ends));
        runtime
    }

    /// The same runtime with deliberate faults (crash simulator test only,
    /// feature `sabotage`).
    #[cfg(feature = "sabotage")]
    pub fn with_sabotage(self, sabotage: Sabotage) -> Runtime {
        let inner = &self.inner;
        let ctx = &inner.ctx;
        Self::from_parts(
            Ctx {
                host: ctx.host.clone(),
                tools: ctx.tools.clone(),
                provider: ctx.provider.clone(),
                options: ctx.options.clone(),
                events: ctx.events.clone(),
                sabotage,
            },
            inner.leases.clone(),
        )
    }

    /// Without the feature `sabotage` a [`Sabotage`] chooses no fault (it
    /// has no fields): the runtime unchanged, so the simulator ships in a
    /// release build with no switch that could break its guarantees.
    #[cfg(all(feature = "sim", not(feature = "sabotage")))]
    pub fn with_sabotage(self, _none: Sabotage) -> Runtime {
        self
    }

    /// Renew this owner's leases every third of their time to live, for as
    /// long as the runtime exists. Hosts spawn it once on their executor;
    /// without it a lease lapses after `RuntimeOptions::lease_ttl` and another
    /// tab may take the session over (the fence then refuses this one's writes).
    pub fn heartbeat(&self) -> agent_kernel::maybe_send::BoxFuture<'static, ()> {
        let weak = Arc::downgrade(&self.inner);
        Box::pin(async move {
            loop {
                let (clock, period) = match weak.upgrade() {
                    Some(inner) => (
                        inner.ctx.host.clock.clone(),
                        inner.ctx.options.lease_ttl / 3,
                    ),
                    None => return,
                };
                clock
                    .sleep(period.max(std::time::Duration::from_millis(1)))
                    .await;
                let Some(inner) = weak.upgrade() else { return };
                for e in inner.leases.renew_all().await {
                    tracing::warn!(error = %e, "a session lease was lost");
                }
            }
        })
    }

    /// This owner's leases (the host renews them with `renew_all`).
    pub fn leases(&self) -> &LeaseManager {
        &self.inner.leases
    }

    /// Every activity and text delta of every run, from now on.
    /// Announce `event` to every subscriber (a host's own live events
    /// about the runs, such as a Deep Research task's phase).
    pub fn emit(&self, event: RunEvent) {
        self.inner.ctx.events.emit(event);
    }

    pub fn subscribe(&self) -> async_channel::Receiver<RunEvent> {
        self.inner.ctx.events.subscribe()
    }

    pub fn handle(&self, run: &RunId) -> RunHandle {
        RunHandle {
            runtime: self.clone(),
            id: run.clone(),
        }
    }

    fn host(&self) -> &Host {
        &self.inner.ctx.host
    }

    // ------------------------------------------------------------- starting

    /// Start a run in `session`: take the session's lease, store the prompt
    /// and config blobs, then the run record, and spawn its supervisor.
    pub async fn start(
        &self,
        session: &SessionId,
        prompt: &str,
        config: RunConfig,
    ) -> Result<RunId, RunError> {
        self.start_inner(session, None, None, prompt, config).await
    }

    /// [`Runtime::start`] under an id the caller chose beforehand (a run
    /// handed to a worker through a queue gets its id when it is queued, so
    /// that the caller can name it at once). Refused with
    /// [`RunError::AlreadyExists`] when a run of that id is stored: a
    /// queued start taken again after a lost worker never starts twice.
    pub async fn start_as(
        &self,
        id: RunId,
        session: &SessionId,
        prompt: &str,
        config: RunConfig,
    ) -> Result<RunId, RunError> {
        self.start_inner(session, None, Some(id), prompt, config)
            .await
    }

    /// Start a child run of `parent` in the same session, under the same
    /// (reentrant) lease; parent and child name each other in their records.
    pub async fn start_child(
        &self,
        parent: &RunId,
        prompt: &str,
        config: RunConfig,
    ) -> Result<RunId, RunError> {
        self.start_child_inner(parent, None, prompt, config).await
    }

    /// [`Runtime::start_child`] under an id the caller chose (a Deep
    /// Research phase's run is named after its task, so that a phase taken
    /// up again after a reload finds its run instead of starting a second);
    /// refused with [`RunError::AlreadyExists`] when a run of that id is
    /// stored.
    pub async fn start_child_as(
        &self,
        id: RunId,
        parent: &RunId,
        prompt: &str,
        config: RunConfig,
    ) -> Result<RunId, RunError> {
        self.start_child_inner(parent, Some(id), prompt, config)
            .await
    }

    async fn start_child_inner(
        &self,
        parent: &RunId,
        chosen: Option<RunId>,
        prompt: &str,
        config: RunConfig,
    ) -> Result<RunId, RunError> {
        let (parent_run, _) = load_run(&*self.host().storage, parent).await?;
        let child = self
            .start_inner(
                &parent_run.session,
                Some(parent.clone()),
                chosen,
                prompt,
                config,
            )
            .await?;
        // A parent supervisor found live may end before it reads the
        // request (its run finished meanwhile): then it wrote its last and
        // the parent's record is linked here instead (linking is idempotent).
        if let Some(addr) = self.live_addr(parent) {
            let c = child.clone();
            match addr.ask(|reply| Msg::LinkChild { child: c, reply }).await {
                Ok(linked) => return linked.map(|()| child),
                Err(e) => {
                    tracing::debug!(run = %parent, error = %e, "the parent's supervisor ended; linking its record directly");
                }
            }
        }
        let guard = self.inner.leases.acquire(&parent_run.session).await?;
        let (run, bytes) = load_run(&*self.host().storage, parent).await?;
        let mut writer = self.writer(guard.fence(), run, bytes).await?;
        crate::supervisor::link_child(&mut writer, child.clone()).await?;
        Ok(child)
    }

    async fn start_inner(
        &self,
        session: &SessionId,
        parent: Option<RunId>,
        chosen: Option<RunId>,
        prompt: &str,
        mut config: RunConfig,
    ) -> Result<RunId, RunError> {
        config.validate()?;
        // What the model can do decides what the run may be (S13.1, S9.1)
        // and, unless the run says otherwise, its context window.
        let provider = crate::provider::set::resolve(
            &self.inner.ctx.provider,
            config.model.provider.as_deref(),
        )
        .map_err(|_| RunError::UnknownProvider {
            name: config.model.provider.clone().unwrap_or_default(),
        })?;
        let capabilities = provider.capabilities(&config.model.model);
        if !capabilities.tool_calling && config.mode != RunMode::Chat {
            return Err(RunError::ModelWithoutTools {
                model: config.model.model.clone(),
                mode: match config.mode {
                    RunMode::Agent => "agent",
                    RunMode::Research => "research",
                    RunMode::Chat => "chat",
                },
            });
        }
        if config.model.context_window_tokens.is_none() {
            config.model.context_window_tokens = Some(
                capabilities
                    .context_window_tokens
                    .max(crate::conversation::MIN_CONTEXT_WINDOW_TOKENS),
            );
        }
        let host = self.host();
        // One start at a time in this process: the session's conversation
        // record is read, extended and written by the start's batch. (The
        // same order as `supervisor`: this lock, then the lease.)
        let _spawn = self.inner.spawning.lock().await;
        let guard = self.inner.leases.acquire(session).await?;
        let id = match chosen {
            // Checked under the session's lease: every writer of a run of
            // this session is fenced by it, so nobody creates it meanwhile.
            Some(id) => {
                if host.storage.get(Table::Runs, id.as_str()).await?.is_some() {
                    return Err(RunError::AlreadyExists(id));
                }
                id
            }
            None => RunId::new(agent_kernel::host::random_id(&*host.entropy, "run-"))?,
        };
        let storage = host.storage.clone();
        let start = self.conversation_start(session, &parent, &config).await?;
        let mut messages: Vec<Message> = start.history;
        messages.push(Message::User {
            content: prompt.to_owned(),
        });
        let now = host.clock.wall_ms();
        let run = AgentRun {
            id: id.clone(),
            session: session.clone(),
            parent,
            children: Vec::new(),
            mode: config.mode,
            status: RunStatus::Running,
            stop_reason: None,
            usage: Usage::default(),
            budget: config.budget,
            prompt: BlobRef::of(prompt.as_bytes()),
            output: None,
            plan: None,
            next_activity: 0,
            status_history: vec![RunStatus::Running],
            created_at_ms: now,
            updated_at_ms: now,
        };
        let mut writer = RunWriter::create(
            storage.clone(),
            host.clock.clone(),
            self.inner.ctx.events.clone(),
            guard.fence(),
            run,
        );
        let mut tx = writer.begin();
        // The prompt, the configuration and the first transcript segment
        // ride in the batch that writes the run: one durable commit.
        tx.blob(prompt.as_bytes().to_vec());
        let config_blob = tx.json_blob(&config)?;
        let (_, transcript_blob) =
            TranscriptLog::start_after(start.earlier, start.window.from_len, messages, |b| {
                tx.blob(b)
            })?;
        tx.put(&RunMeta {
            run: id.clone(),
            config: config_blob,
            window: start.window.window,
        });
        tx.put_row(crate::run_index::session_row(session, &id));
        tx.put_row(crate::run_index::live_row(&id));
        if let Some(conversation) = &start.conversation {
            tx.put(conversation);
        }
        if start.window.dropped_turns > 0 {
            tx.activity(ActivityKind::ConversationTrimmed {
                dropped_turns: start.window.dropped_turns,
                kept_turns: start.window.kept_turns,
            });
        }
        tx.checkpoint(
            CheckpointStage::BeforeModelRequest { round: 1 },
            transcript_blob,
        );
        writer.commit(tx).await?;
        tracing::info!(run = %id, session = %session, "run started");
        self.spawn(writer, guard).await?;
        Ok(id)
    }

    /// Where a new run's conversation starts (S12, [`crate::conversation`]):
    /// an embedder's `history`; nothing, for a child run or Deep Research;
    /// else its session's conversation, brought up to date with the runs
    /// that ended since and kept within the context rule.
    async fn conversation_start(
        &self,
        session: &SessionId,
        parent: &Option<RunId>,
        config: &RunConfig,
    ) -> Result<ConversationStart, RunError> {
        if let Some(history) = &config.history {
            let len = history.len() as u64;
            return Ok(ConversationStart {
                history: history.iter().map(HistoryMessage::to_message).collect(),
                earlier: None,
                window: StartWindow {
                    from_len: 0,
                    window: Window {
                        from: 0,
                        own_from: len,
                    },
                    kept_turns: 0,
                    dropped_turns: 0,
                },
                conversation: None,
            });
        }
        if parent.is_some() || !config.mode.is_conversation_turn() {
            return Ok(ConversationStart::default());
        }
        let storage = &*self.host().storage;
        let mut conversation = SessionConversation::load(storage, session).await?;
        let runs = crate::run_index::runs_of_session(storage, session).await?;
        let added = conversation.catch_up(storage, runs).await?;
        let kept = conversation.kept(history_budget_bytes(config.model.context_window()));
        Ok(ConversationStart {
            history: Vec::new(),
            earlier: conversation.head.clone(),
            window: StartWindow {
                from_len: conversation.len(),
                window: kept.window,
                kept_turns: kept.kept_turns,
                dropped_turns: kept.dropped_turns,
            },
            conversation: (added > 0).then_some(conversation),
        })
    }

    async fn writer(
        &self,
        fence: agent_kernel::host::Fence,
        run: AgentRun,
        bytes: Vec<u8>,
    ) -> Result<RunWriter, RunError> {
        let host = self.host();
        Ok(RunWriter::open(
            host.storage.clone(),
            host.clock.clone(),
            self.inner.ctx.events.clone(),
            fence,
            run,
            bytes,
        )
        .await?)
    }

    async fn spawn(
        &self,
        writer: RunWriter,
        guard: agent_kernel::host::LeaseGuard,
    ) -> Result<Addr<Msg>, RunError> {
        let id = writer.run.id.clone();
        let sup = Supervisor::load(self.inner.ctx.clone(), writer, guard).await?;
        // Held before it can end: its end report releases it (or its task,
        // dropped unfinished).
        self.inner.held.hold(&id);
        let abandoned = ReleaseIfAbandoned(Release::new(Arc::downgrade(&self.inner), id.clone()));
        let addr = spawn_actor(
            &*self.host().executor,
            &supervisor_name(&id),
            self.inner.ctx.options.mailbox,
            Some(self.inner.reports.clone()),
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
        if let Ok(mut live) = self.inner.live.lock() {
            live.insert(id, addr.clone());
        }
        Ok(addr)
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
    fn watch_supervisors(
        &self,
        ends: async_channel::Receiver<agent_kernel::actor::ActorReport>,
    ) -> agent_kernel::maybe_send::BoxFuture<'static, ()> {
        let weak = Arc::downgrade(&self.inner);
        let executor = self.host().executor.clone();
        Box::pin(async move {
            while let Ok(report) = ends.recv().await {
                let Some(run) = run_of_supervisor(&report.actor) else {
                    continue;
                };
                let release = Release::new(weak.clone(), run.clone());
                if matches!(report.exit, agent_kernel::actor::ActorExit::Stopped) {
                    drop(release);
                    continue;
                }
                executor.spawn(Box::pin(Self::interrupt_lost(
                    weak.clone(),
                    run,
                    report,
                    release,
                )));
            }
        })
    }

    /// The run of a supervisor that ended as `report` says, interrupted if
    /// it panicked or lost its storage; `_release` releases the run's hold
    /// once that is done (or given up).
    async fn interrupt_lost(
        weak: std::sync::Weak<Inner>,
        run: RunId,
        report: agent_kernel::actor::ActorReport,
        _release: Release,
    ) {
        {
            let lost = match report.exit {
                agent_kernel::actor::ActorExit::Panicked(message) => {
                    tracing::error!(run = %run, %message, "the supervisor panicked; its run is interrupted");
                    "supervisor"
                }
                // A supervisor that could not reach its storage stopped
                // without writing (the outcome of its last write may be
                // unknown): once the store answers again, the run, if still
                // `running`, is interrupted from what is durable, and
                // waits for Resume (S2.5, S14.1).
                agent_kernel::actor::ActorExit::Failed(message)
                    if message.contains(STORAGE_LOST) =>
                {
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
    }

    fn live_addr(&self, run: &RunId) -> Option<Addr<Msg>> {
        let live = self.inner.live.lock().ok()?;
        live.get(run).filter(|a| !a.is_stopped()).cloned()
    }

    /// The run's supervisor, spawned (taking the lease) when none is live.
    async fn supervisor(&self, run: &RunId) -> Result<Addr<Msg>, RunError> {
        let _spawn = self.inner.spawning.lock().await;
        if let Some(addr) = self.live_addr(run) {
            return Ok(addr);
        }
        let (record, bytes) = load_run(&*self.host().storage, run).await?;
        if record.status.is_final() {
            return Err(RunError::WrongStatus {
                run: run.clone(),
                status: record.status,
                expected: "not final",
                action: "this command",
            });
        }
        let guard = self.inner.leases.acquire(&record.session).await?;
        // Reload under the lease: another tab may have written meanwhile.
        let (record, bytes) = match load_run(&*self.host().storage, run).await {
            Ok(r) => r,
            Err(_) => (record, bytes),
        };
        let writer = self.writer(guard.fence(), record, bytes).await?;
        self.spawn(writer, guard).await
    }

    /// Send a command to the run's supervisor. One found live may end
    /// before it reads the command (its run ended, or it was interrupted
    /// and had handled its one command): a command it never received
    /// (`Stopped`) goes to the supervisor spawned for the run now, once;
    /// one it dropped unanswered is answered from the stored run, as for a
    /// run that had already ended when the run is final.
    async fn command(
        &self,
        run: &RunId,
        make: impl Fn(agent_kernel::actor::Reply<Result<(), RunError>>) -> Msg,
    ) -> Result<(), RunError> {
        let addr = self.supervisor(run).await?;
        let undelivered = match addr.ask(&make).await {
            Ok(result) => return result,
            Err(e @ agent_kernel::ActorError::Stopped { .. }) => e,
            Err(e) => return Err(self.ended_before_reading(run, e).await),
        };
        tracing::debug!(run = %run, error = %undelivered, "the run's supervisor ended before the command; sending it to the next");
        let addr = self.supervisor(run).await?;
        match addr.ask(&make).await {
            Ok(result) => result,
            Err(e) => Err(self.ended_before_reading(run, e).await),
        }
    }

    /// The answer to a command whose supervisor ended without answering:
    /// `WrongStatus` when the run is final now, else `lost`.
    async fn ended_before_reading(&self, run: &RunId, lost: agent_kernel::ActorError) -> RunError {
        match load_run(&*self.host().storage, run).await {
            Ok((record, _)) if record.status.is_final() => RunError::WrongStatus {
                run: run.clone(),
                status: record.status,
                expected: "not final",
                action: "this command",
            },
            Ok(_) => RunError::Actor(lost),
            Err(e) => e,
        }
    }

    // ------------------------------------------------------------- commands

    /// Approve a pending approval: a one-time capability is minted and the call runs.
    pub async fn approve(&self, run: &RunId, request: &RequestId) -> Result<(), RunError> {
        self.command(run, |reply| Msg::Approve {
            request: request.clone(),
            reply,
        })
        .await
    }

    /// Deny a pending approval: the model gets a denial result and the run goes on.
    pub async fn deny(&self, run: &RunId, request: &RequestId) -> Result<(), RunError> {
        self.command(run, |reply| Msg::Deny {
            request: request.clone(),
            reply,
        })
        .await
    }

    /// Answer an `ask_user` question.
    pub async fn respond(
        &self,
        run: &RunId,
        request: &RequestId,
        text: &str,
    ) -> Result<(), RunError> {
        self.command(run, |reply| Msg::Respond {
            request: request.clone(),
            text: text.to_owned(),
            reply,
        })
        .await
    }

    /// Decide about a call whose effect is unknown.
    pub async fn decide(&self, run: &RunId, call: &CallId, choice: Choice) -> Result<(), RunError> {
        self.command(run, |reply| Msg::Decide {
            call: call.clone(),
            choice,
            reply,
        })
        .await
    }

    /// Stop a run: `cancelled` / `user_stopped`. The supervisor tells the
    /// tools actor (`ToolsMsg::CancelRun`), which tells the tool actors
    /// holding the run's calls: a read in flight ends at once. A stop wins
    /// over a call that ends at the same moment, so the run still ends
    /// `cancelled` instead of going on to its next round.
    pub async fn stop(&self, run: &RunId) -> Result<(), RunError> {
        self.command(run, |reply| Msg::Stop { reply }).await
    }

    /// Continue an interrupted run — the only way one continues (S2.5).
    pub async fn resume(&self, run: &RunId) -> Result<(), RunError> {
        self.command(run, |reply| Msg::Resume { reply }).await
    }

    /// At page load (or process start): every run found `running` without a
    /// live lease of another owner becomes `interrupted` / `page_interrupted`;
    /// its in-flight journal records are settled by the replay rule. Nothing
    /// is resumed and no network work starts. Returns the runs recovered.
    pub async fn recover(&self) -> Result<Vec<RunId>, RunError> {
        let runs = crate::run_index::live_runs(&*self.host().storage).await?;
        self.recover_runs(runs, None).await
    }

    /// [`Runtime::recover`] for one session's runs: what a tab does when it
    /// takes over a session another tab left (closed or crashed) without
    /// waiting for the next page load.
    pub async fn recover_session(&self, session: &SessionId) -> Result<Vec<RunId>, RunError> {
        let runs = crate::run_index::runs_of_session(&*self.host().storage, session).await?;
        self.recover_runs(runs, None).await
    }

    /// Interrupt those of `runs` left `running` with no live supervisor
    /// here nor a live lease of another owner; `lost` names the executor
    /// lost with them when it is known (an `executor_lost` activity).
    async fn recover_runs(
        &self,
        runs: Vec<AgentRun>,
        lost: Option<&str>,
    ) -> Result<Vec<RunId>, RunError> {
        let storage = self.host().storage.clone();
        let mut recovered = Vec::new();
        for run in runs {
            if run.status != RunStatus::Running {
                continue;
            }
            // Under the spawning lock, so that no supervisor is spawned for
            // the run between the check that none is live and the
            // interruption (a command's, which would run it on a record
            // this then interrupts); the record is read again under the
            // lease, after the check: a supervisor that ended just before
            // it has made its writes durable.
            let _spawn = self.inner.spawning.lock().await;
            if self.live_addr(&run.id).is_some() {
                continue;
            }
            let now = self.host().clock.wall_ms();
            if let Some(lease) = storage.current_lease(&run.session).await?
                && lease.is_live(now)
                && &lease.owner != self.inner.leases.owner()
            {
                continue;
            }
            let guard = self.inner.leases.acquire(&run.session).await?;
            let (record, bytes) = load_run(&*storage, &run.id).await?;
            if record.status != RunStatus::Running {
                continue;
            }
            let mut writer = self.writer(guard.fence(), record, bytes).await?;
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
                    && !self.inner.ctx.retries_unsafely_on_resume()
                {
                    writer.mark_effect_unknown(&mut tx, &mut rec).await?;
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
            tracing::info!(run = %run.id, "recovered a run left running; it waits for resume");
            recovered.push(run.id);
        }
        Ok(recovered)
    }

    // ---------------------------------------------------------------- reads

    pub async fn run(&self, run: &RunId) -> Result<AgentRun, RunError> {
        Ok(load_run(&*self.host().storage, run).await?.0)
    }

    /// Every run stored, in key order.
    pub async fn runs(&self) -> Result<Vec<AgentRun>, RunError> {
        Ok(self.host().storage.scan_records("").await?)
    }

    /// The configuration `run` was started with (its stored blob).
    pub async fn config(&self, run: &RunId) -> Result<RunConfig, RunError> {
        let storage = &*self.host().storage;
        let meta = storage
            .get_record::<RunMeta>(&format!("run_config/{run}"))
            .await?
            .ok_or_else(|| RunError::NotFound(run.clone()))?;
        crate::store::json_blob(storage, run, &meta.config).await
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
        Ok(Some(
            crate::store::json_blob(&*self.host().storage, run, &blob).await?,
        ))
    }

    /// The bytes of a blob a record of `run` names, checked against its hash.
    pub async fn blob(
        &self,
        run: &RunId,
        blob: &agent_kernel::host::BlobRef,
    ) -> Result<Vec<u8>, RunError> {
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
