import { readFileSync, rmSync, statSync, truncateSync, utimesSync, writeFileSync, existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { loadProject } from '../../src/config/load.js';
import {
  indexPath,
  openFire,
  readFires,
  readRoutineState,
  reconcileOpenFires,
  recordFire,
  pauseRoutine,
  statePath,
  publishRoutineState,
  fileRoutineStore,
} from '../../src/state/file-store.js';
import { historyPath, historyTrimBytes, readHistoryBytes } from '../../src/state/history.js';
import { UnsafePathError } from '../../src/errors.js';
import { interruptedFire, type Fire, type OpenFire } from '../../src/state/routine-state.js';
import { testProject } from '../helpers/testdir.js';

const fire = (i: number, pad = 0): Fire => ({
  result: i % 3 === 0 ? 'skipped' : i % 3 === 1 ? 'success' : 'failure',
  reason: i % 3 === 0 ? 'exec busy' : null,
  scheduled_at: new Date(Date.UTC(2026, 10, 29) + i * 1000).toISOString(),
  started_at: new Date(Date.UTC(2026, 10, 29) + i * 1000).toISOString(),
  finished_at: new Date(Date.UTC(2026, 10, 29) + i * 1000 + 5).toISOString(),
  duration_ms: 5,
  exit_code: 0,
  run_id: `r-${i}`.padEnd(pad, '0'),
});

function project() {
  const dir = testProject({ routines: [{ id: 'a', schedule: '* * * * *', action: 'command', run: 'true' }] });
  return loadProject({ cwd: dir });
}

describe('history: the facts behind routine-state.json (SPEC §3)', () => {
  it('a history file past the cap (a 3 GB sparse file) is refused before a byte of it is read, from its start or from an offset', async () => {
    const p = project();
    const path = historyPath(p.stateDir, 'a');
    await recordFire(p, 'a', fire(1));
    truncateSync(path, 3 * 1024 ** 3);
    for (const offset of [0, 100, 2 * 1024 ** 3]) {
      expect(() => readHistoryBytes(path, offset), `offset ${offset}`).toThrow(UnsafePathError);
      expect(() => readHistoryBytes(path, offset)).toThrow(
        /is 3221225472 bytes, larger than any file routinely writes there/,
      );
    }
  });

  it('is bounded by rotation, and counts survive it exactly', async () => {
    const p = project();
    const n = 1700;
    for (let i = 0; i < n; i++) await recordFire(p, 'a', fire(i, 240));
    const file = historyPath(p.stateDir, 'a');
    expect(statSync(file).size).toBeLessThanOrEqual(historyTrimBytes(1000) + 1024);
    expect(existsSync(`${file}.1`)).toBe(true);
    const fires = readFires(p, 'a');
    expect(fires.length).toBeLessThanOrEqual(1000);
    expect(fires.at(-1)?.run_id).toBe(fire(n - 1, 240).run_id);
    const times = fires.map((e) => Date.parse(e.scheduled_at));
    expect([...times].sort((x, y) => x - y)).toEqual(times);
    const expected = { success: 0, failure: 0, skipped: 0 };
    for (let i = 0; i < n; i++) expected[fire(i).result]++;
    expect(readRoutineState(p).routines.a?.counts).toEqual(expected);
    // the index lost: rebuilt from the (rotated) history, counts still exact
    writeFileSync(statePath(p), 'garbage');
    expect(readRoutineState(p).routines.a?.counts).toEqual(expected);
  });

  it('keeps retention.historyLines fires: a small limit keeps that many, the files stay small, counts stay exact', async () => {
    const dir = testProject({
      retention: { historyLines: 50 },
      routines: [{ id: 'a', schedule: '* * * * *', action: 'command', run: 'true' }],
    });
    const p = loadProject({ cwd: dir });
    const n = 600;
    for (let i = 0; i < n; i++) await recordFire(p, 'a', fire(i, 240));
    const file = historyPath(p.stateDir, 'a');
    expect(existsSync(`${file}.1`)).toBe(true); // rotated, at 32 KiB rather than at 384 KiB
    expect(statSync(file).size + statSync(`${file}.1`).size).toBeLessThanOrEqual(2 * (historyTrimBytes(50) + 1024));
    const fires = readFires(p, 'a');
    expect(fires.map((f) => f.run_id)).toEqual(Array.from({ length: 50 }, (_, k) => fire(n - 50 + k, 240).run_id));
    const expected = { success: 0, failure: 0, skipped: 0 };
    for (let i = 0; i < n; i++) expected[fire(i).result]++;
    expect(readRoutineState(p).routines.a?.counts).toEqual(expected);
  });

  it('a rotation removes the temps of writers killed beside the history (a re-seed, an earlier rotation) once a minute old, not a fresh one', async () => {
    const dir = testProject({
      retention: { historyLines: 50 },
      routines: [{ id: 'a', schedule: '* * * * *', action: 'command', run: 'true' }],
    });
    const p = loadProject({ cwd: dir });
    await recordFire(p, 'a', fire(0, 240));
    const file = historyPath(p.stateDir, 'a');
    const old = [`${file}.tmp-0123456789abcdef`, `${file}.1.tmp-fedcba9876543210`];
    const fresh = `${file}.tmp-00000000000000ff`;
    const other = `${file}.notes`; // not a temp of ours: never touched
    for (const f of [...old, fresh, other]) writeFileSync(f, 'left by a killed writer', { mode: 0o600 });
    const twoMinutesAgo = (Date.now() - 120_000) / 1000;
    for (const f of [...old, other]) utimesSync(f, twoMinutesAgo, twoMinutesAgo);
    for (let i = 1; i < 200; i++) await recordFire(p, 'a', fire(i, 240));
    expect(existsSync(`${file}.1`)).toBe(true); // rotated
    for (const f of old) expect(existsSync(f), f).toBe(false);
    for (const f of [fresh, other]) expect(existsSync(f), f).toBe(true);
  });

  it('a routine id the config accepts with ".." inside (a..b) has its history, its rotation and its counts like any other', async () => {
    const dir = testProject({
      retention: { historyLines: 50 },
      routines: [{ id: 'a..b', schedule: '* * * * *', action: 'command', run: 'true' }],
    });
    const p = loadProject({ cwd: dir });
    for (let i = 0; i < 300; i++) await recordFire(p, 'a..b', fire(i, 240));
    const file = historyPath(p.stateDir, 'a..b');
    expect(file.endsWith('/history/a..b.jsonl')).toBe(true);
    expect(existsSync(`${file}.1`)).toBe(true); // rotated (under the lock history-a__b)
    expect(readFires(p, 'a..b').length).toBe(50);
    expect(readRoutineState(p).routines['a..b']?.counts).toEqual({ success: 100, failure: 100, skipped: 100 });
  });

  it('a fire closed twice (its owner, then a reconcile that read before it) is counted and listed once, as its owner recorded it', async () => {
    const p = project();
    const open: OpenFire = {
      id: 'o-1',
      scheduled_at: fire(1).scheduled_at,
      started_at: fire(1).started_at,
      run_id: 'r-1',
      trigger: 'manual',
      owner: { pid: 999_999, host: 'elsewhere', boot_id: null, start_time: null },
    };
    await openFire(p, 'a', open);
    await recordFire(p, 'a', { ...fire(1), result: 'success', reason: null, closes: 'o-1' });
    await recordFire(p, 'a', interruptedFire(open));
    expect(readRoutineState(p).routines.a?.counts).toEqual({ success: 1, failure: 0, skipped: 0 });
    expect(readFires(p, 'a').map((f) => f.result)).toEqual(['success']);
    // and a reconcile now finds nothing open to close
    expect(await reconcileOpenFires(p, () => true)).toBe(0);
  });

  it('a reconcile closes an open fire whose owner is gone, once', async () => {
    const p = project();
    const open: OpenFire = {
      id: 'o-2',
      scheduled_at: fire(1).scheduled_at,
      started_at: fire(1).started_at,
      run_id: 'r-2',
      trigger: 'manual',
      owner: { pid: 999_999, host: 'elsewhere', boot_id: null, start_time: null },
    };
    await openFire(p, 'a', open);
    expect(await reconcileOpenFires(p, () => true)).toBe(1);
    expect(await reconcileOpenFires(p, () => true)).toBe(0);
    expect(readRoutineState(p).routines.a?.counts).toEqual({ success: 0, failure: 1, skipped: 0 });
  });

  it('a torn last line never swallows the next entry, and is reported with its line number', async () => {
    const p = project();
    await recordFire(p, 'a', fire(1));
    await recordFire(p, 'a', fire(2));
    const file = historyPath(p.stateDir, 'a');
    const text = readFileSync(file, 'utf8');
    writeFileSync(file, text.slice(0, -20)); // truncate -s -20
    await recordFire(p, 'a', fire(4));
    const warnings: string[] = [];
    const fires = readFires(p, 'a', (m) => warnings.push(m));
    expect(fires.map((f) => f.run_id)).toEqual(['r-1', 'r-4']);
    expect(warnings.join('\n')).toMatch(/a\.jsonl: line 2 could not be read \(torn or corrupt\) and was skipped/);
    expect(readFileSync(file, 'utf8').split('\n')).toHaveLength(4);
    expect(readRoutineState(p).routines.a?.counts).toEqual({ success: 2, failure: 0, skipped: 0 });
    // the same with the index left as it was before the damage
    writeFileSync(file, `${readFileSync(file, 'utf8')}{"scheduled_at":"2026`);
    await recordFire(p, 'a', fire(7));
    expect(readFires(p, 'a').map((f) => f.run_id)).toEqual(['r-1', 'r-4', 'r-7']);
    expect(readRoutineState(p).routines.a?.counts).toEqual({ success: 3, failure: 0, skipped: 0 });
  });

  it('pause and resume are facts too: a garbled index keeps a paused routine paused, with its note', async () => {
    const p = project();
    await recordFire(p, 'a', fire(1));
    expect(await pauseRoutine(p, 'a', true, 'maintenance')).toEqual({ wasPaused: false, note: 'maintenance' });
    // pausing again without a note keeps the first note
    expect(await pauseRoutine(p, 'a', true, null)).toEqual({ wasPaused: true, note: 'maintenance' });
    for (const garble of ['{"version":1,"routines":', '', '[]', '{"version":1,"routines":{"a":7},"sources":{}}']) {
      writeFileSync(statePath(p), garble);
      const a = readRoutineState(p).routines.a!;
      expect(a.paused).toBe(true);
      expect(a.paused_note).toBe('maintenance');
      expect(a.counts.success).toBe(1);
    }
    expect(await pauseRoutine(p, 'a', false, null)).toEqual({ wasPaused: true, note: null });
    expect(await pauseRoutine(p, 'a', false, null)).toEqual({ wasPaused: false, note: null });
    writeFileSync(statePath(p), 'garbage');
    expect(readRoutineState(p).routines.a).toMatchObject({ paused: false, counts: { success: 1 } });
  });

  it('stale indexes (older copies put back by a stalled writer) are folded forward from the history', async () => {
    const p = project();
    await recordFire(p, 'a', fire(1));
    await publishRoutineState(p);
    const oldState = readFileSync(statePath(p), 'utf8');
    const oldIndex = readFileSync(indexPath(p, 'a'), 'utf8');
    await pauseRoutine(p, 'a', true, 'x');
    await recordFire(p, 'a', fire(4));
    await publishRoutineState(p);
    // the lost updates of stalled writers, of both indexes
    writeFileSync(statePath(p), oldState);
    expect(readRoutineState(p).routines.a).toMatchObject({ paused: true, paused_note: 'x', counts: { success: 2 } });
    writeFileSync(indexPath(p, 'a'), oldIndex);
    expect(readRoutineState(p).routines.a).toMatchObject({ paused: true, paused_note: 'x', counts: { success: 2 } });
    // both gone: rebuilt from the history alone
    writeFileSync(statePath(p), 'garbage');
    writeFileSync(indexPath(p, 'a'), '{"version":1');
    expect(readRoutineState(p).routines.a).toMatchObject({ paused: true, paused_note: 'x', counts: { success: 2 } });
  });

  it("recording a fire writes only the routine's own files; routine-state.json is rewritten by the scheduler, now and then", async () => {
    const p = project();
    await recordFire(p, 'a', fire(1));
    expect(existsSync(statePath(p))).toBe(false);
    expect(readRoutineState(p).routines.a?.counts.success).toBe(1);
    await publishRoutineState(p);
    const written = JSON.parse(readFileSync(statePath(p), 'utf8'));
    expect(written.routines.a.counts.success).toBe(1);
    // no exactly-once bookkeeping in the shared file: just where each history was folded to, and
    // the history folder's stamp as of that fold
    expect(Object.keys(written).sort()).toEqual(['history_at', 'history_stamp', 'routines', 'version']);
    const folder = statSync(join(p.stateDir, 'history'), { bigint: true });
    expect(written.history_stamp).toBe(`${folder.ino}:${folder.mtimeNs}`);
    const st = statSync(historyPath(p.stateDir, 'a'));
    expect(written.history_at.a).toEqual([st.ino, st.size, st.mtimeMs]);
  });

  it('a history file removed by hand: views show what its index keeps, and the next fire goes on from there (not from zero)', async () => {
    const p = project();
    for (const i of [1, 2, 4]) await recordFire(p, 'a', fire(i)); // 2 succeeded, 1 failed
    await publishRoutineState(p);
    rmSync(historyPath(p.stateDir, 'a'));
    const warnings: string[] = [];
    expect(readRoutineState(p, (m) => warnings.push(m)).routines.a?.counts).toEqual({
      success: 2,
      failure: 1,
      skipped: 0,
    });
    expect(warnings.join('\n')).toMatch(
      /history\/a\.jsonl is gone \(removed\?\): its routine is shown as its index keeps it/,
    );
    const said: string[] = [];
    await recordFire(p, 'a', fire(7), (m) => said.push(m));
    expect(said.join('\n')).toMatch(
      /a\.jsonl was gone \(removed\?\): started again from the record its index kept \(2 succeeded, 1 failed, 0 skipped\)/,
    );
    expect(readRoutineState(p).routines.a?.counts).toEqual({ success: 3, failure: 1, skipped: 0 });
    await publishRoutineState(p);
    expect(JSON.parse(readFileSync(statePath(p), 'utf8')).routines.a.counts.success).toBe(3);
  });

  it.each([
    ['emptied in place (: > file)', (f: string) => writeFileSync(f, '')],
    [
      'overwritten with NULs in place (a crash of a file system that does not journal data)',
      (f: string) => writeFileSync(f, Buffer.alloc(statSync(f).size)),
    ],
  ])(
    'a history file %s: its paused, failing routine goes on from the record kept of it, said once; never "never run"',
    async (_name, cut) => {
      const p = project();
      for (const i of [1, 2, 5]) await recordFire(p, 'a', fire(i)); // 1 succeeded, 2 failed
      await pauseRoutine(p, 'a', true, 'maintenance');
      await publishRoutineState(p);
      cut(historyPath(p.stateDir, 'a'));
      const warnings: string[] = [];
      const seen = readRoutineState(p, (m) => warnings.push(m)).routines.a;
      expect(seen).toMatchObject({ counts: { success: 1, failure: 2, skipped: 0 }, paused: true });
      expect(warnings.join('\n')).toMatch(
        /a\.jsonl was cut or overwritten \(it no longer holds what was folded from it\): its routine goes on from the record kept of it \(1 succeeded, 2 failed, 0 skipped\)/,
      );
      await recordFire(p, 'a', fire(8));
      expect(readRoutineState(p).routines.a).toMatchObject({
        counts: { success: 1, failure: 3, skipped: 0 },
        consecutive_failures: 3,
        paused: true,
      });
    },
  );

  it('a history file removed while a long-running store records: the next fire goes on from its newest fold, not from the index it writes only every 16 KiB', async () => {
    const p = project();
    const store = fileRoutineStore(p, { longRunning: true });
    try {
      await store.recordFire('a', fire(1), () => {});
      // the index is written now, then lags: these are folded, not in it
      for (const i of [2, 5, 8]) await store.recordFire('a', fire(i), () => {});
      expect(JSON.parse(readFileSync(indexPath(p, 'a'), 'utf8').split('\n')[0]!).record.counts).toMatchObject({
        success: 1,
        failure: 0,
      });
      rmSync(historyPath(p.stateDir, 'a'));
      const said: string[] = [];
      const open: OpenFire = {
        id: 'f-11',
        scheduled_at: fire(11).scheduled_at,
        started_at: fire(11).started_at,
        run_id: 'r-11',
        trigger: 'schedule',
        owner: { pid: process.pid, host: 'here', boot_id: null, start_time: null },
      };
      await store.openFire('a', open, (m) => said.push(m));
      await store.recordFire('a', { ...fire(11), closes: 'f-11' }, () => {});
      expect(said.join('\n')).toMatch(
        /started again from the record its index kept \(1 succeeded, 3 failed, 0 skipped\)/,
      );
      expect((await store.readOne('a', () => {}))?.counts).toEqual({ success: 1, failure: 4, skipped: 0 });
    } finally {
      await store.close!();
    }
  });

  /** A scheduler's store that recorded four fires (1 succeeded, 3 failed) and published
   * routine-state.json, its index written after the first only (it lags). */
  async function laggingScheduler(p: ReturnType<typeof project>) {
    const store = fileRoutineStore(p, { longRunning: true });
    await store.recordFire('a', fire(1), () => {});
    for (const i of [2, 5, 8]) await store.recordFire('a', fire(i), () => {}); // the index lags
    await store.publish!();
    return store;
  }

  it("a history file removed after a scheduler stopped without writing its lagging index: a command's next fire goes on from routine-state.json, further on than the index", async () => {
    const p = project();
    const store = await laggingScheduler(p);
    try {
      expect(JSON.parse(readFileSync(statePath(p), 'utf8')).routines.a.counts).toMatchObject({ failure: 3 });
      rmSync(historyPath(p.stateDir, 'a'));
      // (the store is not closed first: as a SIGKILLed scheduler, it never wrote the index)
      const said: string[] = [];
      await recordFire(p, 'a', fire(11), (m) => said.push(m));
      expect(said.join('\n')).toMatch(
        /started again from the record its index kept \(1 succeeded, 3 failed, 0 skipped\)/,
      );
      expect(readRoutineState(p).routines.a?.counts).toEqual({ success: 1, failure: 4, skipped: 0 });
    } finally {
      await store.close!();
    }
  });

  it.each([
    ['emptied in place', (f: string) => writeFileSync(f, '')],
    ['overwritten with NULs in place', (f: string) => writeFileSync(f, Buffer.alloc(statSync(f).size))],
  ])(
    "a history file %s after a scheduler stopped without writing its lagging index: views and a command's next fire go on from routine-state.json, further on than the index",
    async (_name, cut) => {
      const p = project();
      const store = await laggingScheduler(p);
      try {
        expect(JSON.parse(readFileSync(indexPath(p, 'a'), 'utf8').split('\n')[0]!).record.counts.failure).toBe(0);
        // (the store is not closed first: as a SIGKILLed scheduler, it never wrote the index)
        cut(historyPath(p.stateDir, 'a'));
        const warnings: string[] = [];
        expect(readRoutineState(p, (m) => warnings.push(m)).routines.a?.counts).toEqual({
          success: 1,
          failure: 3,
          skipped: 0,
        });
        expect(warnings.join('\n')).toMatch(/goes on from the record kept of it \(1 succeeded, 3 failed, 0 skipped\)/);
        await recordFire(p, 'a', fire(11));
        expect(readRoutineState(p).routines.a).toMatchObject({
          counts: { success: 1, failure: 4, skipped: 0 },
          consecutive_failures: 4,
        });
      } finally {
        await store.close!();
      }
    },
  );

  it('a history file and its index removed by hand: views show the routine as never run, as its next fire records it', async () => {
    const p = project();
    for (const i of [1, 2]) await recordFire(p, 'a', fire(i));
    await publishRoutineState(p);
    rmSync(historyPath(p.stateDir, 'a'));
    rmSync(indexPath(p, 'a'));
    const warnings: string[] = [];
    expect(readRoutineState(p, (m) => warnings.push(m)).routines.a).toBeUndefined();
    expect(warnings.join('\n')).toMatch(
      /a\.jsonl and its index are gone \(removed\?\): its routine is shown as never run/,
    );
    await recordFire(p, 'a', fire(4));
    expect(readRoutineState(p).routines.a?.counts).toEqual({ success: 1, failure: 0, skipped: 0 });
  });

  it('read-only views never move a corrupt index aside; writers do', async () => {
    const p = project();
    await recordFire(p, 'a', fire(1));
    writeFileSync(statePath(p), 'garbage');
    const warnings: string[] = [];
    readRoutineState(p, (m) => warnings.push(m));
    expect(readFileSync(statePath(p), 'utf8')).toBe('garbage');
    expect(warnings.join()).toMatch(/routine-state\.json is corrupt .*left in place, rebuilt from the history files/);
    await recordFire(p, 'a', fire(4));
    await publishRoutineState(p);
    expect(JSON.parse(readFileSync(statePath(p), 'utf8')).routines.a.counts.success).toBe(2);
  });
});
