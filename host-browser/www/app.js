// The demo page, a chat: one AgentRuntime for this tab; the session's
// conversation as messages (the person's prompts, the agent's answers with
// the running turn's text streamed, each turn's tool calls folded under it
// with their target summaries and evidence); the run card beside it; a
// session picker, a Chat/Agent switch, attachments by drag and drop or a
// file picker; the approval / input / decision dialogs; the workspace and
// Artifact lists; the model settings (the scripted scenario, or a real
// model: OpenAI-compatible, Gemini or Anthropic, whose key is held in this
// tab's memory only). Everything shown is read back from the runtime
// (IndexedDB is the source of truth, a prompt's text included: `readRun`
// returns it); events only say when to read again.
import init, { AgentRuntime } from './pkg/agent_host_browser.js';
import { registerDemoTools } from './page_tools.js';
import { showElicitation } from './elicitation.js';

const $ = (id) => document.getElementById(id);
const state = {
  runtime: null, session: 'demo', runId: null, subscription: null, shown: {}, answered: new Set(), openRequest: null,
  // The Deep Research task shown (the newest of the session when none was started here).
  researchTask: null,
  // Streamed text of running turns, by run id (dropped once the run has its output).
  streams: new Map(),
  // Streamed reasoning of running turns, by run id: shown apart, never the answer.
  thoughts: new Map(),
  // Read views of runs that will not change again (completed, failed, cancelled), by run id.
  finalViews: new Map(),
  // The conversation's message elements, by `<run>/user` and `<run>/agent`.
  messages: new Map(),
};
window.agentrtDemo = state;

const FINAL = new Set(['completed', 'failed', 'cancelled']);

function setError(message) {
  const el = $('chat-error');
  el.textContent = message || '';
  el.hidden = !message;
}

function describeError(e) {
  return e && e.code ? `${e.message} (${e.code})` : String(e && e.message || e);
}

async function loadConfig() {
  const hash = new URLSearchParams(location.hash.slice(1));
  const query = new URLSearchParams(location.search);
  let config = window.AGENTRT_CONFIG ? structuredClone(window.AGENTRT_CONFIG) : null;
  if (!config) {
    const name = query.get('scenario') || 'demo';
    const response = await fetch(`./scenarios/${encodeURIComponent(name)}.json`);
    if (!response.ok) throw new Error(`scenario ${name} not found`);
    config = { model: { provider: 'scripted', scenario: await response.json() }, approvalMode: 'permissive' };
  }
  const token = hash.get('gateway-token');
  if (token && !config.gateway) config.gateway = { url: location.origin, token };
  config.workerGlueUrl ??= new URL('./pkg/agent_worker_module.js', import.meta.url).href;
  if (query.get('session')) state.session = query.get('session');
  return config;
}

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'dataset') Object.assign(node.dataset, v);
    else node[k] = v;
  }
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
}

function fmtStop(reason) {
  if (!reason) return '—';
  const extra = reason.dimension ? ` (${reason.dimension})` : reason.call_id ? ` (${reason.call_id})` : reason.message ? ` (${reason.message})` : '';
  return reason.reason + extra;
}

/** `trust · origin · url` of one piece of evidence. */
function fmtEvidence(evidence) {
  if (!evidence) return '';
  const p = evidence.provenance || {};
  const url = p.final_url || p.requested_url;
  return [evidence.trust, p.origin, url].filter(Boolean).join(' · ');
}

/**
 * Put `text` into `node` as paragraphs and fenced code blocks (```), the only
 * formatting the page renders; everything is text, never HTML.
 */
function renderText(node, text) {
  const parts = text.split(/```[^\n]*\n?/);
  node.replaceChildren(...parts.map((part, i) => (i % 2 === 1
    ? el('pre', { className: 'code', tabIndex: 0 }, el('code', { textContent: part.replace(/\n$/, '') }))
    : el('p', { className: 'text', textContent: part.replace(/^\n+|\n+$/g, '') })))
    .filter((n) => n.textContent !== '' || n.tagName === 'PRE'));
}

function bar(label, used, max, unit = '') {
  const wrap = document.createElement('div');
  wrap.className = 'bar';
  const id = `bar-${label.replace(/\W+/g, '-')}`;
  const l = document.createElement('label');
  l.htmlFor = id;
  l.textContent = max ? `${label}: ${used}${unit} of ${max}${unit}` : `${label}: ${used}${unit} (no limit)`;
  const p = document.createElement('progress');
  p.id = id;
  p.max = max || 1;
  p.value = max ? Math.min(used, max) : 0;
  wrap.append(l, p);
  return wrap;
}

function activityText(a) {
  const k = a.kind;
  switch (k.kind) {
    case 'status_changed': return `status ${k.from} → ${k.to}${k.reason ? ` (${fmtStop(k.reason)})` : ''}`;
    case 'model_request': return `model round ${k.round} requested`;
    case 'model_response': return k.incomplete
      ? `model round ${k.round} stopped mid-answer (the text so far is kept, incomplete)`
      : `model round ${k.round} answered (${k.tool_calls} tool calls)`;
    case 'tool_call': return `${k.tool} ${k.call_id}: ${k.state}`;
    case 'approval_requested': return `approval requested for ${k.call_id}`;
    case 'approval_answered': return `approval ${k.approved ? 'granted' : 'denied'}`;
    case 'input_requested': return 'input requested';
    case 'input_answered': return 'input answered';
    case 'decision_requested': return `decision requested for ${k.call_id}`;
    case 'decision_taken': return `decision: ${k.choice}`;
    case 'plan_updated': return 'plan updated';
    case 'child_started': return `child run ${k.child} started`;
    case 'conversation_compacted': return `conversation compacted: the first ${k.turns_covered} turn(s) summarised (${k.tokens_before} → ${k.tokens_after} tokens)`;
    case 'conversation_trimmed': return `conversation: ${k.dropped_turns} oldest turn(s) left out to fit the context, ${k.kept_turns} kept`;
    case 'executor_lost': return `interrupted: the ${k.executor} was lost (Resume continues)`;
    default: return k.kind;
  }
}

/** The run's view; runs that cannot change again are read once. */
async function viewOf(runId) {
  const cached = state.finalViews.get(runId);
  if (cached) return cached;
  const view = await state.runtime.readRun(runId);
  if (FINAL.has(view.run.status)) {
    state.finalViews.set(runId, view);
    state.streams.delete(runId);
  }
  return view;
}

// ---- the conversation ------------------------------------------------------


/** What the agent's message of `view` says: its answer, else the streamed text, else how the turn ended. */
function answerOf(view) {
  const run = view.run;
  if (view.output) return view.output;
  const streamed = state.streams.get(run.id);
  if (streamed) return streamed;
  if (FINAL.has(run.status)) return '';
  return '…';
}

function endNote(run) {
  if (run.status === 'completed') return '';
  if (FINAL.has(run.status)) return `Ended: ${run.status}${run.stop_reason ? ` — ${fmtStop(run.stop_reason)}` : ''}`;
  return run.status === 'running' ? '' : `Now: ${run.status}${run.stop_reason ? ` — ${fmtStop(run.stop_reason)}` : ''}`;
}

function toolItem(view, j) {
  const evidence = view.evidence.find((e) => e.call_id === j.call_id);
  const failure = (view.failures || []).find((f) => f.call_id === j.call_id);
  return el('li', { className: 'tool-call', dataset: { tool: j.tool, state: j.state, trust: evidence?.trust ?? '' } },
    el('span', { className: 'tool-name' }, el('code', { textContent: j.tool })),
    ' ',
    el('span', { className: 'tool-state', textContent: j.state }),
    j.target_summary ? el('span', { className: 'tool-target', textContent: `Target: ${j.target_summary}` }) : null,
    evidence ? el('span', { className: 'tool-evidence', textContent: `Evidence: ${fmtEvidence(evidence)}` }) : null,
    failure ? el('span', { className: 'tool-failure', textContent: `Failed: ${failure.reason}` }) : null);
}

function userMessage(view) {
  const run = view.run;
  const key = `${run.id}/user`;
  let li = state.messages.get(key);
  if (!li) {
    li = el('li', { className: 'msg user', dataset: { run: run.id, role: 'user' } },
      el('span', { className: 'who', textContent: 'You' }), el('div', { className: 'msg-text' }));
    state.messages.set(key, li);
  }
  const text = view.prompt;
  if (li.dataset.text !== text) { li.dataset.text = text; renderText(li.querySelector('.msg-text'), text); }
  return li;
}

function agentMessage(view) {
  const run = view.run;
  const key = `${run.id}/agent`;
  let li = state.messages.get(key);
  if (!li) {
    const select = el('button', { type: 'button', className: 'link', textContent: 'Show on the run card' });
    select.addEventListener('click', () => { state.runId = run.id; renderRun(); $('run-title').scrollIntoView({ block: 'nearest' }); });
    li = el('li', { className: 'msg agent', dataset: { run: run.id, role: 'agent' } },
      el('span', { className: 'who', textContent: run.mode === 'chat' ? 'Agent (chat)' : 'Agent' }),
      el('div', { className: 'msg-text' }),
      el('p', { className: 'msg-status' }),
      el('details', { className: 'turn-tools', hidden: true }, el('summary'), el('ul')),
      select);
    state.messages.set(key, li);
  }
  li.dataset.status = run.status;
  const text = answerOf(view);
  if (li.dataset.text !== text) { li.dataset.text = text; renderText(li.querySelector('.msg-text'), text); }
  // An answer a Stop cut off is kept, marked incomplete (issue 37 part 6).
  li.dataset.incomplete = view.output_incomplete ? 'true' : 'false';
  const note = (view.output_incomplete ? 'Incomplete answer (stopped before it was finished). ' : '') + endNote(run);
  li.querySelector('.msg-status').textContent = note;
  li.querySelector('.msg-status').hidden = !note;
  const details = li.querySelector('details');
  details.hidden = view.journal.length === 0;
  const states = view.journal.map((j) => j.state);
  details.querySelector('summary').textContent = `${view.journal.length} tool call${view.journal.length === 1 ? '' : 's'}`
    + (states.length ? ` (${[...new Set(states)].join(', ')})` : '');
  details.querySelector('ul').replaceChildren(...view.journal.map((j) => toolItem(view, j)));
  return li;
}

/** One streamed piece of `runId`'s text: shown at once, without reading the run. */
function streamed(runId, text) {
  state.streams.set(runId, (state.streams.get(runId) || '') + text);
  const li = state.messages.get(`${runId}/agent`);
  if (li && !state.finalViews.has(runId)) {
    const shown = state.streams.get(runId);
    li.dataset.text = shown;
    renderText(li.querySelector('.msg-text'), shown);
    keepScrolled();
  }
  if (runId === state.runId) renderText($('run-output'), state.streams.get(runId));
}

/** One streamed piece of `runId`'s reasoning: shown apart from the answer, never in it. */
function thought(runId, text) {
  state.thoughts.set(runId, (state.thoughts.get(runId) || '') + text);
  if (runId === state.runId) {
    $('run-reasoning-section').hidden = false;
    renderText($('run-reasoning'), state.thoughts.get(runId));
  }
}

function keepScrolled() {
  const list = $('conversation');
  list.scrollTop = list.scrollHeight;
}

async function renderConversation(runs) {
  const turns = runs.filter((r) => !r.parent && r.mode !== 'research')
    .sort((a, b) => a.created_at_ms - b.created_at_ms);
  const views = await Promise.all(turns.map((r) => viewOf(r.id)));
  const wanted = [];
  for (const view of views) wanted.push(userMessage(view), agentMessage(view));
  const list = $('conversation');
  const grew = wanted.length !== list.children.length;
  wanted.forEach((node, i) => { if (list.children[i] !== node) list.insertBefore(node, list.children[i] ?? null); });
  while (list.children.length > wanted.length) list.lastElementChild.remove();
  if (grew) keepScrolled();
}

// ---- the run card ----------------------------------------------------------

async function renderRun() {
  const card = $('run-card');
  if (!state.runId) {
    // No run (yet) in this session or on this runtime: an empty card.
    card.dataset.status = 'none';
    $('run-id').textContent = '—';
    $('run-status').textContent = 'none';
    for (const id of ['run-mode', 'run-stop-reason']) $(id).textContent = '—';
    for (const id of ['usage', 'plan', 'pending', 'run-output', 'run-reasoning', 'tools', 'activities']) $(id).replaceChildren();
    $('run-reasoning-section').hidden = true;
    $('resume').hidden = true;
    $('stop').hidden = true;
    return;
  }
  let view;
  try { view = await viewOf(state.runId); } catch (e) { setError(describeError(e)); return; }
  const run = view.run;
  card.dataset.status = run.status;
  $('run-id').textContent = run.id;
  $('run-status').textContent = run.status;
  $('run-mode').textContent = run.mode;
  $('run-stop-reason').textContent = fmtStop(run.stop_reason);
  $('resume').hidden = run.status !== 'interrupted';
  $('stop').hidden = !['running', 'awaiting_approval', 'awaiting_input', 'interrupted'].includes(run.status);
  const usage = $('usage');
  usage.replaceChildren(
    bar('Tool rounds', run.usage.tool_rounds, run.budget.max_tool_rounds),
    bar('Tool calls', run.usage.tool_calls, run.budget.max_tool_calls),
    bar('Tokens', run.usage.input_tokens + run.usage.output_tokens, run.budget.max_tokens),
    bar('Active time', Math.round(run.usage.active_ms / 1000), run.budget.max_duration_ms ? Math.round(run.budget.max_duration_ms / 1000) : undefined, ' s'),
  );
  // Prompt-cache and reasoning tokens, as the provider reported them.
  const u = run.usage;
  if (u.cached_input_tokens || u.cache_write_tokens || u.reasoning_tokens) {
    usage.append(el('p', { id: 'usage-tokens', className: 'hint',
      textContent: `Input ${u.input_tokens} tokens (${u.cached_input_tokens ?? 0} read from the prompt cache, ${u.cache_write_tokens ?? 0} written to it); output ${u.output_tokens} tokens (${u.reasoning_tokens ?? 0} reasoning).` }));
  }
  const steps = view.plan?.steps ?? [];
  $('plan').replaceChildren(...(steps.length ? steps.map((s) => el('li', { dataset: { status: s.status } },
    el('span', { className: 'step-title', textContent: s.title }), ' ', el('span', { className: 'badge', textContent: s.status.replace('_', ' ') })))
    : [el('li', { className: 'empty', textContent: 'No plan.' })]));
  $('plan-explanation').textContent = view.plan?.explanation ?? '';
  $('plan-explanation').hidden = !view.plan?.explanation;
  $('pending').replaceChildren(...(view.pending.length ? view.pending.map((p) => {
    const k = p.kind;
    const what = k.kind === 'approval' ? `Approval of ${k.tool}` : k.kind === 'input' ? `Input: ${k.question_text ?? ''}`
      : k.kind === 'elicitation' ? `MCP server ${k.server} asks (untrusted): ${k.question_text ?? ''}` : `Decision on ${k.tool}`;
    return el('li', { dataset: { kind: k.kind } }, el('span', { textContent: what }),
      k.target_summary ? el('span', { className: 'tool-target', textContent: `Target: ${k.target_summary}` }) : null);
  }) : [el('li', { className: 'empty', textContent: 'Nothing.' })]));
  const output = view.output ?? (run.status === 'running' ? state.streams.get(run.id) ?? '' : '');
  renderText($('run-output'), output);
  $('run-output').dataset.incomplete = view.output_incomplete ? 'true' : 'false';
  $('run-output-note').hidden = !view.output_incomplete;
  // The model's reasoning, apart from the answer (S13.4).
  const reasoning = (view.reasoning ?? []).map((r) => r.text).join('\n\n')
    || (run.status === 'running' ? state.thoughts.get(run.id) ?? '' : '');
  $('run-reasoning-section').hidden = !reasoning;
  renderText($('run-reasoning'), reasoning);
  $('tools').replaceChildren(...view.journal.map((j) => {
    const evidence = view.evidence.find((e) => e.call_id === j.call_id);
    const tr = document.createElement('tr');
    for (const v of [j.call_id, j.tool, j.state, j.attempt, j.target_summary ?? '', fmtEvidence(evidence)]) {
      const td = document.createElement('td'); td.textContent = String(v); tr.append(td);
    }
    tr.dataset.state = j.state;
    tr.dataset.tool = j.tool;
    if (evidence) tr.dataset.trust = evidence.trust;
    return tr;
  }));
  $('activities').replaceChildren(...view.activities.map((a) => {
    const li = document.createElement('li'); li.textContent = activityText(a); return li;
  }));
  showPending(view.pending);
}

function showPending(all) {
  const pending = all.filter((p) => !state.answered.has(p.id));
  if (state.openRequest && pending.some((p) => p.id === state.openRequest)) return;
  const next = pending[0];
  if (!next) return;
  if (state.openRequest === next.id) return;
  state.openRequest = next.id;
  state.shown[next.id] = (state.shown[next.id] || 0) + 1;
  const kind = next.kind;
  // Mark it presented in storage too (S6.4); another tab may own the session.
  state.runtime.presentPending(next.run).catch(() => {});
  for (const id of ['approval', 'input', 'decision']) $(id).dataset.run = next.run;
  if (kind.kind === 'approval') {
    $('approval-tool').textContent = kind.tool;
    $('approval-effects').textContent = kind.effects.join(', ') || 'none';
    $('approval-target').textContent = kind.target_summary;
    $('approval-reason').textContent = kind.reason;
    $('approval').dataset.request = next.id;
    $('approval').showModal();
  } else if (kind.kind === 'input') {
    $('input-question').textContent = kind.question_text || '';
    $('input').dataset.request = next.id;
    $('input').showModal();
  } else if (kind.kind === 'elicitation') {
    showElicitation(next, (dialog, text) => {
      if (text === null) { state.openRequest = null; return; }
      answered(dialog, () => state.runtime.respond(next.run, next.id, text));
    });
  } else if (kind.kind === 'decision') {
    $('decision-tool').textContent = kind.tool;
    $('decision').dataset.call = kind.call_id;
    $('decision').dataset.request = next.id;
    $('decision').showModal();
  }
}

async function answered(dialog, action) {
  // Never show an answered request again, even while the answer is on its way.
  const id = dialog.dataset.request;
  state.answered.add(id);
  try { await action(); } catch (e) { setError(describeError(e)); state.answered.delete(id); }
  state.openRequest = null;
  delete dialog.dataset.request;
  await refresh();
}

// ---- sessions, runs, workspace -----------------------------------------------

async function renderSessions() {
  // Newest conversation first; sessions without runs (only files) last.
  const sessions = (await state.runtime.listSessions())
    .sort((a, b) => (b.last_run_at_ms ?? 0) - (a.last_run_at_ms ?? 0) || a.session.localeCompare(b.session));
  const picker = $('session-picker');
  const names = sessions.map((s) => s.session);
  const options = sessions.map((s) => el('option', {
    value: s.session,
    textContent: `${s.session} — ${s.runs} run${s.runs === 1 ? '' : 's'}, ${s.files} file${s.files === 1 ? '' : 's'}`,
  }));
  if (!names.includes(state.session)) options.unshift(el('option', { value: state.session, textContent: `${state.session} — new` }));
  picker.replaceChildren(...options);
  picker.value = state.session;
}

async function renderLists() {
  const rt = state.runtime;
  const runs = await rt.listRuns(state.session);
  $('runs').replaceChildren(...runs.map((r) => {
    const li = document.createElement('li');
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = `${r.id.slice(0, 12)}… ${r.mode} ${r.status}${r.stop_reason ? ` / ${r.stop_reason.reason}` : ''}`;
    b.addEventListener('click', () => { state.runId = r.id; renderRun(); });
    li.append(b);
    return li;
  }));
  const turns = runs.filter((r) => r.mode !== 'research');
  if (!state.runId && turns.length) state.runId = turns[turns.length - 1].id;
  await renderConversation(runs);
  const files = await rt.listWorkspace(state.session);
  $('workspace').replaceChildren(...files.map((f) => {
    const li = document.createElement('li');
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = `${f.path} (${f.size} bytes, revision ${f.revision})`;
    b.addEventListener('click', async () => {
      const file = await rt.readWorkspaceFile(state.session, f.path);
      $('file-view').hidden = false;
      $('file-view').textContent = file.text ?? `${file.bytes.length} bytes`;
    });
    li.append(b);
    return li;
  }));
  const artifacts = await rt.listArtifacts(state.session);
  $('artifacts').replaceChildren(...artifacts.map((a) => {
    const li = document.createElement('li');
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = `${a.name} (${a.mime}, ${a.size} bytes) ${a.id.slice(0, 12)}…`;
    b.addEventListener('click', async () => {
      const art = await rt.readArtifact(state.session, a.id);
      $('file-view').hidden = false;
      $('file-view').textContent = art.text ?? `${art.bytes.length} bytes`;
    });
    li.append(b);
    return li;
  }));
  await renderSessions();
}

// ---- Agent Profiles ------------------------------------------------------------

/** The profile picker: every stored profile, the selection kept. */
async function renderProfiles() {
  const picker = $('profile-picker');
  const { profiles } = await state.runtime.listProfiles();
  // The selection as it is now: the person may have changed it while the
  // list loaded, and a choice read before the wait would undo theirs.
  const chosen = picker.value;
  picker.replaceChildren(el('option', { value: '', textContent: 'No profile' }),
    ...profiles.map((p) => el('option', { value: p.id, textContent: `${p.name} (${p.mode}, r${p.latest})` })));
  picker.value = profiles.some((p) => p.id === chosen) ? chosen : '';
}

/** A sample profile that may only read: its runs cannot write or run code. */
const READ_ONLY_PROFILE = {
  id: 'read-only', name: 'Read only', mode: 'agent', approval: 'strict',
  tools: ['workspace_read', 'workspace_list', 'extract_document'],
  budget: { max_tool_rounds: 5, max_tool_calls: 10 },
  system_prompt_addition: 'You may only read files; never write.',
};

async function addSampleProfile() {
  try { await state.runtime.saveProfile(READ_ONLY_PROFILE, undefined); } catch (e) { if (e.code !== 'already_exists') { setError(describeError(e)); return; } }
  await renderProfiles();
  $('profile-picker').value = READ_ONLY_PROFILE.id;
}

// ---- Deep Research -------------------------------------------------------------

function setResearchError(message) {
  const node = $('research-error');
  node.textContent = message || '';
  node.hidden = !message;
}

function gapText(gap) {
  switch (gap.kind) {
    case 'source_failed': return `${gap.url} could not be read: ${gap.reason}`;
    case 'budget_exhausted': return `out of ${gap.dimension}`;
    case 'stopped': return 'stopped by you';
    case 'unanswered': return `not answered: ${gap.question}`;
    case 'unsupported_claims': return `${gap.count} claim(s) moved to unverified: ${gap.reason}`;
    default: return JSON.stringify(gap);
  }
}

/** The newest task of the session (or the one started here) and its report, read back from the runtime. */
async function renderResearch() {
  const rt = state.runtime;
  const panel = $('research-panel');
  let view = null;
  if (state.researchTask) {
    try { view = await rt.readResearch(state.session, state.researchTask); } catch { view = null; }
  }
  if (!view) view = (await rt.listResearch(state.session))[0] || null;
  if (!view) {
    panel.dataset.phase = 'none';
    $('research-task').textContent = '—';
    $('research-phase').textContent = 'none';
    $('research-plan').hidden = true;
    $('research-report').hidden = true;
    $('research-sources').replaceChildren();
    return;
  }
  state.researchTask = view.task;
  $('research-task').textContent = view.task;
  $('research-phase').textContent = view.resume_to ? `${view.phase} (resumes ${view.resume_to})` : view.phase;
  const plan = view.plan;
  $('research-plan').hidden = !plan && view.phase !== 'interrupted';
  $('research-plan-title').textContent = view.plan_approved ? 'Plan (approved)' : 'Plan (proposed)';
  $('research-questions').replaceChildren(...(plan?.questions || []).map((q) => el('li', { textContent: q })));
  $('research-candidates').replaceChildren(...(plan?.sources || []).map((u) => el('li', {}, el('code', { textContent: u }))));
  $('research-domains').textContent = plan ? `Domains: ${plan.domains.join(', ') || '—'}${plan.dates ? `; dates ${plan.dates.from} to ${plan.dates.to}` : ''}` : '';
  $('research-notes').replaceChildren(...(plan?.notes || []).map((n) => el('li', { textContent: n })));
  const waiting = view.phase === 'awaiting_plan_approval' && view.plan_request;
  $('plan-approve').hidden = !waiting;
  $('plan-reject').hidden = !waiting;
  $('research-resume').hidden = view.phase !== 'interrupted';
  $('research-plan').dataset.request = waiting ? view.plan_request.id : '';
  $('research-sources').replaceChildren(...view.sources.map((s) => el('li', { dataset: { state: s.state } },
    `${s.state} `, el('code', { textContent: s.url }),
    s.evidence ? ` — evidence ${s.evidence}, sha256 ${s.content_hash.slice(0, 12)}…` : '',
    s.reason ? ` — ${s.reason}` : '')));
  $('research-gaps').replaceChildren(...view.gaps.map((g) => el('li', { textContent: gapText(g) })));
  $('research-report').hidden = !view.report;
  if (view.report) {
    const content = await rt.readArtifact(state.session, view.report.artifact);
    const report = JSON.parse(content.text);
    $('report-title').textContent = `Report: ${report.title}${view.phase === 'partial' ? ' (partial)' : ''}`;
    $('report-findings').replaceChildren(...report.findings.map((f) => el('li', { textContent: `${f.claim} [${f.evidence.join(', ')}]` })));
    $('report-unverified').replaceChildren(...report.unverified.map((u) => el('li', { textContent: u.text })));
    $('report-knowledge').replaceChildren(...report.model_knowledge.map((k) => el('li', { textContent: k.text })));
  }
  // Last: the panel's phase says everything of it is shown.
  panel.dataset.phase = view.phase;
}

async function researchAction(act) {
  setResearchError('');
  try { await act(); } catch (e) { setResearchError(describeError(e)); }
  await refresh();
}

let refreshing = null;
let again = false;
async function refresh() {
  if (refreshing) { again = true; return refreshing; }
  refreshing = (async () => {
    do {
      again = false;
      try { await renderLists(); await renderRun(); await renderResearch(); await renderProfiles(); } catch (e) { setError(describeError(e)); }
    } while (again);
  })();
  await refreshing;
  refreshing = null;
}

function subscribe() {
  state.subscription?.close();
  state.subscription = state.runtime.subscribe(state.session, (event) => {
    if (event.type === 'text') { streamed(event.runId, event.text); return; }
    if (event.type === 'reasoning') { thought(event.runId, event.text); return; }
    if (event.type === 'activity' && event.activity?.kind?.kind === 'model_response' && state.streams.get(event.runId)) {
      // The next round's text starts a new paragraph.
      state.streams.set(event.runId, `${state.streams.get(event.runId)}\n\n`);
    }
    if (event.type === 'session') {
      $('session-notice').textContent = event.kind === 'busy' && event.owner !== state.runtime.owner
        ? 'Another tab is running this session.' : '';
    }
    if (event.type === 'research') state.researchTask = event.task;
    // Research runs have their own panel, never the Agent run card (S9.1).
    if (event.type === 'run' && event.run.id !== state.runId && event.run.session === state.session && event.run.mode !== 'research') state.runId = event.run.id;
    refresh();
  });
}

/** Show `session` from now on (its conversation, run card and lists). */
async function switchSession(session) {
  if (!session || session === state.session) return;
  state.session = session;
  state.runId = null;
  state.researchTask = null;
  $('session').value = session;
  $('conversation').replaceChildren();
  $('session-notice').textContent = '';
  const url = new URL(location.href);
  url.searchParams.set('session', session);
  history.replaceState(null, '', url);
  subscribe();
  await refresh();
}

// ---- attachments -------------------------------------------------------------

/** Import each file into the session's workspace at its own name (S12.3). */
async function attachFiles(files) {
  if (!files.length) return;
  setError('');
  const attached = [];
  const problems = [];
  for (const file of files) {
    try {
      const bytes = new Uint8Array(await file.arrayBuffer());
      const entry = await state.runtime.importFile(state.session, file.name, bytes, file.type || undefined, file.name);
      attached.push(entry.path);
    } catch (e) {
      problems.push(`${file.name}: ${describeError(e)}`);
      document.body.dataset.lastError = e.code || 'error';
    }
  }
  $('attach-status').textContent = attached.length ? `Attached to ${state.session}: ${attached.join(', ')}` : '';
  setError(problems.join('\n'));
  await refresh();
}

function acceptDrops() {
  const zone = $('chat-panel');
  const hasFiles = (e) => [...(e.dataTransfer?.types ?? [])].includes('Files');
  zone.addEventListener('dragover', (e) => { if (!hasFiles(e)) return; e.preventDefault(); e.dataTransfer.dropEffect = 'copy'; zone.classList.add('dragging'); });
  zone.addEventListener('dragleave', (e) => { if (!zone.contains(e.relatedTarget)) zone.classList.remove('dragging'); });
  zone.addEventListener('drop', (e) => {
    e.preventDefault();
    zone.classList.remove('dragging');
    attachFiles([...(e.dataTransfer?.files ?? [])]);
  });
  // A file dropped beside the conversation is not opened in place of the page.
  window.addEventListener('dragover', (e) => { if (hasFiles(e)) e.preventDefault(); });
  window.addEventListener('drop', (e) => { if (hasFiles(e)) e.preventDefault(); });
  $('attach-input').addEventListener('change', async (e) => {
    const input = e.target;
    await attachFiles([...input.files]);
    input.value = '';
  });
}

// ---- the model settings --------------------------------------------------------

/** Each remote provider's public endpoint (the runtime's default base URL) and a model it offers. */
const PROVIDERS = {
  'openai-compatible': { endpoint: 'https://api.openai.com/v1', model: 'gpt-4.1-mini' },
  gemini: { endpoint: 'https://generativelanguage.googleapis.com/v1beta', model: 'gemini-2.5-flash' },
  anthropic: { endpoint: 'https://api.anthropic.com/v1', model: 'claude-sonnet-4-5' },
};

/** Show the fields of the chosen provider, with its public endpoint and a model as placeholders. */
function showProviderFields() {
  const provider = $('model-provider').value;
  $('model-form').dataset.provider = provider;
  const known = PROVIDERS[provider];
  $('model-base-url').placeholder = known ? known.endpoint : '';
  $('model-name').placeholder = known ? known.model : '';
}

/**
 * The `model` of the runtime configuration the settings describe: the page's
 * scripted scenario, or a remote model (an empty model name is the
 * placeholder's). The key goes only into this value, never into storage.
 */
function modelFromSettings() {
  const provider = $('model-provider').value;
  if (provider === 'scripted') return state.scriptedModel;
  const model = { provider, model: $('model-name').value.trim() || PROVIDERS[provider].model };
  const baseUrl = $('model-base-url').value.trim();
  if (baseUrl) model.baseUrl = baseUrl;
  const apiKey = $('model-api-key').value;
  if (apiKey) model.apiKey = apiKey;
  return model;
}

/** What the page runs on, for the status line (never the key itself). */
function describeModel(model) {
  if (model.provider === 'scripted') return 'Model: the scripted scenario (no network).';
  const where = model.baseUrl || PROVIDERS[model.provider]?.endpoint;
  return `Model: ${model.provider} ${model.model} at ${where}, ${model.apiKey ? 'with the key you gave' : 'without a key'}.`;
}

// ---- start -------------------------------------------------------------------

/**
 * Create the runtime for `config` and show it; only once it is created is the
 * previous runtime (if any) closed, so a refused configuration leaves the page
 * on the model it had.
 */
async function startRuntime(config) {
  const created = await AgentRuntime.create(config);
  state.subscription?.close();
  state.subscription = null;
  state.runtime?.close();
  state.runtime = created;
  await registerDemoTools(created);
  state.finalViews.clear();
  state.streams.clear();
  state.runId = null;
  state.messages.clear();
  $('conversation').replaceChildren();
  const rt = state.runtime;
  $('host-status').textContent = `Ready. Storage: ${rt.durable ? 'IndexedDB (durable)' : 'memory only — runs are lost on reload'}; session lock: ${rt.lockBackend}.`
    + (rt.recoveredRuns().length ? ` ${rt.recoveredRuns().length} interrupted run(s) wait for Resume.` : '');
  $('model-status').textContent = describeModel(config.model);
  subscribe();
  await refresh();
}

async function applySettings() {
  const form = $('model-form');
  form.dataset.applied = 'pending';
  setError('');
  try {
    await startRuntime({ ...state.baseConfig, model: modelFromSettings() });
    form.dataset.applied = $('model-provider').value;
  } catch (e) {
    $('model-status').textContent = `This model cannot be used: ${describeError(e)}`;
    form.dataset.applied = 'refused';
  }
}

async function main() {
  // The scenario is fetched while the module compiles.
  const [, config] = await Promise.all([init(), loadConfig()]);
  $('session').value = state.session;
  // The settings start on the scripted scenario, which they can return to.
  state.scriptedModel = config.model;
  state.baseConfig = { ...config, model: undefined };
  showProviderFields();
  await startRuntime(config);
  document.body.dataset.ready = 'true';
  acceptDrops();

  $('model-provider').addEventListener('change', showProviderFields);
  $('model-form').addEventListener('submit', (e) => { e.preventDefault(); applySettings(); });
  $('session-form').addEventListener('submit', (e) => { e.preventDefault(); switchSession($('session').value.trim()); });
  $('session-picker').addEventListener('change', (e) => switchSession(e.target.value));
  $('chat-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    setError('');
    await switchSession($('session').value.trim());
    const prompt = $('prompt').value;
    const mode = document.querySelector('input[name="mode"]:checked').value;
    try {
      const profile = $('profile-picker').value;
      const run = await state.runtime.startRun(state.session, prompt, profile ? { mode, profile } : { mode });
      state.runId = run;
    } catch (err) {
      setError(describeError(err));
      document.body.dataset.lastError = err.code || 'error';
    }
    await refresh();
  });
  $('profile-sample').addEventListener('click', addSampleProfile);
  $('research-form').addEventListener('submit', (e) => {
    e.preventDefault();
    researchAction(async () => {
      await switchSession($('session').value.trim());
      const started = await state.runtime.startResearch(state.session, $('research-topic').value, undefined);
      state.researchTask = started.task;
    });
  });
  $('plan-approve').addEventListener('click', () => researchAction(() =>
    state.runtime.approvePlan(state.session, state.researchTask, $('research-plan').dataset.request)));
  $('plan-reject').addEventListener('click', () => researchAction(() =>
    state.runtime.rejectPlan(state.session, state.researchTask, $('research-plan').dataset.request)));
  $('research-resume').addEventListener('click', () => researchAction(() =>
    state.runtime.resumeResearch(state.session, state.researchTask)));
  $('resume').addEventListener('click', async () => {
    setError('');
    state.streams.delete(state.runId);
    try { await state.runtime.resume(state.runId); } catch (e) { setError(describeError(e)); }
    await refresh();
  });
  $('stop').addEventListener('click', async () => {
    try { await state.runtime.stop(state.runId); } catch (e) { setError(describeError(e)); }
    await refresh();
  });
  $('approval').addEventListener('close', () => {
    const dialog = $('approval');
    const request = dialog.dataset.request;
    const run = dialog.dataset.run;
    if (!request) return;
    if (dialog.returnValue !== 'approve' && dialog.returnValue !== 'deny') { state.openRequest = null; return; }
    answered(dialog, () => (dialog.returnValue === 'approve' ? state.runtime.approve(run, request) : state.runtime.deny(run, request)));
  });
  $('input').addEventListener('close', () => {
    const dialog = $('input');
    const request = dialog.dataset.request;
    if (!request) return;
    const run = dialog.dataset.run;
    answered(dialog, () => state.runtime.respond(run, request, $('input-answer').value));
  });
  $('decision').addEventListener('close', () => {
    const dialog = $('decision');
    const call = dialog.dataset.call;
    if (!call || !dialog.returnValue) return;
    const run = dialog.dataset.run;
    answered(dialog, () => state.runtime.decide(run, call, dialog.returnValue));
  });
}

main().catch((e) => {
  $('host-status').textContent = `The runtime could not start: ${describeError(e)}`;
  document.body.dataset.ready = 'failed';
  console.error(e);
});
