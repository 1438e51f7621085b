//! The lease and journal protocol of one session as a model for the
//! stateright model checker (issue 40): two or three owners (tabs or
//! processes) race for the session's lease, one run of one or two tool calls
//! goes through the journal (`prepared`, `running`, `committed`, `failed`,
//! `effect_unknown`), with approvals, Resume, the person's decisions, and a
//! crash or lifecycle interruption possible at every step.
//!
//! The model re-describes none of the rules it checks: every lease step calls
//! `agent_kernel::host::lease_rules` (acquire, take over, renew, release),
//! every write checks `agent_kernel::host::Fence::check`, every journal move
//! goes through `JournalRecord::advance`, every look at an existing record
//! on resume asks `agent_kernel::journal::replay_decision`, and a pending
//! request is added under `Condition::check` (absent). Only the scheduling
//! around them (who acts when, what a tool answers, what the person clicks)
//! is the model's own, as in the supervisor.
//!
//! [`Sabotage`] swaps one rule for a faulty one; each must be caught
//! ([`check`] returns a counterexample, printed action by action by
//! [`Report::trace_text`]).
//!
//! # Example
//!
//! An exploration within a bound returns what it found; the small
//! bound runs in seconds even in a debug build, and a sabotaged rule must
//! yield a counterexample (`cargo xtask check-model` runs the CI bound):
//!
//! ```
//! use agent_model_check::{Bound, Report, Sabotage, check};
//!
//! let honest = check(Bound::SMALL, None).unwrap();
//! assert!(honest.violations.is_empty());
//! println!("{} states, none violates a property", honest.unique_states);
//!
//! let broken = check(Bound::SMALL, Some(Sabotage::NoFence)).unwrap();
//! let counterexample = &broken.violations[0];
//! println!("{}", Report::trace_text(counterexample));
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::time::{Duration, Instant};

use agent_capabilities::{EffectClass, Fingerprint, Idempotency};
use agent_kernel::host::lease_rules;
use agent_kernel::host::{BlobRef, Condition, Fence, LeaseRecord, Table};
use agent_kernel::ids::{CallId, OwnerId, RunId, SessionId};
use agent_kernel::journal::{
    CallState, JournalRecord, ReplayDecision, idempotency_key, replay_decision,
};
use stateright::{Checker, Model, Property};

/// One deliberately faulty rule swapped into the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sabotage {
    /// The crash simulator's `dispatch_before_running`: the call reaches its
    /// tool before its `running` record is durable.
    DispatchBeforeRunning,
    /// The crash simulator's `retry_unsafe_on_resume`: resume retries an
    /// in-flight call that the replay rule marks `effect_unknown`.
    RetryUnsafeOnResume,
    /// Writes skip the fence: a holder whose lease was taken keeps writing.
    NoFence,
    /// Acquiring an expired or released lease keeps its epoch (no new tenure).
    NoEpochBump,
    /// A new tenure continues a run that was running, without the person's Resume.
    AutoResume,
    /// Asking for an approval again stores a second pending request.
    AskApprovalTwice,
}

impl Sabotage {
    pub const ALL: [Sabotage; 6] = [
        Sabotage::DispatchBeforeRunning,
        Sabotage::RetryUnsafeOnResume,
        Sabotage::NoFence,
        Sabotage::NoEpochBump,
        Sabotage::AutoResume,
        Sabotage::AskApprovalTwice,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Sabotage::DispatchBeforeRunning => "dispatch_before_running",
            Sabotage::RetryUnsafeOnResume => "retry_unsafe_on_resume",
            Sabotage::NoFence => "no_fence",
            Sabotage::NoEpochBump => "no_epoch_bump",
            Sabotage::AutoResume => "auto_resume",
            Sabotage::AskApprovalTwice => "ask_approval_twice",
        }
    }

    pub fn parse(name: &str) -> Option<Sabotage> {
        Sabotage::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The property this sabotage is expected to break.
    pub fn breaks(self) -> &'static str {
        match self {
            Sabotage::DispatchBeforeRunning => P_RUNNING_FIRST,
            Sabotage::RetryUnsafeOnResume => P_UNCERTAIN_NOT_REPLAYED,
            Sabotage::NoFence | Sabotage::NoEpochBump => P_ONE_EXECUTOR,
            Sabotage::AutoResume => P_RESUME_ONLY_ON_RESUME,
            Sabotage::AskApprovalTwice => P_PENDING_ONCE,
        }
    }
}

pub const P_ONE_EXECUTOR: &str = "at most one executor per session";
pub const P_EFFECT_ONCE: &str = "no effect dispatched twice unless idempotent";
pub const P_UNCERTAIN_NOT_REPLAYED: &str =
    "an uncertain effect is never replayed without a decision";
pub const P_RESUME_ONLY_ON_RESUME: &str = "no resume without Resume";
pub const P_PENDING_ONCE: &str = "a pending approval is shown once";
pub const P_RUNNING_FIRST: &str = "nothing is dispatched before `running` is durable";
pub const P_EVENTUALLY_FINAL: &str = "every run eventually ends completed or failed";
pub const P_SETTLES: &str = "without crashes every state reaches a settled run";

/// The bound of one exploration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Bound {
    /// Owners (tabs or processes) racing for the session: 2 or 3.
    pub owners: u8,
    /// Tool calls of the run: 1 (an external write that needs approval) or
    /// 2 (then a read-only, idempotent call after it).
    pub calls: u8,
    /// Clock ticks the exploration may take (time stops there).
    pub max_time: u64,
    /// Lease time to live, in ticks.
    pub ttl: u64,
    /// Crashes and lifecycle interruptions in one run.
    pub max_crashes: u8,
    /// Longest path explored (stateright's target depth), if any.
    pub max_depth: Option<usize>,
}

impl Bound {
    /// The bound `cargo xtask test` checks (seconds in release, well under
    /// a minute in the debug test on two cores).
    pub const CI: Bound = Bound {
        owners: 3,
        calls: 2,
        max_time: 3,
        ttl: 2,
        max_crashes: 2,
        max_depth: None,
    };
    /// `--deep`: more time and one more crash than the CI bound.
    pub const DEEP: Bound = Bound {
        owners: 3,
        calls: 2,
        max_time: 4,
        ttl: 2,
        max_crashes: 3,
        max_depth: None,
    };
    /// The small bound the sabotage tests use (each finds its counterexample in it).
    pub const SMALL: Bound = Bound {
        owners: 2,
        calls: 1,
        max_time: 3,
        ttl: 2,
        max_crashes: 1,
        max_depth: None,
    };
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} owners, {} call(s), {} ticks, lease ttl {} ticks, {} crash(es)",
            self.owners, self.calls, self.max_time, self.ttl, self.max_crashes
        )?;
        match self.max_depth {
            Some(d) => write!(f, ", depth {d}"),
            None => write!(f, ", unbounded depth"),
        }
    }
}

/// The run's stored status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Status {
    Running,
    AwaitingApproval,
    Interrupted,
    Completed,
    Failed,
}

impl Status {
    fn is_final(self) -> bool {
        matches!(self, Status::Completed | Status::Failed)
    }
}

/// The stored lease record, compactly (converted to the kernel's `LeaseRecord`
/// for every rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lease {
    pub owner: u8,
    pub epoch: u64,
    pub expires: u64,
}

/// One call's journal record, compactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Entry {
    pub state: CallState,
    pub attempt: u32,
}

/// What one owner's process is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Owner {
    /// Not running (tab closed, process killed).
    Down,
    /// Running, holding no lease.
    Idle,
    /// Believes it holds the lease with `epoch`.
    Holding {
        epoch: u64,
        /// Recovery after taking the lease has run.
        recovered: bool,
        /// `running` is durable for this call: it may be dispatched.
        armed: Option<u8>,
        /// This call has reached its tool and not answered yet.
        in_flight: Option<u8>,
    },
}

/// The whole model state: storage, processes and the ghost variables the
/// properties read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    pub now: u64,
    pub lease: Option<Lease>,
    pub status: Status,
    pub journal: Vec<Option<Entry>>,
    /// Stored pending approval requests, per call.
    pub pending_approvals: Vec<u8>,
    /// A stored pending decision (effect unknown), per call.
    pub pending_decision: Vec<bool>,
    pub approved: Vec<bool>,
    /// The person chose "retry anyway" and resume has not retried yet.
    pub retry_anyway: Vec<bool>,
    /// A committed call's result blob is gone (its hash no longer verifies).
    pub result_lost: Vec<bool>,
    pub owners: Vec<Owner>,
    pub crashes: u8,
    // Ghosts.
    /// Times each call reached its tool.
    pub dispatched: Vec<u8>,
    /// "Retry anyway" choices per call.
    pub retries_chosen: Vec<u8>,
    /// The call reached its tool and its outcome is not known.
    pub uncertain: Vec<bool>,
    /// The epoch and owner of the last accepted write.
    pub last_write: Option<(u64, u8)>,
    /// A write was accepted from an older epoch, or from two owners in one.
    pub two_executors: bool,
    pub dispatched_before_running: bool,
    pub replayed_uncertain: bool,
    /// The run was interrupted and no person acted since.
    pub needs_person: bool,
    pub dispatched_without_person: bool,
}

/// One step of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Tick,
    Start(u8),
    Acquire(u8),
    TakeOver(u8),
    Renew(u8),
    Release(u8),
    Crash(u8),
    Lifecycle(u8),
    /// A committed call's result blob is lost (storage damage): counts as a crash.
    LoseResult(u8),
    Recover(u8),
    /// The holder's next supervisor step (prepare, ask, mark running, replay, finish).
    Step(u8),
    Dispatch(u8),
    /// The tool answers: 0 ok, 1 failed, 2 effect may have happened.
    Answer(u8, u8),
    Resume(u8),
    Approve(u8),
    Decide(u8, Choice),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Choice {
    RetryAnyway,
    MarkDone,
    Abandon,
}

/// The model: its bound, an optional sabotage and the kernel records it
/// hands the rules.
#[derive(Debug, Clone)]
pub struct ProtocolModel {
    pub bound: Bound,
    pub sabotage: Option<Sabotage>,
    session: SessionId,
    owner_ids: Vec<OwnerId>,
    templates: Vec<JournalRecord>,
}

/// Call 0: an external, non-idempotent write that asks for approval.
/// Call 1: a read-only, idempotent call that runs automatically.
fn call_template(index: u8) -> Result<JournalRecord, String> {
    let run = RunId::new("run-1").map_err(|e| e.to_string())?;
    let call_id = CallId::new(format!("call-{index}")).map_err(|e| e.to_string())?;
    let (tool, effects, idempotency) = if index == 0 {
        (
            "post_message",
            BTreeSet::from([EffectClass::WriteExternal]),
            Idempotency::NonIdempotent,
        )
    } else {
        (
            "fetch_page",
            BTreeSet::from([EffectClass::ReadNetwork]),
            Idempotency::Idempotent,
        )
    };
    let fingerprint = Fingerprint::from_hex(&"ab".repeat(32)).map_err(|e| e.to_string())?;
    Ok(JournalRecord {
        idempotency_key: idempotency_key(&run, &call_id),
        run,
        call_id,
        tool: tool.to_owned(),
        fingerprint,
        args: BlobRef::of(b"{}"),
        effects,
        idempotency,
        attempt: 1,
        state: CallState::Prepared,
        target_summary: None,
        result: None,
        receipts: Vec::new(),
        error: None,
        updated_at_ms: 0,
    })
}

impl ProtocolModel {
    pub fn new(bound: Bound, sabotage: Option<Sabotage>) -> Result<Self, String> {
        if !(2..=3).contains(&bound.owners) || !(1..=2).contains(&bound.calls) {
            return Err(format!(
                "the model has 2 or 3 owners and 1 or 2 calls, not {} and {}",
                bound.owners, bound.calls
            ));
        }
        let session = SessionId::new("session-1").map_err(|e| e.to_string())?;
        let owner_ids = (0..bound.owners)
            .map(|o| OwnerId::new(format!("tab-{o}")).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        let templates = (0..bound.calls)
            .map(call_template)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            bound,
            sabotage,
            session,
            owner_ids,
            templates,
        })
    }

    fn sabotaged(&self, s: Sabotage) -> bool {
        self.sabotage == Some(s)
    }

    fn calls(&self) -> usize {
        self.bound.calls as usize
    }

    fn record(&self, lease: &Lease) -> LeaseRecord {
        LeaseRecord {
            session: self.session.clone(),
            owner: self.owner_ids[lease.owner as usize].clone(),
            epoch: lease.epoch,
            expires_at_ms: lease.expires,
        }
    }

    fn compact(&self, record: &LeaseRecord) -> Lease {
        let owner = self
            .owner_ids
            .iter()
            .position(|o| o == &record.owner)
            .unwrap_or(0) as u8;
        Lease {
            owner,
            epoch: record.epoch,
            expires: record.expires_at_ms,
        }
    }

    /// The journal record of call `c` as the kernel sees it.
    fn journal_record(&self, c: usize, entry: Entry) -> JournalRecord {
        let mut record = self.templates[c].clone();
        record.state = entry.state;
        record.attempt = entry.attempt;
        record
    }

    /// Move call `c` with the kernel's `JournalRecord::advance`; an illegal
    /// move leaves the state unchanged (`None`: the step is not possible).
    fn advance(&self, state: &mut State, c: usize, to: CallState, attempt: u32) -> Option<()> {
        let entry = state.journal[c]?;
        let mut record = self.journal_record(c, entry);
        record.advance(to, state.now).ok()?;
        state.journal[c] = Some(Entry {
            state: record.state,
            attempt,
        });
        Some(())
    }

    /// The fenced write of owner `o` with `epoch`: the kernel's fence rule
    /// against the stored epoch (skipped under [`Sabotage::NoFence`]). On
    /// refusal the owner learns it lost the lease and drops everything.
    fn fenced(&self, state: &mut State, o: usize, epoch: u64) -> bool {
        let fence = Fence {
            session: self.session.clone(),
            epoch,
        };
        let accepted =
            self.sabotaged(Sabotage::NoFence) || fence.check(state.lease.map(|l| l.epoch)).is_ok();
        if !accepted {
            state.owners[o] = Owner::Idle;
            return false;
        }
        match state.last_write {
            Some((e, w)) if epoch < e || (epoch == e && w as usize != o) => {
                state.two_executors = true;
            }
            _ => {}
        }
        state.last_write = Some((epoch, o as u8));
        true
    }

    fn acquire_rule(&self, state: &State, o: usize) -> Option<Lease> {
        let current = state.lease.map(|l| self.record(&l));
        let record = lease_rules::acquire(
            current.as_ref(),
            &self.session,
            &self.owner_ids[o],
            state.now,
            self.bound.ttl,
        )
        .ok()?;
        let mut lease = self.compact(&record);
        if self.sabotaged(Sabotage::NoEpochBump)
            && let Some(cur) = state.lease
        {
            lease.epoch = cur.epoch;
        }
        Some(lease)
    }

    /// The first call that is not settled, if any.
    fn next_call(&self, state: &State) -> Option<usize> {
        (0..self.calls()).find(|&c| {
            !state.journal[c].is_some_and(|e| e.state.is_settled())
                || (state.result_lost[c]
                    && state.journal[c].is_some_and(|e| e.state == CallState::Committed))
        })
    }

    fn holding(state: &State, o: usize) -> Option<(u64, bool, Option<u8>, Option<u8>)> {
        match state.owners[o] {
            Owner::Holding {
                epoch,
                recovered,
                armed,
                in_flight,
            } => Some((epoch, recovered, armed, in_flight)),
            _ => None,
        }
    }

    fn set_armed(state: &mut State, o: usize, to: Option<u8>) {
        if let Owner::Holding { armed, .. } = &mut state.owners[o] {
            *armed = to;
        }
    }

    /// Add a pending approval for `c` under the kernel's absent condition.
    fn ask_approval(&self, state: &mut State, c: usize) {
        let key = format!("run-1/approval-{c}");
        let stored: Option<&[u8]> = (state.pending_approvals[c] > 0).then_some(b"pending");
        let absent = Condition::Absent {
            table: Table::Pending,
            key,
        };
        if absent.check(stored).is_ok() || self.sabotaged(Sabotage::AskApprovalTwice) {
            state.pending_approvals[c] = state.pending_approvals[c].saturating_add(1);
        }
        state.status = Status::AwaitingApproval;
    }

    /// The supervisor decided to dispatch (its `running` write, or the
    /// sabotaged early dispatch): the person must have acted since the last
    /// interruption. A holder's dispatch of a call armed earlier is not a new
    /// decision, so it is checked here, not at the dispatch.
    fn note_go_ahead(state: &mut State) {
        if state.needs_person {
            state.dispatched_without_person = true;
        }
    }

    fn block_on_unknown(state: &mut State, c: usize) {
        state.pending_decision[c] = true;
        state.status = Status::Interrupted;
        state.needs_person = true;
    }

    /// The holder's next supervisor step at a running run, in place.
    fn step(&self, state: &mut State, o: usize, epoch: u64) -> Option<()> {
        let Some(c) = self.next_call(state) else {
            if !self.fenced(state, o, epoch) {
                return Some(());
            }
            state.status = Status::Completed;
            return Some(());
        };
        let Some(entry) = state.journal[c] else {
            if !self.fenced(state, o, epoch) {
                return Some(());
            }
            state.journal[c] = Some(Entry {
                state: CallState::Prepared,
                attempt: 1,
            });
            return Some(());
        };
        // Every existing record goes through the kernel's replay rule.
        let verifies = !state.result_lost[c];
        let mut decision = replay_decision(&self.journal_record(c, entry), verifies);
        if entry.state == CallState::EffectUnknown && state.retry_anyway[c] {
            decision = ReplayDecision::Retry {
                attempt: entry.attempt.saturating_add(1),
            };
        }
        if decision == ReplayDecision::MarkEffectUnknown
            && self.sabotaged(Sabotage::RetryUnsafeOnResume)
        {
            decision = ReplayDecision::Retry {
                attempt: entry.attempt.saturating_add(1),
            };
        }
        match decision {
            ReplayDecision::Reuse | ReplayDecision::KeepFailed => None,
            ReplayDecision::Dispatch => {
                if c == 0 && !state.approved[c] {
                    if !self.fenced(state, o, epoch) {
                        return Some(());
                    }
                    self.ask_approval(state, c);
                    return Some(());
                }
                if self.sabotaged(Sabotage::DispatchBeforeRunning) {
                    // The call is carried out before anything is durable.
                    self.dispatch(state, o, c, false);
                    return Some(());
                }
                if !self.fenced(state, o, epoch) {
                    return Some(());
                }
                self.advance(state, c, CallState::Running, entry.attempt)?;
                Self::note_go_ahead(state);
                Self::set_armed(state, o, Some(c as u8));
                Some(())
            }
            ReplayDecision::Retry { attempt } => {
                if !self.fenced(state, o, epoch) {
                    return Some(());
                }
                self.advance(state, c, CallState::Running, attempt)?;
                Self::note_go_ahead(state);
                state.retry_anyway[c] = false;
                state.result_lost[c] = false;
                Self::set_armed(state, o, Some(c as u8));
                Some(())
            }
            ReplayDecision::MarkEffectUnknown => {
                if !self.fenced(state, o, epoch) {
                    return Some(());
                }
                self.advance(state, c, CallState::EffectUnknown, entry.attempt)?;
                state.result_lost[c] = false;
                Self::block_on_unknown(state, c);
                Some(())
            }
            ReplayDecision::Blocked => {
                if state.pending_decision[c] {
                    return None;
                }
                if !self.fenced(state, o, epoch) {
                    return Some(());
                }
                Self::block_on_unknown(state, c);
                Some(())
            }
        }
    }

    /// Call `c` reaches its tool: the ghosts see what was durable then.
    /// `armed`: its `running` write was accepted earlier (the call was in
    /// flight from then on, however late it reaches the tool); otherwise the
    /// sabotaged early dispatch, checked against what is durable now.
    fn dispatch(&self, state: &mut State, o: usize, c: usize, armed: bool) {
        if !armed && state.journal[c].map(|e| e.state) != Some(CallState::Running) {
            state.dispatched_before_running = true;
            Self::note_go_ahead(state);
        }
        let safe = self
            .journal_record(
                c,
                Entry {
                    state: CallState::Running,
                    attempt: 1,
                },
            )
            .retry_is_safe();
        if !safe {
            if state.uncertain[c] && !state.retry_anyway_consumed(c) {
                state.replayed_uncertain = true;
            }
            state.uncertain[c] = true;
        }
        state.dispatched[c] = state.dispatched[c].saturating_add(1);
        if let Owner::Holding {
            armed, in_flight, ..
        } = &mut state.owners[o]
        {
            *armed = None;
            *in_flight = Some(c as u8);
        }
    }

    fn is_safe(&self, c: usize) -> bool {
        self.templates[c].retry_is_safe()
    }

    /// Greedy fair schedule with no crashes and no lifecycle events: the
    /// holder steps, the person answers, time passes, an idle owner takes
    /// the lease. True when it reaches a settled run (final, or waiting only
    /// for the person's decision on an uncertain effect after choices ran out).
    pub fn settles_without_crashes(&self, start: &State) -> bool {
        let mut state = start.clone();
        for _ in 0..200 {
            if state.status.is_final() {
                return true;
            }
            let Some(next) = self.fair_action(&state) else {
                return false;
            };
            state = next;
        }
        false
    }

    fn fair_action(&self, state: &State) -> Option<State> {
        let mut candidates = Vec::new();
        self.actions_into(state, &mut candidates, true);
        let classes: [fn(&Action) -> bool; 10] = [
            |a| matches!(a, Action::Answer(_, 0)),
            |a| matches!(a, Action::Dispatch(_)),
            |a| matches!(a, Action::Recover(_)),
            |a| matches!(a, Action::Step(_)),
            |a| matches!(a, Action::Approve(_)),
            |a| matches!(a, Action::Decide(_, Choice::MarkDone)),
            |a| matches!(a, Action::Resume(_)),
            |a| matches!(a, Action::Acquire(_)),
            |a| matches!(a, Action::TakeOver(_)),
            |a| matches!(a, Action::Start(_)),
        ];
        for class in classes {
            for action in candidates.iter().filter(|a| class(a)) {
                if let Some(next) = self.apply(state, *action, true) {
                    return Some(next);
                }
            }
        }
        // Time passes for the fair schedule even past the bound.
        self.apply(state, Action::Tick, true)
    }

    /// The actions enabled at `state`; `fair` leaves out crashes, lifecycle
    /// events and the time bound.
    fn actions_into(&self, state: &State, actions: &mut Vec<Action>, fair: bool) {
        if state.status.is_final()
            && state
                .owners
                .iter()
                .all(|o| !matches!(o, Owner::Holding { .. }))
        {
            return;
        }
        if state.now < self.bound.max_time {
            actions.push(Action::Tick);
        }
        let can_crash = !fair && state.crashes < self.bound.max_crashes;
        if can_crash && !state.status.is_final() {
            for c in 0..self.bound.calls {
                let committed =
                    state.journal[c as usize].is_some_and(|e| e.state == CallState::Committed);
                if committed && !state.result_lost[c as usize] {
                    actions.push(Action::LoseResult(c));
                }
            }
        }
        for o in 0..self.bound.owners {
            let i = o as usize;
            match state.owners[i] {
                Owner::Down => {
                    if !state.status.is_final() {
                        actions.push(Action::Start(o));
                    }
                }
                Owner::Idle => {
                    if state.status.is_final() {
                        continue;
                    }
                    actions.push(Action::Acquire(o));
                    if let Some(l) = state.lease
                        && state.owners[l.owner as usize] == Owner::Down
                    {
                        actions.push(Action::TakeOver(o));
                    }
                    if can_crash {
                        actions.push(Action::Crash(o));
                    }
                }
                Owner::Holding {
                    recovered,
                    armed,
                    in_flight,
                    ..
                } => {
                    if can_crash {
                        actions.push(Action::Crash(o));
                    }
                    if !fair {
                        actions.push(Action::Renew(o));
                    }
                    if let Some(c) = in_flight {
                        actions.push(Action::Answer(o, 0));
                        actions.push(Action::Answer(o, 1));
                        if !self.is_safe(c as usize) {
                            actions.push(Action::Answer(o, 2));
                        }
                        if can_crash {
                            actions.push(Action::Lifecycle(o));
                        }
                        continue;
                    }
                    if !recovered {
                        actions.push(Action::Recover(o));
                        continue;
                    }
                    if armed.is_some() {
                        actions.push(Action::Dispatch(o));
                        continue;
                    }
                    match state.status {
                        Status::Running => {
                            actions.push(Action::Step(o));
                            if can_crash {
                                actions.push(Action::Lifecycle(o));
                            }
                        }
                        Status::AwaitingApproval => actions.push(Action::Approve(o)),
                        Status::Interrupted => {
                            if state.pending_decision.iter().any(|&p| p) {
                                actions.push(Action::Decide(o, Choice::RetryAnyway));
                                actions.push(Action::Decide(o, Choice::MarkDone));
                                actions.push(Action::Decide(o, Choice::Abandon));
                            } else {
                                actions.push(Action::Resume(o));
                            }
                        }
                        Status::Completed | Status::Failed => {
                            actions.push(Action::Release(o));
                        }
                    }
                }
            }
        }
    }

    /// The state after `action`, or `None` when it changes nothing.
    fn apply(&self, last: &State, action: Action, fair: bool) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Tick => {
                if !fair && s.now >= self.bound.max_time {
                    return None;
                }
                s.now += 1;
            }
            Action::Start(o) => s.owners[o as usize] = Owner::Idle,
            Action::Acquire(o) => {
                let lease = self.acquire_rule(&s, o as usize)?;
                s.lease = Some(lease);
                s.owners[o as usize] = Owner::Holding {
                    epoch: lease.epoch,
                    recovered: false,
                    armed: None,
                    in_flight: None,
                };
            }
            Action::TakeOver(o) => {
                let current = s.lease.map(|l| self.record(&l));
                let record = lease_rules::take_over(
                    current.as_ref(),
                    &self.session,
                    &self.owner_ids[o as usize],
                    s.now,
                    self.bound.ttl,
                );
                let lease = self.compact(&record);
                s.lease = Some(lease);
                s.owners[o as usize] = Owner::Holding {
                    epoch: lease.epoch,
                    recovered: false,
                    armed: None,
                    in_flight: None,
                };
            }
            Action::Renew(o) => {
                let (epoch, ..) = Self::holding(&s, o as usize)?;
                let current = s.lease.map(|l| self.record(&l));
                match lease_rules::renew(
                    current.as_ref(),
                    &self.session,
                    &self.owner_ids[o as usize],
                    epoch,
                    s.now,
                    self.bound.ttl,
                ) {
                    Ok(record) => {
                        let lease = self.compact(&record);
                        if s.lease == Some(lease) {
                            return None;
                        }
                        s.lease = Some(lease);
                    }
                    Err(_) => s.owners[o as usize] = Owner::Idle,
                }
            }
            Action::Release(o) => {
                let (epoch, ..) = Self::holding(&s, o as usize)?;
                let current = s.lease.map(|l| self.record(&l));
                if let Ok(record) = lease_rules::release(
                    current.as_ref(),
                    &self.session,
                    &self.owner_ids[o as usize],
                    epoch,
                ) {
                    s.lease = Some(self.compact(&record));
                }
                s.owners[o as usize] = Owner::Idle;
            }
            Action::Crash(o) => {
                let current = Self::holding(&s, o as usize).is_some_and(|(epoch, ..)| {
                    s.lease.is_some_and(|l| l.owner == o && l.epoch == epoch)
                });
                if current && s.status == Status::Running {
                    s.needs_person = true;
                }
                s.owners[o as usize] = Owner::Down;
                s.crashes += 1;
            }
            Action::LoseResult(c) => {
                s.result_lost[c as usize] = true;
                s.crashes += 1;
            }
            Action::Lifecycle(o) => {
                let (epoch, ..) = Self::holding(&s, o as usize)?;
                s.crashes += 1;
                if self.fenced(&mut s, o as usize, epoch) {
                    // A call in flight stays `running`; Resume's replay rule settles it.
                    s.status = Status::Interrupted;
                    s.needs_person = true;
                    if let Owner::Holding {
                        armed, in_flight, ..
                    } = &mut s.owners[o as usize]
                    {
                        *armed = None;
                        *in_flight = None;
                    }
                }
            }
            Action::Recover(o) => {
                let (epoch, ..) = Self::holding(&s, o as usize)?;
                if s.status == Status::Running && !self.sabotaged(Sabotage::AutoResume) {
                    if !self.fenced(&mut s, o as usize, epoch) {
                        return Some(s);
                    }
                    s.status = Status::Interrupted;
                    s.needs_person = true;
                } else if s.status == Status::AwaitingApproval {
                    // Loading the run asks again for the approval its
                    // prepared call waits for (stored once: absent condition).
                    let c = (0..self.calls())
                        .find(|&c| s.journal[c].is_some_and(|e| e.state == CallState::Prepared));
                    if let Some(c) = c {
                        if !self.fenced(&mut s, o as usize, epoch) {
                            return Some(s);
                        }
                        self.ask_approval(&mut s, c);
                    }
                }
                if let Owner::Holding { recovered, .. } = &mut s.owners[o as usize] {
                    *recovered = true;
                }
            }
            Action::Step(o) => {
                let (epoch, ..) = Self::holding(&s, o as usize)?;
                self.step(&mut s, o as usize, epoch)?;
            }
            Action::Dispatch(o) => {
                let (_, _, armed, _) = Self::holding(&s, o as usize)?;
                self.dispatch(&mut s, o as usize, armed? as usize, true);
            }
            Action::Answer(o, outcome) => {
                let (epoch, _, _, in_flight) = Self::holding(&s, o as usize)?;
                let c = in_flight? as usize;
                if !self.fenced(&mut s, o as usize, epoch) {
                    return Some(s);
                }
                if let Owner::Holding { in_flight, .. } = &mut s.owners[o as usize] {
                    *in_flight = None;
                }
                let entry = s.journal[c]?;
                if entry.state != CallState::Running {
                    // Dispatched early under the sabotage: `running` now, then the outcome.
                    self.advance(&mut s, c, CallState::Running, entry.attempt)?;
                }
                match outcome {
                    0 => {
                        self.advance(&mut s, c, CallState::Committed, entry.attempt)?;
                        s.uncertain[c] = false;
                    }
                    1 => {
                        self.advance(&mut s, c, CallState::Failed, entry.attempt)?;
                        s.uncertain[c] = false;
                    }
                    _ => {
                        self.advance(&mut s, c, CallState::EffectUnknown, entry.attempt)?;
                        Self::block_on_unknown(&mut s, c);
                    }
                }
            }
            Action::Resume(o) => {
                let (epoch, ..) = Self::holding(&s, o as usize)?;
                if !self.fenced(&mut s, o as usize, epoch) {
                    return Some(s);
                }
                s.status = Status::Running;
                s.needs_person = false;
            }
            Action::Approve(o) => {
                let (epoch, ..) = Self::holding(&s, o as usize)?;
                let c = (0..self.calls()).find(|&c| s.pending_approvals[c] > 0)?;
                if !self.fenced(&mut s, o as usize, epoch) {
                    return Some(s);
                }
                s.pending_approvals[c] = 0;
                s.approved[c] = true;
                s.status = Status::Running;
                s.needs_person = false;
            }
            Action::Decide(o, choice) => {
                let (epoch, ..) = Self::holding(&s, o as usize)?;
                let c = (0..self.calls()).find(|&c| s.pending_decision[c])?;
                if choice == Choice::RetryAnyway && s.retries_chosen[c] >= 1 {
                    return None;
                }
                if !self.fenced(&mut s, o as usize, epoch) {
                    return Some(s);
                }
                s.pending_decision[c] = false;
                s.needs_person = false;
                let entry = s.journal[c]?;
                match choice {
                    Choice::RetryAnyway => {
                        s.retry_anyway[c] = true;
                        s.retries_chosen[c] += 1;
                        s.status = Status::Running;
                    }
                    Choice::MarkDone => {
                        self.advance(&mut s, c, CallState::Committed, entry.attempt)?;
                        s.uncertain[c] = false;
                        s.status = Status::Running;
                    }
                    Choice::Abandon => {
                        self.advance(&mut s, c, CallState::Failed, entry.attempt)?;
                        s.uncertain[c] = false;
                        s.status = Status::Failed;
                    }
                }
            }
        }
        Some(s)
    }
}

impl State {
    /// Whether the person's "retry anyway" stands behind the current dispatch
    /// of `c` (one dispatch beyond the first per choice).
    fn retry_anyway_consumed(&self, c: usize) -> bool {
        self.dispatched[c] < 1 + self.retries_chosen[c]
    }
}

impl Model for ProtocolModel {
    type State = State;
    type Action = Action;

    /// The person has just started the run in tab-0: it took the lease
    /// (through the kernel's acquire rule) and the run is running.
    fn init_states(&self) -> Vec<State> {
        let n = self.calls();
        let mut start = State {
            now: 0,
            lease: None,
            status: Status::Running,
            journal: vec![None; n],
            pending_approvals: vec![0; n],
            pending_decision: vec![false; n],
            approved: vec![false; n],
            retry_anyway: vec![false; n],
            result_lost: vec![false; n],
            owners: vec![Owner::Idle; self.bound.owners as usize],
            crashes: 0,
            dispatched: vec![0; n],
            retries_chosen: vec![0; n],
            uncertain: vec![false; n],
            last_write: None,
            two_executors: false,
            dispatched_before_running: false,
            replayed_uncertain: false,
            needs_person: false,
            dispatched_without_person: false,
        };
        match self.acquire_rule(&start, 0) {
            Some(lease) => {
                start.lease = Some(lease);
                start.owners[0] = Owner::Holding {
                    epoch: lease.epoch,
                    recovered: true,
                    armed: None,
                    in_flight: None,
                };
                vec![start]
            }
            None => Vec::new(),
        }
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        self.actions_into(state, actions, false);
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        self.apply(last, action, false)
    }

    fn within_boundary(&self, _state: &State) -> bool {
        true
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(P_ONE_EXECUTOR, |_, s: &State| !s.two_executors),
            Property::always(P_EFFECT_ONCE, |m: &ProtocolModel, s: &State| {
                (0..m.calls()).all(|c| m.is_safe(c) || s.dispatched[c] <= 1 + s.retries_chosen[c])
            }),
            Property::always(P_UNCERTAIN_NOT_REPLAYED, |_, s: &State| {
                !s.replayed_uncertain
            }),
            Property::always(P_RESUME_ONLY_ON_RESUME, |_, s: &State| {
                !s.dispatched_without_person
            }),
            Property::always(P_PENDING_ONCE, |_, s: &State| {
                s.pending_approvals.iter().all(|&p| p <= 1)
            }),
            Property::always(P_RUNNING_FIRST, |_, s: &State| !s.dispatched_before_running),
            Property::always(P_SETTLES, |m: &ProtocolModel, s: &State| {
                m.settles_without_crashes(s)
            }),
            Property::eventually(P_EVENTUALLY_FINAL, |_, s: &State| s.status.is_final()),
            Property::sometimes("a run completes", |_, s: &State| {
                s.status == Status::Completed
            }),
        ]
    }
}

/// One property's counterexample: the actions from the initial state.
#[derive(Debug, Clone)]
pub struct Counterexample {
    pub property: &'static str,
    pub actions: Vec<Action>,
    pub states: Vec<State>,
}

/// What one exploration found.
#[derive(Debug, Clone)]
pub struct Report {
    pub bound: Bound,
    pub sabotage: Option<Sabotage>,
    pub unique_states: usize,
    pub max_depth: usize,
    pub elapsed: Duration,
    /// Broken `always` and `eventually` properties with their counterexample.
    pub violations: Vec<Counterexample>,
    /// `sometimes` properties never witnessed (a vacuous model would show here).
    pub unwitnessed: Vec<&'static str>,
}

impl Report {
    /// A counterexample as a readable trace, action by action.
    pub fn trace_text(ce: &Counterexample) -> String {
        let mut out = format!("counterexample for \"{}\":\n", ce.property);
        for (i, (action, state)) in ce.actions.iter().zip(ce.states.iter().skip(1)).enumerate() {
            let lease = match state.lease {
                Some(l) => format!("tab-{} epoch {} until t{}", l.owner, l.epoch, l.expires),
                None => "free".to_owned(),
            };
            let journal: Vec<String> = state
                .journal
                .iter()
                .enumerate()
                .map(|(c, e)| match e {
                    Some(e) => format!("call-{c} {:?}#{}", e.state, e.attempt),
                    None => format!("call-{c} -"),
                })
                .collect();
            out.push_str(&format!(
                "  {:>2}. {:<26} t{} lease {}; run {:?}; {}; dispatched {:?}\n",
                i + 1,
                describe(action),
                state.now,
                lease,
                state.status,
                journal.join(", "),
                state.dispatched
            ));
        }
        out
    }
}

/// An action in the person's words.
pub fn describe(action: &Action) -> String {
    match action {
        Action::Tick => "time passes".to_owned(),
        Action::Start(o) => format!("tab-{o} opens"),
        Action::Acquire(o) => format!("tab-{o} acquires the lease"),
        Action::TakeOver(o) => format!("tab-{o} takes the lease over"),
        Action::Renew(o) => format!("tab-{o} renews"),
        Action::Release(o) => format!("tab-{o} releases"),
        Action::Crash(o) => format!("tab-{o} crashes"),
        Action::Lifecycle(o) => format!("tab-{o} is frozen/hidden"),
        Action::LoseResult(c) => format!("call-{c}'s result blob is lost"),
        Action::Recover(o) => format!("tab-{o} recovers the run"),
        Action::Step(o) => format!("tab-{o} supervisor step"),
        Action::Dispatch(o) => format!("tab-{o} dispatches"),
        Action::Answer(o, 0) => format!("tab-{o} tool answers ok"),
        Action::Answer(o, 1) => format!("tab-{o} tool fails"),
        Action::Answer(o, _) => format!("tab-{o} tool: effect unknown"),
        Action::Resume(o) => format!("person: Resume in tab-{o}"),
        Action::Approve(o) => format!("person: approve in tab-{o}"),
        Action::Decide(o, c) => format!("person: {c:?} in tab-{o}"),
    }
}

/// Explore every interleaving within `bound` (breadth first, every core).
pub fn check(bound: Bound, sabotage: Option<Sabotage>) -> Result<Report, String> {
    let model = ProtocolModel::new(bound, sabotage)?;
    let started = Instant::now();
    // A sabotaged model runs on one thread: breadth first in one thread
    // finds a shortest counterexample, the easiest trace to read.
    let threads = match sabotage {
        Some(_) => 1,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let mut builder = model.clone().checker().threads(threads);
    if let Some(depth) = bound.max_depth {
        builder = builder.target_max_depth(depth);
    }
    let checker = builder.spawn_bfs().join();
    let elapsed = started.elapsed();
    let mut violations = Vec::new();
    let mut unwitnessed = Vec::new();
    for property in model.properties() {
        let found = checker.discovery(property.name);
        match property.expectation {
            stateright::Expectation::Sometimes => {
                if found.is_none() {
                    unwitnessed.push(property.name);
                }
            }
            _ => {
                if let Some(path) = found {
                    // The path up to the first state that breaks the
                    // property (the ghosts are sticky, so the checker's
                    // path may go on past it).
                    // An `eventually` counterexample is the whole path.
                    let pairs = path.into_vec();
                    let last = pairs.len().saturating_sub(1);
                    let first_bad = match property.expectation {
                        stateright::Expectation::Always => pairs
                            .iter()
                            .position(|(s, _)| !(property.condition)(&model, s))
                            .unwrap_or(last),
                        _ => last,
                    };
                    let pairs = &pairs[..=first_bad];
                    let states = pairs.iter().map(|(s, _)| s.clone()).collect();
                    // Each pair holds a state and the action taken from it.
                    let actions = pairs[..first_bad].iter().filter_map(|(_, a)| *a).collect();
                    violations.push(Counterexample {
                        property: property.name,
                        actions,
                        states,
                    });
                }
            }
        }
    }
    Ok(Report {
        bound,
        sabotage,
        unique_states: checker.unique_state_count(),
        max_depth: checker.max_depth(),
        elapsed,
        violations,
        unwitnessed,
    })
}
