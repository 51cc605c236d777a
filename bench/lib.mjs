// Small helpers shared by the benchmarks: statistics, process spawning, table printing.
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

export const percentile = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};

/** Environment for child processes: without NODE_EXTRA_CA_CERTS, which adds ≈ 65 ms to every
 * node start on these machines (FACTS); applied to both sides of every comparison. */
export function benchEnv(extra = {}) {
  const env = { ...process.env, ...extra };
  delete env.NODE_EXTRA_CA_CERTS;
  return env;
}

export const nowMs = () => Number(process.hrtime.bigint()) / 1e6; // CLOCK_MONOTONIC, shared by processes

export function spawnNode(args, opts = {}) {
  const child = spawn(process.execPath, args, { env: benchEnv(), stdio: ['ignore', 'pipe', 'inherit'], ...opts });
  let out = '';
  child.stdout?.on('data', (d) => (out += d));
  const done = new Promise((resolve, reject) =>
    child.on('close', (code) =>
      code === 0 ? resolve(out) : reject(new Error(`${args.join(' ')} exited ${code}: ${out}`)),
    ),
  );
  return { child, done, output: () => out };
}

/** `routinely scheduler start` in `dir` (the CLI at `cli`), once it said it started: its process,
 * its output so far, and stop() (SIGTERM, then its exit). Rejects if it exits before that. */
export async function startScheduler(cli, dir) {
  const child = spawn(process.execPath, [cli, 'scheduler', 'start'], {
    cwd: dir,
    env: benchEnv(),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  const closed = new Promise((r) => child.on('close', r));
  await new Promise((resolve, reject) => {
    child.stdout.on('data', () => out.includes('[scheduler] started') && resolve());
    closed.then((code) => reject(new Error(`scheduler start exited ${code} before it started: ${out}`)));
  });
  return {
    pid: child.pid,
    output: () => out,
    stop: async () => {
      child.kill('SIGTERM');
      await closed;
    },
  };
}

/** Wall time of one command, in ms (spawnSync: includes process start and exit). */
export function timeCommand(cmd, args, opts = {}) {
  return measureCommand(cmd, args, opts).wallMs;
}

/** CPU time (user + system, ms) of this process's waited-for children so far: /proc/self/stat's
 * cutime and cstime (Linux; a child's own waited-for children count in it, as getrusage's
 * RUSAGE_CHILDREN counts them), in clock ticks of 10 ms. null elsewhere. */
export function childrenCpuMs() {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields 16 and 17 of the whole line (cutime, cstime) are 13 and 14 after the name
    return ((Number(f[13]) + Number(f[14])) * 1000) / 100;
  } catch {
    return null;
  }
}

/** Runs a command to its end: its wall time and the CPU time it and its descendants used (ms). */
export function measureCommand(cmd, args, opts = {}) {
  const c0 = childrenCpuMs();
  const t0 = nowMs();
  const r = spawnSync(cmd, args, { env: benchEnv(), stdio: 'ignore', ...opts });
  const wallMs = nowMs() - t0;
  const c1 = childrenCpuMs();
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}`);
  return { wallMs, cpuMs: c0 === null || c1 === null ? null : c1 - c0 };
}

/** `k` runs of a command in a row: CPU and wall time a run (ms). CPU time is counted in 10 ms
 * ticks: a batch of 5 makes it exact to 2 ms a run. */
export function measureBatch(cmd, args, opts, k) {
  let cpuMs = 0;
  let wallMs = 0;
  for (let i = 0; i < k; i++) {
    const r = measureCommand(cmd, args, opts);
    cpuMs += r.cpuMs;
    wallMs += r.wallMs;
  }
  return { cpuMs: cpuMs / k, wallMs: wallMs / k };
}

export function fmt(n, digits = 1) {
  if (n === undefined || n === null || Number.isNaN(n)) return '-';
  return n >= 100 ? n.toFixed(0) : n.toFixed(digits);
}

/** Prints a table: rows of [label, ...cells]. */
export function table(title, header, rows) {
  console.log(`\n${title}`);
  const all = [header, ...rows].map((r) => r.map(String));
  const widths = header.map((_, i) => Math.max(...all.map((r) => r[i].length)));
  const line = (r) => `  ${r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('   ')}`;
  console.log(line(all[0]));
  console.log(`  ${widths.map((w) => '-'.repeat(w)).join('   ')}`);
  for (const r of all.slice(1)) console.log(line(r));
}
