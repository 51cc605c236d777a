// routine-state.json's publisher (SPEC §3): a record on file within a second (timed by an injected
// clock), a burst of records one rewrite, nothing pending left behind by sync() and close(), and
// what others appended without rewriting it found by the sweep; the scheduler as its one writer.

import { appendFileSync, existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadProject } from '../../src/config/load.js';
import { recordFire, statePath } from '../../src/state/file-store.js';
import { SCHEDULER_PUBLISHER, STATE_LOCK_KEY, StatePublisher } from '../../src/state/state-file.js';
import { acquireFileLease } from '../../src/file-lock/wait.js';
import { fireLine, historyPath } from '../../src/state/history.js';
import type { Fire } from '../../src/state/routine-state.js';
import { ManualClock } from '../../src/clock.js';
import { eventually } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';
import { successAt } from '../helpers/state.js';

const fire = (i: number): Fire => successAt(new Date(Date.UTC(2026, 10, 29) + i * 1000).toISOString());
const project = () =>
  loadProject({
    cwd: testProject({
      routines: ['a', 'b', 'c'].map((id) => ({ id, schedule: '0 0 1 1 *', action: 'command', run: 'true' })),
    }),
  });
const counts = (p: ReturnType<typeof project>): Record<string, number> =>
  Object.fromEntries(
    Object.entries(
      (JSON.parse(readFileSync(statePath(p), 'utf8')) as { routines: Record<string, { counts: { success: number } }> })
        .routines,
    ).map(([id, r]) => [id, r.counts.success]),
  );

const exists = (p: ReturnType<typeof project>): boolean => existsSync(statePath(p));
/** Each rewrite renames a new file over the old one: a new inode. */
const inode = (p: ReturnType<typeof project>): number => statSync(statePath(p)).ino;

describe('StatePublisher', () => {
  it('a fact touched is on file within the interval, timed by its clock; a burst of touches in between is one rewrite', async () => {
    const p = project();
    const clock = new ManualClock();
    const warnings: string[] = [];
    // (200 ms, not the default second: the real time this test waits proves the injected clock
    // is the one that counts)
    const pub = new StatePublisher({
      project: p,
      cache: new Map(),
      warn: (m) => warnings.push(m),
      clock,
      intervalMs: 200,
    });
    await recordFire(p, 'a', fire(0));
    pub.touched('a');
    clock.advance(0); // after a quiet while: at once
    await eventually(() => exists(p) && counts(p).a === 1, 10_000, 'the first rewrite');
    const first = inode(p);
    clock.advance(50);
    for (const [i, id] of ['b', 'c', 'b'].entries()) {
      await recordFire(p, id, fire(i + 1));
      pub.touched(id);
    }
    clock.advance(149); // 199 ms after the first rewrite started, by its clock: not yet
    await new Promise((r) => setTimeout(r, 400));
    expect(inode(p)).toBe(first);
    clock.advance(1); // the interval is up
    await eventually(() => inode(p) !== first, 10_000, 'the second rewrite');
    expect(counts(p)).toEqual({ a: 1, b: 2, c: 1 });
    const second = inode(p);
    await pub.close();
    expect(inode(p), 'nothing was pending: close() did not rewrite').toBe(second);
    expect(warnings).toEqual([]);
  });

  it('sync() while a rewrite is under way or due, and close(): everything touched is on record after each', async () => {
    const p = project();
    const warnings: string[] = [];
    const pub = new StatePublisher({ project: p, cache: new Map(), warn: (m) => warnings.push(m), intervalMs: 0 });
    for (let round = 0; round < 20; round++) {
      await recordFire(p, 'a', fire(round));
      pub.touched('a');
      const syncing = pub.sync();
      await recordFire(p, 'b', fire(round));
      pub.touched('b');
      await recordFire(p, 'c', fire(round));
      pub.touched('c');
      if (round % 2 === 0) await syncing;
      await pub.close();
      expect(counts(p), `round ${round}`).toEqual({ a: round + 1, b: round + 1, c: round + 1 });
    }
    // two rewrites of one process at once would meet at the file's lock and say so
    expect(warnings).toEqual([]);
  });

  it('with sweepEvery, a fact appended by someone who never rewrote the file shows within the sweep', async () => {
    const p = project();
    await recordFire(p, 'a', fire(1));
    const pub = new StatePublisher({ project: p, cache: new Map(), warn: () => {} });
    await pub.sync();
    expect(counts(p)).toEqual({ a: 1 });
    pub.sweepEvery(200);
    // a writer killed between its append and its rewrite
    appendFileSync(historyPath(p.stateDir, 'b'), `${fireLine(fire(2))}\n`, { mode: 0o600 });
    await eventually(() => counts(p).b === 1, 5000, 'the sweep found b');
    await pub.close();
  });

  it('holdWhileRunning (the scheduler): it keeps the lock from one rewrite to the next, a writer beside it leaves its record to it, and close() lets go with the file exact', async () => {
    const p = project();
    const warnings: string[] = [];
    const warn = (m: string): number => warnings.push(m);
    const sched = new StatePublisher({ project: p, cache: new Map(), warn, intervalMs: 50 });
    sched.holdWhileRunning();
    await recordFire(p, 'a', fire(0));
    sched.touched('a');
    await eventually(() => exists(p) && counts(p).a === 1, 10_000, 'the first rewrite');
    const slots = (): string[] => readdirSync(p.lockDir).filter((n) => n.startsWith(`${STATE_LOCK_KEY}.slot.`));
    const held = slots();
    expect(held).toHaveLength(1);
    const free = (): Promise<boolean> =>
      acquireFileLease({
        lockDir: p.lockDir,
        key: STATE_LOCK_KEY,
        ttlMs: 10_000,
        refreshMs: 3_000,
        owner: { command: 'test' },
        ifBusy: 'fail',
        heartbeat: false,
      }).then(async (r) => {
        if (r.ok) await r.lease.release();
        else expect(r.holder?.owner.command).toBe(SCHEDULER_PUBLISHER);
        return r.ok;
      });
    expect(await free(), 'held between rewrites').toBe(false);
    // a command that records beside it (`routine run`): it finds the lock held by the scheduler
    // and leaves the rewrite to it, which sees the append in the history folder
    const before = inode(p);
    const other = new StatePublisher({ project: p, cache: new Map(), warn, intervalMs: 0 });
    await recordFire(p, 'b', fire(1));
    other.touched('b');
    await other.close();
    expect(inode(p), 'the command did not rewrite the file').toBe(before);
    await eventually(() => counts(p).b === 1, 10_000, 'b shown by the scheduler');
    expect(slots(), 'no lock cycle per rewrite').toEqual(held);
    // a second scheduler's store (one that opens beside it before the scheduler lock refuses
    // it): it too leaves its records to the one that holds the file, and closes without waiting
    const second = new StatePublisher({ project: p, cache: new Map(), warn, intervalMs: 0 });
    second.holdWhileRunning();
    const now = inode(p);
    await recordFire(p, 'b', fire(3));
    second.touched('b');
    await second.close();
    expect(inode(p), 'the second did not rewrite the file').toBe(now);
    await eventually(() => counts(p).b === 2, 10_000, 'the second b shown by the scheduler');
    expect(slots()).toEqual(held);
    // appended by someone else right before it stops: on file once close() is done
    appendFileSync(historyPath(p.stateDir, 'c'), `${fireLine(fire(2))}\n`, { mode: 0o600 });
    await sched.close();
    expect(counts(p)).toEqual({ a: 1, b: 2, c: 1 });
    expect(await free(), 'let go at close()').toBe(true);
    expect(warnings).toEqual([]);
  });
});
