// Sessions are conversations, in Chromium (issue 14 item 1, SPEC S12): the
// runtime in a page talks to a loopback OpenAI-compatible server, which
// records what each request carries. A third turn carries the first two
// turns' prompts and answers; an embedder's `history` is used verbatim (with
// its own `system` and `systemExtension`); a chat turn has no tools and no
// Agent system prompt; a turn stopped mid-stream enters
// the next request as the supervisor defines it (the prompt, then the
// assistant's note that the person stopped it).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { setup, uniqueSession } from './helpers.mjs';
import { conversationOf, startOpenAiServer } from './openai_server.mjs';

let env;
let model;
let page;
before(async () => {
  env = await setup();
  model = await startOpenAiServer();
  const context = await env.browser.newContext();
  page = await context.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(String(e)));
  // A page of the page server's origin that is not the demo: the test
  // drives the package's API itself.
  await page.goto(`${env.pageUrl}/e2e-blank`);
  await page.evaluate(async (baseUrl) => {
    const pkg = await import('/pkg/agent_host_browser.js');
    await pkg.default();
    window.rt = await pkg.AgentRuntime.create({
      storage: 'memory',
      model: { provider: 'openai', baseUrl, model: 'e2e-model' },
    });
    window.texts = {};
    window.runUntil = async (runId, statuses) => {
      for (let i = 0; i < 400; i += 1) {
        const view = await window.rt.readRun(runId);
        if (statuses.includes(view.run.status)) return view;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`run ${runId} never reached ${statuses}`);
    };
    window.turn = async (session, prompt, options) => {
      const runId = await window.rt.startRun(session, prompt, options);
      return window.runUntil(runId, ['completed', 'failed', 'cancelled']);
    };
  }, model.baseUrl);
});
after(async () => { await model?.close(); await env?.close(); });

async function turn(session, prompt, options = undefined) {
  return page.evaluate(([s, p, o]) => window.turn(s, p, o ?? undefined), [session, prompt, options ?? null]);
}

test('S12: the third turn of a session carries the first two turns', async () => {
  const session = uniqueSession('three-turns');
  const first = model.requests.length;
  model.reply({ text: 'Answer one.' }, { text: 'Answer two.' }, { text: 'Answer three.' });
  for (const [prompt, answer] of [['First?', 'Answer one.'], ['Second?', 'Answer two.'], ['Third?', 'Answer three.']]) {
    const view = await turn(session, prompt);
    assert.equal(view.run.status, 'completed', JSON.stringify(view.run));
    assert.equal(view.output, answer);
  }
  const [one, two, three] = model.requests.slice(first);
  assert.deepEqual(conversationOf(one), [{ role: 'user', content: 'First?' }]);
  assert.deepEqual(conversationOf(two), [
    { role: 'user', content: 'First?' }, { role: 'assistant', content: 'Answer one.' },
    { role: 'user', content: 'Second?' },
  ]);
  assert.deepEqual(conversationOf(three), [
    { role: 'user', content: 'First?' }, { role: 'assistant', content: 'Answer one.' },
    { role: 'user', content: 'Second?' }, { role: 'assistant', content: 'Answer two.' },
    { role: 'user', content: 'Third?' },
  ]);
  // An Agent run is sent the default Agent system prompt and its tools.
  assert.equal(three.messages[0].role, 'system');
  assert.match(three.messages[0].content, /^You are an agent working for one person/);
  assert.ok(three.tools?.length > 0, 'an Agent run offers tools');
  assert.equal(three.model, 'e2e-model');
});

test('S12: an embedder-supplied history is used verbatim, with its own system prompt and extension', async () => {
  const session = uniqueSession('history');
  const first = model.requests.length;
  model.reply({ text: 'Session answer.' }, { text: 'History answer.' });
  // The session has a conversation of its own, which `history` replaces.
  await turn(session, 'Session question?');
  const history = [
    { role: 'user', content: 'What is the capital of France?' },
    { role: 'assistant', content: 'Paris.' },
    { role: 'user', content: 'And of Italy?' },
    { role: 'assistant', content: 'Rome.' },
  ];
  const view = await turn(session, 'And of Spain?', {
    history, system: 'You are terse.', systemExtension: 'Answer in one word.',
  });
  assert.equal(view.run.status, 'completed', JSON.stringify(view.run));
  const request = model.requests[first + 1];
  assert.deepEqual(conversationOf(request), [...history, { role: 'user', content: 'And of Spain?' }]);
  assert.deepEqual(request.messages[0], { role: 'system', content: 'You are terse.\n\nAnswer in one word.' });
  assert.equal(request.messages.filter((m) => m.role === 'system').length, 1);
  assert.ok(!JSON.stringify(request).includes('Session question?'), 'the session conversation is not sent');

  // A bad history is refused with invalid_argument and sends nothing.
  const before = model.requests.length;
  const refused = await page.evaluate(async (s) => {
    try {
      await window.rt.startRun(s, 'x', { history: [{ role: 'system', content: 'obey' }] });
      return 'started';
    } catch (e) { return e.code; }
  }, session);
  assert.equal(refused, 'invalid_argument');
  assert.equal(model.requests.length, before);
});

test('S9.1: a chat turn offers no tools and no Agent system prompt, and joins the conversation', async () => {
  const session = uniqueSession('chat');
  const first = model.requests.length;
  model.reply({ text: 'Hello there.' }, { text: 'Still here.' });
  const chat = await turn(session, 'Hi?', { mode: 'chat' });
  assert.equal(chat.run.status, 'completed', JSON.stringify(chat.run));
  assert.equal(chat.run.mode, 'chat');
  const request = model.requests[first];
  assert.equal(request.tools, undefined, 'a chat run offers no tools');
  assert.deepEqual(request.messages, [{ role: 'user', content: 'Hi?' }], 'no system prompt');
  // The next turn (an Agent one) carries the chat turn.
  await turn(session, 'Again?');
  assert.deepEqual(conversationOf(model.requests[first + 1]), [
    { role: 'user', content: 'Hi?' }, { role: 'assistant', content: 'Hello there.' },
    { role: 'user', content: 'Again?' },
  ]);
});

// Issue 37 part 6: the text streamed before the Stop is kept with the turn
// (marked incomplete) and sent on, followed by the note of how it ended.
test('S12: a turn stopped mid-stream enters the next request as the prompt, its partial answer and the note that the person stopped it', async () => {
  const session = uniqueSession('stopped');
  const first = model.requests.length;
  model.reply({ hang: 'Partial wor' }, { text: 'After the stop.' });
  const runId = await page.evaluate(async (s) => {
    window.streamed = '';
    window.sub = window.rt.subscribe(s, (e) => { if (e.type === 'text') window.streamed += e.text; });
    return window.rt.startRun(s, 'Stop me?');
  }, session);
  await model.waitForRequests(first + 1);
  // The person sees the partial answer stream in, then stops the run.
  await page.waitForFunction(() => window.streamed === 'Partial wor', null, { timeout: 20_000 });
  const stopped = await page.evaluate(async (id) => {
    await window.rt.stop(id);
    window.sub.close();
    return window.runUntil(id, ['cancelled']);
  }, runId);
  assert.equal(stopped.run.stop_reason.reason, 'user_stopped', JSON.stringify(stopped.run));

  const next = await turn(session, 'After stop?');
  assert.equal(next.run.status, 'completed', JSON.stringify(next.run));
  assert.equal(model.requests.length, first + 2);
  assert.deepEqual(conversationOf(model.requests[first + 1]), [
    { role: 'user', content: 'Stop me?' },
    { role: 'assistant', content: 'Partial wor\n\n[This turn ended before its answer: the person stopped it.]' },
    { role: 'user', content: 'After stop?' },
  ]);
  assert.deepEqual(page.errors, []);
});
