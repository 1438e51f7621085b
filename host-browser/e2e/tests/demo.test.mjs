// End-to-end tests of the demo page in headless Chromium (S1.1, S2.5, S3, S6.4).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import {
  RESULTS, askScenario, config, counterPlugin, openPage, send, setup, sleep, slowScenario, status, trashScenario,
  uniqueSession, waitStatus, writeScenario,
} from './helpers.mjs';

let env;
before(async () => { env = await setup(); });
after(async () => { await env?.close(); });

async function approveVisible(page) {
  await page.waitForSelector('#approval[open]', { timeout: 20_000 });
  await page.click('#approve');
}

test('the demo page loads without console errors and reports durable storage', async () => {
  const context = await env.browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  const started = Date.now();
  await page.goto(`${env.pageUrl}/`);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
  console.log(`page ready (wasm loaded, runtime created) in ${Date.now() - started} ms`);
  assert.match(await page.locator('#host-status').textContent(), /IndexedDB \(durable\)/);
  assert.deepEqual(errors, []);
  await context.close();
});

test('S1.1: without IndexedDB the runtime falls back to memory and says it is not durable', async () => {
  const context = await env.browser.newContext();
  const page = await context.newPage();
  await page.addInitScript(() => { Object.defineProperty(window, 'indexedDB', { value: undefined }); });
  await page.goto(`${env.pageUrl}/?session=${uniqueSession('nodb')}`);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
  assert.equal(await page.evaluate(() => window.agentrtDemo.runtime.durable), false);
  assert.match(await page.locator('#host-status').textContent(), /memory only/);
  await page.click('#send');
  await approveVisible(page);
  await waitStatus(page, 'completed', 30_000);
  await context.close();
});

test('the default demo scenario: workspace file, run_javascript in the Worker, extract_document, Artifact, approval', async () => {
  const context = await env.browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  const session = uniqueSession('demo');
  await page.goto(`${env.pageUrl}/?session=${session}`);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
  const origins = new Set();
  context.on('request', (r) => origins.add(new URL(r.url()).origin));
  await page.click('#send');
  await approveVisible(page);
  await waitStatus(page, 'completed', 30_000);
  const rows = await page.locator('#tools tr').evaluateAll((trs) => trs.map((tr) => [tr.children[1].textContent, tr.children[2].textContent]));
  assert.deepEqual(rows, [
    ['workspace_write', 'committed'], ['run_javascript', 'committed'],
    ['publish_artifact', 'committed'], ['extract_document', 'committed'], ['workspace_empty_trash', 'committed'],
  ]);
  await page.waitForFunction(() => document.querySelectorAll('#workspace li').length === 1 && document.querySelectorAll('#artifacts li').length === 1);
  assert.match(await page.locator('#workspace').textContent(), /notes\/hello\.md/);
  assert.match(await page.locator('#artifacts').textContent(), /hello\.md/);
  assert.match(await page.locator('#run-output').textContent(), /sum is 10/);
  origins.delete('null');
  for (const o of origins) assert.ok(o === env.pageUrl || o === 'blob:' || o.startsWith('blob'), `no request left the page's origin: ${o}`);
  assert.deepEqual(errors, []);
  await context.close();
});

test('S6: a run completes after an approval click; the run card screenshot is saved', async () => {
  const context = await env.browser.newContext();
  const session = uniqueSession('approve');
  const cfg = config(writeScenario(0), { plugins: [counterPlugin(env.counter.url)] });
  const page = await openPage(context, env.pageUrl, cfg, session);
  const before = env.counter.count();
  await send(page, 'Record a write.');
  await approveVisible(page);
  await waitStatus(page, 'completed');
  assert.equal(await page.locator('#run-stop-reason').textContent(), 'completed');
  assert.equal(env.counter.count() - before, 1, 'the approved write reached the server once');
  assert.equal(await page.locator('#tools tr[data-state="committed"]').count() >= 1, true);
  assert.match(await page.locator('#run-output').textContent(), /recorded/);
  const shot = join(RESULTS, 'run-card.png');
  await page.locator('#run-card').screenshot({ path: shot });
  console.log(`run card screenshot: ${shot}`);
  assert.deepEqual(page.errors, []);
  await context.close();
});

test('S3: a second tab cannot execute a session while the first holds it, and can once it closes', async () => {
  const context = await env.browser.newContext();
  const session = uniqueSession('tabs');
  const cfg = config(slowScenario(4_000));
  const first = await openPage(context, env.pageUrl, cfg, session);
  await send(first, 'Take your time.');
  await waitStatus(first, 'running');
  const second = await openPage(context, env.pageUrl, cfg, session);
  await send(second, 'Me too.');
  await second.waitForSelector('body[data-last-error="session_busy"]', { timeout: 10_000 });
  assert.match(await second.locator('#chat-error').textContent(), /another tab/);
  await first.close();
  await second.evaluate(() => { delete document.body.dataset.lastError; });
  await sleep(200);
  await send(second, 'Now me.');
  await waitStatus(second, 'completed', 20_000);
  assert.equal(await second.evaluate(() => document.body.dataset.lastError ?? null), null);
  // Done executing: the second tab gives the session back (the closed tab's run does not pin it).
  await second.waitForFunction((s) => !window.agentrtDemo.runtime.holdsSession(s), session, { timeout: 5_000 });
  await context.close();
});

test('S2.5: a reload mid-run interrupts with page_interrupted, nothing resumes by itself, Resume completes it, the write happened at most once', async () => {
  const context = await env.browser.newContext();
  const session = uniqueSession('reload');
  const cfg = config(writeScenario(3_000), { plugins: [counterPlugin(env.counter.url)] });
  const page = await openPage(context, env.pageUrl, cfg, session);
  const before = env.counter.count();
  await send(page, 'Record a write, then think.');
  await approveVisible(page);
  // The write itself is committed (load_tools commits before it: waiting for
  // any committed row would race the reload with the write in flight); the
  // model now takes 3 s for its last answer.
  await page.waitForSelector('#tools tr[data-tool="record_write"][data-state="committed"]', { timeout: 20_000 });
  await waitStatus(page, 'running');
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
  await waitStatus(page, 'interrupted');
  assert.equal(await page.locator('#run-stop-reason').textContent(), 'page_interrupted');
  await sleep(2_000);
  assert.equal(await status(page), 'interrupted', 'loading the page resumed nothing');
  assert.equal(await page.locator('#resume').isVisible(), true, 'Resume is offered');
  await page.click('#resume');
  await waitStatus(page, 'completed', 20_000);
  const writes = env.counter.count() - before;
  assert.ok(writes <= 1, `the non-idempotent write reached the server ${writes} times`);
  assert.equal(writes, 1);
  await context.close();
});

test('S2.5: going offline interrupts a running run with offline', async () => {
  const context = await env.browser.newContext();
  const session = uniqueSession('offline');
  const page = await openPage(context, env.pageUrl, config(slowScenario(4_000)), session);
  await send(page, 'Take your time.');
  await waitStatus(page, 'running');
  await context.setOffline(true);
  await waitStatus(page, 'interrupted');
  assert.equal(await page.locator('#run-stop-reason').textContent(), 'offline');
  await context.setOffline(false);
  await sleep(1_000);
  assert.equal(await status(page), 'interrupted', 'coming back online resumes nothing');
  await context.close();
});

test('S6.4: a pending approval survives a reload and is shown once', async () => {
  const context = await env.browser.newContext();
  const session = uniqueSession('pending');
  const page = await openPage(context, env.pageUrl, config(trashScenario()), session);
  await send(page, 'Empty the trash.');
  await page.waitForSelector('#approval[open]', { timeout: 20_000 });
  await waitStatus(page, 'awaiting_approval');
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
  await page.waitForSelector('#approval[open]', { timeout: 20_000 });
  assert.equal(await status(page), 'awaiting_approval', 'the run still waits for the person');
  assert.equal(await page.locator('#approval-tool').textContent(), 'workspace_empty_trash');
  assert.notEqual(await page.locator('#approval-target').textContent(), '', 'the target summary is shown');
  await sleep(1_000);
  const shown = await page.evaluate(() => Object.values(window.agentrtDemo.shown));
  assert.deepEqual(shown, [1], 'one request, shown once');
  assert.equal(await page.locator('dialog[open]').count(), 1);
  await page.click('#approve');
  await waitStatus(page, 'completed');
  const states = await page.locator('#tools tr td:nth-child(3)').allTextContents();
  assert.deepEqual(states, ['committed'], 'the approved call ran once, after the approval');
  assert.deepEqual(page.errors, []);
  await context.close();
});

// Found by this suite: an approved plugin call after a reload failed with
// tool_not_loaded while the tools actor kept a run's load_tools set in memory
// only. It is now stored (Meta `tools/loaded/<run>`) and restored.
test('S5.2 + S6.4: an approved plugin call after a reload still runs', async () => {
  const context = await env.browser.newContext();
  const session = uniqueSession('pending-plugin');
  const cfg = config(writeScenario(0), { plugins: [counterPlugin(env.counter.url)] });
  const page = await openPage(context, env.pageUrl, cfg, session);
  const before = env.counter.count();
  await send(page, 'Record a write.');
  await page.waitForSelector('#approval[open]', { timeout: 20_000 });
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
  await page.waitForSelector('#approval[open]', { timeout: 20_000 });
  assert.equal(env.counter.count() - before, 0, 'nothing was written before the approval');
  await page.click('#approve');
  await waitStatus(page, 'completed');
  assert.equal(env.counter.count() - before, 1, 'the approved write reached the server once');
  await context.close();
});

test('S5.1: ask_user shows the question and the answer continues the run', async () => {
  const context = await env.browser.newContext();
  const page = await openPage(context, env.pageUrl, config(askScenario()), uniqueSession('ask'));
  await send(page, 'Ask me.');
  await page.waitForSelector('#input[open]', { timeout: 20_000 });
  assert.equal(await status(page), 'awaiting_input');
  assert.equal(await page.locator('#input-question').textContent(), 'What is your name?');
  await page.fill('#input-answer', 'Ada');
  await page.click('#input-send');
  await waitStatus(page, 'completed');
  assert.deepEqual(page.errors, []);
  await context.close();
});

test('S2.3: a reload while a non-idempotent write is in flight leaves it effect_unknown; the person decides; it is never repeated', async () => {
  const context = await env.browser.newContext();
  const session = uniqueSession('inflight');
  const cfg = config(writeScenario(0), { plugins: [counterPlugin(env.counter.url)] });
  const page = await openPage(context, env.pageUrl, cfg, session);
  const before = env.counter.count();
  env.counter.setDelay(5_000);
  try {
    await send(page, 'Record a write.');
    await approveVisible(page);
    await page.waitForFunction(() => document.querySelector('#tools tr[data-state="running"]'), null, { timeout: 20_000 });
    while (env.counter.count() === before) await sleep(50);
    await page.reload();
  } finally {
    env.counter.setDelay(0);
  }
  await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
  await waitStatus(page, 'interrupted');
  await page.waitForSelector('#decision[open]', { timeout: 20_000 });
  assert.equal(await page.locator('#decision-tool').textContent(), 'record_write');
  assert.deepEqual(await page.locator('#tools tr td:nth-child(3)').allTextContents(), ['committed', 'effect_unknown']);
  await page.click('#decision button[value="mark_done"]');
  await waitStatus(page, 'completed', 20_000);
  assert.deepEqual(await page.evaluate(() => Object.values(window.agentrtDemo.shown)), [1], 'the decision was asked once');
  await sleep(500);
  assert.equal(env.counter.count() - before, 1, 'the write reached the server exactly once');
  await context.close();
});
