// Fires lost in a database outage (docs/postgres.md "Outages"): a scheduler fires a per-second
// routine against its own throwaway cluster; the server is stopped for OUTAGE seconds and started
// again; then the fires the scheduler started are compared with the fires in history.
//
//   node bench/pg-outage.mjs [CLI=dist/cli.cjs] [ROUNDS=3] [OUTAGE_S=5] [RUN='sleep 0.8']
//
// Prints one line per round and the totals: started (log lines), recorded (history rows that are
// not skips), interrupted (recorded as such), lost (started − recorded).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { destroyCluster, startCluster, startServer, stopServer } from '../scripts/pg-cluster.mjs';

const cli = resolve(process.argv[2] ?? 'dist/cli.cjs');
const rounds = Number(process.argv[3] ?? 3);
const outageS = Number(process.argv[4] ?? 5);
const run = process.argv[5] ?? 'sleep 0.8';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function query(url, text) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(text)).rows;
  } finally {
    await c.end();
  }
}

async function round() {
  const cluster = await startCluster();
  const dir = mkdtempSync(join(tmpdir(), 'routinely-outage-'));
  try {
    await query(cluster.url, 'CREATE DATABASE outage');
    const url = cluster.url.replace(/\/postgres$/, '/outage');
    writeFileSync(
      join(dir, 'routinely.json'),
      JSON.stringify({
        project: 'app',
        backend: { type: 'postgres' },
        lock: { ttlSeconds: 30 },
        routines: [{ id: 'tick', schedule: '* * * * * *', action: 'command', run }],
      }),
    );
    const env = { ...process.env, ROUTINELY_DATABASE_URL: url, NO_COLOR: '1' };
    delete env.NODE_EXTRA_CA_CERTS;
    const child = spawn(process.execPath, [cli, 'scheduler', 'start'], {
      cwd: dir,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const exited = new Promise((r) => child.on('exit', r));
    while ((out.match(/\[routine\] started tick/g) ?? []).length < 4) await sleep(100);
    stopServer(cluster, 'fast');
    await sleep(outageS * 1000);
    startServer(cluster);
    await sleep(20_000); // the flusher backs off up to 8 s between tries at this length of outage
    child.kill('SIGTERM');
    await exited;
    const rows = await query(
      url,
      `SELECT entry->>'result' AS result, entry->>'reason' AS reason FROM routinely_history WHERE routine = 'tick'`,
    );
    const started = (out.match(/\[routine\] started tick/g) ?? []).length;
    const recorded = rows.filter((r) => r.result !== 'skipped').length;
    const interrupted = rows.filter((r) => /interrupted/.test(r.reason ?? '')).length;
    const notRecorded = (out.match(/could not record tick/g) ?? []).length;
    return { started, recorded, interrupted, lost: started - recorded, warnings: notRecorded };
  } finally {
    destroyCluster(cluster);
    rmSync(dir, { recursive: true, force: true });
  }
}

const total = { started: 0, recorded: 0, interrupted: 0, lost: 0 };
for (let i = 1; i <= rounds; i++) {
  const r = await round();
  for (const k of Object.keys(total)) total[k] += r[k];
  console.log(
    `round ${i}: started ${r.started}, recorded ${r.recorded}, interrupted ${r.interrupted}, lost ${r.lost} ("could not record" warnings: ${r.warnings})`,
  );
}
console.log(
  `total (${cli}, outage ${outageS}s, run "${run}"): started ${total.started}, recorded ${total.recorded}, interrupted ${total.interrupted}, lost ${total.lost}`,
);
