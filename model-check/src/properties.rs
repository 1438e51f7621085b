//! The model as stateright sees it: the initial state (tab-0 has started
//! the run) and the properties every exploration checks.

use stateright::{Model, Property};

use crate::bound::{
    P_EFFECT_ONCE, P_EVENTUALLY_FINAL, P_ONE_EXECUTOR, P_PENDING_ONCE, P_RESUME_ONLY_ON_RESUME,
    P_RUNNING_FIRST, P_SETTLES, P_UNCERTAIN_NOT_REPLAYED,
};
use crate::model::ProtocolModel;
use crate::state::{Action, Owner, State, Status};

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
