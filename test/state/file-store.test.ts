// The file routine store keeps the RoutineStore contract as the database store does (SPEC §6):
// a record sent again (a retry after a write that failed part-way, a spooled record) is stored
// once, whether it closes an open fire or carries its own key.

import { describe, expect, it } from 'vitest';
import { loadProject } from '../../src/config/load.js';
import { fileRoutineStore } from '../../src/state/file-store.js';
import type { Fire } from '../../src/state/routine-state.js';
import { testProject } from '../helpers/testdir.js';

const T0 = Date.UTC(2026, 11, 1, 10, 0, 0);
const iso = (s: number): string => new Date(T0 + s * 1000).toISOString();
const fire = (s: number, over: Partial<Fire> = {}): Fire => ({
  result: 'success',
  reason: null,
  scheduled_at: iso(s),
  started_at: iso(s),
  finished_at: iso(s + 1),
  duration_ms: 1000,
  exit_code: 0,
  run_id: `r-${s}`,
  ...over,
});

describe('fileRoutineStore.recordFire with again', () => {
  it('stores a record sent again once: by the open fire it closes, or by its key; a first send is never deduplicated', async () => {
    const project = loadProject({
      cwd: testProject({ routines: [{ id: 'a', schedule: '@daily', action: 'command', run: 'true' }] }),
    });
    const store = fileRoutineStore(project);
    const warn = (): void => {};
    await store.openFire(
      'a',
      {
        id: '1a1a1a1a',
        scheduled_at: iso(0),
        started_at: iso(0),
        run_id: 'r-0',
        trigger: 'schedule',
        owner: { pid: process.pid, host: 'h', boot_id: null, start_time: null },
      },
      warn,
    );
    const closing = fire(0, { closes: '1a1a1a1a' });
    await store.recordFire('a', closing, warn);
    await store.recordFire('a', closing, warn, { again: true });
    const skip = fire(10, { result: 'skipped', reason: 'exec busy', run_id: null, key: '2b2b2b2b' });
    await store.recordFire('a', skip, warn, { again: true }); // sent again, but never stored: stored now
    await store.recordFire('a', skip, warn, { again: true });
    expect((await store.history('a', warn)).map((e) => `${e.result} ${e.closes ?? e.key}`)).toEqual([
      'success 1a1a1a1a',
      'skipped 2b2b2b2b',
    ]);
    expect((await store.read(warn)).routines.a).toMatchObject({ counts: { success: 1, failure: 0, skipped: 1 } });
    // without `again` a record is a new fact, even with the same key
    await store.recordFire('a', skip, warn);
    expect(await store.history('a', warn)).toHaveLength(3);
  });
});
