// The npm package for embedders (issue 14 item 8): packed from the bundle
// `npm test` just built, installed into the example app
// (examples/web-app), built there with Vite, served as static files on
// loopback and driven in Chromium through one run on each of its pages: the
// run rendered from its events, and the AI SDK chat (`useChat` on the
// package's transport, issue 36 part 6).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createServer } from 'node:http';
import { readFile, rm } from 'node:fs/promises';
import { dirname, extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setup } from './helpers.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..', '..');
const app = join(root, 'examples', 'web-app');

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm', '.css': 'text/css' };

/** The app's `dist/` as plain static files, as any web server would serve it. */
function serveStatic(dir) {
  const server = createServer(async (req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname));
    const file = join(dir, path.endsWith('/') ? join(path, 'index.html') : path);
    if (!file.startsWith(dir + sep)) { res.writeHead(403).end(); return; }
    try {
      const body = await readFile(file);
      res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({
    url: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((r) => server.close(r)),
  })));
}

let env;
before(async () => {
  env = await setup();
  const run = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, stdio: 'inherit' });
  run('node', [join(root, 'host-browser', 'npm', 'pack.mjs')], root);
  // A fresh install of this build's tarball (npm keeps an installed one of
  // the same version otherwise).
  await rm(join(app, 'node_modules', 'agent-runtime-browser'), { recursive: true, force: true });
  run('npm', ['install', '--no-audit', '--no-fund', '--no-package-lock'], app);
  // Both pages: the run from its events, and the AI SDK chat.
  run('npm', ['run', 'build'], app);
});
after(async () => { await env?.close(); });

/** `body(page, errors, server)` on a fresh page of the built app; `errors` collects the page's errors. */
async function withApp(body) {
  const server = await serveStatic(join(app, 'dist'));
  const context = await env.browser.newContext();
  try {
    const page = await context.newPage();
    const errors = [];
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    page.on('pageerror', (e) => errors.push(String(e)));
    await body(page, errors, server);
  } finally {
    await context.close();
    await server.close();
  }
}

test('the npm package installs into a Vite app that runs one agent run in Chromium', async () => {
  await withApp(async (page, errors, server) => {
    await page.goto(`${server.url}/`);
    await page.waitForSelector('#status[data-status="completed"]', { timeout: 60_000 })
      .catch(async (e) => { throw new Error(`${e.message}\n${await page.locator('body').innerText()}`); });
    await page.waitForFunction(() => document.getElementById('answer').textContent.includes('Noted in notes/hello.md.'),
      null, { timeout: 10_000 });
    const events = await page.locator('#events li').allInnerTexts();
    assert.ok(events.some((e) => e.startsWith('activity: tool_call')), events.join('\n'));
    assert.deepEqual(errors, []);
  });
});

test('issue 36 part 6: the app\'s useChat page (React, @ai-sdk/react) runs one run through the package\'s AI SDK transport: text, an approval asked again after a reload and answered in the UI, the tool\'s output, the answer', async () => {
  await withApp(async (page, errors, server) => {
    await page.goto(`${server.url}/chat.html`);
    await page.waitForSelector('#chat-status[data-status="ready"]', { timeout: 60_000 });
    await page.fill('#prompt', 'Write a note.');
    await page.click('#send');
    // Strict mode: the write asks first; useChat shows the SDK's approval part.
    const tool = page.locator('li[data-role="assistant"] .part[data-type="dynamic-tool"]');
    await tool.and(page.locator('[data-state="approval-requested"]')).waitFor({ timeout: 30_000 });
    assert.match(await tool.innerText(), /workspace_write/);
    assert.match(await tool.innerText(), /notes\/chat\.md/);
    assert.equal(await page.locator('li[data-role="assistant"] .part[data-type="reasoning"]').count(), 1);
    // A reload while the run waits: the page keeps its messages, useChat's
    // `resume` re-attaches to the run (replayed, not resumed), the approval
    // is asked again, once.
    await page.reload();
    await tool.and(page.locator('[data-state="approval-requested"]')).waitFor({ timeout: 30_000 });
    await page.waitForSelector('#chat-status[data-status="ready"]', { timeout: 30_000 });
    assert.equal(await tool.count(), 1);
    assert.equal(await page.locator('li[data-role="user"]').count(), 1);
    await tool.locator('button.approve').click();
    await page.waitForSelector('li[data-role="assistant"][data-status="completed"]', { timeout: 30_000 });
    assert.equal(await tool.getAttribute('data-state'), 'output-available');
    const texts = await page.locator('li[data-role="assistant"] .part[data-type="text"]').allInnerTexts();
    assert.deepEqual(texts, ['I will write the note.', 'Noted in notes/chat.md.']);
    assert.equal(await page.locator('li[data-role="assistant"]').count(), 1, 'one run, one assistant message');
    assert.deepEqual(errors, []);
  });
});
