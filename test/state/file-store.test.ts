// The file routine store keeps the RoutineStore contract as the database store does (SPEC §6):
// a record sent again (a retry after a write that failed part-way, a spooled record) is stored
// once, whether it closes an open fire or carries its own key; a long-running store's indexes.

import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadProject } from '../../src/config/load.js';
import { fileRoutineStore, indexPath, readRoutine } from '../../src/state/file-store.js';
import { indexLags, type RoutineIndex } from '../../src/state/routine-index.js';
import { readChecksummed } from '../../src/checksum.js';
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

describe('fileRoutineStore.recordFire of a fire recorded first by another process', () => {
  it('answers NotRecorded and appends nothing when a line already closed its marker (a reclaimer recorded it interrupted); appends when the marker is only gone', async () => {
    const project = loadProject({
      cwd: testProject({ routines: [{ id: 'a', schedule: '@daily', action: 'command', run: 'true' }] }),
    });
    const holder = fileRoutineStore(project);
    const warn = (): void => {};
    const open = {
      id: '3c3c3c3c',
      scheduled_at: iso(0),
      started_at: iso(0),
      run_id: 'r-0',
      trigger: 'schedule' as const,
      owner: { pid: process.pid, host: 'h', boot_id: null, start_time: null },
    };
    await holder.openFire('a', open, warn);
    // the holder's fold has the marker open; another process records the fire interrupted
    expect((await holder.read(warn)).routines.a?.open_fires?.map((o) => o.id)).toEqual(['3c3c3c3c']);
    await fileRoutineStore(project).recordFire(
      'a',
      fire(0, { result: 'failure', closes: '3c3c3c3c', key: 'k1' }),
      warn,
    );
    // the stalled holder's late live record: refused, as the database refuses it
    expect(await holder.recordFire('a', fire(0, { closes: '3c3c3c3c' }), warn)).toEqual({ notRecorded: true });
    expect((await holder.history('a', warn)).map((e) => `${e.result} ${e.closes}`)).toEqual(['failure 3c3c3c3c']);
    // a marker that is gone with no line closing it (the history removed by hand): appended
    const other = { ...open, id: '4d4d4d4d', scheduled_at: iso(60) };
    await holder.openFire('a', other, warn);
    rmSync(join(project.stateDir, 'history', 'a.jsonl'));
    expect(await holder.recordFire('a', fire(60, { closes: '4d4d4d4d' }), warn)).toBeUndefined();
    expect((await holder.history('a', warn)).map((e) => e.closes ?? null)).toContain('4d4d4d4d');
  });
});

describe("a long-running store's routine indexes", () => {
  it('are rewritten once the history has grown 16 KiB past them, not after every fire; readers count every fire meanwhile; close() leaves them current', async () => {
    const project = loadProject({
      cwd: testProject({ routines: [{ id: 'a', schedule: '@daily', action: 'command', run: 'true' }] }),
    });
    const warn = (): void => {};
    const indexed = (): number =>
      (
        JSON.parse(readChecksummed(readFileSync(indexPath(project, 'a'), 'utf8'))!) as {
          record: { counts: { success: number } };
        }
      ).record.counts.success;
    const store = fileRoutineStore(project, { longRunning: true, warn });
    await store.recordFire('a', fire(0), warn);
    expect(indexed(), 'the first fire writes it').toBe(1);
    for (let s = 1; s < 10; s++) await store.recordFire('a', fire(s), warn);
    expect(indexed(), 'nine fires later (about 2.5 KB of history): not rewritten').toBe(1);
    // a reader (a `routine list` beside the scheduler) folds the rest of the history
    expect(readRoutine(project, 'a')?.counts.success).toBe(10);
    for (let s = 10; s < 80; s++) await store.recordFire('a', fire(s), warn);
    expect(indexed(), 'rewritten as the history grew past 16 KiB').toBeGreaterThan(1);
    expect(indexed()).toBeLessThan(80);
    await store.close?.();
    expect(indexed(), 'current once the store closes').toBe(80);
    // a command's store writes it after every fire
    const once = fileRoutineStore(project, { warn });
    await once.recordFire('a', fire(100), warn);
    expect(indexed()).toBe(81);
    await once.close?.();
  });
});

describe('indexLags', () => {
  it('lets an index lag less than 16 KiB of the same file; never one of another file, or of a file that shrank', () => {
    const at = (ino: number, size: number): RoutineIndex => ({ ino, size }) as RoutineIndex;
    expect(indexLags(at(7, 1000 + 16 * 1024 - 1), { ino: 7, size: 1000 })).toBe(true);
    expect(indexLags(at(7, 1000 + 16 * 1024), { ino: 7, size: 1000 })).toBe(false);
    expect(indexLags(at(8, 1100), { ino: 7, size: 1000 })).toBe(false);
    // rotated, and the new file got the old inode number: shorter than the index's position
    expect(indexLags(at(7, 300), { ino: 7, size: 1000 })).toBe(false);
    expect(indexLags(at(7, 1100), undefined)).toBe(false);
  });
});

describe('a history folder removed while a store records', () => {
  it('is made again by the next record, which is kept (the folder was checked before, and is gone now)', async () => {
    const project = loadProject({
      cwd: testProject({ routines: [{ id: 'a', schedule: '@daily', action: 'command', run: 'true' }] }),
    });
    const store = fileRoutineStore(project, { longRunning: true });
    try {
      await store.recordFire('a', fire(1), () => {});
      rmSync(join(project.stateDir, 'history'), { recursive: true });
      await store.recordFire('a', fire(2), () => {});
      expect(readRoutine(project, 'a')?.counts.success).toBe(1);
      expect(readFileSync(join(project.stateDir, 'history', 'a.jsonl'), 'utf8')).toContain(iso(2));
    } finally {
      await store.close!();
    }
  });
});
