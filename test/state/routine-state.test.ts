import { describe, expect, it } from 'vitest';
import { applyFire, checkRoutineState, emptyRecord, setPaused, type Fire } from '../../src/state/routine-state.js';

const fire = (result: Fire['result'], over: Partial<Fire> = {}): Fire => ({
  result, reason: result === 'skipped' ? 'exec busy' : null, scheduled_at: '2026-11-29T19:05:00.000Z', started_at: '2026-11-29T19:05:00.010Z',
  finished_at: '2026-11-29T19:05:01.000Z', duration_ms: 990, exit_code: 0, run_id: null, ...over,
});

describe('routine state', () => {
  it('counts successes, failures and skips apart; a skip never touches consecutive_failures', () => {
    let r = applyFire(undefined, fire('failure', { exit_code: 3 }));
    r = applyFire(r, fire('failure'));
    expect(r).toMatchObject({ consecutive_failures: 2, counts: { success: 0, failure: 2, skipped: 0 }, last_result: 'failure' });
    r = applyFire(r, fire('skipped'));
    expect(r).toMatchObject({ consecutive_failures: 2, counts: { failure: 2, skipped: 1 }, last_result: 'skipped', last_reason: 'exec busy' });
    expect(r.last_skipped_at).toBe('2026-11-29T19:05:01.000Z');
    expect(r.last_failure_at).toBe('2026-11-29T19:05:01.000Z');
    r = applyFire(r, fire('success', { run_id: 'r-1' }));
    expect(r).toMatchObject({ consecutive_failures: 0, counts: { success: 1, failure: 2, skipped: 1 }, last_run_id: 'r-1', last_duration_ms: 990 });
  });

  it('pauses with a note and resumes without one, keeping the rest', () => {
    const r = setPaused(applyFire(undefined, fire('success')), true, 'migrating');
    expect(r).toMatchObject({ paused: true, paused_note: 'migrating', counts: { success: 1 } });
    expect(setPaused(r, false, 'ignored')).toMatchObject({ paused: false, paused_note: null });
  });

  it('accepts the SPEC §6 shape and fills what is missing; rejects what is not state', () => {
    const ok = checkRoutineState({ version: 1, routines: { auto: { last_result: 'skipped', counts: { success: 12, failure: 0, skipped: 4 } } } });
    expect(ok).toMatchObject({ routines: { auto: { ...emptyRecord(), last_result: 'skipped', counts: { success: 12, failure: 0, skipped: 4 } } } });
    expect(checkRoutineState([])).toBe('not an object');
    expect(checkRoutineState({ version: 2, routines: {} })).toMatch(/version/);
    expect(checkRoutineState({ version: 1, routines: { a: 5 } })).toMatch(/routines\.a/);
  });
});
