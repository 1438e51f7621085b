// Build the two wasm modules of the browser host: cargo (release, wasm32)
// then `wasm-bindgen --target web` into host-browser/pkg. The page loads
// `agent_host_browser` first; `agent_worker_module` (QuickJS and the PDF
// reader) is fetched and compiled the first time a run needs a Worker
// (issue 18). Prints each one's raw and gzipped size.
//
// `node build.mjs --demo` (what `cargo xtask demo` runs) trades size for
// build time: the workspace's dev profile, in the shared target directory
// where `cargo xtask test` builds the wasm tests (so after the tests little
// is left to build). The bundle is several times larger and its Rust code
// unoptimised (QuickJS's C code keeps opt-level 3, see Cargo.toml); the
// tests and the npm package use the default, size-optimised release build.
import { execFileSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const pkg = join(here, '..', 'pkg');
// Its own target directory: the size settings below would otherwise rebuild
// the shared release artifacts, and it never waits for other builds' locks.
const demo = process.argv.includes('--demo');
const targetDir = join(root, demo ? 'target' : 'target-browser');
const profile = demo ? 'debug' : 'release';
const env = {
  ...process.env,
  // Link-time optimisation and size-oriented code: about a quarter smaller gzipped.
  ...(demo ? {} : { CARGO_PROFILE_RELEASE_LTO: 'true', CARGO_PROFILE_RELEASE_CODEGEN_UNITS: '1', CARGO_PROFILE_RELEASE_OPT_LEVEL: 's' }),
};
// RUSTFLAGS would replace .cargo/config.toml's wasm32 rustflags (TOOLCHAIN.md).
delete env.RUSTFLAGS;
const run = (cmd, args, extra = {}) => execFileSync(cmd, args, { cwd: root, stdio: 'inherit', env: { ...env, ...extra } });
// The first module is built for size ("z": 2.96 -> 2.63 MiB gzip, 11 % less
// to fetch and compile before the page is ready; its rounds wait on
// IndexedDB, not on its code: no difference beyond the noise in
// interleaved runs). The Worker module keeps "s": QuickJS runs scripts.
const optLevel = { 'agent-host-browser': 'z', 'agent-worker-module': 's' };

const mib = (n) => (n / 1048576).toFixed(2);
// One cargo invocation per module: built together, cargo would unify
// agent-tools' features and put QuickJS and the PDF reader back into the
// page's module.
for (const [crate, stem, role] of [
  ['agent-host-browser', 'agent_host_browser', 'the module the page loads first'],
  ['agent-worker-module', 'agent_worker_module', 'the Worker module, loaded on first use'],
]) {
  run('cargo', ['build', ...(demo ? [] : ['--release']), '--target', 'wasm32-unknown-unknown', '-p', crate,
    '--lib', '--target-dir', targetDir], demo ? {} : { CARGO_PROFILE_RELEASE_OPT_LEVEL: optLevel[crate] });
  // The name and producers sections only help debuggers: about 1 MiB of the raw size.
  run('wasm-bindgen', ['--target', 'web', '--remove-name-section', '--remove-producers-section', '--out-dir', pkg,
    join(targetDir, 'wasm32-unknown-unknown', profile, `${stem}.wasm`)]);
  const wasm = join(pkg, `${stem}_bg.wasm`);
  const raw = statSync(wasm).size;
  const gz = gzipSync(readFileSync(wasm), { level: 9 }).length;
  console.log(`wasm bundle (${role}): ${wasm}\n  raw ${raw} bytes (${mib(raw)} MiB), gzip -9 ${gz} bytes (${mib(gz)} MiB)`);
}
