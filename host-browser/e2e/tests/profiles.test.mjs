// Agent Profiles on the demo page in headless Chromium (issue 20, SPEC S10),
// IndexedDB as the store: the picker lists a saved profile and survives a
// reload; a run under a read-only profile has its write refused before it
// runs (S10.2) and records the profile revision; revisions diff and roll
// back; an export holds no credential (S10.3) and imports under another id.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { config, openPage, send, setup, uniqueSession, waitStatus } from './helpers.mjs';

let env;
before(async () => { env = await setup(); });
after(async () => { await env?.close(); });

const MARKER = 'MARKER-91c2-handle';

test('S10: a run under a read-only profile cannot write; revisions, export and import', async () => {
  const context = await env.browser.newContext();
  const session = uniqueSession('profiles');
  const cfg = config({
    turns: [
      { text: 'Writing.', tool_calls: [{ name: 'workspace_write', arguments: { path: 'x.txt', content: 'no' } }] },
      { text: 'Done.' },
    ],
  });
  const page = await openPage(context, env.pageUrl, cfg, session);
  await page.click('#profile-sample');
  await page.waitForFunction(() => document.getElementById('profile-picker').value === 'read-only');
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]');
  await page.waitForFunction(() => [...document.getElementById('profile-picker').options].some((o) => o.value === 'read-only'));
  await page.selectOption('#profile-picker', 'read-only');
  await send(page, 'Write x.txt.');
  await waitStatus(page, 'completed');
  const outcome = await page.evaluate(async (s) => {
    const rt = window.agentrtDemo.runtime;
    const files = await rt.listWorkspace(s);
    const view = await rt.readRun(window.agentrtDemo.runId);
    const uses = await rt.profileRuns('read-only');
    return { files: files.map((f) => f.path), journal: view.journal.map((j) => [j.tool, j.state]), uses, run: view.run.id };
  }, session);
  assert.deepEqual(outcome.files, [], 'the write never ran');
  assert.ok(!outcome.journal.some(([tool, state]) => tool === 'workspace_write' && state === 'committed'), JSON.stringify(outcome.journal));
  assert.deepEqual(outcome.uses.map((u) => [u.run, u.revision]), [[outcome.run, 1]]);

  const shared = await page.evaluate(async (marker) => {
    const rt = window.agentrtDemo.runtime;
    const first = await rt.readProfile('read-only', undefined);
    const second = await rt.saveProfile({ ...first.profile, credentials: { handles: { openai: marker } }, budget: { max_tool_rounds: 5, max_tool_calls: 20 } }, first.revision);
    const changes = await rt.diffProfile('read-only', 1, second.revision);
    const rolled = await rt.rollbackProfile('read-only', 1);
    const widened = await rt.startRun('nowhere', 'x', { profile: 'read-only', turn: { tools: ['workspace_write'] } }).then(() => null, (e) => e.code);
    await rt.saveProfile({ ...rolled.profile, credentials: { handles: { openai: marker } } }, rolled.revision);
    const text = await rt.exportProfile('read-only');
    const imported = await rt.importProfile(text, 'shared');
    return { changes: changes.map((c) => c.path), rolled: rolled.cause, text, imported: imported.revision.profile.id, widened };
  }, MARKER);
  assert.ok(shared.changes.includes('budget.max_tool_calls'), JSON.stringify(shared.changes));
  assert.deepEqual(shared.rolled, { kind: 'rolled_back', to: 1 });
  assert.ok(!shared.text.includes(MARKER), 'the export holds no credential');
  assert.equal(shared.imported, 'shared');
  assert.equal(shared.widened, null, 'a widening turn is narrowed, not refused');
  assert.deepEqual(page.errors, []);
  await context.close();
});

test('S10.1: memories and knowledge bases on IndexedDB; a run under a profile searches the session memory', async () => {
  const context = await env.browser.newContext();
  const session = uniqueSession('memory');
  const cfg = config({
    turns: [
      { text: 'Looking.', tool_calls: [{ name: 'memory_search', arguments: { query: 'tea' } }, { name: 'knowledge_search', arguments: { query: 'density', bases: ['docs'] } }] },
      { text: 'Found.' },
    ],
  });
  const page = await openPage(context, env.pageUrl, cfg, session);
  await page.evaluate(async (s) => {
    const rt = window.agentrtDemo.runtime;
    const saved = await rt.saveMemory(`session:${s}`, 'tea', 'The person drinks green tea.');
    await rt.deleteMemory(`session:${s}`, 'tea', saved.revision);
    await rt.restoreMemory(`session:${s}`, 'tea');
    await rt.addKnowledge('docs', [{ id: 'cells.txt', text: 'Solid-state cells reach a density of 500 Wh/kg.' }]);
    await rt.saveProfile({ id: 'keeper', name: 'Keeper', memory: { read: ['session'], write: ['session'] }, knowledge: ['docs'] }, undefined);
  }, session);
  // Everything is in IndexedDB: a reload keeps it.
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]');
  const stored = await page.evaluate(async (s) => {
    const rt = window.agentrtDemo.runtime;
    return {
      memories: (await rt.listMemories(`session:${s}`, undefined)).map((m) => [m.id, m.revision, m.text]),
      bases: await rt.listKnowledgeBases(),
      passages: (await rt.searchKnowledge('docs', 'density')).map((p) => [p.document, p.offset, p.textHash.length]),
    };
  }, session);
  assert.deepEqual(stored.memories, [['tea', 2, 'The person drinks green tea.']]);
  assert.deepEqual(stored.bases, ['docs']);
  assert.deepEqual(stored.passages, [['cells.txt', 0, 64]]);
  await page.waitForFunction(() => [...document.getElementById('profile-picker').options].some((o) => o.value === 'keeper'));
  await page.selectOption('#profile-picker', 'keeper');
  await send(page, 'What do I drink?');
  await waitStatus(page, 'completed');
  const evidence = await page.evaluate(async () => {
    const view = await window.agentrtDemo.runtime.readRun(window.agentrtDemo.runId);
    return view.evidence.map((e) => [e.tool, e.trust]);
  });
  // The person's memory comes back as `user` text; a passage as untrusted data.
  assert.deepEqual(evidence, [['memory_search', 'user'], ['knowledge_search', 'external_untrusted']]);
  // Without a profile, no Memory.
  await page.selectOption('#profile-picker', '');
  await send(page, 'And now?');
  const newest = async () => page.evaluate(async (s) => {
    const rt = window.agentrtDemo.runtime;
    const runs = (await rt.listRuns(s)).sort((a, b) => a.created_at_ms - b.created_at_ms);
    const last = runs[runs.length - 1];
    const view = await rt.readRun(last.id);
    return { count: runs.length, status: last.status, journal: view.journal.map((j) => [j.tool, j.state]), failures: view.failures ?? [] };
  }, session);
  let latest = await newest();
  for (let i = 0; i < 200 && !(latest.count === 2 && latest.status === 'completed'); i += 1) {
    await new Promise((r) => setTimeout(r, 100));
    latest = await newest();
  }
  // Issue 37 part 3: a run granted no Memory is not offered memory_search,
  // so the scripted model's call of it never runs (no journal entry).
  assert.equal(latest.status, 'completed', JSON.stringify(latest));
  assert.equal(latest.journal.find(([tool]) => tool === 'memory_search'), undefined, JSON.stringify(latest));
  assert.deepEqual(page.errors, []);
  await context.close();
});
