//! One exploration and what it found: [`check`] runs the checker within a
//! bound, and a [`Report`] holds the counterexamples, readable action by
//! action.

use std::time::{Duration, Instant};

use stateright::{Checker, Model};

use crate::bound::{Bound, Sabotage};
use crate::model::ProtocolModel;
use crate::state::{Action, State};

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
