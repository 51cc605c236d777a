// `routine stop ID` (SPEC §10), as `systemctl stop` stops a unit: SIGTERM to the fire's process
// group, SIGKILL after the grace; the fire recorded once, as a failure stopped by hand and by
// whom; the exec lock free as soon as the group is gone. Real processes, the built CLI.

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually, runCli, startCli } from '../helpers/cli.js';
import { httpGet } from '../helpers/http.js';
import { testProject } from '../helpers/testdir.js';

interface Fire {
  result: string;
  reason: string | null;
  run_id: string | null;
}

const history = async (cwd: string, id: string): Promise<Fire[]> =>
  JSON.parse((await runCli(['routine', 'history', id, '--json'], { cwd })).stdout) as Fire[];
const lockState = async (cwd: string): Promise<string> =>
  (JSON.parse((await runCli(['lock', 'status', '--json'], { cwd })).stdout) as { state: string }).state;
const groupAlive = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('routine stop', () => {
  it('a fire of the scheduler: TERM to its group, recorded once as "stopped by hand (cli, pid …)", the lock free at once', async () => {
    const project = testProject({
      routines: [{ id: 'long', schedule: '* * * * * *', action: 'command', run: 'echo "group $$"; sleep 60' }],
    });
    const s = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 60_000 });
    await s.waitFor(/\[routine\] started long/);
    // no next fire: the stopped one is the only one
    expect((await runCli(['routine', 'pause', 'long'], { cwd: project })).code).toBe(0);
    const r = await runCli(['routine', 'stop', 'long'], { cwd: project });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^stopped long \(run (r-\S+)\) after \d+\.\ds; recorded as failure: stopped by hand\n$/);
    const runId = /\(run (r-\S+)\)/.exec(r.stdout)![1]!;
    expect(await lockState(project)).toBe('free');
    const fires = (await history(project, 'long')).filter((f) => f.run_id === runId);
    expect(fires).toHaveLength(1);
    expect(fires[0]).toMatchObject({
      result: 'failure',
      reason: expect.stringMatching(/^stopped by hand \(cli, pid \d+\)$/),
    });
    // nothing running now: said, exit 0
    const again = await runCli(['routine', 'stop', 'long'], { cwd: project });
    expect(again.code).toBe(0);
    expect(again.stdout).toBe('long is not running; nothing to stop\n');
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
    expect((await history(project, 'long')).filter((f) => f.run_id === runId)).toHaveLength(1);
  });

  it('a fire of a routine a reload removed from the config (it runs on, holding its lock) is still stopped by its id; an id with no fire open stays unknown', async () => {
    const routines = [
      { id: 'long', schedule: '0 0 1 1 *', action: 'command', run: 'sleep 60' },
      { id: 'other', schedule: '0 0 1 1 *', action: 'command', run: 'true' },
    ];
    const project = testProject({ routines });
    const s = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 60_000 });
    await s.waitFor(/\[scheduler\] started/);
    const run = startCli(['routine', 'run', 'long'], { cwd: project, timeoutMs: 60_000 });
    await run.waitFor(/started long/);
    writeFileSync(join(project, 'routinely.json'), JSON.stringify({ routines: routines.slice(1) }));
    s.child.kill('SIGHUP');
    await s.waitFor(/reloaded config .*removed long/);
    // listed while it runs on, after the config's routines, as systemd lists a running unit whose
    // file is gone: from the scheduler's cache, and from the config (the full path); --check does
    // not watch it
    for (const env of [{}, { ROUTINELY_LIST_CACHE: '0' }]) {
      const json = await runCli(['routine', 'list', '--json'], { cwd: project, env });
      expect(json.code, json.stderr).toBe(0);
      const rows = JSON.parse(json.stdout) as Record<string, unknown>[];
      expect(rows.map((row) => row.id)).toEqual(['other', 'long']);
      expect(rows[1]).toMatchObject({ removed: true, schedule: null, phase: 'running', next_run_at: null });
      expect(rows[0]).not.toHaveProperty('removed');
      const table = await runCli(['routine', 'list'], { cwd: project, env });
      expect(table.stdout).toMatch(/^long +\(removed\) +- +running /m);
      expect((await runCli(['routine', 'list', '--check'], { cwd: project, env })).code).toBe(0);
    }
    const r = await runCli(['routine', 'stop', 'long'], { cwd: project });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^stopped long \(run r-\S+\) after /);
    expect((await run.exited).code).toBe(1);
    expect(await lockState(project)).toBe('free');
    // its fire ended: no longer listed
    const after = JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout) as {
      id: string;
    }[];
    expect(after.map((row) => row.id)).toEqual(['other']);
    const unknown = await runCli(['routine', 'stop', 'never'], { cwd: project });
    expect([unknown.code, unknown.stderr]).toEqual([2, expect.stringMatching(/unknown routine "never"/)]);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
  });

  it('the HTTP stop action stops it too (the config no longer has it), and answers 404 for an id that has no fire open', async () => {
    const token = 'a-token-of-sixteen-or-more';
    const routines = [
      { id: 'long', schedule: '0 0 1 1 *', action: 'command', run: 'sleep 60' },
      { id: 'other', schedule: '0 0 1 1 *', action: 'command', run: 'true' },
    ];
    const project = testProject({ http: { actions: true }, routines });
    const env = { ROUTINELY_HTTP_TOKEN: token };
    const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], { cwd: project, env, timeoutMs: 60_000 });
    const url = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
    const run = startCli(['routine', 'run', 'long'], { cwd: project, timeoutMs: 60_000 });
    await run.waitFor(/started long/);
    writeFileSync(
      join(project, 'routinely.json'),
      JSON.stringify({ http: { actions: true }, routines: routines.slice(1) }),
    );
    s.child.kill('SIGHUP');
    await s.waitFor(/reloaded config .*removed long/);
    const post = (id: string, action = 'stop') =>
      httpGet(
        `${url}api/routines/${id}/${action}`,
        { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        'POST',
        '{}',
      );
    // listed while it runs on, as routine list lists it: /api, /metrics and the page; only
    // stopped (run, pause and resume know the config's routines only)
    const auth = { authorization: `Bearer ${token}` };
    const api = JSON.parse((await httpGet(`${url}api/routines`, auth)).body) as Record<string, unknown>[];
    expect(api.map((row) => row.id)).toEqual(['other', 'long']);
    expect(api[1]).toMatchObject({ removed: true, schedule: null, phase: 'running' });
    const metrics = (await httpGet(`${url}metrics`, auth)).body;
    expect(metrics).toMatch(/^routinely_routine_running\{routine="long"\} 1$/m);
    expect(metrics).not.toMatch(/^routinely_routine_info\{[^}]*routine="long"/m);
    const page = (await httpGet(url, auth)).body;
    expect(page).toMatch(/href="\/routines\/long"[^]*removed from the config/);
    expect((await post('long', 'run')).status).toBe(404);
    const stopped = await post('long');
    expect(stopped.status, stopped.body).toBe(200);
    expect(JSON.parse(stopped.body)).toMatchObject({ state: 'stopped', routine: 'long' });
    expect((await run.exited).code).toBe(1);
    const again = await post('long');
    expect([again.status, JSON.parse(again.body).error]).toEqual([404, 'no routine "long" in the config']);
    expect((await post('never')).status).toBe(404);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
  });

  it('a fire stopped by hand is not retried, whatever its retry says (as systemctl stop is not restarted)', async () => {
    // one tick a minute, a few seconds ahead (a six-field schedule: that second of every minute;
    // a scheduler slow to start on a loaded machine meets it a minute later)
    const second = (new Date().getUTCSeconds() + 5) % 60;
    const project = testProject({
      routines: [
        {
          id: 'backup',
          schedule: `${second} * * * * *`,
          timezone: 'UTC',
          action: 'command',
          run: 'echo run >> runs.txt; sleep 60',
          retry: { attempts: 2, backoffSeconds: 0.2 },
        },
      ],
    });
    const s = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 110_000 });
    await s.waitFor(/\[routine\] started backup/, 80_000);
    const r = await runCli(['routine', 'stop', 'backup'], { cwd: project });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/recorded as failure: stopped by hand\n$/);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
    expect(s.stdout()).not.toMatch(/retrying backup/);
    expect(readFileSync(join(project, 'runs.txt'), 'utf8')).toBe('run\n');
  });

  it('a routine run started from a notification command (ROUTINELY_EVENT in its environment) is stopped as any: that variable marks the notification, not what it starts', async () => {
    const project = testProject({
      routines: [{ id: 'slow', schedule: '0 0 1 1 *', action: 'command', run: 'echo "group $$"; sleep 30' }],
    });
    const run = startCli(['routine', 'run', 'slow'], { cwd: project, env: { ROUTINELY_EVENT: 'failure' } });
    await run.waitFor(/group \d+/);
    const r = await runCli(['routine', 'stop', 'slow'], { cwd: project });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^stopped slow \(run r-\S+\) after \d+\.\ds; recorded as failure: stopped by hand\n$/);
    expect((await run.exited).code).not.toBe(0);
  });

  it('a command that ignores SIGTERM, run by `routine run`: SIGKILL after the grace, the whole group gone, one record', async () => {
    const project = testProject({
      routines: [
        {
          id: 'stubborn',
          schedule: '0 0 1 1 *',
          action: 'command',
          run: `trap '' TERM; echo "group $$"; sleep 60 & wait; sleep 60`,
        },
      ],
    });
    const run = startCli(['routine', 'run', 'stubborn'], { cwd: project, timeoutMs: 60_000 });
    const pgid = Number((await run.waitFor(/group (\d+)/))[1]);
    const r = await runCli(['routine', 'stop', 'stubborn', '--timeout', '1'], { cwd: project });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/\(SIGKILL: it outlived the 1s grace\)/);
    expect(groupAlive(pgid)).toBe(false);
    const done = await run.exited;
    expect(done.code).toBe(1);
    expect(await lockState(project)).toBe('free');
    const fires = await history(project, 'stubborn');
    expect(fires).toHaveLength(1);
    expect(fires[0]).toMatchObject({
      result: 'failure',
      reason: expect.stringMatching(/^stopped by hand \(cli, pid \d+\)$/),
    });
  });

  it('a stop asked while the scheduler shuts down is answered (its connection was cut before the answer), and takes effect', async () => {
    const token = 'stop-token-0123456789abcdef';
    const project = testProject({
      http: { actions: true },
      routines: [{ id: 'slow', schedule: '0 0 1 1 *', action: 'command', run: 'sleep 60' }],
    });
    const env = { ROUTINELY_HTTP_TOKEN: token };
    const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], { cwd: project, env, timeoutMs: 60_000 });
    const url = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
    const auth = { authorization: `Bearer ${token}` };
    expect((await httpGet(`${url}api/routines/slow/run`, auth, 'POST', '')).status).toBe(202);
    await eventually(async () => (await lockState(project)) === 'held', 20_000, 'slow holds the lock');
    s.child.kill('SIGTERM');
    await s.waitFor(/\[scheduler\] stopping/);
    const stop = await httpGet(`${url}api/routines/slow/stop`, auth, 'POST', '');
    expect(stop.status, stop.body).toBe(200);
    expect(JSON.parse(stop.body)).toMatchObject({ state: 'stopped', recorded: true });
    expect((await s.exited).code).toBe(0);
    expect(await history(project, 'slow')).toEqual([
      expect.objectContaining({ result: 'failure', reason: 'stopped by hand (http, 127.0.0.1)' }),
    ]);
  });

  it("the HTTP action (behind the token): the same stop, recorded as by http and the client's address", async () => {
    const token = 'stop-token-0123456789abcdef';
    const project = testProject({
      http: { actions: true },
      routines: [
        { id: 'long', schedule: '* * * * * *', action: 'command', run: 'sleep 60' },
        { id: 'quick', schedule: '0 0 1 1 *', action: 'command', run: 'true' },
      ],
    });
    const env = { ROUTINELY_HTTP_TOKEN: token };
    const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], { cwd: project, env, timeoutMs: 60_000 });
    const url = (await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
    await s.waitFor(/\[routine\] started long/);
    expect((await runCli(['routine', 'pause', 'long'], { cwd: project })).code).toBe(0);
    expect((await httpGet(`${url}api/routines/long/stop`, {}, 'POST', '')).status, 'no token, no stop').toBe(401);
    // three at once (a double click, a retrying client): one stop, and each is answered with it
    // (the others said "not found" or "idle" of the fire being stopped)
    const stops = await Promise.all(
      [1, 2, 3].map(() =>
        httpGet(
          `${url}api/routines/long/stop`,
          { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          'POST',
          '{}',
        ),
      ),
    );
    expect(stops.map((x) => x.status)).toEqual([200, 200, 200]);
    // each asked while the stop went on has its answer; one that a loaded machine let through only
    // after the fire had ended finds the routine idle (paused) — never "not found" of that fire
    const answers = stops.map((x) => JSON.parse(x.body) as { state: string; run_id: string; recorded: boolean });
    const answer = answers.find((a) => a.state === 'stopped')!;
    expect(answer).toMatchObject({ state: 'stopped', recorded: true });
    for (const other of answers)
      expect(other.state === 'idle' ? { state: other.state } : { state: other.state, run_id: other.run_id }).toEqual(
        other.state === 'idle' ? { state: 'idle' } : { state: 'stopped', run_id: answer.run_id },
      );
    expect(await lockState(project)).toBe('free');
    const fires = (await history(project, 'long')).filter((f) => f.run_id === answer.run_id);
    expect(fires).toEqual([
      expect.objectContaining({ result: 'failure', reason: 'stopped by hand (http, 127.0.0.1)' }),
    ]);
    // who started a manual fire is kept with its record: over HTTP, and from the command line
    expect(
      (await httpGet(`${url}api/routines/quick/run`, { authorization: `Bearer ${token}` }, 'POST', '')).status,
    ).toBe(202);
    await s.waitFor(/\[http\] run quick: success/);
    expect((await runCli(['routine', 'run', 'quick'], { cwd: project })).code).toBe(0);
    const quick = (await history(project, 'quick')) as (Fire & { by?: string; trigger?: string })[];
    expect(quick.map((f) => [f.trigger, f.by]).sort()).toEqual(
      [
        ['manual', expect.stringMatching(/^cli, pid \d+$/)],
        ['manual', 'http, 127.0.0.1'],
      ].sort(),
    );
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
  });

  it('refuses what it cannot stop, saying why', async () => {
    const project = testProject({ routines: [{ id: 'auto', schedule: '@hourly', action: 'exec-auto' }] });
    const exec = await runCli(['routine', 'stop', 'auto'], { cwd: project });
    expect(exec.code).toBe(2);
    expect(exec.stderr).toMatch(/routine auto runs exec-auto in the scheduler's own process/);
    const unknown = await runCli(['routine', 'stop', 'nope'], { cwd: project });
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(/nope/);
  });
});
