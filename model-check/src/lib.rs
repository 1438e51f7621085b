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

mod bound;
mod model;
mod properties;
mod report;
mod state;
mod transitions;

pub use bound::{
    Bound, P_EFFECT_ONCE, P_EVENTUALLY_FINAL, P_ONE_EXECUTOR, P_PENDING_ONCE,
    P_RESUME_ONLY_ON_RESUME, P_RUNNING_FIRST, P_SETTLES, P_UNCERTAIN_NOT_REPLAYED, Sabotage,
};
pub use model::ProtocolModel;
pub use report::{Counterexample, Report, check, describe};
pub use state::{Action, Choice, Entry, Lease, Owner, State, Status};
