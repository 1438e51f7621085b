// Real model providers from the demo page (issue 15 items 4 and 5, SPEC
// S13): the page's settings panel points the runtime at a loopback server of
// each wire format (OpenAI-compatible, Gemini, Anthropic; ./model_servers.mjs)
// that streams the format's exact events split at odd byte boundaries.
// Per format: a full tool round (two workspace_write calls in one turn, their
// arguments split mid-key, then the answer) with usage on the run card and the
// tool results sent back in the format's own shape, the key in the format's
// header and nowhere else in the page (S13.3); a finish reason other than
// stop; a stream broken mid-answer, repeated once; a 401 that fails the run
// at once; a server down past the retry bound, which interrupts the run with
// provider_unavailable until Resume (S13.2).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { RESULTS, send, setup, uniqueSession } from './helpers.mjs';
import { closedPort, startModelServer } from './model_servers.mjs';

const FORMATS = ['openai', 'gemini', 'anthropic'];
/** The settings panel's provider of each format, and a model name it knows. */
const SETTINGS = {
  openai: { provider: 'openai-compatible', model: 'gpt-4.1-mini' },
  gemini: { provider: 'gemini', model: 'gemini-2.5-flash' },
  anthropic: { provider: 'anthropic', model: 'claude-sonnet-4-5' },
};

let env;
before(async () => { env = await setup(); });
after(async () => { await env?.close(); });

/** The demo page as `cargo xtask demo` serves it (no injected configuration), on `session`. */
async function openDemo(context, session) {
  const page = await context.newPage();
  page.errors = [];
  page.consoleText = [];
  page.on('console', (m) => { page.consoleText.push(m.text()); if (m.type() === 'error') page.errors.push(m.text()); });
  page.on('pageerror', (e) => page.errors.push(String(e)));
  await page.goto(`${env.pageUrl}/?session=${encodeURIComponent(session)}`);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
  return page;
}

/** Fill the settings panel (through its labels) and apply it; waits for the new runtime. */
async function useModel(page, { provider, baseUrl = '', model = '', apiKey = '' }) {
  await page.getByLabel('Provider').selectOption(provider);
  await page.getByLabel('Base URL').fill(baseUrl);
  await page.getByLabel('Model', { exact: true }).fill(model);
  await page.getByLabel('API key').fill(apiKey);
  await page.getByRole('button', { name: 'Use this model' }).click();
  await page.waitForFunction(() => !['pending', undefined].includes(document.getElementById('model-form').dataset.applied));
  assert.equal(await page.locator('#model-form').getAttribute('data-applied'), provider, await page.locator('#model-status').textContent());
}

async function runView(page) {
  return page.evaluate(async () => window.agentrtDemo.runtime.readRun(window.agentrtDemo.runId));
}

/** Wait until the shown run is the one of `prompt`, in one of `statuses`, and the run card shows that status. */
async function waitRunOf(page, prompt, statuses, timeout = 30_000) {
  const deadline = Date.now() + timeout;
  let last = null;
  while (Date.now() < deadline) {
    last = await page.evaluate(async () => {
      const d = window.agentrtDemo;
      if (!d.runId) return null;
      const view = await d.runtime.readRun(d.runId);
      return { prompt: view.prompt, status: view.run.status, shown: document.getElementById('run-status').textContent };
    });
    if (last && last.prompt === prompt && statuses.includes(last.status) && last.shown === last.status) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the run of ${JSON.stringify(prompt)} never reached ${statuses} on the run card: ${JSON.stringify(last)}`);
}

/** Every stored byte the page can reach: each IndexedDB database's stores (keys and values), localStorage and sessionStorage. */
async function storedText(page) {
  return page.evaluate(async () => {
    const decode = (v) => new TextDecoder('utf-8', { fatal: false }).decode(v);
    const text = async (v) => {
      if (v === null || v === undefined) return String(v);
      if (v instanceof ArrayBuffer) return decode(new Uint8Array(v));
      if (ArrayBuffer.isView(v)) return decode(new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
      if (v instanceof Blob) return v.text();
      if (Array.isArray(v)) return (await Promise.all(v.map(text))).join('\n');
      if (typeof v === 'object') {
        const parts = [];
        for (const [k, x] of Object.entries(v)) parts.push(`${k}=${await text(x)}`);
        return parts.join('\n');
      }
      return String(v);
    };
    const out = [];
    for (const { name } of await indexedDB.databases()) {
      const db = await new Promise((resolve, reject) => {
        const req = indexedDB.open(name);
        req.onsuccess = () => resolve(req.result);
        req.onerror = () => reject(req.error);
      });
      for (const store of db.objectStoreNames) {
        const rows = await new Promise((resolve, reject) => {
          const found = [];
          const req = db.transaction(store, 'readonly').objectStore(store).openCursor();
          req.onsuccess = () => {
            const cursor = req.result;
            if (!cursor) { resolve(found); return; }
            found.push([cursor.key, cursor.value]);
            cursor.continue();
          };
          req.onerror = () => reject(req.error);
        });
        for (const [key, value] of rows) out.push(`${name}/${store}: ${await text(key)} ${await text(value)}`);
      }
      db.close();
    }
    for (const storage of [localStorage, sessionStorage]) {
      for (let i = 0; i < storage.length; i += 1) out.push(`${storage.key(i)}=${storage.getItem(storage.key(i))}`);
    }
    return out.join('\n');
  });
}

/** The tool results of a recorded request, in the format's own shape, as [id, tool name or null]. */
function toolResultsOf(format, body) {
  if (format === 'openai') {
    return body.messages.filter((m) => m.role === 'tool').map((m) => [m.tool_call_id, null]);
  }
  if (format === 'gemini') {
    const last = body.contents.at(-1);
    assert.equal(last.role, 'user', 'Gemini: the function responses are one user turn');
    return last.parts.map((p) => [p.functionResponse.id, p.functionResponse.name]);
  }
  const last = body.messages.at(-1);
  assert.equal(last.role, 'user', 'Anthropic: the tool results are one user message');
  return last.content.map((b) => { assert.equal(b.type, 'tool_result'); return [b.tool_use_id, null]; });
}

/** The tool names a recorded request offers, in the format's own shape. */
function offeredTools(format, body) {
  if (format === 'openai') return body.tools.map((t) => t.function.name);
  if (format === 'gemini') return body.tools.flatMap((t) => t.functionDeclarations ?? []).map((d) => d.name);
  return body.tools.map((t) => t.name);
}

/** The key header the format sends, as the server saw it. */
function keyHeaderOf(format, headers) {
  return format === 'openai' ? headers.authorization : format === 'gemini' ? headers['x-goog-api-key'] : headers['x-api-key'];
}

for (const format of FORMATS) {
  test(`S13 + S13.3 (${format}): a full tool round from the settings panel — two calls split mid-key, the results sent back in the format's shape, usage and answer on the run card; the key only in the request header`, async () => {
    const server = await startModelServer(format);
    const context = await env.browser.newContext();
    const session = uniqueSession(`round-${format}`);
    const marker = `agentrt-key-marker-${format}-${Math.random().toString(36).slice(2)}`;
    try {
      const page = await openDemo(context, session);
      // `cargo xtask demo` starts on the scripted scenario.
      assert.equal(await page.getByLabel('Provider').inputValue(), 'scripted');
      assert.match(await page.locator('#model-status').textContent(), /scripted scenario/);
      assert.equal(await page.getByLabel('API key').getAttribute('type'), 'password');

      // Gemini's model name left empty: the one shown as the placeholder.
      await useModel(page, { ...SETTINGS[format], model: format === 'gemini' ? '' : SETTINGS[format].model, baseUrl: server.baseUrl, apiKey: marker });
      assert.match(await page.locator('#model-status').textContent(), new RegExp(`${SETTINGS[format].provider} ${SETTINGS[format].model} at ${server.baseUrl}`));
      await page.evaluate((s) => {
        window.seenEvents = [];
        window.agentrtDemo.runtime.subscribe(s, (event) => {
          window.seenEvents.push(JSON.stringify(event, (k, v) => (typeof v === 'bigint' ? v.toString() : v)));
        });
      }, session);

      server.reply(
        {
          text: 'Writing two notes.',
          calls: [
            { name: 'workspace_write', args: { path: 'notes/alpha.txt', content: 'Alpha ä' },
              fragments: ['{"pa', 'th": "notes/al', 'pha.txt", "con', 'tent": "Alpha ä"}'] },
            { name: 'workspace_write', args: { path: 'notes/beta.txt', content: 'Beta' },
              fragments: ['{"path": "no', 'tes/beta.txt", "cont', 'ent', '": "Beta"}'] },
          ],
          usage: { input: 120, output: 30 },
        },
        { text: 'Both notes are written: notes/alpha.txt and notes/beta.txt.', usage: { input: 200, output: 12 } },
      );
      const prompt = `Write two notes (${format}).`;
      await send(page, prompt);
      await waitRunOf(page, prompt, ['completed', 'failed', 'interrupted']);
      const view = await runView(page);
      assert.equal(view.run.status, 'completed', JSON.stringify(view.run));
      assert.equal(view.output, 'Both notes are written: notes/alpha.txt and notes/beta.txt.');
      assert.deepEqual(view.journal.map((j) => [j.tool, j.state]), [['workspace_write', 'committed'], ['workspace_write', 'committed']]);
      assert.deepEqual({ input: view.run.usage.input_tokens, output: view.run.usage.output_tokens }, { input: 320, output: 42 });

      // The run card: the answer, both calls, the usage against the budget.
      assert.equal(await page.locator('#run-output').textContent(), view.output);
      assert.match(await page.locator('#usage').textContent(), /Tokens: 362 /);
      assert.match(await page.locator('#usage').textContent(), /Tool calls: 2 /);
      assert.deepEqual(await page.locator('#tools tr').evaluateAll((trs) => trs.map((tr) => [tr.dataset.tool, tr.dataset.state])),
        [['workspace_write', 'committed'], ['workspace_write', 'committed']]);
      await page.waitForFunction(() => document.querySelector('#conversation > li.agent')?.dataset.status === 'completed');
      assert.equal(await page.locator('#conversation > li.agent .msg-text').textContent(), view.output);
      const files = await page.evaluate(async (s) => Promise.all(['notes/alpha.txt', 'notes/beta.txt']
        .map(async (p) => (await window.agentrtDemo.runtime.readWorkspaceFile(s, p)).text)), session);
      assert.deepEqual(files, ['Alpha ä', 'Beta'], 'the arguments split mid-key and mid-character arrived whole');

      // What the server received: two requests, the tools offered, the key in the format's header.
      assert.equal(server.requests.length, 2);
      const [first, second] = server.requests;
      assert.ok(offeredTools(format, first.body).includes('workspace_write'), 'the page runtime offers workspace_write');
      for (const r of server.requests) {
        assert.equal(keyHeaderOf(format, r.headers), format === 'openai' ? `Bearer ${marker}` : marker);
      }
      if (format === 'gemini') assert.match(first.path, /^\/v1beta\/models\/gemini-2\.5-flash:streamGenerateContent\?alt=sse$/);
      if (format === 'anthropic') {
        assert.equal(first.headers['anthropic-version'], '2023-06-01');
        assert.equal(first.headers['anthropic-dangerous-direct-browser-access'], 'true');
      }
      if (format !== 'gemini') assert.equal(first.body.model, SETTINGS[format].model);
      // The second request carries both results, in the format's own shape.
      const results = toolResultsOf(format, second.body);
      const ids = { openai: ['call_1_0', 'call_1_1'], gemini: ['fc-1-0', 'fc-1-1'], anthropic: ['toolu_1_1', 'toolu_1_2'] }[format];
      assert.deepEqual(results.map(([id]) => id), ids);
      if (format === 'gemini') assert.deepEqual(results.map(([, name]) => name), ['workspace_write', 'workspace_write']);
      if (format === 'openai') {
        const assistant = second.body.messages.find((m) => m.role === 'assistant' && m.tool_calls);
        assert.deepEqual(assistant.tool_calls.map((c) => [c.id, c.function.name, JSON.parse(c.function.arguments)]), [
          ['call_1_0', 'workspace_write', { path: 'notes/alpha.txt', content: 'Alpha ä' }],
          ['call_1_1', 'workspace_write', { path: 'notes/beta.txt', content: 'Beta' }]]);
      }
      if (format === 'anthropic') {
        const assistant = second.body.messages.at(-2);
        assert.equal(assistant.role, 'assistant');
        assert.deepEqual(assistant.content.filter((b) => b.type === 'tool_use').map((b) => [b.id, b.input]), [
          ['toolu_1_1', { path: 'notes/alpha.txt', content: 'Alpha ä' }], ['toolu_1_2', { path: 'notes/beta.txt', content: 'Beta' }]]);
      }

      // S13.3: the key is in no stored byte, console message, event or URL of the page.
      const stored = await storedText(page);
      assert.ok(stored.includes(prompt), 'the scan reads the stored bytes (it finds the prompt)');
      assert.ok(!stored.includes(marker), 'the key is in no IndexedDB, localStorage or sessionStorage value');
      const events = await page.evaluate(() => window.seenEvents);
      assert.ok(events.some((e) => e.includes('Both notes')), 'the scan reads the events (it finds the streamed answer)');
      assert.ok(!events.some((e) => e.includes(marker)), 'the key is in no RuntimeEvent');
      assert.ok(!page.consoleText.some((t) => t.includes(marker)), 'the key is in no console message');
      assert.ok(!page.url().includes(marker), 'the key is not in the URL');
      assert.ok(!(await page.locator('body').innerText()).includes(marker), 'the key is not shown on the page');
      assert.deepEqual(page.errors, []);
    } finally {
      await context.close();
      await server.close();
    }
  });

  test(`S13.2 (${format}): a finish reason other than stop, a stream broken mid-answer (repeated once), a 401 (fails at once), a server down past the retry bound (interrupted, provider_unavailable, Resume completes)`, async () => {
    const server = await startModelServer(format);
    const context = await env.browser.newContext();
    const session = uniqueSession(`outcomes-${format}`);
    try {
      const page = await openDemo(context, session);
      await useModel(page, { ...SETTINGS[format], baseUrl: server.baseUrl, apiKey: 'test-key' });

      // The output limit cut the answer short.
      const length = { openai: 'length', gemini: 'MAX_TOKENS', anthropic: 'max_tokens' }[format];
      server.reply({ text: 'An answer cut sh', finish: length, usage: { input: 9, output: 64 } });
      await send(page, 'Cut short.');
      await waitRunOf(page, 'Cut short.', ['completed', 'failed', 'interrupted']);
      let view = await runView(page);
      // A length-cut answer is the run's answer, and the run says it was cut
      // (completed / output_limit); the run card shows both.
      assert.equal(view.run.status, 'completed', JSON.stringify(view.run));
      assert.deepEqual(view.run.stop_reason, { reason: 'output_limit' });
      assert.equal(view.output, 'An answer cut sh');
      assert.equal(await page.locator('#run-output').textContent(), 'An answer cut sh');
      assert.match(await page.locator('#usage').textContent(), /Tokens: 73 /);
      assert.match(await page.locator('#run-stop-reason').textContent(), /output_limit/);

      // Withheld by the provider's filter: failed / content_filtered naming the provider.
      const filtered = { openai: 'content_filter', gemini: 'SAFETY', anthropic: 'refusal' }[format];
      server.reply({ text: '', finish: filtered, usage: { input: 9, output: 0 } });
      await send(page, 'Something it will not answer.');
      await waitRunOf(page, 'Something it will not answer.', ['completed', 'failed', 'interrupted']);
      view = await runView(page);
      assert.equal(view.run.status, 'failed', JSON.stringify(view.run));
      assert.equal(view.run.stop_reason.reason, 'content_filtered');
      assert.equal(view.run.stop_reason.provider, { openai: 'openai-compatible', gemini: 'gemini', anthropic: 'anthropic' }[format]);

      // Broken after two events: the round is repeated once, and only the whole answer is kept.
      let before = server.requests.length;
      server.reply({ text: 'This answer breaks off', cutAfter: 2, usage: { input: 5, output: 5 } },
        { text: 'The whole answer.', usage: { input: 7, output: 3 } });
      await send(page, 'Answer despite a break.');
      await waitRunOf(page, 'Answer despite a break.', ['completed', 'failed', 'interrupted']);
      view = await runView(page);
      assert.equal(view.run.status, 'completed', JSON.stringify(view.run));
      assert.equal(view.output, 'The whole answer.');
      assert.equal(server.requests.length - before, 2, 'the broken round was sent once more');
      assert.deepEqual(server.requests.at(-1).body, server.requests.at(-2).body, 'the same round, repeated');
      assert.equal(await page.locator('#run-output').textContent(), 'The whole answer.');

      // A refused key: failed at once, one request, a clear reason on the run card.
      before = server.requests.length;
      server.reply({ status: 401 });
      await send(page, 'With a bad key.');
      await waitRunOf(page, 'With a bad key.', ['completed', 'failed', 'interrupted']);
      view = await runView(page);
      assert.equal(view.run.status, 'failed');
      assert.equal(server.requests.length - before, 1, 'a 401 is not retried');
      assert.match(await page.locator('#run-stop-reason').textContent(), /^runtime_error \(.*HTTP 401 after 1 attempt\(s\); the API key was refused/);

      // Down: connection refused past the retry bound interrupts the run, naming the provider.
      const port = await closedPort();
      const downUrl = `http://127.0.0.1:${port}${server.baseUrl.slice(server.baseUrl.lastIndexOf('/'))}`;
      await useModel(page, { ...SETTINGS[format], baseUrl: downUrl });
      const started = Date.now();
      await send(page, 'While it is down.');
      await waitRunOf(page, 'While it is down.', ['completed', 'failed', 'interrupted'], 60_000);
      view = await runView(page);
      assert.equal(view.run.status, 'interrupted', JSON.stringify(view.run));
      assert.equal(view.run.stop_reason.reason, 'provider_unavailable');
      assert.equal(view.run.stop_reason.provider, SETTINGS[format].provider === 'openai-compatible' ? 'openai-compatible' : format);
      assert.match(await page.locator('#run-status').textContent(), /^interrupted$/);
      assert.match(await page.locator('#run-stop-reason').textContent(), /^provider_unavailable \(could not reach the model endpoint after 4 attempt\(s\)/);
      assert.equal(await page.locator('#resume').isVisible(), true, 'Resume is offered');
      console.log(`${format}: interrupted after ${Date.now() - started} ms of retries`);

      // Back up on the same port: Resume completes the run.
      const revived = await startModelServer(format, port);
      try {
        revived.reply({ text: 'Back again.', usage: { input: 4, output: 2 } });
        await page.click('#resume');
        await waitRunOf(page, 'While it is down.', ['completed', 'failed'], 30_000);
        view = await runView(page);
        assert.equal(view.run.status, 'completed', JSON.stringify(view.run));
        assert.equal(view.output, 'Back again.');
        assert.equal(revived.requests.length, 1);
      } finally {
        await revived.close();
      }
      assert.deepEqual(page.errors.filter((e) => !/Failed to load resource|ERR_CONNECTION_REFUSED|401/.test(e)), []);
    } finally {
      await context.close();
      await server.close();
    }
  });
}

test('layout: the settings panel has labelled controls and fits at 1280 px and 390 px; screenshots saved', async () => {
  const context = await env.browser.newContext({ viewport: { width: 1280, height: 900 } });
  try {
    const page = await openDemo(context, uniqueSession('settings-layout'));
    await page.getByLabel('Provider').selectOption('gemini');
    assert.equal(await page.getByLabel('Base URL').getAttribute('placeholder'), 'https://generativelanguage.googleapis.com/v1beta');
    assert.equal(await page.getByLabel('Model', { exact: true }).getAttribute('placeholder'), 'gemini-2.5-flash');
    assert.match(await page.getByLabel('API key').evaluate((i) => document.getElementById(i.getAttribute('aria-describedby')).textContent),
      /never written to localStorage, sessionStorage, IndexedDB or the URL/);
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 900 });
      await page.waitForFunction((w) => document.documentElement.clientWidth <= w, width);
      const shot = join(RESULTS, `demo-settings-${width}.png`);
      await page.locator('#model-panel').screenshot({ path: shot });
      console.log(`screenshot: ${shot}`);
      const outside = await page.evaluate(() => {
        const found = [];
        const root = document.documentElement;
        if (root.scrollWidth > root.clientWidth + 1) found.push(`page: ${root.scrollWidth} > ${root.clientWidth}`);
        const panel = document.getElementById('model-panel');
        const edge = panel.getBoundingClientRect();
        for (const node of panel.querySelectorAll('*')) {
          const r = node.getBoundingClientRect();
          if (r.width === 0 || r.height === 0) continue;
          if (r.left < edge.left - 1 || r.right > edge.right + 1) found.push(`${node.tagName}#${node.id}: [${r.left}, ${r.right}] outside [${edge.left}, ${edge.right}]`);
        }
        return found;
      });
      assert.deepEqual(outside, [], `nothing sticks out at ${width} px`);
    }
    // The public endpoint without a key is refused, and the page stays on the scripted scenario.
    await page.getByLabel('Provider').selectOption('anthropic');
    await page.getByRole('button', { name: 'Use this model' }).click();
    await page.waitForFunction(() => document.getElementById('model-form').dataset.applied === 'refused');
    assert.match(await page.locator('#model-status').textContent(), /^This model cannot be used: .*anthropic needs an API key at https:\/\/api\.anthropic\.com\/v1.*\(invalid_config\)$/);
    await send(page, 'Still scripted?');
    await page.waitForFunction(() => document.getElementById('run-status').textContent !== 'none');
    assert.match(await page.locator('#activities').textContent(), /model round 1 requested/, 'the scripted runtime runs it');
    // Back to the scripted scenario: its fields hide again.
    await page.getByLabel('Provider').selectOption('scripted');
    assert.equal(await page.getByLabel('API key').isVisible(), false);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

/** The reasoning setting as each format's request carries it (S13.4), for effort `high` and a 2,048-token budget. */
function reasoningSettingOf(format, body) {
  if (format === 'openai') return body.reasoning_effort;
  if (format === 'gemini') return body.generationConfig?.thinkingConfig;
  return body.thinking;
}
const EXPECTED_SETTING = {
  openai: 'high',
  gemini: { thinkingBudget: 2048, includeThoughts: true },
  anthropic: { type: 'enabled', budget_tokens: 2048 },
};

for (const format of FORMATS) {
  test(`S13.4 (${format}): a run under a profile that asks for reasoning — the setting in every request, the streamed reasoning on the run card apart from the answer, never in the answer, the conversation or (but for Anthropic's signed block, byte for byte) the next request`, async () => {
    const server = await startModelServer(format);
    const context = await env.browser.newContext();
    const session = uniqueSession(`reasoning-${format}`);
    const thinking = `The person wants one note; workspace_write takes a path and the text (${format}).`;
    const signature = `EqQBCgIYAhIM${format}SignatureBytes+/=`;
    try {
      const page = await openDemo(context, session);
      await useModel(page, { ...SETTINGS[format], baseUrl: server.baseUrl, apiKey: 'reasoning-test-key' });
      // A profile that asks for reasoning, chosen in the picker as a person would after saving it.
      await page.evaluate(async () => {
        const rt = window.agentrtDemo.runtime;
        await rt.saveProfile({
          id: 'thinker', name: 'Thinker', mode: 'agent', approval: 'permissive',
          reasoning: { effort: 'high', budget_tokens: 2048 },
        }, undefined);
        const picker = document.getElementById('profile-picker');
        picker.append(new Option('Thinker', 'thinker'));
        picker.value = 'thinker';
        window.seenEvents = [];
        rt.subscribe(window.agentrtDemo.session, (event) => { window.seenEvents.push(event); });
      });
      server.reply(
        {
          reasoning: { text: thinking, signature },
          calls: [{ name: 'workspace_write', args: { path: 'notes/one.txt', content: 'One' } }],
          usage: { input: 100, output: 40, reasoning: 25 },
        },
        { text: 'The note is written.', usage: { input: 150, output: 8 } },
      );
      const prompt = `Write one note, thinking first (${format}).`;
      await send(page, prompt);
      await waitRunOf(page, prompt, ['completed', 'failed', 'interrupted']);
      const view = await runView(page);
      assert.equal(view.run.status, 'completed', JSON.stringify(view.run));
      assert.equal(view.output, 'The note is written.');
      assert.deepEqual(view.journal.map((j) => [j.tool, j.state]), [['workspace_write', 'committed']]);

      // The setting reached every request, in the format's own field.
      assert.equal(server.requests.length, 2);
      for (const r of server.requests) assert.deepEqual(reasoningSettingOf(format, r.body), EXPECTED_SETTING[format]);

      // Stored and shown apart: the run view's reasoning, the card's reasoning section, a reasoning event.
      assert.equal((view.reasoning ?? []).map((r) => r.text).join(''), thinking);
      assert.ok(!view.output.includes(thinking));
      assert.equal(await page.locator('#run-reasoning-section').isVisible(), true);
      assert.equal(await page.locator('#run-reasoning').textContent(), thinking);
      assert.ok(!(await page.locator('#run-output').textContent()).includes(thinking), 'not in the answer');
      await page.waitForFunction(() => document.querySelector('#conversation > li.agent')?.dataset.status === 'completed');
      assert.ok(!(await page.locator('#conversation').textContent()).includes('workspace_write takes a path'), 'not in the conversation');
      const events = await page.evaluate(() => window.seenEvents.filter((e) => e.type === 'reasoning').map((e) => e.text).join(''));
      assert.equal(events, thinking, 'streamed as its own event kind');
      if (format !== 'anthropic') {
        assert.equal(view.run.usage.reasoning_tokens, 25, JSON.stringify(view.run.usage));
      }

      // The continuation: Anthropic's signed thinking block back unchanged; no other format sends the text again.
      const second = JSON.stringify(server.requests[1].body);
      if (format === 'anthropic') {
        const assistant = server.requests[1].body.messages.at(-2);
        assert.equal(assistant.role, 'assistant');
        assert.deepEqual(assistant.content[0], { type: 'thinking', thinking, signature });
        assert.equal(second.split('workspace_write takes a path').length, 2, 'only inside the signed block');
      } else {
        assert.ok(!second.includes('workspace_write takes a path'), `${format}: reasoning is not sent back as text`);
      }
      assert.deepEqual(page.errors, []);
    } finally {
      await context.close();
      await server.close();
    }
  });
}
