// HTTP benchmarks (issue 14): what --http costs a scheduler at start (prom-client and the server
// load only then), and how long a scrape, the status page and the API take with 100 routines
// with history, against /healthz (no state read) as the floor. Reads are cached for 1 s, so
// each round waits that out and every timed request reads the state afresh.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { benchEnv, fmt, median, nowMs, table } from './lib.mjs';

const cli = resolve(import.meta.dirname, '../dist/cli.cjs');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** 100 yearly routines (nothing fires while we measure), each with 200 history lines. */
function project() {
  const dir = mkdtempSync(join(tmpdir(), 'routinely-bench-http-'));
  const routines = Array.from({ length: 100 }, (_, i) => ({
    id: `r${i}`,
    schedule: `${i % 60} ${i % 24} 1 1 *`,
    action: 'command',
    run: 'true',
  }));
  writeFileSync(join(dir, 'routinely.json'), JSON.stringify({ routines }));
  mkdirSync(join(dir, '.routinely', 'history'), { recursive: true, mode: 0o700 });
  const t = Date.UTC(2026, 10, 29);
  for (const r of routines) {
    const lines = Array.from({ length: 200 }, (_, k) => {
      const at = new Date(t + k * 60_000).toISOString();
      return JSON.stringify({
        scheduled_at: at,
        started_at: at,
        finished_at: at,
        result: ['success', 'failure', 'skipped'][k % 3],
        reason: null,
        exit_code: 0,
        run_id: null,
      });
    });
    writeFileSync(join(dir, '.routinely', 'history', `${r.id}.jsonl`), `${lines.join('\n')}\n`, { mode: 0o600 });
  }
  return dir;
}

function start(dir, args) {
  const t0 = nowMs();
  const s = spawn(process.execPath, [cli, 'scheduler', 'start', ...args], {
    cwd: dir,
    env: benchEnv(),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  s.stdout.on('data', (d) => (out += d));
  const started = (async () => {
    while (!out.includes('[scheduler] started')) await sleep(2);
    return { ms: nowMs() - t0, url: /listening on (http:\/\/\S+)/.exec(out)?.[1] };
  })();
  const stop = async () => {
    s.kill('SIGTERM');
    await new Promise((r) => s.on('close', r));
  };
  return { started, stop };
}

const get = (url) =>
  new Promise((resolvePromise, reject) => {
    const t0 = nowMs();
    request(url, (res) => {
      res.resume();
      res.on('end', () => resolvePromise(nowMs() - t0));
    })
      .on('error', reject)
      .end();
  });

export async function httpBenchmarks({ quick = false } = {}) {
  const dir = project();
  const rounds = quick ? 4 : 10;
  const plain = [];
  const served = [];
  for (let i = 0; i < rounds; i++) {
    for (const [args, into] of [
      [[], plain],
      [['--http', '127.0.0.1:0'], served],
    ]) {
      const s = start(dir, args);
      into.push((await s.started).ms);
      await s.stop();
    }
  }
  const p = median(plain);
  const h = median(served);
  table(
    `Scheduler start to "[scheduler] started", 100 routines, ms (median of ${rounds} interleaved)`,
    ['command', 'median ms', 'ratio'],
    [
      ['scheduler start', fmt(p), '1.00x'],
      ['scheduler start --http 127.0.0.1:0', fmt(h), `${fmt(h / p, 2)}x`],
    ],
  );

  const s = start(dir, ['--http', '127.0.0.1:0']);
  const { url } = await s.started;
  const paths = ['healthz', 'metrics', 'api/routines', 'api/history', ''];
  const times = Object.fromEntries(paths.map((x) => [x, []]));
  for (const x of paths) await get(`${url}${x}`); // warm up
  for (let i = 0; i < rounds; i++) {
    for (const x of paths) {
      await sleep(1100); // past the 1 s read cache: each request reads the state itself
      times[x].push(await get(`${url}${x}`));
    }
  }
  await s.stop();
  rmSync(dir, { recursive: true, force: true });
  const floor = median(times.healthz);
  table(
    `GET with 100 routines x 200 history lines, ms (median of ${rounds}, state read afresh)`,
    ['path', 'median ms', 'vs /healthz'],
    paths.map((x) => [`/${x}`, fmt(median(times[x])), `${fmt(median(times[x]) / floor, 1)}x`]),
  );
  return { start: { plain: p, http: h }, get: Object.fromEntries(paths.map((x) => [`/${x}`, median(times[x])])) };
}
