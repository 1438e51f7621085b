// MCP from headless Chromium (issue 16): the reference server
// `@modelcontextprotocol/server-everything` over Streamable HTTP, reached
// from a page's runtime directly (it sends CORS headers) and through
// `agentrt serve`'s gateway (`via_gateway`, the server configured there in
// `[[mcp]]`). A loopback model finds and loads the server's functions with
// search_tools / load_tools, calls `echo` (an unknown function: asked
// once), reads a resource, gets a prompt and runs the long-running tool,
// whose progress reaches the page as `tool_progress` events; a run stopped
// while that tool runs ends at once. What the model is sent back (the tool
// results) is read from the model server's requests.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startAgentrt } from '../serve.mjs';
import { setup, uniqueSession } from './helpers.mjs';
import { startOpenAiServer } from './openai_server.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const REFERENCE = join(here, '..', '..', '..', 'actors', 'mcp', 'tests', 'reference', 'node_modules',
  '@modelcontextprotocol', 'server-everything', 'dist', 'index.js');

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

/** The reference server over Streamable HTTP on a free loopback port. */
async function startEverything() {
  assert.ok(existsSync(REFERENCE),
    `the MCP reference server is not installed at ${REFERENCE}; run \`cargo xtask install\``);
  const port = await freePort();
  const child = spawn(process.execPath, [REFERENCE, 'streamableHttp'], {
    env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'pipe'],
  });
  await new Promise((resolve, reject) => {
    let err = '';
    child.once('exit', (code) => reject(new Error(`server-everything exited with ${code}: ${err}`)));
    child.stderr.on('data', (d) => { err += d; if (err.includes('listening on port')) resolve(); });
  });
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    close: () => new Promise((r) => { if (child.exitCode !== null) { r(); return; } child.once('exit', r); child.kill(); }),
  };
}

let env;
let model;
let everything;
let agentrt;
let page;
let configDir;
before(async () => {
  env = await setup();
  model = await startOpenAiServer();
  everything = await startEverything();
  configDir = mkdtempSync(join(tmpdir(), 'agentrt-mcp-'));
  const configPath = join(configDir, 'agentrt.toml');
  writeFileSync(configPath, `[[mcp]]\nid = "everything"\nurl = "${everything.url}"\n`);
  agentrt = await startAgentrt(['--config', configPath], ['--allow-origin', env.pageUrl]);
  const context = await env.browser.newContext();
  page = await context.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(String(e)));
  page.requests = [];
  page.on('request', (r) => page.requests.push(r.url()));
  await page.goto(`${env.pageUrl}/e2e-blank`);
  await page.evaluate(async (baseUrl) => {
    const pkg = await import('/pkg/agent_host_browser.js');
    await pkg.default();
    window.make = async (mcpServers, gateway) => {
      window.rt?.close?.();
      window.rt = await pkg.AgentRuntime.create({
        storage: 'memory', approvalMode: 'permissive', gateway: gateway ?? undefined, mcpServers,
        model: { provider: 'openai', baseUrl, model: 'e2e-model' },
      });
      return window.rt.mcpServers();
    };
    // Approve what asks (the unknown functions), until the run ends.
    window.drive = async (runId, until = ['completed', 'failed', 'cancelled', 'interrupted']) => {
      for (let i = 0; i < 600; i += 1) {
        const view = await window.rt.readRun(runId);
        if (until.includes(view.run.status)) return view;
        if (view.run.status === 'awaiting_approval') {
          for (const p of view.pending) await window.rt.approve(runId, p.id);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`run ${runId} did not end`);
    };
    window.start = async (session, prompt) => {
      window.events = [];
      window.sub?.close();
      window.sub = window.rt.subscribe(session, (e) => window.events.push(e));
      return window.rt.startRun(session, prompt);
    };
  }, model.baseUrl);
});
after(async () => {
  await page?.evaluate(() => window.rt?.close?.()).catch(() => {});
  await agentrt?.close(); await everything?.close(); await model?.close(); await env?.close();
  if (configDir) rmSync(configDir, { recursive: true, force: true });
});

/** The tool messages of a Chat Completions request, by call id order. */
const toolResults = (request) => request.messages.filter((m) => m.role === 'tool').map((m) => m.content);

async function exercise(id, servers, gateway) {
  page.requests = [];
  const statuses = await page.evaluate(([s, g]) => window.make(s, g), [servers, gateway ?? null]);
  assert.equal(statuses.length, 1, JSON.stringify(statuses));
  assert.equal(statuses[0].connected, true, JSON.stringify(statuses));
  for (const name of ['echo', 'trigger_long_running_operation', `${id}_read_resource`, `${id}_get_prompt`]) {
    assert.ok(statuses[0].tools.includes(name), `${name} in ${statuses[0].tools}`);
  }
  const session = uniqueSession(`mcp-${id}`);
  const first = model.requests.length;
  model.reply(
    { tool_calls: [{ name: 'search_tools', arguments: { query: 'echo a message' } }] },
    { tool_calls: [{ name: 'load_tools', arguments: { names: ['echo', 'trigger_long_running_operation', `${id}_read_resource`, `${id}_get_prompt`] } }] },
    { tool_calls: [
      { name: 'echo', arguments: { message: `hello from chromium via ${id}` } },
      { name: `${id}_read_resource`, arguments: { uri: 'demo://resource/dynamic/text/1' } },
      { name: `${id}_get_prompt`, arguments: { name: 'args-prompt', arguments: { city: 'Lisbon' } } },
    ] },
    { tool_calls: [{ name: 'trigger_long_running_operation', arguments: { duration: 0.6, steps: 3 } }] },
    { text: 'All done.' },
  );
  const runId = await page.evaluate((s) => window.start(s, 'Use the MCP server.'), session);
  const view = await page.evaluate((r) => window.drive(r), runId);
  assert.equal(view.run.status, 'completed', JSON.stringify(view.run));
  assert.equal(view.output, 'All done.');
  const sent = model.requests.slice(first);
  assert.equal(sent.length, 5);
  // search_tools found echo; the three results came back to the model.
  assert.match(toolResults(sent[1]).join('\n'), /echo/);
  const third = toolResults(sent[3]).join('\n');
  assert.match(third, new RegExp(`hello from chromium via ${id}`));
  assert.match(third, /demo:\/\/resource\/dynamic\/text\/1/);
  assert.match(third, /Lisbon/);
  assert.match(toolResults(sent[4]).join('\n'), /completed/i);
  // MCP content is external data with its provenance.
  const echo = view.evidence.find((e) => e.tool === 'echo');
  assert.equal(echo.trust, 'external_untrusted');
  assert.equal(echo.provenance.origin, `mcp:${id}`);
  const read = view.evidence.find((e) => e.tool === `${id}_read_resource`);
  assert.equal(read.provenance.detail.uri, 'demo://resource/dynamic/text/1');
  // echo is unknown: asked once (an approval activity), never remembered.
  const approvals = view.activities.filter((a) => a.kind.kind === 'approval_requested');
  assert.ok(approvals.length >= 2, 'echo and the long-running tool asked');
  // Progress of the long-running tool reached the page as live events.
  const progress = await page.evaluate(() => window.events.filter((e) => e.type === 'tool_progress'));
  assert.ok(progress.length >= 2, JSON.stringify(progress));
  assert.ok(progress.every((p) => p.tool === 'trigger_long_running_operation' && p.runId === runId));
  assert.equal(progress.at(-1).progress.total, 3);

  // Stopping the run while the long tool runs ends it at once.
  const stopSession = uniqueSession(`mcp-stop-${id}`);
  model.reply(
    { tool_calls: [{ name: 'load_tools', arguments: { names: ['trigger_long_running_operation'] } }] },
    { tool_calls: [{ name: 'trigger_long_running_operation', arguments: { duration: 30, steps: 30 } }] },
  );
  const stopRun = await page.evaluate((s) => window.start(s, 'Run the long one.'), stopSession);
  await page.evaluate(async (r) => {
    for (let i = 0; i < 400; i += 1) {
      const view = await window.rt.readRun(r);
      if (view.run.status === 'awaiting_approval') for (const p of view.pending) await window.rt.approve(r, p.id);
      if (window.events.some((e) => e.type === 'tool_progress')) return;
      await new Promise((res) => setTimeout(res, 50));
    }
    throw new Error('no progress from the long-running tool');
  }, stopRun);
  const started = Date.now();
  await page.evaluate((r) => window.rt.stop(r), stopRun);
  const stopped = await page.evaluate((r) => window.drive(r), stopRun);
  assert.equal(stopped.run.status, 'cancelled', JSON.stringify(stopped.run));
  assert.ok(Date.now() - started < 10_000, 'the stop did not wait for the 30 s tool');
  assert.deepEqual(page.errors, []);
}

const toServer = () => page.requests.filter((u) => u.startsWith(everything.url));
const toGateway = () => page.requests.filter((u) => u === `${agentrt.url}/v1/mcp`);

test('MCP over Streamable HTTP from Chromium, directly (the server allows any origin)', async () => {
  await exercise('direct', [{ id: 'direct', url: everything.url }]);
  assert.ok(toServer().length > 0, 'the page reached the server itself');
  assert.deepEqual(toGateway(), []);
});

test('MCP over Streamable HTTP from Chromium, through agentrt serve\'s gateway', async () => {
  await exercise('everything',
    [{ id: 'everything', url: everything.url, via_gateway: true }],
    { url: agentrt.url, token: agentrt.token });
  assert.ok(toGateway().length > 0, 'every request went to the gateway');
  assert.deepEqual(toServer(), [], 'the page never reached the server itself');
});
