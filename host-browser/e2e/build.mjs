// Build the wasm bundle the page loads: cargo (release, wasm32) then
// `wasm-bindgen --target web` into host-browser/pkg. Prints raw and gzipped sizes.
import { execFileSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const pkg = join(here, '..', 'pkg');
const run = (cmd, args) => execFileSync(cmd, args, { cwd: root, stdio: 'inherit' });

run('cargo', ['build', '--release', '--target', 'wasm32-unknown-unknown', '-p', 'agent-host-browser', '--lib']);
// The name and producers sections only help debuggers: about 1 MiB of the raw size.
run('wasm-bindgen', ['--target', 'web', '--remove-name-section', '--remove-producers-section', '--out-dir', pkg,
  join(root, 'target', 'wasm32-unknown-unknown', 'release', 'agent_host_browser.wasm')]);
const wasm = join(pkg, 'agent_host_browser_bg.wasm');
const raw = statSync(wasm).size;
const gz = gzipSync(readFileSync(wasm), { level: 9 }).length;
const mib = (n) => (n / 1048576).toFixed(2);
console.log(`wasm bundle: ${wasm}\n  raw ${raw} bytes (${mib(raw)} MiB), gzip -9 ${gz} bytes (${mib(gz)} MiB)`);
