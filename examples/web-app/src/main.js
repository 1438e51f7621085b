// An embedder in a few lines: open the runtime from the npm package, start
// one run in a session, and render its events as they come. The model is
// the scripted provider, so the app needs no key; point `model` at an
// OpenAI-compatible endpoint to use a real one.
import init, { AgentRuntime } from 'agent-runtime-browser';
import wasmUrl from 'agent-runtime-browser/agent_host_browser_bg.wasm?url';
import workerGlueUrl from 'agent-runtime-browser/agent_worker_module.js?url';
import workerWasmUrl from 'agent-runtime-browser/agent_worker_module_bg.wasm?url';

const scenario = {
  turns: [
    { text: 'Let me note that.', tool_calls: [
      { name: 'workspace_write', arguments: { path: 'notes/hello.md', content: '# Hello from the example app\n' } },
    ] },
    { text: 'Noted in notes/hello.md.' },
  ],
};

const status = document.getElementById('status');
const answer = document.getElementById('answer');
const list = document.getElementById('events');

function show(line) {
  const item = document.createElement('li');
  item.textContent = line;
  list.append(item);
}

function setStatus(value) {
  status.textContent = value;
  status.dataset.status = value;
}

try {
  await init({ module_or_path: wasmUrl });
  const runtime = await AgentRuntime.create({
    storage: 'memory',
    model: { provider: 'scripted', scenario },
    approvalMode: 'permissive',
    workerGlueUrl: new URL(workerGlueUrl, location.href).href,
    workerWasmUrl: new URL(workerWasmUrl, location.href).href,
  });
  await (await import('./tools.js')).registerExampleTools(runtime);
  const session = 'example';
  let runId = null;
  runtime.subscribe(session, (event) => {
    switch (event.type) {
      case 'run':
        if (event.run.id !== runId) return;
        setStatus(event.run.status);
        show(`run ${event.run.status}`);
        if (event.run.status === 'completed') {
          runtime.readRun(runId).then((view) => { answer.textContent = view.output ?? ''; });
        }
        break;
      case 'activity':
        show(`activity: ${event.activity.kind.kind}`);
        break;
      case 'text':
        answer.textContent += event.text;
        break;
      default:
        break;
    }
  });
  runId = await runtime.startRun(session, 'Write a hello note');
} catch (e) {
  setStatus('error');
  show(`error: ${e.code ?? ''} ${e.message}`);
}
