// S13.5 in Chromium, for each provider format (issue 32 item 4): the demo
// page's model endpoint (a loopback server) answers 301, 302, 303, 307 and
// 308 — with CORS headers that would let the browser follow — pointing at a
// second loopback origin that records every request it gets, preflights
// included. The page sends model requests with fetch's `redirect: "manual"`
// (agent_http's browser sender), so the run fails saying the endpoint
// redirected, and nothing at all — no preflight, no key header, no prompt —
// reaches the other origin.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { send, setup, uniqueSession } from './helpers.mjs';

const STATUSES = [301, 302, 303, 307, 308];
const KEY = 'key-that-must-not-leave';
const SETTINGS = {
  openai: { provider: 'openai-compatible', model: 'gpt-4.1-mini', path: '/v1' },
  gemini: { provider: 'gemini', model: 'gemini-2.5-flash', path: '/v1beta' },
  anthropic: { provider: 'anthropic', model: 'claude-sonnet-4-5', path: '/v1' },
};

let env;
before(async () => { env = await setup(); });
after(async () => { await env?.close(); });

const cors = (req) => ({
  'access-control-allow-origin': req.headers.origin || '*',
  'access-control-allow-methods': 'GET, POST, OPTIONS',
  'access-control-allow-headers': req.headers['access-control-request-headers'] || 'content-type',
  'access-control-expose-headers': 'location',
  vary: 'origin',
});

function listen(server) {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${server.address().port}`)));
}

/** Records every request (method, path, headers, body); answers 200 with CORS. */
async function startRecorder() {
  const requests = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      requests.push({ method: req.method, path: req.url, headers: { ...req.headers }, body });
      res.writeHead(req.method === 'OPTIONS' ? 204 : 200, { ...cors(req), 'content-type': 'application/json' }).end(req.method === 'OPTIONS' ? '' : '{}');
    });
  });
  const url = await listen(server);
  return { url, requests, close: () => new Promise((r) => server.close(r)) };
}

/** Answers every POST with `status` to the same path at `target`; preflights with CORS. */
async function startRedirector(target) {
  const requests = [];
  let status = 307;
  const server = createServer((req, res) => {
    if (req.method === 'OPTIONS') { res.writeHead(204, cors(req)).end(); return; }
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      requests.push({ method: req.method, path: req.url, headers: { ...req.headers }, body });
      res.writeHead(status, { ...cors(req), location: `${target}${req.url}` }).end();
    });
  });
  const url = await listen(server);
  return { url, requests, setStatus: (s) => { status = s; }, close: () => new Promise((r) => server.close(r)) };
}

async function openDemo(context, session) {
  const page = await context.newPage();
  await page.goto(`${env.pageUrl}/?session=${encodeURIComponent(session)}`);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
  return page;
}

async function useModel(page, { provider, baseUrl, model, apiKey }) {
  await page.getByLabel('Provider').selectOption(provider);
  await page.getByLabel('Base URL').fill(baseUrl);
  await page.getByLabel('Model', { exact: true }).fill(model);
  await page.getByLabel('API key').fill(apiKey);
  await page.getByRole('button', { name: 'Use this model' }).click();
  await page.waitForFunction(() => !['pending', undefined].includes(document.getElementById('model-form').dataset.applied));
  assert.equal(await page.locator('#model-form').getAttribute('data-applied'), provider, await page.locator('#model-status').textContent());
}

async function settledRun(page, prompt, timeout = 30_000) {
  const deadline = Date.now() + timeout;
  let last = null;
  while (Date.now() < deadline) {
    last = await page.evaluate(async () => {
      const d = window.agentrtDemo;
      if (!d.runId) return null;
      const view = await d.runtime.readRun(d.runId);
      return { prompt: view.prompt, run: view.run, shown: document.getElementById('run-status').textContent };
    });
    if (last && last.prompt === prompt && ['completed', 'failed', 'interrupted'].includes(last.run.status) && last.shown === last.run.status) return last.run;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the run of ${JSON.stringify(prompt)} never settled: ${JSON.stringify(last)}`);
}

for (const format of Object.keys(SETTINGS)) {
  test(`S13.5 (${format}): no redirect status carries the key or the prompt to another origin`, async () => {
    const elsewhere = await startRecorder();
    const endpoint = await startRedirector(elsewhere.url);
    const context = await env.browser.newContext();
    try {
      const page = await openDemo(context, uniqueSession(`redirect-${format}`));
      const { provider, model, path } = SETTINGS[format];
      await useModel(page, { provider, model, baseUrl: `${endpoint.url}${path}`, apiKey: KEY });
      for (const status of STATUSES) {
        endpoint.setStatus(status);
        const before = endpoint.requests.length;
        const prompt = `A prompt that must stay home (${status}).`;
        await send(page, prompt);
        const run = await settledRun(page, prompt);
        assert.deepEqual(elsewhere.requests.map((r) => `${r.method} ${r.path}`), [], `${format} ${status}: nothing reached the other origin`);
        assert.equal(run.status, 'failed', `${format} ${status}: ${JSON.stringify(run)}`);
        assert.match(await page.locator('#run-stop-reason').textContent(), /redirect/, `${format} ${status}`);
        assert.equal(endpoint.requests.length - before, 1, `${format} ${status}: one request, a redirect is not retried`);
        const asked = endpoint.requests.at(-1);
        assert.ok(JSON.stringify(asked.headers).includes(KEY), `${format}: the key went to the configured endpoint`);
        assert.ok(asked.body.includes(prompt), `${format}: so did the prompt`);
      }
    } finally {
      await context.close();
      await endpoint.close();
      await elsewhere.close();
    }
  });
}
