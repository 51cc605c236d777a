import { describe, expect, it } from 'vitest';
import {
  applyFire,
  checkRoutineState,
  emptyRecord,
  foldLines,
  setPaused,
  type Fire,
} from '../../src/state/routine-state.js';
import { fireLine } from '../../src/state/history.js';

const fire = (result: Fire['result'], over: Partial<Fire> = {}): Fire => ({
  result,
  reason: result === 'skipped' ? 'exec busy' : null,
  scheduled_at: '2026-11-29T19:05:00.000Z',
  started_at: '2026-11-29T19:05:00.010Z',
  finished_at: '2026-11-29T19:05:01.000Z',
  duration_ms: 990,
  exit_code: 0,
  run_id: null,
  ...over,
});

describe('routine state', () => {
  it('counts successes, failures and skips apart; a skip never touches consecutive_failures', () => {
    let r = applyFire(undefined, fire('failure', { exit_code: 3 }));
    r = applyFire(r, fire('failure'));
    expect(r).toMatchObject({
      consecutive_failures: 2,
      counts: { success: 0, failure: 2, skipped: 0 },
      last_result: 'failure',
    });
    r = applyFire(r, fire('skipped'));
    expect(r).toMatchObject({
      consecutive_failures: 2,
      counts: { failure: 2, skipped: 1 },
      last_result: 'skipped',
      last_reason: 'exec busy',
    });
    expect(r.last_skipped_at).toBe('2026-11-29T19:05:01.000Z');
    expect(r.last_failure_at).toBe('2026-11-29T19:05:01.000Z');
    r = applyFire(r, fire('success', { run_id: 'r-1' }));
    expect(r).toMatchObject({
      consecutive_failures: 0,
      counts: { success: 1, failure: 2, skipped: 1 },
      last_run_id: 'r-1',
      last_duration_ms: 990,
    });
  });

  it('pauses with a note and resumes without one, keeping the rest', () => {
    const r = setPaused(applyFire(undefined, fire('success')), true, 'migrating');
    expect(r).toMatchObject({ paused: true, paused_note: 'migrating', counts: { success: 1 } });
    expect(setPaused(r, false, 'ignored')).toMatchObject({ paused: false, paused_note: null });
  });

  it('accepts the SPEC §6 shape and fills what is missing; rejects what is not state', () => {
    const ok = checkRoutineState({
      version: 1,
      routines: { auto: { last_result: 'skipped', counts: { success: 12, failure: 0, skipped: 4 } } },
    });
    expect(ok).toMatchObject({
      routines: { auto: { ...emptyRecord(), last_result: 'skipped', counts: { success: 12, failure: 0, skipped: 4 } } },
    });
    // every field in emptyRecord's order (routine list builds its rows on it), a later
    // version's field kept after them, garbage turned into the empty value
    const full = checkRoutineState({
      version: 1,
      routines: {
        a: { later: 1, paused: 'yes', last_exit_code: 1.5, counts: { success: -1 }, last_reason: 7 },
      },
    });
    expect(typeof full === 'string' ? full : Object.keys(full.routines.a!)).toEqual([
      ...Object.keys(emptyRecord()),
      'later',
    ]);
    expect(typeof full === 'string' ? full : full.routines.a).toEqual({ ...emptyRecord(), later: 1 });
    // open fires: only the ones that are (none here: not even the raw list)
    const junk = checkRoutineState({ version: 1, routines: { a: { open_fires: [{ id: 1 }, 'x'] } } });
    expect(typeof junk === 'string' ? junk : junk.routines.a).not.toHaveProperty('open_fires');
    expect(checkRoutineState([])).toBe('not an object');
    expect(checkRoutineState({ version: 2, routines: {} })).toMatch(/version/);
    expect(checkRoutineState({ version: 1, routines: { a: 5 } })).toMatch(/routines\.a/);
  });
});

describe('folding a history with a damaged line (issue 49, item 3)', () => {
  const owner = { pid: 4711, host: 'h', boot_id: 'b', start_time: '100' };
  const at = (s: number): string => new Date(Date.UTC(2026, 11, 4, 12, 0, s)).toISOString();
  const open = (id: string, s: number, trigger: 'schedule' | 'manual' = 'schedule', who = owner) => ({
    kind: 'open' as const,
    id: `o${id}`,
    open: { id, scheduled_at: at(s), started_at: at(s), run_id: null, trigger, owner: who },
  });
  const close = (
    id: string,
    s: number,
    result: 'success' | 'failure' = 'success',
    reason: string | null = null,
    finished = s + 1,
  ) => ({
    kind: 'fire' as const,
    id: `c${id}-${finished}`,
    entry: { scheduled_at: at(s), started_at: at(s), finished_at: at(finished), result, reason, closes: id },
  });

  it('a tick whose record was lost is ended by the close of a later tick of the same scheduler: neither running nor a failure', () => {
    const { record } = foldLines([open('a', 1), /* its close damaged */ open('b', 2), close('b', 2)]);
    expect(record.open_fires).toBeUndefined();
    expect(record).toMatchObject({
      last_result: 'success',
      last_scheduled_at: at(2),
      counts: { success: 1, failure: 0, skipped: 0 },
      consecutive_failures: 0,
    });
  });

  it('an old fire reconciled late (interrupted) counts, and never becomes the last result', () => {
    const { record } = foldLines([
      open('a', 1),
      open('b', 2, 'manual', { ...owner, pid: 9 }),
      close('b', 2),
      close('a', 1, 'failure', 'interrupted: pid 4711 on h ended before the outcome was recorded', 30),
    ]);
    expect(record).toMatchObject({
      last_result: 'success',
      last_scheduled_at: at(2),
      counts: { success: 1, failure: 1, skipped: 0 },
      consecutive_failures: 0,
    });
  });

  it('a run that outlasts its interval, recorded after the ticks skipped while it ran, is the newest run: failing, recovered, no longer starved', () => {
    const skipped = (s: number, reason = 'previous run still running') => ({
      kind: 'fire' as const,
      id: `s${s}`,
      entry: { scheduled_at: at(s), started_at: at(s), finished_at: at(s), result: 'skipped' as const, reason },
    });
    // two failed runs of 3 s, each recorded after two ticks it made skip
    const failing = foldLines([
      open('a', 0),
      skipped(1),
      skipped(2),
      close('a', 0, 'failure', 'exit code 3', 3),
      open('b', 4),
      skipped(5),
      skipped(6),
      close('b', 4, 'failure', 'exit code 3', 7),
    ]).record;
    expect(failing).toMatchObject({
      last_result: 'skipped',
      consecutive_failures: 2,
      counts: { success: 0, failure: 2, skipped: 4 },
    });
    // then a run that succeeds, recorded late the same way: recovered
    const recovered = foldLines([
      open('a', 0),
      skipped(1),
      close('a', 0, 'failure', 'exit code 3', 2),
      open('b', 3),
      skipped(4),
      close('b', 3, 'success', null, 5),
    ]).record;
    expect(recovered).toMatchObject({ consecutive_failures: 0, counts: { success: 1, failure: 1, skipped: 2 } });
    // busy skips (starving), then runs that each outlast a tick: the first success ends the starving
    const fed = foldLines([
      skipped(0, 'exec busy'),
      skipped(1, 'exec busy'),
      skipped(2, 'exec busy'),
      open('a', 3),
      skipped(4),
      close('a', 3, 'success', null, 5),
    ]).record;
    expect(fed).toMatchObject({ consecutive_skips: 0, consecutive_failures: 0 });
  });

  it('a fire that waited for its lock starts after the ticks it made skip: the last tick on record stays the latest (catch-up reads it)', () => {
    const skipped = (s: number) => ({
      kind: 'fire' as const,
      id: `s${s}`,
      entry: {
        scheduled_at: at(s),
        started_at: at(s),
        finished_at: at(s),
        result: 'skipped' as const,
        reason: 'previous run still running',
      },
    });
    const { record } = foldLines([
      skipped(30),
      skipped(40),
      {
        kind: 'fire' as const,
        id: 'w',
        entry: {
          scheduled_at: at(20),
          started_at: at(42),
          finished_at: at(43),
          result: 'failure' as const,
          reason: 'exit code 1',
        },
      },
    ]);
    expect(record).toMatchObject({
      last_scheduled_at: at(40),
      consecutive_failures: 1,
      counts: { failure: 1, skipped: 2 },
    });
  });

  it('a manual run of the same process, or a fire of another process, is not ended by a later close', () => {
    const manual = foldLines([open('m', 1, 'manual'), open('b', 2), close('b', 2)]);
    expect(manual.record.open_fires?.map((o) => o.id)).toEqual(['m']);
    const other = foldLines([open('x', 1, 'schedule', { ...owner, start_time: '200' }), open('b', 2), close('b', 2)]);
    expect(other.record.open_fires?.map((o) => o.id)).toEqual(['x']);
  });
});

describe('a fire recorded after the wall clock stepped back', () => {
  const at = (h: number, s: number): string => new Date(Date.UTC(2026, 11, 4, h, 0, s)).toISOString();
  const line = (h: number, s: number, result: 'success' | 'failure', newest?: true) => ({
    kind: 'fire' as const,
    id: `${h}-${s}`,
    entry: {
      scheduled_at: at(h, s),
      started_at: at(h, s),
      finished_at: at(h, s + 1),
      result,
      reason: result === 'failure' ? 'exit code 1' : null,
      ...(newest ? { newest } : {}),
    },
  });
  // two successes on a clock 2 h fast, then a failure once it was stepped back
  it('is the last result when its line says it is the newest (recorded while the last one lay in the future)', () => {
    const { record } = foldLines([
      line(14, 0, 'success'),
      line(14, 1, 'success'),
      line(12, 5, 'failure', true),
      line(12, 6, 'failure'),
    ]);
    expect(record).toMatchObject({
      last_result: 'failure',
      last_started_at: at(12, 6),
      consecutive_failures: 2,
      counts: { success: 2, failure: 2, skipped: 0 },
    });
  });

  it('without it, an earlier fire recorded later is late: it counts, and the last result stays', () => {
    const { record } = foldLines([line(14, 0, 'success'), line(14, 1, 'success'), line(12, 5, 'failure')]);
    expect(record).toMatchObject({ last_result: 'success', last_started_at: at(14, 1), counts: { failure: 1 } });
  });

  it("the line says so when the routine's last fire started more than a second in the recorder's future, and only then", () => {
    const f = fire('failure', { started_at: at(12, 5), finished_at: at(12, 6) });
    const now = Date.parse(at(12, 6));
    expect(JSON.parse(fireLine(f, {}, now, { last_started_at: at(14, 1) }))).toMatchObject({ newest: true });
    expect(JSON.parse(fireLine(f, {}, now, { last_started_at: at(12, 7) }))).not.toHaveProperty('newest');
    expect(JSON.parse(fireLine(f, {}, now, { last_started_at: null }))).not.toHaveProperty('newest');
    expect(JSON.parse(fireLine(f, {}, now))).not.toHaveProperty('newest');
    // a fire of the fast clock itself, still finishing after the step: not the newest
    const ahead = fire('success', { started_at: at(14, 2), finished_at: at(14, 3) });
    expect(JSON.parse(fireLine(ahead, {}, now, { last_started_at: at(14, 1) }))).not.toHaveProperty('newest');
  });
});
