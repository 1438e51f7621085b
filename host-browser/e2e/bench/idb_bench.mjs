// The browser benchmarks (issue 18 items 4 and 5), in Debian's headless
// Chromium through playwright-core, on the bundle `node build.mjs` built
// into host-browser/pkg:
//
// - an effectful round on IndexedDB: a scripted model makes N rounds of one
//   `workspace_write` each through `AgentRuntime` (the public JS API, as an
//   embedder calls it); each round is the time between two `model_request`
//   activities seen by `subscribe` (after a short run that is not measured,
//   so that the engine has warmed up); beside it, in the same page, the median
//   of one bare readwrite transaction (one put of 200 bytes, durability
//   "strict" as the runtime's) on an object store of its own database,
//   measured before and after the run;
// - the demo page ready (runtime created, IndexedDB open: `data-ready` on
//   the body), from navigation start, in a fresh browser context each time;
// - the size of the wasm module the page loads first, raw and gzip -9.
//
// Why a page driven by Playwright and not a wasm-bindgen test: this measures
// the release bundle pages really load (LTO, opt-level "z"), the one the
// e2e suite and `cargo xtask demo` build and serve, through the JavaScript
// API; a wasm-bindgen test runs a debug build of the crate (or would need a
// second, release build of it for wasm tests only).
//
// Usage (from host-browser/e2e, after `node build.mjs`):
//   node bench/idb_bench.mjs              # 300 rounds
//   BENCH_QUICK=1 node bench/idb_bench.mjs   # 100 rounds
//   BENCH_JSON=<file> ...                 # also append each figure as a JSON line
// Prints medians; asserts nothing about speed (it fails only if a run does).
import { chromium } from 'playwright-core';
import { appendFileSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { startPageServer } from '../serve.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const PKG = join(here, '..', '..', 'pkg');
const quick = Boolean(process.env.BENCH_QUICK);
const ROUNDS = Number(process.env.IDB_ROUNDS || (quick ? 100 : 300));
const BARE = quick ? 100 : 300;
const LOADS = 10;
const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'];

/** One figure: printed, and appended to $BENCH_JSON as a JSON line when set. */
function emit(name, label, value, unit, extra = {}) {
  console.log(`${label}: ${value.toFixed(unit === 'ms' ? 3 : 2)} ${unit}`);
  if (process.env.BENCH_JSON) {
    appendFileSync(process.env.BENCH_JSON, `${JSON.stringify({ bench: 'browser', name, label, value, unit, ...extra })}\n`);
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : NaN;
};

/** In the page: `n` bare readwrite transactions, each one put; their durations in ms. */
async function bareTransactions(page, n) {
  return page.evaluate(async ([n, name]) => {
    const db = await new Promise((resolve, reject) => {
      const open = indexedDB.open(name, 1);
      open.onupgradeneeded = () => open.result.createObjectStore('kv');
      open.onsuccess = () => resolve(open.result);
      open.onerror = () => reject(open.error);
    });
    const value = new Uint8Array(200).fill(1);
    const times = [];
    for (let i = 0; i < n; i += 1) {
      const t = performance.now();
      await new Promise((resolve, reject) => {
        const tx = db.transaction('kv', 'readwrite', { durability: 'strict' });
        tx.objectStore('kv').put(value, `k${i}`);
        tx.oncomplete = resolve;
        tx.onerror = () => reject(tx.error);
        tx.onabort = () => reject(tx.error);
      });
      times.push(performance.now() - t);
    }
    db.close();
    return times;
  }, [n, `bench-bare-${Date.now()}`]);
}

/** In the page: one run of `rounds` workspace_write rounds; the time of each round in ms. */
async function effectfulRounds(page, rounds) {
  return page.evaluate(async (rounds) => {
    const turns = [];
    for (let i = 0; i < rounds; i += 1) {
      turns.push({ text: '', tool_calls: [{ name: 'workspace_write', arguments: { path: `notes/n${i}.txt`, content: 'x' } }],
        usage: { input_tokens: 10, output_tokens: 2 } });
    }
    turns.push({ text: 'done', usage: { input_tokens: 10, output_tokens: 2 } });
    const rt = await window.pkg.AgentRuntime.create({
      databaseName: `bench-rounds-${Date.now()}`,
      model: { provider: 'scripted', scenario: { turns } },
      approvalMode: 'permissive',
    });
    if (!rt.durable) throw new Error('the runtime is not on IndexedDB');
    const session = `bench-${Date.now()}`;
    const stamps = [];
    let ended = null;
    const done = new Promise((resolve) => { ended = resolve; });
    const sub = rt.subscribe(session, (event) => {
      if (event.type === 'activity' && event.activity?.kind?.kind === 'model_request') stamps.push(performance.now());
      if (event.type === 'run' && event.run.status !== 'running') ended();
    });
    const t = performance.now();
    const runId = await rt.startRun(session, 'Write the notes.', { budget: { max_tool_rounds: rounds + 1, max_tool_calls: rounds + 1 } });
    let view;
    for (;;) {
      view = await rt.readRun(runId);
      if (view.run.status !== 'running') break;
      await Promise.race([done, new Promise((r) => setTimeout(r, 200))]);
    }
    const total = performance.now() - t;
    sub.close();
    rt.close();
    const committed = view.journal.filter((j) => j.state === 'committed').length;
    return { status: view.run.status, stop: view.run.stop_reason, committed, total, stamps };
  }, rounds);
}

/** Navigation start → `data-ready` on the demo page's body, in ms, in a fresh context. */
async function demoReady(browser, url) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.addInitScript(() => {
    new MutationObserver((_, observer) => {
      if (document.body?.dataset.ready === 'true') {
        window.__readyAt = performance.now();
        observer.disconnect();
      }
    }).observe(document, { subtree: true, attributes: true, attributeFilter: ['data-ready'] });
  });
  await page.goto(`${url}/?session=bench-ready-${Date.now()}`);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 60_000 });
  const readyAt = await page.evaluate(() => window.__readyAt);
  await context.close();
  if (errors.length) throw new Error(`the demo page failed: ${errors.join('; ')}`);
  return readyAt;
}

async function main() {
  const wasm = join(PKG, 'agent_host_browser_bg.wasm');
  const raw = statSync(wasm).size;
  const gz = gzipSync(readFileSync(wasm), { level: 9 }).length;
  emit('wasm_first_module_gzip', 'wasm module the page loads first (pkg/agent_host_browser_bg.wasm), gzip -9',
    gz / 1048576, 'MiB', { raw_mib: raw / 1048576 });
  const workerWasm = join(PKG, 'agent_worker_module_bg.wasm');
  const workerRaw = statSync(workerWasm).size;
  emit('wasm_worker_module_gzip', 'the Worker module, loaded on first use (pkg/agent_worker_module_bg.wasm), gzip -9',
    gzipSync(readFileSync(workerWasm), { level: 9 }).length / 1048576, 'MiB', { raw_mib: workerRaw / 1048576 });

  const server = await startPageServer();
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: FLAGS });
  try {
    const context = await browser.newContext();
    const page = await context.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    // Any page of the server's origin will do: the bundle is imported into it.
    await page.goto(`${server.url}/bench-blank`);
    await page.evaluate(async () => {
      window.pkg = await import('/pkg/agent_host_browser.js');
      await window.pkg.default();
    });
    // A short run first, not measured: the engine's tiers warm up on it.
    await effectfulRounds(page, 50);
    const bareBefore = await bareTransactions(page, BARE);
    const run = await effectfulRounds(page, ROUNDS);
    const bareAfter = await bareTransactions(page, BARE);
    if (errors.length) throw new Error(`the page failed: ${errors.join('; ')}`);
    if (run.status !== 'completed' || run.committed !== ROUNDS) {
      throw new Error(`the run ended ${run.status} (${JSON.stringify(run.stop)}) with ${run.committed} of ${ROUNDS} writes committed`);
    }
    const rounds = run.stamps.slice(1).map((t, i) => t - run.stamps[i]);
    const bare = median([...bareBefore, ...bareAfter]);
    const round = median(rounds);
    const tenth = Math.max(1, Math.floor(rounds.length / 10));
    emit('floor_idb_transaction', 'floor: one bare IndexedDB readwrite transaction (one put, durability strict)', bare, 'ms',
      { samples: bareBefore.length + bareAfter.length, before: median(bareBefore), after: median(bareAfter) });
    emit('round_idb_effectful', `one effectful round on IndexedDB (workspace_write, ${ROUNDS} rounds${quick ? ', quick' : ''})`, round, 'ms',
      { rounds: rounds.length, first_tenth: median(rounds.slice(0, tenth)), last_tenth: median(rounds.slice(-tenth)),
        mean: run.total / ROUNDS, bare_ratio: round / bare });
    await context.close();

    const loads = [];
    for (let i = 0; i < LOADS; i += 1) loads.push(await demoReady(browser, server.url));
    emit('demo_ready', `demo page ready (runtime created, IndexedDB open), median of ${LOADS} loads`, median(loads), 'ms',
      { loads, min: Math.min(...loads), max: Math.max(...loads) });
  } finally {
    await browser.close();
    await server.close();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
