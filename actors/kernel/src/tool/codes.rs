//! The stable error codes of tool calls (the shell, the tools pipeline and
//! plugins). A code never changes meaning; the message beside it is for
//! people and may change.

/// No registered tool has this model-facing name.
pub const UNKNOWN_TOOL: &str = "unknown_tool";
/// The tool exists but is not loaded for this run: call `load_tools` first.
pub const TOOL_NOT_LOADED: &str = "tool_not_loaded";
/// The tool is not available in this run's mode or allowlist.
pub const TOOL_NOT_ALLOWED: &str = "tool_not_allowed";
/// The arguments were not valid JSON, not an object, or failed the schema.
pub const INVALID_ARGUMENTS: &str = "invalid_arguments";
/// The argument text exceeded `validate::MAX_ARGUMENTS_BYTES`.
pub const ARGUMENTS_TOO_LARGE: &str = "arguments_too_large";
/// The call's target could not be derived from its arguments.
pub const INVALID_TARGET: &str = "invalid_target";
/// The call's workspace path is refused by the workspace path policy
/// (traversal, a reserved name, ...).
pub const INVALID_PATH: &str = "invalid_path";
/// The tool's definition changed since the model was shown it or since the
/// capability was granted: nothing ran, and approval is needed again.
pub const DEFINITION_CHANGED: &str = "definition_changed";
/// A dispatched draft does not match what the pipeline prepared for it.
pub const DRAFT_MISMATCH: &str = "draft_mismatch";
/// A dispatched draft's target or scope is not the one its arguments give.
pub const TARGET_MISMATCH: &str = "target_mismatch";
/// The capability did not verify for this invocation: nothing ran.
pub const CAPABILITY_REFUSED: &str = "capability_refused";
/// The tool's actor is gone or dropped the request.
pub const TOOL_UNAVAILABLE: &str = "tool_unavailable";
/// The task that ran the call was lost: the tool's code panicked (natively)
/// or the Worker running it died. The supervisor answers it by interrupting
/// the run (`page_interrupted`, S2.5) with an `executor_lost` activity; the
/// call is settled by the replay rule, so a write is never repeated blindly.
pub const EXECUTOR_LOST: &str = "executor_lost";
/// Loading would put more than 64 tool schemas in one model request.
pub const TOOL_CAPACITY_EXCEEDED: &str = "tool_capacity_exceeded";
/// A plugin request would send a credential to an origin it is not bound to.
pub const CREDENTIAL_EXPOSURE: &str = "credential_exposure";
/// The host could not resolve a plugin's secret handle.
pub const SECRET_UNAVAILABLE: &str = "secret_unavailable";
/// The plugin endpoint did not answer within its deadline.
pub const PLUGIN_TIMEOUT: &str = "plugin_timeout";
/// The plugin endpoint could not be reached or the connection broke.
pub const PLUGIN_UNREACHABLE: &str = "plugin_unreachable";
/// The plugin answered with an HTTP error status.
pub const PLUGIN_HTTP_ERROR: &str = "plugin_http_error";
/// The plugin answered with a redirect; plugin calls never follow redirects.
pub const PLUGIN_REDIRECT: &str = "plugin_redirect";
/// The plugin's response exceeded the response size limit.
pub const PLUGIN_RESPONSE_TOO_LARGE: &str = "plugin_response_too_large";
/// The run's loaded tools could not be read or saved (storage failed or its
/// record is corrupt): nothing ran or was loaded.
pub const LOADED_TOOLS_UNAVAILABLE: &str = "loaded_tools_unavailable";
/// The run was stopped while the call was in flight (or before it started):
/// the call was ended by its cancellation signal.
pub const CANCELLED: &str = "cancelled";
