// SPEC §3 "The cost of a fire does not grow with the project": CPU and bytes written per fire of
// one per-second routine in projects of 1, 100 and 1 000 routines, each with a full history
// (1 000 lines) and its indexes in place, as a project that has run for a while has them. The
// scheduler rewrites the shared index (routine-state.json, every routine's record) within a
// second of every record, so with one fire a second it is rewritten once per fire: its CPU is in
// the scheduler's, and its bytes are counted apart (SPEC §3: the bytes a fire writes to its
// routine's own files stay flat; the shared file's cost is per second).
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fmt, measureBatch, median, startScheduler, table } from './lib.mjs';

const cli = resolve(import.meta.dirname, '../dist/cli.cjs');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function procIo(pid) {
  const io = readFileSync(`/proc/${pid}/io`, 'latin1');
  return Number(/wchar:\s+(\d+)/.exec(io)[1]);
}

function procCpuMs(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 10;
}

/** A project of `n` routines (the first fires every second, the rest yearly), each with a full
 * history and its own index, and the shared index written. */
export async function project(n) {
  const dir = mkdtempSync(join(tmpdir(), 'routinely-bench-size-'));
  const routines = Array.from({ length: n }, (_, i) => ({
    id: `r${i}`,
    schedule: i === 0 ? '* * * * * *' : `${i % 60} ${i % 24} 1 1 *`,
    action: 'command',
    run: 'true',
  }));
  writeFileSync(join(dir, 'routinely.json'), JSON.stringify({ routines }));
  const history = join(dir, '.routinely', 'history');
  mkdirSync(history, { recursive: true, mode: 0o700 });
  const t0 = Date.UTC(2026, 0, 1);
  for (let i = 0; i < n; i++) {
    const lines = [];
    for (let k = 0; k < 1000; k++) {
      const at = new Date(t0 + k * 60_000).toISOString();
      lines.push(
        JSON.stringify({
          scheduled_at: at,
          started_at: at,
          finished_at: at,
          result: 'success',
          reason: null,
          exit_code: 0,
          run_id: `r-20260101T000000Z-${(k % 65536).toString(16).padStart(4, '0')}`,
          trigger: 'schedule',
          id: `${i.toString(16).padStart(8, '0')}${k.toString(16).padStart(8, '0')}`,
        }),
      );
    }
    writeFileSync(join(history, `r${i}.jsonl`), `${lines.join('\n')}\n`, { mode: 0o600 });
  }
  const { loadProject, openBackend } = await import('../dist/index.js');
  const p = loadProject({ cwd: dir });
  const b = await openBackend(p);
  // each routine's own index, as its writers leave it; then the shared one
  const at = new Date().toISOString();
  for (let i = 0; i < n; i++)
    await b.routines.recordFire(
      `r${i}`,
      {
        result: 'success',
        reason: null,
        scheduled_at: at,
        started_at: at,
        finished_at: at,
        duration_ms: 1,
        exit_code: 0,
        run_id: null,
      },
      () => {},
    );
  await b.close();
  // (a build that did not write it yet at close: measured by the watch below)
  let stateBytes = 0;
  try {
    stateBytes = statSync(join(dir, '.routinely', 'routine-state.json')).size;
  } catch {
    // not written
  }
  return { dir, stateBytes };
}

/** Counts the rewrites of routine-state.json (each is a new file: a new inode) and their bytes,
 * by looking at it every 50 ms (the scheduler rewrites it at most once a second); and how long
 * each record of the firing routine r0 took to show in it after its line was in r0's history
 * (SPEC §3: within a second). */
function watchState(dir) {
  const path = join(dir, '.routinely', 'routine-state.json');
  const history = join(dir, '.routinely', 'history', 'r0.jsonl');
  let last = null;
  const seen = { rewrites: 0, bytes: 0, lags: [] };
  let base = null;
  const inHistory = [];
  const look = () => {
    const now = performance.now();
    try {
      const st = statSync(path);
      if (last !== null && st.ino !== last) {
        seen.rewrites++;
        seen.bytes += st.size;
      }
      last = st.ino;
      // r0's records: lines in its history (appended only), and what the file counts
      const lines = readFileSync(history, 'utf8')
        .split('\n')
        .filter((l) => l.includes('"result"')).length;
      const c = JSON.parse(readFileSync(path, 'utf8')).routines.r0?.counts;
      const shown = c ? c.success + c.failure + c.skipped : 0;
      base ??= { lines, shown };
      while (inHistory.length < lines - base.lines) inHistory.push(now);
      for (let k = 0; k < Math.min(shown - base.shown, inHistory.length); k++) {
        if (inHistory[k] >= 0) {
          seen.lags.push(now - inHistory[k]);
          inHistory[k] = -1;
        }
      }
    } catch {
      // between two looks (a rotation, a rename)
    }
  };
  const timer = setInterval(look, 50);
  look();
  return { seen, stop: () => clearInterval(timer) };
}

export async function measure(n, seconds) {
  const { dir, stateBytes } = await project(n);
  // `routine history` (the newest 20 of every routine together) and `routine list` in the same
  // project, `node -e 0` beside them (the start-up floor): 5 batches of 5 runs each, interleaved,
  // CPU time (user + system) and wall time a run. `routine list` with no scheduler running: its
  // first run validates the config and leaves the cache every later run starts from (the
  // everyday case, timed).
  measureBatch(process.execPath, [cli, 'routine', 'list'], { cwd: dir }, 1);
  const batches = { history: [], node: [], list: [] };
  for (let i = 0; i < 5; i++) {
    batches.history.push(measureBatch(process.execPath, [cli, 'routine', 'history'], { cwd: dir }, 5));
    batches.node.push(measureBatch(process.execPath, ['-e', '0'], {}, 5));
    batches.list.push(measureBatch(process.execPath, [cli, 'routine', 'list'], { cwd: dir }, 5));
  }
  const both = (xs) => ({ cpu: median(xs.map((x) => x.cpuMs)), wall: median(xs.map((x) => x.wallMs)) });
  const history = both(batches.history);
  const node = both(batches.node);
  const list = both(batches.list);
  const s = await startScheduler(cli, dir);
  await sleep(2500); // past start-up and the first fires
  const count = () => (s.output().match(/\[routine\] succeeded/g) ?? []).length;
  const watch = watchState(dir);
  const a = { cpu: procCpuMs(s.pid), io: procIo(s.pid), fires: count(), ...watch.seen };
  await sleep(seconds * 1000);
  const b = { cpu: procCpuMs(s.pid), io: procIo(s.pid), fires: count(), ...watch.seen };
  watch.stop();
  await s.stop();
  rmSync(dir, { recursive: true, force: true });
  const fires = Math.max(1, b.fires - a.fires);
  const shared = b.bytes - a.bytes;
  return {
    cpuMs: (b.cpu - a.cpu) / fires,
    // what the fire wrote to its routine's files: all it wrote, less the shared index's rewrites
    bytes: (b.io - a.io - shared) / fires,
    shared: {
      rewritesPerFire: (b.rewrites - a.rewrites) / fires,
      bytes: stateBytes,
      maxLagMs: Math.max(0, ...watch.seen.lags),
    },
    historyMs: history,
    listMs: list,
    nodeMs: node,
  };
}

export async function fireCostBySize({ seconds = 20, rounds = 3 } = {}) {
  const sizes = [1, 100, 1000];
  const runs = Object.fromEntries(sizes.map((n) => [n, []]));
  // interleaved, so that the machine's drift falls on every size alike
  for (let r = 0; r < rounds; r++) for (const n of sizes) runs[n].push(await measure(n, seconds));
  const results = {};
  for (const n of sizes) {
    results[n] = {
      cpuMs: median(runs[n].map((x) => x.cpuMs)),
      bytes: median(runs[n].map((x) => x.bytes)),
      rewrites: median(runs[n].map((x) => x.shared.rewritesPerFire)),
      stateBytes: runs[n][0].shared.bytes,
      maxLagMs: Math.max(...runs[n].map((x) => x.shared.maxLagMs)),
      history: { cpu: median(runs[n].map((x) => x.historyMs.cpu)), wall: median(runs[n].map((x) => x.historyMs.wall)) },
      list: { cpu: median(runs[n].map((x) => x.listMs.cpu)), wall: median(runs[n].map((x) => x.listMs.wall)) },
      node: { cpu: median(runs[n].map((x) => x.nodeMs.cpu)), wall: median(runs[n].map((x) => x.nodeMs.wall)) },
    };
  }
  const base = results[1];
  table(
    `Cost per fire by project size (one per-second routine; every routine with 1 000 history lines; ${seconds} s x ${rounds}, median; CPU of the scheduler and its children, routine-state.json's rewrites included)`,
    [
      'routines',
      'ms CPU per fire',
      'ratio',
      "bytes to its routine's files per fire",
      'ratio',
      'routine-state.json: rewrites per fire, KB each',
      'its lag behind history, max ms',
      'target',
    ],
    sizes.map((n) => [
      String(n),
      fmt(results[n].cpuMs, 2),
      `${fmt(results[n].cpuMs / base.cpuMs, 2)}x`,
      fmt(results[n].bytes, 0),
      `${fmt(results[n].bytes / base.bytes, 2)}x`,
      `${fmt(results[n].rewrites, 2)} x ${fmt(results[n].stateBytes / 1024, 1)}`,
      fmt(results[n].maxLagMs, 0),
      n === 1 ? '' : '<= 1.2x, lag <= 1000',
    ]),
  );
  table(
    'routine history (the newest 20 of all routines) and routine list (cached, no scheduler) in the same projects (median of 5 batches of 5 runs a round, then of the rounds; ms a run, CPU (user + system), wall in brackets; node -e 0 beside them)',
    [
      'routines',
      'history files',
      'node -e 0 ms',
      'routine history ms',
      'CPU ratio to node',
      'ratio to 1 routine',
      'routine list ms',
      'CPU ratio to node',
      'wall ratio',
      'target',
    ],
    sizes.map((n) => {
      const r = results[n];
      return [
        String(n),
        `${fmt((n * 1000 * 250) / 1024 / 1024, 1)} MB`,
        `${fmt(r.node.cpu, 1)} (${fmt(r.node.wall, 1)})`,
        `${fmt(r.history.cpu, 1)} (${fmt(r.history.wall, 1)})`,
        `${fmt(r.history.cpu / r.node.cpu, 2)}x`,
        `${fmt(r.history.cpu / base.history.cpu, 2)}x`,
        `${fmt(r.list.cpu, 1)} (${fmt(r.list.wall, 1)})`,
        `${fmt(r.list.cpu / r.node.cpu, 2)}x`,
        `${fmt(r.list.wall / r.node.wall, 2)}x`,
        n === 1000 ? 'list <= 2x' : '',
      ];
    }),
  );
  return results;
}

if (import.meta.url === `file://${process.argv[1]}`) await fireCostBySize();
