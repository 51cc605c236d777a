// The scheduler's board of phases (delayed, queued, waiting) and how routine list reads it (SPEC §6):
// a board is input and is checked field by field; the recorder writes the newest board after the
// one under way and never throws; clearing a fire leaves the phase of the tick that took its
// place; a row shows a phase until the record says that very fire ended.

import { describe, expect, it } from 'vitest';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { checkBoard, PhaseRecorder, readPhasesFile, type PhaseBoard } from '../../src/state/phases.js';
import { testdir } from '../helpers/testdir.js';
import { listRows, phasesOf, renderTable, withWaits, type ListedRoutine } from '../../src/cli/routine-list.js';
import { applyFire, emptyRecord, type RoutineRecord } from '../../src/state/routine-state.js';

const NOW = Date.parse('2026-12-04T20:00:00Z');
const owner: PhaseBoard['owner'] = { pid: 4242, host: 'h1', boot_id: 'b', start_time: '123' };
const at = (s: number): Date => new Date(NOW + s * 1000);

function recorder(opts: { fail?: () => boolean } = {}) {
  const written: PhaseBoard[] = [];
  const warnings: string[] = [];
  let release: (() => void) | null = null;
  let hold = false;
  const r = new PhaseRecorder({
    owner,
    clock: { now: () => NOW },
    warn: (m) => warnings.push(m),
    write: async (b) => {
      if (hold) await new Promise<void>((res) => (release = res));
      if (opts.fail?.()) throw new Error('EIO: i/o error');
      written.push(structuredClone(b));
    },
  });
  return {
    r,
    written,
    warnings,
    holdWrites: () => (hold = true),
    release: () => {
      hold = false;
      release?.();
    },
  };
}

describe('PhaseRecorder', () => {
  it('writes each change; clearing a fire leaves the phase of the tick that took its place', async () => {
    const { r, written } = recorder();
    r.queued('b', at(0), 'a');
    await r.settled();
    expect(written.at(-1)!.routines).toEqual({
      b: { phase: 'queued', since: new Date(NOW).toISOString(), scheduled_at: at(0).toISOString(), behind: 'a' },
    });
    // the next tick supersedes the queued one: queued again, then the old fire ends
    r.queued('b', at(60), 'a');
    r.clear('b', at(0));
    await r.settled();
    expect(written.at(-1)!.routines.b).toMatchObject({ phase: 'queued', scheduled_at: at(60).toISOString() });
    r.waiting('c', at(60), 'db', 'lock run since 20:00:00');
    r.clear('b', at(60));
    await r.settled();
    expect(Object.keys(written.at(-1)!.routines)).toEqual(['c']);
    expect(written.at(-1)!.owner).toEqual(owner);
  });

  it('a burst of changes while a write is under way is one more write, of the newest board', async () => {
    const { r, written, holdWrites, release } = recorder();
    holdWrites();
    r.queued('a', at(0), 'x');
    for (const id of ['b', 'c', 'd']) r.queued(id, at(0), 'x');
    r.clear('a', at(0));
    release();
    await r.settled();
    expect(written.length).toBe(2);
    expect(Object.keys(written[1]!.routines)).toEqual(['b', 'c', 'd']);
  });

  it('a write that fails is said once and never thrown; the next change writes again', async () => {
    let failing = true;
    const { r, written, warnings } = recorder({ fail: () => failing });
    r.queued('a', at(0), 'x');
    await r.settled();
    r.queued('b', at(0), 'x');
    await r.settled();
    expect(warnings).toEqual([
      "the routines' phases (delayed, queued, waiting) could not be written: EIO: i/o error; views show them once they can be",
    ]);
    failing = false;
    r.clear('a', at(0));
    await r.settled();
    expect(Object.keys(written.at(-1)!.routines)).toEqual(['b']);
  });
});

describe('checkBoard', () => {
  const good = {
    owner,
    written_at: new Date(NOW).toISOString(),
    routines: {
      a: {
        phase: 'waiting',
        since: at(0).toISOString(),
        scheduled_at: at(0).toISOString(),
        lock: 'db',
        holder: 'lock run',
      },
    },
  };

  it('takes a board whose every field is one', () => {
    expect(checkBoard(good)).toEqual(good);
  });

  it("takes a fire held back by its jitter or a retry's back-off, until when and why", () => {
    const t = good.written_at;
    const delayed = {
      ...good,
      routines: {
        j: { phase: 'delayed', since: t, scheduled_at: t, until: at(8).toISOString(), why: 'jitter' },
        r: { phase: 'delayed', since: t, scheduled_at: t, until: at(9).toISOString(), why: 'retry', attempt: 2, of: 3 },
      },
    };
    expect(checkBoard(delayed)).toEqual(delayed);
  });

  it.each([
    ['not an object', 'x'],
    ['no owner', { ...good, owner: null }],
    ['a pid that is no pid', { ...good, owner: { ...owner, pid: -1 } }],
    ['a time that is no time', { ...good, written_at: 'yesterday' }],
    ['a phase it does not know', { ...good, routines: { a: { ...good.routines.a, phase: 'sleeping' } } }],
    [
      'queued without behind',
      { ...good, routines: { a: { phase: 'queued', since: good.written_at, scheduled_at: good.written_at } } },
    ],
    ['a holder of 10 000 characters', { ...good, routines: { a: { ...good.routines.a, holder: 'x'.repeat(10_000) } } }],
    [
      'delayed without until',
      {
        ...good,
        routines: { a: { phase: 'delayed', since: good.written_at, scheduled_at: good.written_at, why: 'jitter' } },
      },
    ],
    [
      'a retry delayed without its attempt',
      {
        ...good,
        routines: {
          a: {
            phase: 'delayed',
            since: good.written_at,
            scheduled_at: good.written_at,
            until: good.written_at,
            why: 'retry',
            of: 3,
          },
        },
      },
    ],
    [
      'delayed for a reason it does not know',
      {
        ...good,
        routines: {
          a: {
            phase: 'delayed',
            since: good.written_at,
            scheduled_at: good.written_at,
            until: good.written_at,
            why: 'nap',
          },
        },
      },
    ],
  ])('refuses %s', (_, v) => {
    expect(checkBoard(v)).toBe(null);
  });
});

describe('phases.json', () => {
  it.each([
    ['NUL bytes', '\0\0\0\0'],
    ['half a board', '{"owner":{"pid":1,'],
    [
      'a board of something else',
      '{"owner":{"pid":1,"host":"h","boot_id":null,"start_time":null},"written_at":"2026-12-04T20:00:00Z","routines":{"a":{"phase":"asleep"}}}',
    ],
  ])('with %s: said, with its path, and no phases (the next write replaces it)', (_, text) => {
    const stateDir = join(testdir(), 'state');
    mkdirSync(stateDir, { mode: 0o700 });
    writeFileSync(join(stateDir, 'phases.json'), text, { mode: 0o600 });
    const warnings: string[] = [];
    expect(readPhasesFile({ stateDir }, (m) => warnings.push(m))).toBe(null);
    expect(warnings).toEqual([
      expect.stringMatching(
        new RegExp(
          `^${join(stateDir, 'phases.json')}.* is corrupt \\(.*\\); .*the routines show no delayed, queued or waiting phase until the scheduler writes it again$`,
        ),
      ),
    ]);
  });

  it('missing: no phases, nothing said', () => {
    const warnings: string[] = [];
    expect(readPhasesFile({ stateDir: testdir() }, (m) => warnings.push(m))).toBe(null);
    expect(warnings).toEqual([]);
  });
});

describe('routine list rows with phases', () => {
  const listed = (id: string): ListedRoutine => ({
    id,
    schedule: '* * * * *',
    timezone: 'UTC',
    action: 'command',
    enabled: true,
    lock: 'db',
    starvedAfterSkips: 3,
    next: { at: NOW + 30_000, date: '2026-12-04', time: '20:00:30', zone: 'UTC' },
  });
  const board = (routines: PhaseBoard['routines'], since = new Date(NOW - 5000).toISOString()): PhaseBoard => ({
    owner,
    written_at: since,
    routines,
  });
  const queued = {
    phase: 'queued' as const,
    since: new Date(NOW - 5000).toISOString(),
    scheduled_at: at(-5).toISOString(),
    behind: 'a',
  };
  const waiting = {
    phase: 'waiting' as const,
    since: new Date(NOW - 12_000).toISOString(),
    scheduled_at: at(-12).toISOString(),
    lock: 'db',
    holder: 'lock run since 19:59:48',
  };
  const skip = (scheduled: Date) => ({
    result: 'skipped' as const,
    reason: 'previous run still running',
    scheduled_at: scheduled.toISOString(),
    started_at: scheduled.toISOString(),
    finished_at: scheduled.toISOString(),
    duration_ms: 0,
    exit_code: null,
    run_id: null,
  });

  it('shows queued and waiting with what each waits for, in the JSON rows and the table', () => {
    const routines = ['a', 'b', 'c'].map(listed);
    const rows = listRows(routines, {}, emptyRecord, phasesOf([board({ b: queued, c: waiting })]));
    expect(rows.map((r) => [r.id, r.phase, r.waiting_for])).toEqual([
      ['a', null, null],
      ['b', 'queued', { behind: 'a' }],
      ['c', 'waiting', { lock: 'db', holder: 'lock run since 19:59:48' }],
    ]);
    expect(rows[1]!.phase_since).toBe(queued.since);
    const lines = renderTable(routines, rows, { running: true, text: 'running' }, NOW, { color: false, width: 80 });
    expect(lines.find((l) => l.startsWith('b '))).toMatch(/ queued 5s behind a /);
    expect(lines.find((l) => l.startsWith('c '))).toMatch(/ waiting 12s: db busy /);
  });

  it("shows a fire held back by its jitter or a retry's back-off: until when and why in the JSON rows, when it fires in the table's NEXT; not while paused", () => {
    const jitter = {
      phase: 'delayed' as const,
      since: new Date(NOW - 2000).toISOString(),
      scheduled_at: at(-2).toISOString(),
      until: new Date(NOW + 7000).toISOString(),
      why: 'jitter' as const,
    };
    const retry = {
      phase: 'delayed' as const,
      since: new Date(NOW - 1000).toISOString(),
      scheduled_at: at(-3).toISOString(),
      until: new Date(NOW + 16_000).toISOString(),
      why: 'retry' as const,
      attempt: 2,
      of: 3,
    };
    // the retry's tick failed (its record ended before the back-off began): still its phase
    const failed = applyFire(emptyRecord(), {
      ...skip(at(-3)),
      result: 'failure',
      reason: 'exit code 1',
      finished_at: new Date(NOW - 1500).toISOString(),
      exit_code: 1,
    });
    const routines = ['j', 'r'].map(listed);
    const rows = listRows(routines, { r: failed }, emptyRecord, phasesOf([board({ j: jitter, r: retry })]));
    expect(rows.map((r) => [r.id, r.phase, r.phase_since, r.waiting_for])).toEqual([
      ['j', 'delayed', jitter.since, { until: jitter.until, why: 'jitter' }],
      ['r', 'delayed', retry.since, { until: retry.until, why: 'retry', attempt: 2, of: 3 }],
    ]);
    const lines = renderTable(routines, rows, { running: true, text: 'running' }, NOW, { color: false, width: 80 });
    expect(lines.find((l) => l.startsWith('j '))).toMatch(/ jitter, fires in 7s /);
    expect(lines.find((l) => l.startsWith('r '))).toMatch(/ retry 2 of 3 in 16s +failing /);
    // paused meanwhile: it will not fire at its time (it is dropped then), so it is not shown
    const paused = listRows(
      [listed('j')],
      { j: { ...emptyRecord(), paused: true } },
      emptyRecord,
      phasesOf([board({ j: jitter })]),
    );
    expect(paused[0]).toMatchObject({ phase: null, waiting_for: null });
  });

  it("a fire a board only holds back (delayed) hides neither a manual fire waiting in its lock's line nor another scheduler's queued or waiting tick", () => {
    const delayed = {
      phase: 'delayed' as const,
      since: new Date(NOW - 1000).toISOString(),
      scheduled_at: at(-3).toISOString(),
      until: new Date(NOW + 16_000).toISOString(),
      why: 'retry' as const,
      attempt: 2,
      of: 3,
    };
    const manual = { ...waiting, since: new Date(NOW - 500).toISOString() };
    expect(withWaits({ c: manual }, phasesOf([board({ c: delayed })]))).toEqual({ c: manual });
    // a board's queued or waiting tick is what the scheduler does: it stays over a manual wait
    expect(withWaits({ c: manual }, phasesOf([board({ c: queued })]))).toEqual({ c: queued });
    // two schedulers' boards: the other host's waiting tick, though older, over this one's back-off
    expect(phasesOf([board({ c: delayed }), board({ c: waiting })])).toEqual({ c: waiting });
    expect(phasesOf([board({ c: waiting }), board({ c: delayed })])).toEqual({ c: waiting });
  });

  it("a later tick's skip leaves the phase; the record of that very fire ends it; a running fire is running", () => {
    const later = applyFire(emptyRecord(), skip(at(0)));
    const same = applyFire(emptyRecord(), skip(at(-12)));
    // open on another host: it cannot be told dead there, so it runs
    const open: RoutineRecord = {
      ...emptyRecord(),
      open_fires: [
        {
          id: 'f1',
          scheduled_at: at(-12).toISOString(),
          started_at: new Date(NOW - 1000).toISOString(),
          run_id: null,
          trigger: 'schedule',
          owner: { pid: 1, host: 'elsewhere', boot_id: null, start_time: null },
        },
      ],
    };
    const phases = phasesOf([board({ c: waiting })]);
    expect(listRows([listed('c')], { c: later }, emptyRecord, phases)[0]).toMatchObject({ phase: 'waiting' });
    expect(listRows([listed('c')], { c: same }, emptyRecord, phases)[0]).toMatchObject({
      phase: null,
      waiting_for: null,
    });
    expect(listRows([listed('c')], { c: open }, emptyRecord, phases)[0]).toMatchObject({
      phase: 'running',
      waiting_for: null,
    });
  });

  it('in 80 columns a starved routine says starved while its fire is queued (--json has both); a long phase gives way before the schedule', () => {
    const starved: RoutineRecord = { ...applyFire(emptyRecord(), skip(at(-1))), consecutive_skips: 5 };
    const routines = [listed('sync'), { ...listed('b'), schedule: '*/2 * * * * *' }];
    const rows = listRows(
      routines,
      { sync: starved },
      emptyRecord,
      phasesOf([board({ sync: queued, b: { ...queued, behind: 'a-routine-with-a-long-name' } })]),
    );
    expect(rows[0]).toMatchObject({ starved: true, phase: 'queued', waiting_for: { behind: 'a' } });
    const lines = renderTable(routines, rows, { running: true, text: 'running' }, NOW, { color: false, width: 80 });
    expect(lines.find((l) => l.startsWith('sync '))).toMatch(/ starved: 5 skips /);
    const b = lines.find((l) => l.startsWith('b '))!;
    expect(b.length).toBeLessThanOrEqual(80);
    expect(b).toMatch(/^b +\*\/2 \* \* \* \* \* +.+ queued behind a-\S*… /);
  });

  it('too wide, a phase drops its duration before it is cut or the schedule is', () => {
    const routines = ['second', 'report'].map((id) => ({ ...listed(id), schedule: '*/30 * * * * *' }));
    const rows = listRows(
      routines,
      {},
      emptyRecord,
      phasesOf([board({ second: { ...queued, behind: 'first' }, report: { ...waiting, lock: 'cache' } })]),
    );
    const lines = renderTable(routines, rows, { running: true, text: 'running' }, NOW, { color: false, width: 80 });
    expect(lines.every((l) => l.length <= 80)).toBe(true);
    expect(lines.find((l) => l.startsWith('second '))).toMatch(/ \*\/30 \* \* \* \* \* +.+ queued behind first /);
    expect(lines.find((l) => l.startsWith('report '))).toMatch(/ \*\/30 \* \* \* \* \* +.+ waiting: cache busy /);
    const wide = renderTable(routines, rows, { running: true, text: 'running' }, NOW, { color: false, width: 120 });
    expect(wide.find((l) => l.startsWith('second '))).toMatch(/ queued 5s behind first /);
  });

  it('of two boards (two schedulers), the newer phase of a routine', () => {
    const older = board({ b: { ...queued, since: new Date(NOW - 9000).toISOString() } });
    expect(phasesOf([board({ b: queued }), older]).b!.since).toBe(queued.since);
    expect(phasesOf([older, board({ b: queued })]).b!.since).toBe(queued.since);
  });
});
