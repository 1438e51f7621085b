// Proof that the type check can fail: each change below is made to a copy of
// the generated values (as a change on the Rust side would make it), and
// `tsc --strict` must then reject the copy with the expected error. Also:
// example.ts uses every method and getter the generated `AgentRuntime`
// declares, so a new one is not left unchecked. Run by `cargo xtask test`
// after the check of the unchanged values passed.
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const generated = join(here, 'generated');
const values = readFileSync(join(generated, 'values.ts'), 'utf8');
const tsc = join(here, 'node_modules', 'typescript', 'bin', 'tsc');

// [what the Rust side did, the edit, the tsc error that must follow]
const changes = [
  ['a field removed (AgentRun.next_activity)', (v) => v.replace(/\n\s*"next_activity": \d+,/, ''), 'TS2741'],
  ['a field renamed (JournalRecord.target_summary)', (v) => v.replace('"target_summary":', '"target_summry":'), 'TS2353'],
  ['a field added (FileEntry.owner)', (v) => v.replace('"revision":', '"owner": "x",\n  "revision":'), 'TS2353'],
  ['a variant renamed (ActivityKind tool_call)', (v) => v.replace('"kind": "tool_call"', '"kind": "tool_called"'), 'TS2820'],
  ['a new error code (ErrorCode::as_str)', (v) => v.replace('"unavailable": true', '"unavailable": true, "rate_limited": true'), 'TS2353'],
  ['an error code no longer produced', (v) => v.replace(/\n\s*"run_busy": true,/, ''), 'TS2741'],
  ['an Option serialized as null, not left out (RunView.output)', (v) => v.replace(/"output": "[^"]*"/, '"output": null'), 'TS2322'],
];

let failed = 0;

const dts = readFileSync(join(here, '..', 'pkg', 'agent_host_browser.d.ts'), 'utf8');
const klass = dts.match(/export class AgentRuntime \{([\s\S]*?)\n\}/);
const example = readFileSync(join(here, 'example.ts'), 'utf8');
const members = klass ? [...klass[1].matchAll(/^ {4}(?:static |get |readonly )?([a-zA-Z]\w*)\s*[(:]/gm)].map((m) => m[1]) : [];
const unused = members.filter((m) => m !== 'free' && !new RegExp(`\\.${m}\\b`).test(example));
if (members.length < 20 || unused.length > 0) {
  console.error(`FAIL example.ts does not use every AgentRuntime member: ${unused.join(', ') || `only ${members.length} found`}`);
  failed++;
} else {
  console.log(`ok   example.ts uses all ${members.length - 1} members of AgentRuntime (free aside)`);
}
for (const [what, edit, code] of changes) {
  const changed = edit(values);
  if (changed === values) {
    console.error(`FAIL ${what}: the generated values have nothing to change`);
    failed++;
    continue;
  }
  writeFileSync(join(generated, 'changed.ts'), changed);
  writeFileSync(join(generated, 'tsconfig.changed.json'), JSON.stringify({
    extends: '../tsconfig.json',
    files: ['../../pkg/agent_host_browser.d.ts', 'changed.ts'],
  }));
  let output = '';
  let rejected = false;
  try {
    execFileSync('node', [tsc, '--strict', '--noEmit', '-p', join(generated, 'tsconfig.changed.json')], { encoding: 'utf8' });
  } catch (e) {
    rejected = true;
    output = `${e.stdout ?? ''}${e.stderr ?? ''}`;
  }
  if (rejected && output.includes(code)) {
    console.log(`ok   ${what}: tsc rejects it (${code})`);
  } else {
    console.error(`FAIL ${what}: tsc ${rejected ? `failed without ${code}:\n${output}` : 'accepted it'}`);
    failed++;
  }
}
rmSync(join(generated, 'changed.ts'), { force: true });
rmSync(join(generated, 'tsconfig.changed.json'), { force: true });
if (failed > 0) {
  console.error(`${failed} of ${changes.length} changes were not caught by the type check`);
  process.exit(1);
}
console.log(`all ${changes.length} changes fail the type check`);
