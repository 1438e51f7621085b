//! [`Tab`]: one simulated tab, a full assembly on its own deterministic
//! executor and lease owner: it opens, is killed or interrupted where it was
//! told, and acts for the person (approve, deny, answer, decide, stop).

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use agent_assembly::Assembly;
use agent_kernel::host::{
    Batch, Clock, Host, LeaseGuard, LifecycleEvent, ManualClock, Op, StorageError, Table,
};
use agent_kernel::journal::JournalRecord;
use agent_kernel::memory::SimExecutor;
use agent_kernel::run::{AgentRun, PendingKind, PendingRequest, RunStatus};
use agent_kernel::{CallId, OwnerId, RequestId, RunId, SessionId};
use agent_supervisor::sim::Checker;
use agent_supervisor::sim::tools::ToolLog;
use agent_supervisor::{Choice, RunConfig, RunError};

use crate::sqlite::{CommitHook, SqliteStorage};

use super::at::{At, Interruption};
use super::error::SimError;

/// How long a tab waits for a plugin's real answer before it gives up.
pub(crate) const EXTERNAL_WAIT: Duration = Duration::from_secs(60);

/// Lock `m`, whatever a panic left in it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while the lock was held (a failed test assertion) leaves the
    // data as it was: keep using it.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How the simulated person answers.
#[derive(Debug, Clone)]
pub struct Person {
    /// Approve every approval (otherwise deny).
    pub approve: bool,
    /// Answers to `ask_user`, in turn (repeated); "yes" when empty.
    pub answers: Vec<String>,
}

impl Default for Person {
    fn default() -> Self {
        Person {
            approve: true,
            answers: Vec::new(),
        }
    }
}

#[derive(Default)]
pub(crate) struct TabState {
    pub(crate) dead: AtomicBool,
    pub(crate) commits: AtomicU64,
    pub(crate) polls: AtomicU64,
    /// Interruptions that happened (kills and raised events).
    pub(crate) fired: AtomicU64,
    pub(crate) armed: Mutex<Vec<(At, Interruption)>>,
}

/// One simulated tab.
pub struct Tab {
    pub(crate) name: String,
    pub(crate) owner: OwnerId,
    pub(crate) executor: SimExecutor,
    pub(crate) clock: ManualClock,
    pub(crate) storage: Arc<SqliteStorage>,
    pub(crate) host: Host,
    pub(crate) assembly: Assembly,
    pub(crate) state: Arc<TabState>,
    pub(crate) in_flight: Arc<AtomicU64>,
    pub(crate) checker: Arc<Mutex<Checker>>,
    pub(crate) log: ToolLog,
    pub(crate) run_config: RunConfig,
    pub(crate) guards: Mutex<Vec<LeaseGuard>>,
    /// The MCP servers this tab connected (their connections live with it).
    pub(crate) _mcp: Vec<agent_mcp::McpServer>,
}

impl std::fmt::Debug for Tab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tab")
            .field("name", &self.name)
            .field("dead", &self.is_dead())
            .finish_non_exhaustive()
    }
}

pub(crate) fn journal_matches(batch: &Batch, state: &str, tool: &str) -> bool {
    batch.ops().iter().any(|op| match op {
        Op::Put {
            table: Table::Journal,
            value,
            ..
        } => serde_json::from_slice::<JournalRecord>(value).is_ok_and(|rec| {
            rec.tool == tool
                && serde_json::to_value(rec.state)
                    .ok()
                    .is_some_and(|v| v.as_str() == Some(state))
        }),
        _ => false,
    })
}

/// Wakes the future a tab drives.
#[derive(Default)]
pub(crate) struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Tab {
    pub(crate) fn install_hook(&self) {
        let state = self.state.clone();
        let lifecycle = self.host.lifecycle.clone();
        let hook: CommitHook = Arc::new(move |batch: &Batch| {
            let killed = || StorageError::Unavailable("the tab was killed".into());
            if state.dead.load(Ordering::SeqCst) {
                return Err(killed());
            }
            let n = state.commits.fetch_add(1, Ordering::SeqCst) + 1;
            let mut armed = lock(&state.armed);
            let mut die = false;
            armed.retain(|(at, what)| {
                let now = match at {
                    At::Commit(c) => n == *c,
                    At::Journal { state: s, tool } => journal_matches(batch, s, tool),
                    At::AfterPolls(_) => false,
                };
                if now {
                    state.fired.fetch_add(1, Ordering::SeqCst);
                    match what {
                        Interruption::Kill => die = true,
                        Interruption::Raise(event) => lifecycle.emit(*event),
                    }
                }
                !now
            });
            drop(armed);
            if die {
                state.dead.store(true, Ordering::SeqCst);
                return Err(killed());
            }
            Ok(())
        });
        self.storage.set_commit_hook(Some(hook));
    }

    /// The tab's lease owner id.
    pub fn owner(&self) -> &OwnerId {
        &self.owner
    }

    /// The tab's runtime (for anything this API does not wrap).
    pub fn runtime(&self) -> &agent_supervisor::Runtime {
        self.assembly.runtime()
    }

    /// The tab's assembly.
    pub fn assembly(&self) -> &Assembly {
        &self.assembly
    }

    /// Arm a kill: the tab dies when it reaches `at`.
    pub fn kill_at(&self, at: At) {
        self.interrupt_at(at, Interruption::Kill);
    }

    /// Arm a lifecycle event: the host raises `event` when the tab reaches `at`.
    pub fn raise_at(&self, at: At, event: LifecycleEvent) {
        self.interrupt_at(at, Interruption::Raise(event));
    }

    /// Arm an interruption at `at`.
    pub fn interrupt_at(&self, at: At, what: Interruption) {
        lock(&self.state.armed).push((at, what));
    }

    /// Interruptions that happened in this tab (kills and raised events).
    pub fn interruptions(&self) -> u64 {
        self.state.fired.load(Ordering::SeqCst)
    }

    /// The host raises `event` now (online, offline, page hidden, executor lost).
    pub fn raise(&self, event: LifecycleEvent) {
        self.host.lifecycle.emit(event);
    }

    /// Whether the tab's host is online.
    pub fn is_online(&self) -> bool {
        self.host.lifecycle.is_online()
    }

    /// Kill the tab now: every task is dropped, nothing is cleaned up, its
    /// leases stay until they expire.
    pub fn kill(&self) {
        self.state.dead.store(true, Ordering::SeqCst);
        // A killed tab releases nothing.
        for guard in lock(&self.guards).drain(..) {
            std::mem::forget(guard);
        }
        self.executor.kill();
    }

    /// Close the tab as a person does: the page is hidden (running work is
    /// interrupted), its session leases are released, then it is gone.
    pub fn close(&self) {
        if self.is_dead() {
            return;
        }
        self.raise(LifecycleEvent::PageHidden);
        self.drive();
        lock(&self.guards).clear();
        self.drive();
        self.state.dead.store(true, Ordering::SeqCst);
        self.executor.kill();
    }

    pub fn is_dead(&self) -> bool {
        self.state.dead.load(Ordering::SeqCst)
    }

    /// Run the tab's tasks until nothing can make progress or the tab dies
    /// (jumping the clock to pending sleeps, waiting for plugins' real
    /// answers). Returns the polls made.
    pub fn drive(&self) -> u64 {
        let before = self.state.polls.load(Ordering::SeqCst);
        self.drive_until(|| false);
        self.state.polls.load(Ordering::SeqCst) - before
    }

    /// Drive until `done()` (true) or until nothing can make progress or
    /// the tab dies (false).
    pub(crate) fn drive_until(&self, mut done: impl FnMut() -> bool) -> bool {
        loop {
            if done() {
                return true;
            }
            if self.is_dead() {
                self.kill();
                return false;
            }
            let polls = self.state.polls.load(Ordering::SeqCst);
            let due = {
                let mut armed = lock(&self.state.armed);
                let mut due = Vec::new();
                armed.retain(|(at, what)| match at {
                    At::AfterPolls(n) if polls >= *n => {
                        due.push(*what);
                        false
                    }
                    _ => true,
                });
                due
            };
            for what in due {
                self.state.fired.fetch_add(1, Ordering::SeqCst);
                match what {
                    Interruption::Kill => {
                        self.kill();
                        return false;
                    }
                    Interruption::Raise(event) => self.raise(event),
                }
            }
            if self.executor.step() {
                self.state.polls.fetch_add(1, Ordering::SeqCst);
                continue;
            }
            if done() {
                return true;
            }
            if self.in_flight.load(Ordering::SeqCst) > 0 {
                // A plugin's request is out: wait for its real answer.
                let started = Instant::now();
                while self.executor.ready_tasks() == 0
                    && self.in_flight.load(Ordering::SeqCst) > 0
                    && started.elapsed() < EXTERNAL_WAIT
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
                if self.executor.ready_tasks() > 0 {
                    continue;
                }
                if self.in_flight.load(Ordering::SeqCst) > 0 {
                    return false;
                }
                continue;
            }
            match self.clock.next_deadline() {
                Some(deadline) => self
                    .clock
                    .advance(deadline.saturating_sub(self.clock.monotonic())),
                None => return false,
            }
        }
    }

    /// Drive `fut` with the tab's tasks until it completes.
    pub(crate) fn block_on<T>(&self, fut: impl Future<Output = T>) -> Result<T, SimError> {
        if self.is_dead() {
            return Err(SimError::Dead(self.name.clone()));
        }
        let mut fut = pin!(fut);
        let flag = Arc::new(Flag(AtomicBool::new(true)));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        let mut out = None;
        self.drive_until(|| {
            if flag.0.swap(false, Ordering::SeqCst)
                && let Poll::Ready(v) = fut.as_mut().poll(&mut cx)
            {
                out = Some(v);
            }
            out.is_some()
        });
        match out {
            Some(v) => Ok(v),
            None if self.is_dead() => Err(SimError::Dead(self.name.clone())),
            None => Err(SimError::Stalled),
        }
    }

    pub(crate) fn act<T>(
        &self,
        fut: impl Future<Output = Result<T, RunError>>,
    ) -> Result<T, SimError> {
        match self.block_on(fut)? {
            Ok(v) => Ok(v),
            // Refused because the tab died under it.
            Err(_) if self.is_dead() => Err(SimError::Dead(self.name.clone())),
            Err(e) => Err(e.into()),
        }
    }

    /// The person acts on `run`: the next step of the simulation.
    pub(crate) fn person_acts(&self, run: &RunId) {
        let mut checker = lock(&self.checker);
        checker.person_acted(run);
        self.log.set_step(checker.next_step());
    }

    /// Open `session` in this tab: take its lease (kept until the tab
    /// closes), open its workspace, recover what another owner left running.
    pub fn open_session(&self, session: &str) -> Result<Vec<RunId>, SimError> {
        let session = SessionId::new(session)?;
        let opened = match self.block_on(self.assembly.open_session(&session))? {
            Ok(opened) => opened,
            Err(_) if self.is_dead() => return Err(SimError::Dead(self.name.clone())),
            Err(e) => return Err(e.into()),
        };
        lock(&self.checker).page_loaded(&opened.recovered);
        lock(&self.guards).push(opened.guard);
        Ok(opened.recovered)
    }

    /// Start a run in `session` with the wiring's run configuration (its
    /// lease is taken; refused with `RunError::Lease(Held)` while another
    /// live tab holds it).
    pub fn start(&self, session: &str, prompt: &str) -> Result<RunId, SimError> {
        self.start_with(session, prompt, self.run_config.clone())
    }

    pub fn start_with(
        &self,
        session: &str,
        prompt: &str,
        config: RunConfig,
    ) -> Result<RunId, SimError> {
        lock(&self.checker).forbid_raw_text(prompt);
        self.open_session(session)?;
        let id = SessionId::new(session)?;
        let run = self.act(self.runtime().start(&id, prompt, config))?;
        self.person_acts(&run);
        Ok(run)
    }

    /// Deep Research through the tab's assembly (S9): the start turn.
    pub fn start_research(
        &self,
        session: &str,
        topic: &str,
    ) -> Result<agent_assembly::ResearchStart, SimError> {
        self.open_session(session)?;
        let id = SessionId::new(session)?;
        let started = self.research(self.assembly.start_research(
            &id,
            topic,
            self.run_config.clone(),
        ))?;
        self.person_acts(&started.run);
        Ok(started)
    }

    /// Take a task as far as it goes without the person.
    pub fn advance_research(
        &self,
        session: &str,
        task: &agent_research::TaskId,
    ) -> Result<agent_research::view::ResearchView, SimError> {
        let id = SessionId::new(session)?;
        self.research(self.assembly.advance_research(&id, task))
    }

    /// The person decides the task's plan request; research goes on.
    pub fn decide_plan(
        &self,
        session: &str,
        task: &agent_research::TaskId,
        request: &RequestId,
        decision: agent_research::PlanDecision,
    ) -> Result<agent_research::view::ResearchView, SimError> {
        let id = SessionId::new(session)?;
        self.person_acts_on_research(&id);
        self.research(self.assembly.decide_plan(&id, task, request, decision))
    }

    /// The person's Resume of an interrupted task.
    pub fn resume_research(
        &self,
        session: &str,
        task: &agent_research::TaskId,
    ) -> Result<agent_research::view::ResearchView, SimError> {
        let id = SessionId::new(session)?;
        self.person_acts_on_research(&id);
        self.research(self.assembly.resume_research(&id, task))
    }

    /// The tasks of `session`, newest first (reads only).
    pub fn research_tasks(
        &self,
        session: &str,
    ) -> Result<Vec<agent_research::view::ResearchView>, SimError> {
        let id = SessionId::new(session)?;
        self.research(self.assembly.research_tasks(&id))
    }

    /// The person acts on a task: on every research run of the session.
    pub(crate) fn person_acts_on_research(&self, session: &SessionId) {
        let runs = self
            .block_on(self.runtime().runs())
            .ok()
            .and_then(Result::ok);
        let mut checker = lock(&self.checker);
        for run in runs.unwrap_or_default() {
            if &run.session == session && run.mode == agent_kernel::run::RunMode::Research {
                checker.person_acted(&run.id);
            }
        }
        self.log.set_step(checker.next_step());
    }

    pub(crate) fn research<T>(
        &self,
        fut: impl Future<Output = Result<T, agent_assembly::ResearchDeskError>>,
    ) -> Result<T, SimError> {
        match self.block_on(fut)? {
            Ok(v) => Ok(v),
            Err(_) if self.is_dead() => Err(SimError::Dead(self.name.clone())),
            Err(e) => Err(SimError::Research(e.to_string())),
        }
    }

    /// What a page load does: runs left `running` without a live lease
    /// become `interrupted`; nothing resumes by itself.
    pub fn recover(&self) -> Result<Vec<RunId>, SimError> {
        let recovered = self.act(self.runtime().recover())?;
        lock(&self.checker).page_loaded(&recovered);
        Ok(recovered)
    }

    /// The person's explicit resume.
    pub fn resume(&self, run: &RunId) -> Result<(), SimError> {
        self.person_acts(run);
        self.act(self.runtime().resume(run))
    }

    /// The person approves a pending approval.
    pub fn approve(&self, run: &RunId, request: &RequestId) -> Result<(), SimError> {
        self.person_acts(run);
        self.act(self.runtime().approve(run, request))
    }

    /// The person denies a pending approval.
    pub fn deny(&self, run: &RunId, request: &RequestId) -> Result<(), SimError> {
        self.person_acts(run);
        self.act(self.runtime().deny(run, request))
    }

    /// The person answers `ask_user`.
    pub fn respond(&self, run: &RunId, request: &RequestId, text: &str) -> Result<(), SimError> {
        lock(&self.checker).forbid_raw_text(text);
        self.person_acts(run);
        self.act(self.runtime().respond(run, request, text))
    }

    /// The person decides about a call whose effect is unknown; "retry
    /// anyway" allows the checker one more execution of it.
    pub fn decide(&self, run: &RunId, call: &CallId, choice: Choice) -> Result<(), SimError> {
        if choice == Choice::RetryAnyway {
            lock(&self.checker).retry_chosen(run, call);
        }
        self.person_acts(run);
        self.act(self.runtime().decide(run, call, choice))
    }

    /// The person stops the run (`cancelled` / `user_stopped`).
    pub fn stop(&self, run: &RunId) -> Result<(), SimError> {
        self.person_acts(run);
        self.act(self.assembly.stop(run))
    }

    /// The run as stored.
    pub fn run(&self, run: &RunId) -> Result<AgentRun, SimError> {
        let storage = self.storage.clone();
        let run = run.clone();
        let loaded = futures::executor::block_on(async move {
            agent_supervisor::store::load_run(&*storage, &run).await
        });
        Ok(loaded?.0)
    }

    /// Pending requests of the run.
    pub fn pending(&self, run: &RunId) -> Result<Vec<PendingRequest>, SimError> {
        let storage = self.storage.clone();
        let run = run.clone();
        futures::executor::block_on(async move {
            agent_supervisor::store::pending_of(&*storage, &run).await
        })
        .map_err(|e| SimError::Run(e.into()))
    }

    /// What the page shows of the run's pending requests: each once (S6.4);
    /// the checker sees what was shown.
    pub fn present_pending(&self, run: &RunId) -> Result<Vec<PendingRequest>, SimError> {
        let shown = self.act(self.runtime().present_pending(run))?;
        lock(&self.checker).shown(run, &shown);
        Ok(shown)
    }

    /// Act as `person` on `run` until it is final, waits for something the
    /// person does not answer, or the tab dies (`Err(Dead)`).
    pub fn settle(&self, run: &RunId, person: &Person) -> Result<RunStatus, SimError> {
        let mut answers = person.answers.iter().cycle();
        for _ in 0..24 {
            self.drive();
            if self.is_dead() {
                return Err(SimError::Dead(self.name.clone()));
            }
            let record = self.run(run)?;
            let pending = self.pending(run)?;
            let outcome = match record.status {
                RunStatus::AwaitingApproval => {
                    let Some(p) = pending
                        .iter()
                        .find(|p| matches!(p.kind, PendingKind::Approval { .. }))
                    else {
                        return Ok(record.status);
                    };
                    if person.approve {
                        self.approve(run, &p.id)
                    } else {
                        self.deny(run, &p.id)
                    }
                }
                RunStatus::AwaitingInput => {
                    let Some(p) = pending
                        .iter()
                        .find(|p| matches!(p.kind, PendingKind::Input { .. }))
                    else {
                        return Ok(record.status);
                    };
                    let answer = answers.next().map_or("yes", String::as_str);
                    self.respond(run, &p.id, answer)
                }
                RunStatus::Interrupted => {
                    if !self.is_online() {
                        // The person is back online before they resume.
                        self.raise(LifecycleEvent::Online);
                    }
                    let decision = pending.iter().find_map(|p| match &p.kind {
                        PendingKind::Decision { call_id, .. } => Some(call_id.clone()),
                        _ => None,
                    });
                    match decision {
                        Some(call) => {
                            // The person checks the target: done if the call
                            // reached its tool, otherwise retried.
                            let reached = lock(&self.checker)
                                .dispatches()
                                .iter()
                                .any(|d| &d.run == run && d.call == call);
                            let choice = if reached {
                                Choice::MarkDone
                            } else {
                                Choice::RetryAnyway
                            };
                            self.decide(run, &call, choice)
                        }
                        None => self.resume(run),
                    }
                }
                RunStatus::Running => {
                    // Nothing left to drive while `running`: its supervisor
                    // is gone (its lease lost); a reload would recover it.
                    self.act(self.runtime().recover_session(&record.session))
                        .map(|_| ())
                }
                status => return Ok(status),
            };
            // Any other refusal (busy, a decision pending, a lease) is the
            // runtime's answer to the person, not a failure of the tab.
            if let Err(SimError::Dead(name)) = outcome {
                return Err(SimError::Dead(name));
            }
        }
        Ok(self.run(run)?.status)
    }
}
