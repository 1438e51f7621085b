//! The API's errors: stable codes ([`ErrorCode`]), JS `Error`s carrying
//! them ([`js_error`]), the code of each runtime, lease, storage and
//! assembly error, and the conversions and id parsing that fail with one.

use agent_assembly::{AssemblyError, SessionActionError};
use agent_kernel::host::{LeaseError, StorageError};
use agent_kernel::{RunId, SessionId};
use agent_supervisor::RunError;
use serde::Serialize;
use wasm_bindgen::prelude::*;

/// The stable error codes of the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    InvalidConfig,
    InvalidArgument,
    Unavailable,
    SessionBusy,
    LeaseLost,
    NotFound,
    WrongStatus,
    NoSuchRequest,
    WrongRequestKind,
    InvalidAnswer,
    NoSuchDecision,
    DecisionPending,
    RunBusy,
    InvalidTransition,
    StorageError,
    InconsistentState,
    RuntimeError,
    AlreadyExists,
    QuotaExceeded,
    TargetNotEmpty,
    ToolUnavailable,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidConfig => "invalid_config",
            ErrorCode::InvalidArgument => "invalid_argument",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::SessionBusy => "session_busy",
            ErrorCode::LeaseLost => "lease_lost",
            ErrorCode::NotFound => "not_found",
            ErrorCode::WrongStatus => "wrong_status",
            ErrorCode::NoSuchRequest => "no_such_request",
            ErrorCode::WrongRequestKind => "wrong_request_kind",
            ErrorCode::InvalidAnswer => "invalid_answer",
            ErrorCode::NoSuchDecision => "no_such_decision",
            ErrorCode::DecisionPending => "decision_pending",
            ErrorCode::RunBusy => "run_busy",
            ErrorCode::InvalidTransition => "invalid_transition",
            ErrorCode::StorageError => "storage_error",
            ErrorCode::InconsistentState => "inconsistent_state",
            ErrorCode::RuntimeError => "runtime_error",
            ErrorCode::AlreadyExists => "already_exists",
            ErrorCode::QuotaExceeded => "quota_exceeded",
            ErrorCode::TargetNotEmpty => "target_not_empty",
            ErrorCode::ToolUnavailable => "tool_unavailable",
        }
    }
}

/// A JS `Error` whose `code` property is `code`.
pub fn js_error(code: ErrorCode, message: impl std::fmt::Display) -> JsValue {
    let error = js_sys::Error::new(&message.to_string());
    let _ = js_sys::Reflect::set(&error, &"code".into(), &code.as_str().into());
    error.into()
}

pub(crate) fn storage_code(e: &StorageError) -> ErrorCode {
    match e {
        StorageError::StaleEpoch { .. } => ErrorCode::LeaseLost,
        StorageError::Unavailable(_) => ErrorCode::Unavailable,
        StorageError::Corrupt { .. } => ErrorCode::InconsistentState,
        _ => ErrorCode::StorageError,
    }
}

pub(crate) fn lease_code(e: &LeaseError) -> ErrorCode {
    match e {
        LeaseError::Held { .. } => ErrorCode::SessionBusy,
        LeaseError::Lost { .. } => ErrorCode::LeaseLost,
        LeaseError::Storage(s) => storage_code(s),
    }
}

/// The stable code of a run error.
pub fn run_error_code(e: &RunError) -> ErrorCode {
    match e {
        RunError::NotFound(_) => ErrorCode::NotFound,
        RunError::WrongStatus { .. } => ErrorCode::WrongStatus,
        RunError::NoSuchRequest { .. } => ErrorCode::NoSuchRequest,
        RunError::WrongRequestKind { .. } => ErrorCode::WrongRequestKind,
        RunError::InvalidAnswer { .. } => ErrorCode::InvalidAnswer,
        RunError::NoSuchDecision { .. } => ErrorCode::NoSuchDecision,
        RunError::DecisionPending { .. } => ErrorCode::DecisionPending,
        RunError::Busy { .. } => ErrorCode::RunBusy,
        RunError::Transition(_) => ErrorCode::InvalidTransition,
        RunError::Config(_)
        | RunError::ModelWithoutTools { .. }
        | RunError::UnknownProvider { .. } => ErrorCode::InvalidConfig,
        RunError::Storage(s) => storage_code(s),
        RunError::Lease(l) => lease_code(l),
        RunError::Id(_) => ErrorCode::InvalidArgument,
        RunError::Inconsistent { .. } => ErrorCode::InconsistentState,
        RunError::Actor(_) | RunError::Compaction { .. } => ErrorCode::RuntimeError,
        RunError::AlreadyExists(_) => ErrorCode::AlreadyExists,
    }
}

pub(crate) fn run_error(e: RunError) -> JsValue {
    js_error(run_error_code(&e), e)
}

pub(crate) fn to_js<T: Serialize + ?Sized>(value: &T) -> Result<JsValue, JsValue> {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(|e| {
            js_error(
                ErrorCode::RuntimeError,
                format!("could not convert a result: {e}"),
            )
        })
}

/// An embedder's configuration object read as `T`, through JSON so that
/// `deny_unknown_fields` holds (serde-wasm-bindgen reads only the fields a
/// struct names, so a misspelt option would otherwise be ignored). A
/// field set to `undefined` or `null` counts as absent.
pub(crate) fn from_js<T: serde::de::DeserializeOwned>(
    value: JsValue,
    what: &str,
) -> Result<T, JsValue> {
    let mut json: serde_json::Value = serde_wasm_bindgen::from_value(value)
        .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("{what}: {e}")))?;
    // An option given as `undefined` (or null) is an option not given.
    if let Some(fields) = json.as_object_mut() {
        fields.retain(|_, v| !v.is_null());
    }
    serde_json::from_value(json)
        .map_err(|e| js_error(ErrorCode::InvalidConfig, format!("{what}: {e}")))
}

pub(crate) fn session_id(s: &str) -> Result<SessionId, JsValue> {
    SessionId::new(s).map_err(|e| js_error(ErrorCode::InvalidArgument, format!("session id: {e}")))
}

pub(crate) fn run_id(s: &str) -> Result<RunId, JsValue> {
    RunId::new(s).map_err(|e| js_error(ErrorCode::InvalidArgument, format!("run id: {e}")))
}

/// The stable code of an assembly error: what the embedder configured is
/// `invalid_config`, a tool actor that cannot start is `runtime_error`.
pub(crate) fn assembly_error(e: AssemblyError) -> JsValue {
    let code = match &e {
        AssemblyError::Run(r) => run_error_code(r),
        e if e.is_config() => ErrorCode::InvalidConfig,
        _ => ErrorCode::RuntimeError,
    };
    js_error(code, e)
}

/// The stable code of a session action's error: the assembly's own code
/// (`SessionActionError::code`, the one owner of what each failure is),
/// read as one of this API's codes.
pub(crate) fn session_action_error(e: SessionActionError) -> JsValue {
    let code = match e.code() {
        "invalid_argument" | "invalid_path" | "reserved_path" | "same_path"
        | "invalid_arguments" => ErrorCode::InvalidArgument,
        "session_busy" | "busy" => ErrorCode::SessionBusy,
        "not_found" | "trash_not_found" | "artifact_not_found" => ErrorCode::NotFound,
        "already_exists" | "case_conflict" | "file_folder_conflict" => ErrorCode::AlreadyExists,
        "quota_exceeded" => ErrorCode::QuotaExceeded,
        "target_not_empty" => ErrorCode::TargetNotEmpty,
        "lease_lost" => ErrorCode::LeaseLost,
        "storage_error" => ErrorCode::StorageError,
        "content_missing" | "stale_revision" | "restore_conflict" => ErrorCode::InconsistentState,
        _ => ErrorCode::RuntimeError,
    };
    js_error(code, e)
}
