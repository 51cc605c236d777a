// Everyday commands started with no scheduler running (issue 20): `routine list`, `lock run --
// true`, `lock status` and `validate` against `node -e 0`, in projects of 100 and 1 000
// routines (half of them in a time zone). Each command's first run after the config changed
// validates it and leaves the cache that later runs start from (src/cli/cached-config.ts); both
// are shown: "cached" is the everyday case, "validating" (ROUTINELY_LIST_CACHE=0) the first run.
// `exec status` stands for the commands that load the whole command-line program
// (dist/cli-program.cjs, compiled from its code cache): it has no cached path.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { benchEnv, fmt, measureBatch, median, table } from './lib.mjs';

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
  { name: 'exec status', args: ['exec', 'status'], target: {}, programOnly: true },
];

export async function coldStart({ rounds = 8, batch = 5 } = {}) {
  const results = {};
  for (const n of [100, 1000]) {
    const dir = project(n);
    const full = benchEnv({ ROUTINELY_LIST_CACHE: '0' });
    for (const c of COMMANDS)
      spawnSync(process.execPath, [cli, ...c.args], { cwd: dir, env: benchEnv(), stdio: 'ignore' }); // leaves the cache
    const runs = { node: [] };
    const variants = (c) => (c.programOnly ? [c.name] : [c.name, `${c.name} (validating)`]);
    for (const c of COMMANDS) for (const k of variants(c)) runs[k] = [];
    // each figure is one of `rounds` batches of `batch` runs in a row (CPU time is counted in
    // 10 ms ticks: a batch makes it exact to 2 ms a run), the commands interleaved batch by batch
    for (let i = 0; i < rounds; i++) {
      runs.node.push(measureBatch(process.execPath, ['-e', '0'], {}, batch));
      for (const c of COMMANDS) {
        runs[c.name].push(measureBatch(process.execPath, [cli, ...c.args], { cwd: dir }, batch));
        if (c.programOnly) continue;
        runs[`${c.name} (validating)`].push(
          measureBatch(process.execPath, [cli, ...c.args], { cwd: dir, env: full }, batch),
        );
      }
    }
    rmSync(dir, { recursive: true, force: true });
    const cpu = (k) => median(runs[k].map((r) => r.cpuMs));
    const wall = (k) => median(runs[k].map((r) => r.wallMs));
    const node = { cpu: cpu('node'), wall: wall('node') };
    const rows = [['node -e 0', fmt(node.cpu), '1.00x', fmt(node.wall), '1.00x', '']];
    for (const c of COMMANDS) {
      for (const k of variants(c)) {
        const r = { cpu: cpu(k), wall: wall(k) };
        const cached = k === c.name && !c.programOnly;
        rows.push([
          cached ? `${k} (cached)` : c.programOnly ? `${k} (the program)` : k,
          fmt(r.cpu),
          `${fmt(r.cpu / node.cpu, 2)}x`,
          fmt(r.wall),
          `${fmt(r.wall / node.wall, 2)}x`,
          cached && c.target[n] ? `<= ${c.target[n]}x` : '',
        ]);
        results[`${n}:${k}`] = { ...r, node };
      }
    }
    table(
      `Cold start with ${n} routines, no scheduler running (median of ${rounds} batches of ${batch} runs, ms a run): CPU (user + system) and wall`,
      ['command', 'CPU ms', 'CPU ratio', 'wall ms', 'wall ratio', 'target'],
      rows,
    );
  }
  return results;
}

if (import.meta.url === `file://${process.argv[1]}`) await coldStart();
