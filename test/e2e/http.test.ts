// `scheduler start --http` and `serve` end to end (SPEC §11, §12): the built CLI, real fires,
// a real exec lock, real sockets on loopback.

import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { HistoryEntry } from '../../src/state/history.js';
import type { RoutineStateFile } from '../../src/state/routine-state.js';
import { FIXTURES, eventually, runCli, sleep, start, startCli, type RunOptions, type Spawned } from '../helpers/cli.js';
import { httpGet, sample } from '../helpers/http.js';
import { freshDatabase, pgCluster } from '../helpers/pg-test.js';
import { routineStateOf, stateFileOf } from '../helpers/state.js';
import { testProject } from '../helpers/testdir.js';

const cmd = (id: string, schedule: string, run: string, extra: object = {}) => ({
  id,
  schedule,
  action: 'command',
  run,
  ...extra,
});
const TOKEN = 'e2e-token-5d1c0a3b9e7f4a2c8d6b';
/** Appear in the config and the environment only: never in anything served. */
const RUN_SECRET = 'RUN-STRING-SECRET-7f3a';
const ENV_SECRET = 'ENV-VALUE-SECRET-9c1d';

async function startServing(args: string[], opts: RunOptions & { cwd: string }): Promise<{ p: Spawned; url: string }> {
  const p = startCli(args, { timeoutMs: 120_000, ...opts });
  const url = (await p.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
  return { p, url };
}

const stateOf = (dir: string): RoutineStateFile => routineStateOf(dir);
/** The fires in a routine's history file (it also records pauses and resumes). */
const historyOf = (dir: string, id: string): HistoryEntry[] =>
  readFileSync(join(dir, '.routinely', 'history', `${id}.jsonl`), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as HistoryEntry)
    .filter((e) => typeof e.result === 'string');
/** Busy skips since the last fire that ran (a skip behind its own previous run is not one). */
const trailingSkips = (h: HistoryEntry[]): number => {
  let n = 0;
  for (let i = h.length - 1; i >= 0 && h[i]!.result === 'skipped'; i--)
    if ((h[i]!.reason ?? 'exec busy').startsWith('exec busy')) n++;
  return n;
};
const json = async (url: string): Promise<unknown> => JSON.parse((await httpGet(url)).body);
const withoutNext = (rows: unknown): unknown =>
  (rows as Record<string, unknown>[]).map(({ next_run_at: _n, ...r }) => r);

/** Polls an async check until it passes (behaviour, not timing: the limit only prevents a hang). */
async function until(check: () => Promise<void>, limitMs = 20_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    try {
      await check();
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

describe('scheduler start --http (file backend)', () => {
  it('counts every fire the process records as routine-state.json does: a run started over HTTP, a fire left open by a killed run (SPEC §11)', async () => {
    const project = testProject({
      http: { actions: true },
      routines: [
        cmd('manual', '0 0 1 1 *', 'true'),
        cmd('bad', '0 0 1 1 *', 'exit 4'),
        cmd('slow', '0 0 1 1 *', 'sleep 30', { exclusive: false }),
      ],
    });
    const env = { ROUTINELY_HTTP_TOKEN: TOKEN };
    // a fire left open: its process killed while it ran
    const slow = startCli(['routine', 'run', 'slow'], { cwd: project });
    await slow.waitFor(/started slow/);
    slow.child.kill('SIGKILL');
    await slow.exited;
    const { p: s, url } = await startServing(['scheduler', 'start', '--http', '127.0.0.1:0'], { cwd: project, env });
    await s.waitFor(/left open by a process that died/);
    const post = (id: string) =>
      httpGet(
        `${url}api/routines/${id}/run`,
        { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        'POST',
        '{}',
      );
    expect((await post('manual')).status).toBe(202);
    await until(async () => expect(historyOf(project, 'manual').map((e) => e.result)).toEqual(['success']));
    expect((await post('bad')).status).toBe(202);
    await until(async () => expect(historyOf(project, 'bad').map((e) => e.result)).toEqual(['failure']));
    // the counter, the file a status script reads and the history agree, read at the same time
    await until(async () => {
      const m = (await httpGet(`${url}metrics`, { authorization: `Bearer ${TOKEN}` })).body;
      const file = stateFileOf(project)!;
      for (const [id, result] of [
        ['manual', 'success'],
        ['bad', 'failure'],
        ['slow', 'failure'],
      ] as const) {
        expect(sample(m, 'routinely_fires_total', { routine: id, result }), `${id} ${result}`).toBe(1);
        expect(file.routines[id]?.counts[result], `${id} in routine-state.json`).toBe(1);
        expect(
          historyOf(project, id).filter((e) => e.result === result),
          `${id} in history`,
        ).toHaveLength(1);
      }
      expect(sample(m, 'routinely_routine_failing', { routine: 'bad' })).toBe(1);
    });
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
  });

  it('a run action refused busy on a lock whose every slot is held names every holder, as routine run does (docs/lock.md)', async () => {
    const project = testProject({
      http: { actions: true },
      locks: { ag: { slots: 2 } },
      routines: [cmd('b', '0 0 1 1 *', 'true', { lock: 'ag' })],
    });
    const env = { ROUTINELY_HTTP_TOKEN: TOKEN };
    const holders = [0, 1].map(() =>
      startCli(['lock', 'run', '--lock', 'ag', '--', 'sh', '-c', 'echo holding; sleep 30'], { cwd: project }),
    );
    for (const h of holders) await h.waitFor(/holding/);
    const { p: s, url } = await startServing(['scheduler', 'start', '--http', '127.0.0.1:0'], { cwd: project, env });
    const r = await httpGet(
      `${url}api/routines/b/run`,
      { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      'POST',
      '{}',
    );
    expect(r.status).toBe(409);
    const cli = await runCli(['routine', 'run', 'b'], { cwd: project });
    expect(cli.code).toBe(75);
    const names =
      /held by (pid \d+ on \S+ \(lock run\), heartbeat \d+s ago, and pid \d+ on \S+ \(lock run\), heartbeat \d+s ago \(all 2 slots\))/;
    expect(JSON.parse(r.body).error).toMatch(new RegExp(`^ag busy: ${names.source}$`));
    expect(cli.stderr).toMatch(names);
    for (const h of holders) h.child.kill('SIGTERM');
    for (const h of holders) await h.exited;
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
  });

  it('metrics after a success, a failure and busy skips agree with the records; the API is the CLI JSON; nothing secret is served', async () => {
    const project = testProject({
      exec: {
        tasks: [
          { id: 'build', run: 'true' },
          { id: 'test', run: 'exit 1', dependsOn: ['build'] },
        ],
      },
      routines: [
        cmd('ok', '* * * * * *', `echo ${RUN_SECRET}`),
        cmd('bad', '* * * * * *', `echo ${RUN_SECRET}; exit 3`),
        cmd('later', '0 3 * * *', `echo ${RUN_SECRET}`, { timezone: 'Europe/Berlin' }),
      ],
    });
    expect((await runCli(['exec', 'run'], { cwd: project })).code).toBe(1); // one FAILED run for /api/runs
    const env = { SOME_SECRET: ENV_SECRET };
    const { p: s, url } = await startServing(['scheduler', 'start', '--http', '127.0.0.1:0'], { cwd: project, env });
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    await s.waitFor(/\[routine\] succeeded ok/);
    await s.waitFor(/\[routine\] failed bad: exit code 3/);

    // busy skips: the exec lock held by hand while the per-second routines fire
    // waiting its turn: a fire of this second may hold the lock, or be queued for it (fail: refused)
    const holder = startCli(['lock', 'run', '--if-busy', 'wait', '--', 'sh', '-c', 'echo holding; sleep 60'], {
      cwd: project,
      env,
    });
    await holder.waitFor(/holding/);
    // skips logged from now on (ok and bad also meet each other at the same second)
    const mark = s.stdout().length;
    const logged = (re: RegExp) => (): boolean => re.test(s.stdout().slice(mark));
    await eventually(logged(/\[routine\] skipped ok: exec busy/), 20_000, 'a busy skip of ok');
    await eventually(logged(/\[routine\] skipped bad: exec busy/), 20_000, 'a busy skip of bad');
    await until(async () => expect(sample((await httpGet(`${url}metrics`)).body, 'routinely_exec_lock_held')).toBe(1));
    // paused while the lock is still held: their last results stay skips
    expect((await runCli(['routine', 'pause', 'ok'], { cwd: project })).code).toBe(0);
    expect((await runCli(['routine', 'pause', 'bad'], { cwd: project })).code).toBe(0);
    await s.waitFor(/\[routine\] paused ok/);
    await s.waitFor(/\[routine\] paused bad/);
    holder.child.kill('SIGTERM');
    await holder.exited;

    // once nothing fires any more, every figure equals what the records say
    await until(async () => {
      const m = (await httpGet(`${url}metrics`)).body;
      const st = stateOf(project).routines;
      for (const id of ['ok', 'bad']) {
        const counts = st[id]!.counts;
        for (const [result, n] of Object.entries(counts))
          expect(sample(m, 'routinely_fires_total', { routine: id, result }), `${id} ${result}`).toBe(n);
        expect(sample(m, 'routinely_fire_duration_seconds_count', { routine: id })).toBe(
          counts.success + counts.failure,
        );
        expect(sample(m, 'routinely_consecutive_skips', { routine: id })).toBe(trailingSkips(historyOf(project, id)));
        expect(sample(m, 'routinely_routine_paused', { routine: id })).toBe(1);
      }
      expect(st.ok!.counts.success).toBeGreaterThanOrEqual(1);
      expect(st.ok!.counts.skipped).toBeGreaterThanOrEqual(1);
      expect(st.bad!.counts.failure).toBeGreaterThanOrEqual(1);
      expect(sample(m, 'routinely_consecutive_skips', { routine: 'ok' })).toBeGreaterThanOrEqual(1);
      expect(sample(m, 'routinely_last_success_timestamp_seconds', { routine: 'ok' })).toBe(
        Date.parse(st.ok!.last_success_at!) / 1000,
      );
      expect(sample(m, 'routinely_last_success_timestamp_seconds', { routine: 'bad' })).toBe(0); // never succeeded: 0, present from the first scrape
      expect(sample(m, 'routinely_fires_total', { routine: 'later', result: 'success' })).toBe(0);
      expect(sample(m, 'routinely_routine_paused', { routine: 'later' })).toBe(0);
      expect(sample(m, 'routinely_exec_lock_held')).toBe(0);
      expect(sample(m, 'routinely_scheduler_up')).toBe(1);
      expect(sample(m, 'routinely_fire_duration_seconds_bucket', { routine: 'ok', le: '+Inf' })).toBe(
        st.ok!.counts.success,
      );
    });

    expect(await httpGet(`${url}healthz`)).toMatchObject({ status: 200, body: 'ok\n' });
    const cli = async (...args: string[]): Promise<unknown> =>
      JSON.parse((await runCli(args, { cwd: project })).stdout);
    expect(withoutNext(await json(`${url}api/routines`))).toEqual(withoutNext(await cli('routine', 'list', '--json')));
    expect(await json(`${url}api/lock`)).toEqual(await cli('lock', 'status', '--json'));
    const runs = await json(`${url}api/runs`);
    expect(runs).toEqual(await cli('exec', 'runs', '--json'));
    expect(runs).toMatchObject([{ status: 'FAILED', why_code: 'TASK_FAILED' }]);
    const page = (await httpGet(url)).body;
    expect(page).toContain('<a class="id" href="/routines/ok">ok</a>');
    expect(page).toContain('<code>TASK_FAILED</code>');

    for (const path of [
      '',
      'metrics',
      'healthz',
      'api/status',
      'api/routines',
      'api/history',
      'api/lock',
      'api/runs',
    ]) {
      const body = (await httpGet(`${url}${path}`)).body;
      expect(body, path).not.toContain(RUN_SECRET);
      expect(body, path).not.toContain(ENV_SECRET);
    }
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
  });

  it('/api/routines never shows fewer fires than the history holds at the moment it is asked (SPEC §3)', async () => {
    const project = testProject({
      routines: [{ id: 'quick', schedule: '* * * * * *', action: 'command', run: 'sleep 0.2', exclusive: false }],
    });
    const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], { cwd: project, timeoutMs: 60_000 });
    const base = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
    const history = join(project, '.routinely', 'history', 'quick.jsonl');
    const closed = (): number =>
      existsSync(history)
        ? readFileSync(history, 'utf8')
            .split('\n')
            .filter((l) => l.includes('"result"')).length
        : 0;
    let asked = 0;
    while (asked < 40) {
      const before = closed();
      if (before === 0) {
        await sleep(50);
        continue;
      }
      const row = (
        JSON.parse((await httpGet(`${base}api/routines`)).body) as {
          counts: { success: number; failure: number; skipped: number };
        }[]
      )[0]!;
      const shown = row.counts.success + row.counts.failure + row.counts.skipped;
      expect(shown, `asked when the history held ${before} fires`).toBeGreaterThanOrEqual(before);
      asked++;
      await sleep(100);
    }
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
  });

  it('/healthz: 503 naming the cause once the scheduler lock is taken over; the scheduler then stops (exit 1)', async () => {
    const project = testProject({ routines: [cmd('long', '* * * * * *', 'sleep 30')] });
    const env = { ROUTINELY_LOCK_TTL_SECONDS: '3' }; // heartbeat every second
    const { p: s, url } = await startServing(
      ['scheduler', 'start', '--http', '127.0.0.1:0', '--shutdown-timeout', '5'],
      { cwd: project, env },
    );
    await s.waitFor(/\[routine\] started long/);
    expect(await httpGet(`${url}healthz`)).toMatchObject({ status: 200, body: 'ok\n' });
    // take the scheduler lock away: its files go, and another process takes the key
    const locks = join(project, '.routinely', 'locks');
    for (const f of readdirSync(locks)) if (f.startsWith('scheduler.')) rmSync(join(locks, f));
    const taker = start(join(FIXTURES, 'key-holder.mjs'), [locks, 'scheduler']);
    await taker.waitFor(/"won":true/);
    await until(async () => {
      const h = await httpGet(`${url}healthz`);
      expect(h.status).toBe(503);
      expect(h.body).toMatch(/^scheduler lock lost \(.+\)\n$/);
    });
    expect(sample((await httpGet(`${url}metrics`)).body, 'routinely_scheduler_up')).toBe(0);
    expect((await s.exited).code).toBe(1);
    expect(s.stdout()).toMatch(/\[scheduler\] scheduler lock lost \(.+\); stopping/);
    taker.child.kill('SIGKILL');
  });

  it('a non-loopback address without ROUTINELY_HTTP_TOKEN exits 2 before taking any lock', async () => {
    const project = testProject({ routines: [cmd('x', '0 0 1 1 *', 'true')] });
    const external = Object.values(networkInterfaces())
      .flatMap((l) => l ?? [])
      .find((a) => a.family === 'IPv4' && !a.internal)?.address;
    const binds = ['0.0.0.0:0', '[::]:0', ...(external ? [`${external}:0`] : [])];
    for (const bind of binds) {
      const r = await runCli(['scheduler', 'start', '--http', bind], {
        cwd: project,
        env: { ROUTINELY_HTTP_TOKEN: undefined },
      });
      expect(r.code, bind).toBe(2);
      expect(r.stderr).toMatch(
        /^routinely: --http \S+ listens on (every interface|a non-loopback address): set ROUTINELY_HTTP_TOKEN/,
      );
      const serve = await runCli(['serve', '--http', bind], { cwd: project, env: { ROUTINELY_HTTP_TOKEN: undefined } });
      expect(serve.code, bind).toBe(2);
    }
    const fromConfig = testProject({ http: { listen: '0.0.0.0:0' }, routines: [cmd('x', '0 0 1 1 *', 'true')] });
    expect(
      await runCli(['scheduler', 'start'], { cwd: fromConfig, env: { ROUTINELY_HTTP_TOKEN: undefined } }),
    ).toMatchObject({ code: 2, stderr: expect.stringMatching(/ROUTINELY_HTTP_TOKEN/) });
    expect(
      JSON.parse((await runCli(['lock', 'status', '--key', 'scheduler', '--json'], { cwd: project })).stdout),
    ).toMatchObject({ state: 'free' });
  });

  it('with a token on every interface: 401 without it or with a wrong one, 200 with it; a foreign Host header is refused', async () => {
    const project = testProject({ http: { listen: '0.0.0.0:0' }, routines: [cmd('x', '0 0 1 1 *', 'true')] });
    const { p: s, url } = await startServing(['scheduler', 'start'], {
      cwd: project,
      env: { ROUTINELY_HTTP_TOKEN: TOKEN },
    });
    expect(s.stdout()).toMatch(/\[http\] listening on http:\/\/0\.0\.0\.0:\d+\/ \(token required\)/);
    const port = Number(new URL(url).port);
    const local = `http://127.0.0.1:${port}/`;
    // the page without the token has no data: its script asks for the token (SPEC §11)
    const shell = await httpGet(local);
    expect(shell.status).toBe(200);
    expect(shell.body).toContain('data-shell="1"');
    expect(shell.body).not.toContain('href="/routines/x"');
    for (const path of ['metrics', 'healthz', 'api/routines', 'api/routines/x']) {
      expect((await httpGet(`${local}${path}`)).status, path).toBe(401);
      expect(
        (await httpGet(`${local}${path}`, { authorization: 'Bearer wrong-token-000000000000' })).status,
        path,
      ).toBe(401);
      expect((await httpGet(`${local}${path}`, { authorization: `Bearer ${TOKEN}` })).status, path).toBe(200);
    }
    expect(
      (await httpGet(`${local}healthz`, { authorization: `Bearer ${TOKEN}`, host: `rebound.evil.example:${port}` }))
        .status,
    ).toBe(421);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
  });

  it('loopback without a token: a foreign Host header is refused (DNS rebinding), localhost is served', async () => {
    const project = testProject({ routines: [cmd('x', '0 0 1 1 *', 'true')] });
    const { p: s, url } = await startServing(['scheduler', 'start', '--http', 'localhost:0'], { cwd: project });
    const port = Number(new URL(url).port);
    expect((await httpGet(`${url}api/routines`, { host: `attacker.example:${port}` })).status).toBe(421);
    expect((await httpGet(`${url}api/routines`, { host: `localhost:${port}` })).status).toBe(200);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
  });

  it('SIGTERM while a run started over HTTP goes on: /healthz answers 503 until it is done, and the scheduler says it stopped only then', async () => {
    const project = testProject({
      http: { actions: true },
      routines: [cmd('slow', '0 0 1 1 *', 'touch go.started; while [ ! -e go ]; do sleep 0.05; done')],
    });
    const env = { ROUTINELY_HTTP_TOKEN: TOKEN };
    const { p: s, url } = await startServing(['scheduler', 'start', '--http', '127.0.0.1:0'], { cwd: project, env });
    const auth = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    expect((await httpGet(`${url}api/routines/slow/run`, auth, 'POST', '{}')).status).toBe(202);
    await until(async () => expect(existsSync(join(project, 'go.started'))).toBe(true));
    s.child.kill('SIGTERM');
    await s.waitFor(/\[scheduler\] stopping/);
    // draining: still answering, and saying so
    const health = await httpGet(`${url}healthz`, { authorization: `Bearer ${TOKEN}` });
    expect(health.status).toBe(503);
    expect(health.body).toMatch(/stopping/);
    expect(s.stdout()).not.toMatch(/\[scheduler\] stopped/);
    writeFileSync(join(project, 'go'), '');
    expect((await s.exited).code).toBe(0);
    expect(s.stdout()).toMatch(/\[http\] run slow: success[^]*\[scheduler\] stopped/);
    expect(historyOf(project, 'slow').map((e) => e.result)).toEqual(['success']);
  });

  it('serve: the same server without firing; it sees a scheduler come and go', async () => {
    const project = testProject({ routines: [cmd('tick', '* * * * * *', 'true')] });
    const { p: w, url } = await startServing(['serve', '--http', '127.0.0.1:0'], { cwd: project });
    expect(await httpGet(`${url}healthz`)).toMatchObject({ status: 200, body: 'ok\n' });
    let m = (await httpGet(`${url}metrics`)).body;
    expect(sample(m, 'routinely_scheduler_up')).toBe(0);
    expect(m).not.toMatch(/^routinely_fires_total\{/m);
    expect(await json(`${url}api/status`)).toMatchObject({ mode: 'serve', scheduler_up: false });
    const s = startCli(['scheduler', 'start'], { cwd: project });
    await s.waitFor(/\[routine\] succeeded tick/);
    await until(async () => {
      m = (await httpGet(`${url}metrics`)).body;
      expect(sample(m, 'routinely_scheduler_up')).toBe(1);
      expect(sample(m, 'routinely_last_success_timestamp_seconds', { routine: 'tick' })).toBeGreaterThan(0);
    });
    expect(m).not.toMatch(/^routinely_fires_total\{/m); // it fired nothing itself
    s.child.kill('SIGTERM');
    await s.exited;
    // the records are final once the scheduler is gone; serve shares a read for up to a second
    // (docs/http.md), so the view it answered the last poll with may lag them that long, and
    // then shows exactly them
    const listed = withoutNext(JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout));
    await until(async () => expect(withoutNext(await json(`${url}api/routines`))).toEqual(listed));
    w.child.kill('SIGTERM');
    expect((await w.exited).code).toBe(0);
    expect(stateOf(project).routines.tick!.counts.success).toBeGreaterThan(0);
  });
});

const cluster = pgCluster();
const pgSuite = cluster ? describe : describe.skip; // skipped only outside CI, where no server could be started

pgSuite('scheduler start --http (PostgreSQL backend)', () => {
  it('each scheduler exports what it fired plus the shared state; serve shows the same rows as the CLI', async () => {
    const dbUrl = await freshDatabase(cluster!);
    const project = testProject({
      project: 'app',
      backend: { type: 'postgres' },
      routines: [cmd('tick', '* * * * * *', 'true')],
    });
    const env = { ROUTINELY_DATABASE_URL: dbUrl };
    const a = await startServing(['scheduler', 'start', '--http', '127.0.0.1:0'], {
      cwd: project,
      env: { ...env, ROUTINELY_HOST_ID: 'host-a' },
    });
    const b = await startServing(['scheduler', 'start', '--http', '127.0.0.1:0'], {
      cwd: project,
      env: { ...env, ROUTINELY_HOST_ID: 'host-b' },
    });
    await a.p.waitFor(/\[scheduler\] started/);
    await b.p.waitFor(/\[scheduler\] started/);
    const list = async (): Promise<Record<string, unknown>[]> =>
      JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project, env })).stdout);
    await until(async () => expect((await list())[0]!.counts).toMatchObject({ success: expect.any(Number) }));
    await until(async () =>
      expect(((await list())[0]!.counts as { success: number }).success).toBeGreaterThanOrEqual(3),
    );
    expect((await runCli(['routine', 'pause', 'tick'], { cwd: project, env })).code).toBe(0);
    await until(async () => {
      const [ma, mb, rows] = await Promise.all([httpGet(`${a.url}metrics`), httpGet(`${b.url}metrics`), list()]);
      const fired = (m: string): number =>
        sample(m, 'routinely_fires_total', { routine: 'tick', result: 'success' }) ?? 0;
      const row = rows[0] as { counts: { success: number }; last_success_at: string };
      // each tick fired once across the two; together they fired all of them
      expect(fired(ma.body) + fired(mb.body)).toBe(row.counts.success);
      for (const m of [ma.body, mb.body]) {
        expect(sample(m, 'routinely_last_success_timestamp_seconds', { routine: 'tick' })).toBe(
          Date.parse(row.last_success_at) / 1000,
        );
        expect(sample(m, 'routinely_routine_paused', { routine: 'tick' })).toBe(1);
        expect(sample(m, 'routinely_scheduler_up')).toBe(1);
      }
    });
    expect(await httpGet(`${a.url}healthz`)).toMatchObject({ status: 200, body: 'ok\n' });
    expect(await json(`${a.url}api/status`)).toMatchObject({ backend: 'postgres', mode: 'scheduler', host: 'host-a' });

    const w = await startServing(['serve', '--http', '127.0.0.1:0'], {
      cwd: project,
      env: { ...env, ROUTINELY_HOST_ID: 'watcher' },
    });
    expect(withoutNext(await json(`${w.url}api/routines`))).toEqual(withoutNext(await list()));
    expect(await json(`${w.url}api/lock`)).toEqual(
      JSON.parse((await runCli(['lock', 'status', '--json'], { cwd: project, env })).stdout),
    );
    expect((await httpGet(w.url)).body).toContain('<a class="id" href="/routines/tick">tick</a>');
    expect((await httpGet(w.url)).body).not.toContain(dbUrl);
    for (const p of [a.p, b.p, w.p]) p.child.kill('SIGTERM');
    for (const p of [a.p, b.p, w.p]) expect((await p.exited).code).toBe(0);
  });
});
