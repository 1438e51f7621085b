// Loopback model servers for the e2e tests, one per wire format the runtime
// speaks: OpenAI-compatible Chat Completions, Gemini `streamGenerateContent`
// (SSE, `alt=sse`) and Anthropic Messages (named SSE events). Each streams
// its format's exact events (built from the providers' published streaming
// examples), the whole body cut into pieces of a few bytes written one by
// one, so events, JSON keys and UTF-8 characters arrive split at odd byte
// boundaries. Each records every request (path, headers, JSON body), answers
// CORS preflights for the page's origin, and can refuse (any HTTP status) or
// break off a stream after some events (a mid-stream disconnect).
// The OpenAI-compatible server of conversation.test.mjs (./openai_server.mjs)
// stays as it is: its tests read its own reply shapes. Only 127.0.0.1.
import { createServer } from 'node:http';

/** Bytes per written piece of a streamed body: odd, so pieces end mid-event, mid-key and mid-character. */
const PIECE_BYTES = 7;

const sse = (data) => `data: ${JSON.stringify(data)}\n\n`;
const named = (data) => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`;

/**
 * The three formats. Each turns a reply — `{ text?, calls?: [{ name, args,
 * fragments? }], finish?, usage: { input, output } }` — into its SSE events;
 * `fragments` are the pieces the call's arguments are streamed in (formats
 * that stream arguments), `finish` a finish reason in the format's own words
 * (default: the format's "stop" or "tool calls").
 */
export const FORMATS = {
  openai: {
    basePath: '/v1',
    matches: (req) => req.method === 'POST' && req.url === '/v1/chat/completions',
    keyHeader: 'authorization',
    events(reply, n) {
      const chunk = (delta, finish = null) => sse({
        id: `chatcmpl-${n}`, object: 'chat.completion.chunk', created: 1_700_000_000, model: 'e2e-model',
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      });
      const events = [chunk({ role: 'assistant', content: '' })];
      if (reply.reasoning) for (const piece of halves(reply.reasoning.text)) events.push(chunk({ reasoning_content: piece }));
      if (reply.text) for (const piece of halves(reply.text)) events.push(chunk({ content: piece }));
      (reply.calls ?? []).forEach((call, index) => {
        const fragments = call.fragments ?? [JSON.stringify(call.args)];
        events.push(chunk({ tool_calls: [{ index, id: `call_${n}_${index}`, type: 'function', function: { name: call.name, arguments: '' } }] }));
        for (const f of fragments) events.push(chunk({ tool_calls: [{ index, function: { arguments: f } }] }));
      });
      events.push(chunk({}, reply.finish ?? (reply.calls ? 'tool_calls' : 'stop')));
      events.push(sse({
        id: `chatcmpl-${n}`, object: 'chat.completion.chunk', created: 1_700_000_000, model: 'e2e-model', choices: [],
        usage: { prompt_tokens: reply.usage.input, completion_tokens: reply.usage.output, total_tokens: reply.usage.input + reply.usage.output,
          ...(reply.usage.reasoning ? { completion_tokens_details: { reasoning_tokens: reply.usage.reasoning } } : {}) },
      }));
      events.push('data: [DONE]\n\n');
      return events;
    },
  },
  gemini: {
    basePath: '/v1beta',
    matches: (req) => req.method === 'POST' && /^\/v1beta\/models\/[^/:]+:streamGenerateContent\?alt=sse$/.test(req.url),
    keyHeader: 'x-goog-api-key',
    events(reply, n) {
      const candidate = (parts, finishReason) => ({
        content: { role: 'model', parts }, ...(finishReason ? { finishReason } : {}), index: 0,
      });
      const events = [];
      if (reply.reasoning) {
        for (const piece of halves(reply.reasoning.text)) events.push(sse({ candidates: [candidate([{ text: piece, thought: true }])], modelVersion: 'gemini-e2e' }));
      }
      if (reply.text) {
        for (const piece of halves(reply.text)) events.push(sse({ candidates: [candidate([{ text: piece }])], modelVersion: 'gemini-e2e' }));
      }
      if (reply.calls) {
        // Gemini sends each call whole, several in one chunk.
        events.push(sse({
          candidates: [candidate(reply.calls.map((c, i) => ({ functionCall: { name: c.name, args: c.args, id: `fc-${n}-${i}` } })))],
          modelVersion: 'gemini-e2e',
        }));
      }
      events.push(sse({
        candidates: [candidate([{ text: '' }], reply.finish ?? 'STOP')],
        usageMetadata: { promptTokenCount: reply.usage.input, candidatesTokenCount: reply.usage.output, totalTokenCount: reply.usage.input + reply.usage.output,
          ...(reply.usage.reasoning ? { thoughtsTokenCount: reply.usage.reasoning } : {}) },
        modelVersion: 'gemini-e2e',
      }));
      return events;
    },
  },
  anthropic: {
    basePath: '/v1',
    matches: (req) => req.method === 'POST' && req.url === '/v1/messages',
    keyHeader: 'x-api-key',
    events(reply, n) {
      const events = [
        named({ type: 'message_start', message: { id: `msg_${n}`, type: 'message', role: 'assistant', content: [], model: 'claude-e2e',
          stop_reason: null, stop_sequence: null, usage: { input_tokens: reply.usage.input, output_tokens: 1 } } }),
        named({ type: 'ping' }),
      ];
      let index = 0;
      if (reply.reasoning) {
        events.push(named({ type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '' } }));
        for (const piece of halves(reply.reasoning.text)) events.push(named({ type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: piece } }));
        events.push(named({ type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: reply.reasoning.signature } }));
        events.push(named({ type: 'content_block_stop', index }));
        index += 1;
      }
      if (reply.text) {
        events.push(named({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } }));
        for (const piece of halves(reply.text)) events.push(named({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: piece } }));
        events.push(named({ type: 'content_block_stop', index }));
        index += 1;
      }
      for (const call of reply.calls ?? []) {
        events.push(named({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: `toolu_${n}_${index}`, name: call.name, input: {} } }));
        for (const f of ['', ...(call.fragments ?? [JSON.stringify(call.args)])]) {
          events.push(named({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: f } }));
        }
        events.push(named({ type: 'content_block_stop', index }));
        index += 1;
      }
      events.push(named({ type: 'message_delta', delta: { stop_reason: reply.finish ?? (reply.calls ? 'tool_use' : 'end_turn'), stop_sequence: null },
        usage: { output_tokens: reply.usage.output } }));
      events.push(named({ type: 'message_stop' }));
      return events;
    },
  },
};

/** `text` in two pieces (streamed text deltas). */
function halves(text) {
  const half = Math.ceil(text.length / 2);
  return [text.slice(0, half), text.slice(half)].filter((p) => p !== '');
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Start a server of `format` ("openai", "gemini" or "anthropic") on `port`
 * (0: any free one). Each model
 * request takes the next reply queued with `reply(...)`:
 * a reply as `FORMATS` reads it, plus `cutAfter: k` (write only the first k
 * events, then destroy the connection: a stream broken mid-answer) or
 * `status: code` (answer that HTTP status with a JSON error body).
 * Resolves with { baseUrl, requests, reply, waitForRequests, close };
 * `requests` holds { path, headers, body } of each model request.
 */
export async function startModelServer(format, port = 0) {
  const spec = FORMATS[format];
  const requests = [];
  const queue = [];
  const waiting = [];
  const open = new Set();
  const cors = (req) => ({
    'access-control-allow-origin': req.headers.origin || '*',
    'access-control-allow-methods': 'POST, OPTIONS',
    'access-control-allow-headers': req.headers['access-control-request-headers'] || 'content-type',
    'access-control-max-age': '600',
    vary: 'origin',
  });
  const server = createServer((req, res) => {
    if (req.method === 'OPTIONS') { res.writeHead(204, cors(req)).end(); return; }
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', async () => {
      if (!spec.matches(req)) { res.writeHead(404, cors(req)).end(); return; }
      requests.push({ path: req.url, headers: { ...req.headers }, body: JSON.parse(body) });
      for (const w of waiting.splice(0)) w();
      const reply = queue.shift() ?? { text: 'No reply was queued.', usage: { input: 1, output: 1 } };
      if (reply.status) {
        res.writeHead(reply.status, { ...cors(req), 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { code: reply.status, message: 'refused by the e2e server', type: 'e2e_error' } }));
        return;
      }
      res.writeHead(200, { ...cors(req), 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      open.add(res);
      res.on('close', () => open.delete(res));
      const events = spec.events(reply, requests.length);
      const bytes = Buffer.from(events.slice(0, reply.cutAfter ?? events.length).join(''));
      for (let at = 0; at < bytes.length; at += PIECE_BYTES) {
        if (res.destroyed) return;
        res.write(bytes.subarray(at, at + PIECE_BYTES));
        // A pause, so that the pieces travel (and are read) one by one.
        if ((at / PIECE_BYTES) % 8 === 7) await sleep(1);
      }
      if (reply.cutAfter !== undefined) {
        await sleep(20);
        res.destroy();
        return;
      }
      res.end();
    });
  });
  const origin = await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(`http://127.0.0.1:${server.address().port}`));
  });
  return {
    baseUrl: `${origin}${spec.basePath}`,
    requests,
    reply: (...replies) => { queue.push(...replies); },
    /** Resolves once at least `n` requests have arrived. */
    waitForRequests: (n, timeoutMs = 20_000) => new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`only ${requests.length} of ${n} model requests arrived`)), timeoutMs);
      const check = () => {
        if (requests.length >= n) { clearTimeout(timer); resolve(requests[n - 1]); } else waiting.push(check);
      };
      check();
    }),
    close: () => new Promise((r) => {
      for (const res of open) res.destroy();
      server.closeAllConnections?.();
      server.close(r);
    }),
  };
}

/** A loopback port nothing listens on (bound, then closed): connecting is refused. */
export async function closedPort() {
  const server = createServer();
  const port = await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));
  await new Promise((r) => server.close(r));
  return port;
}
