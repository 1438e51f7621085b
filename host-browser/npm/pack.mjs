// The npm package of the browser runtime (issue 14 item 8): the
// `wasm-bindgen --target web` output in host-browser/pkg (built by
// e2e/build.mjs), the AI SDK chat transport
// (`agent-runtime-browser/ai-transport`), a package.json with its types and
// exports, and the embedders' README, packed with `npm pack` into
// target/npm/agent-runtime-browser-<version>.tgz and, under a stable name
// for the example app, target/npm/agent-runtime-browser.tgz.
import { execFileSync } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const pkg = join(root, 'host-browser', 'pkg');
const out = join(root, 'target', 'npm');
const staging = join(out, 'package');
const NAME = 'agent-runtime-browser';
// The page's module, and the Worker module (QuickJS and the PDF reader)
// that the runtime fetches on first use.
const FILES = ['agent_host_browser.js', 'agent_host_browser.d.ts', 'agent_host_browser_bg.wasm',
  'agent_host_browser_bg.wasm.d.ts', 'agent_worker_module.js', 'agent_worker_module_bg.wasm'];

// The AI SDK transport (issue 36 part 6), beside this script: plain
// JavaScript that needs no build, and its types, which import `ai`'s.
const TRANSPORT = ['ai_transport.js', 'ai_transport.d.ts'];

// The version is the workspace's, so the package and the crates never disagree.
const cargo = readFileSync(join(root, 'Cargo.toml'), 'utf8');
const section = cargo.slice(cargo.indexOf('[workspace.package]'));
const version = /^version\s*=\s*"([^"]+)"/m.exec(section)?.[1];
if (!version) throw new Error('no version in [workspace.package] of Cargo.toml');

for (const f of FILES) {
  if (!existsSync(join(pkg, f))) {
    throw new Error(`${join(pkg, f)} is missing: build the bundle first (node host-browser/e2e/build.mjs)`);
  }
}
rmSync(staging, { recursive: true, force: true });
mkdirSync(staging, { recursive: true });
for (const f of FILES) copyFileSync(join(pkg, f), join(staging, f));
for (const f of TRANSPORT) copyFileSync(join(here, f), join(staging, f));
const files = [...FILES, ...TRANSPORT, 'README.md'];
// Inline JavaScript snippets of the crate's dependencies, when there are any.
if (existsSync(join(pkg, 'snippets'))) {
  cpSync(join(pkg, 'snippets'), join(staging, 'snippets'), { recursive: true });
  files.push('snippets/');
}
copyFileSync(join(here, 'README.md'), join(staging, 'README.md'));

const manifest = {
  name: NAME,
  version,
  description: 'The Trusted Agent Runtime in the browser: durable, capability-checked agent runs in a tab (IndexedDB, Web Locks, Workers for run_javascript and PDFs, loaded on first use).',
  license: 'MIT OR Apache-2.0',
  type: 'module',
  main: './agent_host_browser.js',
  types: './agent_host_browser.d.ts',
  exports: {
    '.': { types: './agent_host_browser.d.ts', import: './agent_host_browser.js' },
    './agent_host_browser.js': './agent_host_browser.js',
    './agent_host_browser_bg.wasm': './agent_host_browser_bg.wasm',
    // `AgentRuntimeChatTransport`, a `ChatTransport` of the AI SDK (`ai` 7).
    './ai-transport': { types: './ai_transport.d.ts', import: './ai_transport.js' },
    // The Worker module, by URL (`workerGlueUrl`, `workerWasmUrl`).
    './agent_worker_module.js': './agent_worker_module.js',
    './agent_worker_module_bg.wasm': './agent_worker_module_bg.wasm',
    './package.json': './package.json',
  },
  files,
  // Only the transport's types use `ai`; the runtime needs nothing.
  peerDependencies: { ai: '^7.0.0' },
  peerDependenciesMeta: { ai: { optional: true } },
  sideEffects: false,
};
writeFileSync(join(staging, 'package.json'), JSON.stringify(manifest, null, 2) + '\n');

const packed = execFileSync('npm', ['pack', '--json', '--pack-destination', out], { cwd: staging, encoding: 'utf8' });
const [{ filename, size, unpackedSize }] = JSON.parse(packed);
const tarball = join(out, filename);
copyFileSync(tarball, join(out, `${NAME}.tgz`));
console.log(`npm package: ${tarball}\n  ${size} bytes packed, ${unpackedSize} unpacked; also ${join(out, `${NAME}.tgz`)}`);
