// Everyday commands started with no scheduler running (issue 20): `routine list`, `lock run --
// true`, `lock status` and `validate` against `node -e 0`, in projects of 100 and 1 000
// routines (half of them in a time zone). Each command's first run after the config changed
// validates it and leaves the cache that later runs start from (src/cli/fast-config.ts); both
// are shown: "cached" is the everyday case, "validating" (ROUTINELY_LIST_CACHE=0) the first run.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { benchEnv, fmt, median, table, timeCommand } from './lib.mjs';

const cli = resolve(import.meta.dirname, '../dist/cli.cjs');

function project(n) {
  const dir = mkdtempSync(join(tmpdir(), 'routinely-bench-cold-'));
  const routines = Array.from({ length: n }, (_, i) => ({
    id: `r${i}`,
    schedule: `${i % 60} ${i % 24} * * *`,
    action: 'command',
    run: 'true',
    ...(i % 2 ? { timezone: 'Europe/Berlin' } : {}),
  }));
  writeFileSync(join(dir, 'routinely.json'), JSON.stringify({ routines }));
  return dir;
}

const COMMANDS = [
  { name: '--version', args: ['--version'], target: { 100: 1.5 } },
  { name: 'routine list', args: ['routine', 'list'], target: { 100: 1.5, 1000: 2 } },
  { name: 'lock run -- true', args: ['lock', 'run', '--', 'true'], target: { 100: 1.5 } },
  { name: 'lock status', args: ['lock', 'status'], target: { 100: 1.5 } },
  { name: 'validate', args: ['validate'], target: { 100: 2 } },
];

export async function coldStart({ rounds = 20 } = {}) {
  const results = {};
  for (const n of [100, 1000]) {
    const dir = project(n);
    const full = benchEnv({ ROUTINELY_LIST_CACHE: '0' });
    for (const c of COMMANDS)
      spawnSync(process.execPath, [cli, ...c.args], { cwd: dir, env: benchEnv(), stdio: 'ignore' }); // leaves the cache
    const times = {
      node: [],
      ...Object.fromEntries(
        COMMANDS.flatMap((c) => [
          [c.name, []],
          [`${c.name} (validating)`, []],
        ]),
      ),
    };
    for (let i = 0; i < rounds; i++) {
      times.node.push(timeCommand(process.execPath, ['-e', '0']));
      for (const c of COMMANDS) {
        times[c.name].push(timeCommand(process.execPath, [cli, ...c.args], { cwd: dir }));
        times[`${c.name} (validating)`].push(timeCommand(process.execPath, [cli, ...c.args], { cwd: dir, env: full }));
      }
    }
    rmSync(dir, { recursive: true, force: true });
    const node = median(times.node);
    const rows = [['node -e 0', fmt(node), '1.00x', '']];
    for (const c of COMMANDS) {
      const cached = median(times[c.name]);
      const validating = median(times[`${c.name} (validating)`]);
      rows.push([
        `${c.name} (cached)`,
        fmt(cached),
        `${fmt(cached / node, 2)}x`,
        c.target[n] ? `<= ${c.target[n]}x` : '',
      ]);
      rows.push([`${c.name} (validating)`, fmt(validating), `${fmt(validating / node, 2)}x`, '']);
      results[`${n}:${c.name}`] = { cached, validating, node };
    }
    table(
      `Cold start with ${n} routines, no scheduler running (median of ${rounds} interleaved runs, ms)`,
      ['command', 'median ms', 'ratio', 'target'],
      rows,
    );
  }
  return results;
}

if (import.meta.url === `file://${process.argv[1]}`) await coldStart();
