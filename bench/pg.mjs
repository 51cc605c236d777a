// PostgreSQL backend benchmarks (issue 5): lease acquire+release per second and contended
// hand-offs, against a plain pg_try_advisory_lock on the same server. Uses
// ROUTINELY_BENCH_DATABASE_URL when set, else starts a throwaway cluster (Debian's postgresql).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { loadProject, openBackend } from '../dist/index.js';
import { destroyCluster, findPgBin, startCluster } from '../scripts/pg-cluster.mjs';
import { fmt, median, nowMs, percentile, spawnNode, table } from './lib.mjs';

function project(url) {
  const dir = mkdtempSync(join(tmpdir(), 'routinely-bench-pg-'));
  writeFileSync(
    join(dir, 'routinely.json'),
    JSON.stringify({ project: `bench${process.pid}${Date.now()}`, backend: { type: 'postgres', url } }),
  );
  return dir;
}

async function uncontended(url, cycles) {
  const dir = project(url);
  const backend = await openBackend(loadProject({ cwd: dir }));
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const ours = [];
  const theirs = [];
  for (let round = 0; round < 5; round++) {
    let t0 = nowMs();
    for (let i = 0; i < cycles; i++) {
      const r = await backend.lock.acquire('exec-run', { command: 'bench' }, { ifBusy: 'fail' });
      if (!r.ok) throw new Error(r.reason);
      await r.lease.release();
    }
    ours.push((cycles / (nowMs() - t0)) * 1000);
    t0 = nowMs();
    for (let i = 0; i < cycles; i++) {
      await client.query('SELECT pg_try_advisory_lock(4243)');
      await client.query('SELECT pg_advisory_unlock(4243)');
    }
    theirs.push((cycles / (nowMs() - t0)) * 1000);
  }
  await client.end();
  await backend.close();
  rmSync(dir, { recursive: true, force: true });
  const o = median(ours);
  const t = median(theirs);
  table(
    `PostgreSQL: uncontended acquire+release per second (median of 5 rounds x ${cycles})`,
    ['implementation', 'cycles/s', 'ratio'],
    [
      ['pg_try_advisory_lock + unlock (one connection)', fmt(t, 0), '1.00x'],
      ['routinely lease (upsert + conditional release, fenced)', fmt(o, 0), `${fmt(o / t, 2)}x`],
    ],
  );
  return { ours: o, advisory: t };
}

async function contended(url, impl, procs, cycles) {
  const dir = project(url);
  const log = join(dir, 'log');
  const barrier = join(dir, 'go');
  writeFileSync(log, '');
  const workers = Array.from({ length: procs }, () =>
    spawnNode([join(import.meta.dirname, 'workers/pg-contend.mjs'), impl, dir, url, String(cycles), log, barrier]),
  );
  await new Promise((r) => setTimeout(r, 2000));
  writeFileSync(barrier, '');
  const results = (await Promise.all(workers.map((w) => w.done))).map((o) => JSON.parse(o.trim().split('\n').pop()));
  let handoffs = 0;
  let last = null;
  for (const line of readFileSync(log, 'utf8').trim().split('\n')) {
    const [k, pid] = line.split(' ');
    if (k === 'S' && last !== null && last !== pid) handoffs++;
    if (k === 'S') last = pid;
  }
  rmSync(dir, { recursive: true, force: true });
  const waits = results.flatMap((r) => r.waits);
  return {
    wall: Math.max(...results.map((r) => r.end)) - Math.min(...results.map((r) => r.start)),
    p99: percentile(waits, 99),
    handoffs,
  };
}

export async function pgBenchmarks({ quick = false } = {}) {
  let url = process.env.ROUTINELY_BENCH_DATABASE_URL;
  let cluster;
  if (!url) {
    if (!findPgBin()) {
      console.log(
        '\nPostgreSQL: skipped (no server: set ROUTINELY_BENCH_DATABASE_URL or install Debian package "postgresql")',
      );
      return null;
    }
    cluster = await startCluster();
    url = cluster.url;
  }
  try {
    const u = await uncontended(url, quick ? 200 : 1000);
    const rows = [];
    const out = {};
    for (const impl of ['advisory', 'routinely']) {
      const r = await contended(url, impl, 4, quick ? 50 : 200);
      out[impl] = r;
      rows.push([
        impl === 'advisory' ? 'pg_try_advisory_lock, 1 ms retries' : 'routinely lease (ifBusy wait)',
        fmt(r.wall),
        fmt(r.p99),
        String(r.handoffs),
      ]);
    }
    table(
      `PostgreSQL: 4 processes x ${quick ? 50 : 200} contended cycles`,
      ['implementation', 'wall ms', 'p99 wait ms', 'hand-offs'],
      rows,
    );
    return { uncontended: u, contended: out };
  } finally {
    if (cluster) destroyCluster(cluster);
  }
}
