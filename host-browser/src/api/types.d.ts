
// The types of every value `AgentRuntime` takes, returns or emits. The
// shapes are those the Rust side serializes (serde, JSON-compatible: a Rust
// `Option` without `skip_serializing_if` is `null`, with it the field is
// absent). `host-browser/typecheck` checks them with `tsc --strict` against
// values generated from real runs (actors/assembly/examples/ts_values.rs),
// so a field removed or renamed on the Rust side fails the check.

/** Any JSON value (tool arguments, schemas, free detail). */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** Stable error codes: every rejected promise is an Error with one of these in `code`. */
export type AgentErrorCode =
  | "invalid_config" | "invalid_argument" | "unavailable" | "session_busy" | "lease_lost"
  | "not_found" | "wrong_status" | "no_such_request" | "wrong_request_kind" | "invalid_answer"
  | "no_such_decision" | "decision_pending" | "run_busy" | "invalid_transition"
  | "storage_error" | "inconsistent_state" | "runtime_error"
  | "already_exists" | "quota_exceeded" | "target_not_empty";

export interface AgentError extends Error { code: AgentErrorCode; }

// ---------------------------------------------------------------- configuration

export type BudgetPreset = "light" | "standard" | "extended";

/** A preset, or an object whose given limits replace the preset's (or the fallback's) one by one (S4.3, S4.4). */
export type BudgetSpec = BudgetPreset | {
  preset?: BudgetPreset; max_tool_rounds?: number; max_tool_calls?: number; max_tokens?: number; max_duration_ms?: number;
};

export type ApprovalMode = "permissive" | "strict";

/** What a tool invocation may do to the world, mildest first (S5.3). */
export type EffectClass =
  | "read_local" | "read_network" | "write_local" | "write_external"
  | "destructive_local" | "destructive_external" | "credential_exposure";

export type Idempotency = "idempotent" | "non_idempotent";
export type Sensitivity = "public" | "private" | "secret";
/** How far content may be trusted; `external_untrusted` is data, never instructions (S5.4). */
export type Trust = "internal" | "user" | "external_untrusted";
/** Where a tool comes from. */
export type ToolOrigin = "builtin" | "user" | `plugin:${string}` | `mcp:${string}`;

export interface PluginFunction {
  name: string; description: string; method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  path: string;
  /** The JSON Schema of the function's arguments. */
  parameters: Record<string, unknown>;
  effects: EffectClass[]; idempotency: Idempotency; sensitivity?: Sensitivity;
  annotations?: Record<string, unknown>;
}

/** An MCP server (issue 16), as in agentrt's `[[mcp]]` (snake_case). A page reaches servers over Streamable HTTP only. */
export interface McpServerConfig {
  /** The provider id: tools have origin `mcp:<id>`. */
  id: string;
  url: string;
  /** Request headers: literal text (never a credential), or a secret handle of `secrets` bound to the server's origin. */
  headers?: Record<string, string | { secret: string; prefix?: string }>;
  /** Per-request deadline, 1 to 600000 ms (default 30000). */
  timeout_ms?: number;
  /** Functions whose effects the person declares; a pinned fingerprint equal to the current definition's makes a write trusted. Any other function is unknown: every call asks. */
  trusted_functions?: Array<{ name: string; effects: EffectClass[]; idempotency: Idempotency; fingerprint?: string }>;
  /** Reach the server through `gateway` (`agentrt serve` forwards it; its headers come from the gateway's configuration). */
  via_gateway?: boolean;
}

/** What became of a configured MCP server (`mcpServers()`, `connectMcp()`). */
export interface McpServerStatus {
  id: string;
  connected: boolean;
  /** Its registered tools' model-facing names. */
  tools: string[];
  /** Functions left out, and why. */
  refused: Array<{ name: string; why: string }>;
  /** Why it is not connected. */
  error?: string;
}

export interface PluginManifest {
  id: string; base_url: string; trusted?: boolean; expected_fingerprint?: string;
  auth?: { header: string; secret: string; prefix?: string };
  timeout_ms?: number;
  functions: PluginFunction[];
}

/** One scripted model answer (tests and demos). */
export interface ScriptedTurn {
  /** Reasoning streamed before the answer, apart from it (S13.4). */
  reasoning?: string;
  text?: string;
  tool_calls?: Array<{ id?: string; name: string; arguments?: Record<string, unknown> | string }>;
  usage?: { input_tokens: number; output_tokens: number; cached_input_tokens?: number; cache_write_tokens?: number; reasoning_tokens?: number };
  finish?: "stop" | "tool_calls" | "length" | "content_filter";
  delay_ms?: number;
  disconnects?: number;
}

export interface ScriptedScenario { turns: ScriptedTurn[]; capabilities?: ModelCapabilities; }

/** A model provider: a scripted scenario, or a remote model speaking one of three wire formats (S13). */
export type ModelConfig =
  | { provider: "scripted"; scenario: ScriptedScenario }
  | { provider: "openai" | "openai-compatible" | "gemini" | "anthropic"; model: string;
      /** Default: the provider's public endpoint (which needs `apiKey`). */
      baseUrl?: string;
      /** Held in this tab's memory only (S13.3). */
      apiKey?: string;
      /** What the model can do, over the built-in table (S13.1). */
      capabilities?: ModelCapabilities };

export interface RuntimeConfig {
  /** IndexedDB database name (default "agentrt"). */
  databaseName?: string;
  /** "indexeddb" (default; falls back to memory when it cannot be opened) or "memory". */
  storage?: "indexeddb" | "memory";
  /** The default provider: a scripted scenario or a remote model. */
  model?: ModelConfig;
  /** Providers a run may choose by name (`startRun`'s `model.provider`); a run stores only the name. Names: 1 to 64 of A-Z a-z 0-9 - _ . */
  models?: Record<string, ModelConfig>;
  /** The native gateway (`agentrt serve`) for fetch_url; without it fetch_url is not offered. */
  gateway?: { url: string; token: string };
  plugins?: PluginManifest[];
  /** MCP servers: their functions are found with search_tools and loaded with load_tools; connected when the runtime is created. */
  mcpServers?: McpServerConfig[];
  /** Secret values by handle, bound to one origin; kept in memory only. */
  secrets?: Array<{ handle: string; origin: string; value: string }>;
  budget?: BudgetSpec;
  approvalMode?: ApprovalMode;
  /** URL of the Worker module's JavaScript file (`agent_worker_module.js`): run_javascript and PDF reading run in Workers of this module, fetched on first use. Default: `pkg/agent_worker_module.js` beside the page. */
  workerGlueUrl?: string;
  /** URL of the Worker module's wasm (`agent_worker_module_bg.wasm`); default: beside `workerGlueUrl`. Give both when a bundler renames files. */
  workerWasmUrl?: string;
  /** Session lease time to live in ms (default 30000). */
  leaseTtlMs?: number;
  /** Ids of `plugins` whose functions are in every model request, without `load_tools` (S5.2). An id no plugin has is refused with `invalid_config`. */
  alwaysOnPlugins?: string[];
  /** A SearXNG instance (its JSON API, reachable from this page) where Deep Research planning searches the web; without it planning uses only the topic and the person's URLs. */
  searchUrl?: string;
}

/** A Skill manifest (S5.6). */
export interface SkillManifest { name: string; description: string; instructions: string; allowed_tools: string[]; }

/** One message of an embedder-owned chat history. */
export interface HistoryMessage { role: "user" | "assistant"; content: string; }

export interface RunOptions {
  budget?: BudgetSpec;
  approvalMode?: ApprovalMode;
  allowlist?: string[];
  /** A Skill manifest (S5.6): the run may use only the tools it allows (and the allowlist), and its instructions join the system prompt. A malformed manifest, or one holding a secret, is refused with code `invalid_config`. */
  skill?: SkillManifest;
  /** `provider`: a name from `models` (default: the runtime's `model`); its model is used unless `model` is given. */
  model?: { provider?: string; model?: string; system_prompt?: string; system_extension?: string; temperature?: number; max_output_tokens?: number; context_window_tokens?: number };
  /** "agent" (default: tools, the default Agent system prompt) or "chat" (no tools, no default system prompt). */
  mode?: "agent" | "chat";
  /** Replaces the default Agent system prompt (at most 64 KiB). */
  system?: string;
  /** Added after the system prompt (at most 64 KiB). */
  systemExtension?: string;
  /** Used verbatim instead of the session's conversation; a bad role, more than 256 messages or 512 KiB is `invalid_argument`. */
  history?: HistoryMessage[];
  /** The model's context window in tokens (at least 1024); earlier turns may take half of it. */
  contextWindowTokens?: number;
  /** Run under this Agent Profile (S10.2): its model, tools, budget and approval over the options above; the run records the revision. Not for `startResearch`. */
  profile?: string;
  /** The turn's own layer: it may only narrow (a wider tool, budget or approval mode is narrowed). */
  turn?: ProfileLayer;
}

// ---------------------------------------------------------------- runs (S1)

/** A blob: the SHA-256 of its bytes (lowercase hex) and its size. */
export interface BlobRef { hash: string; size: number; }

export type RunStatus = "running" | "awaiting_input" | "awaiting_approval" | "interrupted" | "completed" | "failed" | "cancelled";
export type RunMode = "agent" | "research" | "chat";
export type BudgetDimension = "tool_rounds" | "tool_calls" | "tokens" | "duration";

/** Why a run stopped (S1.3). */
/** What a model can do (S13.1): a model without tool calling runs chat only. */
export interface ModelCapabilities { tool_calling?: boolean; context_window_tokens?: number; max_output_tokens?: number; }

export type StopReason =
  | { reason: "completed" }
  | { reason: "user_stopped" }
  | { reason: "budget_exhausted"; dimension: BudgetDimension }
  | { reason: "offline" }
  | { reason: "page_interrupted" }
  | { reason: "effect_unknown"; call_id: string }
  | { reason: "runtime_error"; actor: string; message: string }
  /** The model provider stayed down past its retry bound (S13.2); Resume continues. */
  | { reason: "provider_unavailable"; provider: string; message: string }
  /** Completed, but the answer was cut at the model's output limit. */
  | { reason: "output_limit" }
  /** Failed: the provider withheld the answer (a safety filter, a refusal). */
  | { reason: "content_filtered"; provider: string };

export interface Usage {
  tool_rounds: number; tool_calls: number; input_tokens: number; output_tokens: number; active_ms: number;
  /** Input tokens read from the provider's prompt cache (inside `input_tokens` for OpenAI and Gemini; Anthropic counts them apart). */
  cached_input_tokens?: number;
  /** Input tokens written to the provider's prompt cache (Anthropic). */
  cache_write_tokens?: number;
  /** Of the output, tokens the model spent reasoning. */
  reasoning_tokens?: number;
}

/** A run's effective limits. */
export interface Budget { max_tool_rounds: number; max_tool_calls: number; max_tokens?: number; max_duration_ms?: number; }

/** The stored run (S1.1): hashes and references only, never raw text. */
export interface AgentRun {
  id: string; session: string; parent?: string; children: string[]; mode: RunMode;
  status: RunStatus;
  stop_reason?: StopReason;
  usage: Usage;
  budget: Budget;
  /** The prompt's blob. */
  prompt: BlobRef;
  /** The final output's blob, once there is one (its text is `RunView.output`). */
  output?: BlobRef;
  /** The latest plan's blob (its content is `RunView.plan`). */
  plan?: BlobRef;
  /** The sequence number the next activity gets. */
  next_activity: number;
  /** Every status the run has had, in order. */
  status_history: RunStatus[];
  created_at_ms: number; updated_at_ms: number;
}

/** `prepared` → `running` → `committed` | `failed` | `effect_unknown` (S2). */
export type CallState = "prepared" | "running" | "committed" | "failed" | "effect_unknown";

/** What an activity records (S1.4); text lives in blobs. */
export type ActivityKind =
  | { kind: "status_changed"; from: RunStatus; to: RunStatus; reason?: StopReason }
  | { kind: "model_request"; round: number }
  /** `reasoning`: the round's reasoning, stored apart from the answer (S13.4). */
  | { kind: "model_response"; round: number; text: BlobRef | null; tool_calls: number; reasoning?: BlobRef }
  | { kind: "tool_call"; call_id: string; tool: string; state: CallState }
  | { kind: "approval_requested"; request: string; call_id: string }
  | { kind: "approval_answered"; request: string; approved: boolean }
  | { kind: "input_requested"; request: string }
  | { kind: "input_answered"; request: string }
  | { kind: "decision_requested"; request: string; call_id: string }
  | { kind: "decision_taken"; request: string; choice: DecisionChoice }
  | { kind: "plan_updated"; plan: BlobRef }
  | { kind: "child_started"; child: string }
  /** The run started without its conversation's oldest turns: they did not fit the context budget (S12). */
  | { kind: "conversation_trimmed"; dropped_turns: number; kept_turns: number }
  /** The executor running the run's work was lost (a tool task, the Worker, the page frozen): the run is interrupted. */
  | { kind: "executor_lost"; executor: string };

/** One entry of a run's gap-free activity sequence. */
export interface Activity { run: string; seq: number; at_ms: number; kind: ActivityKind; }

/** The choices about a call whose effect is unknown. */
export type DecisionChoice = "retry_anyway" | "mark_done" | "abandon";

// ---------------------------------------------------------------- journal (S2)

/** Proof of what an effect did (never content). */
export interface EffectReceipt { effect: EffectClass; target: string; detail: JsonValue; }

export interface CallError { code: string; retryable: boolean; }

/** One tool call in the journal: hashes and references only (S2.2). */
export interface JournalRecord {
  run: string; call_id: string; tool: string;
  /** The tool definition's fingerprint. */
  fingerprint: string;
  /** The canonical arguments' blob. */
  args: BlobRef;
  effects: EffectClass[];
  idempotency: Idempotency;
  attempt: number;
  state: CallState;
  idempotency_key: string;
  /** What the call acts on (a URL's origin, a workspace file), journaled before dispatch. */
  target_summary?: string;
  result?: BlobRef;
  receipts?: EffectReceipt[];
  error?: CallError;
  updated_at_ms: number;
}

// ---------------------------------------------------------------- pending requests (S6)

/** The targets an approval covers. */
export type TargetScope =
  | { kind: "no_target" }
  | { kind: "workspace"; prefix: string }
  | { kind: "origins"; origins: string[] }
  | { kind: "domains"; domains: string[] }
  | { kind: "dates"; from: string; to: string }
  | { kind: "all"; scopes: TargetScope[] };

/** What an approval is bound to (S6.2). */
export interface ApprovalIdentity {
  origin: ToolOrigin; provider: string | null; tool: string; fingerprint: string;
  effects: EffectClass[]; scope: TargetScope;
}

export type PendingKind =
  | { kind: "approval"; call_id: string; tool: string; effects: EffectClass[]; target_summary: string; reason: string; identity: ApprovalIdentity }
  | {
      kind: "input"; call_id: string; question: BlobRef; schema?: BlobRef; choices?: string[];
      /** The question, resolved from its blob. */
      question_text?: string;
      /** The JSON Schema an answer must satisfy, resolved from its blob. */
      answer_schema?: JsonValue;
    }
  | { kind: "decision"; call_id: string; tool: string };

/** A request waiting for the person (S6.4). */
export interface PendingRequest { run: string; id: string; kind: PendingKind; created_at_ms: number; presented: boolean; }

// ---------------------------------------------------------------- the run card (S6, S12)

/** Where a result came from. */
export interface Provenance {
  origin: string; tool: string; requested_url?: string; final_url?: string;
  fetched_at_ms?: number; content_hash?: string;
  detail?: Record<string, JsonValue>;
}

/** A pointer to stored content (S5.8). */
export interface Reference {
  kind: "blob" | "workspace_file" | "artifact"; id: string; name?: string; mime?: string; size: number; hash: string;
}

/** What one tool result was, where it came from, how far it is trusted (S5.4). */
export interface Evidence {
  run: string; call_id: string; tool: string; trust: Trust; provenance: Provenance;
  references: Reference[]; result: BlobRef; at_ms: number;
}

export type StepStatus = "pending" | "in_progress" | "completed" | "cancelled";
export interface PlanStep { title: string; status: StepStatus; }
/** The latest `update_plan`. */
export interface Plan { steps: PlanStep[]; explanation?: string; }

/** Why one call failed: `code: message` of the tool's error, or the journal's error code. */
export interface CallFailure { call_id: string; reason: string; }

/** One run with everything a run card shows (`readRun`, `agentrt show --json`). */
export interface RunView {
  run: AgentRun;
  /** The person's prompt. */
  prompt: string;
  activities: Activity[]; journal: JournalRecord[]; pending: PendingRequest[];
  evidence: Evidence[];
  /** The final answer, once the run has one. */
  output?: string;
  plan?: Plan;
  /** Why each failed call failed, when any did. */
  failures?: CallFailure[];
  /** What the model reasoned, by round: shown apart, never part of `output` (S13.4). */
  reasoning?: RoundReasoning[];
}

/** The reasoning a model streamed in one round. */
export interface RoundReasoning { round: number; text: string; }

// ---------------------------------------------------------------- sessions and workspace (S7, S12)

/** Who wrote a file (S7.2). */
export type Source =
  | { kind: "user" }
  | { kind: "tool"; tool: string; run: string; call_id: string }
  | { kind: "import"; from: string }
  /** A person's file, under its original name; its content is `external_untrusted` (S12.3). */
  | { kind: "attachment"; name: string };

/** One workspace file. */
export interface FileEntry {
  session: string; path: string; mime: string; size: number; hash: string; revision: number;
  source: Source; created_at_ms: number; updated_at_ms: number;
}

/** One published Artifact (S7.4): immutable, its id is the SHA-256 of its bytes. */
export interface Artifact {
  session: string; id: string; name: string; mime: string; size: number; published_at_ms: number;
  source: Source; from?: { path: string; revision: number };
}

/** A workspace file's content: `text` when the bytes are UTF-8. */
export interface FileContent { entry: FileEntry; text?: string; bytes: Uint8Array; }
/** An Artifact's content: `text` when the bytes are UTF-8. */
export interface ArtifactContent { entry: Artifact; text?: string; bytes: Uint8Array; }

export interface SessionSummary { session: string; runs: number; last_run_at_ms?: number; files: number; artifacts: number; }
export interface CopyReport { files: number; trash_entries: number; artifacts: number; }
export interface DeleteReport { files: number; trash_entries: number; artifacts: number; blobs_freed: string[]; }

// ---------------------------------------------------------------- events

/** How far a long tool call has come, in the tool's own units. */
export interface ToolProgress {
  progress: number;
  total?: number;
  /** At most 512 bytes. */
  message?: string;
}

/** Agent Profiles (S10). */
export type ProfileMode = "chat" | "agent";
export type MemoryScope = "global" | "workspace" | "profile" | "session";
export type ReasoningEffort = "minimal" | "low" | "medium" | "high";
export interface AgentProfileV2 {
  id: string;
  name: string;
  mode?: ProfileMode;
  model?: { provider?: string; model: string; max_output_tokens?: number };
  /** `budget_tokens`: the thinking budget (1024 to 128000) where the format takes one (Anthropic, Gemini). */
  reasoning?: { effort?: ReasoningEffort; budget_tokens?: number };
  search?: { web_search: boolean };
  approval?: ApprovalMode;
  budget?: Budget;
  /** Allowlists: absent means every one the layer above allows. */
  plugins?: string[];
  mcp_servers?: string[];
  tools?: string[];
  knowledge?: string[];
  memory?: { read: MemoryScope[]; write: MemoryScope[] };
  skills?: string[];
  system_prompt_addition?: string;
  /** Purpose → secret handle name; never exported. */
  credentials?: { handles: Record<string, string> };
}
export interface ForkOrigin { id: string; revision: number; hash: string; }
export type RevisionCause =
  | { kind: "saved" } | { kind: "rolled_back"; to: number } | { kind: "forked"; from: ForkOrigin }
  | { kind: "imported" } | { kind: "migrated"; legacy_hash: string };
export interface ProfileRevision { v: number; revision: number; hash: string; saved_at_ms: number; cause: RevisionCause; profile: AgentProfileV2; }
export interface ProfileSummary { id: string; name: string; mode: ProfileMode; latest: number; saved_at_ms: number; forked_from: ForkOrigin | null; }
export interface ProfileList { profiles: ProfileSummary[]; unreadable: string[]; }
/** One field that differs between two revisions (a dotted path). */
export interface FieldChange { path: string; before: JsonValue; after: JsonValue; }
export type LayerName = "global" | "workspace" | "profile" | "session" | "turn";
/** A widening a layer asked for and did not get (S10.2). */
export interface Refused { layer: LayerName; field: string; asked: JsonValue; kept: JsonValue; }
export interface ProfileImport { revision: ProfileRevision; narrowed: Refused[]; }
export interface ProfileRunUse { v: number; run: string; revision: number; at_ms: number; }
/** A turn's own layer (S10.2): it may only narrow the profile. */
export interface ProfileLayer {
  mode?: ProfileMode; provider?: string; model?: string; max_output_tokens?: number;
  reasoning_effort?: ReasoningEffort; reasoning_budget_tokens?: number; web_search?: boolean; approval?: ApprovalMode; budget?: Budget;
  plugins?: string[]; mcp_servers?: string[]; tools?: string[]; knowledge?: string[];
  memory?: { read: MemoryScope[]; write: MemoryScope[] }; skills?: string[]; system_prompt_addition?: string;
}

/** Memory (S10.1): a scope is `global`, `workspace:ID`, `profile:ID` or `session:ID`. */
export type MemoryChange = { by: "person" } | { by: "tool"; run: string; call_id: string; tool: string };
export interface MemoryRecord {
  v: number;
  scope: string;
  id: string;
  revision: number;
  text: string;
  text_hash: string;
  saved_by: MemoryChange;
  saved_at_ms: number;
  created_at_ms: number;
  /** Set on a deleted or forgotten memory (restorable). */
  forgotten?: { by: MemoryChange; at_ms: number };
}
/** A text document for `addKnowledge`. */
export interface KnowledgeDocument { id: string; title?: string; text: string; }
export type KnowledgeSource =
  | { kind: "attachment"; name: string }
  | { kind: "workspace_file"; session: string; path: string; revision: number }
  | { kind: "artifact"; id: string }
  | { kind: "other"; label: string };
/** A search result: a chunk's text (bounded) and where it came from (base, document, byte offset, SHA-256). */
export interface KnowledgePassage {
  base: string; document: string; title: string; source: KnowledgeSource;
  offset: number; len: number; textHash: string; text: string; truncated: boolean;
  /** The BM25 score: higher is more relevant. */
  score: number;
}

/** Deep Research (S9). `startResearch` resolves with the start turn's run and the task: all a chat message keeps (S9.2). */
export interface ResearchStart { runId: string; task: string; }
export interface DateRange { from: string; to: string; }
/** A research plan: what the report must answer, and the only sources and domains execution may read. */
export interface ResearchPlan {
  questions: string[];
  queries: string[];
  sources: string[];
  domains: string[];
  dates?: DateRange;
  notes?: string[];
}
export type ResearchPhase =
  | "planning" | "awaiting_plan_approval" | "executing" | "synthesizing"
  | "reported" | "partial" | "rejected" | "cancelled" | "interrupted";
export type ResearchActivePhase = "planning" | "executing" | "synthesizing";
/** The plan waiting for the person: shown once (S6.4). */
export interface PlanRequest { id: string; created_at_ms: number; presented: boolean; }
export interface ResearchSource {
  url: string;
  state: "pending" | "read" | "failed";
  evidence?: string;
  final_url?: string;
  /** SHA-256 of the stored text. */
  content_hash?: string;
  reason?: string;
}
export type ResearchGap =
  | { kind: "source_failed"; url: string; reason: string }
  | { kind: "budget_exhausted"; dimension: string }
  | { kind: "stopped" }
  | { kind: "unanswered"; question: string };
/** The report Artifact: its id is the SHA-256 of its bytes (read it with `readArtifact`). */
export interface ReportRef { artifact: string; size: number; }
export interface ResearchView {
  task: string;
  session: string;
  message: string;
  phase: ResearchPhase;
  resume_to?: ResearchActivePhase;
  topic: string;
  urls: string[];
  plan?: ResearchPlan;
  plan_approved: boolean;
  plan_request?: PlanRequest;
  sources: ResearchSource[];
  lookups: { searches: number; reads: number };
  gaps: ResearchGap[];
  report?: ReportRef;
  created_at_ms: number;
  updated_at_ms: number;
}

export type RuntimeEvent =
  | { type: "run"; run: AgentRun }
  /** A Deep Research task of the session moved to `phase`; `runId` is its start turn. */
  | { type: "research"; runId: string; task: string; phase: ResearchPhase }
  | { type: "activity"; runId: string; activity: Activity }
  | { type: "text"; runId: string; text: string }
  /** A piece of the model's reasoning: shown apart, never the answer (S13.4). */
  | { type: "reasoning"; runId: string; text: string }
  /** A tool in flight reported progress (an MCP server's notification); live only, never stored. */
  | { type: "tool_progress"; runId: string; callId: string; tool: string; progress: ToolProgress }
  | { type: "session"; kind: "busy" | "free" | "changed"; session: string; owner: string };
