// `routine list` from the cache with hundreds of records keeps V8 to its baseline tiers (issue
// 52: TurboFan's compiles, on a thread of their own, cost it 18 % more CPU than they gave back
// at 1 000 records); with a few records it never loads node:v8 for that (≈ 1.4 ms).

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadProject } from '../../src/config/load.js';
import { publishRoutineState } from '../../src/state/file-store.js';
import { fireLine, historyPath } from '../../src/state/history.js';
import { runCli } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';
import { successAt } from '../helpers/state.js';

/** The builtins a cache-answered `routine list` loaded, in a project of `n` routines that each
 * ran once. */
async function listLoads(n: number): Promise<string[]> {
  const dir = testProject({
    routines: Array.from({ length: n }, (_, i) => ({
      id: `r${i}`,
      schedule: '0 0 1 1 *',
      action: 'command',
      run: 'true',
    })),
  });
  const project = loadProject({ cwd: dir });
  mkdirSync(join(project.stateDir, 'history'), { recursive: true, mode: 0o700 });
  const at = new Date().toISOString();
  for (let i = 0; i < n; i++)
    writeFileSync(historyPath(project.stateDir, `r${i}`), `${fireLine(successAt(at))}\n`, { mode: 0o600 });
  await publishRoutineState(project);
  const first = await runCli(['routine', 'list'], { cwd: dir }); // validates, leaves the cache
  expect(first.code, first.stderr).toBe(0);
  const seen = join(dir, 'modules.json');
  const preload = join(dir, 'preload.cjs');
  writeFileSync(
    preload,
    `process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(seen)}, JSON.stringify(process.moduleLoadList)));\n`,
  );
  const r = await runCli(['routine', 'list'], { cwd: dir, env: { NODE_OPTIONS: `--require ${preload}` } });
  expect(r.code, r.stderr).toBe(0);
  expect(r.stdout).toMatch(new RegExp(`r${n - 1}\\s`));
  const loaded = JSON.parse(readFileSync(seen, 'utf8')) as string[];
  return loaded.filter((m) => m.startsWith('NativeModule ')).map((m) => m.slice(13));
}

describe('routine list from the cache: V8 tiers by the size of the index', () => {
  it('300 records: baseline tiers (node:v8 loaded to set them); 5 records: node:v8 not loaded', async () => {
    const big = await listLoads(300);
    expect(big).toContain('fs'); // the list is real
    expect(big).toContain('v8');
    expect(await listLoads(5)).not.toContain('v8');
  }, 60_000);
});
