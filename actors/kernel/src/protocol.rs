//! The protocol every actor shares: tool definitions, calls, invocations,
//! the result envelope (SPEC S5.4), references and receipts, and the
//! messages of the tools actor and of individual tool actors.
//!
//! Actors never reach into each other; they exchange only these types (and
//! the store traits at the end, [`ResultSpill`] and [`DocumentSource`], that
//! the workspace implements for the tools).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use agent_capabilities::{
    ApprovalIdentity, ApprovalMode, CanonicalError, Capability, Decision, EffectClass, EffectSet,
    Fingerprint, Idempotency, Origin, Sensitivity, Target, TargetScope, Trust, Verifier,
};

use crate::actor::{Addr, Reply};
use crate::ids::{CallId, RunId, SessionId};
use crate::mode::RunMode;

/// How the target of an invocation is derived from its arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TargetRule {
    /// The tool touches nothing outside the run.
    None,
    /// A workspace path in the string argument `field` (scope: that path).
    WorkspacePathArg { field: String },
    /// A URL in the string argument `field` (scope: its origin).
    UrlArg { field: String },
    /// A thing in the embedding page named by the string argument `field`
    /// of a page tool (S5.9; scope: that item, as written).
    PageArg { field: String },
    /// Always the configured endpoint of a plugin (`scheme://host[:port]`).
    Endpoint { origin: String },
    /// A fixed scope, whatever the arguments.
    Fixed { scope: TargetScope },
    /// A local process the host started (an MCP server over stdio): it
    /// reaches nothing by itself, so its target is nothing outside the
    /// run; the rule names the process (`command` and its arguments), so
    /// the definition's fingerprint, and every approval bound to it,
    /// changes when the process does (S6.2).
    Process { command: String },
}

/// A tool as the registry knows it. Its fingerprint is the SHA-256 of its
/// canonical JSON: any change, even one character of the description, is a
/// new definition that needs approval again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
    pub origin: Origin,
    /// The plugin or MCP server that provides it (None for built-ins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    pub effects: EffectSet,
    pub idempotency: Idempotency,
    pub sensitivity: Sensitivity,
    pub target: TargetRule,
    /// Display hints (MCP-style annotations such as `readOnlyHint`). Never the
    /// security boundary: the policy looks only at `effects` (S6.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
}

impl ToolDefinition {
    pub fn fingerprint(&self) -> Result<Fingerprint, CanonicalError> {
        Fingerprint::of(self)
    }
}

/// A tool schema as shown to the model in one request.
///
/// The description and the parameter schema are shared (`Arc`): the tools
/// actor builds each tool's schema once, and every request of every run
/// holds a reference to it instead of a deep copy (issue 18 item 6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelToolSchema {
    /// The deterministic model-facing name.
    pub name: String,
    pub description: Arc<str>,
    pub parameters: Arc<Value>,
    /// The fingerprint of the definition the model was shown.
    pub fingerprint: Fingerprint,
}

impl ModelToolSchema {
    /// What the model is shown of `def`, whose fingerprint is `fingerprint`.
    pub fn of(def: &ToolDefinition, fingerprint: Fingerprint) -> ModelToolSchema {
        ModelToolSchema {
            name: def.name.clone(),
            description: def.description.as_str().into(),
            parameters: Arc::new(def.parameters.clone()),
            fingerprint,
        }
    }
}

/// A tool call as the model produced it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub call_id: CallId,
    /// The model-facing tool name.
    pub name: String,
    /// The raw arguments text from the model (parsed and validated by the pipeline).
    pub arguments: String,
}

/// Everything about one call that the pipeline resolved, before a capability exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvocationDraft {
    pub run: RunId,
    pub session: SessionId,
    pub call_id: CallId,
    pub tool: String,
    pub fingerprint: Fingerprint,
    /// Canonical, schema-validated arguments.
    pub arguments: Value,
    /// SHA-256 of the canonical arguments.
    pub args_hash: String,
    pub effects: EffectSet,
    pub idempotency: Idempotency,
    pub sensitivity: Sensitivity,
    pub origin: Origin,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    pub target: Target,
    pub scope: TargetScope,
    pub attempt: u32,
    /// [`crate::journal::idempotency_key`] of the run and call id: the same
    /// on every attempt of this call.
    pub idempotency_key: String,
}

/// A draft plus the capability that authorises it: what a tool actor receives.
#[derive(Debug, Clone)]
pub struct ToolInvocation {
    pub draft: InvocationDraft,
    pub capability: Capability,
    /// The run's verifier; the receiving side verifies before any effect.
    pub verifier: Verifier,
    /// Where the tool's progress reports go while the call is in flight
    /// (the supervisor's live events); [`ProgressSink::none`] drops them.
    pub progress: ProgressSink,
}

/// How far a long call has come, as the tool reports it (an MCP server's
/// `notifications/progress`, say). Live only: shown while the call runs,
/// never journaled, so a report grants and proves nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ToolProgress {
    /// Increases with each report of one call (units are the tool's own).
    pub progress: f64,
    /// The value `progress` reaches when the call is done, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// A short human-readable note, at most [`MAX_PROGRESS_MESSAGE_BYTES`]
    /// (longer ones are cut at a character boundary by the sink).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Longest progress message kept, in bytes.
pub const MAX_PROGRESS_MESSAGE_BYTES: usize = 512;

type ProgressFn = dyn Fn(ToolProgress) + Send + Sync;

/// The receiving end of a call's progress reports: a function the
/// dispatcher supplies (the supervisor turns each report into a live run
/// event). Cloning shares it; the default drops every report.
#[derive(Clone, Default)]
pub struct ProgressSink(Option<std::sync::Arc<ProgressFn>>);

impl ProgressSink {
    /// A sink that drops every report (tests, callers with no one to tell).
    pub fn none() -> ProgressSink {
        ProgressSink(None)
    }

    /// A sink calling `report` for each report, with the message already
    /// bounded to [`MAX_PROGRESS_MESSAGE_BYTES`] and non-finite numbers
    /// dropped.
    pub fn new(report: impl Fn(ToolProgress) + Send + Sync + 'static) -> ProgressSink {
        ProgressSink(Some(std::sync::Arc::new(report)))
    }

    /// Pass one report on. Never blocks and never fails: a report nobody
    /// hears is lost, which is what progress may be.
    pub fn report(&self, mut progress: ToolProgress) {
        let Some(report) = &self.0 else { return };
        if !progress.progress.is_finite() || progress.total.is_some_and(|t| !t.is_finite()) {
            return;
        }
        if let Some(message) = &mut progress.message
            && message.len() > MAX_PROGRESS_MESSAGE_BYTES
        {
            let mut cut = MAX_PROGRESS_MESSAGE_BYTES;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        report(progress);
    }
}

impl std::fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "ProgressSink(set)"
        } else {
            "ProgressSink(none)"
        })
    }
}

/// Where a result came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Provenance {
    /// `builtin`, `plugin:<id>`, `mcp:<server>`, `user`.
    pub origin: String,
    pub tool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched_at_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    /// Anything else worth keeping (reader used, truncation flags, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub detail: BTreeMap<String, Value>,
}

/// What kind of thing a reference points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum ReferenceKind {
    Blob,
    WorkspaceFile,
    Artifact,
}

/// A pointer to stored content instead of the content itself (S5.8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Reference {
    pub kind: ReferenceKind,
    /// A blob hash, a workspace path, or an Artifact id.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime: Option<String>,
    pub size: u64,
    /// SHA-256 of the referenced bytes.
    pub hash: String,
}

/// Proof of what an effect did (a workspace receipt: path, revisions, hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct EffectReceipt {
    pub effect: EffectClass,
    /// A short target description (path, origin), never content.
    pub target: String,
    /// Structured detail: revisions, hashes, ids. Never raw content.
    #[serde(default)]
    pub detail: Value,
}

/// The success half of the envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSuccess {
    pub content: Value,
    pub trust: Trust,
    pub provenance: Provenance,
    #[serde(default)]
    pub references: Vec<Reference>,
    #[serde(default)]
    pub receipts: Vec<EffectReceipt>,
}

/// The error half of the envelope. `code` is stable; `message` is for people.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolFailure {
    pub code: String,
    pub message: String,
    pub retryable: bool,
    pub trust: Trust,
    pub provenance: Provenance,
    /// True when the effect may have happened anyway (a timeout after sending,
    /// a dropped connection): the supervisor then records `effect_unknown`.
    #[serde(default)]
    pub effect_may_have_happened: bool,
}

/// The discriminated result envelope of every tool call (S5.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ToolResult {
    Success(ToolSuccess),
    Error(ToolFailure),
}

impl ToolResult {
    pub fn is_success(&self) -> bool {
        matches!(self, ToolResult::Success(_))
    }
    pub fn trust(&self) -> Trust {
        match self {
            ToolResult::Success(s) => s.trust,
            ToolResult::Error(e) => e.trust,
        }
    }
    /// An internal error with a stable code, nothing dispatched.
    pub fn error(code: &str, message: impl Into<String>, tool: &str) -> ToolResult {
        ToolResult::Error(ToolFailure {
            code: code.to_owned(),
            message: message.into(),
            retryable: false,
            trust: Trust::Internal,
            provenance: Provenance {
                origin: "builtin".into(),
                tool: tool.to_owned(),
                ..Provenance::default()
            },
            effect_may_have_happened: false,
        })
    }
}

/// The messages a single tool actor understands (its shell,
/// `crate::tool::spawn_tool`, answers both).
// `Invoke` is the message of every call; `Cancel` is rare and small. Boxing
// the invocation would cost an allocation per call to save bytes on stops.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum ToolMsg {
    /// Verify and run one call.
    Invoke {
        invocation: ToolInvocation,
        reply: Reply<ToolResult>,
    },
    /// The run was stopped: fire the cancellation signal of every call of
    /// `run` in flight here. A read-only call ends at once `cancelled`; an
    /// effectful call observes the signal itself.
    Cancel { run: RunId },
}

/// The address of one tool actor.
pub type ToolAddr = Addr<ToolMsg>;

/// A Skill applied to a run (S5.6), as the run keeps it. Its instructions
/// join the run's system prompt; its tools narrow the run's tool set to the
/// intersection with what the run is otherwise allowed, in the schemas the
/// model is shown, in `Prepare`, and as a `Caveat::Tools` on every
/// capability the run mints, so it can never widen anything. Make one from a
/// manifest with `agent_tools::builtin::skill::Skill::applied`, which validates it
/// (closed schema, sizes, no secrets).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedSkill {
    pub name: String,
    pub instructions: String,
    pub tools: std::collections::BTreeSet<String>,
}

/// Per-run settings the tools actor applies (a later Profiles issue fills them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunToolConfig {
    pub mode: RunMode,
    pub approval: ApprovalMode,
    /// Tool names the run may use; None means every registered tool of the mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowlist: Option<std::collections::BTreeSet<String>>,
    /// The grants the run holds (Memory scopes, a knowledge allowlist, by
    /// name): a tool that needs a grant the run lacks is not offered.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub grants: std::collections::BTreeSet<String>,
}

/// What the tools actor answers to `Prepare`: the resolved call and the
/// policy's decision. The supervisor asks the person when told to, mints the
/// capability with its `Authority`, and then sends `Dispatch`.
#[derive(Debug, Clone)]
pub struct PreparedCall {
    pub draft: InvocationDraft,
    pub decision: Decision,
    pub identity: ApprovalIdentity,
    pub target_summary: String,
}

/// Messages of the tools actor (registry and dispatch).
// Boxing the large variant would change a public shape others build on; the
// size is irrelevant here (one message per tool call / one record per request).
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum ToolsMsg {
    /// The schemas the model may see for this run (at most 64, S5.2).
    Schemas {
        run: RunId,
        config: RunToolConfig,
        reply: Reply<Vec<ModelToolSchema>>,
    },
    /// Parse, canonicalise and validate a model call, derive its target, ask the policy.
    /// An `Err` is a result for the model (unknown tool, invalid arguments, ...): nothing ran.
    Prepare {
        run: RunId,
        session: SessionId,
        call: ToolCall,
        attempt: u32,
        config: RunToolConfig,
        reply: Reply<Result<PreparedCall, ToolResult>>,
    },
    /// Re-check the draft against the current definition (fingerprint,
    /// arguments), verify the capability, and run the tool.
    Dispatch {
        invocation: ToolInvocation,
        reply: Reply<ToolResult>,
    },
    /// The run was stopped (the supervisor took a Stop): send
    /// `ToolMsg::Cancel` to every tool actor holding a call of `run`.
    CancelRun { run: RunId },
}

/// The address of the tools actor.
pub type ToolsAddr = Addr<ToolsMsg>;

/// Stores a large tool result durably (workspace file or Artifact) and
/// returns a reference to it (S5.8). The workspace crate implements it; the
/// host hands it to the tools actor, so that actors never reach into each other.
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
pub trait ResultSpill: crate::MaybeSend + crate::MaybeSync {
    async fn spill(
        &self,
        session: &SessionId,
        run: &RunId,
        call: &CallId,
        tool: &str,
        mime: &str,
        bytes: Vec<u8>,
    ) -> Result<Reference, String>;
}

/// Where a stored document came from; decides the trust of its text (S5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DocumentOrigin {
    /// Written by the person: `user` trust.
    User,
    /// Written by a built-in tool of this runtime from the run's own data: `internal`.
    Runtime,
    /// From outside: an attachment, an import, a web read, a plugin or MCP
    /// result. Always `external_untrusted`.
    External,
}

impl DocumentOrigin {
    /// The trust label of text extracted from such a document.
    pub fn trust(self) -> Trust {
        match self {
            DocumentOrigin::User => Trust::User,
            DocumentOrigin::Runtime => Trust::Internal,
            DocumentOrigin::External => Trust::ExternalUntrusted,
        }
    }
}

/// A document as the host's store hands it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceDocument {
    pub bytes: Vec<u8>,
    /// The MIME type the store recorded, if any.
    pub mime: Option<String>,
    pub origin: DocumentOrigin,
}

/// Reading a document failed before extraction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentSourceError {
    #[error("no document at {path}; list the workspace to find the right path")]
    NotFound { path: String },
    #[error("the document at {path} is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        path: String,
        size: u64,
        limit: usize,
    },
    #[error("the document store is unavailable: {0}")]
    Unavailable(String),
}

/// The host's document store for `extract_document` (the workspace, where
/// attachments are imported files). The workspace crate implements it
/// (`agent_workspace::WorkspaceDocuments`); the host hands it to the tool
/// actor, so that actors never reach into each other.
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
pub trait DocumentSource: crate::MaybeSend + crate::MaybeSync {
    /// The bytes at the normalised workspace `path` of `session`. A document
    /// larger than `max_bytes` should be refused with `TooLarge` without
    /// loading it.
    async fn read(
        &self,
        session: &SessionId,
        path: &str,
        max_bytes: usize,
    ) -> Result<SourceDocument, DocumentSourceError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_decides_trust() {
        assert_eq!(DocumentOrigin::External.trust(), Trust::ExternalUntrusted);
        assert_eq!(DocumentOrigin::User.trust(), Trust::User);
        assert_eq!(DocumentOrigin::Runtime.trust(), Trust::Internal);
    }
}
