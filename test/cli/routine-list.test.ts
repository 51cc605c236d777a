// `routine list`'s rows, table and --check (SPEC §6, §10): a routine is failing until a run
// succeeds, whatever skips come after; the table fits 80 columns.

import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { systemProbe } from '../../src/process/identity.js';
import { checkProblems, listRows, renderTable, type ListedRoutine } from '../../src/cli/routine-list.js';
import { applyFire, emptyRecord, type Fire, type RoutineRecord } from '../../src/state/routine-state.js';

const NOW = Date.parse('2026-11-29T19:00:00Z');
const fire = (result: Fire['result'], at: string, reason: string | null = null): Fire => ({
  result,
  reason,
  scheduled_at: at,
  started_at: at,
  finished_at: at,
  duration_ms: 10,
  exit_code: result === 'failure' ? 3 : null,
  run_id: null,
});
const listed = (id: string): ListedRoutine => ({
  id,
  schedule: '* * * * *',
  timezone: 'UTC',
  action: 'command',
  enabled: true,
  lock: 'exec',
  starvedAfterSkips: 3,
  next: { at: NOW + 30_000, date: '2026-11-29', time: '19:00:30', zone: 'UTC' },
});
const record = (...fires: Fire[]): RoutineRecord =>
  fires.reduce<RoutineRecord>((r, f) => applyFire(r, f), emptyRecord());
const running = { running: true, text: 'running, pid 1 on h since 2026-11-29 18:00:00 UTC' };

describe('routine list: failing until a success', () => {
  const records = {
    bad: record(
      fire('failure', '2026-11-29T18:58:00.000Z', 'exit code 3'),
      fire('skipped', '2026-11-29T18:59:00.000Z', 'exec busy'),
      fire('skipped', '2026-11-29T18:59:30.000Z', 'exec busy'),
    ),
    worse: record(
      fire('failure', '2026-11-29T18:57:00.000Z', 'exit code 3'),
      fire('failure', '2026-11-29T18:58:00.000Z', 'exit code 3'),
    ),
    fine: record(
      fire('failure', '2026-11-29T18:57:00.000Z', 'exit code 3'),
      fire('success', '2026-11-29T18:58:00.000Z'),
      fire('skipped', '2026-11-29T18:59:00.000Z', 'exec busy'),
    ),
  };
  const routines = ['bad', 'worse', 'fine'].map(listed);
  const rows = listRows(routines, records, emptyRecord);

  it('the JSON rows keep last_result and add failing from consecutive_failures', () => {
    expect(rows.map((r) => [r.id, r.last_result, r.failing, r.consecutive_failures])).toEqual([
      ['bad', 'skipped', true, 1],
      ['worse', 'failure', true, 2],
      ['fine', 'skipped', false, 0],
    ]);
  });

  it('the table says failing, with the skips after it', () => {
    const lines = renderTable(routines, rows, running, NOW, { color: false, width: 80 });
    expect(lines.find((l) => l.startsWith('bad'))).toMatch(/ failing \(then 2 skips\) +0\/1\/2$/);
    expect(lines.find((l) => l.startsWith('worse'))).toMatch(/ failing x2 2m ago +0\/2\/0$/);
    expect(lines.find((l) => l.startsWith('fine'))).toMatch(/ skipped 1m ago +1\/1\/1$/);
    expect(lines.every((l) => l.length <= 80)).toBe(true);
  });

  it("a failure followed by skips that are not busy ones (its retry or previous run still going, a missed tick): the time is the failure's, the skips said, in the table and --check", () => {
    const after = {
      retried: record(
        fire('failure', '2026-11-29T18:58:00.000Z', 'exit code 3'),
        fire('skipped', '2026-11-29T18:59:58.000Z', 'previous run still running'),
        fire('skipped', '2026-11-29T18:59:59.000Z', 'previous run still running'),
      ),
    };
    const r = listRows([listed('retried')], after, emptyRecord);
    expect(r[0]).toMatchObject({ consecutive_skips: 0, last_result: 'skipped' });
    const lines = renderTable([listed('retried')], r, running, NOW, { color: false, width: 80 });
    // (before: "failing <1s ago", the last skip's time)
    expect(lines.find((l) => l.startsWith('retried'))).toMatch(/ failing 2m ago +0\/1\/2$/);
    expect(checkProblems(r, running)).toEqual([
      'failing routine: retried (failed at 2026-11-29T18:58:00.000Z, then skipped (previous run still running))',
    ]);
  });

  it('a last run recorded ahead of this clock (before it was stepped back) says so, never "<1s ago"', () => {
    const ahead = { ahead: record(fire('success', new Date(NOW + 2 * 3600_000).toISOString())) };
    const lines = renderTable([listed('ahead')], listRows([listed('ahead')], ahead, emptyRecord), running, NOW, {
      color: false,
      width: 80,
    });
    expect(lines.find((l) => l.startsWith('ahead'))).toMatch(/ ok 2h in the future +1\/0\/0$/);
  });

  it('--check fails on a failing routine, also when skips came after', () => {
    expect(checkProblems(rows, running)).toEqual([
      'failing routine: bad (failed at 2026-11-29T18:58:00.000Z, then 2 skips)',
      'failing routine: worse (exit code 3)',
    ]);
  });

  it('fits 80 columns with long ids, schedules and pause notes', () => {
    const long = (i: number): ListedRoutine => ({
      ...listed(`routine-with-a-rather-long-name-${i}`),
      schedule: '0,15,30,45 8-18 * * MON-FRI',
    });
    const many = [long(1), long(2)];
    const paused = {
      ...emptyRecord(),
      paused: true,
      paused_note: 'waiting for the storage migration to finish, see ticket 4711',
    };
    const lines = renderTable(many, listRows(many, { [many[0]!.id]: paused }, emptyRecord), running, NOW, {
      color: false,
      width: 80,
    });
    expect(lines.length).toBe(4);
    for (const l of lines) expect(l.length, l).toBeLessThanOrEqual(80);
  });
});

describe('routine list: a fire whose process is gone', () => {
  // a process of this host that has exited (its pid is free: a spawned `true`, reaped)
  const deadPid = spawnSync('sh', ['-c', 'echo $$']).stdout.toString().trim();
  const open = {
    id: '0d0d0d0d0d0d0d0d',
    scheduled_at: '2026-12-06T09:00:00.000Z',
    started_at: '2026-12-06T09:00:00.010Z',
    run_id: 'r-20261206T090000Z-dead',
    trigger: 'schedule' as const,
    owner: { pid: Number(deadPid), host: systemProbe().host, boot_id: null, start_time: null },
  };
  const rec = { ...emptyRecord(), open_fires: [open] } as RoutineRecord;

  it('shows as the interrupted failure its record will be; not while its record waits in the spool', () => {
    const [lost] = listRows([listed('a')], { a: rec }, emptyRecord);
    expect(lost).toMatchObject({ last_result: 'failure', failing: true, running_since: null });
    expect(lost!.last_reason).toMatch(/^interrupted: pid \d+ on /);
    const [spooled] = listRows([listed('a')], { a: rec }, emptyRecord, {}, (id) => id === open.id);
    expect(spooled).toMatchObject({ last_result: null, failing: false });
  });

  it("after the wall clock stepped back: the lost fire of the corrected clock is the last result, as its record will be (not hidden behind the fast clock's success)", () => {
    const now = Date.now();
    const iso = (ms: number): string => new Date(ms).toISOString();
    const fast = {
      ...emptyRecord(),
      last_result: 'success',
      last_scheduled_at: iso(now + 7200_000),
      last_started_at: iso(now + 7200_000),
      last_finished_at: iso(now + 7200_100),
      counts: { success: 3, failure: 0, skipped: 0 },
    } as RoutineRecord;
    const lostNow = { ...open, scheduled_at: iso(now - 2000), started_at: iso(now - 2000) };
    const [row] = listRows([listed('a')], { a: { ...fast, open_fires: [lostNow] } }, emptyRecord);
    expect(row).toMatchObject({ last_result: 'failure', failing: true, last_started_at: lostNow.started_at });
    // a lost fire of the fast clock itself (it started in the future too) stays late
    const lostFast = { ...open, scheduled_at: iso(now + 3600_000), started_at: iso(now + 3600_000) };
    const [late] = listRows([listed('a')], { a: { ...fast, open_fires: [lostFast] } }, emptyRecord);
    expect(late).toMatchObject({ last_result: 'success', counts: { failure: 1 } });
  });
});

describe('routine list: a row is the config facts, the record and the derived fields', () => {
  it("keeps every key of the record in the record's order (unknown ones too) and drops open_fires", () => {
    // a record from a newer writer: a key this version does not know, in the middle
    const rec = {
      ...record(fire('success', '2026-11-29T18:58:00.000Z')),
      later_field: 'kept',
      open_fires: [],
    } as RoutineRecord;
    const [row] = listRows([listed('a')], { a: rec }, emptyRecord);
    const recordKeys = Object.keys(rec).filter((k) => k !== 'open_fires');
    expect(Object.keys(row!)).toEqual([
      'id',
      'schedule',
      'timezone',
      'action',
      'enabled',
      'lock',
      'next_run_at',
      ...recordKeys,
      'failing',
      'starved',
      'running_since',
      'phase',
      'phase_since',
      'waiting_for',
    ]);
    expect(row).toMatchObject({
      later_field: 'kept',
      last_result: 'success',
      next_run_at: new Date(NOW + 30_000).toISOString(),
    });
    expect(row).not.toHaveProperty('open_fires');
  });

  it("a record as this version writes it (one literal, not copied key by key) gives the same keys in the record's order", () => {
    for (const rec of [
      record(fire('success', '2026-11-29T18:58:00.000Z')),
      { ...record(fire('failure', '2026-11-29T18:58:00.000Z')), open_fires: [] },
      emptyRecord(),
    ]) {
      const [row] = listRows([listed('a')], { a: rec as RoutineRecord }, emptyRecord);
      const recordKeys = Object.keys(rec).filter((k) => k !== 'open_fires');
      expect(recordKeys).toEqual(Object.keys(emptyRecord()));
      expect(Object.keys(row!)).toEqual([
        ...['id', 'schedule', 'timezone', 'action', 'enabled', 'lock', 'next_run_at'],
        ...recordKeys,
        ...['failing', 'starved', 'running_since', 'phase', 'phase_since', 'waiting_for'],
      ]);
      for (const k of recordKeys) expect(row![k as keyof typeof row]).toEqual(rec[k as keyof typeof rec]);
      expect(row).not.toHaveProperty('open_fires');
    }
  });

  it('a paused routine has no next run, a routine without a record gets the empty one', () => {
    const [paused, none] = listRows([listed('p'), listed('n')], { p: { ...emptyRecord(), paused: true } }, emptyRecord);
    expect(paused!.next_run_at).toBeNull();
    expect(none).toMatchObject({ ...emptyRecord(), id: 'n', failing: false, starved: false, phase: null });
  });

  it('a tick queued while its routine is paused or disabled in the config is shown queued by neither (at its turn it is dropped)', () => {
    const queued = {
      phase: 'queued' as const,
      since: '2026-11-29T18:59:59.000Z',
      scheduled_at: '2026-11-29T18:59:59.000Z',
      behind: 'first',
    };
    const phases = { q: queued, p: queued, d: queued };
    const rows = listRows(
      [listed('q'), listed('p'), { ...listed('d'), enabled: false }],
      { p: { ...emptyRecord(), paused: true } },
      emptyRecord,
      phases,
    );
    expect(rows.map((r) => [r.id, r.phase])).toEqual([
      ['q', 'queued'],
      ['p', null],
      ['d', null],
    ]);
  });

  it("a retry queued or waiting after its tick's failed attempt is shown (a retry keeps its tick's scheduled time); the phase of the very fire the record shows ended is not", () => {
    const tick = '2026-11-29T18:59:00.000Z';
    // the attempt failed at 18:59:00.500; its retry queued at 18:59:02.500, behind another
    const failed = record({ ...fire('failure', tick, 'exit code 3'), finished_at: '2026-11-29T18:59:00.500Z' });
    const retry = { phase: 'queued' as const, since: '2026-11-29T18:59:02.500Z', scheduled_at: tick, behind: 'long' };
    const waiting = {
      phase: 'waiting' as const,
      since: '2026-11-29T18:59:02.500Z',
      scheduled_at: tick,
      lock: 'exec',
      holder: 'pid 7',
    };
    // the board of a fire whose record came after it (its phase began before the fire ended)
    const past = { phase: 'queued' as const, since: '2026-11-29T18:58:59.000Z', scheduled_at: tick, behind: 'long' };
    const rows = listRows(['r', 'w', 'p'].map(listed), { r: failed, w: failed, p: failed }, emptyRecord, {
      r: retry,
      w: waiting,
      p: past,
    });
    expect(rows.map((r) => [r.id, r.phase, r.waiting_for])).toEqual([
      ['r', 'queued', { behind: 'long' }],
      ['w', 'waiting', { lock: 'exec', holder: 'pid 7' }],
      ['p', null, null],
    ]);
  });
});
