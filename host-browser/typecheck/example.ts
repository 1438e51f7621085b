// A typed example embedder of the browser runtime: it uses every method and
// getter of `AgentRuntime` and handles every event, activity, pending request
// and stop reason with exhaustive switches (a `never` check each), so that a
// new variant on the Rust side, once in the types, fails `tsc --strict` here
// until an embedder would handle it. Type-checked only (`cargo xtask test`),
// never run; the e2e suite runs the real page.

import init, { AgentRuntime } from "../pkg/agent_host_browser.js";
import type {
  Activity, ActivityKind, AgentError, AgentErrorCode, AgentRun, Artifact, ArtifactContent,
  CopyReport, DeleteReport, Evidence, McpServerStatus, FileContent, FileEntry, JournalRecord, PendingKind,
  AgentProfileV2, FieldChange, KnowledgeFileAdded, KnowledgePassage, MemoryChange, MemoryRecord, PendingRequest, Plan, ProfileImport, ProfileList, ProfileRevision,
  PageToolContext, PageToolDefinition, ProfileRunUse, ResearchGap, ResearchPlan, ResearchStart, ResearchView,
  RevisionCause, RunOptions, RunView, RuntimeConfig, RuntimeEvent, RunTranscript, SessionSummary, Source,
  StopReason, Subscription, ToolCallView,
} from "../pkg/agent_host_browser.js";

/** Fails to compile when a switch misses a case. */
function unreachable(value: never): never {
  throw new Error(`unhandled: ${JSON.stringify(value)}`);
}

function describeStop(reason: StopReason): string {
  switch (reason.reason) {
    case "completed": return "completed";
    case "user_stopped": return "stopped by you";
    case "budget_exhausted": return `out of budget (${reason.dimension})`;
    case "offline": return "offline";
    case "page_interrupted": return "the page was closed";
    case "effect_unknown": return `call ${reason.call_id} may or may not have happened`;
    case "runtime_error": return `${reason.actor}: ${reason.message}`;
    case "provider_unavailable": return `${reason.provider} is unavailable (${reason.message}); resume later`;
    case "output_limit": return "the answer was cut at the model's output limit";
    case "content_filtered": return `${reason.provider} withheld the answer`;
    default: return unreachable(reason);
  }
}

function describeActivity(kind: ActivityKind): string {
  switch (kind.kind) {
    case "status_changed":
      return `${kind.from} → ${kind.to}${kind.reason ? ` (${describeStop(kind.reason)})` : ""}`;
    case "model_request": return `asking the model (round ${kind.round})`;
    case "model_response":
      return `the model answered${kind.text ? ` ${kind.text.size} bytes` : ""} with ${kind.tool_calls} tool calls`;
    case "tool_call": return `${kind.tool} ${kind.call_id}: ${kind.state}`;
    case "approval_requested": return `approval ${kind.request} asked for ${kind.call_id}`;
    case "approval_answered": return `approval ${kind.request}: ${kind.approved ? "approved" : "denied"}`;
    case "input_requested": return `question ${kind.request}`;
    case "input_answered": return `question ${kind.request} answered`;
    case "decision_requested": return `decision ${kind.request} about ${kind.call_id}`;
    case "decision_taken": return `decision ${kind.request}: ${kind.choice}`;
    case "plan_updated": return `plan updated (${kind.plan.hash.slice(0, 8)})`;
    case "child_started": return `child run ${kind.child}`;
    case "conversation_trimmed":
      return `${kind.dropped_turns} earlier turns left out, ${kind.kept_turns} kept`;
    case "conversation_compacted":
      return `first ${kind.turns_covered} turns summarised: ${kind.tokens_before} -> ${kind.tokens_after} tokens (${kind.summary.hash.slice(0, 8)})`;
    case "executor_lost": return `interrupted: ${kind.executor} lost`;
    default: return unreachable(kind);
  }
}

function describeSource(source: Source): string {
  switch (source.kind) {
    case "user": return "you";
    case "tool": return `${source.tool} (run ${source.run}, call ${source.call_id})`;
    case "import": return `imported from ${source.from}`;
    case "attachment": return `your file ${source.name}`;
    default: return unreachable(source);
  }
}

function describeEvidence(evidence: Evidence): string {
  const where = evidence.provenance.final_url ?? evidence.provenance.requested_url ?? evidence.provenance.origin;
  const refs = evidence.references.map((r) => `${r.kind}:${r.id} (${r.size} bytes)`).join(", ");
  return `${evidence.tool} [${evidence.trust}] from ${where}${refs ? `; ${refs}` : ""}`;
}

function describePlan(plan: Plan): string[] {
  const marks = { pending: "[ ]", in_progress: "[~]", completed: "[x]", cancelled: "[-]" } as const;
  return [...(plan.explanation ? [plan.explanation] : []), ...plan.steps.map((s) => `${marks[s.status]} ${s.title}`)];
}

function describeJournal(record: JournalRecord): string {
  const target = record.target_summary ? ` → ${record.target_summary}` : "";
  const receipts = (record.receipts ?? []).map((r) => `${r.effect} ${r.target}`).join(", ");
  const error = record.error ? ` (${record.error.code}${record.error.retryable ? ", retryable" : ""})` : "";
  return `${record.tool} [${record.effects.join(", ")}] ${record.state}${target}${error}${receipts ? `; ${receipts}` : ""}`;
}

/** What the person is asked, and how the page answers it. */
async function answer(runtime: AgentRuntime, request: PendingRequest): Promise<void> {
  const kind: PendingKind = request.kind;
  switch (kind.kind) {
    case "approval":
      console.log(`${kind.tool} wants to ${kind.effects.join(", ")} on ${kind.target_summary}: ${kind.reason}`);
      console.log(`origin ${kind.identity.origin}, scope ${kind.identity.scope.kind}, provider ${kind.identity.provider ?? "none"}`);
      if (kind.effects.includes("write_external")) {
        await runtime.deny(request.run, request.id);
      } else {
        await runtime.approve(request.run, request.id);
      }
      return;
    case "input": {
      const question = kind.question_text ?? `(question ${kind.question.hash})`;
      const choice = kind.choices?.[0];
      const schema = kind.answer_schema;
      const text = choice ?? (schema !== undefined && typeof schema === "object" && schema !== null && !Array.isArray(schema) && schema["type"] === "integer" ? "3" : "yes");
      console.log(`${question} → ${text}`);
      await runtime.respond(request.run, request.id, text);
      return;
    }
    case "elicitation":
      // The server's message is its own text (external_untrusted).
      console.log(`MCP server ${kind.server} asks: ${kind.question_text ?? ""} (fields ${JSON.stringify(kind.answer_schema ?? {})})`);
      await runtime.respond(request.run, request.id, "decline");
      return;
    case "decision":
      console.log(`${kind.tool} (${kind.call_id}) may have happened`);
      await runtime.decide(request.run, kind.call_id, "mark_done");
      return;
    default:
      return unreachable(kind);
  }
}

function onEvent(runtime: AgentRuntime, event: RuntimeEvent): void {
  switch (event.type) {
    case "run": {
      const run: AgentRun = event.run;
      const stop = run.stop_reason ? `: ${describeStop(run.stop_reason)}` : "";
      console.log(`run ${run.id} (${run.mode}) ${run.status}${stop}; ${run.usage.tool_calls}/${run.budget.max_tool_calls} calls, ${run.status_history.length} statuses`);
      if (run.status === "awaiting_approval" || run.status === "awaiting_input") {
        void runtime.presentPending(run.id).then((fresh) => Promise.all(fresh.map((p) => answer(runtime, p))));
      }
      return;
    }
    case "activity": {
      const activity: Activity = event.activity;
      console.log(`#${activity.seq} ${event.runId} ${describeActivity(activity.kind)}`);
      return;
    }
    case "text":
      console.log(`${event.runId}: ${event.text}`);
      return;
    case "reasoning":
      // The model's reasoning: shown apart, never part of the answer (S13.4).
      console.log(`${event.runId} (reasoning): ${event.text}`);
      return;
    case "session":
      console.log(`session ${event.session} is ${event.kind} (${event.owner})`);
      return;
    case "research":
      console.log(`research ${event.task} (turn ${event.runId}) is ${event.phase}`);
      return;
    case "tool_progress": {
      const { progress, total, message } = event.progress;
      console.log(`${event.runId} ${event.tool} (${event.callId}): ${progress}${total === undefined ? "" : `/${total}`} ${message ?? ""}`);
      return;
    }
    default:
      return unreachable(event);
  }
}

function isAgentError(e: unknown): e is AgentError {
  return e instanceof Error && typeof (e as Partial<AgentError>).code === "string";
}

async function showRun(runtime: AgentRuntime, id: string): Promise<void> {
  const view: RunView = await runtime.readRun(id);
  console.log(`run ${view.run.id}: ${view.activities.length} activities, ${view.pending.length} pending`);
  for (const record of view.journal) console.log(describeJournal(record));
  for (const evidence of view.evidence) console.log(describeEvidence(evidence));
  if (view.plan) console.log(describePlan(view.plan).join("\n"));
  for (const failure of view.failures ?? []) console.log(`${failure.call_id} failed: ${failure.reason}`);
  console.log(`prompt: ${view.prompt}`);
  if (view.output !== undefined) console.log(`answer: ${view.output}`);
  // What each round said and what each call was given and returned.
  const transcript: RunTranscript = await runtime.readTranscript(id);
  for (const round of transcript.rounds) console.log(`round ${round.round}: ${round.text ?? ""}`);
  for (const record of view.journal) {
    const call: ToolCallView = await runtime.readToolCall(id, record.call_id);
    const result = call.result;
    const outcome = result === undefined ? "no result yet"
      : result.outcome === "success" ? JSON.stringify(result.content) : `${result.code}: ${result.message}`;
    console.log(`${call.call.tool}(${JSON.stringify(call.input)}) → ${outcome}`);
  }
}

function describeGap(gap: ResearchGap): string {
  switch (gap.kind) {
    case "source_failed": return `${gap.url} could not be read: ${gap.reason}`;
    case "budget_exhausted": return `out of ${gap.dimension}`;
    case "stopped": return "stopped by you";
    case "unanswered": return `not answered: ${gap.question}`;
    case "unsupported_claims": return `${gap.count} claim(s) moved to unverified: ${gap.reason}`;
    default: return unreachable(gap);
  }
}

function describeCause(cause: RevisionCause): string {
  switch (cause.kind) {
    case "saved": return "saved";
    case "rolled_back": return `rolled back to ${cause.to}`;
    case "forked": return `forked from ${cause.from.id} r${cause.from.revision}`;
    case "imported": return "imported";
    case "migrated": return `migrated from a legacy assistant (${cause.legacy_hash.slice(0, 8)})`;
    default: return unreachable(cause);
  }
}

/** Agent Profiles (S10): save, revise, diff, roll back, fork, export, import, run under one. */
async function profiles(runtime: AgentRuntime, session: string): Promise<void> {
  const reader: AgentProfileV2 = {
    id: "reader", name: "Reader", mode: "agent", approval: "strict",
    model: { model: "small", max_output_tokens: 512 }, reasoning: { effort: "low" }, search: { web_search: false },
    budget: { max_tool_rounds: 5, max_tool_calls: 10 }, tools: ["workspace_read"], plugins: [], mcp_servers: [],
    knowledge: [], memory: { read: ["session"], write: [] }, skills: [], system_prompt_addition: "Only read.",
    credentials: { handles: { openai: "openai-key" } },
  };
  const first: ProfileRevision = await runtime.saveProfile(reader, undefined);
  const second = await runtime.saveProfile({ ...reader, budget: { max_tool_rounds: 5, max_tool_calls: 20 } }, first.revision);
  const changes: FieldChange[] = await runtime.diffProfile("reader", first.revision, second.revision);
  changes.forEach((c) => console.log(`${c.path}: ${JSON.stringify(c.before)} → ${JSON.stringify(c.after)}`));
  console.log(describeCause((await runtime.rollbackProfile("reader", 1)).cause));
  console.log(describeCause((await runtime.forkProfile("reader", "reader-2", "Reader 2")).cause));
  const shared: string = await runtime.exportProfile("reader");
  const imported: ProfileImport = await runtime.importProfile(shared, "shared");
  imported.narrowed.forEach((r) => console.log(`${r.layer} ${r.field}: kept ${JSON.stringify(r.kept)}`));
  const list: ProfileList = await runtime.listProfiles();
  list.profiles.forEach((p) => console.log(`${p.id} r${p.latest} ${p.mode}${p.forked_from ? ` from ${p.forked_from.id}` : ""}`));
  console.log((await runtime.readProfile("reader", 2)).profile.name);
  const run = await runtime.startRun(session, "Read it.", { profile: "reader", turn: { tools: ["workspace_read"], approval: "strict" } });
  const uses: ProfileRunUse[] = await runtime.profileRuns("reader");
  console.log(`${run}: ${uses.map((u) => `${u.run}@r${u.revision}`).join(", ")}`);
}

function describeChange(change: MemoryChange): string {
  switch (change.by) {
    case "person": return "you";
    case "tool": return `${change.tool} in run ${change.run} (${change.call_id})`;
    default: return unreachable(change);
  }
}

/** Memory and knowledge (S10.1): the person's side. */
async function memoryAndKnowledge(runtime: AgentRuntime, session: string): Promise<void> {
  const scope = `session:${session}`;
  const saved: MemoryRecord = await runtime.saveMemory(scope, "tea", "The person drinks green tea.");
  const edited = await runtime.editMemory(scope, "tea", saved.revision, "Green tea, no sugar.");
  await runtime.deleteMemory(scope, "tea", edited.revision);
  const gone: MemoryRecord[] = await runtime.listMemories(scope, true);
  gone.forEach((m) => console.log(`${m.id} deleted by ${m.forgotten ? describeChange(m.forgotten.by) : "?"}`));
  const back = await runtime.restoreMemory(scope, "tea");
  (await runtime.listMemories(scope, undefined)).forEach((m) => console.log(`${m.id} r${m.revision} by ${describeChange(m.saved_by)}: ${m.text}`));
  console.log(back.text_hash);
  const added: number = await runtime.addKnowledge("docs", [{ id: "cells.txt", title: "Cells", text: "Cells reach 500 Wh/kg." }]);
  const bases: string[] = await runtime.listKnowledgeBases();
  const passages: KnowledgePassage[] = await runtime.searchKnowledge("docs", "density");
  passages.forEach((p) => console.log(`${p.base}/${p.document}@${p.offset}+${p.len} ${p.textHash} ${p.source.kind}: ${p.text}`));
  console.log(`${added} added to ${bases.join(", ")}`);
  // A workspace file and an Artifact, PDFs included (read by the Worker's bounded readers).
  const fromFile: KnowledgeFileAdded = await runtime.addKnowledgeFromWorkspace("docs", session, "notes/cells.pdf");
  const fromArtifact: KnowledgeFileAdded = await runtime.addKnowledgeFromArtifact("docs", session, "artifact-1");
  for (const f of [fromFile, fromArtifact]) {
    console.log(`${f.id} (${f.title}, ${f.format}${f.truncated ? ", cut" : ""}) from ${f.source.kind}`);
  }
}

/** Deep Research (S9): start, the plan once, a narrower edit, the report. */
async function research(runtime: AgentRuntime, session: string): Promise<void> {
  const started: ResearchStart = await runtime.startResearch(session, "Solid-state batteries in 2025", { budget: "light" });
  const view: ResearchView = await runtime.readResearch(session, started.task);
  const plan: ResearchPlan | null = await runtime.presentPlan(session, started.task);
  if (plan && view.plan_request) {
    const narrower: ResearchPlan = { ...plan, sources: plan.sources.slice(0, 1), questions: plan.questions.slice(0, 1) };
    const done: ResearchView = await runtime.editPlan(session, started.task, view.plan_request.id, narrower);
    done.gaps.forEach((g) => console.log(describeGap(g)));
    if (done.report) console.log(`report ${done.report.artifact} (${done.report.size} bytes)`);
    for (const source of done.sources) console.log(`${source.state} ${source.url} ${source.evidence ?? ""} ${source.content_hash ?? ""}`);
  }
  const other = await runtime.startResearch(session, "Sodium batteries", undefined);
  const pending = await runtime.readResearch(session, other.task);
  if (pending.plan_request) {
    await runtime.approvePlan(session, other.task, pending.plan_request.id);
  }
  const third = await runtime.startResearch(session, "Hydrogen", undefined);
  const waiting = await runtime.readResearch(session, third.task);
  if (waiting.plan_request) await runtime.rejectPlan(session, third.task, waiting.plan_request.id);
  const tasks: ResearchView[] = await runtime.listResearch(session);
  for (const task of tasks) {
    if (task.phase === "interrupted") console.log(`resumes ${task.resume_to}: ${(await runtime.resumeResearch(session, task.task)).phase}`);
  }
  await runtime.stopResearch(session, third.task);
}

export async function main(file: Blob): Promise<void> {
  await init();
  // A real model instead of the scripted one below (the key stays in the tab).
  const gemini: RuntimeConfig["model"] = {
    provider: "gemini", model: "gemini-2.5-flash", apiKey: "from the person",
    capabilities: { tool_calling: true, context_window_tokens: 1_048_576 },
  };
  const local: RuntimeConfig["model"] = { provider: "openai-compatible", model: "local", baseUrl: "http://127.0.0.1:8080/v1" };
  console.log(`could use ${gemini?.provider} or ${local?.provider}`);
  const config: RuntimeConfig = {
    databaseName: "agentrt-example",
    storage: "indexeddb",
    model: { provider: "scripted", scenario: { turns: [
      { text: "", tool_calls: [{ id: "c1", name: "workspace_read", arguments: { path: "inbox/brief.txt" } }], finish: "tool_calls" },
      { text: "Read it.", usage: { input_tokens: 10, output_tokens: 2 }, delay_ms: 5, disconnects: 0 },
    ] } },
    gateway: { url: "http://127.0.0.1:8787", token: "token" },
    plugins: [{
      id: "tickets", base_url: "https://tickets.example", trusted: true, expected_fingerprint: "a".repeat(64),
      auth: { header: "Authorization", secret: "tickets-key", prefix: "Bearer " }, timeout_ms: 10_000,
      functions: [{
        name: "file_ticket", description: "File a ticket.", method: "POST", path: "/tickets",
        parameters: { type: "object", properties: { title: { type: "string" } } },
        effects: ["write_external"], idempotency: "non_idempotent", sensitivity: "private",
        annotations: { title: "File a ticket" },
      }],
    }],
    secrets: [{ handle: "tickets-key", origin: "https://tickets.example", value: "s3cret" }],
    budget: { preset: "light", max_tokens: 50_000 },
    approvalMode: "strict",
    workerGlueUrl: "/pkg/agent_worker_module.js",
    workerWasmUrl: "/pkg/agent_worker_module_bg.wasm",
    leaseTtlMs: 30_000,
    alwaysOnPlugins: ["tickets"],
    searchUrl: "https://search.example/",
    mcpServers: [
      { id: "docs", url: "https://mcp.docs.example/mcp", headers: { Authorization: { secret: "docs-key", prefix: "Bearer " } },
        trusted_functions: [{ name: "search", effects: ["read_network"], idempotency: "idempotent" }] },
      { id: "wiki", url: "https://wiki.example/mcp", via_gateway: true, timeout_ms: 60_000 },
    ],
  };
  const openai: RuntimeConfig = {
    model: { provider: "openai", baseUrl: "http://127.0.0.1:11434/v1", model: "small", apiKey: "k" },
    models: { careful: { provider: "anthropic", model: "claude-sonnet-4-5", apiKey: "k2" } },
  };
  void openai;
  const careful: RunOptions = { model: { provider: "careful" } };
  void careful;

  const runtime: AgentRuntime = await AgentRuntime.create(config);
  console.log(`durable ${runtime.durable}, owner ${runtime.owner}, locks ${runtime.lockBackend}, recovered ${runtime.recoveredRuns().join(", ")}`);
  // A page tool (S5.9): a read-only lookup over this page's own state.
  const orders = new Map<string, { status: string }>([["A-1", { status: "shipped" }]]);
  const lookup: PageToolDefinition = {
    name: "lookup_order", description: "Look an order up by its id.",
    parameters: { type: "object", properties: { id: { type: "string" } }, required: ["id"], additionalProperties: false },
    effects: ["read_local"], idempotency: "idempotent", sensitivity: "private", target: { arg: "id" },
    trust: "user", timeout_ms: 5_000, offer: "always",
    async execute(args: { id: string }, ctx: PageToolContext): Promise<unknown> {
      ctx.progress(`looking up ${args.id} for ${ctx.run_id}/${ctx.call_id} (${ctx.idempotency_key})`);
      if (ctx.signal.aborted) throw new Error("stopped");
      return orders.get(args.id) ?? { error: "no such order" };
    },
  };
  const registered: { name: string; fingerprint: string } = await runtime.registerTool(lookup);
  console.log(`page tool ${registered.name} ${registered.fingerprint.slice(0, 8)}`);
  const removed: boolean = await runtime.unregisterTool("no_such_tool");
  console.log(`removed ${removed}`);
  const describeMcp = (s: McpServerStatus): string =>
    s.connected ? `${s.id}: ${s.tools.length} tools, ${s.refused.map((r) => `${r.name} (${r.why})`).join("; ")}` : `${s.id}: ${s.error ?? "?"}`;
  runtime.mcpServers().forEach((s) => console.log(describeMcp(s)));
  if (runtime.mcpServers().some((s) => !s.connected)) {
    (await runtime.connectMcp()).forEach((s) => console.log(describeMcp(s)));
  }

  const session = "chat-1";
  const subscription: Subscription = runtime.subscribe(session, (event) => onEvent(runtime, event));
  console.log(`${runtime.liveSubscriptions} subscriptions, holding ${session}: ${runtime.holdsSession(session)}`);

  const attached: FileEntry = await runtime.importFile(session, "inbox/brief.txt", file, "text/plain", "Brief (final).txt");
  console.log(`${attached.path} (${attached.mime}, ${attached.size} bytes) from ${describeSource(attached.source)}`);
  await runtime.importFile(session, "inbox/bytes.bin", new Uint8Array([1, 2, 3]));
  await runtime.importFile(session, "inbox/text.md", "# Notes");

  const options: RunOptions = {
    budget: "standard",
    approvalMode: "permissive",
    allowlist: ["workspace_read"],
    skill: { name: "reader", description: "Reads files.", instructions: "Read carefully.", allowed_tools: ["workspace_read"] },
    model: { model: "small", system_prompt: "Be brief.", temperature: 0.2, max_output_tokens: 512 },
    mode: "agent",
    system: "You are a careful assistant.",
    systemExtension: "Answer in English.",
    history: [{ role: "user", content: "Hello" }, { role: "assistant", content: "Hi." }],
    contextWindowTokens: 8192,
  };
  const run: string = await runtime.startRun(session, "What does my file say?", options);
  const chat: string = await runtime.startRun(session, "And in one word?", { mode: "chat" });
  await runtime.startRun(session, "Plain.", undefined);

  await showRun(runtime, run);
  await research(runtime, session);
  await profiles(runtime, session);
  await memoryAndKnowledge(runtime, session);
  for (const p of await runtime.presentPending(chat)) await answer(runtime, p);
  await runtime.stop(chat);
  await runtime.resume(run);

  const runs: AgentRun[] = await runtime.listRuns(session);
  const everyRun: AgentRun[] = await runtime.listRuns();
  console.log(`${runs.length} of ${everyRun.length} runs`);

  const files: FileEntry[] = await runtime.listWorkspace(session);
  for (const f of files) console.log(`${f.path} r${f.revision} by ${describeSource(f.source)}`);
  const content: FileContent = await runtime.readWorkspaceFile(session, "inbox/brief.txt");
  console.log(content.text ?? `${content.bytes.length} bytes of ${content.entry.mime}`);
  const artifacts: Artifact[] = await runtime.listArtifacts(session);
  for (const a of artifacts) {
    const published: ArtifactContent = await runtime.readArtifact(session, a.id);
    console.log(`${a.name} from ${a.from?.path ?? "no file"} by ${describeSource(a.source)}: ${published.bytes.length} bytes`);
  }

  const sessions: SessionSummary[] = await runtime.listSessions();
  for (const s of sessions) console.log(`${s.session}: ${s.runs} runs, ${s.files} files, ${s.artifacts} Artifacts, last ${s.last_run_at_ms ?? "never"}`);
  const copied: CopyReport = await runtime.copySession(session, "chat-1-copy");
  console.log(`copied ${copied.files} files, ${copied.trash_entries} in the trash, ${copied.artifacts} Artifacts`);
  try {
    const deleted: DeleteReport = await runtime.deleteSession(session);
    console.log(`deleted ${deleted.files} files; freed ${deleted.blobs_freed.length} blobs`);
  } catch (e) {
    if (isAgentError(e)) {
      const code: AgentErrorCode = e.code;
      if (code === "session_busy") console.log("a run of the session is still going");
      else throw e;
    } else {
      throw e;
    }
  }

  subscription.close();
  runtime.close();
}
