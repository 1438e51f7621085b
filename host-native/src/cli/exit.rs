//! Exit codes: what each error and each run status exits with (documented
//! in the book's CLI chapter, docs/src/guide/cli.md, and the crate docs).

use agent_assembly::SessionActionError;
use agent_host_native::app::AppError;
use agent_host_native::config::ConfigError;
use agent_host_native::host::HostError;
use agent_host_native::sqlite::OpenError;
use agent_kernel::IdError;
use agent_kernel::host::LeaseError;
use agent_kernel::run::{AgentRun, RunStatus, StopReason};
use agent_supervisor::RunError;

/// Exit codes (documented in docs/src/guide/cli.md and the crate docs).
pub(crate) mod code {
    pub const OK: u8 = 0;
    pub const USAGE: u8 = 2;
    pub const WAITING: u8 = 3;
    pub const FAILED: u8 = 4;
    pub const INTERRUPTED: u8 = 5;
}

/// An error with the exit code it deserves.
#[derive(Debug)]
pub(crate) struct Exit {
    pub(crate) code: u8,
    pub(crate) message: String,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}
impl std::error::Error for Exit {}

/// A session action the assembly refused (`agentrt attach`, `session …`,
/// `run --attach`): its stable code leads the message; a wrong argument,
/// path or name is a usage error (2), a quota or a busy session a refusal
/// (3), storage trouble a failure (4).
pub(crate) fn session_action(err: SessionActionError) -> anyhow::Error {
    let code = match err.code() {
        "quota_exceeded" | "session_busy" | "lease_lost" | "busy" => code::WAITING,
        "storage_error" | "actor_stopped" | "content_missing" => code::FAILED,
        _ => code::USAGE,
    };
    anyhow::Error::new(Exit {
        code,
        message: format!("{}: {err}", err.code()),
    })
}

pub(crate) fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Exit {
        code: code::USAGE,
        message: message.into(),
    })
}

/// The exit code for an error, by what it is.
pub(crate) fn code_of(err: &anyhow::Error) -> u8 {
    for cause in err.chain() {
        if let Some(e) = cause.downcast_ref::<Exit>() {
            return e.code;
        }
        if cause.is::<IdError>() || cause.is::<ConfigError>() || cause.is::<OpenError>() {
            return code::USAGE;
        }
        if let Some(e) = cause.downcast_ref::<HostError>() {
            return match e {
                HostError::DataDir { .. }
                | HostError::Open(_)
                | HostError::LeaseTtl(_)
                | HostError::StoreUrl(_) => code::USAGE,
                _ => code::FAILED,
            };
        }
        if let Some(e) = cause.downcast_ref::<RunError>() {
            return match e {
                RunError::NotFound(_)
                | RunError::NoSuchRequest { .. }
                | RunError::WrongRequestKind { .. }
                | RunError::InvalidAnswer { .. }
                | RunError::NoSuchDecision { .. }
                | RunError::WrongStatus { .. }
                | RunError::Id(_)
                | RunError::Config(_)
                | RunError::ModelWithoutTools { .. }
                | RunError::UnknownProvider { .. } => code::USAGE,
                RunError::DecisionPending { .. } | RunError::Lease(LeaseError::Held { .. }) => {
                    code::WAITING
                }
                _ => code::FAILED,
            };
        }
        if let Some(LeaseError::Held { .. }) = cause.downcast_ref::<LeaseError>() {
            return code::WAITING;
        }
        if let Some(e) = cause.downcast_ref::<AppError>() {
            match e {
                AppError::NoLaunch(_)
                | AppError::Plugin { .. }
                | AppError::Provider(_)
                | AppError::ProviderName(_) => {
                    return code::USAGE;
                }
                AppError::Host(h) => {
                    return match h {
                        HostError::DataDir { .. }
                        | HostError::Open(_)
                        | HostError::LeaseTtl(_)
                        | HostError::StoreUrl(_) => code::USAGE,
                        _ => code::FAILED,
                    };
                }
                AppError::Assembly(a) if a.is_config() => return code::USAGE,
                AppError::Run(_) => {}
                _ => return code::FAILED,
            }
        }
    }
    code::FAILED
}

/// The exit code for where a run stands.
pub(crate) fn code_for(run: &AgentRun) -> u8 {
    match run.status {
        RunStatus::Completed => code::OK,
        RunStatus::AwaitingApproval | RunStatus::AwaitingInput => code::WAITING,
        RunStatus::Interrupted => match run.stop_reason {
            Some(StopReason::EffectUnknown { .. }) => code::WAITING,
            _ => code::INTERRUPTED,
        },
        RunStatus::Failed | RunStatus::Cancelled => code::FAILED,
        RunStatus::Running => code::INTERRUPTED,
    }
}
