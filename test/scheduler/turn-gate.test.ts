// The runner's side of a lock's queue (src/scheduler/turn-gate.ts): a fire waits for its turn,
// and is told whom it waits behind — again each time the turn passes on, so the board of phases
// (and every view of it) names the routine that has the lock now.

import { describe, expect, it } from 'vitest';
import { TurnGate } from '../../src/scheduler/turn-gate.js';
import type { TurnRequest } from '../../src/scheduler/turns.js';

const req = (id: string, order: number): TurnRequest => ({ id, scheduledAt: 1000, order, ifBusy: 'skip' });

describe('TurnGate', () => {
  it('a queued fire is told whom it waits behind, and told again when the turn passes to another routine', async () => {
    const g = new TurnGate();
    const told: string[] = [];
    expect(await g.take(req('l1', 0), () => told.push('l1?'))).toBe('start');
    const l2 = g.take(req('l2', 1), (b) => told.push(`l2 behind ${b}`));
    const q = g.take(req('q', 2), (b) => told.push(`q behind ${b}`));
    expect(told).toEqual(['l2 behind l1', 'q behind l1']);
    // l1 is over: l2 has the turn, and q waits behind it now (before: still "behind l1")
    expect(g.done('l1', false)).toBeNull();
    expect(await l2).toBe('start');
    expect(told).toEqual(['l2 behind l1', 'q behind l1', 'q behind l2']);
    g.done('l2', false);
    expect(await q).toBe('start');
    // told no more once started
    expect(told).toHaveLength(3);
  });
});
