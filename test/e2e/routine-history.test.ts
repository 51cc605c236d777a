// `routine history [ID]` across routines (SPEC §10): "what ran last night", as journalctl
// --since shows it — every routine's fires in time order, filtered by time and result.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { withBackend } from '../../src/backend.js';
import { loadProject } from '../../src/config/load.js';
import { runCli, startCli } from '../helpers/cli.js';
import { httpGet } from '../helpers/http.js';
import { testProject } from '../helpers/testdir.js';

interface Row {
  routine?: string;
  result: string;
  scheduled_at: string;
  trigger?: string;
}

const cmd = (id: string, run: string) => ({ id, schedule: '0 0 1 1 *', action: 'command', run });

describe('routine history of one routine', () => {
  it('a skip never ran: no duration and no lateness; a fire lost with its process: no duration (never "0.0s")', async () => {
    const project = testProject({ routines: [cmd('x', 'true')] });
    const line = (o: object): string => `${JSON.stringify(o)}\n`;
    const at = (s: number): string => new Date(Date.parse('2026-12-01T10:00:00.000Z') + s * 1000).toISOString();
    mkdirSync(join(project, '.routinely', 'history'), { recursive: true, mode: 0o700 });
    writeFileSync(
      join(project, '.routinely', 'history', 'x.jsonl'),
      line({
        scheduled_at: at(0),
        started_at: at(7),
        finished_at: at(7),
        result: 'skipped',
        reason: 'missed: the scheduler woke 7s late',
        exit_code: null,
        run_id: null,
        id: 'a000000000000001',
      }) +
        line({
          scheduled_at: at(60),
          started_at: at(60),
          finished_at: at(60),
          result: 'failure',
          reason: 'interrupted: pid 7 on h ended before the outcome was recorded',
          exit_code: null,
          run_id: 'r-20261201T100100Z-0001',
          id: 'a000000000000002',
        }),
      { mode: 0o600 },
    );
    const r = await runCli(['routine', 'history', 'x'], { cwd: project });
    expect(r.code, r.stderr).toBe(0);
    const [skip, lost] = r.stdout.trimEnd().split('\n');
    expect(skip).toMatch(/skipped +– +missed: the scheduler woke 7s late$/);
    expect(skip).not.toMatch(/late\)/);
    expect(lost).toMatch(/failed +– +interrupted: pid 7/);
  });
});

describe('routine history without an id', () => {
  it('merges every routine in time order, filters by --since/--until/--result, keeps the newest --limit, text and --json', async () => {
    const project = testProject({ routines: [cmd('backup', 'true'), cmd('report', 'exit 2'), cmd('sync', 'true')] });
    for (const id of ['backup', 'report', 'sync', 'backup']) await runCli(['routine', 'run', id], { cwd: project });
    const json = async (...args: string[]): Promise<Row[]> =>
      JSON.parse((await runCli(['routine', 'history', ...args, '--json'], { cwd: project })).stdout) as Row[];

    const all = await json();
    expect(all.map((r) => `${r.routine}:${r.result}`)).toEqual([
      'backup:success',
      'report:failure',
      'sync:success',
      'backup:success',
    ]);
    expect(all.map((r) => r.scheduled_at)).toEqual([...all.map((r) => r.scheduled_at)].sort());
    expect((await json('--result', 'failure')).map((r) => r.routine)).toEqual(['report']);
    // the words the text view prints are taken too
    expect((await json('--result', 'failed')).map((r) => r.routine)).toEqual(['report']);
    expect((await json('--result', 'ok')).map((r) => r.routine)).toEqual(['backup', 'sync', 'backup']);
    expect((await json('--limit', '2')).map((r) => r.routine)).toEqual(['sync', 'backup']);
    expect(await json('--since', '1h')).toHaveLength(4);
    expect(await json('--until', '1h')).toEqual([]);
    const from = all[2]!.scheduled_at;
    expect((await json('--since', from)).map((r) => r.routine)).toEqual(['sync', 'backup']);
    // one routine: the same order (the newest last, as journalctl), without the routine field;
    // --reverse (-r) for the newest first, in both views
    const one = await json('backup');
    expect(one).toHaveLength(2);
    expect(one[0]).not.toHaveProperty('routine');
    expect(Date.parse(one[0]!.scheduled_at)).toBeLessThan(Date.parse(one[1]!.scheduled_at));
    expect(await json('backup', '--reverse')).toEqual([...one].reverse());
    expect((await json('-r')).map((r) => r.routine)).toEqual(['backup', 'sync', 'report', 'backup']);
    expect((await json('backup', '--limit', '1'))[0]).toEqual(one[1]);

    const text = await runCli(['routine', 'history', '--since', 'today'], { cwd: project });
    expect(text.code).toBe(0);
    const lines = text.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(4);
    // times as routine list shows them: in the routine's zone (here this machine's, TZ), labelled
    expect(lines[1]).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ {2}report {2}failed +\S+ {2}exit code 2 {2}r-/);
    expect((await runCli(['routine', 'history', '--until', '2000-01-01'], { cwd: project })).stdout).toBe(
      'no fires in that range\n',
    );
  });

  it('names the flag of a time it cannot read, and a result it does not know', async () => {
    const project = testProject({ routines: [cmd('a', 'true')] });
    const bad = await runCli(['routine', 'history', '--since', 'last night'], { cwd: project });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--since "last night" is not a time: give ISO-8601/);
    const result = await runCli(['routine', 'history', '--result', 'broken'], { cwd: project });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/--result.*broken.*ok, failed, skipped, success, failure/);
    // the forms journalctl takes, which the old message itself suggested
    for (const t of ['2h ago', '-1h', '1h30m', '1 hour ago', '10:00', 'today']) {
      const r = await runCli(['routine', 'history', '--since', t], { cwd: project });
      expect(r.code, `${t}: ${r.stderr}`).toBe(0);
    }
    const order = await runCli(['routine', 'history', '--since', '1h', '--until', '2h'], { cwd: project });
    expect(order.code).toBe(2);
    expect(order.stderr).toMatch(/--since 1h is after --until 2h/);
  });
});

describe('one zone rule and removed routines', () => {
  it("times in the routine's zone as routine list shows them, and the history of a routine removed from the config", async () => {
    const project = testProject({
      routines: [{ ...cmd('paris', 'true'), timezone: 'Europe/Paris' }, cmd('gone', 'exit 1')],
    });
    await runCli(['routine', 'run', 'paris'], { cwd: project });
    await runCli(['routine', 'run', 'gone'], { cwd: project });
    const paris = await runCli(['routine', 'history', 'paris'], { cwd: project, env: { TZ: 'UTC' } });
    expect(paris.stdout).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d GMT\+1 {2}ok /);
    const [fire] = JSON.parse(
      (await runCli(['routine', 'history', 'paris', '--json'], { cwd: project })).stdout,
    ) as Row[];
    const shown = new Intl.DateTimeFormat('en-CA', {
      timeZone: 'Europe/Paris',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      hourCycle: 'h23',
    }).format(new Date(fire!.scheduled_at));
    expect(paris.stdout).toContain(` ${shown} GMT+1`);
    // JSON stays UTC
    expect(fire!.scheduled_at).toMatch(/Z$/);

    writeFileSync(
      join(project, 'routinely.json'),
      JSON.stringify({ routines: [{ ...cmd('paris', 'true'), timezone: 'Europe/Paris' }] }),
    );
    const gone = await runCli(['routine', 'history', 'gone'], { cwd: project });
    expect(gone.code).toBe(0);
    expect(gone.stderr).toBe(
      'routinely: warning: routine gone is no longer in routinely.json; this is its kept history\n',
    );
    expect(gone.stdout).toMatch(/failed +\S+ {2}exit code 1 {2}r-/);
    // the merged view is of the routines the config names (it reads no other state)
    expect(
      (JSON.parse((await runCli(['routine', 'history', '--json'], { cwd: project })).stdout) as Row[]).map(
        (r) => r.routine,
      ),
    ).toEqual(['paris']);
    // a routine that never was: unknown, as before
    const never = await runCli(['routine', 'history', 'never'], { cwd: project });
    expect(never.code).toBe(2);
    expect(never.stderr).toMatch(/unknown routine "never" \(known: paris\)/);
  });
});

describe("one order for a routine's fires (SPEC §6, §11)", () => {
  it(
    "recorded out of scheduled order (a queued or retried fire is recorded late): routine history -r, /api/routines/ID and the routine's page list them by scheduled time, newest first, the same",
    { timeout: 60_000 },
    async () => {
      const project = testProject({ routines: [cmd('r', 'true')] });
      const at = (min: number): string => `2026-12-04T17:${String(min).padStart(2, '0')}:00.000Z`;
      // written in this order: 17:43, 17:44, 17:41, 17:42
      await withBackend(loadProject({ cwd: project }), async (b) => {
        for (const m of [43, 44, 41, 42]) {
          await b.routines.recordFire(
            'r',
            {
              result: 'success',
              reason: null,
              scheduled_at: at(m),
              started_at: at(m),
              finished_at: at(m),
              duration_ms: 5,
              exit_code: 0,
              run_id: `r-20261204T17${m}00Z-aa`,
            },
            () => {},
          );
        }
      });
      const newestFirst = [44, 43, 42, 41].map(at);
      const cli = JSON.parse(
        (await runCli(['routine', 'history', 'r', '-r', '--json'], { cwd: project })).stdout,
      ) as Row[];
      expect(cli.map((f) => f.scheduled_at)).toEqual(newestFirst);
      const serve = startCli(['serve', '--http', '127.0.0.1:0'], { cwd: project, timeoutMs: 50_000 });
      const url = (await serve.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!;
      const api = JSON.parse((await httpGet(`${url}api/routines/r`)).body) as { fires: Row[] };
      expect(api.fires.map((f) => f.scheduled_at)).toEqual(newestFirst);
      // the page as it is served (its run ids in the order the table lists them)
      const page = (await httpGet(`${url}routines/r`)).body;
      const listed = [...page.matchAll(/r-20261204T17(\d\d)00Z-aa/g)].map((m) => Number(m[1]));
      expect([...new Set(listed)]).toEqual([44, 43, 42, 41]);
      serve.child.kill('SIGTERM');
      await serve.exited;
    },
  );
});
