//! The model's transition relation: which [`Action`]s are enabled at a
//! state, and the state each one leads to, every rule through the kernel.

use agent_kernel::host::lease_rules;
use agent_kernel::journal::CallState;

use crate::bound::Sabotage;
use crate::model::ProtocolModel;
use crate::state::{Action, Choice, Owner, State, Status};

impl ProtocolModel {
    /// The actions enabled at `state`; `fair` leaves out crashes, lifecycle
    /// events and the time bound.
    pub(crate) fn actions_into(&self, state: &State, actions: &mut Vec<Action>, fair: bool) {
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
    pub(crate) fn apply(&self, last: &State, action: Action, fair: bool) -> Option<State> {
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
