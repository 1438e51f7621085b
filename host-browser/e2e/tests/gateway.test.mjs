// The demo page served by the real `agentrt serve` (issue 9, S8.1 through the
// gateway): the page, its bundle and the fetch gateway share one origin, the
// token comes from the URL fragment, and `fetch_url` goes through the gateway,
// whose URL policy refuses a private address — the browser never fetches it.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { startAgentrt } from '../serve.mjs';
import { config, send, uniqueSession, waitStatus } from './helpers.mjs';

const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'];
const PRIVATE = 'http://127.0.0.1:1/';

let agentrt;
let browser;
before(async () => {
  agentrt = await startAgentrt();
  browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: FLAGS });
});
after(async () => { await browser?.close(); await agentrt?.close(); });

/** Read a private address, then answer. */
function privateFetchScenario() {
  return {
    turns: [
      { text: 'Reading the page.', tool_calls: [{ name: 'fetch_url', arguments: { url: PRIVATE } }] },
      { text: 'The page could not be read.' },
    ],
  };
}

test('agentrt serve prints the page URL with the gateway token in its fragment', () => {
  assert.match(agentrt.url, /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.equal(agentrt.pageUrl, `${agentrt.url}/#gateway-token=${agentrt.token}`);
});

test('S8.1: fetch_url on a private address is refused by the gateway, not fetched by the browser', async () => {
  const context = await browser.newContext();
  const requests = [];
  context.on('request', (r) => requests.push({ method: r.method(), url: r.url() }));
  const page = await context.newPage();
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  // The scenario is injected; the gateway (URL and token) comes from the printed URL's fragment.
  await page.addInitScript((c) => { window.AGENTRT_CONFIG = c; }, config(privateFetchScenario()));
  const session = uniqueSession('gateway');
  await page.goto(`${agentrt.url}/?session=${session}#gateway-token=${agentrt.token}`);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });

  const gatewayReply = page.waitForResponse((r) => r.url() === `${agentrt.url}/v1/fetch`, { timeout: 30_000 });
  await send(page, 'Read the private page.');
  const reply = await gatewayReply;
  assert.equal(reply.status(), 200);
  assert.equal(reply.request().method(), 'POST');
  assert.equal(reply.request().headers().authorization, `Bearer ${agentrt.token}`);
  const answer = await reply.json();
  assert.equal(answer.outcome, 'failure', JSON.stringify(answer));
  assert.deepEqual(JSON.parse(reply.request().postData()).url, PRIVATE);
  await waitStatus(page, 'completed');

  // The run records the refused call with the gateway's reason.
  const view = await page.evaluate(async () => {
    const d = window.agentrtDemo;
    return d.runtime.readRun(d.runId);
  });
  const call = view.journal.find((j) => j.tool === 'fetch_url');
  assert.ok(call, JSON.stringify(view.journal));
  // The gateway's URL policy refused the address (a loopback range, S8.1) ...
  assert.equal(answer.reason.reason, 'policy', JSON.stringify(answer));
  assert.equal(answer.reason.violation.kind, 'refused_address', JSON.stringify(answer));
  assert.equal(answer.reason.violation.addr, '127.0.0.1');
  // ... and the run recorded that refusal as the call's failure, shown on the run card.
  assert.equal(call.state, 'failed', JSON.stringify(call));
  assert.deepEqual(call.error, { code: 'url_refused', retryable: false });
  assert.match(await page.locator('#tools').textContent(), /fetch_url.*failed/s);

  // The browser itself never contacted the private address: its one read went to the gateway.
  assert.deepEqual(requests.filter((r) => r.url.startsWith('http://127.0.0.1:1/')), []);
  assert.equal(requests.filter((r) => r.url === `${agentrt.url}/v1/fetch` && r.method === 'POST').length, 1);
  assert.deepEqual(errors, []);
  await context.close();
});

/**
 * Issue 13 item 2: a Stop during a slow gateway read ends the run well within
 * the stop grace (5 s), as natively: the supervisor's CancelRun reaches the
 * browser's fetch_url actor, which ends the read at once. The gateway here
 * reads through a Jina-compatible reader on loopback that never answers (a
 * reader is user configuration, so loopback is allowed for it), so without
 * the cancellation the Stop would wait out the whole grace.
 */
test('a Stop during a slow gateway read ends the run within the stop grace', async () => {
  const { createServer } = await import('node:http');
  const { mkdtempSync, writeFileSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  let arrived = 0;
  const hanging = createServer(() => { arrived += 1; });
  await new Promise((r) => hanging.listen(0, '127.0.0.1', r));
  const dir = mkdtempSync(join(tmpdir(), 'agentrt-slow-reader-'));
  const configFile = join(dir, 'agentrt.toml');
  writeFileSync(configFile, `[reader]\nendpoint = "http://127.0.0.1:${hanging.address().port}/"\n`);
  const slow = await startAgentrt(['--config', configFile]);
  const context = await browser.newContext();
  try {
    const scenario = {
      turns: [
        { text: 'Reading.', tool_calls: [{ name: 'fetch_url', arguments: { url: 'https://93.184.216.34/' } }] },
        { text: 'Done.' },
      ],
    };
    const page = await context.newPage();
    await page.addInitScript((c) => { window.AGENTRT_CONFIG = c; }, config(scenario));
    await page.goto(`${slow.url}/?session=${uniqueSession('slow-read')}#gateway-token=${slow.token}`);
    await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
    await send(page, 'Read the slow page.');
    // The read is in flight: the reader has the request and will never answer.
    const deadline = Date.now() + 30_000;
    while (arrived === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.equal(arrived, 1, 'the read reached the slow reader');
    const stopped = Date.now();
    await page.click('#stop');
    await waitStatus(page, 'cancelled', 30_000);
    const took = Date.now() - stopped;
    console.log(`stop during a slow gateway read: cancelled after ${took} ms (grace 5000 ms)`);
    assert.ok(took < 4_000, `the run ended ${took} ms after Stop, not well within the 5 s grace`);
    const view = await page.evaluate(async () => window.agentrtDemo.runtime.readRun(window.agentrtDemo.runId));
    const call = view.journal.find((j) => j.tool === 'fetch_url');
    assert.equal(call.state, 'failed', JSON.stringify(call));
    assert.equal(call.error.code, 'cancelled', JSON.stringify(call));
  } finally {
    await context.close();
    await slow.close();
    hanging.closeAllConnections();
    await new Promise((r) => hanging.close(r));
    rmSync(dir, { recursive: true, force: true });
  }
});
