// A fleet on one PostgreSQL server, beside graphile-worker's cron (issue 50): what one fired
// tick costs the server (statements, from pg_stat_statements, and the server's CPU time, from
// /proc for the postmaster and its backends) with 10 processes x 20 per-minute jobs, and how late
// 1 000 per-minute jobs start with 3 processes. Each side gets a database of its own on a
// throwaway cluster and runs alone; both sides do the same: routinely fires `true` (a process),
// graphile-worker runs a task that does nothing (no process: its client side is cheaper, the
// server side is what is compared). graphile-worker: its defaults, concurrency 10 per process.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { destroyCluster, findPgBin, startCluster, startServer, stopServer } from '../scripts/pg-cluster.mjs';
import { benchEnv, fmt, median, percentile, table } from './lib.mjs';

const CLI = join(import.meta.dirname, '..', 'dist', 'cli.cjs');
const GW = join(import.meta.dirname, 'workers', 'gw-cron.mjs');
const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/** The server's CPU time so far (ms): the postmaster, the backends it reaped, and those alive. */
function serverCpuMs(dataDir) {
  const pm = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const stat = (pid) => {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return s.slice(s.lastIndexOf(')') + 2).split(' ');
  };
  const cpu = (f) => Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
  let ticks = cpu(stat(pm));
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const f = stat(name);
      if (Number(f[1]) === pm) ticks += cpu(f);
    } catch {
      // gone meanwhile
    }
  }
  return ticks * 10; // USER_HZ 100
}

async function q(url, text, values) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(text, values)).rows;
  } finally {
    await c.end();
  }
}

const dbUrl = (base, db) => {
  const u = new URL(base);
  u.pathname = `/${db}`;
  return u.toString();
};

/** Statements run in `db` since the last reset (every statement, every client). */
const statements = async (admin, db) =>
  Number(
    (
      await q(
        admin,
        `SELECT coalesce(sum(calls), 0)::bigint AS n FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)`,
        [db],
      )
    )[0].n,
  );

/** The first whole minute at least `leadMs` away. */
const minuteAhead = (leadMs) => Math.ceil((Date.now() + leadMs) / 60_000) * 60_000;

function startProcess(args, env, ready) {
  const child = spawn(process.execPath, args.argv, {
    cwd: args.cwd,
    env: benchEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const exited = new Promise((r) => child.on('close', () => r()));
  const up = new Promise((resolve, reject) => {
    const t = setInterval(() => {
      if (ready.test(out)) (clearInterval(t), resolve());
      if (child.exitCode !== null) (clearInterval(t), reject(new Error(`exited: ${err || out}`)));
    }, 50);
  });
  return { child, up, exited, out: () => out };
}

function routinelyFleet(url, procs, jobs) {
  const dir = mkdtempSync(join(tmpdir(), 'routinely-bench-fleet-'));
  writeFileSync(
    join(dir, 'routinely.json'),
    JSON.stringify({
      project: 'fleet',
      backend: { type: 'postgres' },
      routines: Array.from({ length: jobs }, (_, i) => ({
        id: `j${String(i).padStart(4, '0')}`,
        schedule: '* * * * *',
        action: 'command',
        run: 'true',
        exclusive: false,
      })),
    }),
  );
  const all = Array.from({ length: procs }, (_, i) =>
    startProcess(
      { argv: [CLI, 'scheduler', 'start'], cwd: dir },
      { ROUTINELY_DATABASE_URL: url, ROUTINELY_HOST_ID: `h${i}` },
      /\[scheduler\] started/,
    ),
  );
  return {
    all,
    up: () => Promise.all(all.map((p) => p.up)),
    stop: async () => {
      for (const p of all) p.child.kill('SIGTERM');
      await Promise.all(all.map((p) => p.exited));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function graphileFleet(url, procs, jobs) {
  const all = Array.from({ length: procs }, () =>
    startProcess({ argv: [GW, url, String(jobs), '10'] }, {}, /^ready$/m),
  );
  return {
    all,
    up: () => Promise.all(all.map((p) => p.up)),
    stop: async () => {
      for (const p of all) p.child.kill('SIGTERM');
      await Promise.all(all.map((p) => p.exited));
      return all.map((p) => JSON.parse(p.out().trim().split('\n').pop()));
    },
  };
}

/** A database of its own for one side, and that side's processes on it (started, not up yet). */
async function startFleet(prefix, side, o) {
  const db = `${prefix}_${side.replace(/\W/g, '_')}_${process.pid}`;
  await q(o.admin, `CREATE DATABASE ${db}`);
  const url = dbUrl(o.admin, db);
  return {
    db,
    url,
    fleet: side === 'routinely' ? routinelyFleet(url, o.procs, o.jobs) : graphileFleet(url, o.procs, o.jobs),
  };
}

/** One side's cost of the minute `at`: statements and server CPU from 10 s before it to 50 s
 * after it, divided by the ticks fired in it. */
async function perTick(side, o) {
  const { db, url, fleet } = await startFleet('fleet', side, o);
  try {
    await fleet.up();
    const at = minuteAhead(25_000);
    await sleep(at - 10_000 - Date.now());
    await q(o.admin, 'SELECT pg_stat_statements_reset()');
    const cpu0 = serverCpuMs(o.dataDir);
    await sleep(at + 50_000 - Date.now());
    const n = await statements(o.admin, db);
    const cpu = serverCpuMs(o.dataDir) - cpu0;
    let ticks;
    if (side === 'routinely') {
      ticks = Number(
        (
          await q(url, `SELECT count(*) AS n FROM routinely_history WHERE entry->>'scheduled_at' = $1`, [
            new Date(at).toISOString(),
          ])
        )[0].n,
      );
      await fleet.stop();
    } else {
      ticks = (await fleet.stop()).reduce((s, r) => s + r.late.filter(([minute]) => minute === at).length, 0);
    }
    return { ticks, statements: n / ticks, cpuMs: cpu / ticks };
  } catch (err) {
    await fleet.stop().catch(() => {});
    throw err;
  }
}

/** How late each job of the minute `at` started (ms after its minute), with `procs` processes. */
export async function lateness(side, o) {
  const { url, fleet } = await startFleet('late', side, o);
  try {
    await fleet.up();
    const at = minuteAhead(20_000);
    await sleep(at + 40_000 - Date.now());
    let late;
    if (side === 'routinely') {
      const rows = await q(
        url,
        `SELECT entry->>'started_at' AS s FROM routinely_history WHERE entry->>'scheduled_at' = $1 AND entry->>'run_id' IS NOT NULL`,
        [new Date(at).toISOString()],
      );
      late = rows.map((r) => Date.parse(r.s) - at);
      await fleet.stop();
    } else {
      late = (await fleet.stop()).flatMap((r) => r.late.filter(([minute]) => minute === at).map(([, ms]) => ms));
    }
    return { fired: late.length, p50: median(late), max: Math.max(...late) };
  } catch (err) {
    await fleet.stop().catch(() => {});
    throw err;
  }
}

export async function fleetBenchmarks({ quick = false } = {}) {
  if (!findPgBin()) {
    console.log('\nPostgreSQL fleet: skipped (install Debian package "postgresql")');
    return null;
  }
  const cluster = await startCluster();
  try {
    // pg_stat_statements counts every statement of each database
    await q(cluster.url, `ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`);
    stopServer(cluster);
    startServer(cluster);
    await q(cluster.url, 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    const o = { admin: cluster.url, dataDir: cluster.dataDir };
    const procs = quick ? 3 : 10;
    const cost = {};
    for (const side of ['graphile-worker', 'routinely']) cost[side] = await perTick(side, { ...o, procs, jobs: 20 });
    const g = cost['graphile-worker'];
    const r = cost.routinely;
    table(
      `PostgreSQL fleet: ${procs} processes x 20 per-minute jobs, one minute (server side, per fired tick)`,
      ['implementation', 'ticks', 'statements/tick', 'server CPU ms/tick', 'ratio (statements, CPU)'],
      [
        ['graphile-worker 0.17 cron', String(g.ticks), fmt(g.statements), fmt(g.cpuMs, 2), '1.00x, 1.00x'],
        [
          'routinely scheduler',
          String(r.ticks),
          fmt(r.statements),
          fmt(r.cpuMs, 2),
          `${fmt(r.statements / g.statements, 2)}x, ${fmt(r.cpuMs / g.cpuMs, 2)}x`,
        ],
      ],
    );
    const jobs = quick ? 300 : 1000;
    const late = {};
    for (const side of ['graphile-worker', 'routinely']) late[side] = await lateness(side, { ...o, procs: 3, jobs });
    table(
      `PostgreSQL fleet: ${jobs} per-minute jobs, 3 processes, how late each started (ms after its minute)`,
      ['implementation', 'fired', 'p50 ms', 'latest ms'],
      [
        [
          'graphile-worker 0.17 cron (concurrency 10)',
          String(late['graphile-worker'].fired),
          fmt(late['graphile-worker'].p50, 0),
          fmt(late['graphile-worker'].max, 0),
        ],
        ['routinely scheduler', String(late.routinely.fired), fmt(late.routinely.p50, 0), fmt(late.routinely.max, 0)],
      ],
    );
    return { cost, late };
  } finally {
    destroyCluster(cluster);
  }
}
