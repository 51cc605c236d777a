// The PostgreSQL backend when the server stalls or the network splits (issue 15): a holder that
// loses its lease has its work dead before the next holder starts (SPEC §4.14), whether the
// server was paused (SIGSTOP) or a partition cut the holder off while another host still reached
// the database. Each test runs its own cluster: pausing or stopping the shared one would disturb
// the other test files.

import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer, connect as netConnect, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import {
  eventually,
  heartbeatWritten,
  lineIn,
  processRuns,
  runCli,
  sleep,
  startCli,
  type Spawned,
} from '../helpers/cli.js';
import { freshDatabase, pgCluster } from '../helpers/pg-test.js';
import {
  destroyCluster,
  pgCommand,
  startCluster,
  startServer,
  stopServer,
  type TestCluster,
} from '../helpers/postgres.js';
import { testProject } from '../helpers/testdir.js';

const cluster = pgCluster();
const suite = cluster ? describe : describe.skip; // skipped only outside CI, where no server could be started

/** Marks (epoch seconds with microseconds, this host's clock) a command wrote, one per line. */
function marks(file: string): number[] {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** A shell loop that writes a mark every 20 ms and ignores SIGTERM (a task slow to exit). */
const stubborn = (file: string): string =>
  `trap '' TERM; echo up; while :; do echo "$EPOCHREALTIME" >> '${file}'; sleep 0.02; done`;

/** The postmaster of a cluster and every process it started (its backends and workers). */
/** A signal to a server process; one that has exited since it was listed is no error. */
function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

function serverPids(c: TestCluster): number[] {
  const postmaster = Number(readFileSync(join(c.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const children = readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster;
      } catch {
        return false;
      }
    });
  return [postmaster, ...children];
}

/** A TCP proxy in front of the server that can be cut: while cut, nothing is forwarded and
 * sockets stay open (a partition, not a refused connection); healing destroys the connections
 * that were cut, as a long partition's TCP connections end. */
async function partitionProxy(target: URL): Promise<{ url: string; cut(): void; heal(): void; close(): void }> {
  let cut = false;
  const pairs = new Set<[Socket, Socket | null]>();
  const server: Server = createServer((client) => {
    const pair: [Socket, Socket | null] = [client, null];
    pairs.add(pair);
    client.on('error', () => {});
    client.on('close', () => {
      pair[1]?.destroy();
      pairs.delete(pair);
    });
    if (cut) return; // held open, never answered
    const upstream = netConnect(Number(target.port), target.hostname);
    pair[1] = upstream;
    upstream.on('error', () => client.destroy());
    upstream.on('close', () => client.destroy());
    client.on('data', (d) => {
      if (!cut) upstream.write(d);
    });
    upstream.on('data', (d) => {
      if (!cut) client.write(d);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = new URL(target);
  url.port = String((server.address() as { port: number }).port);
  return {
    url: url.toString(),
    cut: () => {
      cut = true;
    },
    heal: () => {
      for (const [a, b] of pairs) {
        a.destroy();
        b?.destroy();
      }
      cut = false;
    },
    close: () => {
      for (const [a, b] of pairs) {
        a.destroy();
        b?.destroy();
      }
      server.close();
    },
  };
}

async function ownCluster(): Promise<{ own: TestCluster; url: string }> {
  const own = await startCluster();
  onTestFinished(() => destroyCluster(own));
  return { own, url: await freshDatabase(own) };
}

/** B takes the lock with `--if-busy wait` and writes its own marks until we stop it. */
function nextHolder(dir: string, url: string, file: string): Spawned {
  return startCli(
    [
      'lock',
      'run',
      '--if-busy',
      'wait',
      '--wait-timeout',
      '40',
      '--',
      'bash',
      '-c',
      `echo took-over; while :; do echo "$EPOCHREALTIME" >> '${file}'; sleep 0.02; done`,
    ],
    {
      cwd: dir,
      env: { ROUTINELY_DATABASE_URL: url, ROUTINELY_HOST_ID: 'host-b' },
      timeoutMs: 60_000,
    },
  );
}

/** A's last mark must come before B's first (same host clock); returns the gap in ms. */
function gapMs(a: string, b: string): number {
  const lastA = Math.max(...marks(a));
  const firstB = Math.min(...marks(b));
  expect(marks(a).length).toBeGreaterThan(0);
  expect(marks(b).length, 'the next holder ran').toBeGreaterThan(0);
  expect(lastA, `A still worked ${((lastA - firstB) * 1000).toFixed(0)} ms after B started`).toBeLessThan(firstB);
  return Math.round((firstB - lastA) * 1000);
}

suite('PostgreSQL backend: outages', () => {
  it.each(['lock run', 'exec run'] as const)(
    "the server paused (SIGSTOP) for 2× the TTL: the holder's %s command, which ignores SIGTERM, is dead before the next holder starts",
    async (how) => {
      const { own, url } = await ownCluster();
      const dir = testProject({
        project: 'app',
        backend: { type: 'postgres' },
        lock: { ttlSeconds: 2 },
        exec: { tasks: [{ id: 't', run: 'bash ./stubborn.sh' }] },
      });
      const [fa, fb] = [join(dir, 'marks.A'), join(dir, 'marks.B')];
      writeFileSync(join(dir, 'stubborn.sh'), stubborn(fa));
      const args = how === 'lock run' ? ['lock', 'run', '--', 'bash', './stubborn.sh'] : ['exec', 'run', 't'];
      const a = startCli(args, {
        cwd: dir,
        env: { ROUTINELY_DATABASE_URL: url, ROUTINELY_HOST_ID: 'host-a' },
        timeoutMs: 60_000,
      });
      await eventually(() => marks(fa).length > 0, 15_000, 'A works');
      await heartbeatWritten(dir, { ROUTINELY_DATABASE_URL: url });
      const pids = serverPids(own);
      for (const pid of pids) signal(pid, 'SIGSTOP');
      let b: Spawned;
      try {
        b = nextHolder(dir, url, fb);
        await sleep(4000); // 2× TTL
      } finally {
        // the backends first: a backend that was exiting when it was stopped is a zombie the
        // postmaster reaps as soon as it runs again
        for (const pid of [...pids].reverse()) signal(pid, 'SIGCONT');
      }
      expect((await a.exited).code, a.stdout() + a.stderr()).toBe(1);
      expect(a.stdout() + a.stderr()).toMatch(how === 'lock run' ? /lock lost: / : /ABORTED/);
      await b.waitFor(/took-over/, 30_000);
      await eventually(() => marks(fb).length > 0, 15_000, 'B works');
      b.child.kill('SIGTERM');
      await b.exited;
      const gap = gapMs(fa, fb);
      console.log(`pause (${how}): A's last mark ${gap} ms before B's first`);
    },
  );

  it.each(['lock run', 'exec run'] as const)(
    'a partition cuts the holder off while the next holder reaches the server: its %s command is dead before the next holder starts',
    async (how) => {
      const { url } = await ownCluster();
      const proxy = await partitionProxy(new URL(url));
      onTestFinished(() => proxy.close());
      const dir = testProject({
        project: 'app',
        backend: { type: 'postgres' },
        lock: { ttlSeconds: 2 },
        exec: { tasks: [{ id: 't', run: 'bash ./stubborn.sh' }] },
      });
      const [fa, fb] = [join(dir, 'marks.A'), join(dir, 'marks.B')];
      writeFileSync(join(dir, 'stubborn.sh'), stubborn(fa));
      const args = how === 'lock run' ? ['lock', 'run', '--', 'bash', './stubborn.sh'] : ['exec', 'run', 't'];
      const a = startCli(args, {
        cwd: dir,
        env: { ROUTINELY_DATABASE_URL: proxy.url, ROUTINELY_HOST_ID: 'host-a' },
        timeoutMs: 60_000,
      });
      await eventually(() => marks(fa).length > 0, 15_000, 'A works');
      await heartbeatWritten(dir, { ROUTINELY_DATABASE_URL: url });
      proxy.cut();
      const b = nextHolder(dir, url, fb);
      try {
        await b.waitFor(/took-over/, 30_000);
        await sleep(4000); // the cut lasts at least 2× TTL
      } finally {
        proxy.heal();
      }
      expect((await a.exited).code, a.stdout() + a.stderr()).toBe(1);
      expect(a.stdout() + a.stderr()).toMatch(how === 'lock run' ? /lock lost: / : /ABORTED/);
      b.child.kill('SIGTERM');
      await b.exited;
      const gap = gapMs(fa, fb);
      console.log(`partition (${how}): A's last mark ${gap} ms before B's first`);
    },
  );

  /** Task `a` succeeds once `go` exists; `b` runs until `fast` exists. Both started, then the
   * server stops: `a`'s success cannot be stored, the lease runs out, `b` is stopped. */
  async function abortedDuringOutage(
    own: TestCluster,
    url: string,
  ): Promise<{ dir: string; holder: Spawned; runId: string }> {
    const dir = testProject({
      project: 'app',
      backend: { type: 'postgres' },
      lock: { ttlSeconds: 2 },
      exec: {
        parallel: 2,
        tasks: [
          { id: 'a', run: 'echo started > a.up; while [ ! -f go ]; do sleep 0.05; done' },
          { id: 'b', run: 'echo "$$" > b.pid; [ -f fast ] || sleep 60' },
        ],
      },
    });
    const holder = startCli(['exec', 'run'], { cwd: dir, env: { ROUTINELY_DATABASE_URL: url }, timeoutMs: 60_000 });
    await eventually(() => existsSync(join(dir, 'a.up')), 15_000, 'task a started');
    const b = Number((await lineIn(join(dir, 'b.pid'), /(\d+)/, 15_000, 'task b started'))[1]);
    await holder.waitFor(/started a[\s\S]*started b|started b[\s\S]*started a/);
    const runId = (await holder.waitFor(/run (r-[A-Za-z0-9-]+)/))[1]!;
    // their start events are stored (what another host reads)
    await expect
      .poll(
        async () => {
          const shown = JSON.parse(
            (await runCli(['exec', 'show', runId, '--json'], { cwd: dir, env: { ROUTINELY_DATABASE_URL: url } }))
              .stdout || '{}',
          ) as { tasks?: Record<string, { status: string }> };
          return [shown.tasks?.a?.status, shown.tasks?.b?.status];
        },
        { timeout: 15_000 },
      )
      .toEqual(['running', 'running']);
    stopServer(own, 'fast');
    writeFileSync(join(dir, 'go'), '');
    await holder.waitFor(/succeeded a/);
    await eventually(() => !processRuns(b), 10_000, 'b stopped when the lease ran out');
    return { dir, holder, runId };
  }

  it('a holder that aborted during an outage: its final record is retried until the server is back; the CLI says a success was not recorded', async () => {
    const { own, url } = await ownCluster();
    let started = false;
    try {
      const { dir, holder, runId } = await abortedDuringOutage(own, url);
      // back after the lease expired by the database clock too (so `a`'s success, refused
      // until then, can no longer be stored), but within the holder's retry of its final record
      await sleep(1500);
      startServer(own);
      started = true;
      expect((await holder.exited).code, holder.stderr()).toBe(1);
      expect(holder.stdout()).toMatch(/succeeded a/); // said live, before the outage mattered
      expect(holder.stdout()).toMatch(new RegExp(`run ${runId} ABORTED: 0 succeeded, 2 interrupted`));
      expect(holder.stdout()).toMatch(
        /^ {2}a: succeeded, but the result could not be recorded \(.+\); exec resume will run it again$/m,
      );
      const shown = JSON.parse(
        (
          await runCli(['exec', 'show', runId, '--json'], {
            cwd: dir,
            env: { ROUTINELY_DATABASE_URL: url, ROUTINELY_HOST_ID: 'elsewhere' },
          })
        ).stdout,
      );
      expect(shown).toMatchObject({
        status: 'ABORTED',
        why_code: 'LOCK_LOST',
        tasks: { a: { status: 'interrupted' }, b: { status: 'interrupted' } },
      });
    } finally {
      if (!started) startServer(own);
    }
  });

  it('a holder that aborted during an outage longer than its retries: the run reads as interrupted (never written by a reader), and exec resume finishes it', async () => {
    const { own, url } = await ownCluster();
    let started = false;
    try {
      const { dir, holder, runId } = await abortedDuringOutage(own, url);
      expect((await holder.exited).code, holder.stderr()).toBe(1);
      expect(holder.stdout()).toMatch(
        /this could not be recorded \(database 127\.0\.0\.1:\d+\/t_[0-9a-f]+: connection refused \(ECONNREFUSED\)\), so the run reads as interrupted until resumed/,
      );
      expect(holder.stdout()).toMatch(/^ {2}a: succeeded, but the result could not be recorded/m);
      startServer(own);
      started = true;
      // read from another host, where the holder's pid says nothing: judged by the lease alone
      const env = { ROUTINELY_DATABASE_URL: url, ROUTINELY_HOST_ID: 'elsewhere' };
      const runs = JSON.parse((await runCli(['exec', 'runs', '--json'], { cwd: dir, env })).stdout);
      expect(runs[0]).toMatchObject({
        run_id: runId,
        status: 'INTERRUPTED',
        why_code: 'LOCK_LOST',
        summary: { running: 0, interrupted: 2 },
      });
      expect(runs[0].why).toMatch(/no longer holds the exec lock \(its lease expired\)/);
      const shown = JSON.parse((await runCli(['exec', 'show', runId, '--json'], { cwd: dir, env })).stdout);
      expect(shown).toMatchObject({
        status: 'INTERRUPTED',
        why_code: 'LOCK_LOST',
        next: `routinely exec resume ${runId}`,
        tasks: { a: { status: 'interrupted' }, b: { status: 'interrupted' } },
      });
      const human = await runCli(['exec', 'runs'], { cwd: dir, env });
      expect(human.stdout).toMatch(new RegExp(`${runId}.*INTERRUPTED`));
      expect(human.stdout).not.toMatch(/RUNNING/);
      // derived on read: the row still says RUNNING
      const { default: pg } = await import('pg');
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      const row = (await client.query(`SELECT snapshot->>'status' AS s FROM routinely_runs WHERE run_id = $1`, [runId]))
        .rows[0];
      await client.end();
      expect(row.s).toBe('RUNNING');
      writeFileSync(join(dir, 'fast'), '');
      const resumed = await runCli(['exec', 'resume', '--json'], { cwd: dir, env });
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(JSON.parse(resumed.stdout)).toMatchObject({
        run_id: runId,
        status: 'SUCCEEDED',
        tasks: { a: { status: 'succeeded' }, b: { status: 'succeeded' } },
      });
    } finally {
      if (!started) startServer(own);
    }
  });

  it('at the connection limit: scheduler start exits 74 and says what to do (raise max_connections, or a pooler in session mode)', async () => {
    const { own, url } = await ownCluster();
    stopServer(own);
    const port = new URL(own.url).port;
    pgCommand(own, 'pg_ctl', [
      '-D',
      own.dataDir,
      '-w',
      '-t',
      '30',
      '-l',
      join(own.dataDir, 'server.log'),
      '-o',
      `-p ${port} -k ${own.dataDir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=3 -c superuser_reserved_connections=0`,
      'start',
    ]);
    const { default: pg } = await import('pg');
    const held: InstanceType<typeof pg.Client>[] = [];
    onTestFinished(async () => {
      await Promise.all(held.map((c) => c.end().catch(() => {})));
    });
    for (let i = 0; i < 3; i++) {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      held.push(c);
    }
    const dir = testProject({
      project: 'app',
      backend: { type: 'postgres' },
      routines: [{ id: 'tick', schedule: '@hourly', action: 'command', run: 'true' }],
    });
    const r = await runCli(['scheduler', 'start'], { cwd: dir, env: { ROUTINELY_DATABASE_URL: url } });
    expect(r.code, r.stdout + r.stderr).toBe(74);
    expect(r.stderr).toMatch(
      /database 127\.0\.0\.1:\d+\/t_[0-9a-f]+: sorry, too many clients already \(53300\): raise max_connections on the server, or put a pooler in front of it \(e\.g\. PgBouncer; session and transaction pooling both work\); each routinely process opens up to 2 connections \(backend\.poolSize\)/,
    );
  });
});
