// A scheduler's `waiting` phase with its lock's holder at the look (src/cli/manual-waits.ts): the
// board names the holder met when the wait began; the views name the one that holds it now.

import { describe, expect, it } from 'vitest';
import { waitingNow } from '../../src/cli/manual-waits.js';
import type { LockBackend } from '../../src/lock/lock-backend.js';
import type { Phase } from '../../src/state/phases.js';

const T = '2026-12-07T01:04:40.021Z';

/** A lock backend whose keys are held as `held` says (only `status` is read). */
const backend = (held: Record<string, { command: string; created_at: number } | null>): LockBackend =>
  ({
    status: async (key: string) => {
      const h = held[key] ?? null;
      return h
        ? { state: 'held', record: { owner: { command: h.command, pid: 7, host: 'h' }, created_at: h.created_at } }
        : { state: 'free', record: null };
    },
  }) as unknown as LockBackend;

describe('waitingNow', () => {
  it("a waiting phase names the lock's holder now; other phases are left as they are", async () => {
    const phases: Record<string, Phase> = {
      w: { phase: 'waiting', since: T, scheduled_at: T, lock: 'exec', holder: 'lock run since 01:04:37' },
      q: { phase: 'queued', since: T, scheduled_at: T, behind: 'w' },
    };
    const now = await waitingNow(
      backend({ 'exec-run': { command: 'lock run', created_at: Date.parse('2026-12-07T01:04:42Z') / 1000 } }),
      phases,
      {},
    );
    expect(now.w).toEqual({ ...phases.w, holder: 'lock run since 01:04:42' });
    expect(now.q).toBe(phases.q);
    // free at the look: said so, as a manual wait's
    const free = await waitingNow(backend({}), phases, {});
    expect(free.w).toMatchObject({ holder: 'no one this moment (a waiter that came first takes it next)' });
  });
});
