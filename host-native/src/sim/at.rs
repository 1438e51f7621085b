//! What happens to a tab and where: [`Interruption`] (a kill, or a
//! lifecycle event) at an [`At`] (a journal boundary, the n-th commit, after
//! n executor polls).

use agent_kernel::host::LifecycleEvent;

/// Where something happens to a tab (a kill, a lifecycle event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    /// The first commit that writes a journal record of `tool` in `state`
    /// (`prepared`, `running`, `committed`, ...). A kill refuses that commit.
    Journal { state: String, tool: String },
    /// The tab's n-th commit (1-based). A kill refuses it.
    Commit(u64),
    /// After n executor polls (an arbitrary await point).
    AfterPolls(u64),
}

/// Where a tab dies (the name the first simulator used).
pub type KillAt = At;

/// What happens at an [`At`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interruption {
    /// The tab dies: every task dropped, nothing cleaned up or released.
    Kill,
    /// The host raises this lifecycle event; the tab lives on.
    Raise(LifecycleEvent),
}
