// /metrics content (SPEC §11): the names, labels and values of the exposition.

import { describe, expect, it } from 'vitest';
import { Metrics, type SharedState } from '../../src/http/metrics.js';
import type { Fire } from '../../src/state/routine-state.js';
import { sample } from '../helpers/http.js';

const fire = (result: Fire['result'], ms = 1500): Fire => ({
  result,
  reason: null,
  scheduled_at: '2026-11-29T19:00:00.000Z',
  started_at: '2026-11-29T19:00:00.010Z',
  finished_at: '2026-11-29T19:00:01.510Z',
  duration_ms: ms,
  exit_code: 0,
  run_id: null,
});
type Row = SharedState['routines'][number];
const row = (id: string, over: Partial<Row> = {}): Row => ({
  id,
  paused: false,
  last_success_at: null,
  last_failure_at: null,
  consecutive_skips: 0,
  consecutive_failures: 0,
  next_run_at: null,
  starved: false,
  running: false,
  last_scheduled_at: null,
  last_run_duration_ms: null,
  config: null,
  ...over,
});
const state = (over: Partial<Row> = {}): SharedState => ({
  routines: [
    row('a', { last_success_at: '2026-11-29T19:00:01.510Z', ...over }),
    row('b', { paused: true, consecutive_skips: 3 }),
  ],
  execLockHeld: true,
  schedulerUp: true,
  info: { version: '1.2.3', project: 'app', host: 'h1' },
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
    expect(sample(text, 'routinely_last_success_timestamp_seconds', { routine: 'a' })).toBe(
      Date.parse('2026-11-29T19:00:01.510Z') / 1000,
    );
    // present from the first scrape: never succeeded reads 0, so "no success in N hours" fires
    expect(sample(text, 'routinely_last_success_timestamp_seconds', { routine: 'b' })).toBe(0);
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

  it('the state alerts need: failing, consecutive failures, last failure, next fire, starved, skips by reason, info', async () => {
    const m = new Metrics(true);
    m.fired('a', { ...fire('skipped', 0), reason: 'exec busy' });
    m.fired('a', { ...fire('skipped', 0), reason: 'previous run still running' });
    m.fired('a', { ...fire('skipped', 0), reason: 'exec busy' });
    // a time slept through, a claim nobody fired: never counted as a busy lock
    m.fired('a', {
      ...fire('skipped', 0),
      reason: 'missed: the scheduler woke 8s late (stopped, paused or overloaded)',
    });
    m.fired('a', { ...fire('skipped', 0), reason: 'claimer died: the scheduler on h3 claimed it and stopped' });
    const failedAt = '2026-11-29T20:00:00.000Z';
    const next = '2026-11-30T03:00:00.000Z';
    const text = await m.render({
      ...state(),
      routines: [
        row('a', {
          consecutive_failures: 2,
          last_failure_at: failedAt,
          consecutive_skips: 3,
          next_run_at: next,
          starved: true,
        }),
        row('b'),
      ],
    });
    expect(sample(text, 'routinely_routine_failing', { routine: 'a' })).toBe(1);
    expect(sample(text, 'routinely_routine_failing', { routine: 'b' })).toBe(0);
    expect(sample(text, 'routinely_consecutive_failures', { routine: 'a' })).toBe(2);
    expect(sample(text, 'routinely_last_failure_timestamp_seconds', { routine: 'a' })).toBe(
      Date.parse(failedAt) / 1000,
    );
    expect(sample(text, 'routinely_last_failure_timestamp_seconds', { routine: 'b' })).toBe(0);
    expect(sample(text, 'routinely_next_fire_timestamp_seconds', { routine: 'a' })).toBe(Date.parse(next) / 1000);
    expect(sample(text, 'routinely_routine_starved', { routine: 'a' })).toBe(1);
    // label values in snake_case
    expect(sample(text, 'routinely_skips_total', { routine: 'a', reason: 'exec_busy' })).toBe(2);
    expect(sample(text, 'routinely_skips_total', { routine: 'a', reason: 'previous_run' })).toBe(1);
    expect(sample(text, 'routinely_skips_total', { routine: 'a', reason: 'scheduler_stopping' })).toBe(0);
    expect(sample(text, 'routinely_skips_total', { routine: 'a', reason: 'missed' })).toBe(1);
    expect(sample(text, 'routinely_skips_total', { routine: 'a', reason: 'claim_lost' })).toBe(1);
    expect(sample(text, 'routinely_skips_total', { routine: 'b', reason: 'missed' })).toBeUndefined();
    expect(sample(text, 'routinely_skips_total', { routine: 'b', reason: 'exec_busy' })).toBe(0);
    expect(text).not.toMatch(/reason="[^"]* [^"]*"/);
    expect(sample(text, 'routinely_info', { version: '1.2.3', project: 'app', host: 'h1' })).toBe(1);
    // a 10 ms fire is told from a 50 ms one
    m.fired('a', fire('success', 10));
    expect(
      sample(await m.render(state()), 'routinely_fire_duration_seconds_bucket', { routine: 'a', le: '0.01' }),
    ).toBe(1);
  });

  it("kube-state-metrics' CronJob counterparts: running, last schedule of any result, last duration, the routine's config as info", async () => {
    const m = new Metrics(true);
    const config = {
      schedule: '*/5 * * * *',
      timezone: 'Europe/Berlin',
      action: 'command',
      exclusive: false,
      if_busy: 'wait',
      lock: 'none',
    };
    const text = await m.render({
      ...state(),
      routines: [
        row('a', { running: true, last_scheduled_at: '2026-11-29T19:00:00.000Z', last_run_duration_ms: 1500, config }),
        row('b'),
      ],
    });
    expect(sample(text, 'routinely_routine_running', { routine: 'a' })).toBe(1);
    expect(sample(text, 'routinely_routine_running', { routine: 'b' })).toBe(0);
    expect(sample(text, 'routinely_last_schedule_timestamp_seconds', { routine: 'a' })).toBe(
      Date.parse('2026-11-29T19:00:00.000Z') / 1000,
    );
    expect(sample(text, 'routinely_last_schedule_timestamp_seconds', { routine: 'b' })).toBe(0);
    expect(sample(text, 'routinely_last_duration_seconds', { routine: 'a' })).toBe(1.5);
    expect(sample(text, 'routinely_last_duration_seconds', { routine: 'b' })).toBe(0);
    expect(
      sample(text, 'routinely_routine_info', {
        routine: 'a',
        schedule: '*/5 * * * *',
        timezone: 'Europe/Berlin',
        action: 'command',
        exclusive: 'false',
        if_busy: 'wait',
        lock: 'none',
      }),
    ).toBe(1);
    // a routine removed by a reload loses its info too
    expect(await m.render({ ...state(), routines: [row('b')] })).not.toMatch(/routinely_routine_info\{routine="a"/);
  });

  it('a routine on a named lock: its busy skips are <lock>_busy (from the first scrape), not exec_busy (SPEC §4.16)', async () => {
    const m = new Metrics(true, false, (id) => (id === 'a' ? 'db-main' : 'exec'));
    let text = await m.render({ ...state(), routines: [row('a'), row('b')] });
    expect(sample(text, 'routinely_skips_total', { routine: 'a', reason: 'db_main_busy' })).toBe(0);
    expect(sample(text, 'routinely_skips_total', { routine: 'a', reason: 'exec_busy' })).toBeUndefined();
    expect(sample(text, 'routinely_skips_total', { routine: 'b', reason: 'exec_busy' })).toBe(0);
    m.fired('a', { ...fire('skipped', 0), reason: 'db-main busy' });
    m.fired('b', { ...fire('skipped', 0), reason: 'exec busy' });
    text = await m.render({ ...state(), routines: [row('a'), row('b')] });
    expect(sample(text, 'routinely_skips_total', { routine: 'a', reason: 'db_main_busy' })).toBe(1);
    expect(sample(text, 'routinely_skips_total', { routine: 'b', reason: 'exec_busy' })).toBe(1);
  });

  it('a routine removed by a reload loses all of its series', async () => {
    const m = new Metrics(true);
    m.fired('b', fire('failure'));
    expect(sample(await m.render(state()), 'routinely_fires_total', { routine: 'b', result: 'failure' })).toBe(1);
    const text = await m.render({ ...state(), routines: [row('a')] });
    expect(text).not.toMatch(/routine="b"/);
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
      'routinely_consecutive_failures',
      'routinely_consecutive_skips',
      'routinely_exec_lock_held',
      'routinely_fire_duration_seconds',
      'routinely_fires_total',
      'routinely_info',
      'routinely_last_duration_seconds',
      'routinely_last_failure_timestamp_seconds',
      'routinely_last_schedule_timestamp_seconds',
      'routinely_last_success_timestamp_seconds',
      'routinely_next_fire_timestamp_seconds',
      'routinely_routine_failing',
      'routinely_routine_info',
      'routinely_routine_paused',
      'routinely_routine_running',
      'routinely_routine_starved',
      'routinely_scheduler_up',
      'routinely_skips_total',
    ]);
  });
});
