//! What one exploration is asked: its [`Bound`] (owners, calls, time,
//! crashes, depth), the optional [`Sabotage`] swapped in for one rule, and
//! the names of the properties every exploration checks.

use std::fmt;

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
