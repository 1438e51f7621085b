// `agentrt serve --allow-origin ORIGIN` for a hosted chat app (issue 14
// item 9): a page served from a second loopback origin calls the gateway's
// fetch endpoint in Chromium the way host-browser's GatewayClient does
// (POST /v1/fetch, JSON {url}, Authorization: Bearer <token>, a CORS
// preflight) and reads a public page; a page from a third origin is refused
// by the browser's CORS check and the gateway. The "public page" is read
// through a Jina-compatible reader on loopback (a reader is user
// configuration, so loopback is allowed for it), so nothing off this
// machine is contacted.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { startAgentrt } from '../serve.mjs';

const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'];
const PAGE_TEXT = 'This domain is for use in examples.';
const PUBLIC_URL = 'https://93.184.216.34/';

function listen(server) {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${server.address().port}`)));
}

/** A tiny static app: one page, from its own origin. */
async function startApp() {
  const server = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    res.end('<!doctype html><title>chat app</title><p>A hosted chat app</p>');
  });
  const url = await listen(server);
  return { url, close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(r); }) };
}

/** In the page: the gateway call of host-browser's GatewayClient. */
function callGateway(page, gateway, token, url) {
  return page.evaluate(async ({ gateway, token, url }) => {
    try {
      const resp = await fetch(`${gateway}/v1/fetch`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ url }),
      });
      return { status: resp.status, body: await resp.json() };
    } catch (e) {
      return { error: String(e) };
    }
  }, { gateway, token, url });
}

let reader;
let readerHits = 0;
let app;
let third;
let agentrt;
let dir;
let browser;

before(async () => {
  reader = createServer((req, res) => {
    readerHits += 1;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ code: 200, status: 20000, data: { title: 'Example Domain', url: PUBLIC_URL, content: PAGE_TEXT } }));
  });
  const readerUrl = await listen(reader);
  dir = mkdtempSync(join(tmpdir(), 'agentrt-origins-'));
  const configFile = join(dir, 'agentrt.toml');
  writeFileSync(configFile, `[reader]\nendpoint = "${readerUrl}/"\n`);
  app = await startApp();
  third = await startApp();
  agentrt = await startAgentrt(['--config', configFile], ['--allow-origin', app.url]);
  browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: FLAGS });
});

after(async () => {
  await browser?.close();
  await agentrt?.close();
  await app?.close();
  await third?.close();
  reader?.closeAllConnections?.();
  await new Promise((r) => (reader ? reader.close(r) : r()));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('a page from an allowed second origin reads a public page through the gateway with its token', async () => {
  assert.notEqual(new URL(app.url).origin, new URL(agentrt.url).origin, 'a second origin');
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${app.url}/`);
  const before = readerHits;
  const answer = await callGateway(page, agentrt.url, agentrt.token, PUBLIC_URL);
  assert.equal(answer.status, 200, JSON.stringify(answer));
  assert.equal(answer.body.outcome, 'page', JSON.stringify(answer));
  assert.match(JSON.stringify(answer.body), /This domain is for use in examples\./);
  assert.equal(readerHits, before + 1);

  // The token still matters for the allowed origin ...
  const noToken = await callGateway(page, agentrt.url, 'wrong-token', PUBLIC_URL);
  assert.equal(noToken.status, 401, JSON.stringify(noToken));
  assert.equal(noToken.body.error, 'token_required');
  // ... and so does the URL policy: a private address is refused, not read.
  const priv = await callGateway(page, agentrt.url, agentrt.token, 'http://127.0.0.1:1/');
  assert.equal(priv.status, 200, JSON.stringify(priv));
  assert.equal(priv.body.outcome, 'failure');
  assert.equal(priv.body.reason.reason, 'policy', JSON.stringify(priv));
  assert.equal(readerHits, before + 1, 'nothing more was read');
  await context.close();
});

test('a page from a third origin is refused', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const seen = [];
  page.on('response', (r) => { if (r.url() === `${agentrt.url}/v1/fetch`) seen.push(r.status()); });
  await page.goto(`${third.url}/`);
  const before = readerHits;
  const answer = await callGateway(page, agentrt.url, agentrt.token, PUBLIC_URL);
  // The preflight is refused (403 origin_refused, no CORS header), so the
  // browser never sends the POST and the page sees a network error.
  assert.ok(answer.error, JSON.stringify(answer));
  assert.match(answer.error, /Failed to fetch/);
  assert.ok(seen.every((s) => s === 403), JSON.stringify(seen));
  assert.equal(readerHits, before, 'nothing was read for the third origin');
  await context.close();
});
