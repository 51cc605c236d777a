// Every durable writer under a short write (a filling disk returns fewer bytes than asked, no
// error) and under ENOSPC / EIO: the file is complete or unchanged, the error names the file
// and carries exit 74, and appends start on a fresh line afterwards (SPEC §3).

import { readFileSync, readdirSync, utimesSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadProject } from '../../src/config/load.js';
import { ExitCode, StateIOError } from '../../src/errors.js';
import { loadRun, RunStore } from '../../src/exec/run-store.js';
import { saveRegistry, loadRegistry, emptyRegistry } from '../../src/exec/registry.js';
import type { RunState } from '../../src/exec/run-state.js';
import { indexPath, readRoutineState, recordFire, statePath, publishRoutineState } from '../../src/state/file-store.js';
import {
  appendLineToFile,
  keepTail,
  openAppendTo,
  removeLeftoverTemps,
  setDurableIoForTests,
  writeFileDurable,
} from '../../src/fs/durable.js';
import { closeFd } from '../../src/fs/names.js';

/** One line appended the way the history and journals append (open, append, close). */
function appendLineTo(path: string, line: string): void {
  const f = openAppendTo(path);
  try {
    appendLineToFile(f, path, line);
  } finally {
    closeFd(f.fd);
  }
}
import { historyPath } from '../../src/state/history.js';
import type { Fire } from '../../src/state/routine-state.js';
import { testdir, testProject } from '../helpers/testdir.js';

let restore: (() => void) | null = null;
afterEach(() => {
  restore?.();
  restore = null;
});

/** write(2) that writes at most `max` bytes per call (what a filling disk does). */
function shortWrites(max: number): void {
  restore = setDurableIoForTests({
    write: (fd, buf, off, len, pos) => {
      return writeSync(fd, buf, off, Math.min(len, max), pos);
    },
  });
}

/** write(2) that writes `allow` bytes in all, then fails with `code`. */
function failAfter(allow: number, code = 'ENOSPC'): void {
  let left = allow;
  restore = setDurableIoForTests({
    write: (fd, buf, off, len, pos) => {
      if (left <= 0) throw Object.assign(new Error(`${code}: injected`), { code });
      const n = writeSync(fd, buf, off, Math.min(len, left), pos);
      left -= n;
      return n;
    },
  });
}

function expectIoError(fn: () => unknown, file: RegExp): void {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(StateIOError);
  expect((err as StateIOError).exitCode).toBe(ExitCode.IO);
  expect(String(err)).toMatch(file);
}

const fire = (i: number): Fire => ({
  result: 'success',
  reason: null,
  scheduled_at: new Date(1_800_000_000_000 + i).toISOString(),
  started_at: new Date(1_800_000_000_000 + i).toISOString(),
  finished_at: new Date(1_800_000_000_100 + i).toISOString(),
  duration_ms: 100,
  exit_code: 0,
  run_id: `r-${i}`,
});

describe('writeFileDurable', () => {
  it('loops over short writes: the file is complete', () => {
    const path = join(testdir(), 'state.json');
    shortWrites(7);
    const text = JSON.stringify({ a: 'x'.repeat(5000) });
    writeFileDurable(path, text);
    expect(readFileSync(path, 'utf8')).toBe(text);
  });

  it.each([
    ['ENOSPC', /no space left on device writing .*state\.json/],
    ['EIO', /input\/output error writing .*state\.json/],
  ])('%s part-way leaves the previous file intact, no temp file, exit 74 naming the file', (code, message) => {
    const dir = testdir();
    const path = join(dir, 'state.json');
    writeFileSync(path, 'previous');
    failAfter(4096, code);
    expectIoError(() => writeFileDurable(path, 'y'.repeat(10_000)), message);
    expect(readFileSync(path, 'utf8')).toBe('previous');
    expect(readdirSync(dir)).toEqual(['state.json']);
  });

  it('removes temp files of killed writers when asked (under the writer lock)', () => {
    const dir = testdir();
    const path = join(dir, 'state.json');
    writeFileSync(join(dir, 'state.json.tmp-0123456789abcdef'), 'half');
    writeFileSync(join(dir, 'state.json.3421543'), 'write-file-atomic leftover');
    writeFileSync(join(dir, 'other.json.tmp-0123456789abcdef'), 'not ours');
    writeFileDurable(path, 'new', { cleanTemps: true });
    expect(readdirSync(dir).sort()).toEqual(['other.json.tmp-0123456789abcdef', 'state.json']);
  });
});

describe('keepTail', () => {
  it.each([
    ['through the append descriptor (Linux)', true],
    ['through a second descriptor, where an O_APPEND one does not read', false],
  ])(
    'keeps the last bytes after a line saying how many went, %s; a file within the bound is left alone',
    (_n, readable) => {
      const path = join(testdir(), 'a.log');
      writeFileSync(path, 'x'.repeat(100) + 'TAIL', { mode: 0o600 });
      const f = { ...openAppendTo(path), readable };
      expect(keepTail(f, path, 10, (cut) => `[${cut} left out]\n`)).toBe('[94 left out]\n'.length + 10);
      writeSync(f.fd, 'next\n');
      closeFd(f.fd);
      expect(readFileSync(path, 'utf8')).toBe('[94 left out]\nxxxxxxTAILnext\n');
      const small = openAppendTo(path);
      expect(keepTail(small, path, 1000, () => 'never\n')).toBe(29);
      closeFd(small.fd);
      expect(readFileSync(path, 'utf8')).toBe('[94 left out]\nxxxxxxTAILnext\n');
    },
  );
});

describe('appends', () => {
  it('a short write is completed; ENOSPC part-way is reported, its torn part blanked (repaired in place), and the next line starts fresh', () => {
    const path = join(testdir(), 'j.jsonl');
    shortWrites(3);
    appendLineTo(path, '{"n":1}');
    restore?.();
    failAfter(4);
    expectIoError(() => appendLineTo(path, '{"n":2}'), /no space left on device appending to .*j\.jsonl/);
    restore?.();
    restore = null;
    appendLineTo(path, '{"n":3}');
    expect(readFileSync(path, 'utf8')).toBe('{"n":1}\n    \n{"n":3}\n');
  });
});

describe('each state writer under a full disk', () => {
  function project() {
    return loadProject({
      cwd: testProject({ routines: [{ id: 'a', schedule: '* * * * *', action: 'command', run: 'true' }] }),
    });
  }

  it('routine history: the fire is not recorded, exit 74 names the history file; the index is untouched', async () => {
    const p = project();
    await recordFire(p, 'a', fire(1));
    const before = readFileSync(indexPath(p, 'a'), 'utf8');
    failAfter(10);
    await expect(recordFire(p, 'a', fire(2))).rejects.toThrow(
      /no space left on device appending to .*history\/a\.jsonl/,
    );
    restore?.();
    restore = null;
    expect(readFileSync(indexPath(p, 'a'), 'utf8')).toBe(before);
    expect(readRoutineState(p).routines.a?.counts.success).toBe(1);
    await recordFire(p, 'a', fire(3));
    expect(readRoutineState(p).routines.a?.counts.success).toBe(2);
  });

  it("a routine's index: the fact is recorded in history, the index write fails with a warning and is rebuilt", async () => {
    const p = project();
    await recordFire(p, 'a', fire(1));
    const before = readFileSync(indexPath(p, 'a'), 'utf8');
    // the history line (small) gets through, the index (larger) does not
    failAfter(300);
    const warnings: string[] = [];
    await recordFire(p, 'a', fire(2), (m) => warnings.push(m));
    restore?.();
    restore = null;
    expect(warnings.join()).toMatch(
      /no space left on device writing .*history\/a\.index; the fact is recorded in .*a\.jsonl/,
    );
    expect(readFileSync(indexPath(p, 'a'), 'utf8')).toBe(before);
    expect(readRoutineState(p).routines.a?.counts.success).toBe(2);
    expect(readFileSync(historyPath(p.stateDir, 'a'), 'utf8').trim().split('\n')).toHaveLength(2);
  });

  it('routine-state.json (the shared index, rewritten now and then): a full disk keeps the previous file; readers fold in the rest', async () => {
    const p = project();
    await recordFire(p, 'a', fire(1));
    await publishRoutineState(p);
    const before = readFileSync(statePath(p), 'utf8');
    await recordFire(p, 'a', fire(2));
    failAfter(10);
    await expect(publishRoutineState(p)).rejects.toThrow(/no space left on device writing .*routine-state\.json/);
    restore?.();
    restore = null;
    expect(readFileSync(statePath(p), 'utf8')).toBe(before);
    expect(readRoutineState(p).routines.a?.counts.success).toBe(2);
  });

  it('the task registry keeps its previous content', async () => {
    const path = join(testdir(), 'tasks.json');
    await saveRegistry(path, { ...emptyRegistry(), generation: 3 }, 'now');
    const before = readFileSync(path, 'utf8');
    failAfter(20);
    await expect(saveRegistry(path, { ...emptyRegistry(), generation: 4 }, 'later')).rejects.toThrow(
      /no space left on device writing .*tasks\.json/,
    );
    restore?.();
    restore = null;
    expect(readFileSync(path, 'utf8')).toBe(before);
    expect(loadRegistry(path, false)).toMatchObject({ kind: 'ok', registry: { generation: 3 } });
  });

  it('a run: a failed snapshot leaves the last good one, and the journal still tells the rest', async () => {
    const runs = join(testdir(), 'runs');
    const state: RunState = {
      version: 1,
      run_id: 'r-20261130T000000Z-abcd',
      status: 'RUNNING',
      command: 'exec run',
      routine: null,
      generation: 1,
      lock_id: 'a'.repeat(32),
      owner: { pid: process.pid, host: 'h', boot_id: null, start_time: null },
      attempt: 1,
      parallel: 1,
      created_at: 'c',
      updated_at: 'c',
      finished_at: null,
      tasks: {
        t: {
          status: 'pending',
          provider: 'default',
          attempts: 0,
          started_at: null,
          finished_at: null,
          duration_ms: null,
          exit_code: null,
          signal: null,
          log: 't.log',
          hash: 'h',
        },
      },
    };
    const store = new RunStore(runs, state.run_id, { append: () => true, snapshot: () => true });
    await store.create(state);
    store.append({ type: 'task-started', gen: 1, at: 'a', task: 't' });
    store.append({
      type: 'task-finished',
      gen: 1,
      at: 'b',
      task: 't',
      status: 'succeeded',
      exit_code: 0,
      signal: null,
      duration_ms: 5,
    });
    store.append({ type: 'run-finished', gen: 1, at: 'c', status: 'SUCCEEDED' });
    failAfter(50);
    await expect(store.snapshot({ ...state, status: 'SUCCEEDED' })).rejects.toThrow(
      /no space left on device writing .*run\.json/,
    );
    restore?.();
    restore = null;
    await store.close();
    const seen = loadRun(runs, state.run_id)!;
    expect(seen.status).toBe('SUCCEEDED');
    expect(seen.tasks.t?.status).toBe('succeeded');
  });

  it('a run journal append: reported with the file, exit 74; the next line starts fresh', async () => {
    const runs = join(testdir(), 'runs');
    const id = 'r-20261130T000000Z-beef';
    const state = {
      version: 1,
      run_id: id,
      status: 'RUNNING',
      command: 'exec run',
      routine: null,
      generation: 1,
      lock_id: 'a'.repeat(32),
      owner: { pid: 4242, host: 'h', boot_id: null, start_time: null },
      attempt: 1,
      parallel: 1,
      created_at: 'c',
      updated_at: 'c',
      finished_at: null,
      tasks: {
        t: {
          status: 'pending',
          provider: 'default',
          attempts: 0,
          started_at: null,
          finished_at: null,
          duration_ms: null,
          exit_code: null,
          signal: null,
          log: 't.log',
          hash: 'h',
        },
      },
    } satisfies RunState;
    const store = new RunStore(runs, id, { append: () => true, snapshot: () => true });
    await store.create(state);
    failAfter(10);
    expectIoError(
      () => store.append({ type: 'task-started', gen: 1, at: 'a', task: 't' }),
      /no space left on device appending to .*journal\.jsonl/,
    );
    restore?.();
    restore = null;
    store.append({
      type: 'task-finished',
      gen: 1,
      at: 'b',
      task: 't',
      status: 'failed',
      exit_code: 1,
      signal: null,
      duration_ms: 5,
    });
    await store.close();
    expect(loadRun(runs, id)!.tasks.t?.status).toBe('failed');
  });
});

describe('removeLeftoverTemps', () => {
  it("removes the temps of killed writers; with an age, only its own temps that old, never a <name>.<number> (a history file's rotated part)", () => {
    const dir = testdir();
    const path = join(dir, 'a.jsonl');
    const twoMinutesAgo = (Date.now() - 120_000) / 1000;
    const names = [
      'a.jsonl.tmp-0123456789abcdef',
      'a.jsonl.tmp-00000000000000ff',
      'a.jsonl.1',
      'a.jsonl.12',
      'b.jsonl.1',
    ];
    for (const n of names) writeFileSync(join(dir, n), 'x', { mode: 0o600 });
    for (const n of names.filter((n) => n !== 'a.jsonl.tmp-00000000000000ff'))
      utimesSync(join(dir, n), twoMinutesAgo, twoMinutesAgo);
    expect(removeLeftoverTemps(path, 60_000)).toBe(1);
    expect(readdirSync(dir).sort()).toEqual(['a.jsonl.1', 'a.jsonl.12', 'a.jsonl.tmp-00000000000000ff', 'b.jsonl.1']);
    // with no age (a writer of the file under its lock): every temp of it, write-file-atomic's too
    expect(removeLeftoverTemps(path)).toBe(3);
    expect(readdirSync(dir)).toEqual(['b.jsonl.1']);
  });
});
