// What a scheduler does when its lock's lease ends (scheduler/lease-keeper.ts): the decision,
// alone. The retake loops run against real folders and servers in test/e2e (state-disk: a
// read-only state folder; pg-outage: the database restarting).

import { describe, expect, it } from 'vitest';
import { backendCaps } from '../../src/config/backend-caps.js';
import { onLeaseLoss } from '../../src/scheduler/lease-keeper.js';

describe('onLeaseLoss', () => {
  it('files: lost to another holder stops the scheduler; only run out (the folder could not be written) holds the fires and takes it again', () => {
    const files = backendCaps({ type: 'file' });
    expect(onLeaseLoss(files, false)).toBe('stop');
    expect(onLeaseLoss(files, true)).toBe('hold-fires-and-retake');
  });

  it('a database: every tick is claimed once across schedulers, so the lease is taken again in the background', () => {
    const db = backendCaps({ type: 'postgres' });
    expect(onLeaseLoss(db, false)).toBe('retake');
    expect(onLeaseLoss(db, true)).toBe('retake');
  });
});
