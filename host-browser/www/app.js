// The demo page: one AgentRuntime for this tab, a chat input, the run card,
// the approval / input / decision dialogs, and the workspace and Artifact
// lists. Everything shown is read back from the runtime (IndexedDB is the
// source of truth); events only say when to read again.
import init, { AgentRuntime } from './pkg/agent_host_browser.js';

const $ = (id) => document.getElementById(id);
const state = { runtime: null, session: 'demo', runId: null, subscription: null, shown: {}, answered: new Set(), openRequest: null, text: '' };
window.agentrtDemo = state;

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
  config.workerGlueUrl ??= new URL('./pkg/agent_host_browser.js', import.meta.url).href;
  if (query.get('session')) state.session = query.get('session');
  return config;
}

function fmtStop(reason) {
  if (!reason) return '—';
  const extra = reason.dimension ? ` (${reason.dimension})` : reason.call_id ? ` (${reason.call_id})` : reason.message ? ` (${reason.message})` : '';
  return reason.reason + extra;
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
    case 'model_response': return `model round ${k.round} answered (${k.tool_calls} tool calls)`;
    case 'tool_call': return `${k.tool} ${k.call_id}: ${k.state}`;
    case 'approval_requested': return `approval requested for ${k.call_id}`;
    case 'approval_answered': return `approval ${k.approved ? 'granted' : 'denied'}`;
    case 'input_requested': return 'input requested';
    case 'input_answered': return 'input answered';
    case 'decision_requested': return `decision requested for ${k.call_id}`;
    case 'decision_taken': return `decision: ${k.choice}`;
    case 'plan_updated': return 'plan updated';
    case 'child_started': return `child run ${k.child} started`;
    case 'conversation_trimmed': return `conversation: ${k.dropped_turns} oldest turn(s) left out to fit the context, ${k.kept_turns} kept`;
    default: return k.kind;
  }
}

async function renderRun() {
  const card = $('run-card');
  if (!state.runId) { card.dataset.status = 'none'; return; }
  let view;
  try { view = await state.runtime.readRun(state.runId); } catch (e) { setError(describeError(e)); return; }
  const run = view.run;
  card.dataset.status = run.status;
  $('run-id').textContent = run.id;
  $('run-status').textContent = run.status;
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
  $('run-output').textContent = view.output ?? (run.status === 'running' ? state.text : '');
  $('tools').replaceChildren(...view.journal.map((j) => {
    const tr = document.createElement('tr');
    for (const v of [j.call_id, j.tool, j.state, j.attempt]) {
      const td = document.createElement('td'); td.textContent = String(v); tr.append(td);
    }
    tr.dataset.state = j.state;
    tr.dataset.tool = j.tool;
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

async function renderLists() {
  const rt = state.runtime;
  const runs = await rt.listRuns(state.session);
  $('runs').replaceChildren(...runs.map((r) => {
    const li = document.createElement('li');
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = `${r.id.slice(0, 12)}… ${r.status}${r.stop_reason ? ` / ${r.stop_reason.reason}` : ''}`;
    b.addEventListener('click', () => { state.runId = r.id; renderRun(); });
    li.append(b);
    return li;
  }));
  if (!state.runId && runs.length) state.runId = runs[runs.length - 1].id;
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
}

let refreshing = null;
let again = false;
async function refresh() {
  if (refreshing) { again = true; return refreshing; }
  refreshing = (async () => {
    do {
      again = false;
      try { await renderLists(); await renderRun(); } catch (e) { setError(describeError(e)); }
    } while (again);
  })();
  await refreshing;
  refreshing = null;
}

function subscribe() {
  state.subscription?.close();
  state.subscription = state.runtime.subscribe(state.session, (event) => {
    if (event.type === 'text') { state.text += event.text; $('run-output').textContent = state.text; return; }
    if (event.type === 'session') {
      $('session-notice').textContent = event.kind === 'busy' && event.owner !== state.runtime.owner
        ? 'Another tab is running this session.' : '';
    }
    if (event.type === 'run' && event.run.id !== state.runId && event.run.session === state.session) state.runId = event.run.id;
    refresh();
  });
}

async function main() {
  await init();
  const config = await loadConfig();
  $('session').value = state.session;
  state.runtime = await AgentRuntime.create(config);
  const rt = state.runtime;
  $('host-status').textContent = `Ready. Storage: ${rt.durable ? 'IndexedDB (durable)' : 'memory only — runs are lost on reload'}; session lock: ${rt.lockBackend}.`
    + (rt.recoveredRuns().length ? ` ${rt.recoveredRuns().length} interrupted run(s) wait for Resume.` : '');
  document.body.dataset.ready = 'true';
  subscribe();

  $('chat-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    setError('');
    const session = $('session').value.trim();
    if (session !== state.session) { state.session = session; state.runId = null; subscribe(); }
    state.text = '';
    try {
      state.runId = await rt.startRun(state.session, $('prompt').value);
    } catch (err) {
      setError(describeError(err));
      document.body.dataset.lastError = err.code || 'error';
    }
    await refresh();
  });
  $('resume').addEventListener('click', async () => {
    setError('');
    state.text = '';
    try { await rt.resume(state.runId); } catch (e) { setError(describeError(e)); }
    await refresh();
  });
  $('stop').addEventListener('click', async () => {
    try { await rt.stop(state.runId); } catch (e) { setError(describeError(e)); }
    await refresh();
  });
  $('approval').addEventListener('close', () => {
    const dialog = $('approval');
    const request = dialog.dataset.request;
    const run = state.runId;
    if (!request) return;
    if (dialog.returnValue !== 'approve' && dialog.returnValue !== 'deny') { state.openRequest = null; return; }
    answered(dialog, () => (dialog.returnValue === 'approve' ? rt.approve(run, request) : rt.deny(run, request)));
  });
  $('input').addEventListener('close', () => {
    const dialog = $('input');
    const request = dialog.dataset.request;
    if (!request) return;
    const run = state.runId;
    answered(dialog, () => rt.respond(run, request, $('input-answer').value));
  });
  $('decision').addEventListener('close', () => {
    const dialog = $('decision');
    const call = dialog.dataset.call;
    if (!call || !dialog.returnValue) return;
    const run = state.runId;
    answered(dialog, () => rt.decide(run, call, dialog.returnValue));
  });
  await refresh();
}

main().catch((e) => {
  $('host-status').textContent = `The runtime could not start: ${describeError(e)}`;
  document.body.dataset.ready = 'failed';
  console.error(e);
});
