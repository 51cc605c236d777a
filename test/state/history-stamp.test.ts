// The history folder's stamp (src/state/history-stamp.ts): a reader takes routine-state.json as
// it is while the folder has the file's stamp, and every append of ours changes the folder first.

import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadProject } from '../../src/config/load.js';
import {
  publishRoutineState,
  readRoutineState,
  readRoutineStateShown,
  recordFire,
  statePath,
} from '../../src/state/file-store.js';
import {
  beginAppend,
  endAppend,
  keepMarksBetweenAppends,
  markGone,
  parkHeldMarks,
  markNameOf,
  PARKED,
  stampHistory,
  WRITING,
  writersIn,
} from '../../src/state/history-stamp.js';
import { fileRoutineStore } from '../../src/state/file-store.js';
import { historyPath } from '../../src/state/history.js';
import { bootIdOfBoottime, selfIdentity, type LivenessProbe } from '../../src/process/identity.js';
import type { Fire } from '../../src/state/routine-state.js';
import { testProject } from '../helpers/testdir.js';

const fire = (i: number): Fire => ({
  result: 'success',
  reason: null,
  scheduled_at: new Date(Date.UTC(2026, 11, 1) + i * 1000).toISOString(),
  started_at: new Date(Date.UTC(2026, 11, 1) + i * 1000).toISOString(),
  finished_at: new Date(Date.UTC(2026, 11, 1) + i * 1000 + 5).toISOString(),
  duration_ms: 5,
  exit_code: 0,
  run_id: null,
});

function project() {
  const dir = testProject({
    routines: ['a', 'b'].map((id) => ({ id, schedule: '* * * * *', action: 'command', run: 'true' })),
  });
  return loadProject({ cwd: dir });
}

const stampIn = (p: { stateDir: string }): unknown =>
  (JSON.parse(readFileSync(statePath(p), 'utf8')) as { history_stamp?: unknown }).history_stamp;
const folderStamp = (p: { stateDir: string }): string => {
  const st = statSync(join(p.stateDir, 'history'), { bigint: true });
  return `${st.ino}:${st.mtimeNs}`;
};
const marks = (p: { stateDir: string }): string[] =>
  readdirSync(join(p.stateDir, 'history')).filter((n) => n.startsWith(WRITING));
/** A history line appended the way no writer of ours does it: without a mark (the folder unchanged). */
const unmarkedFire = (p: { stateDir: string }, id: string, i: number): void =>
  appendFileSync(
    historyPath(p.stateDir, id),
    `${JSON.stringify({ ...fire(i), trigger: 'schedule', id: `ffff${String(i).padStart(12, '0')}` })}\n`,
  );

describe('the history folder stamp', () => {
  it('a rewrite that folded every history writes the stamp it set first; while the folder has it, a view takes the file as it is (one lstat)', async () => {
    const p = project();
    await recordFire(p, 'a', fire(1));
    await recordFire(p, 'b', fire(1));
    await publishRoutineState(p);
    expect(stampIn(p)).toBe(folderStamp(p));
    expect(marks(p)).toEqual([]);
    // proof that the view looks at no history: a line appended without a mark (by hand) is not
    // seen by it; a reader that decides something (readRoutineState) looks at every history
    unmarkedFire(p, 'a', 2);
    expect(readRoutineStateShown(p).routines.a?.counts.success).toBe(1);
    expect(readRoutineState(p).routines.a?.counts.success).toBe(2);
    // an append of ours to a history that is there changes the folder (its mark), and the
    // view looks at every history
    await recordFire(p, 'b', fire(3));
    expect(folderStamp(p)).not.toBe(stampIn(p));
    const read = readRoutineStateShown(p).routines;
    expect(read.a?.counts.success).toBe(2);
    expect(read.b?.counts.success).toBe(2);
    // a writer's fold finds an edit by hand too, and keeps the stamp (the folder has not
    // changed since it was set)
    await publishRoutineState(p);
    const kept = stampIn(p);
    unmarkedFire(p, 'a', 4);
    await publishRoutineState(p);
    expect(stampIn(p)).toBe(kept);
    expect(JSON.parse(readFileSync(statePath(p), 'utf8')).routines.a.counts.success).toBe(3);
  });

  it('a writer appending now (its mark in the folder) means no stamp: readers look at every history until a rewrite after it', async () => {
    const p = project();
    await recordFire(p, 'a', fire(1));
    const dir = join(p.stateDir, 'history');
    const made = beginAppend(dir);
    expect(made).not.toBeNull();
    expect(marks(p)).toEqual([markNameOf(selfIdentity())]);
    await publishRoutineState(p);
    expect(stampIn(p)).toBeUndefined();
    // the append the mark announced lands after that rewrite: views see it
    unmarkedFire(p, 'a', 2);
    expect(readRoutineStateShown(p).routines.a?.counts.success).toBe(2);
    endAppend(dir, made);
    expect(marks(p)).toEqual([]);
    await publishRoutineState(p);
    expect(stampIn(p)).toBe(folderStamp(p));
    expect(readRoutineStateShown(p).routines.a?.counts.success).toBe(2);
  });

  it('the mark of a writer that is gone (killed after its append) is removed by the next rewrite, which stamps nothing; the one after it does', async () => {
    const p = project();
    await recordFire(p, 'a', fire(1));
    const gone = spawnSync('true').pid!;
    const me = selfIdentity();
    const name = markNameOf({ ...me, pid: gone, start_time: 'x' });
    appendFileSync(join(p.stateDir, 'history', name), '');
    // its append landed before it was killed
    unmarkedFire(p, 'a', 2);
    expect(readRoutineState(p).routines.a?.counts.success).toBe(2);
    await publishRoutineState(p);
    expect(existsSync(join(p.stateDir, 'history', name))).toBe(false);
    expect(stampIn(p)).toBeUndefined();
    expect(readRoutineState(p).routines.a?.counts.success).toBe(2);
    await publishRoutineState(p);
    expect(stampIn(p)).toBe(folderStamp(p));
    expect(readRoutineState(p).routines.a?.counts.success).toBe(2);
  });

  it('a mark is judged gone only when that can be told: this host, and made before this boot, or a pid dead or reused in this boot and pid namespace', () => {
    const me = { pid: 4242, host: 'here', boot_id: 'boot-1', start_time: '100', pid_ns: 'pid:[1]' };
    const probe = (state: ReturnType<LivenessProbe['inspect']>, over: Partial<LivenessProbe> = {}): LivenessProbe => ({
      host: 'here',
      bootId: 'boot-1',
      pidNs: 'pid:[1]',
      inspect: () => state,
      groupMembers: () => [],
      ...over,
    });
    const alive = { state: 'alive', startTime: '100', pgid: null } as const;
    const dead = { state: 'dead', why: 'no-process' } as const;
    const name = markNameOf(me);
    const old = () => true;
    const young = () => false;
    expect(markGone(name, probe(alive), young)).toBe(false);
    expect(markGone(name, probe(dead), young)).toBe(true);
    expect(markGone(name, probe({ state: 'alive', startTime: '999', pgid: null }), young)).toBe(true); // pid reused
    expect(markGone(name, probe({ state: 'unknown' }), young)).toBe(false);
    expect(markGone(name, probe(dead, { host: 'elsewhere' }), old)).toBe(false); // another host's
    // another boot id: an earlier boot of this machine only if the mark is older than this boot
    // (else another machine of the same name, whose pids mean nothing here)
    expect(markGone(name, probe(alive, { bootId: 'boot-2' }), old)).toBe(true);
    expect(markGone(name, probe(dead, { bootId: 'boot-2' }), young)).toBe(false);
    expect(markGone(name, probe(dead, { bootId: null }), old)).toBe(false);
    expect(markGone(name, probe(dead, { pidNs: 'pid:[2]' }), old)).toBe(false); // another pid namespace's
    expect(markGone(name, probe(dead, { pidNs: null }), old)).toBe(false);
    expect(
      markGone(markNameOf({ ...me, start_time: null }), probe({ state: 'alive', startTime: '999', pgid: null }), old),
    ).toBe(false);
    expect(markGone(`${WRITING}junk`, probe(dead), old)).toBe(false);
    expect(markGone(`${name}.more`, probe(dead), old)).toBe(false);
  });

  it('an append parks its mark and the next one takes it back: one file, never made again, and each step changes the folder', () => {
    const p = project();
    const dir = join(p.stateDir, 'history');
    mkdirSync(dir, { recursive: true });
    const name = markNameOf(selfIdentity());
    const parked = join(dir, `${PARKED}${name.slice(WRITING.length)}`);
    const first = beginAppend(dir)!;
    const ino = statSync(first).ino;
    let stamp = stampHistory(dir);
    endAppend(dir, first);
    expect(folderStamp(p)).not.toBe(stamp);
    expect(marks(p)).toEqual([]);
    expect(statSync(parked).ino).toBe(ino);
    for (let i = 0; i < 3; i++) {
      stamp = stampHistory(dir);
      const made = beginAppend(dir)!;
      expect(folderStamp(p)).not.toBe(stamp); // the append is seen as begun
      expect(marks(p)).toEqual([name]);
      expect(statSync(made).ino).toBe(ino); // the same file: none made
      expect(existsSync(parked)).toBe(false);
      stamp = stampHistory(dir);
      endAppend(dir, made);
      expect(folderStamp(p)).not.toBe(stamp);
      expect(statSync(parked).ino).toBe(ino);
    }
  });

  it('the parked mark of a writer that is gone is removed by the next rewrite (no stamp holds after it); a live writer’s parked mark stays and keeps no stamp away', async () => {
    const p = project();
    await recordFire(p, 'a', fire(1)); // (makes the history file: no append)
    await recordFire(p, 'a', fire(2));
    const dir = join(p.stateDir, 'history');
    const mine = join(dir, `${PARKED}${markNameOf(selfIdentity()).slice(WRITING.length)}`);
    expect(existsSync(mine)).toBe(true); // parked after the second record's append
    await publishRoutineState(p);
    expect(stampIn(p)).toBe(folderStamp(p));
    const gone = spawnSync('true').pid!;
    const theirs = join(
      dir,
      `${PARKED}${markNameOf({ ...selfIdentity(), pid: gone, start_time: 'x' }).slice(WRITING.length)}`,
    );
    appendFileSync(theirs, '');
    await publishRoutineState(p);
    expect(existsSync(theirs)).toBe(false);
    // removing it changed the folder after the stamp that rewrite set: no stamp a reader takes
    expect(stampIn(p)).not.toBe(folderStamp(p));
    await publishRoutineState(p);
    expect(stampIn(p)).toBe(folderStamp(p));
    expect(existsSync(mine)).toBe(true);
  });

  it("a stamp is the folder's value only when it holds exactly what was set", () => {
    const p = project();
    const dir = join(p.stateDir, 'history');
    mkdirSync(dir, { recursive: true });
    const stamp = stampHistory(dir);
    expect(stamp).toBe(folderStamp(p));
    const ns = BigInt(stamp!.split(':')[1]!);
    // in the past, with a fraction of a second (what no change of the folder sets)
    expect(ns).toBeLessThan(BigInt(Date.now() - 1000) * 1_000_000n);
    expect(ns % 1_000_000_000n).not.toBe(0n);
    expect(stampHistory(dir)).not.toBe(stamp);
  });

  it('a writer whose mark was removed under it (judged gone) changes the folder when its append ends', () => {
    const p = project();
    const dir = join(p.stateDir, 'history');
    mkdirSync(dir, { recursive: true });
    const made = beginAppend(dir)!;
    rmSync(made);
    const stamp = stampHistory(dir);
    expect(folderStamp(p)).toBe(stamp);
    endAppend(dir, made);
    expect(folderStamp(p)).not.toBe(stamp);
  });
});

describe('a mark kept between appends (a scheduler)', () => {
  it('stays named .writing from one append to the next, keeps every stamp away, and is parked before a rewrite stamps the folder and at the end', async () => {
    const p = project();
    // (not parked for being idle while the test looks: that is the next test)
    const store = fileRoutineStore(p, { longRunning: true, parkMarksAfterMs: 3_600_000 });
    const dir = join(p.stateDir, 'history');
    const name = markNameOf(selfIdentity());
    try {
      await store.recordFire('a', fire(1), () => {});
      await store.recordFire('a', fire(2), () => {});
      expect(marks(p)).toEqual([name]);
      const ino = statSync(join(dir, name)).ino;
      // appends while it is kept change no folder: and no stamp can be kept meanwhile
      const stamp = stampHistory(dir);
      await store.recordFire('a', fire(3), () => {});
      expect(folderStamp(p)).toBe(stamp);
      expect(statSync(join(dir, name)).ino).toBe(ino);
      // another process's rewrite lists the folder after its stamp: a live writer, no stamp
      expect(writersIn(dir, readdirSync(dir)).live).toBe(true);
      // a rewrite of this process that would stamp parks it first: the folder changes after the
      // last append, then the stamp holds
      const before = folderStamp(p);
      await publishRoutineState(p);
      expect(folderStamp(p)).not.toBe(before);
      expect(marks(p)).toEqual([]);
      expect(stampIn(p)).toBe(folderStamp(p));
      expect(writersIn(dir, readdirSync(dir)).live).toBe(false);
      // the next append names it again (the folder changes: the stamp is gone for readers)
      await store.recordFire('a', fire(4), () => {});
      expect(marks(p)).toEqual([name]);
      expect(folderStamp(p)).not.toBe(stampIn(p));
      expect(readRoutineStateShown(p).routines.a?.counts.success).toBe(4);
    } finally {
      await store.close!();
    }
    // parked at the end, and a process that does not keep marks parks after each append again
    expect(marks(p)).toEqual([]);
    await recordFire(p, 'b', fire(5));
    expect(marks(p)).toEqual([]);
  });

  it('is parked once its writer has not appended for a while (a scheduler killed or stopped between fires leaves none)', async () => {
    const p = project();
    const store = fileRoutineStore(p, { longRunning: true, parkMarksAfterMs: 100 });
    const dir = join(p.stateDir, 'history');
    try {
      await store.recordFire('a', fire(1), () => {});
      await store.recordFire('a', fire(2), () => {});
      const stamp = stampHistory(dir);
      // (waits for the timer, however late a loaded machine runs it)
      for (let i = 0; i < 300 && marks(p).length > 0; i++) await new Promise((r) => setTimeout(r, 50));
      expect(marks(p)).toEqual([]);
      expect(existsSync(join(dir, `${PARKED}${markNameOf(selfIdentity()).slice(WRITING.length)}`))).toBe(true);
      expect(folderStamp(p)).not.toBe(stamp);
    } finally {
      await store.close!();
    }
  });

  it('removed under its writer (judged gone), it is named again before the next append, and a stamp set in between does not hold after it', () => {
    const p = project();
    const dir = join(p.stateDir, 'history');
    mkdirSync(dir, { recursive: true });
    const stop = keepMarksBetweenAppends();
    try {
      const made = beginAppend(dir)!;
      endAppend(dir, made);
      expect(existsSync(made)).toBe(true); // kept
      rmSync(made);
      const stamp = stampHistory(dir);
      expect(beginAppend(dir)).toBe(made);
      expect(existsSync(made)).toBe(true);
      expect(folderStamp(p)).not.toBe(stamp);
      // removed during the append: its end changes the folder
      rmSync(made);
      const again = stampHistory(dir);
      endAppend(dir, made);
      expect(folderStamp(p)).not.toBe(again);
    } finally {
      stop();
      parkHeldMarks(dir);
    }
  });
});

describe('the boot id on macOS', () => {
  it('is the boot time without the local date after it', () => {
    const line = (date: string) => `{ sec = 1764900000, usec = 12345 } ${date}\n`;
    expect(bootIdOfBoottime(line('Fri Dec  5 02:00:00 2025'))).toBe('{ sec = 1764900000, usec = 12345 }');
    expect(bootIdOfBoottime(line('Thu Dec  4 17:00:00 2025'))).toBe(bootIdOfBoottime(line('Fri Dec  5 02:00:00 2025')));
  });
});
