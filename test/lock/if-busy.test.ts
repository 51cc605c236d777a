// The one --if-busy loop (src/lock/if-busy.ts) over a scripted backend: what each policy answers,
// how often it attempts, what a waiter outlives, and the turn asked before every attempt.

import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { acquireUnderPolicy, type Attempt, type Attempter } from '../../src/lock/if-busy.js';
import type { Lease } from '../../src/lock/lease.js';

const busy: Attempt = { ok: false, holder: null, why: 'pid 1 (test)' };

/** A backend whose attempts answer `script` in order (the last one again when it runs out). */
function scripted(script: (Attempt | Error)[], o: Partial<Attempter> = {}) {
  const seen = { attempts: 0, pauses: 0, beats: 0 };
  const lease = { startHeartbeat: () => seen.beats++ } as unknown as Lease & { startHeartbeat(): void };
  const a: Attempter = {
    clock: systemClock,
    ttlMs: 1000,
    attempt: async () => {
      const next = script[Math.min(seen.attempts++, script.length - 1)]!;
      if (next instanceof Error) throw next;
      return next.ok ? { ok: true, lease } : next;
    },
    pause: async () => {
      seen.pauses++;
    },
    ...o,
  };
  return { a, seen, lease };
}
const got: Attempt = { ok: true, lease: null as never };

describe('acquireUnderPolicy', () => {
  it('fail and skip answer LOCK_HELD after one attempt, naming the holder', async () => {
    for (const ifBusy of ['fail', 'skip'] as const) {
      const { a, seen } = scripted([busy, got]);
      expect(await acquireUnderPolicy({ ifBusy }, a)).toEqual({
        ok: false,
        reason: 'LOCK_HELD',
        holder: null,
        why: busy.why,
      });
      expect(seen).toEqual({ attempts: 1, pauses: 0, beats: 0 });
    }
  });

  it('wait attempts after each pause until it has the lock, and starts the heartbeat', async () => {
    const { a, seen, lease } = scripted([busy, busy, busy, got]);
    const r = await acquireUnderPolicy({ ifBusy: 'wait' }, a);
    expect(r).toEqual({ ok: true, lease });
    expect(seen).toEqual({ attempts: 4, pauses: 3, beats: 1 });
  });

  it('no heartbeat when asked not to start it', async () => {
    const { a, seen } = scripted([got]);
    expect((await acquireUnderPolicy({ heartbeat: false }, a)).ok).toBe(true);
    expect(seen.beats).toBe(0);
  });

  it('wait gives up at its time-out (WAIT_TIMEOUT) and when its signal aborts (ABORTED)', async () => {
    const { a } = scripted([busy]);
    expect(await acquireUnderPolicy({ ifBusy: 'wait', waitTimeoutMs: 0 }, a)).toMatchObject({
      ok: false,
      reason: 'WAIT_TIMEOUT',
    });
    const stop = new AbortController();
    stop.abort();
    expect(await acquireUnderPolicy({ ifBusy: 'wait', signal: stop.signal }, a)).toMatchObject({
      ok: false,
      reason: 'ABORTED',
    });
  });

  it('a waiter outlives the errors the backend names (an outage), not others; fail throws them all', async () => {
    const outage = new Error('the database did not answer');
    const outlives = (err: unknown): boolean => err === outage;
    const waited = scripted([outage, outage, got], { outlives });
    expect((await acquireUnderPolicy({ ifBusy: 'wait' }, waited.a)).ok).toBe(true);
    expect(waited.seen.attempts).toBe(3);
    await expect(acquireUnderPolicy({ ifBusy: 'fail' }, scripted([outage], { outlives }).a)).rejects.toBe(outage);
    const bug = new Error('a bug');
    await expect(acquireUnderPolicy({ ifBusy: 'wait' }, scripted([bug], { outlives }).a)).rejects.toBe(bug);
  });

  it('asks for its turn before every attempt: not its turn is busy, without an attempt', async () => {
    const turns = ['2 waiters came first', null];
    const { a, seen } = scripted([got]);
    expect(await acquireUnderPolicy({ ifBusy: 'fail', turn: async () => turns[0]! }, a)).toMatchObject({
      ok: false,
      reason: 'LOCK_HELD',
      why: '2 waiters came first',
    });
    expect(seen.attempts).toBe(0);
    let asked = 0;
    expect((await acquireUnderPolicy({ ifBusy: 'wait', turn: async () => turns[asked++] ?? null }, a)).ok).toBe(true);
    expect(asked).toBe(2);
    expect(seen.attempts).toBe(1);
  });
});
