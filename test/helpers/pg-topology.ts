// Real PostgreSQL topologies for the tests: a primary of our own (it gets killed), a streaming
// standby made with `pg_basebackup -R` (asynchronous, or synchronous), and PgBouncer with a
// stock ini (only databases, listen address, auth and pool_mode). As root, the servers run as
// the `postgres` user, as the shared test cluster does.

import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, onTestFinished } from 'vitest';
import { startCli, type Spawned } from './cli.js';
import { destroyCluster, pgCommand, startCluster, startServer, stopServer, type TestCluster } from './postgres.js';

export const haveBouncer = spawnSync('sh', ['-c', 'command -v pgbouncer']).status === 0;

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

export const portOf = (c: TestCluster): number => Number(new URL(c.url).port);
export const dbUrl = (port: number, db: string): string => `postgres://postgres@127.0.0.1:${port}/${db}`;

/** A primary of its own, with `db` created. */
export async function ownPrimary(db = 'app'): Promise<TestCluster> {
  const c = (await startCluster()) as TestCluster;
  psql(c, portOf(c), 'postgres', `CREATE DATABASE ${db}`);
  return c;
}

export function psql(c: TestCluster, port: number, db: string, sql: string): string {
  return pgCommand(c, 'psql', ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', '-d', db, '-Atc', sql]).trim();
}

/** A streaming standby of `primary` (`pg_basebackup -R`), started on its own port. */
export async function startStandby(primary: TestCluster): Promise<TestCluster> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'routinely-pg-standby-'));
  if (primary.runAs) execFileSync('chown', [primary.runAs, dataDir]);
  const standby: TestCluster = { ...primary, url: dbUrl(port, 'postgres'), dataDir };
  pgCommand(primary, 'pg_basebackup', [
    '-h',
    '127.0.0.1',
    '-p',
    String(portOf(primary)),
    '-U',
    'postgres',
    '-D',
    dataDir,
    '-R',
    '-X',
    'stream',
    '-c',
    'fast',
    '--no-sync',
  ]);
  startServer(standby);
  return standby;
}

/** Waits until the standby has replayed everything the primary has written. */
export async function caughtUp(primary: TestCluster, standby: TestCluster): Promise<void> {
  const lsn = psql(primary, portOf(primary), 'postgres', 'SELECT pg_current_wal_lsn()');
  for (let i = 0; i < 300; i++) {
    const ok = psql(standby, portOf(standby), 'postgres', `SELECT pg_last_wal_replay_lsn() >= '${lsn}'::pg_lsn`);
    if (ok === 't') return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the standby did not catch up within 30 s');
}

/** Synchronous replication: a commit waits for the standby (any standby: `*`). */
export function makeSynchronous(primary: TestCluster): void {
  psql(primary, portOf(primary), 'postgres', `ALTER SYSTEM SET synchronous_standby_names = '*'`);
  psql(primary, portOf(primary), 'postgres', 'SELECT pg_reload_conf()');
}

/** kill -9 of the postmaster (a crash: no shutdown checkpoint, nothing more sent). */
export function crash(c: TestCluster): void {
  const pid = Number(readFileSync(join(c.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  process.kill(pid, 'SIGKILL');
}

export function promote(c: TestCluster): void {
  pgCommand(c, 'pg_ctl', ['-D', c.dataDir, '-w', '-t', '30', 'promote']);
}

export function stop(c: TestCluster): void {
  stopServer(c, 'fast');
}

export function destroy(c: TestCluster): void {
  try {
    destroyCluster(c);
  } catch {
    rmSync(c.dataDir, { recursive: true, force: true });
  }
}

export interface Bouncer {
  port: number;
  stop(): void;
}

/** PgBouncer with a stock ini in `mode`, in front of `server`; `extra`: settings added to its
 * [pgbouncer] section (a small pool, to exhaust it). */
export async function startBouncer(
  server: TestCluster,
  mode: 'session' | 'transaction',
  extra: Record<string, string | number> = {},
): Promise<Bouncer> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'routinely-pgbouncer-'));
  writeFileSync(join(dir, 'users.txt'), '"postgres" ""\n');
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    `[databases]\n* = host=127.0.0.1 port=${portOf(server)}\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = ${port}\nauth_type = trust\nauth_file = ${join(dir, 'users.txt')}\npool_mode = ${mode}\n${Object.entries(
      extra,
    )
      .map(([k, v]) => `${k} = ${v}\n`)
      .join('')}`,
  );
  if (server.runAs) {
    const uid = Number(execFileSync('id', ['-u', server.runAs], { encoding: 'utf8' }).trim());
    for (const f of ['', 'users.txt', 'pgbouncer.ini']) chownSync(join(dir, f), uid, -1);
  }
  const argv = server.runAs
    ? ['runuser', '-u', server.runAs, '--', 'pgbouncer', join(dir, 'pgbouncer.ini')]
    : ['pgbouncer', join(dir, 'pgbouncer.ini')];
  // its own process group, killed whole: as root `runuser` forks pgbouncer as its child, and
  // killing runuser alone left pgbouncer running after the suite (issue 38)
  const child: ChildProcess = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  let log = '';
  child.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  for (let i = 0; ; i++) {
    const up = await new Promise<boolean>((resolve) => {
      const s = createServer();
      s.once('error', () => resolve(true)); // taken: pgbouncer listens
      s.listen(port, '127.0.0.1', () => s.close(() => resolve(false)));
    });
    if (up) break;
    if (i > 100 || child.exitCode !== null) throw new Error(`pgbouncer did not start: ${log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    port,
    stop: () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // gone already
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A TCP proxy to `port` that holds every chunk, each way, for `minMs`..`maxMs` (a slow link;
 * order kept). */
export async function delayingProxy(
  port: number,
  minMs: number,
  maxMs: number,
): Promise<{ port: number; close(): void }> {
  const { connect } = await import('node:net');
  const sockets = new Set<import('node:net').Socket>();
  const server = createServer((client) => {
    const upstream = connect(port, '127.0.0.1');
    sockets.add(client);
    sockets.add(upstream);
    const pipe = (from: import('node:net').Socket, to: import('node:net').Socket): void => {
      let last = 0;
      from.on('data', (chunk: Buffer) => {
        const at = Math.max(last, Date.now() + minMs + Math.random() * (maxMs - minMs));
        last = at;
        setTimeout(() => {
          if (!to.destroyed) to.write(chunk);
        }, at - Date.now());
      });
      from.on('close', () => setTimeout(() => to.destroy(), Math.max(0, last - Date.now()) + 1));
      from.on('error', () => {});
    };
    pipe(client, upstream);
    pipe(upstream, client);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as { port: number }).port,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

/** Every per-second tick of `ids` from `from` to `to` (epoch ms, whole seconds), as the database
 * holds them: how many fires each has recorded and whether a claim of it is left. */
export interface TickAccount {
  expected: number;
  /** Ticks with exactly one record. */
  recorded: number;
  /** Ticks with no record and no claim: nobody took them (no scheduler could claim them). */
  unclaimed: number;
  /** Ticks with a claim left and no record: claimed and lost (never allowed, SPEC §9). */
  claimedLost: number;
  /** Ticks recorded more than once (never allowed). */
  twice: number;
  /** Which, for a failure message. */
  gaps: string[];
}

export async function tickAccount(url: string, ids: readonly string[], from: number, to: number): Promise<TickAccount> {
  const { sql } = await import('./pg-test.js');
  const rows = await sql<{ routine: string; at: string }>(
    url,
    `SELECT routine, entry->>'scheduled_at' AS at FROM routinely_history`,
  );
  const claims = await sql<{ routine: string; at: Date }>(
    url,
    'SELECT routine, scheduled_at AS at FROM routinely_ticks',
  );
  const key = (routine: string, t: number): string => `${routine} ${t}`;
  const records = new Map<string, number>();
  for (const r of rows)
    records.set(key(r.routine, Date.parse(r.at)), (records.get(key(r.routine, Date.parse(r.at))) ?? 0) + 1);
  const claimed = new Set(claims.map((c) => key(c.routine, c.at.getTime())));
  const a: TickAccount = { expected: 0, recorded: 0, unclaimed: 0, claimedLost: 0, twice: 0, gaps: [] };
  for (const id of ids) {
    for (let t = from; t <= to; t += 1000) {
      a.expected++;
      const n = records.get(key(id, t)) ?? 0;
      const at = new Date(t).toISOString().slice(11, 19);
      if (n === 1) a.recorded++;
      else if (n > 1) (a.twice++, a.gaps.push(`${id}@${at}×${n}`));
      else if (claimed.has(key(id, t))) (a.claimedLost++, a.gaps.push(`${id}@${at} claimed, no record`));
      else (a.unclaimed++, a.gaps.push(`${id}@${at} unclaimed`));
    }
  }
  return a;
}

/** `n` routines firing every second, beside no other work (no exec lock). */
export function perSecond(n: number): { ids: string[]; routines: object[] } {
  const ids = Array.from({ length: n }, (_, i) => `r${String(i).padStart(2, '0')}`);
  return {
    ids,
    routines: ids.map((id) => ({ id, schedule: '* * * * * *', action: 'command', run: 'true', exclusive: false })),
  };
}

/** Schedulers started on `hosts`, each started; SIGKILLed at the test's end should it fail. */
export async function schedulers(
  hosts: string[],
  project: string,
  env: Record<string, string>,
  timeoutMs: number,
): Promise<Spawned[]> {
  const all = hosts.map((h) =>
    startCli(['scheduler', 'start'], { cwd: project, env: { ...env, ROUTINELY_HOST_ID: h }, timeoutMs }),
  );
  onTestFinished(() => {
    for (const s of all) if (s.child.exitCode === null) s.child.kill('SIGKILL');
  });
  for (const s of all) await s.waitFor(/\[scheduler\] started/, 60_000);
  return all;
}

/** SIGTERM to each; each exits 0. */
export async function stopAll(all: Spawned[]): Promise<void> {
  for (const s of all) s.child.kill('SIGTERM');
  for (const s of all) expect((await s.exited).code, s.stderr()).toBe(0);
}

/** The first whole second after the next one, and the whole second `n` seconds ago (epoch ms):
 * the ticks a window of a test accounts for. */
export const nextSecond = (): number => Math.ceil(Date.now() / 1000) * 1000 + 1000;
export const secondsAgo = (n: number): number => Math.floor(Date.now() / 1000) * 1000 - n * 1000;
