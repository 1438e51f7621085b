// A loopback OpenAI-compatible server for the e2e tests: POST
// /v1/chat/completions answers with a streamed (SSE) Chat Completion and
// records every request body it is sent, so a test reads exactly what the
// runtime in the page asked the model. CORS headers answer the page's origin.
// Only 127.0.0.1.
import { createServer } from 'node:http';

/**
 * Start the server. Each request takes the next reply from the queue given
 * to `reply(...)`: `{ text }` streams `text` in two pieces and finishes;
 * `{ tool_calls: [{ name, arguments }] }` streams those calls and finishes
 * with `tool_calls`;
 * `{ hang: text }` streams `text` and then keeps the response open (a model
 * still answering), until the client goes away or the server closes.
 * Resolves with { baseUrl, requests, reply, waitForRequests, close }.
 */
export async function startOpenAiServer() {
  const requests = [];
  const queue = [];
  const waiting = [];
  const open = new Set();
  const cors = (req) => ({
    'access-control-allow-origin': req.headers.origin || '*',
    'access-control-allow-methods': 'POST, OPTIONS',
    'access-control-allow-headers': req.headers['access-control-request-headers'] || 'content-type, authorization',
    'access-control-max-age': '600',
  });
  const chunk = (delta, finish = null, usage = undefined) => `data: ${JSON.stringify({
    id: 'chatcmpl-e2e', object: 'chat.completion.chunk', model: 'e2e-model',
    choices: [{ index: 0, delta, finish_reason: finish }], ...(usage ? { usage } : {}),
  })}\n\n`;
  const server = createServer((req, res) => {
    if (req.method === 'OPTIONS') { res.writeHead(204, cors(req)).end(); return; }
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        res.writeHead(404, cors(req)).end();
        return;
      }
      requests.push(JSON.parse(body));
      for (const w of waiting.splice(0)) w();
      const next = queue.shift() ?? { text: 'No reply was queued.' };
      res.writeHead(200, { ...cors(req), 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
      open.add(res);
      res.on('close', () => open.delete(res));
      res.write(chunk({ role: 'assistant', content: '' }));
      if (next.hang !== undefined) {
        res.write(chunk({ content: next.hang }));
        return;
      }
      if (next.tool_calls) {
        next.tool_calls.forEach((call, index) => {
          res.write(chunk({ tool_calls: [{ index, id: `call_e2e_${requests.length}_${index}`, type: 'function',
            function: { name: call.name, arguments: JSON.stringify(call.arguments) } }] }));
        });
        res.write(chunk({}, 'tool_calls'));
        res.end('data: [DONE]\n\n');
        return;
      }
      const half = Math.ceil(next.text.length / 2);
      res.write(chunk({ content: next.text.slice(0, half) }));
      res.write(chunk({ content: next.text.slice(half) }));
      res.write(chunk({}, 'stop'));
      res.write(`data: ${JSON.stringify({ id: 'chatcmpl-e2e', object: 'chat.completion.chunk', model: 'e2e-model', choices: [],
        usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } })}\n\n`);
      res.end('data: [DONE]\n\n');
    });
  });
  const baseUrl = await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${server.address().port}/v1`));
  });
  return {
    baseUrl,
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

/** The messages of a recorded request body other than the system prompt, as { role, content }. */
export function conversationOf(body) {
  return body.messages.filter((m) => m.role !== 'system').map((m) => ({ role: m.role, content: m.content }));
}
