// Deep Research on the demo page in headless Chromium (issue 19, SPEC S9),
// IndexedDB as the store: the research panel starts a task (the start turn is
// no chat message and never the Agent run card, S9.1, S9.2), the plan request
// is presented once across a reload (S6.4), a widening edit is refused
// (S9.4), approval goes on to a partial report whose three parts are shown
// apart and are separate in the Artifact's JSON (S9.6); this page has no
// gateway, so no source is read and each is a gap. A reload during planning
// or during synthesis interrupts the task: nothing starts by itself, Resume
// continues (S9.6).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { config, openPage, setup, sleep, uniqueSession } from './helpers.mjs';

let env;
before(async () => { env = await setup(); });
after(async () => { await env?.close(); });

const PLAN = {
  questions: ['How dense are the cells?', 'Who makes them?'],
  queries: ['solid-state density'],
  sources: ['https://cells.example.org/a', 'https://makers.example.org/b'],
  domains: ['example.org'],
};
const DRAFT = {
  title: 'Cells',
  findings: [],
  unverified: [{ text: 'A blog says 600 Wh/kg.' }],
  model_knowledge: [{ text: 'The electrolyte is solid.' }],
  unanswered: ['Who makes them?'],
};

function researchScenario({ planDelay = 0, synthesisDelay = 0 } = {}) {
  return {
    turns: [{ text: 'They are promising.' }],
    prompts: [
      { starts_with: 'You plan a Deep Research task.', turns: [{ text: JSON.stringify(PLAN), delay_ms: planDelay }] },
      { starts_with: 'You write the report of a Deep Research task.', turns: [{ text: JSON.stringify(DRAFT), delay_ms: synthesisDelay }] },
    ],
  };
}

async function phase(page) {
  return page.locator('#research-panel').getAttribute('data-phase');
}

async function waitPhase(page, wanted, timeout = 20_000) {
  await page.waitForFunction((w) => document.getElementById('research-panel')?.dataset.phase === w, wanted, { timeout });
}

async function start(page, topic = 'Solid-state batteries') {
  await page.fill('#research-topic', topic);
  await page.click('#research-start');
}

test('S9: start, a plan shown once, a refused widening edit, approval, a partial three-part report', async () => {
  const context = await env.browser.newContext();
  const session = uniqueSession('research');
  const cfg = config(researchScenario());
  const page = await openPage(context, env.pageUrl, cfg, session);
  await start(page);
  await waitPhase(page, 'awaiting_plan_approval');
  assert.deepEqual(await page.locator('#research-questions li').allTextContents(), PLAN.questions);
  assert.equal(await page.locator('#plan-approve').isVisible(), true);
  // S9.2: the start turn is no chat message and not on the Agent run card.
  assert.equal(await page.locator('#conversation > li').count(), 0);
  assert.equal(await page.locator('#run-status').textContent(), 'none');
  const task = await page.locator('#research-task').textContent();
  const runs = await page.evaluate((s) => window.agentrtDemo.runtime.listRuns(s), session);
  assert.ok(runs.length >= 2 && runs.every((r) => r.mode === 'research'), JSON.stringify(runs.map((r) => r.mode)));
  assert.ok(runs.some((r) => r.parent), 'planning is a child run of the start turn');

  // S6.4: presented once, also across a reload.
  const first = await page.evaluate(([s, t]) => window.agentrtDemo.runtime.presentPlan(s, t), [session, task]);
  assert.deepEqual(first.questions, PLAN.questions);
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]');
  await waitPhase(page, 'awaiting_plan_approval');
  const again = await page.evaluate(([s, t]) => window.agentrtDemo.runtime.presentPlan(s, t), [session, task]);
  assert.equal(again, null);

  // S9.4: an edit may only narrow.
  const refused = await page.evaluate(async ([s, t]) => {
    const rt = window.agentrtDemo.runtime;
    const view = await rt.readResearch(s, t);
    const wider = { ...view.plan, domains: [...view.plan.domains, 'elsewhere.example'] };
    try { await rt.editPlan(s, t, view.plan_request.id, wider); return null; } catch (e) { return e.code; }
  }, [session, task]);
  assert.equal(refused, 'invalid_argument');
  await waitPhase(page, 'awaiting_plan_approval');

  await page.click('#plan-approve');
  await waitPhase(page, 'partial');
  assert.deepEqual(await page.locator('#report-unverified li').allTextContents(), ['A blog says 600 Wh/kg.']);
  assert.deepEqual(await page.locator('#report-knowledge li').allTextContents(), ['The electrolyte is solid.']);
  assert.equal(await page.locator('#report-findings li').count(), 0);
  const gaps = await page.locator('#research-gaps li').allTextContents();
  assert.ok(gaps.some((g) => g.includes('cells.example.org') && g.includes('fetch_url')), gaps.join('\n'));
  assert.ok(gaps.some((g) => g.includes('Who makes them?')), gaps.join('\n'));
  // The parts are separate in the Artifact's structure, not only on the page.
  const report = await page.evaluate(async ([s, t]) => {
    const rt = window.agentrtDemo.runtime;
    const view = await rt.readResearch(s, t);
    return JSON.parse((await rt.readArtifact(s, view.report.artifact)).text);
  }, [session, task]);
  assert.deepEqual(Object.keys(report).filter((k) => ['findings', 'unverified', 'model_knowledge'].includes(k)).sort(),
    ['findings', 'model_knowledge', 'unverified']);
  assert.equal(report.unverified[0].text, 'A blog says 600 Wh/kg.');
  assert.deepEqual(page.errors, []);
  await context.close();
});

test('S9.6: a reload during planning or synthesis interrupts the task; nothing starts until Resume', async () => {
  const context = await env.browser.newContext();
  const session = uniqueSession('research-reload');
  const cfg = config(researchScenario({ planDelay: 3_000, synthesisDelay: 3_000 }));
  const page = await openPage(context, env.pageUrl, cfg, session);
  await start(page, 'Sodium batteries');
  await waitPhase(page, 'planning');
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]');
  await waitPhase(page, 'interrupted');
  assert.match(await page.locator('#research-phase').textContent(), /resumes planning/);
  await sleep(4_000);
  assert.equal(await phase(page), 'interrupted', 'nothing continued by itself');
  await page.click('#research-resume');
  await waitPhase(page, 'awaiting_plan_approval');

  await page.click('#plan-approve');
  await waitPhase(page, 'synthesizing');
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]');
  await waitPhase(page, 'interrupted');
  assert.match(await page.locator('#research-phase').textContent(), /resumes synthesizing/);
  await sleep(4_000);
  assert.equal(await phase(page), 'interrupted');
  await page.click('#research-resume');
  await waitPhase(page, 'partial');
  assert.equal(await page.locator('#report-knowledge li').count(), 1);
  assert.deepEqual(page.errors, []);
  await context.close();
});

// Issue 38: a draft citing evidence that was never read ends in a readable
// partial report (the claim moved to unverified, the reason a gap), never
// in a task that cannot finish (S9.6).
test('S9.6: a draft citing unknown evidence ends in a partial report with the reason shown', async () => {
  const context = await env.browser.newContext();
  const session = uniqueSession('research-unknown-evidence');
  const bad = { ...DRAFT, findings: [{ claim: 'Cells reach 900 Wh/kg.', evidence: ['ev-9'] }] };
  const cfg = config({
    turns: [{ text: 'They are promising.' }],
    prompts: [
      { starts_with: 'You plan a Deep Research task.', turns: [{ text: JSON.stringify(PLAN) }] },
      { starts_with: 'You write the report of a Deep Research task.', turns: [{ text: JSON.stringify(bad) }] },
    ],
  });
  const page = await openPage(context, env.pageUrl, cfg, session);
  await start(page, 'Dense cells');
  await waitPhase(page, 'awaiting_plan_approval');
  await page.click('#plan-approve');
  await waitPhase(page, 'partial');
  assert.equal(await page.locator('#report-findings li').count(), 0);
  const unverified = await page.locator('#report-unverified li').allTextContents();
  assert.ok(unverified.some((u) => u.startsWith('Cells reach 900 Wh/kg.')), unverified.join('\n'));
  const gaps = await page.locator('#research-gaps li').allTextContents();
  assert.ok(gaps.some((g) => g.includes('moved to unverified') && g.includes('ev-9')), gaps.join('\n'));
  assert.deepEqual(page.errors, []);
  await context.close();
});

// Issue 38: stopResearch during synthesis stops its run at once and leaves
// the report of what was read with the gap `stopped`; nothing resumes.
test('S9.6: stopResearch during synthesis leaves a stopped partial report', async () => {
  const context = await env.browser.newContext();
  const session = uniqueSession('research-stop');
  const cfg = config(researchScenario({ synthesisDelay: 120_000 }));
  const page = await openPage(context, env.pageUrl, cfg, session);
  await start(page, 'Stopped cells');
  await waitPhase(page, 'awaiting_plan_approval');
  const task = await page.locator('#research-task').textContent();
  await page.click('#plan-approve');
  await waitPhase(page, 'synthesizing');
  await page.evaluate(([s, t]) => window.agentrtDemo.runtime.stopResearch(s, t), [session, task]);
  await waitPhase(page, 'partial');
  const view = await page.evaluate(([s, t]) => window.agentrtDemo.runtime.readResearch(s, t), [session, task]);
  assert.ok(view.gaps.some((g) => g.kind === 'stopped'), JSON.stringify(view.gaps));
  const report = await page.evaluate(async ([s, t]) => {
    const rt = window.agentrtDemo.runtime;
    const v = await rt.readResearch(s, t);
    return JSON.parse((await rt.readArtifact(s, v.report.artifact)).text);
  }, [session, task]);
  assert.ok(report.gaps.some((g) => g.kind === 'stopped'));
  assert.equal(report.findings.length, 0);
  await sleep(2_000);
  assert.equal(await phase(page), 'partial', 'nothing resumed by itself');
  assert.deepEqual(page.errors, []);
  await context.close();
});

// Issue 38: `rt.stop` on the research's own run (here the synthesis run)
// stops the task as `stopResearch` does: the report of what was read with
// the gap `stopped`, and nothing resumes by itself (S9.6).
test('S9.6: rt.stop on a research run stops its task', async () => {
  const context = await env.browser.newContext();
  const session = uniqueSession('research-rt-stop');
  const cfg = config(researchScenario({ synthesisDelay: 120_000 }));
  const page = await openPage(context, env.pageUrl, cfg, session);
  await start(page, 'Cells stopped by their run');
  await waitPhase(page, 'awaiting_plan_approval');
  const task = await page.locator('#research-task').textContent();
  await page.click('#plan-approve');
  await waitPhase(page, 'synthesizing');
  const stopped = await page.evaluate(async (s) => {
    const rt = window.agentrtDemo.runtime;
    const running = (await rt.listRuns(s)).filter((r) => r.mode === 'research' && r.status === 'running');
    if (running.length !== 1) return { error: JSON.stringify(running.map((r) => [r.id, r.status])) };
    await rt.stop(running[0].id);
    return { run: running[0].id };
  }, session);
  assert.ok(stopped.run, stopped.error);
  await waitPhase(page, 'partial');
  const view = await page.evaluate(([s, t]) => window.agentrtDemo.runtime.readResearch(s, t), [session, task]);
  assert.ok(view.gaps.some((g) => g.kind === 'stopped'), JSON.stringify(view.gaps));
  await sleep(2_000);
  assert.equal(await phase(page), 'partial', 'nothing resumed by itself');
  assert.deepEqual(page.errors, []);
  await context.close();
});
