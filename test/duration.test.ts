// The span formatters (src/duration.ts): each form, at the edges where it changes unit or digits.

import { describe, expect, it } from 'vitest';
import { humanDuration, seconds, shortDuration, tenthsOfSeconds } from '../src/duration.js';

describe('span formatters', () => {
  it('humanDuration: tenths under 10 s, then whole units, two at most, the sign dropped', () => {
    expect(
      [0, 9_949, 10_000, 59_400, 60_000, 250_000, 3_600_000, 7_500_000, 172_800_000, 183_600_000, -4_200].map(
        humanDuration,
      ),
    ).toEqual(['0.0s', '9.9s', '10s', '59s', '1m', '4m 10s', '1h', '2h 5m', '2d', '2d 3h', '4.2s']);
  });

  it('shortDuration: one unit, rounded, as systemctl list-timers', () => {
    expect([999, 1_000, 44_600, 720_000, 21_600_000, 259_200_000].map(shortDuration)).toEqual([
      '<1s',
      '1s',
      '45s',
      '12m',
      '6h',
      '3d',
    ]);
  });

  it('tenthsOfSeconds: always one decimal, never minutes (what a run took, in logs and records)', () => {
    expect([0, 40, 3_000, 62_449, 3_600_000].map(tenthsOfSeconds)).toEqual([
      '0.0s',
      '0.0s',
      '3.0s',
      '62.4s',
      '3600.0s',
    ]);
  });

  it('seconds: no more digits than needed, to the tenth (settings and ages in messages)', () => {
    expect([0, 4_000, 2_500, 7_250, 12_340, 15_000].map(seconds)).toEqual(['0s', '4s', '2.5s', '7.3s', '12.3s', '15s']);
  });
});
