// Exec benchmarks (issue 3): 500 trivial tasks with --parallel 4 against xargs -P4 running the
// same commands, and bytes written to state for 100 vs 1000 tasks (must grow linearly).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { execRun, loadProject } from '../dist/index.js';
import { spawnSync } from 'node:child_process';
import { benchEnv, fmt, measureCommand, median, table } from './lib.mjs';

const cli = resolve(import.meta.dirname, '../dist/cli.cjs');

function project(n) {
  const dir = mkdtempSync(join(tmpdir(), 'routinely-bench-exec-'));
  const tasks = Array.from({ length: n }, (_, i) => ({ id: `t${i}`, run: 'true' }));
  writeFileSync(join(dir, 'routinely.json'), JSON.stringify({ exec: { parallel: 4, tasks } }));
  return dir;
}

export async function execBenchmarks({ quick = false } = {}) {
  const rounds = quick ? 1 : 5;
  const ours = [];
  const xargs = [];
  const xargsLogged = [];
  const floor = [];
  const piped = [];
  // a spawner that is not Node: only where perl is (Debian's perl-base always is)
  const hasPerl = spawnSync('perl', ['-e', '0']).status === 0;
  const perl = [];
  for (let r = 0; r < rounds; r++) {
    const dir = project(500);
    ours.push(measureCommand(process.execPath, [cli, 'exec', 'run', '--parallel', '4'], { cwd: dir }));
    xargs.push(measureCommand('sh', ['-c', 'seq 500 | xargs -P4 -I{} sh -c true'], { cwd: dir }));
    // the same, each task's output appended to a log of its own, as every Node line below does
    // (the anchor of the goal stays the line above)
    xargsLogged.push(
      measureCommand(
        'sh',
        ['-c', 'mkdir xargs-logs && seq 500 | xargs -P4 -I{} sh -c "true >> xargs-logs/t{}.log 2>&1"'],
        {
          cwd: dir,
        },
      ),
    );
    floor.push(
      measureCommand(process.execPath, [resolve(import.meta.dirname, 'workers/spawn-floor.mjs')], { cwd: dir }),
    );
    piped.push(
      measureCommand(process.execPath, [resolve(import.meta.dirname, 'workers/spawn-floor.mjs'), 'pipe'], { cwd: dir }),
    );
    if (hasPerl)
      perl.push(
        measureCommand(process.execPath, [resolve(import.meta.dirname, 'workers/spawn-perl.mjs')], { cwd: dir }),
      );
    rmSync(dir, { recursive: true, force: true });
  }
  const med = (xs, k) => median(xs.map((x) => x[k]));
  const o = med(ours, 'wallMs');
  const x = med(xargs, 'wallMs');
  const f = med(floor, 'wallMs');
  const oc = med(ours, 'cpuMs');
  const xc = med(xargs, 'cpuMs');
  const xl = med(xargsLogged, 'wallMs');
  const xlc = med(xargsLogged, 'cpuMs');
  const fc = med(floor, 'cpuMs');
  const p = med(piped, 'wallMs');
  const pc = med(piped, 'cpuMs');
  const sc = hasPerl ? med(perl, 'cpuMs') : null;
  const s = hasPerl ? med(perl, 'wallMs') : null;
  table(
    `500 trivial tasks (sh -c true), 4 at a time (median of ${rounds}, process start included): CPU ms (user + system, the runner and every task) and wall ms`,
    ['runner', 'CPU ms', 'CPU ratio', 'wall ms', 'wall ratio'],
    [
      ['xargs -P4', fmt(xc), '1.00x', fmt(x), '1.00x'],
      [
        'xargs -P4, each task appending to a log of its own',
        fmt(xlc),
        `${fmt(xlc / xc, 2)}x`,
        fmt(xl),
        `${fmt(xl / x, 2)}x`,
      ],
      [
        'bare Node spawn loop (the floor for any Node runner)',
        fmt(fc),
        `${fmt(fc / xc, 2)}x`,
        fmt(f),
        `${fmt(f / x, 2)}x`,
      ],
      [
        'the same loop, output through a pipe it copies to the log (as a cap needs)',
        fmt(pc),
        `${fmt(pc / xc, 2)}x`,
        fmt(p),
        `${fmt(p / x, 2)}x`,
      ],
      ...(hasPerl
        ? [
            [
              'tasks started by a resident perl (output piped to the log), Node sending a line a task',
              fmt(sc),
              `${fmt(sc / xc, 2)}x`,
              fmt(s),
              `${fmt(s / x, 2)}x`,
            ],
          ]
        : []),
      ['routinely exec run --parallel 4', fmt(oc), `${fmt(oc / xc, 2)}x`, fmt(o), `${fmt(o / x, 2)}x`],
    ],
  );
  console.log(`  routinely / the bare Node spawn loop: ${fmt(oc / fc, 2)}x CPU (goal: at most 1.1x)`);
  console.log(
    `  routinely / xargs with logs: ${fmt(oc / xlc, 2)}x CPU (the goal's anchor is xargs without: at most 2.5x)`,
  );
  console.log(
    `  the piped loop / the bare loop: ${fmt(pc / fc, 2)}x CPU; routinely / the piped loop: ${fmt(oc / pc, 2)}x`,
  );
  if (hasPerl)
    console.log(
      `  the perl spawner / the bare loop: ${fmt(sc / fc, 2)}x CPU; / the piped loop: ${fmt(sc / pc, 2)}x (a spawner outside Node, before any bookkeeping)`,
    );

  // why a Node runner pays more per task than xargs, and more the bigger it is: the fork
  const sizes = [0, 25, 100].map((mb) => {
    const runs = [0, 1, 2].map(() =>
      JSON.parse(
        spawnSync(process.execPath, [resolve(import.meta.dirname, 'workers/spawn-rss.mjs'), String(mb)], {
          env: benchEnv(),
          encoding: 'utf8',
        }).stdout,
      ),
    );
    return { rss: median(runs.map((r) => r.rssMb)), cpu: median(runs.map((r) => r.cpuMs)) };
  });
  table(
    "Node spawn of `true` from parents of three sizes: the parent's CPU per spawn (200 spawns one at a time, median of 3)",
    ['parent RSS MB', 'parent ms CPU per spawn', 'ratio'],
    sizes.map((x) => [fmt(x.rss, 0), fmt(x.cpu, 2), `${fmt(x.cpu / sizes[0].cpu, 2)}x`]),
  );

  const bytes = {};
  for (const n of [100, 1000]) {
    const dir = project(n);
    const r = await execRun({ project: loadProject({ cwd: dir }) }, { parallel: 4 });
    if (r.kind !== 'done') throw new Error(`unexpected ${r.kind}`);
    bytes[n] = r.bytesWritten;
    rmSync(dir, { recursive: true, force: true });
  }
  table(
    'Bytes written to state by one run (snapshot at start and end, journal, registry)',
    ['tasks', 'bytes', 'bytes per task'],
    [
      ['100', String(bytes[100]), fmt(bytes[100] / 100)],
      ['1000', String(bytes[1000]), fmt(bytes[1000] / 1000)],
    ],
  );
  console.log(`  1000 tasks write ${fmt(bytes[1000] / bytes[100], 2)}x the bytes of 100 (linear: 10x)`);
  return { ours: o, xargs: x, floor: f, oursCpu: oc, xargsCpu: xc, floorCpu: fc, pipedCpu: pc, bytes };
}
