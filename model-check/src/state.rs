//! The model's state and moves: the stored lease and journal, each owner's
//! view, the ghost flags the properties read, and the [`Action`]s (owners,
//! time, the person) that change them.

use agent_kernel::journal::CallState;

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
    pub(crate) fn is_final(self) -> bool {
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

impl State {
    /// Whether the person's "retry anyway" stands behind the current dispatch
    /// of `c` (one dispatch beyond the first per choice).
    pub(crate) fn retry_anyway_consumed(&self, c: usize) -> bool {
        self.dispatched[c] < 1 + self.retries_chosen[c]
    }
}
