// PostgreSQL as teams run it (docs/postgres.md "Production topologies"): a replicated primary
// that fails over, PgBouncer with a stock ini in session and transaction mode, multi-host URLs,
// a standby in the URL. Real servers of our own, killed and promoted; the built CLI.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { eventually, runCli, sleep, startCli, type Spawned } from '../helpers/cli.js';
import { freshDatabase, pgCluster, sql } from '../helpers/pg-test.js';
import {
  caughtUp, crash, dbUrl, delayingProxy, destroy, freePort, haveBouncer, makeSynchronous, ownPrimary, portOf, promote, psql, startBouncer, startStandby, stop, tickAccount,
} from '../helpers/pg-topology.js';
import { startServer } from '../helpers/postgres.js';
import { testProject } from '../helpers/testdir.js';
import { loadProject, openBackend } from '../../src/index.js';

const cluster = pgCluster();
const suite = cluster ? describe : describe.skip; // skipped only outside CI, where no server could be started
const TTL_S = 5;

/** `<who> start|end <epoch ms> <generation>` lines appended by the commands. */
const stamp = (file: string, who: string): string =>
  `echo "${who} start $(date +%s%3N) $ROUTINELY_LOCK_GENERATION" >> ${file}; sleep 30; echo "${who} end $(date +%s%3N)" >> ${file}`;

function events(file: string): Map<string, { start: number; gen: number; end?: number }> {
  const m = new Map<string, { start: number; gen: number; end?: number }>();
  if (!existsSync(file)) return m;
  for (const line of readFileSync(file, 'utf8').trim().split('\n')) {
    const [who, kind, t, gen] = line.split(' ');
    if (kind === 'start') m.set(who!, { start: Number(t), gen: Number(gen) });
    else m.get(who!)!.end = Number(t);
  }
  return m;
}

suite('failover of a replicated primary: one holder, generations only rise', () => {
  it.each(['asynchronous, the standby lagging', 'synchronous'])('%s', { timeout: 120_000 }, async (mode) => {
    const primary = await ownPrimary('app');
    onTestFinished(() => destroy(primary));
    const project = testProject({ project: 'app', backend: { type: 'postgres' }, lock: { ttlSeconds: TTL_S } });
    const ev = join(project, 'events');
    const onPrimary = { ROUTINELY_DATABASE_URL: dbUrl(portOf(primary), 'app') };
    // the schema and a first lease exist, and reach the standby
    expect((await runCli(['lock', 'run', '--', 'true'], { cwd: project, env: onPrimary })).code).toBe(0);
    const standby = await startStandby(primary);
    onTestFinished(() => destroy(standby));
    await caughtUp(primary, standby);
    const onStandby = { ROUTINELY_DATABASE_URL: dbUrl(portOf(standby), 'app') };
    // a URL that reaches a standby: exit 74 naming it, never "unexpected error"
    const ro = await runCli(['lock', 'run', '--', 'true'], { cwd: project, env: onStandby });
    expect(ro.code, ro.stderr).toBe(74);
    expect(ro.stderr).toMatch(new RegExp(`database 127\\.0\\.0\\.1:${portOf(standby)}/app: the server is a read-only standby`));
    if (mode === 'synchronous') makeSynchronous(primary);
    else stop(standby); // lags from here on: it never sees A's lease

    const a = startCli(['lock', 'run', '--', 'sh', '-c', stamp(ev, 'A')], { cwd: project, env: onPrimary, timeoutMs: 120_000 });
    await eventually(() => events(ev).has('A'), 20_000, 'A started'); crash(primary);
    if (mode !== 'synchronous') startServer(standby);
    promote(standby);
    const b = startCli(['lock', 'run', '--if-busy', 'wait', '--', 'sh', '-c', stamp(ev, 'B').replace('sleep 30', 'sleep 0.2')], { cwd: project, env: onStandby, timeoutMs: 120_000 });
    const aExit = await a.exited;
    const aEnded = Date.now();
    expect(aExit.code, a.stderr()).not.toBe(0); // its lease ran out with its primary: its work was stopped
    expect((await b.exited).code, b.stderr()).toBe(0);
    const e = events(ev);
    const A = e.get('A')!;
    const B = e.get('B')!;
    expect(A.end, 'A was stopped, never finished').toBeUndefined();
    expect(B.start, 'B started only after A was gone').toBeGreaterThanOrEqual(aEnded - 500);
    expect(B.gen, `B's generation ${B.gen} above A's ${A.gen}`).toBeGreaterThan(A.gen);
    // in plain words: nobody holds it, and why not yet
    expect(b.stderr()).toMatch(/waiting for the exec lock, held by no one yet: the database failed over \(timeline 2, first seen [^)]+\), and no lease is granted until every lease of the old primary has run out, one TTL later \(\d+s more\)/);
  });
});

const bouncerSuite = cluster && (haveBouncer || process.env.CI === 'true') ? describe : describe.skip;

bouncerSuite('PgBouncer with a stock ini', () => {
  it.each(['session', 'transaction'] as const)('%s pooling: a lease\'s prepared statements, wherever the pooler sends them (in transaction mode the process goes on unnamed)', async (mode) => {
    expect(haveBouncer, 'pgbouncer is required (CI installs it)').toBe(true);
    const direct = await freshDatabase(cluster!);
    const bouncer = await startBouncer(cluster!, mode);
    onTestFinished(() => bouncer.stop());
    const dir = testProject({ project: 'app', backend: { type: 'postgres', url: dbUrl(bouncer.port, new URL(direct).pathname.slice(1)) } });
    const backend = await openBackend(loadProject({ cwd: dir }));
    onTestFinished(() => backend.close());
    // four keys at once from one process: its connections' statements reach many server connections
    const generations = await Promise.all(['a', 'b', 'c', 'd'].map(async (key) => {
      const seen: number[] = [];
      for (let i = 0; i < 40; i++) {
        const r = await backend.lock.acquire(`k-${key}`, { command: 'test' }, { ifBusy: 'fail' });
        if (!r.ok) throw new Error(`k-${key}: ${r.reason} ${r.why}`);
        seen.push(r.lease.generation);
        expect((await r.lease.release()).released).toBe(true);
      }
      return seen;
    }));
    for (const g of generations) expect(g).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
  });

  it.each(['session', 'transaction'] as const)('%s pooling: 6 first commands at once migrate once; routine run, list and 3 schedulers fire each tick once', async (mode) => {
    expect(haveBouncer, 'pgbouncer is required (CI installs it)').toBe(true);
    const direct = await freshDatabase(cluster!);
    const db = new URL(direct).pathname.slice(1);
    const bouncer = await startBouncer(cluster!, mode);
    onTestFinished(() => bouncer.stop());
    const url = dbUrl(bouncer.port, db);
    const ev = 'events';
    const project = testProject({
      project: 'app', backend: { type: 'postgres' },
      routines: [
        { id: 'tick', schedule: '* * * * * *', action: 'command', run: `echo "S $(date +%s%N)" >> ${ev}; sleep 0.1; echo "E $(date +%s%N)" >> ${ev}` },
        { id: 'once', schedule: '0 0 1 1 *', action: 'command', run: 'echo once' },
      ],
    });
    const env = { ROUTINELY_DATABASE_URL: url };
    const first = await Promise.all(Array.from({ length: 6 }, () => runCli(['lock', 'run', '--if-busy', 'wait', '--', 'true'], { cwd: project, env })));
    for (const r of first) expect(r.code, r.stderr).toBe(0);
    const versions = await sql<{ version: number }>(direct, 'SELECT version FROM routinely_schema ORDER BY version');
    expect(versions.map((v) => v.version)).toEqual([1]);
    // no advisory lock left behind in a pooled server connection
    expect(await sql(direct, `SELECT 1 FROM pg_locks WHERE locktype = 'advisory'`)).toHaveLength(0);
    expect((await runCli(['routine', 'run', 'once'], { cwd: project, env })).code).toBe(0);
    const list = await runCli(['routine', 'list'], { cwd: project, env });
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/once .* ok /);

    const schedulers = ['h1', 'h2', 'h3'].map((h) => startCli(['scheduler', 'start'], { cwd: project, env: { ...env, ROUTINELY_HOST_ID: h }, timeoutMs: 120_000 }));
    for (const s of schedulers) await s.waitFor(/\[scheduler\] started/);
    await sleep(5000);
    for (const s of schedulers) s.child.kill('SIGTERM');
    for (const s of schedulers) expect((await s.exited).code, s.stderr()).toBe(0);
    const history = await sql<{ entry: { scheduled_at: string; result: string } }>(direct, `SELECT entry FROM routinely_history WHERE routine = 'tick'`);
    const times = history.map((h) => h.entry.scheduled_at);
    expect(times.length).toBeGreaterThanOrEqual(3);
    expect(new Set(times).size, 'no tick recorded twice').toBe(times.length);
    // the commands never overlapped
    const lines = readFileSync(join(project, ev), 'utf8').trim().split('\n').map((l) => l.split(' '));
    let depth = 0;
    for (const [k] of lines) {
      depth += k === 'S' ? 1 : -1;
      expect(depth).toBeLessThanOrEqual(1);
    }
    for (const s of schedulers) expect(s.stderr()).not.toMatch(/unexpected error|unsupported startup parameter|timed out/);
  });
});

/** `n` routines firing every second, beside no other work (no exec lock). */
const perSecond = (n: number): { ids: string[]; routines: object[] } => {
  const ids = Array.from({ length: n }, (_, i) => `r${String(i).padStart(2, '0')}`);
  return { ids, routines: ids.map((id) => ({ id, schedule: '* * * * * *', action: 'command', run: 'true', exclusive: false })) };
};

/** Schedulers started on `hosts`, each started; SIGKILLed at the test's end should it fail. */
async function schedulers(hosts: string[], project: string, env: Record<string, string>, timeoutMs: number): Promise<Spawned[]> {
  const all = hosts.map((h) => startCli(['scheduler', 'start'], { cwd: project, env: { ...env, ROUTINELY_HOST_ID: h }, timeoutMs }));
  onTestFinished(() => {
    for (const s of all) if (s.child.exitCode === null) s.child.kill('SIGKILL');
  });
  for (const s of all) await s.waitFor(/\[scheduler\] started/, 60_000);
  return all;
}

async function stopAll(all: Spawned[]): Promise<void> {
  for (const s of all) s.child.kill('SIGTERM');
  for (const s of all) expect((await s.exited).code, s.stderr()).toBe(0);
}

const nextSecond = (): number => Math.ceil(Date.now() / 1000) * 1000 + 1000;
const secondsAgo = (n: number): number => Math.floor(Date.now() / 1000) * 1000 - n * 1000;

bouncerSuite('PgBouncer in session mode, as deployed', () => {
  it('stock ini: 10 schedulers x 20 per-second routines (backend.poolSize 2: 20 connections, its default_pool_size) record every tick exactly once; an 11th process is told the pool is exhausted', { timeout: 240_000 }, async () => {
    expect(haveBouncer, 'pgbouncer is required (CI installs it)').toBe(true);
    const direct = await freshDatabase(cluster!);
    const bouncer = await startBouncer(cluster!, 'session');
    onTestFinished(() => bouncer.stop());
    const { ids, routines } = perSecond(20);
    const project = testProject({ project: 'app', backend: { type: 'postgres' }, routines });
    const env = { ROUTINELY_DATABASE_URL: dbUrl(bouncer.port, new URL(direct).pathname.slice(1)) };
    expect((await runCli(['lock', 'run', '--', 'true'], { cwd: project, env })).code).toBe(0); // the schema
    const all = await schedulers(Array.from({ length: 10 }, (_, i) => `h${i + 1}`), project, env, 230_000);
    const from = nextSecond();
    await sleep(20_000);
    // every server connection of the pool is a scheduler's: one more client waits in PgBouncer's
    // queue, and is told that, not "timed out"
    const extra = await runCli(['lock', 'status'], { cwd: project, env, timeoutMs: 60_000 });
    expect(extra.code, extra.stderr).toBe(74);
    expect(extra.stderr).toMatch(/behind PgBouncer in session mode this is a wait in its queue for a server connection: its pool is exhausted/);
    await sleep(2000);
    const to = secondsAgo(2);
    await stopAll(all);
    const a = await tickAccount(direct, ids, from, to);
    console.log(`session mode, 10 schedulers: ${a.expected} ticks, ${a.recorded} recorded once, ${a.unclaimed} unclaimed, ${a.claimedLost} claimed and lost, ${a.twice} twice`);
    expect(a, a.gaps.slice(0, 40).join(' ')).toMatchObject({ recorded: a.expected, twice: 0, claimedLost: 0 });
    for (const s of all) {
      expect(s.stdout()).not.toMatch(/lock lost|not started/);
      expect(s.stderr()).not.toMatch(/max_client_conn|timed out|exhausted|unexpected error/);
    }
  });
});

suite('a claimed tick is fired, recorded or given back', () => {
  const cases = [
    'the pool exhausted by another client (transaction mode, default_pool_size 1, query_wait_timeout 2)',
    'the step after the claim stalled past its time-out (an ACCESS EXCLUSIVE lock on the state table for 20 s)',
  ];
  it.each(cases)('%s: 3 schedulers x 10 per-second routines, no tick claimed and lost, none recorded twice', { timeout: 180_000 }, async (how) => {
    const exhausted = how === cases[0];
    expect(!exhausted || haveBouncer, 'pgbouncer is required (CI installs it)').toBe(true);
    const direct = await freshDatabase(cluster!);
    const bouncer = exhausted ? await startBouncer(cluster!, 'transaction', { default_pool_size: 1, query_wait_timeout: 2 }) : null;
    if (bouncer) onTestFinished(() => bouncer.stop());
    const url = bouncer ? dbUrl(bouncer.port, new URL(direct).pathname.slice(1)) : direct;
    const { ids, routines } = perSecond(10);
    const project = testProject({ project: 'app', backend: { type: 'postgres' }, routines });
    const env = { ROUTINELY_DATABASE_URL: url };
    expect((await runCli(['lock', 'run', '--', 'true'], { cwd: project, env })).code).toBe(0);
    const all = await schedulers(['h1', 'h2', 'h3'], project, env, 170_000);
    const from = nextSecond();
    let rounds = 0;
    if (exhausted) {
      // another client takes the one server connection for 3 s, again and again: what waits
      // longer than 2 s is cut off by PgBouncer
      for (const until = Date.now() + 20_000; Date.now() < until; rounds++) {
        await sql(url, 'SELECT pg_sleep(3)');
        await sleep(1000);
      }
    } else {
      // claims go on (routinely_ticks is not locked); what comes next (is it paused? the open
      // marker) waits for the lock, past the statements' own time-outs (15 s on the server, 17 s
      // on the client)
      await sleep(2000);
      rounds = 1;
      await sql(direct, `BEGIN; LOCK TABLE routinely_routine_state IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(20); COMMIT`);
    }
    await sleep(5000); // the spools flush, the claims without an answer are given back
    const to = secondsAgo(7);
    await stopAll(all);
    const a = await tickAccount(direct, ids, from, to);
    console.log(`${how}: ${rounds} rounds, ${a.expected} ticks, ${a.recorded} recorded once, ${a.unclaimed} unclaimed, ${a.claimedLost} claimed and lost, ${a.twice} twice`);
    expect(a, a.gaps.slice(0, 40).join(' ')).toMatchObject({ twice: 0, claimedLost: 0 });
    expect(a.recorded, 'most ticks recorded').toBeGreaterThan(a.expected / 2);
  });
});

suite('multi-host URLs (libpq)', () => {
  it('the first host down, the second the primary: target_session_attrs=read-write follows the primary', async () => {
    const direct = await freshDatabase(cluster!);
    const db = new URL(direct).pathname.slice(1);
    const down = await freePort();
    const project = testProject({ project: 'app', backend: { type: 'postgres' } });
    const url = `postgres://postgres@127.0.0.1:${down},127.0.0.1:${portOf(cluster!)}/${db}?target_session_attrs=read-write`;
    const r = await runCli(['lock', 'run', '--', 'sh', '-c', 'echo ran > ran'], { cwd: project, env: { ROUTINELY_DATABASE_URL: url } });
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(join(project, 'ran'), 'utf8')).toBe('ran\n');
    const st = await runCli(['lock', 'status'], { cwd: project, env: { ROUTINELY_DATABASE_URL: url } });
    expect(st.code, st.stderr).toBe(0);
    // every host down: 74, naming each
    const none = await runCli(['lock', 'run', '--', 'true'], { cwd: project, env: { ROUTINELY_DATABASE_URL: `postgres://postgres@127.0.0.1:${down},127.0.0.1:${down}/${db}` } });
    expect(none.code).toBe(74);
    expect(none.stderr).toMatch(new RegExp(`no host is reachable \\(127\\.0\\.0\\.1:${down}/${db}: connection refused[^;]*; 127\\.0\\.0\\.1:${down}/${db}: connection refused`));
    // a password with '/' (base64) is never shown, in any message
    writeFileSync(join(project, 'x'), '');
    const secret = await runCli(['lock', 'status'], { cwd: project, env: { ROUTINELY_DATABASE_URL: `postgres://app:Zm9v/YmFy+cXV4@127.0.0.1:${down}/${db}` } });
    expect(secret.code).toBe(74);
    expect(secret.stderr).not.toMatch(/YmFy|Zm9v/);
  });
});

suite('rolling restarts of schedulers sharing a database', () => {
  it('every scheduler stalled at once for 3 s (SIGSTOP, as a loaded machine does): each tick it slept through is claimed and recorded once', { timeout: 120_000 }, async () => {
    const url = await freshDatabase(cluster!);
    const { ids, routines } = perSecond(10);
    const project = testProject({ project: 'app', backend: { type: 'postgres' }, routines });
    const env = { ROUTINELY_DATABASE_URL: url };
    const all = await schedulers(['h1', 'h2'], project, env, 110_000);
    const from = nextSecond();
    for (let round = 0; round < 2; round++) {
      await sleep(3000);
      for (const s of all) s.child.kill('SIGSTOP');
      await sleep(3000);
      for (const s of all) s.child.kill('SIGCONT');
    }
    await sleep(3000);
    const to = secondsAgo(2);
    await stopAll(all);
    const a = await tickAccount(url, ids, from, to);
    console.log(`stalled schedulers: ${a.expected} ticks, ${a.recorded} recorded once, ${a.unclaimed} unclaimed, ${a.claimedLost} claimed and lost, ${a.twice} twice`);
    expect(a, a.gaps.slice(0, 60).join(' ')).toMatchObject({ recorded: a.expected, twice: 0, claimedLost: 0, unclaimed: 0 });
  });

  it('3 schedulers x 20 per-second routines, one restarted by SIGTERM every 6 s: every tick recorded exactly once', { timeout: 180_000 }, async () => {
    const url = await freshDatabase(cluster!);
    const ids = Array.from({ length: 20 }, (_, i) => `r${String(i).padStart(2, '0')}`);
    const project = testProject({
      project: 'app', backend: { type: 'postgres' },
      routines: ids.map((id) => ({ id, schedule: '* * * * * *', action: 'command', run: 'true', exclusive: false })),
    });
    const env = { ROUTINELY_DATABASE_URL: url };
    const start = async (host: string) => {
      const s = startCli(['scheduler', 'start'], { cwd: project, env: { ...env, ROUTINELY_HOST_ID: host }, timeoutMs: 170_000 });
      await s.waitFor(/\[scheduler\] started/);
      return s;
    };
    const hosts = ['h1', 'h2', 'h3'];
    const running = await Promise.all(hosts.map(start));
    const stopped: typeof running = [];
    const from = Math.ceil(Date.now() / 1000) * 1000 + 1000;
    for (let round = 0; round < 4; round++) {
      await sleep(6000);
      const i = round % 3;
      running[i]!.child.kill('SIGTERM');
      expect((await running[i]!.exited).code, running[i]!.stderr()).toBe(0);
      stopped.push(running[i]!);
      running[i] = await start(hosts[i]!);
    }
    await sleep(3000);
    const to = Math.floor(Date.now() / 1000) * 1000 - 2000;
    for (const s of running) s.child.kill('SIGTERM');
    for (const s of running) expect((await s.exited).code, s.stderr()).toBe(0);
    expect((to - from) / 1000 + 1).toBeGreaterThan(20);
    const a = await tickAccount(url, ids, from, to);
    console.log(`rolling restarts: ${a.expected} ticks, ${a.recorded} recorded once, ${a.unclaimed} unclaimed, ${a.claimedLost} claimed and lost, ${a.twice} twice`);
    // what went wrong where, should it: the ticks, and what the schedulers said about them
    const said = [...stopped, ...running].map((s) => s.stdout().split('\n').filter((l) => /warning|skipped|lost|late|step/.test(l)).slice(-20).join('\n')).join('\n--\n');
    expect(a, `${a.gaps.slice(0, 60).join(' ')}\n${said}`).toMatchObject({ recorded: a.expected, twice: 0, claimedLost: 0, unclaimed: 0 });
  });
});

suite('a slow link to the database', () => {
  it('SCRAM password authentication over round trips of 2.6–3 s, TTL 30: the connect time-out follows the TTL, a lease outlives its TTL; connect_timeout in the URL is honoured', { timeout: 300_000 }, async () => {
    const primary = await ownPrimary('app');
    onTestFinished(() => destroy(primary));
    psql(primary, portOf(primary), 'postgres', `SET password_encryption = 'scram-sha-256'; CREATE ROLE app LOGIN PASSWORD 's3cret'; ALTER DATABASE app OWNER TO app`);
    // the role authenticates with SCRAM (three round trips after the startup packet), not trust
    const hba = join(primary.dataDir, 'pg_hba.conf');
    writeFileSync(hba, `host all app 127.0.0.1/32 scram-sha-256\n${readFileSync(hba, 'utf8')}`);
    psql(primary, portOf(primary), 'postgres', 'SELECT pg_reload_conf()');
    const proxy = await delayingProxy(portOf(primary), 1300, 1500);
    onTestFinished(() => proxy.close());
    const project = testProject({ project: 'app', backend: { type: 'postgres' }, lock: { ttlSeconds: 30 } });
    const slow = `postgres://app:s3cret@127.0.0.1:${proxy.port}/app`;
    const wrong = await runCli(['lock', 'status'], { cwd: project, env: { ROUTINELY_DATABASE_URL: `postgres://app:wrong@127.0.0.1:${portOf(primary)}/app` } });
    expect(wrong.stderr, 'SCRAM is in force').toMatch(/authentication failed/);
    const r = await runCli(['lock', 'run', '--', 'sh', '-c', 'sleep 32; echo done'], { cwd: project, env: { ROUTINELY_DATABASE_URL: slow }, timeoutMs: 280_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('done');
    expect(r.stderr).not.toMatch(/lost|timed out|unexpected/);
    // a connect time-out of the user's own, shorter than SCRAM takes here
    const short = await runCli(['lock', 'status'], { cwd: project, env: { ROUTINELY_DATABASE_URL: `${slow}?connect_timeout=3` }, timeoutMs: 60_000 });
    expect(short.code, short.stderr).toBe(74);
    expect(short.stderr).toMatch(/timed out connecting \(no answer within 3s; set connect_timeout=N in the URL for a slower link\)/);
    expect(`${r.stderr}${short.stderr}`).not.toContain('s3cret');
  });


  it('3 s round trips, TTL 10 / refresh 3: a scheduler\'s lease and an exec lease nobody else takes are kept for 60 s', { timeout: 300_000 }, async () => {
    const url = new URL(await freshDatabase(cluster!));
    // the schema first, directly
    const project = testProject({ project: 'app', backend: { type: 'postgres' }, lock: { ttlSeconds: 10, refreshSeconds: 3 } });
    expect((await runCli(['lock', 'run', '--', 'true'], { cwd: project, env: { ROUTINELY_DATABASE_URL: url.toString() } })).code).toBe(0);
    const proxy = await delayingProxy(Number(url.port), 1300, 1500); // round trips of 2.6–3 s: the slow end of 1–3 s
    onTestFinished(() => proxy.close());
    url.port = String(proxy.port);
    const env = { ROUTINELY_DATABASE_URL: url.toString() };
    // the scheduler's own lease (no command of its own to report) and an exec lease
    const s = startCli(['scheduler', 'start'], { cwd: project, env, timeoutMs: 290_000 });
    await s.waitFor(/\[scheduler\] started/, 60_000);
    const r = await runCli(['lock', 'run', '--', 'sh', '-c', 'sleep 60; echo done'], { cwd: project, env, timeoutMs: 290_000 });
    expect(r.stderr).not.toMatch(/lost|unexpected/);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('done');
    expect(s.child.exitCode, s.stdout()).toBeNull();
    expect(s.stdout()).not.toMatch(/lock lost|lease/);
    s.child.kill('SIGTERM');
    expect((await s.exited).code, s.stdout()).toBe(0);
  });
});
