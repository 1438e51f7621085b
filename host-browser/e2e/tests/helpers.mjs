// Shared setup for the e2e tests: Debian's Chromium through playwright-core,
// the page server and a counting server on loopback, and page configs.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startCountingServer, startPageServer } from '../serve.mjs';

const here = dirname(fileURLToPath(import.meta.url));
export const RESULTS = join(here, '..', 'test-results');
mkdirSync(RESULTS, { recursive: true });

const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'];

export async function setup() {
  const page = await startPageServer();
  const counter = await startCountingServer();
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: FLAGS });
  return {
    pageUrl: page.url, counter, browser,
    async close() { await browser.close(); await page.close(); await counter.close(); },
  };
}

/** The plugin whose one function POSTs to the counting server: a non-idempotent external write. */
export function counterPlugin(counterUrl) {
  return {
    id: 'counter',
    base_url: counterUrl,
    functions: [{
      name: 'record_write',
      description: 'Record one write on the counting server.',
      method: 'POST',
      path: '/writes',
      parameters: { type: 'object', properties: { note: { type: 'string' } }, required: ['note'], additionalProperties: false },
      effects: ['write_external'],
      idempotency: 'non_idempotent',
    }],
  };
}

/** Load the plugin function, call it (asks for approval), then answer after `lastDelayMs`. */
export function writeScenario(lastDelayMs = 0) {
  return {
    turns: [
      { text: 'Loading the write tool.', tool_calls: [{ name: 'load_tools', arguments: { names: ['record_write'] } }] },
      { text: 'Recording the write.', tool_calls: [{ name: 'record_write', arguments: { note: 'hello' } }] },
      { text: 'The write is recorded.', delay_ms: lastDelayMs },
    ],
  };
}

/** A built-in destructive call (always asks once, S6.1), then an answer. */
export function trashScenario() {
  return {
    turns: [
      { text: 'Emptying the trash.', tool_calls: [{ name: 'workspace_empty_trash', arguments: {} }] },
      { text: 'The trash is empty.' },
    ],
  };
}

/** Ask the person a question, then answer. */
export function askScenario() {
  return {
    turns: [
      { text: 'I need to ask.', tool_calls: [{ name: 'ask_user', arguments: { question: 'What is your name?' } }] },
      { text: 'Thank you.' },
    ],
  };
}

/** One slow answer, no tools. */
export function slowScenario(delayMs) {
  return { turns: [{ text: 'A slow answer.', delay_ms: delayMs }] };
}

export function config(scenario, extra = {}) {
  return { model: { provider: 'scripted', scenario }, approvalMode: 'permissive', ...extra };
}

/** A page with `cfg` injected before the app runs (also after reloads); records console errors. */
export async function openPage(context, pageUrl, cfg, session) {
  const page = await context.newPage();
  page.errors = [];
  page.on('console', (m) => { if (m.type() === 'error') page.errors.push(m.text()); });
  page.on('pageerror', (e) => page.errors.push(String(e)));
  await page.addInitScript((c) => { window.AGENTRT_CONFIG = c; }, cfg);
  await page.goto(`${pageUrl}/?session=${encodeURIComponent(session)}`);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
  return page;
}

export async function send(page, prompt = 'Go.') {
  await page.fill('#prompt', prompt);
  await page.click('#send');
}

export async function status(page) {
  return page.locator('#run-status').textContent();
}

export async function waitStatus(page, wanted, timeout = 20_000) {
  await page.waitForFunction((w) => document.getElementById('run-status')?.textContent === w, wanted, { timeout });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const uniqueSession = (name) => `${name}-${Date.now().toString(36)}`;
