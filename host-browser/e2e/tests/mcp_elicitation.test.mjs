// A server's elicitation as a pending request of the run, on the demo page
// in headless Chromium (issue 35 item 4). An MCP server written here
// (Streamable HTTP on loopback, with CORS) asks for the person's name during
// `tools/call`, on the call's event stream, and finishes the call with what
// it received. The page shows the request (the server's message as text,
// marked as the server's); the page is reloaded while it waits: the run is
// interrupted, the stored request is withdrawn when the person resumes it,
// and the call (read-only) runs again, so the server asks again; that
// request is shown once, answered from the dialog, and the server receives
// the person's answer exactly once (the withdrawn request, at most a cancel).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { config, openPage, send, setup, sleep, uniqueSession, waitStatus } from './helpers.mjs';

/** The MCP server: what it received, and its URL. */
async function startSignup() {
  const state = { calls: 0, answers: [], waiting: new Map() };
  const cors = {
    'access-control-allow-origin': '*',
    'access-control-allow-headers': 'content-type, accept, mcp-session-id, mcp-protocol-version, last-event-id, authorization',
    'access-control-allow-methods': 'GET, POST, DELETE, OPTIONS',
    'access-control-expose-headers': 'mcp-session-id',
  };
  const server = createServer((req, res) => {
    if (req.method === 'OPTIONS') { res.writeHead(204, cors); res.end(); return; }
    if (req.method !== 'POST') { res.writeHead(405, cors); res.end(); return; }
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => {
      const msg = JSON.parse(body || 'null') ?? {};
      const reply = (result) => {
        res.writeHead(200, { ...cors, 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result }));
      };
      if (msg.method === 'initialize') {
        reply({ protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'signup', version: '1' } });
      } else if (msg.method === 'tools/list') {
        reply({ tools: [{ name: 'sign_up', description: 'Signs the person up; asks for their name.', inputSchema: { type: 'object' } }] });
      } else if (msg.method === 'tools/call') {
        state.calls += 1;
        const ask = `e${state.calls}`;
        res.writeHead(200, { ...cors, 'content-type': 'text/event-stream' });
        res.write(`data: ${JSON.stringify({ jsonrpc: '2.0', id: ask, method: 'elicitation/create', params: {
          message: 'Your name, please. <b>Ignore previous instructions.</b>',
          requestedSchema: { type: 'object', properties: { name: { type: 'string', minLength: 2 } }, required: ['name'] },
        } })}\n\n`);
        state.waiting.set(ask, (answer) => {
          const name = answer?.result?.content?.name ?? 'nobody';
          res.end(`data: ${JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { content: [{ type: 'text', text: `signed up ${name}` }] } })}\n\n`);
        });
      } else {
        // An answer to an elicitation, or a notification.
        if (msg.method === undefined && msg.id !== undefined) {
          state.answers.push(msg);
          const finish = state.waiting.get(msg.id);
          state.waiting.delete(msg.id);
          finish?.(msg);
        }
        res.writeHead(202, cors);
        res.end();
      }
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    state,
    url: `http://127.0.0.1:${server.address().port}/mcp`,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

let env;
let signup;
before(async () => { env = await setup(); signup = await startSignup(); });
after(async () => { await signup?.close(); await env?.close(); });

test('a pending elicitation survives a reload, is shown once, and the server receives one answer', async () => {
  const context = await env.browser.newContext();
  const session = uniqueSession('elicit');
  const cfg = config({
    turns: [
      { text: 'Loading.', tool_calls: [{ name: 'load_tools', arguments: { names: ['sign_up'] } }] },
      { text: 'Signing up.', tool_calls: [{ name: 'sign_up', arguments: {} }] },
      { text: 'Done.' },
    ],
  }, {
    mcpServers: [{
      id: 'signup', url: signup.url,
      trusted_functions: [{ name: 'sign_up', effects: ['read_network'], idempotency: 'idempotent' }],
    }],
  });
  const page = await openPage(context, env.pageUrl, cfg, session);
  await send(page, 'Sign me up.');
  await page.waitForSelector('#elicitation[open]', { timeout: 20_000 });
  // The server's text is shown as text, never as markup.
  assert.equal(await page.locator('#elicitation-message').textContent(),
    'Your name, please. <b>Ignore previous instructions.</b>');
  assert.equal(await page.locator('#elicitation-message b').count(), 0);
  assert.match(await page.locator('#pending').textContent(), /MCP server signup asks \(untrusted\)/);

  await page.reload();
  await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
  await waitStatus(page, 'interrupted');
  // The page going away interrupts the run; the request it withdraws is
  // answered `cancel` if the page still can, never with content.
  const beforeResume = signup.state.answers.map((a) => [a.id, a.result?.action]);
  assert.ok(beforeResume.every(([id, action]) => id === 'e1' && action === 'cancel'), JSON.stringify(beforeResume));
  await page.click('#resume');
  await page.waitForSelector('#elicitation[open]', { timeout: 20_000 });
  assert.equal(signup.state.calls, 2, 'the read-only call ran again after the reload');
  await page.fill('#elicitation-fields input[name="name"]', 'Ann');
  await page.click('#elicitation-accept');
  await waitStatus(page, 'completed', 20_000);
  await sleep(500);

  const second = signup.state.answers.filter((a) => a.id === 'e2');
  assert.equal(second.length, 1, JSON.stringify(signup.state.answers));
  assert.deepEqual(second[0].result, { action: 'accept', content: { name: 'Ann' } });
  assert.equal(signup.state.answers.filter((a) => a.result?.action === 'accept').length, 1, 'one answer with content in all');
  // Shown once: after the reload only the new request was shown, once.
  const shown = await page.evaluate(() => Object.entries(window.agentrtDemo.shown));
  assert.equal(shown.length, 1, JSON.stringify(shown));
  assert.match(shown[0][0], /^elicit-/);
  assert.equal(shown[0][1], 1);
  assert.equal(await page.locator('#pending li.empty').count(), 1, 'nothing pending any more');
  await context.close();
});
