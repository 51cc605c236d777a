// The scheduler's queue for the exec lock (SPEC §6): pure bookkeeping, driven step by step.

import { describe, expect, it } from 'vitest';
import { LockTurns, type TurnRequest } from '../../src/scheduler/turns.js';

const req = (id: string, scheduledAt: number, order: number, ifBusy: 'skip' | 'wait' = 'skip'): TurnRequest => ({
  id,
  scheduledAt,
  order,
  ifBusy,
});
const ids = (r: readonly TurnRequest[]): string[] => r.map((x) => x.id);

describe('LockTurns', () => {
  it('one at a time: the first starts, the others wait behind it and start in order as each is done', () => {
    const t = new LockTurns();
    expect(t.ask(req('a', 1000, 0))).toEqual({ now: true });
    expect(t.ask(req('c', 1000, 2))).toEqual({ now: false, behind: 'a' });
    expect(t.ask(req('b', 1000, 1))).toEqual({ now: false, behind: 'a' });
    expect(t.activeId()).toBe('a');
    expect(ids(t.queued())).toEqual(['b', 'c']); // config order among the same time
    expect(t.done('a')).toEqual({ requeued: false, start: [req('b', 1000, 1)] });
    expect(t.done('b')).toEqual({ requeued: false, start: [req('c', 1000, 2)] });
    expect(t.done('c')).toEqual({ requeued: false, start: [] });
    expect(t.ask(req('a', 2000, 0))).toEqual({ now: true });
  });

  it('orders by scheduled time first, then config order', () => {
    const t = new LockTurns();
    t.ask(req('x', 1000, 5));
    t.ask(req('late', 2000, 0));
    t.ask(req('early', 1000, 9));
    t.ask(req('first', 500, 9));
    expect(ids(t.queued())).toEqual(['first', 'early', 'late']);
  });

  it('a queued request can be dropped (its next tick came first); the rest keeps its order', () => {
    const t = new LockTurns();
    t.ask(req('a', 1000, 0));
    t.ask(req('b', 1000, 1));
    t.ask(req('c', 1000, 2));
    expect(t.isQueued('b')).toBe(true);
    expect(t.drop('b')).toEqual(req('b', 1000, 1));
    expect(t.drop('b')).toBeNull();
    expect(t.drop('a')).toBeNull(); // active, not queued
    expect(ids(t.done('a').start)).toEqual(['c']);
  });

  it('while the holder waits for a foreign holder, queued skip requests try the lock one at a time; wait requests stay in line', () => {
    const t = new LockTurns();
    t.ask(req('w', 1000, 0, 'wait'));
    t.ask(req('w2', 1000, 1, 'wait'));
    t.ask(req('s1', 1000, 2));
    t.ask(req('s2', 1000, 3));
    expect(ids(t.waiting('w'))).toEqual(['s1']);
    // a new skip request waits behind the one trying
    expect(t.ask(req('s3', 1000, 4))).toEqual({ now: false, behind: 's1' });
    // s1 met the foreign holder: skipped (not requeued); s2 tries next
    expect(t.done('s1')).toEqual({ requeued: false, start: [req('s2', 1000, 3)] });
    expect(ids(t.done('s2').start)).toEqual(['s3']);
    expect(t.done('s3')).toEqual({ requeued: false, start: [] });
    // the holder gets the lock at last, then the next waiter has its turn
    t.locked('w');
    expect(ids(t.done('w').start)).toEqual(['w2']);
  });

  it('a try that meets a fire of ours goes back in the queue, and starts once that fire is done', () => {
    const t = new LockTurns();
    t.ask(req('w', 1000, 0, 'wait'));
    expect(t.waiting('w')).toEqual([]);
    expect(t.ask(req('s', 1000, 1))).toEqual({ now: true }); // tries while w waits
    // w got the lock just before s tried: s met our own holder
    expect(t.done('s', true)).toEqual({ requeued: true, start: [] });
    expect(ids(t.queued())).toEqual(['s']);
    // w is no longer waiting for a foreign holder: nobody else tries meanwhile
    expect(t.ask(req('s2', 1000, 2))).toEqual({ now: false, behind: 'w' });
    expect(ids(t.done('w').start)).toEqual(['s']);
  });

  it('met its own holder with nothing of ours active: a real busy skip, not requeued (no loop)', () => {
    const t = new LockTurns();
    t.ask(req('a', 1000, 0));
    expect(t.done('a', true)).toEqual({ requeued: false, start: [] });
    expect(t.queued()).toEqual([]);
  });

  it('the holder that met a trying fire of ours waits for it, then starts first', () => {
    const t = new LockTurns();
    t.ask(req('w', 1000, 0, 'wait'));
    t.waiting('w');
    t.ask(req('s', 1000, 1)); // trying
    t.ask(req('q', 1000, 2, 'wait')); // queued
    // w's wait ended as busy because s took the lock in between (its wait timed out, say)
    expect(t.done('w', true)).toEqual({ requeued: true, start: [] });
    expect(ids(t.done('s').start)).toEqual(['w']);
    expect(ids(t.done('w').start)).toEqual(['q']);
  });
});

describe('LockTurns with slots (a named lock, SPEC §4.16)', () => {
  it('N slots: N start at once, the rest wait in order; each done lets the next in; a resize lets more in', () => {
    const t = new LockTurns(2);
    expect(t.ask(req('a', 1000, 0))).toEqual({ now: true });
    expect(t.ask(req('b', 1000, 1))).toEqual({ now: true });
    expect(t.ask(req('c', 1000, 2))).toEqual({ now: false, behind: 'a' });
    expect(t.ask(req('d', 1000, 3))).toEqual({ now: false, behind: 'a' });
    expect(t.ask(req('e', 1000, 4))).toEqual({ now: false, behind: 'a' });
    expect(ids(t.done('b').start)).toEqual(['c']);
    expect(ids(t.resize(3))).toEqual(['d']);
    expect(ids(t.done('a').start)).toEqual(['e']);
    expect(ids(t.done('c').start)).toEqual([]);
  });

  it('a fire that met a slot held by one of its own goes back in line while that one is active', () => {
    const t = new LockTurns(2);
    t.ask(req('a', 1000, 0));
    t.ask(req('b', 1000, 1));
    t.ask(req('c', 1000, 2));
    expect(t.done('b', true)).toEqual({ requeued: true, start: [req('b', 1000, 1)] });
    // it was first in line again: it has the free slot at once; c still waits
    expect(t.isQueued('c')).toBe(true);
  });
});
