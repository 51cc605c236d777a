import { appendFileSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RunStore, listRunIds, loadRun, loadRunDetailed } from '../../src/exec/run-store.js';
import { FencedError } from '../../src/errors.js';
import type { RunState } from '../../src/exec/run-state.js';
import { testdir } from '../helpers/testdir.js';

const state = (gen = 3): RunState => ({
  version: 1,
  run_id: 'r-20261129T190000Z-aaaa',
  status: 'RUNNING',
  command: 'exec run',
  routine: null,
  generation: gen,
  lock_id: 'a'.repeat(32),
  owner: { pid: 4242, host: 'h', boot_id: null, start_time: null },
  attempt: 1,
  parallel: 1,
  created_at: 't',
  updated_at: 't',
  finished_at: null,
  tasks: {
    a: {
      status: 'pending',
      provider: 'default',
      attempts: 0,
      started_at: null,
      finished_at: null,
      duration_ms: null,
      exit_code: null,
      signal: null,
      log: 'a.log',
      hash: 'h',
    },
  },
});
const open = { append: () => true, snapshot: () => true };

describe('RunStore', () => {
  it('keeps the snapshot plus the journal, 0600 in a 0700 folder', async () => {
    const runs = testdir();
    const store = new RunStore(runs, 'r-20261129T190000Z-aaaa', open);
    await store.create(state());
    store.append({ type: 'task-started', gen: 3, at: 't1', task: 'a' });
    await store.close();
    expect(loadRun(runs, 'r-20261129T190000Z-aaaa')?.tasks.a?.status).toBe('running');
    expect(statSync(store.dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(store.dir, 'run.json')).mode & 0o777).toBe(0o600);
    expect(statSync(join(store.dir, 'journal.jsonl')).mode & 0o777).toBe(0o600);
    expect(listRunIds(runs)).toEqual(['r-20261129T190000Z-aaaa']);
  });

  it('a task id the config accepts with ".." inside (a..b: no "/", never ".." alone) is read back, not set aside as corrupt', async () => {
    const runs = testdir();
    const store = new RunStore(runs, 'r-20261129T190000Z-aaaa', open);
    const s = state();
    await store.create({ ...s, tasks: { 'a..b': { ...s.tasks.a!, log: 'a..b.log' } } });
    store.append({ type: 'task-started', gen: 3, at: 't1', task: 'a..b' });
    await store.close();
    const back = loadRunDetailed(runs, 'r-20261129T190000Z-aaaa');
    expect(back?.state.tasks['a..b']?.status).toBe('running');
    expect(back?.recovered).toBeNull();
    expect(back?.unreadable).toEqual([]);
  });

  it("a task's log name edited in run.json or in the journal (../../x.log) is read back as routinely names it, <task>.log", async () => {
    const runs = testdir();
    const store = new RunStore(runs, 'r-20261129T190000Z-aaaa', open);
    const s = state();
    await store.create({ ...s, tasks: { a: { ...s.tasks.a!, log: '../../../../tmp/pwned.log' } } });
    await store.close();
    // from the snapshot
    expect(loadRun(runs, 'r-20261129T190000Z-aaaa')?.tasks.a?.log).toBe('a.log');
    // from the journal alone (the snapshot gone: the run rebuilt from its first event)
    rmSync(join(store.dir, 'run.json'));
    const rebuilt = loadRunDetailed(runs, 'r-20261129T190000Z-aaaa');
    expect(rebuilt?.recovered).not.toBeNull();
    expect(rebuilt?.state.tasks.a?.log).toBe('a.log');
  });

  it('ignores a torn last line, and a writer reopening it starts on a fresh line', async () => {
    const runs = testdir();
    const store = new RunStore(runs, 'r-20261129T190000Z-aaaa', open);
    await store.create(state());
    await store.close();
    appendFileSync(join(store.dir, 'journal.jsonl'), '{"type":"task-sta');
    expect(loadRun(runs, 'r-20261129T190000Z-aaaa')?.tasks.a?.status).toBe('pending');
    const again = new RunStore(runs, 'r-20261129T190000Z-aaaa', open);
    again.openJournal();
    again.append({ type: 'task-started', gen: 3, at: 't1', task: 'a' });
    await again.close();
    expect(loadRun(runs, 'r-20261129T190000Z-aaaa')?.tasks.a?.status).toBe('running');
    // no longer the last line: now an unreadable one, named (SPEC §3); a line cut short at the
    // end (a write that may still be going on) is not
    expect(loadRunDetailed(runs, 'r-20261129T190000Z-aaaa')?.unreadable).toEqual([
      `${join(again.dir, 'journal.jsonl')}: line 2 could not be read (torn or corrupt) and was skipped`,
    ]);
  });

  it('names a damaged line and a forged event, and applies the lines around them', async () => {
    const runs = testdir();
    const store = new RunStore(runs, 'r-20261129T190000Z-aaaa', open);
    await store.create(state());
    await store.close();
    const journal = join(store.dir, 'journal.jsonl');
    appendFileSync(journal, `${'\0'.repeat(40)}\n{"type":"task-started","gen":"x","at":"t","task":"a"}\n`);
    appendFileSync(journal, '{"type":"task-started","gen":3,"at":"t1","task":"a"}\n');
    const loaded = loadRunDetailed(runs, 'r-20261129T190000Z-aaaa')!;
    expect(loaded.state.tasks.a?.status).toBe('running');
    expect(loaded.unreadable).toEqual([
      `${journal}: line 2 could not be read (torn or corrupt) and was skipped`,
      `${journal}: line 3 is not a valid event (malformed gen or at) and was skipped`,
    ]);
  });

  it("the snapshot's journal offset is where the journal ends, a lost holder's late line after ours included", async () => {
    const runs = testdir();
    const store = new RunStore(runs, 'r-20261129T190000Z-aaaa', open);
    await store.create(state());
    store.append({ type: 'task-started', gen: 3, at: 't1', task: 'a' });
    // a holder of an older generation, winding down, appends its last line meanwhile
    appendFileSync(join(store.dir, 'journal.jsonl'), '{"type":"run-finished","gen":2,"at":"t","status":"ABORTED"}\n');
    await store.snapshot({ ...state(), tasks: { a: { ...state().tasks.a!, status: 'running' } } });
    await store.close();
    const snap = JSON.parse(readFileSync(join(store.dir, 'run.json'), 'utf8')) as { journal_offset: number };
    expect(snap.journal_offset).toBe(statSync(join(store.dir, 'journal.jsonl')).size);
    expect(loadRunDetailed(runs, 'r-20261129T190000Z-aaaa')).toMatchObject({ unreadable: [] });
  });

  it('refuses to write when the fence says the lock is gone, and never replaces a newer snapshot', async () => {
    const runs = testdir();
    const newer = new RunStore(runs, 'r-20261129T190000Z-aaaa', open);
    await newer.create(state(9));
    await newer.close();
    const before = readFileSync(join(newer.dir, 'run.json'), 'utf8');
    const stale = new RunStore(runs, 'r-20261129T190000Z-aaaa', open);
    stale.openJournal();
    await expect(stale.snapshot(state(8))).rejects.toThrow(FencedError);
    const lost = new RunStore(runs, 'r-20261129T190000Z-aaaa', { append: () => false, snapshot: () => false });
    lost.openJournal();
    expect(() => lost.append({ type: 'task-started', gen: 9, at: 't', task: 'a' })).toThrow(FencedError);
    expect(readFileSync(join(newer.dir, 'run.json'), 'utf8')).toBe(before);
  });

  it('turns a run id into a path only after checking it', () => {
    expect(() => new RunStore(testdir(), '../../etc', open).dir).toThrow(/not a run id/);
    expect(() => loadRun(testdir(), 'r-../x')).toThrow(/not a run id/);
  });
});
