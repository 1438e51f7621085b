// Deep Research through the real `agentrt serve` gateway in headless Chromium
// (issue 19, S9.5 with S8.1): plan approval bypasses nothing. The approved
// plan names a loopback and a private address; execution reads them through
// `fetch_url` and the gateway, whose URL policy refuses both: each becomes a
// gap with the gateway's reason, and the browser never contacts either
// address. The partial report is still written.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { startAgentrt } from '../serve.mjs';
import { config, uniqueSession } from './helpers.mjs';

const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'];
const SOURCES = ['http://127.0.0.1:1/cells', 'http://10.0.0.7/secret'];

let agentrt;
let browser;
before(async () => {
  agentrt = await startAgentrt();
  browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: FLAGS });
});
after(async () => { await browser?.close(); await agentrt?.close(); });

const scenario = {
  turns: [{ text: 'Let me plan that.' }],
  prompts: [
    { starts_with: 'You plan a Deep Research task.', turns: [{ text: JSON.stringify({
      questions: ['What is there?'], queries: [], sources: SOURCES, domains: ['127.0.0.1', '10.0.0.7'],
    }) }] },
    { starts_with: 'You write the report of a Deep Research task.', turns: [{ text: JSON.stringify({
      title: 'Nothing read', findings: [], unverified: [], model_knowledge: [{ text: 'Nothing could be read.' }],
    }) }] },
  ],
};

test('S9.5: a private address in an approved plan is refused by the gateway and becomes a gap', async () => {
  const context = await browser.newContext();
  const requests = [];
  context.on('request', (r) => requests.push(r.url()));
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.addInitScript((c) => { window.AGENTRT_CONFIG = c; }, config(scenario));
  const session = uniqueSession('research-gw');
  await page.goto(`${agentrt.url}/?session=${session}#gateway-token=${agentrt.token}`);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
  const done = await page.evaluate(async (s) => {
    const rt = window.agentrtDemo.runtime;
    const started = await rt.startResearch(s, 'What is on those hosts?', undefined);
    let view = await rt.readResearch(s, started.task);
    for (let i = 0; i < 200 && view.phase === 'planning'; i += 1) {
      await new Promise((r) => setTimeout(r, 50));
      view = await rt.readResearch(s, started.task);
    }
    return rt.approvePlan(s, started.task, view.plan_request.id);
  }, session);
  assert.equal(done.phase, 'partial', JSON.stringify(done));
  assert.deepEqual(done.sources.map((s) => s.state), ['failed', 'failed']);
  for (const source of done.sources) {
    assert.ok(!/no fetch_url/.test(source.reason), `read through the gateway: ${source.reason}`);
  }
  assert.ok(done.report, 'the partial report was written');
  // The browser never contacted either address: reads went to the gateway.
  assert.deepEqual(requests.filter((u) => SOURCES.some((s) => u.startsWith(s))), []);
  assert.ok(requests.some((u) => u === `${agentrt.url}/v1/fetch`), 'the reads went to the gateway');
  assert.deepEqual(errors, []);
  await context.close();
});
