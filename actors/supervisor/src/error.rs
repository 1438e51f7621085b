//! Errors of the public run API. Each message says what was wrong and what to do.

use agent_kernel::ActorError;
use agent_kernel::host::{LeaseError, StorageError};
use agent_kernel::ids::{CallId, RequestId, RunId};
use agent_kernel::run::{RunStatus, TransitionError};

use crate::config::ConfigError;

/// A run command or query failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    #[error("run {0} does not exist")]
    NotFound(RunId),
    #[error("run {run} is {status}; {action} needs it to be {expected}")]
    WrongStatus {
        run: RunId,
        status: RunStatus,
        expected: &'static str,
        action: &'static str,
    },
    #[error("run {run} has no pending request {request}; it may have been answered already")]
    NoSuchRequest { run: RunId, request: RequestId },
    #[error("request {request} of run {run} is a {actual} request, not {expected}")]
    WrongRequestKind {
        run: RunId,
        request: RequestId,
        actual: &'static str,
        expected: &'static str,
    },
    #[error(
        "the answer to request {request} of run {run} was refused: {reason}; the run still waits for an answer"
    )]
    InvalidAnswer {
        run: RunId,
        request: RequestId,
        reason: String,
    },
    #[error("run {run} has no undecided call {call}")]
    NoSuchDecision { run: RunId, call: CallId },
    #[error(
        "run {run} cannot resume before the person decides about call {call} (its effect is unknown); answer with decide"
    )]
    DecisionPending { run: RunId, call: CallId },
    #[error("run {run} is busy with a model or tool round; only stop is accepted now")]
    Busy { run: RunId },
    #[error(transparent)]
    Transition(#[from] TransitionError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Lease(#[from] LeaseError),
    #[error("the run's supervisor is gone: {0}")]
    Actor(#[from] ActorError),
    #[error(transparent)]
    Id(#[from] agent_kernel::ids::IdError),
    #[error("stored data of run {run} is inconsistent: {detail}")]
    Inconsistent { run: RunId, detail: String },
    /// The model does not call tools, so it runs chat only (S13.1, S9.1).
    #[error(
        "model {model} does not call tools, so it cannot run in {mode} mode; start a chat run instead"
    )]
    ModelWithoutTools { model: String, mode: &'static str },
    /// The run names a model provider the host did not configure (S13.3).
    #[error(
        "no model provider named {name:?} is configured in this runtime; configure it first or start the run without one"
    )]
    UnknownProvider { name: String },
    /// A start under a chosen id found a run of that id stored already.
    #[error("run {0} exists already; a run is started once (look at it with show)")]
    AlreadyExists(RunId),
    /// A compaction the embedder asked for did not complete (S12.4):
    /// nothing was stored; it may be asked for again.
    #[error("the conversation of session {session} was not compacted: {detail}")]
    Compaction {
        session: agent_kernel::ids::SessionId,
        detail: String,
    },
}

impl RunError {
    /// True when the store could not be reached (a connection lost, a
    /// database restarting): nothing is known to be wrong with the run, and
    /// the same step may be taken again once the store answers.
    pub fn is_storage_unavailable(&self) -> bool {
        matches!(
            self,
            RunError::Storage(StorageError::Unavailable(_))
                | RunError::Lease(LeaseError::Storage(StorageError::Unavailable(_)))
        )
    }
}
