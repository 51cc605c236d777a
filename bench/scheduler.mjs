// Scheduler benchmarks (issue 4): `routine list` cold start with 100 routines against
// `node -e 0`; the idle scheduler's RSS and CPU with 1, 100 and 1 000 routines beside a bare idle
// node; tick lateness
// (started_at - scheduled_at) from history.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { benchEnv, fmt, median, percentile, startScheduler, table, timeCommand } from './lib.mjs';

const cli = resolve(import.meta.dirname, '../dist/cli.cjs');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function project(routines) {
  const dir = mkdtempSync(join(tmpdir(), 'routinely-bench-sched-'));
  writeFileSync(join(dir, 'routinely.json'), JSON.stringify({ routines }));
  return dir;
}

/** 100 routines with distinct schedules, half of them in a time zone. */
const hundred = (schedule) =>
  Array.from({ length: 100 }, (_, i) => ({
    id: `r${i}`,
    schedule: schedule(i),
    action: 'command',
    run: 'true',
    ...(i % 2 ? { timezone: 'Europe/Berlin' } : {}),
  }));

/** `routine list` cold start against `node -e 0` (issue 12): from the running scheduler's cache
 * (the goal: <= 1.5x), and the full path (config validated, times computed; ROUTINELY_LIST_CACHE=0). */
export async function listStartup(rounds) {
  const dir = project(hundred((i) => `${i % 60} ${i % 24} * * *`));
  const s = await startScheduler(cli, dir);
  const full = { ...benchEnv(), ROUTINELY_LIST_CACHE: '0' };
  for (let i = 0; i < 3; i++) {
    timeCommand(process.execPath, ['-e', '0']);
    timeCommand(process.execPath, [cli, 'routine', 'list'], { cwd: dir });
    timeCommand(process.execPath, [cli, 'routine', 'list'], { cwd: dir, env: full });
  }
  const node = [];
  const ours = [];
  const slow = [];
  for (let i = 0; i < rounds; i++) {
    node.push(timeCommand(process.execPath, ['-e', '0']));
    ours.push(timeCommand(process.execPath, [cli, 'routine', 'list'], { cwd: dir }));
    slow.push(timeCommand(process.execPath, [cli, 'routine', 'list'], { cwd: dir, env: full }));
  }
  await s.stop();
  rmSync(dir, { recursive: true, force: true });
  const n = median(node);
  const o = median(ours);
  const f = median(slow);
  table(
    `routine list cold start, ms (median of ${rounds} interleaved runs; 100 routines, 50 in a time zone)`,
    ['command', 'median ms', 'ratio', 'target'],
    [
      ['node -e 0', fmt(n), '1.00x', ''],
      ['routinely routine list (scheduler running: its cache)', fmt(o), `${fmt(o / n, 2)}x`, '<= 1.5x'],
      ['routinely routine list (full path: ROUTINELY_LIST_CACHE=0)', fmt(f), `${fmt(f / n, 2)}x`, ''],
    ],
  );
  return { node: n, list: o, full: f };
}

function procStat(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(f[11]) + Number(f[12]); // utime + stime, in clock ticks (100 Hz)
  const children = Number(f[13]) + Number(f[14]); // cutime + cstime: children it has waited for
  const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'latin1'))[1]) / 1024;
  return { cpuMs: ticks * 10, allCpuMs: (ticks + children) * 10, rssMb: rss };
}

/** CPU (the scheduler and every child it ran) of a scheduler over `seconds`, and its fires. */
async function schedulerCpu(routines, seconds) {
  const dir = project(routines);
  const s = await startScheduler(cli, dir);
  await sleep(1500); // past start-up, one fire or so
  const fired = () => (s.output().match(/\[routine\] (succeeded|failed)/g) ?? []).length;
  const firesBefore = fired();
  const a = procStat(s.pid);
  await sleep(seconds * 1000);
  const b = procStat(s.pid);
  const fires = fired() - firesBefore;
  await s.stop();
  rmSync(dir, { recursive: true, force: true });
  return { cpuMs: b.allCpuMs - a.allCpuMs, fires };
}

/** CPU of `n` × `sh -c true` from a shell loop (what cron pays per fire), from bash's `times`. */
function shellLoopCpu(n) {
  const r = spawnSync('bash', ['-c', `for i in $(seq ${n}); do sh -c true; done; times`], {
    encoding: 'utf8',
    env: benchEnv(),
  });
  const lines = r.stdout.trim().split('\n');
  const toMs = (t) => {
    const m = /(\d+)m([\d.]+)s/.exec(t);
    return m ? (Number(m[1]) * 60 + Number(m[2])) * 1000 : 0;
  };
  const [self, children] = lines.slice(-2).map((l) => l.trim().split(/\s+/).map(toMs));
  return self[0] + self[1] + children[0] + children[1];
}

/** SPEC §6 / issue 12: CPU per fire of `true`, scheduler and children, against cron's cost. */
export async function fireCost(seconds, rounds) {
  const perFire = [];
  const shell = [];
  for (let i = 0; i < rounds; i++) {
    const busy = await schedulerCpu([{ id: 'tick', schedule: '* * * * * *', action: 'command', run: 'true' }], seconds);
    const idleRun = await schedulerCpu(
      [{ id: 'never', schedule: '0 0 1 1 *', action: 'command', run: 'true' }],
      seconds,
    );
    perFire.push((busy.cpuMs - idleRun.cpuMs) / Math.max(1, busy.fires));
    // at least 300 starts: bash's `times` counts in 10 ms ticks, too coarse for a few dozen
    const n = Math.max(300, busy.fires);
    shell.push(shellLoopCpu(n) / n);
  }
  const ours = median(perFire);
  const cron = median(shell);
  table(
    `CPU per fire of \`true\` (scheduler + children, minus an idle scheduler), ${seconds} s x ${rounds} rounds`,
    ['what', 'ms CPU per fire', 'ratio', 'target'],
    [
      ['sh -c true from a shell loop (cron)', fmt(cron, 1), '1.00x', ''],
      ['routinely scheduler', fmt(ours, 1), `${fmt(ours / cron, 2)}x`, '<= 3x'],
    ],
  );
  return { perFireMs: ours, cronMs: cron, ratio: ours / cron };
}

async function idle(seconds) {
  // the peer: a bare Node process that stays up doing nothing
  const bare = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1 << 30)'], { env: benchEnv(), stdio: 'ignore' });
  await sleep(2000);
  const bareRss = procStat(bare.pid).rssMb;
  bare.kill('SIGTERM');
  await new Promise((r) => bare.on('close', r));
  const rows = [['bare idle node', fmt(bareRss), '1.00x', '', '', '']];
  const out = { bareRssMb: bareRss };
  for (const n of [1, 100, 1000]) {
    // yearly schedules: nothing fires while we watch
    const routines = Array.from({ length: n }, (_, i) => ({
      id: `r${i}`,
      schedule: `${i % 60} ${i % 24} 1 1 *`,
      action: 'command',
      run: 'true',
      ...(i % 2 ? { timezone: 'Europe/Berlin' } : {}),
    }));
    const dir = project(routines);
    const s = await startScheduler(cli, dir);
    // past the first idle moment and the heap's settling (src/scheduler/settle-heap.ts)
    await sleep(4000);
    const a = procStat(s.pid);
    await sleep(seconds * 1000);
    const b = procStat(s.pid);
    const peak = Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${s.pid}/status`, 'latin1'))[1]) / 1024;
    await s.stop();
    rmSync(dir, { recursive: true, force: true });
    const cpuPct = ((b.cpuMs - a.cpuMs) / (seconds * 1000)) * 100;
    rows.push([
      `scheduler, ${n} routine${n === 1 ? '' : 's'}`,
      fmt(b.rssMb),
      `${fmt(b.rssMb / bareRss, 2)}x`,
      fmt(peak),
      fmt(cpuPct, 3),
      n === 1000 ? '<= 60 MB' : '',
    ]);
    out[n] = { rssMb: b.rssMb, peakMb: peak, cpuMs: b.cpuMs - a.cpuMs };
  }
  table(
    `Idle scheduler, watched for ${seconds} s each (yearly schedules: nothing fires): RSS MB at the end, its start-up peak, CPU %`,
    ['process', 'RSS MB', 'ratio', 'peak MB', 'CPU %', 'target'],
    rows,
  );
  return out;
}

async function lateness(seconds) {
  const dir = project([
    { id: 'tick', schedule: '* * * * * *', action: 'command', run: 'true' },
    { id: 'tock', schedule: '*/2 * * * * *', action: 'register' },
  ]);
  const s = spawn(process.execPath, [cli, 'scheduler', 'start'], {
    cwd: dir,
    env: benchEnv(),
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  await sleep(seconds * 1000);
  s.kill('SIGTERM');
  await new Promise((r) => s.on('close', r));
  const late = [];
  for (const id of ['tick', 'tock']) {
    let text = '';
    try {
      text = readFileSync(join(dir, '.routinely', 'history', `${id}.jsonl`), 'utf8');
    } catch {
      continue;
    }
    for (const line of text.trim().split('\n')) {
      const e = JSON.parse(line);
      if (typeof e.result !== 'string') continue; // open markers, pauses
      late.push(Date.parse(e.started_at) - Date.parse(e.scheduled_at));
    }
  }
  rmSync(dir, { recursive: true, force: true });
  table(
    `Tick lateness (started_at - scheduled_at) over ${seconds} s, per-second routines`,
    ['fires', 'p50 ms', 'p99 ms', 'target p99'],
    [[String(late.length), fmt(percentile(late, 50)), fmt(percentile(late, 99)), '<= 50 ms']],
  );
  return { fires: late.length, p50: percentile(late, 50), p99: percentile(late, 99) };
}

/** The fires of a history file (not open markers or pauses). */
function historyFires(dir, id) {
  let text = '';
  try {
    text = readFileSync(join(dir, '.routinely', 'history', `${id}.jsonl`), 'utf8');
  } catch {
    return [];
  }
  return text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l))
    .filter((e) => typeof e.result === 'string');
}

/** SPEC §6 "The scheduler never competes with itself": five routines sharing ticks (three
 * per-second, two every 2 s, one of those 50 ms long) — how many of the due fires ran, against
 * cron + `flock -n` (the jobs of a tick started side by side, each under `flock -n` on one lock
 * file), and the lateness of a routine queued behind its 50 ms sibling. */
export async function sharedTicks(seconds) {
  const routines = [
    { id: 'sibling', schedule: '* * * * * *', action: 'command', run: 'sleep 0.05' },
    { id: 'queued', schedule: '* * * * * *', action: 'command', run: 'true' },
    { id: 'third', schedule: '* * * * * *', action: 'command', run: 'true' },
    { id: 'even', schedule: '*/2 * * * * *', action: 'command', run: 'true' },
    { id: 'even2', schedule: '*/2 * * * * *', action: 'command', run: 'true' },
  ];
  const dir = project(routines);
  const s = spawn(process.execPath, [cli, 'scheduler', 'start'], {
    cwd: dir,
    env: benchEnv(),
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  await sleep(seconds * 1000);
  s.kill('SIGTERM');
  await new Promise((r) => s.on('close', r));
  let due = 0;
  let ran = 0;
  for (const r of routines) {
    const f = historyFires(dir, r.id);
    due += f.length;
    ran += f.filter((e) => e.result === 'success').length;
  }
  const late = historyFires(dir, 'queued')
    .filter((e) => e.result === 'success')
    .map((e) => Date.parse(e.started_at) - Date.parse(e.scheduled_at));
  rmSync(dir, { recursive: true, force: true });
  // cron + flock -n: every second, the jobs due start side by side, each under flock -n
  const lockDir = mkdtempSync(join(tmpdir(), 'routinely-bench-flock-'));
  const script = `lock=${lockDir}/lock; ran=0; due=0
    for t in $(seq ${seconds}); do
      n=3; [ $((t % 2)) -eq 0 ] && n=5
      for j in $(seq $n); do (flock -n $lock sh -c 'sleep 0.05' && echo ran) & done
      due=$((due + n)); wait; sleep 0.95
    done | grep -c ran`;
  const flockRan = Number(spawnSync('bash', ['-c', script], { encoding: 'utf8' }).stdout.trim());
  const flockDue = Array.from({ length: seconds }, (_, t) => ((t + 1) % 2 === 0 ? 5 : 3)).reduce((a, b) => a + b, 0);
  rmSync(lockDir, { recursive: true, force: true });
  table(
    `Routines sharing ticks (3 per second, 2 every 2 s) for ${seconds} s: due fires that ran`,
    ['what', 'ran / due', 'share', 'target'],
    [
      [
        'cron + flock -n (jobs of a tick side by side)',
        `${flockRan} / ${flockDue}`,
        `${fmt((flockRan / flockDue) * 100, 0)} %`,
        '',
      ],
      [
        'routinely scheduler (its routines take turns)',
        `${ran} / ${due}`,
        `${fmt((ran / Math.max(1, due)) * 100, 0)} %`,
        '100 %',
      ],
    ],
  );
  table(
    'Lateness of a routine queued behind a 50 ms sibling (started_at - scheduled_at)',
    ['fires', 'p50 ms', 'p99 ms'],
    [[String(late.length), fmt(percentile(late, 50)), fmt(percentile(late, 99))]],
  );
  return { ran, due, flockRan, flockDue, queuedP50: percentile(late, 50), queuedP99: percentile(late, 99) };
}

export async function schedulerBenchmarks({ quick = false } = {}) {
  return {
    fireCost: await fireCost(quick ? 8 : 16, quick ? 1 : 3),
    list: await listStartup(quick ? 10 : 30),
    idle: await idle(quick ? 5 : 20),
    lateness: await lateness(quick ? 10 : 30),
    sharedTicks: await sharedTicks(quick ? 10 : 30),
  };
}
