// routine-state.json's publisher (SPEC §3): one rewrite at a time in a process, nothing pending
// left behind by close(), and what others appended without rewriting it found by the sweep.

import { appendFileSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadProject } from '../../src/config/load.js';
import { recordFire, statePath } from '../../src/scheduler/file-store.js';
import { StatePublisher } from '../../src/scheduler/state-file.js';
import { fireLine, historyPath } from '../../src/state/history.js';
import type { Fire } from '../../src/state/routine-state.js';
import { eventually } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

const fire = (i: number): Fire => {
  const at = new Date(Date.UTC(2026, 10, 29) + i * 1000).toISOString();
  return { result: 'success', reason: null, scheduled_at: at, started_at: at, finished_at: at, duration_ms: 1, exit_code: 0, run_id: null };
};
const project = () => loadProject({ cwd: testProject({ routines: ['a', 'b', 'c'].map((id) => ({ id, schedule: '0 0 1 1 *', action: 'command', run: 'true' })) }) });
const counts = (p: ReturnType<typeof project>): Record<string, number> =>
  Object.fromEntries(Object.entries((JSON.parse(readFileSync(statePath(p), 'utf8')) as { routines: Record<string, { counts: { success: number } }> }).routines).map(([id, r]) => [id, r.counts.success]));

describe('StatePublisher', () => {
  it('never runs two rewrites at once; close() returns with everything touched on record', async () => {
    const p = project();
    const pub = new StatePublisher({ project: p, cache: new Map(), warn: () => {}, intervalMs: 0 });
    // rewrites that overlap in time: a second one started (waiting for the lock) before the
    // first one ended
    let inFlight = 0;
    let most = 0;
    type Publish = (full: boolean) => Promise<Error | null>;
    const inner = pub as unknown as { publish: Publish };
    const real = inner.publish.bind(pub);
    inner.publish = async (full) => {
      inFlight++;
      most = Math.max(most, inFlight);
      try {
        return await real(full);
      } finally {
        inFlight--;
      }
    };
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
    expect(most).toBe(1);
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
});
