// /metrics content (SPEC §11): the names, labels and values of the exposition.

import { describe, expect, it } from 'vitest';
import { Metrics } from '../../src/http/metrics.js';
import type { Fire } from '../../src/state/routine-state.js';
import { sample } from '../helpers/http.js';

const fire = (result: Fire['result'], ms = 1500): Fire => ({
  result, reason: null, scheduled_at: '2026-11-29T19:00:00.000Z', started_at: '2026-11-29T19:00:00.010Z', finished_at: '2026-11-29T19:00:01.510Z', duration_ms: ms, exit_code: 0, run_id: null,
});
const state = (over: Partial<{ paused: boolean; last_success_at: string | null; consecutive_skips: number }> = {}) => ({
  routines: [
    { id: 'a', paused: false, last_success_at: '2026-11-29T19:00:01.510Z', consecutive_skips: 0, ...over },
    { id: 'b', paused: true, last_success_at: null, consecutive_skips: 3 },
  ],
  execLockHeld: true,
  schedulerUp: true,
});

describe('Metrics', () => {
  it('counts fires by routine and result, and times the ones that ran', async () => {
    const m = new Metrics(true);
    m.fired('a', fire('success', 1500));
    m.fired('a', fire('failure', 250));
    m.fired('a', fire('skipped', 0));
    m.fired('a', fire('skipped', 0));
    const text = await m.render(state());
    expect(m.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(sample(text, 'routinely_fires_total', { routine: 'a', result: 'success' })).toBe(1);
    expect(sample(text, 'routinely_fires_total', { routine: 'a', result: 'failure' })).toBe(1);
    expect(sample(text, 'routinely_fires_total', { routine: 'a', result: 'skipped' })).toBe(2);
    // series exist before the first fire
    expect(sample(text, 'routinely_fires_total', { routine: 'b', result: 'success' })).toBe(0);
    expect(sample(text, 'routinely_fire_duration_seconds_count', { routine: 'a' })).toBe(2);
    expect(sample(text, 'routinely_fire_duration_seconds_sum', { routine: 'a' })).toBeCloseTo(1.75);
    expect(sample(text, 'routinely_fire_duration_seconds_bucket', { routine: 'a', le: '0.25' })).toBe(1);
    expect(sample(text, 'routinely_fire_duration_seconds_bucket', { routine: 'a', le: '+Inf' })).toBe(2);
    expect(sample(text, 'routinely_fire_duration_seconds_count', { routine: 'b' })).toBe(0);
    expect(text).toMatch(/^# TYPE routinely_fires_total counter$/m);
    expect(text).toMatch(/^# TYPE routinely_fire_duration_seconds histogram$/m);
  });

  it('shared state: last success, consecutive skips, paused, the exec lock, up', async () => {
    const m = new Metrics(true);
    const text = await m.render(state());
    expect(sample(text, 'routinely_last_success_timestamp_seconds', { routine: 'a' })).toBe(Date.parse('2026-11-29T19:00:01.510Z') / 1000);
    expect(sample(text, 'routinely_last_success_timestamp_seconds', { routine: 'b' })).toBeUndefined();
    expect(sample(text, 'routinely_consecutive_skips', { routine: 'b' })).toBe(3);
    expect(sample(text, 'routinely_routine_paused', { routine: 'a' })).toBe(0);
    expect(sample(text, 'routinely_routine_paused', { routine: 'b' })).toBe(1);
    expect(sample(text, 'routinely_exec_lock_held')).toBe(1);
    expect(sample(text, 'routinely_scheduler_up')).toBe(1);
    // each scrape reads the state afresh
    const again = await m.render({ ...state({ paused: true }), execLockHeld: false, schedulerUp: false });
    expect(sample(again, 'routinely_routine_paused', { routine: 'a' })).toBe(1);
    expect(sample(again, 'routinely_exec_lock_held')).toBe(0);
    expect(sample(again, 'routinely_scheduler_up')).toBe(0);
  });

  it('a fire before the first scrape is kept (series are created once, not reset per scrape)', async () => {
    const m = new Metrics(true);
    m.fired('a', fire('success'));
    await m.render(state());
    const text = await m.render(state());
    expect(sample(text, 'routinely_fire_duration_seconds_count', { routine: 'a' })).toBe(1);
    expect(sample(text, 'routinely_fires_total', { routine: 'a', result: 'success' })).toBe(1);
  });

  it('serve fires nothing, so it exports no fire series, only the shared state', async () => {
    const text = await new Metrics(false).render(state());
    expect(text).not.toMatch(/^routinely_fires_total\{/m);
    expect(text).not.toMatch(/^routinely_fire_duration_seconds_count\{/m);
    expect(sample(text, 'routinely_consecutive_skips', { routine: 'b' })).toBe(3);
  });

  it('only the names of SPEC §11', async () => {
    const m = new Metrics(true);
    m.fired('a', fire('success'));
    const names = new Set([...(await m.render(state())).matchAll(/^# TYPE (\S+) /gm)].map((x) => x[1]));
    expect([...names].sort()).toEqual([
      'routinely_consecutive_skips', 'routinely_exec_lock_held', 'routinely_fire_duration_seconds', 'routinely_fires_total',
      'routinely_last_success_timestamp_seconds', 'routinely_routine_paused', 'routinely_scheduler_up',
    ]);
  });
});
