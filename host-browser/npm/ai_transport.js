// `AgentRuntimeChatTransport`: the AI SDK's chat UI (`useChat`, `Chat`)
// on an `AgentRuntime` of this tab (issue 36 part 6). It implements the
// `ai` package's `ChatTransport` (major version 7): `sendMessages` starts a
// run in the chat's session, or answers the approvals the person gave in
// the UI and follows the run on, and returns the run as a stream of UI
// message chunks; `reconnectToStream` replays a persisted run that is still
// open (waiting for an approval or an answer, or interrupted) from its
// stored activities, and never resumes it (S2.5): only an answer the person
// gives, or the runtime's own `resume`, continues a run.
//
// One assistant message is one run (its id is the run id); one model round
// is one step; a tool call is a `dynamic-tool` part (the runtime, not the
// page, knows the tools) whose input and output are read back from the
// journal (`readToolCall`, `readTranscript`); a pending approval is the
// AI SDK's tool approval (its id the runtime's request id). The stream of a
// run ends when the run waits for the person, is interrupted, or ends.
// Imports nothing at run time: the `ai` package is needed only for its
// types (ai_transport.d.ts).

const FINAL = new Set(['completed', 'failed', 'cancelled']);
/** Statuses in which a run waits for something outside it: the stream ends there. */
const WAITING = new Set(['awaiting_approval', 'awaiting_input', 'interrupted']);

/** The text of a UI message: its text parts, in order. */
function textOf(message) {
  return (message?.parts ?? []).filter((p) => p.type === 'text').map((p) => p.text).join('\n');
}

function isToolPart(part) {
  return part.type === 'dynamic-tool' || part.type.startsWith('tool-');
}

/** `code: message` of a failed call: its result's error, else its journal error code. */
function errorTextOf(view) {
  const result = view.result;
  if (result && result.outcome === 'error') return `${result.code}: ${result.message}`;
  if (view.call.state === 'effect_unknown') {
    return 'effect_unknown: the call may or may not have taken effect; the run asks what to do';
  }
  return view.call.error?.code ?? `the call ended ${view.call.state}`;
}

function finishReasonOf(run) {
  switch (run.status) {
    case 'completed': return run.stop_reason?.reason === 'output_limit' ? 'length' : 'stop';
    case 'failed': return 'error';
    case 'awaiting_approval':
    case 'awaiting_input': return 'tool-calls';
    default: return 'other';
  }
}

function describeStop(run) {
  const r = run.stop_reason;
  if (!r) return `the run ended ${run.status}`;
  const detail = r.dimension ?? r.message ?? r.call_id ?? r.provider;
  return `the run ended ${run.status}: ${r.reason}${detail ? ` (${detail})` : ''}`;
}

/**
 * Turns a run's activities into UI message chunks. Live, text and reasoning
 * arrive as deltas; in a replay, each round's text and reasoning come from
 * the transcript when its `model_response` activity is met.
 */
class RunChunks {
  constructor(runtime, runId, emit) {
    this.runtime = runtime;
    this.runId = runId;
    this.emit = emit;
    this.text = null;
    this.reasoning = null;
    this.parts = 0;
    this.stepOpen = false;
    /** Call ids whose input was sent, and those that are settled. */
    this.inputs = new Set();
    this.settled = new Set();
    /** Approval request id -> call id. */
    this.approvals = new Map();
    this.pending = null;
  }

  nextId(kind) {
    this.parts += 1;
    return `${this.runId}:${kind}${this.parts}`;
  }

  closeText() {
    if (this.text) { this.emit({ type: 'text-end', id: this.text }); this.text = null; }
  }

  closeReasoning() {
    if (this.reasoning) { this.emit({ type: 'reasoning-end', id: this.reasoning }); this.reasoning = null; }
  }

  startStep() {
    if (!this.stepOpen) { this.emit({ type: 'start-step' }); this.stepOpen = true; }
  }

  endStep() {
    this.closeReasoning();
    this.closeText();
    if (this.stepOpen) { this.emit({ type: 'finish-step' }); this.stepOpen = false; }
  }

  textDelta(delta) {
    if (!delta) return;
    this.startStep();
    this.closeReasoning();
    if (!this.text) { this.text = this.nextId('text'); this.emit({ type: 'text-start', id: this.text }); }
    this.emit({ type: 'text-delta', id: this.text, delta });
  }

  reasoningDelta(delta) {
    if (!delta) return;
    this.startStep();
    this.closeText();
    if (!this.reasoning) {
      this.reasoning = this.nextId('reasoning');
      this.emit({ type: 'reasoning-start', id: this.reasoning });
    }
    this.emit({ type: 'reasoning-delta', id: this.reasoning, delta });
  }

  /** The run's pending requests, read once per batch of approvals. */
  async pendingRequest(requestId) {
    if (!this.pending || !this.pending.some((p) => p.id === requestId)) {
      this.pending = (await this.runtime.readRun(this.runId)).pending;
    }
    return this.pending.find((p) => p.id === requestId);
  }

  async toolInput(view) {
    const id = view.call.call_id;
    if (this.inputs.has(id)) return;
    this.inputs.add(id);
    this.startStep();
    this.closeReasoning();
    this.closeText();
    this.emit({
      type: 'tool-input-available', toolCallId: id, toolName: view.call.tool, input: view.input, dynamic: true,
      ...(view.call.target_summary ? { title: `${view.call.tool} → ${view.call.target_summary}` } : {}),
    });
  }

  toolOutcome(view) {
    const id = view.call.call_id;
    if (this.settled.has(id)) return;
    const state = view.call.state;
    // A denied call fails `approval_denied`: its part is `output-denied`,
    // which the answer's activity gives it.
    if (view.result?.outcome === 'error' && view.result.code === 'approval_denied') return;
    if (state === 'committed' && view.result?.outcome === 'success') {
      this.settled.add(id);
      this.emit({ type: 'tool-output-available', toolCallId: id, output: view.result.content, dynamic: true });
    } else if (state === 'committed' || state === 'failed' || state === 'effect_unknown') {
      this.settled.add(id);
      this.emit({ type: 'tool-output-error', toolCallId: id, errorText: errorTextOf(view), dynamic: true });
    }
  }

  /**
   * One activity. `transcript` (a replay) gives each round's text and
   * reasoning and each call's view; live, calls are read as they change.
   */
  async activity(kind, transcript) {
    switch (kind.kind) {
      case 'model_request':
        this.endStep();
        this.startStep();
        break;
      case 'model_response': {
        if (transcript) {
          const round = transcript.rounds.find((r) => r.round === kind.round);
          this.reasoningDelta(round?.reasoning ?? '');
          this.textDelta(round?.text ?? '');
        }
        this.closeReasoning();
        this.closeText();
        break;
      }
      case 'tool_call': {
        const view = transcript
          ? transcript.calls.find((c) => c.call.call_id === kind.call_id)
          : await this.runtime.readToolCall(this.runId, kind.call_id);
        if (!view) break;
        // A replay meets every state of the call; the view is the last one.
        const shown = transcript ? { ...view, call: { ...view.call, state: kind.state } } : view;
        await this.toolInput(shown);
        this.toolOutcome(shown);
        break;
      }
      case 'approval_requested': {
        this.approvals.set(kind.request, kind.call_id);
        const pending = await this.pendingRequest(kind.request);
        const k = pending?.kind;
        this.emit({
          type: 'tool-approval-request', approvalId: kind.request, toolCallId: kind.call_id,
          ...(k && k.kind === 'approval'
            ? { reason: [k.reason, k.target_summary && `Target: ${k.target_summary}`].filter(Boolean).join(' — ') }
            : {}),
        });
        break;
      }
      case 'approval_answered': {
        this.emit({ type: 'tool-approval-response', approvalId: kind.request, approved: kind.approved });
        const call = this.approvals.get(kind.request);
        if (!kind.approved && call) {
          this.settled.add(call);
          this.emit({ type: 'tool-output-denied', toolCallId: call });
        }
        break;
      }
      default:
        break;
    }
  }

  /** The end of this stream: the run ended, or waits for the person. */
  finish(run) {
    this.endStep();
    if (run.status === 'failed') this.emit({ type: 'error', errorText: describeStop(run) });
    this.emit({
      type: 'finish', finishReason: finishReasonOf(run),
      messageMetadata: { runId: run.id, status: run.status, ...(run.stop_reason ? { stopReason: run.stop_reason } : {}) },
    });
  }
}

/**
 * A stream whose chunks `produce(emit)` writes; it closes when `produce`
 * resolves and errors when it rejects. `onCancel` runs when the reader
 * cancels.
 */
function chunkStream(produce, onCancel) {
  let done = false;
  return new ReadableStream({
    start(controller) {
      const emit = (chunk) => { if (!done) controller.enqueue(chunk); };
      produce(emit).then(
        () => { if (!done) { done = true; controller.close(); } },
        (e) => { if (!done) { done = true; controller.error(e); } },
      );
    },
    cancel() { done = true; onCancel?.(); },
  });
}

export class AgentRuntimeChatTransport {
  /**
   * `runtime`: the page's `AgentRuntime`. `session(chatId)`: the session a
   * chat's runs live in (default: the chat id itself). `runOptions`: the
   * options of each new run, or a function of the chat id giving them.
   */
  constructor({ runtime, session, runOptions } = {}) {
    if (!runtime) throw new TypeError('AgentRuntimeChatTransport needs { runtime }');
    this.runtime = runtime;
    this.sessionOf = session ?? ((chatId) => chatId);
    this.runOptions = runOptions;
  }

  /** A reconnection replays the run from its beginning (its stored activities). */
  get resumeStreamIsReplay() {
    return true;
  }

  /**
   * A new user message starts a run with its text (the session's
   * conversation so far goes with it, S12.1; a regeneration sends the
   * chat's own messages as the history instead, so the answer being
   * replaced is left out). When the last message is the run's assistant
   * message, the person's approval answers given in the UI (and outputs of
   * `ask_user` calls) go to the runtime (`approve`, `deny`, `respond`) and
   * the stream follows the run on. Aborting the request stops the run.
   */
  async sendMessages({ chatId, messages, abortSignal, trigger }) {
    const session = this.sessionOf(chatId);
    const last = messages[messages.length - 1];
    if (last?.role === 'assistant') return this.continueRun(session, last, abortSignal);
    if (last?.role !== 'user') throw new TypeError('sendMessages needs a last message from the user or the assistant');
    const prompt = textOf(last);
    const base = typeof this.runOptions === 'function' ? this.runOptions(chatId) : this.runOptions;
    const options = { ...(base ?? {}) };
    if (trigger === 'regenerate-message') {
      options.history = messages.slice(0, -1)
        .filter((m) => m.role === 'user' || m.role === 'assistant')
        .map((m) => ({ role: m.role, content: textOf(m) }))
        .filter((m) => m.content !== '');
    }
    return this.follow(session, abortSignal, null, () => this.runtime.startRun(session, prompt, options));
  }

  /**
   * After a reload: the chat's newest run, replayed from its stored
   * activities when it is still open (waiting for an approval or an answer,
   * interrupted, or running in another tab), and `null` when it has ended
   * or there is none. Nothing is resumed or answered (S2.5).
   */
  async reconnectToStream({ chatId }) {
    const session = this.sessionOf(chatId);
    const runs = (await this.runtime.listRuns(session)).filter((r) => !r.parent && r.mode !== 'research');
    const run = runs[runs.length - 1];
    if (!run || FINAL.has(run.status)) return null;
    return this.replay(run.id);
  }

  /** The stored run `runId` as chunks, from its start to now. */
  replay(runId) {
    const { runtime } = this;
    return chunkStream(async (emit) => {
      const [view, transcript] = await Promise.all([runtime.readRun(runId), runtime.readTranscript(runId)]);
      const chunks = new RunChunks(runtime, runId, emit);
      chunks.pending = view.pending;
      emit({ type: 'start', messageId: runId, messageMetadata: { runId, status: view.run.status } });
      for (const activity of view.activities) await chunks.activity(activity.kind, transcript);
      chunks.finish(view.run);
    });
  }

  /** Send the person's answers found in `message` (the run's message) and follow the run on. */
  async continueRun(session, message, abortSignal) {
    const runId = message.id;
    const view = await this.runtime.readRun(runId);
    const answers = [];
    // What the message shows already: its calls' inputs and approvals.
    const known = { inputs: new Set(), approvals: new Map() };
    for (const part of message.parts.filter(isToolPart)) {
      known.inputs.add(part.toolCallId);
      if (part.approval) known.approvals.set(part.approval.id, part.toolCallId);
      if (part.state === 'approval-responded'
        && view.pending.some((p) => p.id === part.approval.id && p.kind.kind === 'approval')) {
        const { id, approved } = part.approval;
        answers.push(() => (approved ? this.runtime.approve(runId, id) : this.runtime.deny(runId, id)));
      }
      if (part.state === 'output-available') {
        const input = view.pending.find((p) => p.kind.kind === 'input' && p.kind.call_id === part.toolCallId);
        if (input) {
          const text = typeof part.output === 'string' ? part.output : JSON.stringify(part.output);
          answers.push(() => this.runtime.respond(runId, input.id, text));
        }
      }
    }
    if (answers.length === 0) {
      throw new Error(`run ${runId} has no pending request that this message answers`);
    }
    return this.follow(session, abortSignal, known, async () => {
      for (const answer of answers) await answer();
      return runId;
    });
  }

  /**
   * Subscribe to `session`, then `begin()` (start or answer a run; resolves
   * with its id; its rejection is this call's) and stream that run's events
   * until it waits or ends (`known`: the calls and approvals the run's
   * message shows already). The subscription is open before `begin` so
   * that no event is missed; events that come before the run's id is known
   * are kept until it is.
   */
  async follow(session, abortSignal, known, begin) {
    const { runtime } = this;
    const early = [];
    let deliver = (event) => early.push(event);
    const subscription = runtime.subscribe(session, (event) => deliver(event));
    let runId;
    try {
      runId = await begin();
    } catch (e) {
      subscription.close();
      throw e;
    }
    // Stopping the chat (its request aborted) stops the run, while this
    // stream lasts.
    const stop = () => { runtime.stop(runId).catch(() => {}); };
    if (abortSignal?.aborted) stop();
    else abortSignal?.addEventListener('abort', stop, { once: true });
    const end = () => {
      subscription.close();
      abortSignal?.removeEventListener('abort', stop);
    };
    return chunkStream(async (emit) => {
      const chunks = new RunChunks(runtime, runId, emit);
      for (const call of known?.inputs ?? []) chunks.inputs.add(call);
      for (const [request, call] of known?.approvals ?? []) chunks.approvals.set(request, call);
      let finished = false;
      let settle;
      const ended = new Promise((resolve, reject) => { settle = { resolve, reject }; });
      const handle = async (event) => {
        if (finished || event.runId !== runId) return;
        if (event.type === 'text') { chunks.textDelta(event.text); return; }
        if (event.type === 'reasoning') { chunks.reasoningDelta(event.text); return; }
        if (event.type !== 'activity') return;
        const kind = event.activity.kind;
        await chunks.activity(kind, null);
        // The stream ends where the run stops needing it: it ended, or it
        // waits for the person (or for Resume).
        if (kind.kind === 'status_changed' && (FINAL.has(kind.to) || WAITING.has(kind.to))) {
          finished = true;
          chunks.finish({ id: runId, status: kind.to, ...(kind.reason ? { stop_reason: kind.reason } : {}) });
          settle.resolve();
        }
      };
      // Events are handled one at a time, in order: a call's input is read
      // before the next event is turned into chunks.
      let queue = Promise.resolve();
      const enqueue = (event) => {
        queue = queue.then(() => handle(event)).catch((e) => settle.reject(e));
      };
      emit({ type: 'start', messageId: runId, messageMetadata: { runId, status: 'running' } });
      for (const event of early.splice(0)) enqueue(event);
      deliver = enqueue;
      try {
        await ended;
      } finally {
        end();
      }
    }, end);
  }
}
