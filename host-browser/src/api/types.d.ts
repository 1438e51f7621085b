
// The browser host's own types, written by hand: its configuration and run
// options (read field by field in config.rs), its events, error codes and
// the views it builds itself. Every type the Rust side serializes (runs,
// journal, workspace, sessions, ...) is in generated.d.ts beside this file,
// generated from the Rust types (agent_assembly::typescript); both are
// sections of the one `agent_host_browser.d.ts`, so each refers to the
// other's names. `host-browser/typecheck` checks both with `tsc --strict`
// against values from real runs (actors/assembly/examples/ts_values.rs).

/** Stable error codes: every rejected promise is an Error with one of these in `code`. */
export type AgentErrorCode =
  | "invalid_config" | "invalid_argument" | "unavailable" | "session_busy" | "lease_lost"
  | "not_found" | "wrong_status" | "no_such_request" | "wrong_request_kind" | "invalid_answer"
  | "no_such_decision" | "decision_pending" | "run_busy" | "invalid_transition"
  | "storage_error" | "inconsistent_state" | "runtime_error"
  | "already_exists" | "quota_exceeded" | "target_not_empty" | "tool_unavailable";

export interface AgentError extends Error { code: AgentErrorCode; }

// ---------------------------------------------------------------- configuration

/** A preset, or an object whose given limits replace the preset's (or the fallback's) one by one (S4.3, S4.4). */
export type BudgetSpec = BudgetPreset | {
  preset?: BudgetPreset; max_tool_rounds?: number; max_tool_calls?: number; max_tokens?: number; max_duration_ms?: number;
};

export interface PluginFunction {
  name: string; description: string; method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  path: string;
  /** The JSON Schema of the function's arguments. */
  parameters: Record<string, unknown>;
  effects: EffectClass[]; idempotency: Idempotency; sensitivity?: Sensitivity;
  annotations?: Record<string, unknown>;
}

/** What a page tool's `execute` is given besides its arguments (S5.9). */
export interface PageToolContext {
  /** Aborted at the call's deadline, when its run is stopped, or when the call is dropped. */
  signal: AbortSignal;
  run_id: string;
  call_id: string;
  /** The same on every retry of this call: pass it to writes that deduplicate. */
  idempotency_key: string;
  /** Report how far the call has come (a live activity, never journaled). */
  progress(text: string): void;
}

/** A tool the page defines in JavaScript (`registerTool`, S5.9): under the same fingerprint, policy, journal and bounds as every tool. */
export interface PageToolDefinition {
  /** Model-facing: lowercase letters, digits and single underscores; not a built-in's name, not another provider's (S5.5). */
  name: string;
  description: string;
  /** The JSON Schema of the arguments: checked before `execute` runs. */
  parameters: Record<string, unknown>;
  /** What a call may do; the policy decides from these (S6.1). */
  effects: EffectClass[];
  idempotency: Idempotency;
  sensitivity?: Sensitivity;
  /** The argument that names what a call touches (must be one of `parameters`' properties). */
  target?: { arg: string };
  /** `external_untrusted` (default): results are fenced as data. `user`: data the embedder vouches for. */
  trust?: "external_untrusted" | "user";
  /** Each call's deadline, 1 to 300000 ms (default 30000); the signal aborts at it. */
  timeout_ms?: number;
  /** `always` (default): in every agent request; `search`: found with search_tools / load_tools. */
  offer?: "always" | "search";
  /** Do the work; resolve with a JSON value (reject or throw to fail). */
  execute(args: any, ctx: PageToolContext): Promise<unknown>;
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

/** Why a run stopped (S1.3). */
/** What a model can do (S13.1): a model without tool calling runs chat only. */
export interface ModelCapabilities { tool_calling?: boolean; context_window_tokens?: number; max_output_tokens?: number; }

// ---------------------------------------------------------------- journal (S2)

// ---------------------------------------------------------------- pending requests (S6)

// ---------------------------------------------------------------- the run card (S6, S12)

// ---------------------------------------------------------------- sessions and workspace (S7, S12)

/** A workspace file's content: `text` when the bytes are UTF-8. */
export interface FileContent { entry: FileEntry; text?: string; bytes: Uint8Array; }
/** An Artifact's content: `text` when the bytes are UTF-8. */
export interface ArtifactContent { entry: Artifact; text?: string; bytes: Uint8Array; }

/** A tool call's result envelope as stored (S5.4): success with its content, or a typed error. */
export type ToolResultEnvelope =
  | { outcome: "success"; content: JsonValue; trust: Trust; provenance: Provenance; references: Reference[]; receipts: EffectReceipt[] }
  | { outcome: "error"; code: string; message: string; retryable: boolean; trust: Trust; provenance: Provenance; effect_may_have_happened: boolean };

/** One tool call (`readToolCall`): its journal record, the arguments it was prepared with and, once it has one, its result. */
export interface ToolCallView { call: JournalRecord; input: JsonValue; result?: ToolResultEnvelope; }

/** What a run said and did (`readTranscript`): each model round's text and reasoning (apart, S13.4), and every call. */
export interface RunTranscript { rounds: Array<{ round: number; text?: string; reasoning?: string }>; calls: ToolCallView[]; }

// ---------------------------------------------------------------- events

export type MemoryScope = "global" | "workspace" | "profile" | "session";
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
export interface ProfileList { profiles: ProfileSummary[]; unreadable: string[]; }
export interface ProfileImport { revision: ProfileRevision; narrowed: Refused[]; }
/** A turn's own layer (S10.2): it may only narrow the profile. */
export interface ProfileLayer {
  mode?: ProfileMode; provider?: string; model?: string; max_output_tokens?: number;
  reasoning_effort?: ReasoningEffort; reasoning_budget_tokens?: number; web_search?: boolean; approval?: ApprovalMode; budget?: Budget;
  plugins?: string[]; mcp_servers?: string[]; tools?: string[]; knowledge?: string[];
  memory?: { read: MemoryScope[]; write: MemoryScope[] }; skills?: string[]; system_prompt_addition?: string;
}

/** A text document for `addKnowledge`. */
export interface KnowledgeDocument { id: string; title?: string; text: string; }
export type KnowledgeSource =
  | { kind: "attachment"; name: string }
  | { kind: "workspace_file"; session: string; path: string; revision: number; content_hash?: string }
  | { kind: "artifact"; id: string; content_hash?: string }
  | { kind: "local_file"; name: string; content_hash: string }
  | { kind: "other"; label: string };
/** A file `addKnowledgeFromWorkspace` / `addKnowledgeFromArtifact` added: the document, its provenance, the format read and whether its text was cut. */
export interface KnowledgeFileAdded {
  id: string; title: string; source: KnowledgeSource; format: string; truncated: boolean;
}
/** A search result: a chunk's text (bounded) and where it came from (base, document, byte offset, SHA-256). */
export interface KnowledgePassage {
  base: string; document: string; title: string; source: KnowledgeSource;
  offset: number; len: number; textHash: string; text: string; truncated: boolean;
  /** The BM25 score: higher is more relevant. */
  score: number;
}

/** Deep Research (S9). `startResearch` resolves with the start turn's run and the task: all a chat message keeps (S9.2). */
export interface ResearchStart { runId: string; task: string; }
export type ResearchPhase =
  | "planning" | "awaiting_plan_approval" | "executing" | "synthesizing"
  | "reported" | "partial" | "rejected" | "cancelled" | "interrupted";

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
