// Which events a fire raises (SPEC §10), over plain records: failure only when final, recovery
// on the first success after a failure, starved exactly once per run of skips, never on an
// ordinary skip; and where they go.

import { describe, expect, it } from 'vitest';
import type { NotifyDef } from '../../src/config/types.js';
import { notifyEvents, notifyTarget, wanted } from '../../src/notify/events.js';
import { nextStep } from '../../src/notify/payload.js';
import {
  applyFire,
  emptyRecord,
  type Fire,
  type RoutineRecord,
  type RoutineResult,
} from '../../src/state/routine-state.js';

const T = '2026-11-30T12:00:00.000Z';
const fire = (result: RoutineResult, extra: Partial<Fire> = {}): Fire => ({
  result,
  reason: result === 'failure' ? 'exit code 3' : result === 'skipped' ? 'exec busy' : null,
  scheduled_at: T,
  started_at: T,
  finished_at: T,
  duration_ms: 5,
  exit_code: result === 'failure' ? 3 : 0,
  run_id: null,
  ...extra,
});
const def = { starvedAfterSkips: 3 };

/** Feeds fires one after another (as they are recorded) and returns the events of each. */
function sequence(results: (RoutineResult | Fire)[], d = def, start?: RoutineRecord): string[][] {
  let rec = start;
  return results.map((r) => {
    const f = typeof r === 'string' ? fire(r) : r;
    const events = notifyEvents(rec, f, d, true);
    rec = applyFire(rec, f);
    return events;
  });
}

describe('notifyEvents', () => {
  it('a first success and a run of successes raise nothing', () => {
    expect(sequence(['success', 'success', 'success'])).toEqual([[], [], []]);
  });

  it('every final failure raises failure; the first success after them raises recovery, once', () => {
    expect(sequence(['success', 'failure', 'failure', 'success', 'success'])).toEqual([
      [],
      ['failure'],
      ['failure'],
      ['recovery'],
      [],
    ]);
  });

  it('a failure on a first fire (no record yet) raises failure', () => {
    expect(notifyEvents(undefined, fire('failure'), def, true)).toEqual(['failure']);
  });

  it('a failed attempt that will be retried raises nothing; the last one raises failure', () => {
    expect(notifyEvents(undefined, fire('failure'), def, false)).toEqual([]);
    const afterTwo = applyFire(
      applyFire(undefined, fire('failure')),
      fire('failure', { trigger: 'retry', attempt: 2 }),
    );
    expect(notifyEvents(afterTwo, fire('failure', { trigger: 'retry', attempt: 3 }), def, true)).toEqual(['failure']);
  });

  it('a retry that succeeds recovers only from failures announced before this tick', () => {
    // tick 1: attempt 1 failed (retried, silent), attempt 2 succeeds: nothing was announced
    const silent = applyFire(emptyRecord(), fire('failure'));
    expect(notifyEvents(silent, fire('success', { trigger: 'retry', attempt: 2 }), def, true)).toEqual([]);
    // the tick before had failed for good; this tick's attempt 1 failed too, attempt 2 succeeds
    const announced = applyFire(applyFire(emptyRecord(), fire('failure')), fire('failure'));
    expect(notifyEvents(announced, fire('success', { trigger: 'retry', attempt: 2 }), def, true)).toEqual(['recovery']);
  });

  it('ordinary skips raise nothing, also after a failure', () => {
    expect(sequence(['skipped', 'skipped'])).toEqual([[], []]);
    expect(sequence(['failure', 'skipped', 'skipped'])).toEqual([['failure'], [], []]);
  });

  it('three consecutive skips raise exactly one starved; more skips raise nothing', () => {
    expect(sequence(['skipped', 'skipped', 'skipped', 'skipped', 'skipped', 'skipped', 'skipped'])).toEqual([
      [],
      [],
      ['starved'],
      [],
      [],
      [],
      [],
    ]);
  });

  it('starved again only after a success or a failure reset the count', () => {
    expect(sequence(['skipped', 'skipped', 'skipped', 'success', 'skipped', 'skipped', 'skipped'])).toEqual([
      [],
      [],
      ['starved'],
      [],
      [],
      [],
      ['starved'],
    ]);
    expect(sequence(['skipped', 'skipped', 'skipped', 'failure', 'skipped', 'skipped', 'skipped'])).toEqual([
      [],
      [],
      ['starved'],
      ['failure'],
      [],
      [],
      ['starved'],
    ]);
  });

  it('follows starvedAfterSkips (1 means the first skip)', () => {
    expect(sequence(['skipped', 'skipped'], { starvedAfterSkips: 1 })).toEqual([['starved'], []]);
    expect(sequence(['skipped', 'skipped', 'skipped', 'skipped', 'skipped'], { starvedAfterSkips: 5 })).toEqual([
      [],
      [],
      [],
      [],
      ['starved'],
    ]);
  });

  it('a success after skips that follow a failure is still a recovery (skips leave the failure count alone)', () => {
    expect(sequence(['failure', 'skipped', 'success'])).toEqual([['failure'], [], ['recovery']]);
  });
});

describe('notifyTarget', () => {
  const top: NotifyDef = {
    webhook: 'https://alerts.example/hook',
    on: ['failure', 'recovery', 'starved'],
    outputLines: 20,
  };
  const own: NotifyDef = { command: './alert.sh', on: ['failure'], outputLines: 20 };

  it("a routine's own notify replaces the top-level one; false silences it; absent uses the top level", () => {
    expect(notifyTarget({ notify: own }, { notify: top })).toBe(own);
    expect(notifyTarget({ notify: false }, { notify: top })).toBeNull();
    expect(notifyTarget({}, { notify: top })).toBe(top);
    expect(notifyTarget({}, { notify: null })).toBeNull();
  });

  it('wanted keeps only the events the target lists', () => {
    expect(wanted(own, ['recovery'])).toEqual([]);
    expect(wanted(own, ['failure'])).toEqual(['failure']);
    expect(wanted(null, ['failure'])).toEqual([]);
  });
});

describe('nextStep', () => {
  it('a starved routine is never advised what it already does', () => {
    expect(nextStep('starved', 'sync', null)).toMatch(/give sync "ifBusy": "wait" or another schedule$/);
    const waiting = nextStep('starved', 'sync', null, 'wait');
    expect(waiting).not.toMatch(/"ifBusy": "wait"/);
    expect(waiting).toMatch(/longer "waitTimeoutSeconds"/);
  });

  it("a starved routine's advice names its lock: the exec lock, or the named lock it waits for", () => {
    expect(nextStep('starved', 'sync', null)).toMatch(/^routinely lock status shows what holds the exec lock;/);
    expect(nextStep('starved', 'vacuum', null, 'skip', 'db')).toBe(
      'routinely lock status --lock db shows what holds it; give vacuum "ifBusy": "wait" or another schedule',
    );
  });
});
