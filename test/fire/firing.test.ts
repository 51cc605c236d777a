// A fire's times (SPEC §11: the duration metric and the history agree): one measurement, the
// duration on the monotonic clock, from which the record's duration and its finish stamp both come.

import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { fireTimes } from '../../src/fire/firing.js';

describe('fireTimes', () => {
  it('the stamps differ by exactly the recorded duration, also when the wall clock stepped during the fire', () => {
    const clock = new ManualClock();
    const span = { startedMs: clock.now(), started: clock.monotonic() };
    clock.advance(71.4);
    clock.jumpWall(-3_600_000); // NTP stepped back an hour while the command ran
    clock.advance(17.9);
    const t = fireTimes(span, clock.monotonic());
    expect(t.duration_ms).toBe(89);
    expect(Date.parse(t.finished_at) - Date.parse(t.started_at)).toBe(t.duration_ms);
    expect(t.started_at).toBe(new Date(span.startedMs).toISOString());
  });

  it('never a negative duration', () => {
    const t = fireTimes({ startedMs: Date.UTC(2026, 11, 4), started: 500 }, 499.6);
    expect(t.duration_ms).toBe(0);
    expect(t.finished_at).toBe(t.started_at);
  });
});
