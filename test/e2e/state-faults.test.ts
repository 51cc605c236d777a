// State that survives damage and crashes (SPEC §3), with the built CLI and real processes:
// damaged indexes are rebuilt from the records and never make finished work run again, a run
// of a holder that lost the lock never overrides newer results, read-only views change nothing,
// and a stalled writer never loses another writer's update.

import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, childEnv, eventually, runCli, sleep, startCli, startCliWithFault } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';
import type { RunState } from '../../src/exec/run-state.js';

const state = (p: string, ...parts: string[]): string => join(p, '.routinely', ...parts);
const haveStrace = spawnSync('strace', ['-V']).status === 0;

interface TaskRow {
  id: string;
  status: string;
  last_run_id: string | null;
}
const statuses = async (project: string): Promise<Record<string, string>> => {
  const r = await runCli(['exec', 'status', '--json'], { cwd: project });
  expect(r.code, r.stderr).toBe(0);
  return Object.fromEntries((JSON.parse(r.stdout) as TaskRow[]).map((t) => [t.id, t.status]));
};

/** Tasks that note each start in `starts`. */
function taskProject(extra: object = {}) {
  const project = testProject({
    exec: {
      tasks: ['a', 'b', 'c'].map((id) => ({ id, run: `echo ${id} >> starts` })),
    },
    ...extra,
  });
  return project;
}
const starts = (project: string): string[] =>
  existsSync(join(project, 'starts'))
    ? readFileSync(join(project, 'starts'), 'utf8').trim().split('\n').filter(Boolean)
    : [];

describe('a damaged task registry is rebuilt from the runs (SPEC §3)', () => {
  it.each([
    ['truncated', (f: string) => truncateSync(f, 40)],
    ['deleted', (f: string) => unlinkSync(f)],
    ['garbled', (f: string) => writeFileSync(f, '{"version":1,"tasks":{"a":{"id":"b"}}}')],
    // well-formed, and older than the runs: never taken for "nothing ran"
    ['emptied', (f: string) => writeFileSync(f, '{"version":1,"tasks":{}}')],
  ])('%s: succeeded tasks never run again, and exec status moves nothing', async (_name, damage) => {
    const project = taskProject();
    expect((await runCli(['exec', 'run'], { cwd: project })).code).toBe(0);
    expect(starts(project).sort()).toEqual(['a', 'b', 'c']);
    const registry = state(project, 'exec', 'tasks.json');
    damage(registry);
    const damaged = existsSync(registry) ? readFileSync(registry, 'utf8') : null;
    // a read-only view: shows the rebuilt state, changes nothing
    const view = await runCli(['exec', 'status', '--json'], { cwd: project });
    expect(view.stderr).toMatch(
      /tasks\.json is (missing|corrupt .*|older than run r-\S+ .*); (rebuilt from|folded in the) 1 (newer )?run/,
    );
    expect(Object.fromEntries((JSON.parse(view.stdout) as TaskRow[]).map((t) => [t.id, t.status]))).toEqual({
      a: 'succeeded',
      b: 'succeeded',
      c: 'succeeded',
    });
    expect(existsSync(registry) ? readFileSync(registry, 'utf8') : null).toBe(damaged);
    expect(readdirSync(state(project, 'exec')).filter((n) => n.includes('.corrupt.'))).toEqual([]);
    // a writer rebuilds it, and runs nothing that succeeded
    const again = await runCli(['exec', 'run'], { cwd: project });
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/nothing to run/);
    expect(starts(project)).toHaveLength(3);
    expect(await statuses(project)).toEqual({ a: 'succeeded', b: 'succeeded', c: 'succeeded' });
  });

  it('a copy from before the last run (a restored backup) is rebuilt: what that run did stays done', async () => {
    const project = taskProject();
    expect((await runCli(['register'], { cwd: project })).code).toBe(0);
    const registry = state(project, 'exec', 'tasks.json');
    const before = readFileSync(registry, 'utf8');
    expect((await runCli(['exec', 'run'], { cwd: project })).code).toBe(0);
    writeFileSync(registry, before);
    const again = await runCli(['exec', 'run'], { cwd: project });
    expect(again.stderr).toMatch(
      /tasks\.json is older than run r-\S+ \(it never folded it in\); folded in the 1 newer run/,
    );
    expect(again.stdout).toMatch(/nothing to run/);
    expect(starts(project)).toHaveLength(3);
    // written back whole: the next command has nothing to say
    const quiet = await runCli(['exec', 'status'], { cwd: project });
    expect(quiet.stderr).toBe('');
  });

  it('a run that never came to be (its folder left empty by a crash as it was created) never makes the registry look older: a reset stays', async () => {
    const project = taskProject();
    expect((await runCli(['exec', 'run'], { cwd: project })).code).toBe(0);
    expect((await runCli(['exec', 'reset', 'a'], { cwd: project })).code).toBe(0);
    // the registry names the run first, then its folder is made: a crash in between
    const ghost = 'r-20991231T000000Z-abcd';
    const registry = state(project, 'exec', 'tasks.json');
    const doc = JSON.parse(readFileSync(registry, 'utf8')) as { active_runs: string[] };
    doc.active_runs.push(ghost);
    writeFileSync(registry, JSON.stringify(doc), { mode: 0o600 });
    mkdirSync(state(project, 'exec', 'runs', ghost), { mode: 0o700 });
    expect((await runCli(['register'], { cwd: project })).code).toBe(0); // drops it, under the lock
    const view = await runCli(['exec', 'status', '--json'], { cwd: project });
    expect(view.stderr).toBe('');
    expect(Object.fromEntries((JSON.parse(view.stdout) as TaskRow[]).map((t) => [t.id, t.status]))).toMatchObject({
      a: 'pending',
      b: 'succeeded',
    });
  });

  it('a good registry older than an empty newer run folder folds the newer runs in, never thrown away: what a damaged older run did stays done', async () => {
    const project = taskProject();
    expect((await runCli(['exec', 'run'], { cwd: project })).code).toBe(0);
    const [old] = readdirSync(state(project, 'exec', 'runs'));
    // the old run's files zeroed (a crash of a file system that does not journal data)…
    for (const f of ['run.json', 'journal.jsonl']) {
      const path = state(project, 'exec', 'runs', old!, f);
      writeFileSync(path, Buffer.alloc(readFileSync(path).length));
    }
    // …and a newer run's folder left empty by a crash as it was created (not named by tasks.json)
    mkdirSync(state(project, 'exec', 'runs', 'r-20991231T000000Z-abcd'), { mode: 0o700 });
    const again = await runCli(['exec', 'run'], { cwd: project });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/nothing to run: all 3 tasks succeeded/);
    expect(again.stderr).toMatch(/tasks\.json is older than run r-20991231T000000Z-abcd .*folded in the 0 newer runs/);
    expect(starts(project)).toHaveLength(3);
  });

  it('a file where a run folder goes (junk in runs/) is said and passed over: exec run and exec status go on', async () => {
    const project = taskProject();
    expect((await runCli(['exec', 'run'], { cwd: project })).code).toBe(0);
    writeFileSync(state(project, 'exec', 'runs', 'r-20991231T000000Z-abcd'), 'junk');
    for (const args of [
      ['exec', 'run'],
      ['exec', 'status'],
    ]) {
      const r = await runCli(args, { cwd: project });
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
    }
    expect(starts(project)).toHaveLength(3);
  });

  it('a changed definition still runs again after a rebuild', async () => {
    const project = taskProject();
    expect((await runCli(['exec', 'run'], { cwd: project })).code).toBe(0);
    unlinkSync(state(project, 'exec', 'tasks.json'));
    const config = JSON.parse(readFileSync(join(project, 'routinely.json'), 'utf8'));
    config.exec.tasks[1].run = 'echo b2 >> starts';
    writeFileSync(join(project, 'routinely.json'), JSON.stringify(config));
    expect((await runCli(['exec', 'run'], { cwd: project })).code).toBe(0);
    expect(starts(project)).toEqual(expect.arrayContaining(['b2']));
    expect(starts(project)).toHaveLength(4);
  });
});

describe('a run of a holder that lost the lock never overrides newer results (SPEC §4.7)', () => {
  it('STOP the first run past its TTL, take its run over and finish it, CONT the first: register and resume keep the newer results', async () => {
    const project = testProject({
      lock: { ttlSeconds: 2, refreshSeconds: 0.5 },
      exec: {
        tasks: [
          { id: 'a', run: 'echo a >> starts; sleep 3' },
          { id: 'b', run: 'echo b >> starts', dependsOn: ['a'] },
        ],
      },
    });
    const first = startCli(['exec', 'run'], { cwd: project });
    await eventually(() => starts(project).length === 1, 10_000, 'a started');
    process.kill(first.pid, 'SIGSTOP');
    // the next holder records the paused run as ended (it lost the lock): its tasks are its own,
    // for exec resume, not a plain exec run's
    const second = await runCli(['exec', 'run', '--if-busy', 'wait', '--wait-timeout', '30'], { cwd: project });
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toMatch(/nothing to run: 2 interrupted/);
    const third = await runCli(['exec', 'resume'], { cwd: project });
    expect(third.code, third.stderr).toBe(0);
    expect(await statuses(project)).toEqual({ a: 'succeeded', b: 'succeeded' });
    process.kill(first.pid, 'SIGCONT');
    const r1 = await first.exited;
    expect(r1.code).toBe(1);
    expect(await statuses(project)).toEqual({ a: 'succeeded', b: 'succeeded' });
    expect((await runCli(['register'], { cwd: project })).code).toBe(0);
    expect(await statuses(project)).toEqual({ a: 'succeeded', b: 'succeeded' });
    // one run, finished by its resume: the first holder's late ABORTED / LOCK_LOST line (its
    // older generation) changes nothing
    const runs = JSON.parse((await runCli(['exec', 'runs', '--json'], { cwd: project })).stdout) as {
      status: string;
      why_code?: string;
    }[];
    expect(runs.map((r) => `${r.status}${r.why_code ? `/${r.why_code}` : ''}`)).toEqual(['SUCCEEDED']);
    const before = starts(project).length;
    const resume = await runCli(['exec', 'resume'], { cwd: project });
    expect(resume.code).toBe(0);
    // resuming the aborted run keeps what succeeded since: a and b do not start again
    expect(
      starts(project)
        .slice(before)
        .filter((s) => s === 'a' || s === 'b').length,
    ).toBeLessThanOrEqual(0);
  }, 60_000);
});

describe('read-only views (SPEC §3)', () => {
  it('after exec run is SIGKILLed, status/runs/show say INTERRUPTED / OWNER_DEAD without writing anything', async () => {
    const project = testProject({
      exec: {
        tasks: [
          { id: 'slow', run: 'echo up; sleep 30' },
          // never started: its run holds it all the same
          { id: 'after', run: 'true', dependsOn: ['slow'] },
        ],
      },
    });
    const run = startCli(['exec', 'run'], { cwd: project });
    await eventually(
      () => existsSync(state(project, 'exec', 'runs')) && readdirSync(state(project, 'exec', 'runs')).length === 1,
      10_000,
      'run created',
    );
    await run.waitFor(/started slow/); // the task runs: killed mid-run
    run.child.kill('SIGKILL');
    await run.exited;
    const runId = readdirSync(state(project, 'exec', 'runs'))[0]!;
    const snapshot = readFileSync(state(project, 'exec', 'runs', runId, 'run.json'), 'utf8');
    const runs = JSON.parse((await runCli(['exec', 'runs', '--json'], { cwd: project })).stdout) as {
      status: string;
      why_code?: string;
    }[];
    expect(runs[0]).toMatchObject({ status: 'INTERRUPTED', why_code: 'OWNER_DEAD' });
    const show = await runCli(['exec', 'show', runId], { cwd: project });
    expect(show.stdout).toMatch(new RegExp(`run ${runId}: INTERRUPTED`));
    expect(show.stdout).toMatch(/OWNER_DEAD/);
    // as the next exec run folds it in: each task interrupted, in the run that holds it
    const rows = JSON.parse((await runCli(['exec', 'status', '--json'], { cwd: project })).stdout) as TaskRow[];
    expect(rows.map((t) => [t.id, t.status, t.last_run_id])).toEqual([
      ['slow', 'interrupted', runId],
      ['after', 'interrupted', runId],
    ]);
    expect(readFileSync(state(project, 'exec', 'runs', runId, 'run.json'), 'utf8')).toBe(snapshot);
    // orphan of the killed run: ended by the next holder
    await runCli(['lock', 'break'], { cwd: project });
  });

  it('a damaged journal line is named by the views that read it, with its file and line; what it recorded reads as not done', async () => {
    const project = taskProject();
    expect((await runCli(['exec', 'run'], { cwd: project })).code).toBe(0);
    const runId = readdirSync(state(project, 'exec', 'runs'))[0]!;
    // the snapshot lost, so the whole journal is read; a's result zeroed (a disk's torn block)
    writeFileSync(state(project, 'exec', 'runs', runId, 'run.json'), '{"version":1,');
    const journal = state(project, 'exec', 'runs', runId, 'journal.jsonl');
    const lines = readFileSync(journal, 'utf8').split('\n');
    const at = lines.findIndex((l) => l.includes('"task-finished"') && l.includes('"task":"a"'));
    lines[at] = '\0'.repeat(lines[at]!.length);
    writeFileSync(journal, lines.join('\n'));
    const named = new RegExp(
      `runs/${runId}/journal\\.jsonl: line ${at + 1} could not be read \\(torn or corrupt\\) and was skipped`,
    );
    for (const args of [
      ['exec', 'runs'],
      ['exec', 'show', runId],
    ]) {
      const r = await runCli(args, { cwd: project });
      expect(r.stderr, args.join(' ')).toMatch(named);
    }
    const shown = JSON.parse((await runCli(['exec', 'show', runId, '--json'], { cwd: project })).stdout) as RunState;
    expect(shown.tasks.a?.status).toBe('interrupted'); // its run, left RUNNING by a writer gone
  });

  it('a run.json that is valid JSON but no run (an array, tasks that are no tasks) is set aside as corrupt when the run is written again, not written over unseen', async () => {
    for (const text of ['[]', '{"version":1,"tasks":5}']) {
      const project = testProject({ exec: { tasks: [{ id: 'a', run: 'exit 1' }] } });
      expect((await runCli(['exec', 'run'], { cwd: project })).code).toBe(1);
      const runId = readdirSync(state(project, 'exec', 'runs'))[0]!;
      writeFileSync(state(project, 'exec', 'runs', runId, 'run.json'), text);
      expect((await runCli(['exec', 'resume', runId], { cwd: project })).code).toBe(1);
      const names = readdirSync(state(project, 'exec', 'runs', runId));
      const aside = names.filter((n) => n.startsWith('run.json.corrupt.'));
      expect(aside, text).toHaveLength(1);
      expect(readFileSync(state(project, 'exec', 'runs', runId, aside[0]!), 'utf8')).toBe(text);
      expect(JSON.parse(readFileSync(state(project, 'exec', 'runs', runId, 'run.json'), 'utf8'))).toMatchObject({
        run_id: runId,
        attempt: 2,
      });
    }
  });

  it('a corrupt run.json of a run left RUNNING by a SIGKILLed exec run: the next exec run records the run ended and writes run.json again as it now is (INTERRUPTED)', async () => {
    const project = testProject({ exec: { tasks: [{ id: 'slow', run: 'echo up; sleep 30' }] } });
    const first = startCli(['exec', 'run'], { cwd: project });
    await first.waitFor(/started slow/);
    first.child.kill('SIGKILL');
    await first.exited;
    const runId = readdirSync(state(project, 'exec', 'runs'))[0]!;
    writeFileSync(state(project, 'exec', 'runs', runId, 'run.json'), 'garbage');
    const next = await runCli(['exec', 'run'], { cwd: project });
    expect(next.stderr).toMatch(`runs/${runId}/run.json was corrupt: moved aside to `);
    const snapshot = JSON.parse(readFileSync(state(project, 'exec', 'runs', runId, 'run.json'), 'utf8')) as {
      status: string;
      journal_offset: number;
    };
    expect(snapshot.status).toBe('INTERRUPTED');
    expect(snapshot.journal_offset).toBe(statSync(state(project, 'exec', 'runs', runId, 'journal.jsonl')).size);
  });

  it('a corrupt run.json is rebuilt from its journal; with the journal gone too, it is listed as unreadable', async () => {
    const project = taskProject();
    expect((await runCli(['exec', 'run'], { cwd: project })).code).toBe(0);
    const runId = readdirSync(state(project, 'exec', 'runs'))[0]!;
    writeFileSync(state(project, 'exec', 'runs', runId, 'run.json'), '{"version":1,');
    const listed = await runCli(['exec', 'runs', '--json'], { cwd: project });
    let runs = JSON.parse(listed.stdout) as { run_id: string; status: string }[];
    expect(runs).toEqual([expect.objectContaining({ run_id: runId, status: 'SUCCEEDED' })]);
    // said by the view, left where it is
    const file = `.routinely/exec/runs/${runId}/run.json`;
    expect(listed.stderr).toMatch(`routinely: warning: ${file} is corrupt (not valid JSON (`);
    expect(listed.stderr).toMatch(/\): rebuilt from its journal\n$/);
    expect(readFileSync(state(project, 'exec', 'runs', runId, 'run.json'), 'utf8')).toBe('{"version":1,');
    // read under the lock (exec resume of it: nothing to resume), set aside and written again
    const resumed = await runCli(['exec', 'resume', runId], { cwd: project });
    expect(resumed.code).toBe(0);
    expect(resumed.stderr).toMatch(`${file} was corrupt: moved aside to ${file}.corrupt.`);
    const aside = readdirSync(state(project, 'exec', 'runs', runId)).filter((n) => n.startsWith('run.json.corrupt.'));
    expect(aside).toHaveLength(1);
    expect(readFileSync(state(project, 'exec', 'runs', runId, aside[0]!), 'utf8')).toBe('{"version":1,');
    const again = await runCli(['exec', 'runs', '--json'], { cwd: project });
    expect(again.stderr).toBe('');
    expect(JSON.parse(again.stdout)).toEqual(runs);
    writeFileSync(state(project, 'exec', 'runs', runId, 'run.json'), '{"version":1,');
    rmSync(state(project, 'exec', 'runs', runId, 'journal.jsonl'));
    const r = await runCli(['exec', 'runs'], { cwd: project });
    expect(r.stdout).toMatch(new RegExp(`${runId}  UNREADABLE .*run\\.json is corrupt`));
    runs = JSON.parse((await runCli(['exec', 'runs', '--json'], { cwd: project })).stdout) as {
      run_id: string;
      status: string;
    }[];
    expect(runs).toEqual([expect.objectContaining({ run_id: runId, status: 'UNREADABLE' })]);
    // a command about that run alone: damage is bad input (2), not a storage fault (74)
    for (const args of [
      ['exec', 'show', runId],
      ['exec', 'resume', runId],
    ]) {
      const one = await runCli(args, { cwd: project });
      expect([one.code, one.stderr], args.join(' ')).toEqual([2, expect.stringMatching(/run\.json is corrupt/)]);
    }
  });
});

describe('routine state: the index of the history (SPEC §3)', () => {
  // routine-state.json is not fsynced (docs/state.md): after a power loss it may be an older
  // whole copy, or, on a file system that does not flush a file renamed over another, empty
  it.each([
    ['garbled', (_f: string, _old: string) => '{"version":1,"routines":{"p":{"paused":fal'],
    ['empty (a power loss before its blocks reached the disk)', () => ''],
    ['an older copy (a power loss that kept an earlier rewrite)', (_f: string, old: string) => old],
  ])(
    'a routine-state.json %s keeps a paused routine paused and every count, on the CLI and in the scheduler',
    async (_name, damage) => {
      const project = testProject({
        routines: [
          { id: 'p', schedule: '* * * * * *', action: 'command', run: 'echo p >> fired' },
          { id: 'q', schedule: '0 0 1 1 *', action: 'command', run: 'true' },
        ],
      });
      expect((await runCli(['routine', 'run', 'q'], { cwd: project })).code).toBe(0);
      const old = readFileSync(state(project, 'routine-state.json'), 'utf8');
      for (let i = 0; i < 2; i++) expect((await runCli(['routine', 'run', 'q'], { cwd: project })).code).toBe(0);
      expect((await runCli(['routine', 'pause', 'p', '--note', 'maintenance'], { cwd: project })).code).toBe(0);
      writeFileSync(state(project, 'routine-state.json'), damage(state(project, 'routine-state.json'), old));
      const list = await runCli(['routine', 'list', '--json'], { cwd: project });
      const rows = JSON.parse(list.stdout) as {
        id: string;
        paused: boolean;
        paused_note: string | null;
        counts: { success: number };
      }[];
      expect(rows.find((r) => r.id === 'p')).toMatchObject({ paused: true, paused_note: 'maintenance' });
      expect(rows.find((r) => r.id === 'q')?.counts.success).toBe(3);
      const s = startCli(['scheduler', 'start'], { cwd: project });
      await s.waitFor(/\[scheduler\] started/);
      await sleep(3000);
      s.child.kill('SIGTERM');
      expect((await s.exited).code).toBe(0);
      expect(existsSync(join(project, 'fired'))).toBe(false);
      // and the scheduler's first rewrite put the whole truth back in the file
      const file = JSON.parse(readFileSync(state(project, 'routine-state.json'), 'utf8')) as {
        routines: Record<string, { paused: boolean; counts: { success: number } }>;
      };
      expect(file.routines.p?.paused).toBe(true);
      expect(file.routines.q?.counts.success).toBe(3);
    },
  );

  it('a torn history line never swallows the next run', async () => {
    const project = testProject({ routines: [{ id: 'r1', schedule: '0 0 1 1 *', action: 'command', run: 'true' }] });
    for (let i = 0; i < 2; i++) await runCli(['routine', 'run', 'r1'], { cwd: project });
    truncateSync(
      state(project, 'history', 'r1.jsonl'),
      readFileSync(state(project, 'history', 'r1.jsonl')).length - 20,
    );
    await runCli(['routine', 'run', 'r1'], { cwd: project });
    const h = await runCli(['routine', 'history', 'r1', '--json'], { cwd: project });
    // the second run's record was torn: its start (the open marker) survives, so the next command
    // records it once as interrupted; the third run shows as itself
    const entries = JSON.parse(h.stdout) as { result: string; reason: string | null }[];
    expect(entries.map((e) => e.result)).toEqual(['success', 'failure', 'success']);
    expect(entries[1]!.reason).toMatch(/^interrupted/);
    expect(h.stderr).toMatch(/r1\.jsonl: line 4 could not be read \(torn or corrupt\) and was skipped/);
  });

  it.skipIf(!haveStrace && process.env.CI !== 'true')(
    "a writer stalled between folding a routine's index and writing it loses no other update",
    async () => {
      expect(haveStrace, 'strace is required (CI installs it)').toBe(true);
      const project = testProject({ routines: [{ id: 'x', schedule: '0 0 1 1 *', action: 'command', run: 'true' }] });
      await runCli(['routine', 'resume', 'x'], { cwd: project }); // the history and index exist
      const index = state(project, 'history', 'x.index');
      // which of `routine pause`'s system calls on x.index comes after it folded the index:
      // the open for the write (found by tracing one pause first)
      const trace = join(project, 'trace');
      spawnSync('strace', ['-f', '-qq', '-o', trace, '-P', index, process.execPath, CLI, 'routine', 'pause', 'x'], {
        cwd: project,
        env: childEnv(),
      });
      const calls = readFileSync(trace, 'utf8')
        .split('\n')
        .filter((l) => l && !/^\d+ +(---|\+\+\+)/.test(l));
      const writeAt = calls.findIndex((l) => /openat\(AT_FDCWD, "[^"]*x\.index", O_RDWR/.test(l));
      expect(
        calls.slice(0, writeAt).filter((l) => /pread64/.test(l)).length,
        'the index is read before the write',
      ).toBeGreaterThan(0);
      await runCli(['routine', 'resume', 'x'], { cwd: project });
      // strace counts each system call apart: the write's open is the n-th openat of the file
      const nth = calls.slice(0, writeAt + 1).filter((l) => /^\d+ +openat\(/.test(l)).length;
      const traceX = join(project, 'trace-x');
      const x = startCliWithFault(
        { cwd: project, output: traceX, paths: [index], inject: `openat:delay_enter=5000000:when=${nth}` },
        ['routine', 'pause', 'x', '--note', 'stalled'],
        ['ignore', 'ignore', 'ignore'],
      );
      const xExit = new Promise<number | null>((res) => x.on('exit', (c) => res(c)));
      await eventually(
        () => existsSync(traceX) && (readFileSync(traceX, 'utf8').match(/openat\(/g) ?? []).length >= nth,
        10_000,
        'the stalled writer',
      );
      // meanwhile a fire of x is recorded and its index written
      const run = await runCli(['routine', 'run', 'x'], { cwd: project });
      expect(run.code, run.stderr).toBe(0);
      expect(await xExit).toBe(0);
      expect(readFileSync(traceX, 'utf8')).toMatch(/DELAYED/);
      // the stalled writer put back an index without the fire; readers fold it in from history
      expect(JSON.parse(readFileSync(index, 'utf8').split('\n')[0]!).record.counts.success).toBe(0);
      const rows = JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout) as {
        id: string;
        paused: boolean;
        paused_note: string | null;
        counts: { success: number };
      }[];
      expect(rows.map((r) => [r.id, r.paused, r.paused_note, r.counts.success])).toEqual([['x', true, 'stalled', 1]]);
    },
    60_000,
  );
});

describe('crashes never rerun finished work', () => {
  it('SIGKILL exec run / exec resume at random moments: a task recorded as succeeded never starts again', async () => {
    const ids = Array.from({ length: 8 }, (_, i) => `t${i}`);
    const project = testProject({
      exec: {
        parallel: 2,
        tasks: ids.map((id) => ({ id, run: `echo ${id} >> starts; sleep 0.${3 + (Number(id.slice(1)) % 4)}` })),
      },
    });
    // a fixed-seed sequence of kill delays
    let seed = 42;
    const random = (): number => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    const succeededAt = new Map<string, number>(); // task -> number of start lines when first seen succeeded
    for (let round = 0; round < 12; round++) {
      const s = await statuses(project).catch(() => ({}) as Record<string, string>);
      const seen = starts(project).length;
      for (const [id, st] of Object.entries(s))
        if (st === 'succeeded' && !succeededAt.has(id)) succeededAt.set(id, seen);
      if (ids.every((id) => s[id] === 'succeeded')) break;
      const cmd = round % 2 === 0 ? ['exec', 'run'] : ['exec', 'resume'];
      const p = startCli(cmd, { cwd: project });
      let ended = false;
      void p.exited.then(() => (ended = true));
      // the kill lands while work runs: once a task has started (or the command is done already)
      await eventually(
        () => starts(project).length > seen || ended,
        15_000,
        `a task started by ${cmd.join(' ')}`,
        () => p.stdout() + p.stderr(),
      );
      await sleep(Math.floor(random() * 700));
      p.child.kill('SIGKILL');
      await p.exited;
    }
    // finish cleanly
    await runCli(['exec', 'resume'], { cwd: project });
    await runCli(['exec', 'run'], { cwd: project });
    const lines = starts(project);
    expect(succeededAt.size, 'some task was seen succeeded between kills').toBeGreaterThan(0);
    for (const [id, at] of succeededAt) {
      expect(
        lines.slice(at).filter((l) => l === id),
        `${id} started again after it was recorded as succeeded`,
      ).toEqual([]);
    }
    expect(await statuses(project)).toEqual(Object.fromEntries(ids.map((id) => [id, 'succeeded'])));
  }, 120_000);
});

describe('a history file that is not a regular file (SPEC §3, §12)', () => {
  it.each(['fifo', 'symlink'] as const)(
    'a %s in its place is never read, and the routine is not shown as never run: its index answers, said on stderr',
    async (kind) => {
      const project = testProject({ routines: [{ id: 'b', schedule: '0 0 1 1 *', action: 'command', run: 'exit 3' }] });
      expect((await runCli(['routine', 'run', 'b'], { cwd: project })).code).toBe(1);
      const history = state(project, 'history', 'b.jsonl');
      const kept = join(project, 'kept.jsonl');
      writeFileSync(kept, readFileSync(history));
      unlinkSync(history);
      rmSync(state(project, 'routine-state.json'), { force: true });
      if (kind === 'fifo') expect(spawnSync('mkfifo', [history]).status).toBe(0);
      else symlinkSync(kept, history);
      for (const env of [{}, { ROUTINELY_LIST_CACHE: '0' }]) {
        const json = await runCli(['routine', 'list', '--json'], { cwd: project, env });
        expect(json.code, json.stderr).toBe(0);
        expect(JSON.parse(json.stdout)).toEqual([
          expect.objectContaining({ id: 'b', last_result: 'failure', failing: true }),
        ]);
        expect(json.stderr).toMatch(
          new RegExp(
            `b\\.jsonl is ${kind === 'fifo' ? 'a FIFO' : 'a symbolic link'}, not read; b is shown as last recorded`,
          ),
        );
        const check = await runCli(['routine', 'list', '--check'], { cwd: project, env });
        expect(check.stdout + check.stderr).toMatch(/failing routine: b/);
        // said once, though the cache's path and the full one both read the state
        expect(check.stderr.match(/ not read; /g)).toHaveLength(1);
      }
    },
  );
});
