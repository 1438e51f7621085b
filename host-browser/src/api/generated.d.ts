// Generated from the Rust types by `cargo run -p agent-assembly --features ts --example ts_types -- host-browser/src/api/generated.d.ts`: do not edit.

/**
 * One entry of a run's gap-free activity sequence (S1.4).
 */
export type Activity = {
run: RunId, seq: number,
/**
 * Never earlier than the previous activity's timestamp, even if the clock stepped back.
 */
at_ms: number, kind: ActivityKind,
};

/**
 * What an activity records. Text lives in blobs; only references appear here.
 */
export type ActivityKind = { "kind": "status_changed", from: RunStatus, to: RunStatus, reason?: StopReason, } | { "kind": "model_request", round: number, } | {
"kind": "model_response", round: number, text: BlobRef | null, tool_calls: number,
/**
 * The reasoning the model streamed apart from its answer (S13.4),
 * stored as its own blob: never the answer, never the history.
 */
reasoning?: BlobRef,
/**
 * True when the answer was cut off by a Stop mid-stream: `text`
 * is what had streamed before it, kept as the run's output and
 * shown marked incomplete (issue 37 part 6).
 */
incomplete?: boolean,
} | { "kind": "tool_call", call_id: CallId, tool: string, state: CallState, } | { "kind": "approval_requested", request: RequestId, call_id: CallId, } | { "kind": "approval_answered", request: RequestId, approved: boolean, } | { "kind": "input_requested", request: RequestId, } | { "kind": "input_answered", request: RequestId, } | { "kind": "decision_requested", request: RequestId, call_id: CallId, } | {
"kind": "decision_taken", request: RequestId,
/**
 * One of the supervisor's choices, by name.
 */
choice: DecisionChoice,
} | { "kind": "plan_updated", plan: BlobRef, } | { "kind": "child_started", child: RunId, } | { "kind": "conversation_trimmed", dropped_turns: number, kept_turns: number, } | { "kind": "conversation_compacted", turns_covered: number, tokens_before: number, tokens_after: number, summary: BlobRef, } | { "kind": "executor_lost", executor: string, };

/**
 * The persisted `AgentRun` (S1.1): hashes and references only, never raw text.
 */
export type AgentRun = {
id: RunId, session: SessionId, parent?: RunId, children: Array<RunId>, mode: RunMode, status: RunStatus, stop_reason?: StopReason, usage: Usage, budget: Budget,
/**
 * The prompt, stored as a blob.
 */
prompt: BlobRef,
/**
 * The final assistant output, stored as a blob, once there is one.
 */
output?: BlobRef,
/**
 * The latest plan (`update_plan`), stored as a blob.
 */
plan?: BlobRef,
/**
 * Number of activities written; the next one gets this sequence number.
 */
next_activity: number,
/**
 * Every status the run has had, in order (for audits and the simulator).
 */
status_history: Array<RunStatus>, created_at_ms: number, updated_at_ms: number,
};

/**
 * What an approval is bound to (S6.2). A change to any field is a new identity.
 */
export type ApprovalIdentity = {
/**
 * Where the tool comes from.
 */
origin: ToolOrigin,
/**
 * The model provider or MCP server, when there is one.
 */
provider: string | null,
/**
 * The tool name.
 */
tool: string,
/**
 * The tool definition's fingerprint.
 */
fingerprint: Fingerprint,
/**
 * The declared effect classes.
 */
effects: Array<EffectClass>,
/**
 * The target scope the approval covers.
 */
scope: TargetScope,
};

/**
 * How much runs without asking.
 */
export type ApprovalMode = "permissive" | "strict";

/**
 * One published Artifact, as a session refers to it.
 */
export type Artifact = {
session: SessionId,
/**
 * SHA-256 of the bytes, lowercase hex; also the blob's name.
 */
id: string, name: string, mime: string, size: number, published_at_ms: number, source: Source, from?: PublishedFrom,
};

/**
 * A reference to a blob: the SHA-256 of its bytes (lowercase hex) and its size.
 */
export type BlobRef = { hash: string, size: number, };

/**
 * The effective limits of a run. Token and duration limits are optional.
 */
export type Budget = {
max_tool_rounds: number, max_tool_calls: number, max_tokens?: number,
/**
 * Active wall time (time spent `running`), in milliseconds.
 */
max_duration_ms?: number,
};

/**
 * Which limit ran out.
 */
export type BudgetDimension = "tool_rounds" | "tool_calls" | "tokens" | "duration";

/**
 * The named presets of S4.3.
 */
export type BudgetPreset = "light" | "standard" | "extended";

/**
 * The stable error of a failed call (no message text from tools: codes only).
 */
export type CallError = { code: string, retryable: boolean, };

/**
 * Why one call failed.
 */
export type CallFailure = {
call_id: CallId,
/**
 * `code: message` of the tool's error, or the journal's error code.
 */
reason: string,
};

/**
 * One tool call inside a run (from the model, or derived by the host).
 */
export type CallId = string;

/**
 * `prepared` → `running` → `committed` | `failed` | `effect_unknown`.
 */
export type CallState = "prepared" | "running" | "committed" | "failed" | "effect_unknown";

/**
 * What [`copy_session`] copied.
 */
export type CopyReport = { files: number, trash_entries: number, artifacts: number, };

/**
 * An inclusive range of ISO dates (`YYYY-MM-DD`).
 */
export type DateRange = { from: string, to: string, };

/**
 * What the person decides about a call whose effect is unknown.
 */
export type DecisionChoice = "retry_anyway" | "mark_done" | "abandon";

/**
 * What [`delete_session`] removed.
 */
export type DeleteReport = {
files: number, trash_entries: number, artifacts: number,
/**
 * Blobs deleted because nothing referenced them any more.
 */
blobs_freed: Array<string>,
};

/**
 * What a tool invocation may do to the world, from mildest to most severe.
 *
 * The order is meaningful: `max()` over a set gives its most severe class.
 */
export type EffectClass = "read_local" | "read_network" | "write_local" | "write_external" | "destructive_local" | "destructive_external" | "credential_exposure";

/**
 * Proof of what an effect did (a workspace receipt: path, revisions, hash).
 */
export type EffectReceipt = {
effect: EffectClass,
/**
 * A short target description (path, origin), never content.
 */
target: string,
/**
 * Structured detail: revisions, hashes, ids. Never raw content.
 */
detail: JsonValue,
};

/**
 * The provenance and references of one result, kept for the run card.
 */
export type Evidence = { run: RunId, call_id: CallId, tool: string, trust: Trust, provenance: Provenance, references: Array<Reference>, result: BlobRef, at_ms: number, };

/**
 * One piece of evidence: a source read during execution (S9.6).
 */
export type EvidenceId = string;

/**
 * One field that differs between two revisions.
 */
export type FieldChange = {
/**
 * Dotted path (`model.model`, `budget.max_tool_calls`, `tools`).
 */
path: string,
/**
 * `null` where the field was absent.
 */
before: JsonValue, after: JsonValue,
};

/**
 * One file of a session's workspace: what the manifest knows about it.
 * The content is a blob named by `hash`.
 */
export type FileEntry = {
session: SessionId, path: WorkspacePath, mime: string,
/**
 * Content length in bytes.
 */
size: number,
/**
 * SHA-256 of the content, lowercase hex; also the blob's name.
 */
hash: string,
/**
 * Changes on every mutation of this file and never repeats within the
 * session, even across delete and restore (it is drawn from one
 * per-session counter), so an `expectedRevision` names one exact state.
 */
revision: number, source: Source, created_at_ms: number, updated_at_ms: number,
};

/**
 * A SHA-256 of a value's canonical JSON, as 64 lowercase hex digits.
 *
 * Serialised as a plain string; deserialisation checks the form.
 */
export type Fingerprint = string;

/**
 * When and by whom a memory was forgotten (it can be restored).
 */
export type Forgotten = { by: MemoryChange, at_ms: number, };

/**
 * Where a fork came from.
 */
export type ForkOrigin = { id: ProfileId, revision: number, hash: string, };

/**
 * Whether repeating a call with the same arguments has the same effect as doing it once.
 */
export type Idempotency = "idempotent" | "non_idempotent";

/**
 * One tool call in the journal. Hashes and references only (S2.2).
 */
export type JournalRecord = {
run: RunId, call_id: CallId, tool: string, fingerprint: Fingerprint,
/**
 * SHA-256 of the canonical arguments; the arguments themselves are a blob.
 */
args: BlobRef, effects: Array<EffectClass>, idempotency: Idempotency, attempt: number, state: CallState,
/**
 * [`idempotency_key`] of the run and call id, fixed when the record is
 * first written; sent with idempotent writes, the same on every retry.
 */
idempotency_key: string,
/**
 * What the call acts on, in the person's words (a URL's origin, a
 * workspace file), derived from its arguments by the tool's target
 * rule and journaled with the record before anything is dispatched, so
 * an automatic external write is shown as clearly as an approved one.
 * `None` for the supervisor's own tools and records older than it.
 */
target_summary?: string, result?: BlobRef, receipts?: Array<EffectReceipt>, error?: CallError, updated_at_ms: number,
};

export type JsonValue = number | string | boolean | Array<JsonValue> | { [key in string]: JsonValue } | null;

/**
 * The five layers, in order (S10.2).
 */
export type LayerName = "global" | "workspace" | "profile" | "session" | "turn";

/**
 * How many look-ups planning has made.
 */
export type Lookups = { searches: number, reads: number, };

/**
 * Who made a change.
 */
export type MemoryChange = { "by": "person" } | { "by": "tool", run: RunId, call_id: CallId, tool: string, };

/**
 * A memory's id within its scope: 1 to 64 characters from `A-Z a-z 0-9 . _ -`.
 */
export type MemoryId = string;

/**
 * One memory.
 */
export type MemoryRecord = {
/**
 * Layout version ([`RECORD_FORMAT`]).
 */
v: number,
/**
 * `global`, `workspace:ID`, `profile:ID` or `session:ID`.
 */
scope: string, id: MemoryId,
/**
 * 1 when created; each save adds one, and so does a restore.
 */
revision: number, text: string,
/**
 * SHA-256 of `text` (lowercase hex).
 */
text_hash: string,
/**
 * Who saved this revision.
 */
saved_by: MemoryChange, saved_at_ms: number, created_at_ms: number,
/**
 * Set on a forgotten memory (kept under the forgotten prefix).
 */
forgotten?: Forgotten,
};

/**
 * The chat message that refers to the task, supplied by the host out
 * of band (S9.5), never by the model.
 */
export type MessageId = string;

/**
 * A persisted request waiting for the person (S6.4).
 */
export type PendingRecord = {
run: RunId, id: RequestId, kind: PendingRecordKind, created_at_ms: number,
/**
 * Set when a UI has shown it, so that a reload presents it once, not twice.
 */
presented: boolean,
};

/**
 * What the person is asked for.
 */
export type PendingRecordKind = { "kind": "approval", call_id: CallId, tool: string, effects: Array<EffectClass>, target_summary: string, reason: string, identity: ApprovalIdentity, } | { "kind": "input", call_id: CallId, question: BlobRef, schema?: BlobRef, choices?: Array<string>, } | { "kind": "decision", call_id: CallId, tool: string, } | {
"kind": "elicitation", call_id: CallId,
/**
 * The configured id of the server that asks.
 */
server: string, message: BlobRef, schema: BlobRef,
};

/**
 * A request waiting for the person (S6.4), an input's question resolved.
 */
export type PendingRequest = Omit<PendingRecord, "kind"> & { kind: PendingKind };
/** What the person is asked for; an input's question text and answer schema resolved from their blobs. */
export type PendingKind = Exclude<PendingRecordKind, { kind: "input" | "elicitation" }> | (Extract<PendingRecordKind, { kind: "input" | "elicitation" }> & { question_text?: string; answer_schema?: JsonValue });

/**
 * The plan as the run record keeps it; each `update_plan` replaces it whole.
 */
export type Plan = { steps: Array<PlanStep>, explanation?: string, };

/**
 * The plan waiting for the person, as a pending request (S6.4): shown
 * once, not again after a reload.
 */
export type PlanRequest = {
id: RequestId, created_at_ms: number,
/**
 * Set when a UI has shown it.
 */
presented: boolean,
};

/**
 * One step.
 */
export type PlanStep = { title: string, status: StepStatus, };

/**
 * A profile's id: 1 to [`MAX_ID_BYTES`] ASCII letters, digits, `_`, `-`
 * or `.`, starting with a letter or digit (so it is safe in storage keys).
 */
export type ProfileId = string;

/**
 * Whether runs of the profile may use tools at all.
 */
export type ProfileMode = "chat" | "agent";

/**
 * One stored revision of a profile.
 */
export type ProfileRevision = {
v: number, revision: number,
/**
 * SHA-256 of the profile's canonical JSON (RFC 8785).
 */
hash: string, saved_at_ms: number, cause: RevisionCause, profile: AgentProfileV2,
};

/**
 * A run that used a profile revision: the profile's run history, kept
 * locally and never exported.
 */
export type ProfileRunUse = { v: number, run: string, revision: number, at_ms: number, };

/**
 * A profile as a list shows it.
 */
export type ProfileSummary = { id: ProfileId, name: string, mode: ProfileMode, latest: number, saved_at_ms: number, forked_from: ForkOrigin | null, };

/**
 * Where a result came from.
 */
export type Provenance = {
/**
 * `builtin`, `plugin:<id>`, `mcp:<server>`, `user`.
 */
origin: string, tool: string, requested_url?: string, final_url?: string, fetched_at_ms?: number, content_hash?: string,
/**
 * Anything else worth keeping (reader used, truncation flags, ...).
 */
detail?: { [key in string]: JsonValue },
};

/**
 * The workspace file an Artifact was published from.
 */
export type PublishedFrom = { path: string, revision: number, };

/**
 * How hard the model is asked to reason, for models that take it.
 */
export type ReasoningEffort = "minimal" | "low" | "medium" | "high";

/**
 * A pointer to stored content instead of the content itself (S5.8).
 */
export type Reference = {
kind: ReferenceKind,
/**
 * A blob hash, a workspace path, or an Artifact id.
 */
id: string, name?: string, mime?: string, size: number,
/**
 * SHA-256 of the referenced bytes.
 */
hash: string,
};

/**
 * What kind of thing a reference points at.
 */
export type ReferenceKind = "blob" | "workspace_file" | "artifact";

/**
 * A widening a layer asked for and did not get.
 */
export type Refused = {
layer: LayerName,
/**
 * The field, as in the profile (`tools`, `budget.max_tool_calls`, `approval`, ...).
 */
field: string,
/**
 * What the layer asked for beyond what it may have.
 */
asked: JsonValue,
/**
 * What the effective value stayed.
 */
kept: JsonValue,
};

/**
 * The report Artifact a task produced.
 */
export type ReportRef = {
/**
 * The Artifact id: the SHA-256 of the report's bytes.
 */
artifact: string, size: number,
};

/**
 * A pending approval, input or decision request.
 */
export type RequestId = string;

/**
 * A phase a task can be interrupted in, and resumed to.
 */
export type ResearchActivePhase = "planning" | "executing" | "synthesizing";

/**
 * Something a partial report could not cover (S9.6).
 */
export type ResearchGap = { "kind": "source_failed", url: string, reason: string, } | { "kind": "budget_exhausted", dimension: string, } | { "kind": "stopped" } | { "kind": "unanswered", question: string, } | { "kind": "unsupported_claims", count: number, reason: string, };

/**
 * A plan as the planning run proposes it and the person approves it.
 */
export type ResearchPlan = {
/**
 * What the report must answer.
 */
questions: Array<string>,
/**
 * Search queries execution may send to the search backend.
 */
queries: Array<string>,
/**
 * Candidate source URLs (absolute http or https).
 */
sources: Array<string>,
/**
 * Registrable domains (and their subdomains) execution may read; every
 * candidate source must lie within them.
 */
domains: Array<string>,
/**
 * Publication dates execution may use, when the plan restricts them.
 */
dates?: DateRange,
/**
 * What planning could not do, said to the person (for example: no
 * search backend is configured, so the plan uses only the topic and
 * the URLs given).
 */
notes?: Array<string>,
};

/**
 * One snapshot source as shown.
 */
export type ResearchSource = {
url: string,
/**
 * `pending`, `read` or `failed`.
 */
state: "pending" | "read" | "failed", evidence?: EvidenceId, final_url?: string,
/**
 * SHA-256 of the stored text.
 */
content_hash?: string, reason?: string,
};

/**
 * A task as a host shows it.
 */
export type ResearchView = {
task: TaskId, session: SessionId, message: MessageId,
/**
 * [`Phase::name`](crate::task::Phase::name) of the task's phase.
 */
phase: ResearchPhase,
/**
 * For an interrupted task: the phase Resume continues.
 */
resume_to?: ResearchActivePhase,
/**
 * For an interrupted task whose phase could not go on: why.
 */
interrupted_because?: string, topic: string, urls: Array<string>,
/**
 * The approved plan, else the proposed one, if any.
 */
plan?: ResearchPlan, plan_approved: boolean, plan_request?: PlanRequest, sources: Array<ResearchSource>, lookups: Lookups, gaps: Array<ResearchGap>, report?: ReportRef, created_at_ms: number, updated_at_ms: number,
};

/**
 * Why a revision exists.
 */
export type RevisionCause = { "kind": "saved" } | { "kind": "rolled_back", to: number, } | { "kind": "forked", from: ForkOrigin, } | { "kind": "imported" } | { "kind": "migrated", legacy_hash: string, };

/**
 * The reasoning a model streamed in one round.
 */
export type RoundReasoning = { round: number, text: string, };

/**
 * One `AgentRun`.
 */
export type RunId = string;

/**
 * Agent, Chat or Research (S9, S5.1); decides which tools the host
 * registers and whether the run is a turn of its session's conversation.
 */
export type RunMode = "agent" | "research" | "chat";

/**
 * Where a run is in its life (S1.2).
 */
export type RunStatus = "running" | "awaiting_input" | "awaiting_approval" | "interrupted" | "completed" | "failed" | "cancelled";

/**
 * The run card (S6, S12): one run with its activities, its journal (each
 * call with the target summary journaled before it was dispatched, so an
 * automatic external write shows what it wrote to), the pending requests,
 * the evidence with provenance, the plan's steps and the final answer.
 */
export type RunView = {
run: AgentRun,
/**
 * The person's prompt (the run record keeps only its hash).
 */
prompt: string, activities: Array<Activity>, journal: Array<JournalRecord>, pending: Array<PendingRequest>,
/**
 * What each tool result was, where it came from and how far it is
 * trusted (S5.4), in the order the results arrived.
 */
evidence: Array<Evidence>,
/**
 * The final answer, once the run has one.
 */
output?: string,
/**
 * True when `output` is an answer a Stop cut off mid-stream: what had
 * streamed before it, kept and shown marked incomplete.
 */
output_incomplete: boolean,
/**
 * The latest `update_plan`: steps with their statuses.
 */
plan?: Plan,
/**
 * Why each failed call failed (the tool's code and message from its
 * result blob, else the journal's error code), in journal order.
 */
failures?: Array<CallFailure>,
/**
 * What the model reasoned, round by round, apart from the answer
 * (S13.4): never part of `output`.
 */
reasoning?: Array<RoundReasoning>,
};

/**
 * How sensitive a tool's content is: private and secret content never
 * reaches logs; secret content enters the model context only redacted.
 */
export type Sensitivity = "public" | "private" | "secret";

/**
 * A chat session; leases and workspaces are per session.
 */
export type SessionId = string;

/**
 * One session as a listing shows it.
 */
export type SessionSummary = {
session: SessionId,
/**
 * Top-level runs (turns) of the session.
 */
runs: number,
/**
 * When its newest run was created, if it has any.
 */
last_run_at_ms?: number, files: number, artifacts: number,
};

/**
 * Who wrote a file (S7.2).
 */
export type Source = { "kind": "user" } | { "kind": "tool", tool: string, run: RunId, call_id: CallId, } | { "kind": "import", from: string, } | { "kind": "attachment", name: string, };

/**
 * Where a step stands.
 */
export type StepStatus = "pending" | "in_progress" | "completed" | "cancelled";

/**
 * Why a run stopped (S1.3). Messages never contain prompt or result text.
 */
export type StopReason = { "reason": "completed" } | { "reason": "user_stopped" } | { "reason": "budget_exhausted", dimension: BudgetDimension, } | { "reason": "offline" } | { "reason": "page_interrupted" } | { "reason": "effect_unknown", call_id: CallId, } | { "reason": "runtime_error", actor: string, message: string, } | { "reason": "provider_unavailable", provider: string, message: string, } | { "reason": "output_limit" } | { "reason": "content_filtered", provider: string, };

/**
 * The set of targets a capability may touch. Narrowing is intersection.
 */
export type TargetScope = { "kind": "no_target" } | { "kind": "workspace", prefix: string, } | { "kind": "origins", origins: Array<string>, } | { "kind": "domains", domains: Array<string>, } | { "kind": "dates", from: string, to: string, } | { "kind": "page_items", items: Array<string>, } | { "kind": "all", scopes: Array<TargetScope>, };

/**
 * One Deep Research task.
 */
export type TaskId = string;

/**
 * Where a tool comes from.
 */
export type ToolOrigin = "builtin" | "user" | "page" | `plugin:${string}` | `mcp:${string}`;

/**
 * How far a long call has come, as the tool reports it (an MCP server's
 * `notifications/progress`, say). Live only: shown while the call runs,
 * never journaled, so a report grants and proves nothing.
 */
export type ToolProgress = {
/**
 * Increases with each report of one call (units are the tool's own).
 */
progress: number,
/**
 * The value `progress` reaches when the call is done, when known.
 */
total?: number,
/**
 * A short human-readable note, at most [`MAX_PROGRESS_MESSAGE_BYTES`]
 * (longer ones are cut at a character boundary by the sink).
 */
message?: string,
};

/**
 * How far content may be trusted. `ExternalUntrusted` content (web,
 * attachments, plugins, MCP) is data, never instructions, and grants nothing.
 */
export type Trust = "internal" | "user" | "external_untrusted";

/**
 * Usage accumulated across model rounds (S4.1). Never decreases.
 */
export type Usage = {
tool_rounds: number, tool_calls: number, input_tokens: number, output_tokens: number,
/**
 * Milliseconds spent `running`.
 */
active_ms: number,
/**
 * Input tokens read from the provider's prompt cache, as each
 * provider reports them (OpenAI and Gemini count them inside
 * `input_tokens`; Anthropic's `input_tokens` leaves them out).
 */
cached_input_tokens?: number,
/**
 * Input tokens written to the provider's prompt cache (Anthropic).
 */
cache_write_tokens?: number,
/**
 * Of the output, tokens the model spent reasoning (S13.4).
 */
reasoning_tokens?: number,
/**
 * The size of the conversation at the run's latest model request, as
 * the provider counted it: that request's input plus its output. Not
 * accumulated (each round replaces it); the context rule reads it
 * (S12.4).
 */
context_tokens?: number,
};

/**
 * A validated workspace path: relative, NFC-normalised, portable, within
 * [`MAX_PATH_BYTES`], [`MAX_SEGMENT_BYTES`] and [`MAX_DEPTH`]. Segments are separated by `/`.
 */
export type WorkspacePath = string;
