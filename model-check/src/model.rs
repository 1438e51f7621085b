//! [`ProtocolModel`]: the kernel records the rules are handed, and the
//! supervisor's steps built on those rules (fenced writes, acquire, the
//! holder's next step, dispatch) and the fair schedule without crashes.

use std::collections::BTreeSet;

use agent_capabilities::{EffectClass, Fingerprint, Idempotency};
use agent_kernel::host::lease_rules;
use agent_kernel::host::{BlobRef, Condition, Fence, LeaseRecord, Table};
use agent_kernel::ids::{CallId, OwnerId, RunId, SessionId};
use agent_kernel::journal::{
    CallState, JournalRecord, ReplayDecision, idempotency_key, replay_decision,
};

use crate::bound::{Bound, Sabotage};
use crate::state::{Action, Choice, Entry, Lease, Owner, State, Status};

/// hands the rules.
#[derive(Debug, Clone)]
pub struct ProtocolModel {
    pub bound: Bound,
    pub sabotage: Option<Sabotage>,
    pub(crate) session: SessionId,
    pub(crate) owner_ids: Vec<OwnerId>,
    pub(crate) templates: Vec<JournalRecord>,
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

    pub(crate) fn sabotaged(&self, s: Sabotage) -> bool {
        self.sabotage == Some(s)
    }

    pub(crate) fn calls(&self) -> usize {
        self.bound.calls as usize
    }

    pub(crate) fn record(&self, lease: &Lease) -> LeaseRecord {
        LeaseRecord {
            session: self.session.clone(),
            owner: self.owner_ids[lease.owner as usize].clone(),
            epoch: lease.epoch,
            expires_at_ms: lease.expires,
        }
    }

    pub(crate) fn compact(&self, record: &LeaseRecord) -> Lease {
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
    pub(crate) fn journal_record(&self, c: usize, entry: Entry) -> JournalRecord {
        let mut record = self.templates[c].clone();
        record.state = entry.state;
        record.attempt = entry.attempt;
        record
    }

    /// Move call `c` with the kernel's `JournalRecord::advance`; an illegal
    /// move leaves the state unchanged (`None`: the step is not possible).
    pub(crate) fn advance(
        &self,
        state: &mut State,
        c: usize,
        to: CallState,
        attempt: u32,
    ) -> Option<()> {
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
    pub(crate) fn fenced(&self, state: &mut State, o: usize, epoch: u64) -> bool {
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

    pub(crate) fn acquire_rule(&self, state: &State, o: usize) -> Option<Lease> {
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
    pub(crate) fn next_call(&self, state: &State) -> Option<usize> {
        (0..self.calls()).find(|&c| {
            !state.journal[c].is_some_and(|e| e.state.is_settled())
                || (state.result_lost[c]
                    && state.journal[c].is_some_and(|e| e.state == CallState::Committed))
        })
    }

    pub(crate) fn holding(state: &State, o: usize) -> Option<(u64, bool, Option<u8>, Option<u8>)> {
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

    pub(crate) fn set_armed(state: &mut State, o: usize, to: Option<u8>) {
        if let Owner::Holding { armed, .. } = &mut state.owners[o] {
            *armed = to;
        }
    }

    /// Add a pending approval for `c` under the kernel's absent condition.
    pub(crate) fn ask_approval(&self, state: &mut State, c: usize) {
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
    pub(crate) fn note_go_ahead(state: &mut State) {
        if state.needs_person {
            state.dispatched_without_person = true;
        }
    }

    pub(crate) fn block_on_unknown(state: &mut State, c: usize) {
        state.pending_decision[c] = true;
        state.status = Status::Interrupted;
        state.needs_person = true;
    }

    /// The holder's next supervisor step at a running run, in place.
    pub(crate) fn step(&self, state: &mut State, o: usize, epoch: u64) -> Option<()> {
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
    pub(crate) fn dispatch(&self, state: &mut State, o: usize, c: usize, armed: bool) {
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

    pub(crate) fn is_safe(&self, c: usize) -> bool {
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

    pub(crate) fn fair_action(&self, state: &State) -> Option<State> {
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
}
