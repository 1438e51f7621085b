// Loopback servers for the demo and the e2e tests: the page (host-browser/www
// at /, host-browser/pkg at /pkg/) and a counting server whose POST /writes
// records every non-idempotent write it receives. Only 127.0.0.1.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { createInterface } from 'node:readline';
import { readFile } from 'node:fs/promises';
import { dirname, extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const WWW = join(here, '..', 'www');
const PKG = join(here, '..', 'pkg');
const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8', '.json': 'application/json', '.wasm': 'application/wasm',
  '.ts': 'text/plain; charset=utf-8', '.png': 'image/png',
};

function listen(server, port = 0) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(`http://127.0.0.1:${server.address().port}`));
  });
}

/** Serve the demo page; resolves with { url, close }. */
export async function startPageServer(port = 0) {
  const server = createServer(async (req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    const [base, rel] = path.startsWith('/pkg/') ? [PKG, path.slice(5)] : [WWW, path === '/' ? 'index.html' : path.slice(1)];
    const file = normalize(join(base, rel));
    if (!file.startsWith(base + sep)) { res.writeHead(403).end(); return; }
    try {
      const body = await readFile(file);
      res.writeHead(200, { 'content-type': TYPES[extname(file)] || 'application/octet-stream', 'cache-control': 'no-store' });
      res.end(body);
    } catch {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
    }
  });
  const url = await listen(server, port);
  return { url, close: () => new Promise((r) => server.close(r)) };
}

/** A counting server: POST /writes counts and answers { ok, count }. */
export async function startCountingServer() {
  let count = 0;
  let delayMs = 0;
  const bodies = [];
  const cors = (req) => ({
    'access-control-allow-origin': req.headers.origin || '*',
    'access-control-allow-methods': 'GET, POST, OPTIONS',
    'access-control-allow-headers': req.headers['access-control-request-headers'] || 'content-type',
    'access-control-max-age': '600',
  });
  const server = createServer((req, res) => {
    if (req.method === 'OPTIONS') { res.writeHead(204, cors(req)).end(); return; }
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      if (req.method === 'POST' && req.url.startsWith('/writes')) {
        count += 1;
        bodies.push({ body, key: req.headers['idempotency-key'] || null });
        const answer = () => {
          res.writeHead(200, { ...cors(req), 'content-type': 'application/json' });
          res.end(JSON.stringify({ ok: true, count }));
        };
        // The write counts on arrival; a delay keeps its answer in flight.
        if (delayMs > 0) setTimeout(answer, delayMs); else answer();
        return;
      }
      res.writeHead(404, cors(req)).end();
    });
  });
  const url = await listen(server);
  return {
    url, count: () => count, bodies, setDelay: (ms) => { delayMs = ms; },
    close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(r); }),
  };
}

/**
 * The real `agentrt serve` on a free 127.0.0.1 port: the page (www at /, the
 * bundle at /pkg/) and the fetch gateway on one origin. The binary is
 * $AGENTRT_BIN, else the debug build, brought up to date by `cargo build`
 * (a no-op when fresh). Resolves with { url, token, pageUrl, close }.
 */
/**
 * `agentrt serve` on loopback; `globalArgs` go before the subcommand
 * (`--config FILE`), `serveArgs` after it (`--allow-origin ORIGIN`).
 */
export async function startAgentrt(globalArgs = [], serveArgs = []) {
  const root = join(here, '..', '..');
  let bin = process.env.AGENTRT_BIN;
  if (!bin) {
    execFileSync(process.env.CARGO || 'cargo', ['build', '-q', '-p', 'agent-host-native', '--bin', 'agentrt'],
      { cwd: root, stdio: 'inherit' });
    bin = join(process.env.CARGO_TARGET_DIR || join(root, 'target'), 'debug', 'agentrt');
  }
  const data = mkdtempSync(join(tmpdir(), 'agentrt-e2e-'));
  const child = spawn(bin, ['--json', ...globalArgs, 'serve', '--port', '0', '--www', WWW, '--pkg', PKG, ...serveArgs], {
    env: { ...process.env, AGENTRT_DATA_DIR: data }, stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout });
  const listening = await new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`agentrt serve exited with ${code} before listening`)));
    lines.once('line', (line) => resolve(JSON.parse(line)));
  });
  return {
    url: listening.url, token: listening.token, pageUrl: listening.page,
    close: () => new Promise((r) => {
      const done = () => { rmSync(data, { recursive: true, force: true }); r(); };
      if (child.exitCode !== null || child.signalCode !== null) { done(); return; }
      child.once('exit', done);
      child.kill();
    }),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const port = Number(process.env.PORT || process.argv[2] || 8788);
  const { url } = await startPageServer(port);
  console.log(`demo page: ${url}/  (Ctrl-C to stop)`);
}
