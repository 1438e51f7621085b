// The AI SDK transport (issue 36 part 6) read by the AI SDK itself: the
// `ai` package from npm (pinned in package.json), bundled by Vite into a
// page (../ai_harness), drives runs of the runtime through
// `AgentRuntimeChatTransport` (host-browser/npm/ai_transport.js) in
// Chromium, against a loopback OpenAI-compatible model server. Its `Chat`
// (the class behind `useChat`) sends, shows an approval, survives a reload
// (its messages kept as an app keeps them, the run re-attached with
// `resumeStream`) and sends the person's answer; the assembled UI messages
// are checked part by part, types and states. S2.5: a reconnection replays
// and never resumes.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { dirname, extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';
import { RESULTS, setup, uniqueSession } from './helpers.mjs';
import { startModelServer } from './model_servers.mjs';
import { startOpenAiServer } from './openai_server.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const hostBrowser = join(here, '..', '..');
const HARNESS = join(here, '..', 'ai_harness');
const BUNDLE = join(RESULTS, 'ai-harness');
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm' };

/** The harness bundle at /, the runtime at /pkg/, the transport at /npm/: one origin. */
function serve() {
  const roots = [['/pkg/', join(hostBrowser, 'pkg')], ['/npm/', join(hostBrowser, 'npm')], ['/', BUNDLE]];
  const server = createServer(async (req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    const [prefix, dir] = roots.find(([p]) => path.startsWith(p));
    const rel = path.slice(prefix.length) || 'index.html';
    const file = normalize(join(dir, rel));
    if (!file.startsWith(dir + sep)) { res.writeHead(403).end(); return; }
    try {
      const body = await readFile(file);
      res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream', 'cache-control': 'no-store' }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({
    url: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(r); }),
  })));
}

let env;
let site;
before(async () => {
  await build({
    root: HARNESS, configFile: false, logLevel: 'warn',
    build: { outDir: BUNDLE, emptyOutDir: true, target: 'es2022' },
  });
  env = await setup();
  site = await serve();
});
after(async () => { await site?.close(); await env?.close(); });

/**
 * Open the harness: a runtime on IndexedDB `databaseName`, the transport,
 * and a `Chat` whose messages are kept in localStorage (as an app keeps a
 * chat's messages across reloads) and restored when the page opens again.
 */
async function openChat(page, { databaseName, baseUrl, session, approvalMode }) {
  await page.goto(`${site.url}/`);
  await page.waitForSelector('body[data-ready="true"]', { state: 'attached', timeout: 30_000 });
  await page.evaluate(async ({ databaseName, baseUrl, session, approvalMode }) => {
    const pkg = await import('/pkg/agent_host_browser.js');
    await pkg.default();
    const { AgentRuntimeChatTransport } = await import('/npm/ai_transport.js');
    window.rt = await pkg.AgentRuntime.create({
      databaseName, model: { provider: 'openai', baseUrl, model: 'e2e-model' }, approvalMode,
    });
    window.transport = new AgentRuntimeChatTransport({ runtime: window.rt });
    const key = `chat:${session}`;
    window.chatErrors = [];
    window.chat = new window.aiSdk.PageChat({
      id: session,
      transport: window.transport,
      messages: JSON.parse(localStorage.getItem(key) ?? '[]'),
      onChange: (messages) => localStorage.setItem(key, JSON.stringify(messages)),
      onError: (e) => window.chatErrors.push(String(e)),
      sendAutomaticallyWhen: window.aiSdk.lastAssistantMessageIsCompleteWithApprovalResponses,
    });
    /**
     * Send `messages` through the transport and read what
     * `readUIMessageStream` assembles from its chunks (continuing `message`,
     * the run's message, when the last message is it).
     */
    window.sendAndRead = async (messages, message) => {
      const stream = await window.transport.sendMessages({
        trigger: 'submit-message', chatId: session, messageId: message?.id, messages, abortSignal: undefined,
      });
      let last = message;
      for await (const m of window.aiSdk.readUIMessageStream({ stream, message })) last = m;
      return last;
    };
    /** Resolves once `check()` holds (checked as the chat changes; bounded). */
    window.until = async (check, what) => {
      for (let i = 0; i < 600; i += 1) {
        if (await check()) return;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`never: ${what}; chat ${window.chat.status}, ${JSON.stringify(window.chat.messages)}`);
    };
  }, { databaseName, baseUrl, session, approvalMode });
}

/** The chat's messages, its status and errors. */
function chatState(page) {
  return page.evaluate(() => ({ status: window.chat.status, messages: window.chat.messages, errors: window.chatErrors }));
}

/**
 * `body({ page, model, session, options, pageErrors })` with a model server
 * of its own (`models`: the OpenAI format of model_servers.mjs; `hang`:
 * openai_server.mjs, whose replies can keep a response open), a fresh
 * browser context, a session and the chat opened on it (`options` opens
 * it again after a reload).
 */
async function withChat({ name, server, approvalMode }, body) {
  const model = server === 'hang' ? await startOpenAiServer() : await startModelServer('openai');
  const context = await env.browser.newContext();
  try {
    const page = await context.newPage();
    const pageErrors = [];
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    const session = uniqueSession(name);
    const options = { databaseName: `ai-${session}`, baseUrl: model.baseUrl, session, approvalMode };
    await openChat(page, options);
    await body({ page, model, session, options, pageErrors });
  } finally {
    await context.close();
    await model.close();
  }
}

/** The parts of `message` without fields the SDK leaves undefined. */
function plain(value) {
  return JSON.parse(JSON.stringify(value));
}

test('issue 36 part 6: the AI SDK\'s Chat on the transport — text, reasoning, a tool call, its approval, a reload in the middle, the answer — assembles the messages the SDK expects', async () => {
  await withChat({ name: 'ai-chat', server: 'models', approvalMode: 'strict' }, async ({ page, model, session, options, pageErrors }) => {
    model.reply(
      { reasoning: { text: 'The person wants a note written.' }, text: 'Let me write the note.',
        calls: [{ name: 'workspace_write', args: { path: 'notes/a.md', content: '# A\n' } }], usage: { input: 10, output: 5 } },
      { text: 'The note is written.', usage: { input: 20, output: 5 } },
    );
    // sendMessage resolves when the transport's stream ends: the run waits for the approval.
    await page.evaluate(() => window.chat.sendMessage({ text: 'Write a note to notes/a.md.' }));
    const asked = await chatState(page);
    assert.equal(asked.status, 'ready', JSON.stringify(asked));
    assert.deepEqual(asked.errors, []);
    assert.equal(asked.messages.length, 2);
    const [user, assistant] = plain(asked.messages);
    assert.equal(user.role, 'user');
    assert.deepEqual(user.parts, [{ type: 'text', text: 'Write a note to notes/a.md.' }]);
    assert.equal(assistant.role, 'assistant');
    const runId = assistant.id;
    const view = await page.evaluate((id) => window.rt.readRun(id), runId);
    assert.equal(view.run.status, 'awaiting_approval', 'the assistant message is the run (its id is the run id)');
    assert.deepEqual(assistant.metadata, { runId, status: 'awaiting_approval' });
    const [approval] = view.pending;
    const callId = approval.kind.call_id;
    assert.deepEqual(assistant.parts.map((p) => [p.type, p.state]), [
      ['step-start', undefined], ['reasoning', 'done'], ['text', 'done'], ['dynamic-tool', 'approval-requested'],
    ]);
    assert.equal(assistant.parts[1].text, 'The person wants a note written.');
    assert.equal(assistant.parts[2].text, 'Let me write the note.');
    const tool = assistant.parts[3];
    assert.equal(tool.toolName, 'workspace_write');
    assert.equal(tool.toolCallId, callId);
    assert.deepEqual(tool.input, { path: 'notes/a.md', content: '# A\n' });
    assert.equal(tool.approval.id, approval.id, 'the approval is the runtime\'s pending request');
    assert.match(tool.approval.requestReason, /notes\/a\.md/, 'the request says what the call writes to');
    assert.equal(model.requests.length, 1);

    // A reload in the middle: the run waits (S6.4); the chat's messages come
    // back from storage and resumeStream re-attaches to the run.
    await page.reload();
    await openChat(page, options);
    await page.evaluate(() => window.chat.resumeStream());
    const replayed = await chatState(page);
    assert.equal(replayed.status, 'ready');
    assert.deepEqual(replayed.errors, []);
    assert.deepEqual(plain(replayed.messages), [user, assistant], 'the replay assembles the same messages');
    assert.equal((await page.evaluate((id) => window.rt.readRun(id), runId)).run.status, 'awaiting_approval',
      'reconnecting answered nothing and resumed nothing (S2.5)');
    assert.equal(model.requests.length, 1);

    // The person approves in the UI: the Chat sends, the transport approves.
    await page.evaluate((id) => window.chat.addToolApprovalResponse({ id, approved: true }), approval.id);
    await page.evaluate(() => window.until(
      () => window.chat.status === 'ready' && window.chat.messages[1]?.metadata?.status === 'completed', 'the run completed'));
    const done = await chatState(page);
    assert.deepEqual(done.errors, []);
    assert.equal(done.messages.length, 2, 'the answer continues the run\'s message');
    const final = plain(done.messages[1]);
    assert.equal(final.id, runId);
    assert.deepEqual(final.metadata, { runId, status: 'completed', stopReason: { reason: 'completed' } });
    assert.deepEqual(final.parts.map((p) => [p.type, p.state]), [
      ['step-start', undefined], ['reasoning', 'done'], ['text', 'done'], ['dynamic-tool', 'output-available'],
      ['step-start', undefined], ['text', 'done'],
    ]);
    assert.equal(final.parts[5].text, 'The note is written.');
    const call = await page.evaluate(([r, c]) => window.rt.readToolCall(r, c), [runId, callId]);
    assert.equal(call.call.state, 'committed');
    assert.equal(call.result.outcome, 'success');
    assert.deepEqual(final.parts[3].output, call.result.content, 'the output is the journaled result');
    assert.deepEqual(final.parts[3].approval, { id: approval.id, approved: true, requestReason: tool.approval.requestReason });
    const file = await page.evaluate((s) => window.rt.readWorkspaceFile(s, 'notes/a.md'), session);
    assert.equal(file.text, '# A\n');
    assert.equal(model.requests.length, 2);
    // An ended run has no stream to re-attach to.
    assert.equal(await page.evaluate((s) => window.transport.reconnectToStream({ chatId: s }), session), null);
    // What the transport read the parts from: the run's own blobs.
    const transcript = await page.evaluate((id) => window.rt.readTranscript(id), runId);
    assert.deepEqual(transcript.rounds, [
      { round: 1, text: 'Let me write the note.', reasoning: 'The person wants a note written.' },
      { round: 2, text: 'The note is written.' },
    ]);
    assert.deepEqual(transcript.calls, [call]);
    // Bad input is a typed error.
    const codes = await page.evaluate(async (id) => {
      const codeOf = (p) => p.then(() => 'resolved', (e) => e.code);
      return [
        await codeOf(window.rt.readToolCall(id, 'call-that-was-never-made')),
        await codeOf(window.rt.readToolCall(id, '')),
        await codeOf(window.rt.readTranscript('run-that-never-was')),
        await codeOf(window.rt.readTranscript('')),
      ];
    }, runId);
    assert.deepEqual(codes, ['not_found', 'invalid_argument', 'not_found', 'invalid_argument']);
    assert.deepEqual(pageErrors, []);
  });
});

test('issue 36 part 6: readUIMessageStream assembles a denied call as output-denied and the run\'s answer after it', async () => {
  await withChat({ name: 'ai-deny', server: 'models', approvalMode: 'strict' }, async ({ page, model }) => {
    model.reply(
      { text: 'Writing.', calls: [{ name: 'workspace_write', args: { path: 'b.md', content: 'b' } }], usage: { input: 1, output: 1 } },
      { text: 'I did not write it.', usage: { input: 1, output: 1 } },
    );
    const messages = await page.evaluate(async () => {
      const user = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Write b.md.' }] };
      const first = await window.sendAndRead([user]);
      const asked = structuredClone(first);
      // What the Chat's addToolApprovalResponse does to the part.
      const part = first.parts.find((p) => p.type === 'dynamic-tool');
      part.state = 'approval-responded';
      part.approval = { ...part.approval, approved: false };
      const second = await window.sendAndRead([user, first], first);
      return { asked, second };
    });
    assert.deepEqual(messages.asked.parts.map((p) => [p.type, p.state]),
      [['step-start', undefined], ['text', 'done'], ['dynamic-tool', 'approval-requested']]);
    assert.deepEqual(plain(messages.second).parts.map((p) => [p.type, p.state]), [
      ['step-start', undefined], ['text', 'done'], ['dynamic-tool', 'output-denied'], ['step-start', undefined], ['text', 'done'],
    ]);
    assert.equal(messages.second.parts[2].approval.approved, false);
    assert.equal(messages.second.parts[4].text, 'I did not write it.');
    assert.equal(messages.second.metadata.status, 'completed');
    const runView = await page.evaluate((id) => window.rt.readRun(id), messages.second.id);
    assert.equal(runView.journal[0].state, 'failed', 'the denied call was never dispatched');
  });
});

test('issue 36 part 6: a failed call is an output-error part with the tool\'s code and message, and the run goes on', async () => {
  await withChat({ name: 'ai-error', server: 'models', approvalMode: 'permissive' }, async ({ page, model }) => {
    model.reply(
      { calls: [{ name: 'workspace_read', args: { path: 'missing.txt' } }], usage: { input: 1, output: 1 } },
      { text: 'There is no such file.', usage: { input: 1, output: 1 } },
    );
    const message = await page.evaluate(() => window.sendAndRead([{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Read missing.txt.' }] }]));
    assert.deepEqual(plain(message).parts.map((p) => [p.type, p.state]),
      [['step-start', undefined], ['dynamic-tool', 'output-error'], ['step-start', undefined], ['text', 'done']]);
    const [tool] = message.parts.filter((p) => p.type === 'dynamic-tool');
    assert.deepEqual(tool.input, { path: 'missing.txt' });
    const call = await page.evaluate(([r, c]) => window.rt.readToolCall(r, c), [message.id, tool.toolCallId]);
    assert.equal(call.result.outcome, 'error');
    assert.equal(tool.errorText, `${call.result.code}: ${call.result.message}`);
    assert.equal(message.metadata.status, 'completed');
  });
});

test('issue 36 part 6: an ask_user question is a tool part waiting for its output; the output the page adds is the runtime\'s answer', async () => {
  await withChat({ name: 'ai-ask', server: 'models', approvalMode: 'permissive' }, async ({ page, model }) => {
    model.reply(
      { calls: [{ name: 'ask_user', args: { question: 'What is your name?' } }], usage: { input: 1, output: 1 } },
      { text: 'Hello, Ada.', usage: { input: 1, output: 1 } },
    );
    const result = await page.evaluate(async () => {
      const user = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Greet me.' }] };
      const first = await window.sendAndRead([user]);
      const asked = structuredClone(first);
      // What the Chat's addToolOutput does to the part.
      const part = first.parts.find((p) => p.type === 'dynamic-tool');
      part.state = 'output-available';
      part.output = 'Ada';
      const second = await window.sendAndRead([user, first], first);
      return { asked, second };
    });
    const [tool] = result.asked.parts.filter((p) => p.type === 'dynamic-tool');
    assert.equal(tool.toolName, 'ask_user');
    assert.equal(tool.state, 'input-available');
    assert.deepEqual(tool.input, { question: 'What is your name?' });
    assert.equal(result.asked.metadata.status, 'awaiting_input');
    assert.equal(result.second.metadata.status, 'completed');
    const texts = result.second.parts.filter((p) => p.type === 'text').map((p) => p.text);
    assert.deepEqual(texts, ['Hello, Ada.']);
    const call = await page.evaluate(([r, c]) => window.rt.readToolCall(r, c), [result.second.id, tool.toolCallId]);
    assert.equal(call.call.state, 'committed');
    assert.match(JSON.stringify(call.result.content), /Ada/, 'the runtime recorded the page\'s answer');
  });
});

test('issue 36 part 6: the Chat\'s regenerate() starts a new run whose history is the chat\'s own, without the answer it replaces', async () => {
  await withChat({ name: 'ai-regenerate', server: 'models', approvalMode: 'permissive' }, async ({ page, model }) => {
    model.reply({ text: 'First answer.', usage: { input: 1, output: 1 } }, { text: 'Second answer.', usage: { input: 1, output: 1 } });
    await page.evaluate(() => window.chat.sendMessage({ text: 'Hi.' }));
    const first = await page.evaluate(() => window.chat.messages[1].id);
    await page.evaluate(() => window.chat.regenerate());
    const state = await chatState(page);
    assert.deepEqual(state.errors, []);
    assert.equal(state.messages.length, 2);
    const answer = plain(state.messages[1]);
    assert.notEqual(answer.id, first, 'a new run');
    assert.deepEqual(answer.parts.filter((p) => p.type === 'text').map((p) => p.text), ['Second answer.']);
    const sent = model.requests[1].body.messages.filter((m) => m.role !== 'system').map((m) => [m.role, m.content]);
    assert.deepEqual(sent, [['user', 'Hi.']], 'the replaced answer is not in the new run\'s conversation');
  });
});

test('issue 36 part 6: the Chat\'s stop() stops the run', async () => {
  await withChat({ name: 'ai-stop', server: 'hang', approvalMode: 'permissive' }, async ({ page, model }) => {
    model.reply({ hang: 'Still thinking' });
    await page.evaluate(() => { window.chat.sendMessage({ text: 'Take your time.' }); });
    await model.waitForRequests(1);
    await page.evaluate(() => window.until(() => window.chat.messages.length === 2, 'the run\'s message'));
    await page.evaluate(() => window.chat.stop());
    const runId = await page.evaluate(() => window.chat.messages[1].id);
    await page.evaluate((id) => window.until(
      async () => (await window.rt.readRun(id)).run.status === 'cancelled', 'the run cancelled'), runId);
    const { run } = await page.evaluate((id) => window.rt.readRun(id), runId);
    assert.deepEqual(run.stop_reason, { reason: 'user_stopped' });
  });
});

test('S2.5: reconnectToStream after a reload replays an interrupted run and never resumes it', async () => {
  await withChat({ name: 'ai-reconnect', server: 'hang', approvalMode: 'permissive' }, async ({ page, model, options }) => {
    // The model is still answering when the page goes away.
    model.reply({ hang: 'Half an ans' });
    await page.evaluate(() => { window.chat.sendMessage({ text: 'Answer slowly.' }); });
    await model.waitForRequests(1);
    await page.evaluate(() => window.until(() => window.chat.messages.length === 2, 'the run\'s message'));
    await page.reload();
    await openChat(page, options);
    const runId = await page.evaluate(() => window.rt.recoveredRuns()[0]);
    assert.ok(runId, 'the reload interrupted the run');
    // The page that went away may have retried its broken request while it
    // unloaded (S13.2); from here on only this page could ask the model.
    const asked = model.requests.length;
    await page.evaluate(() => window.chat.resumeStream());
    const state = await chatState(page);
    assert.equal(state.status, 'ready');
    const message = plain(state.messages[1]);
    assert.equal(message.id, runId);
    assert.equal(message.metadata.status, 'interrupted');
    assert.deepEqual(message.metadata.stopReason, { reason: 'page_interrupted' });
    assert.deepEqual(message.parts, [{ type: 'step-start' }], 'the stored run: one round asked, no answer stored');
    // Had the reconnection resumed the run, it would be running (and asking the model) by now.
    assert.equal((await page.evaluate((id) => window.rt.readRun(id), runId)).run.status, 'interrupted');
    assert.equal(model.requests.length, asked);
    // Resume, the person's explicit action, is what asks the model again.
    model.reply({ text: 'The whole answer.' });
    await page.evaluate((id) => window.rt.resume(id), runId);
    await model.waitForRequests(asked + 1);
  });
});
