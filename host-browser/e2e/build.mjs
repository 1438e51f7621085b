// Build the wasm bundle the page loads: cargo (release, wasm32) then
// `wasm-bindgen --target web` into host-browser/pkg. Prints raw and gzipped sizes.
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
const run = (cmd, args) => execFileSync(cmd, args, { cwd: root, stdio: 'inherit', env });

run('cargo', ['build', ...(demo ? [] : ['--release']), '--target', 'wasm32-unknown-unknown', '-p', 'agent-host-browser',
  '--lib', '--target-dir', targetDir]);
// The name and producers sections only help debuggers: about 1 MiB of the raw size.
run('wasm-bindgen', ['--target', 'web', '--remove-name-section', '--remove-producers-section', '--out-dir', pkg,
  join(targetDir, 'wasm32-unknown-unknown', profile, 'agent_host_browser.wasm')]);
const wasm = join(pkg, 'agent_host_browser_bg.wasm');
const raw = statSync(wasm).size;
const gz = gzipSync(readFileSync(wasm), { level: 9 }).length;
const mib = (n) => (n / 1048576).toFixed(2);
console.log(`wasm bundle: ${wasm}\n  raw ${raw} bytes (${mib(raw)} MiB), gzip -9 ${gz} bytes (${mib(gz)} MiB)`);
