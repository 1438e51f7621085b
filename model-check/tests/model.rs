//! The model checker's own gate (issue 40 items 1 and 2): the honest model
//! has no violation at the CI bound, and each sabotaged rule yields a
//! counterexample for the property it breaks, printed as a trace.

use agent_model_check::{
    Action, Bound, P_ONE_EXECUTOR, P_SETTLES, ProtocolModel, Report, Sabotage, check,
};
use stateright::Model;

#[test]
fn honest_model_has_no_violation_at_the_ci_bound() {
    let report = check(Bound::CI, None).expect("valid bound");
    assert!(
        report.violations.is_empty(),
        "{}",
        report
            .violations
            .iter()
            .map(Report::trace_text)
            .collect::<String>()
    );
    // Not vacuous: a run completes somewhere, and the space is not tiny.
    assert!(report.unwitnessed.is_empty(), "{:?}", report.unwitnessed);
    assert!(report.unique_states > 100_000, "{}", report.unique_states);
}

#[test]
fn every_sabotage_yields_a_counterexample_for_the_property_it_breaks() {
    for sabotage in Sabotage::ALL {
        let report = check(Bound::SMALL, Some(sabotage)).expect("valid bound");
        let ce = report
            .violations
            .iter()
            .find(|v| v.property == sabotage.breaks())
            .unwrap_or_else(|| panic!("{} not caught: {:?}", sabotage.name(), report.violations));
        let trace = Report::trace_text(ce);
        assert!(trace.contains(sabotage.breaks()), "{trace}");
        assert_eq!(
            trace.lines().count(),
            ce.actions.len() + 1,
            "one line per action: {trace}"
        );
        assert!(!ce.actions.is_empty());
    }
}

#[test]
fn the_honest_model_at_the_small_bound_has_no_violation_either() {
    let report = check(Bound::SMALL, None).expect("valid bound");
    assert!(report.violations.is_empty());
}

#[test]
fn owners_and_calls_outside_the_model_are_refused() {
    for (owners, calls, ok) in [
        (1, 1, false),
        (2, 1, true),
        (3, 2, true),
        (4, 1, false),
        (2, 0, false),
        (2, 3, false),
    ] {
        let bound = Bound {
            owners,
            calls,
            ..Bound::SMALL
        };
        assert_eq!(
            ProtocolModel::new(bound, None).is_ok(),
            ok,
            "{owners} {calls}"
        );
    }
}

#[test]
fn lease_steps_go_through_the_kernel_rules() {
    // S3: a live lease of another owner is held; after expiry the next
    // tenure has epoch + 1 (the kernel's `lease_rules::acquire`).
    let model = ProtocolModel::new(Bound::SMALL, None).expect("valid");
    let start = model.init_states().remove(0);
    // The run starts in tab-0, which took the free lease: epoch 1.
    let a = start.clone();
    assert_eq!(a.lease.map(|l| (l.owner, l.epoch)), Some((0, 1)));
    assert!(model.next_state(&a, Action::Acquire(1)).is_none(), "held");
    let mut later = a.clone();
    for _ in 0..Bound::SMALL.ttl {
        later = model.next_state(&later, Action::Tick).expect("tick");
    }
    let b = model
        .next_state(&later, Action::Acquire(1))
        .expect("expired");
    assert_eq!(b.lease.map(|l| (l.owner, l.epoch)), Some((1, 2)));
    // The old holder's next write is refused by the fence: it drops to idle.
    let refused = model.next_state(&b, Action::Recover(0)).expect("step");
    assert_eq!(refused.owners[0], agent_model_check::Owner::Idle);
    assert!(!refused.two_executors);
    // Under the sabotage the expired lease keeps epoch 1 and both write.
    let sabotaged = ProtocolModel::new(Bound::SMALL, Some(Sabotage::NoEpochBump)).expect("valid");
    let mut s = sabotaged
        .next_state(&start, Action::Acquire(0))
        .expect("free");
    for _ in 0..Bound::SMALL.ttl {
        s = sabotaged.next_state(&s, Action::Tick).expect("tick");
    }
    s = sabotaged
        .next_state(&s, Action::Acquire(1))
        .expect("expired");
    s = sabotaged
        .next_state(&s, Action::Recover(1))
        .expect("recover");
    s = sabotaged
        .next_state(&s, Action::Resume(0))
        .expect("stale write passes");
    assert!(s.two_executors, "{P_ONE_EXECUTOR}");
}

#[test]
fn the_settle_check_fails_for_a_run_that_cannot_settle() {
    let model = ProtocolModel::new(Bound::SMALL, None).expect("valid");
    let start = model.init_states().remove(0);
    assert!(model.settles_without_crashes(&start), "{P_SETTLES}");
    // A hand-built inconsistent state: a decision pending for a call already
    // `committed`. "Mark as done" would be the illegal move committed ->
    // committed (refused by `JournalRecord::advance`), Resume waits for the
    // decision: nothing but time moves, and the check says so.
    let mut stuck = model.next_state(&start, Action::Acquire(0)).expect("free");
    stuck = model
        .next_state(&stuck, Action::Recover(0))
        .expect("recover");
    stuck.status = agent_model_check::Status::Interrupted;
    stuck.journal[0] = Some(agent_model_check::Entry {
        state: agent_kernel::journal::CallState::Committed,
        attempt: 1,
    });
    stuck.pending_decision[0] = true;
    assert!(!model.settles_without_crashes(&stuck));
}

#[test]
fn a_lost_result_is_replayed_by_the_kernel_replay_rule() {
    use agent_kernel::journal::CallState;
    use agent_model_check::{Entry, Status};
    // Both calls committed, then both result blobs lost: on the holder's
    // next steps `replay_decision(record, false)` marks the unsafe write
    // `effect_unknown` and asks, and would retry the safe read.
    let bound = Bound {
        calls: 2,
        ..Bound::SMALL
    };
    let model = ProtocolModel::new(bound, None).expect("valid");
    let mut s = model.init_states().remove(0);
    for c in 0..2 {
        s.journal[c] = Some(Entry {
            state: CallState::Committed,
            attempt: 1,
        });
        s.result_lost[c] = true;
    }
    let s = model.next_state(&s, Action::Step(0)).expect("step");
    assert_eq!(
        s.journal[0].map(|e| e.state),
        Some(CallState::EffectUnknown)
    );
    assert!(s.pending_decision[0]);
    assert_eq!(s.status, Status::Interrupted);
    let mut read_only = s.clone();
    read_only.journal[0] = Some(Entry {
        state: CallState::Committed,
        attempt: 1,
    });
    read_only.result_lost[0] = false;
    read_only.pending_decision[0] = false;
    read_only.status = Status::Running;
    let r = model.next_state(&read_only, Action::Step(0)).expect("step");
    assert_eq!(
        r.journal[1].map(|e| (e.state, e.attempt)),
        Some((CallState::Running, 2)),
        "retried with attempt + 1"
    );
}
