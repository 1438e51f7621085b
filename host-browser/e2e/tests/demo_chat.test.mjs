// The demo page as a chat (issue 14 item 6; S12.1 conversations, S12.3
// attachments, S5.4 evidence, S9.1 modes) in headless Chromium: a three-turn
// conversation shown as messages and rebuilt after a reload; attachments
// dropped on the conversation and picked with the file picker, then read by
// extract_document with their evidence shown; the page at 1280 px and at a
// phone's 390 px with nothing overflowing its panel (screenshots saved).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { RESULTS, config, openPage, send, setup, uniqueSession, waitStatus } from './helpers.mjs';

let env;
before(async () => { env = await setup(); });
after(async () => { await env?.close(); });

/** The conversation as the page shows it: [role, text, run] per message. */
async function messages(page) {
  return page.locator('#conversation > li').evaluateAll((lis) => lis.map((li) => [
    li.dataset.role, li.querySelector('.msg-text').textContent, li.dataset.run,
  ]));
}

async function waitMessages(page, count, timeout = 20_000) {
  await page.waitForFunction((n) => document.querySelectorAll('#conversation > li').length === n
    && [...document.querySelectorAll('#conversation > li.agent')].every((li) => li.dataset.status === 'completed'), count, { timeout });
}

/** Each run of the session, oldest first, as the runtime lists them. */
async function runsOf(page, session) {
  return page.evaluate(async (s) => (await window.agentrtDemo.runtime.listRuns(s))
    .sort((a, b) => a.created_at_ms - b.created_at_ms).map((r) => ({ id: r.id, mode: r.mode })), session);
}

test('S12.1: a three-turn conversation is shown as six messages in order, and again after a reload', async () => {
  const context = await env.browser.newContext();
  const session = uniqueSession('chat');
  // A scripted run plays its scenario from the first turn: each run answers this.
  const page = await openPage(context, env.pageUrl, config({ turns: [{ text: 'Noted, thank you.', delay_ms: 200 }] }), session);
  const prompts = ['My name is Ada.', 'I like tea.', 'What do you know about me?'];
  await send(page, prompts[0]);
  await waitMessages(page, 2);
  // The second turn in Chat mode (S9.1): no tools, still a turn of the conversation.
  await page.check('input[name="mode"][value="chat"]');
  await send(page, prompts[1]);
  await waitMessages(page, 4);
  await page.check('input[name="mode"][value="agent"]');
  await send(page, prompts[2]);
  await waitMessages(page, 6);
  await waitStatus(page, 'completed');

  const runs = await runsOf(page, session);
  assert.deepEqual(runs.map((r) => r.mode), ['agent', 'chat', 'agent'], 'the mode switch reached each run');
  const expected = runs.flatMap((r, i) => [['user', prompts[i], r.id], ['agent', 'Noted, thank you.', r.id]]);
  assert.deepEqual(await messages(page), expected, 'six messages: each prompt, then its answer, oldest first');
  assert.equal(await page.locator('#conversation > li.agent').nth(1).locator('.who').textContent(), 'Agent (chat)');
  assert.equal(await page.locator('#run-mode').textContent(), 'agent');

  await page.reload();
  await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
  await waitMessages(page, 6);
  assert.deepEqual(await messages(page), expected, 'the conversation is rebuilt from the runtime after a reload');
  assert.match(await page.locator('#session-picker').textContent(), new RegExp(`${session} — 3 runs`), 'the session picker lists the session');
  assert.deepEqual(page.errors, []);
  await context.close();
});

test('S12.3: files dropped on the conversation and picked with the file picker are read by extract_document; bad ones are clear errors', async () => {
  const context = await env.browser.newContext();
  const session = uniqueSession('attach');
  const scenario = {
    turns: [
      {
        text: 'Reading both attachments.',
        tool_calls: [
          { name: 'extract_document', arguments: { path: 'dropped-notes.txt' } },
          { name: 'extract_document', arguments: { path: 'picked-notes.md' } },
        ],
      },
      { text: 'Both attachments are read.' },
    ],
  };
  const page = await openPage(context, env.pageUrl, config(scenario), session);
  const workspaceHas = (name) => page.waitForFunction((n) => [...document.querySelectorAll('#workspace li')]
    .some((li) => li.textContent.includes(n)), name, { timeout: 10_000 });

  // A synthetic drop of a File on the conversation, as a person's drag would.
  const drop = (name, text) => page.evaluate(([n, t]) => {
    const data = new DataTransfer();
    data.items.add(new File([t], n, { type: 'text/plain' }));
    const target = document.getElementById('conversation');
    for (const type of ['dragenter', 'dragover', 'drop']) {
      target.dispatchEvent(new DragEvent(type, { dataTransfer: data, bubbles: true, cancelable: true }));
    }
  }, [name, text]);
  await drop('dropped-notes.txt', 'Dropped by the person: 42 apples.\n');
  await workspaceHas('dropped-notes.txt');
  assert.match(await page.locator('#attach-status').textContent(), /dropped-notes\.txt/);

  await page.setInputFiles('#attach-input', { name: 'picked-notes.md', mimeType: 'text/markdown', buffer: Buffer.from('# Picked\n\nChosen in the file picker.\n') });
  await workspaceHas('picked-notes.md');
  assert.match(await page.locator('#attach-status').textContent(), /picked-notes\.md/);

  // The same name again: already_exists, shown with its code; nothing changes.
  const before = await page.locator('#workspace').textContent();
  await page.setInputFiles('#attach-input', { name: 'picked-notes.md', mimeType: 'text/markdown', buffer: Buffer.from('other') });
  await page.waitForSelector('#chat-error:not([hidden])', { timeout: 10_000 });
  assert.match(await page.locator('#chat-error').textContent(), /^picked-notes\.md: .*\(already_exists\)$/);
  // A name the path gate refuses: invalid_argument, nothing stored.
  await drop('../escape.txt', 'x');
  await page.waitForFunction(() => /\(invalid_argument\)/.test(document.getElementById('chat-error').textContent), null, { timeout: 10_000 });
  assert.match(await page.locator('#chat-error').textContent(), /^\.\.\/escape\.txt: .*\(invalid_argument\)$/);
  assert.equal(await page.locator('#workspace').textContent(), before, 'the refused files changed nothing');
  const files = await page.evaluate(async (s) => (await window.agentrtDemo.runtime.listWorkspace(s)).map((f) => f.path).sort(), session);
  assert.deepEqual(files, ['dropped-notes.txt', 'picked-notes.md']);

  await send(page, 'Read my attachments.');
  await waitStatus(page, 'completed');
  assert.equal(await page.locator('#chat-error').isHidden(), true, 'a new message clears the error line');
  const view = await page.evaluate(async () => window.agentrtDemo.runtime.readRun(window.agentrtDemo.runId));
  const reads = view.journal.filter((j) => j.tool === 'extract_document');
  assert.equal(reads.length, 2);
  for (const j of reads) {
    assert.equal(j.state, 'committed');
    assert.ok(j.target_summary, 'extract_document journals a target summary');
  }
  assert.deepEqual(view.evidence.filter((e) => e.tool === 'extract_document').map((e) => e.trust), ['external_untrusted', 'external_untrusted']);

  // The run card: each call with its target summary and evidence trust.
  const rows = await page.locator('#tools tr[data-tool="extract_document"]').evaluateAll((trs) => trs.map((tr) => ({
    state: tr.dataset.state, trust: tr.dataset.trust, target: tr.children[4].textContent, evidence: tr.children[5].textContent,
  })));
  assert.deepEqual(rows.map((r) => r.target), reads.map((j) => j.target_summary));
  for (const r of rows) {
    assert.equal(r.state, 'committed');
    assert.equal(r.trust, 'external_untrusted');
    assert.match(r.evidence, /^external_untrusted · /);
  }
  // The turn in the conversation: its calls folded under the answer.
  const turn = page.locator('#conversation > li.agent').last();
  assert.match(await turn.locator('.msg-text').textContent(), /Both attachments are read\./);
  const details = turn.locator('details.turn-tools');
  assert.match(await details.locator('summary').textContent(), /^2 tool calls \(committed\)$/);
  assert.equal(await details.evaluate((d) => d.open), false, 'folded until opened');
  await details.locator('summary').click();
  const calls = await details.locator('li.tool-call').evaluateAll((lis) => lis.map((li) => ({
    tool: li.dataset.tool, state: li.dataset.state, target: li.querySelector('.tool-target')?.textContent,
    evidence: li.querySelector('.tool-evidence')?.textContent,
  })));
  assert.deepEqual(calls.map((c) => [c.tool, c.state]), [['extract_document', 'committed'], ['extract_document', 'committed']]);
  for (const [i, c] of calls.entries()) {
    assert.equal(c.target, `Target: ${reads[i].target_summary}`);
    assert.match(c.evidence, /^Evidence: external_untrusted · /);
  }
  assert.deepEqual(page.errors, []);
  await context.close();
});

/** What sticks out of its panel, message or the page itself (empty when nothing does). */
async function overflowing(page) {
  return page.evaluate(() => {
    const found = [];
    const root = document.documentElement;
    if (root.scrollWidth > root.clientWidth + 1) found.push(`page: ${root.scrollWidth} > ${root.clientWidth}`);
    const name = (n) => `${n.tagName.toLowerCase()}${n.id ? `#${n.id}` : ''}${n.className && typeof n.className === 'string' ? `.${n.className.split(' ').join('.')}` : ''}`;
    for (const box of document.querySelectorAll('.panel, .msg')) {
      if (box.scrollWidth > box.clientWidth + 1) found.push(`${name(box)}: scrollWidth ${box.scrollWidth} > clientWidth ${box.clientWidth}`);
    }
    for (const panel of document.querySelectorAll('.panel')) {
      const edge = panel.getBoundingClientRect();
      for (const node of panel.querySelectorAll('*')) {
        const rect = node.getBoundingClientRect();
        if (rect.width === 0 || rect.height === 0) continue;
        // Content of a box that scrolls (code, the tools table) stays inside that box.
        let clipped = false;
        for (let up = node.parentElement; up && up !== panel; up = up.parentElement) {
          if (getComputedStyle(up).overflowX !== 'visible') { clipped = true; break; }
        }
        if (clipped) continue;
        if (rect.left < edge.left - 1 || rect.right > edge.right + 1) {
          found.push(`${name(node)} in ${name(panel)}: [${Math.round(rect.left)}, ${Math.round(rect.right)}] outside [${Math.round(edge.left)}, ${Math.round(edge.right)}]`);
        }
      }
    }
    return found;
  });
}

test('layout: at 1280 px and at 390 px nothing overflows its panel (long URL, long file name, code block, wide table); screenshots saved', async () => {
  const context = await env.browser.newContext({ viewport: { width: 1280, height: 800 } });
  const session = uniqueSession('layout');
  const longUrl = `https://example.org/${'a-very-long-path-segment-'.repeat(12)}end?query=${'x'.repeat(80)}`;
  const answer = [
    `Here is the page: ${longUrl}`,
    '```js',
    `const aVeryLongLineOfCode = [${Array.from({ length: 40 }, (_, i) => `'item-${i}'`).join(', ')}];`,
    '```',
    '| column one | column two | column three | column four | column five | column six | column seven | column eight |',
    '|---|---|---|---|---|---|---|---|',
    `| ${'wide-cell-content '.repeat(3)}| b | c | d | e | f | g | h |`,
  ].join('\n');
  const longName = `${'quarterly-report-with-a-long-descriptive-name-'.repeat(2)}final.txt`;
  const scenario = {
    turns: [
      { text: 'Reading it.', tool_calls: [{ name: 'extract_document', arguments: { path: longName } }] },
      { text: answer },
    ],
  };
  const page = await openPage(context, env.pageUrl, config(scenario), session);
  await page.setInputFiles('#attach-input', { name: longName, mimeType: 'text/plain', buffer: Buffer.from(`See ${longUrl}\n`) });
  await page.waitForFunction((n) => document.getElementById('workspace').textContent.includes(n), longName, { timeout: 10_000 });
  await send(page, `Summarise ${longName} and ${longUrl}`);
  await waitStatus(page, 'completed');
  await waitMessages(page, 2);
  await page.locator('#conversation details.turn-tools summary').click();
  assert.equal(await page.locator('#conversation pre.code').count(), 1, 'the fenced code is a code block');

  const wide = join(RESULTS, 'demo-chat-1280.png');
  await page.screenshot({ path: wide, fullPage: true });
  console.log(`screenshot: ${wide}`);
  assert.deepEqual(await overflowing(page), [], 'nothing overflows at 1280 px');

  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForFunction(() => document.documentElement.clientWidth <= 390);
  const phone = join(RESULTS, 'demo-chat-390.png');
  await page.screenshot({ path: phone, fullPage: true });
  console.log(`screenshot: ${phone}`);
  assert.deepEqual(await overflowing(page), [], 'nothing overflows at 390 px');
  // The code block scrolls inside its own box rather than widening the message.
  const code = await page.locator('#conversation pre.code').evaluate((pre) => ({ scroll: pre.scrollWidth, client: pre.clientWidth }));
  assert.ok(code.scroll > code.client, `the long code line scrolls inside its block (${code.scroll} > ${code.client})`);
  assert.deepEqual(page.errors, []);
  await context.close();
});

test('S6 + S12: the running turn shows its streamed text before it has an answer; the run card shows the plan and the pending approval with its target summary', async () => {
  const context = await env.browser.newContext();
  const session = uniqueSession('stream');
  const scenario = {
    turns: [
      {
        text: 'Planning, then emptying the trash.',
        tool_calls: [
          { name: 'update_plan', arguments: { steps: [{ title: 'Empty the trash', status: 'in_progress' }, { title: 'Report', status: 'pending' }] } },
          { name: 'workspace_empty_trash', arguments: {} },
        ],
      },
      { text: 'The trash is empty.' },
    ],
  };
  const page = await openPage(context, env.pageUrl, config(scenario), session);
  await send(page, 'Empty the trash.');
  await page.waitForSelector('#approval[open]', { timeout: 20_000 });
  await waitStatus(page, 'awaiting_approval');
  const agent = page.locator('#conversation > li.agent');
  // No answer yet: the words shown came only from the run's "text" events.
  assert.equal(await page.evaluate(async () => (await window.agentrtDemo.runtime.readRun(window.agentrtDemo.runId)).output ?? null), null);
  assert.match(await agent.locator('.msg-text').textContent(), /Planning, then emptying the trash\./);
  assert.equal(await agent.locator('.msg-status').textContent(), 'Now: awaiting_approval');
  const plan = await page.locator('#plan li').evaluateAll((lis) => lis.map((li) => [li.querySelector('.step-title').textContent, li.dataset.status]));
  assert.deepEqual(plan, [['Empty the trash', 'in_progress'], ['Report', 'pending']]);
  const pending = page.locator('#pending li[data-kind="approval"]');
  assert.equal(await pending.count(), 1);
  assert.match(await pending.textContent(), /^Approval of workspace_empty_trash/);
  assert.equal(await pending.locator('.tool-target').textContent(), `Target: ${await page.locator('#approval-target').textContent()}`);
  await page.click('#approve');
  await waitStatus(page, 'completed');
  await waitMessages(page, 2);
  assert.equal(await agent.locator('.msg-text').textContent(), 'The trash is empty.', 'the answer replaces the streamed words');
  assert.equal(await page.locator('#pending li[data-kind]').count(), 0);
  assert.deepEqual(page.errors, []);
  await context.close();
});
