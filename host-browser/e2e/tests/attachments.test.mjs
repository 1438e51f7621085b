// Attachments in Chromium (issue 14 item 3, S12.3): a person picks a file
// in the page (a real <input type=file>), the page imports it with
// `importFile` into the session's workspace in IndexedDB, and the next run's
// `extract_document` reads it: the loopback model server sees the file's
// text in the tool result, and `readRun` shows the evidence as
// `external_untrusted` content from the attachment.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { setup, uniqueSession } from './helpers.mjs';
import { startOpenAiServer } from './openai_server.mjs';

let env;
let model;
before(async () => {
  env = await setup();
  model = await startOpenAiServer();
});
after(async () => { await model?.close(); await env?.close(); });

const REPORT = '# Quarterly report\n\nThe blue widgets sold 4321 units this quarter.\n';

test('S12.3: a file picked and imported in the page is read by extract_document in the next run', async () => {
  const context = await env.browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${env.pageUrl}/e2e-blank`);
  const session = uniqueSession('attach');
  await page.evaluate(async ([baseUrl, databaseName]) => {
    const pkg = await import('/pkg/agent_host_browser.js');
    await pkg.default();
    window.rt = await pkg.AgentRuntime.create({ databaseName, model: { provider: 'openai', baseUrl, model: 'e2e-model' } });
    const input = document.createElement('input');
    input.type = 'file';
    input.id = 'picker';
    document.body.append(input);
  }, [model.baseUrl, `attach-${Date.now()}`]);
  assert.equal(await page.evaluate(() => window.rt.durable), true, 'IndexedDB');

  // The person picks a file; the page imports the File (a Blob) as is.
  await page.setInputFiles('#picker', { name: 'Q3 report.md', mimeType: 'text/markdown', buffer: Buffer.from(REPORT) });
  const entry = await page.evaluate(async (s) => {
    const file = document.getElementById('picker').files[0];
    return window.rt.importFile(s, 'uploads/q3-report.md', file, file.type, file.name);
  }, session);
  assert.equal(entry.path, 'uploads/q3-report.md');
  assert.deepEqual(entry.source, { kind: 'attachment', name: 'Q3 report.md' });
  assert.equal(entry.mime, 'text/markdown');
  assert.equal(entry.size, Buffer.byteLength(REPORT));
  const listed = await page.evaluate((s) => window.rt.listWorkspace(s), session);
  assert.deepEqual(listed.map((f) => f.path), ['uploads/q3-report.md']);
  const sessions = await page.evaluate(() => window.rt.listSessions());
  assert.deepEqual(sessions.find((x) => x.session === session), { session, runs: 0, files: 1, artifacts: 0 });

  // The next run reads it.
  const first = model.requests.length;
  model.reply(
    { tool_calls: [{ name: 'extract_document', arguments: { path: 'uploads/q3-report.md' } }] },
    { text: 'The blue widgets sold 4321 units.' },
  );
  const view = await page.evaluate(async (s) => {
    const runId = await window.rt.startRun(s, 'How many blue widgets sold?');
    for (let i = 0; i < 400; i += 1) {
      const v = await window.rt.readRun(runId);
      if (!['running'].includes(v.run.status)) return v;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('the run did not end');
  }, session);
  assert.equal(view.run.status, 'completed', JSON.stringify(view.run));
  assert.equal(view.output, 'The blue widgets sold 4321 units.');

  // The model was sent the file's text as the tool's result.
  const second = model.requests[first + 1];
  const toolMessage = second.messages.find((m) => m.role === 'tool');
  assert.ok(toolMessage, JSON.stringify(second.messages));
  assert.match(toolMessage.content, /blue widgets sold 4321 units/);
  assert.match(toolMessage.content, /UNTRUSTED_DATA/, 'marked as data, not instructions');

  // The run card: the call committed, its evidence is external_untrusted.
  const call = view.journal.find((j) => j.tool === 'extract_document');
  assert.equal(call?.state, 'committed', JSON.stringify(view.journal));
  const evidence = view.evidence.find((e) => e.tool === 'extract_document');
  assert.ok(evidence, JSON.stringify(view.evidence));
  assert.equal(evidence.trust, 'external_untrusted');
  assert.equal(evidence.call_id, call.call_id);
  assert.equal(evidence.provenance.tool, 'extract_document');
  assert.equal(evidence.provenance.content_hash, entry.hash, 'the evidence names the imported content');
  assert.deepEqual(evidence.references.map((r) => [r.kind, r.id, r.hash]),
    [['workspace_file', 'uploads/q3-report.md', entry.hash]]);
  assert.deepEqual(errors, []);
  await context.close();
});

/** A one-page PDF 1.4 showing `text`, with exact cross-reference offsets. */
function onePagePdf(text, title) {
  const stream = `BT\n/F1 12 Tf\n72 720 Td\n(${text}) Tj\nET`;
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [5 0 R] /Count 1 >>',
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
    `<< /Title (${title}) >>`,
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 6 0 R /Resources << /Font << /F1 3 0 R >> >> >>',
    `<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`,
  ];
  let out = '%PDF-1.4\n';
  const offsets = [];
  objects.forEach((body, i) => {
    offsets.push(out.length);
    out += `${i + 1} 0 obj\n${body}\nendobj\n`;
  });
  const xref = out.length;
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const offset of offsets) out += `${String(offset).padStart(10, '0')} 00000 n \n`;
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R /Info 4 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, 'latin1');
}

test('issue 18: the Worker module is fetched only when a run first reads a PDF, and the PDF is read in it', async () => {
  const context = await env.browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${env.pageUrl}/e2e-blank`);
  const session = uniqueSession('pdf');
  await page.evaluate(async ([baseUrl, databaseName]) => {
    const pkg = await import('/pkg/agent_host_browser.js');
    await pkg.default();
    window.rt = await pkg.AgentRuntime.create({ databaseName, model: { provider: 'openai', baseUrl, model: 'e2e-model' } });
  }, [model.baseUrl, `pdf-${Date.now()}`]);
  const workerModuleLoaded = () => page.evaluate(() => performance.getEntriesByType('resource')
    .some((r) => r.name.includes('agent_worker_module')));
  assert.equal(await workerModuleLoaded(), false, 'the runtime is ready without the Worker module');

  const pdf = onePagePdf('Red gadgets sold 777 units', 'Gadget report');
  await page.evaluate(async ([s, bytes]) => {
    const blob = new Blob([new Uint8Array(bytes)], { type: 'application/pdf' });
    await window.rt.importFile(s, 'uploads/gadgets.pdf', blob, 'application/pdf', 'gadgets.pdf');
  }, [session, [...pdf]]);
  assert.equal(await workerModuleLoaded(), false, 'importing a file loads no Worker module');

  const first = model.requests.length;
  model.reply(
    { tool_calls: [{ name: 'extract_document', arguments: { path: 'uploads/gadgets.pdf' } }] },
    { text: 'Red gadgets: 777.' },
  );
  const view = await page.evaluate(async (s) => {
    const runId = await window.rt.startRun(s, 'How many red gadgets?');
    for (let i = 0; i < 600; i += 1) {
      const v = await window.rt.readRun(runId);
      if (v.run.status !== 'running') return v;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('the run did not end');
  }, session);
  assert.equal(view.run.status, 'completed', JSON.stringify(view.run));
  const toolMessage = model.requests[first + 1].messages.find((m) => m.role === 'tool');
  assert.match(toolMessage.content, /Red gadgets sold 777 units/, 'the PDF text came back from the Worker');
  assert.equal(await workerModuleLoaded(), true, 'the Worker module was fetched for the PDF');
  assert.deepEqual(errors, []);
  await context.close();
});
