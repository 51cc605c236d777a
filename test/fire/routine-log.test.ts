// showRoutineLog over real files (SPEC §10 `routine logs`): the rotated file first, the last N
// lines, one run, a followed log that is rotated and truncated under it, and the files it must
// refuse (a symlink, a FIFO).

import { appendFileSync, mkdirSync, renameSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { endFrame, startFrame } from '../../src/fire/log-frames.js';
import { routineLogPath } from '../../src/fire/firing.js';
import { routineLogFiles, showRoutineLog, type LogView } from '../../src/fire/routine-log.js';
import type { Project } from '../../src/config/load.js';
import { eventually } from '../helpers/cli.js';
import { testdir } from '../helpers/testdir.js';

const T = '2026-11-30T12:00:00.000Z';
const run = (id: string, out: string[], result: 'success' | 'failure' = 'success'): string =>
  [
    startFrame('job', id, T, T, 'schedule'),
    ...out.map((l) => `${l}\n`),
    endFrame('job', {
      run_id: id,
      finished_at: T,
      result,
      reason: result === 'failure' ? 'exit code 1' : null,
      duration_ms: 100,
    }),
  ].join('');
const R1 = 'r-20261130T120000Z-0001';
const R2 = 'r-20261130T120100Z-0002';
const R3 = 'r-20261130T120200Z-0003';

function state(): { stateDir: string; log: string } {
  const stateDir = join(testdir(), '.routinely');
  mkdirSync(join(stateDir, 'logs'), { recursive: true, mode: 0o700 });
  return { stateDir, log: join(stateDir, 'logs', 'job.log') };
}

async function show(v: Omit<LogView, 'write' | 'notice' | 'id'> & { id?: string }) {
  let out = '';
  const notices: string[] = [];
  const r = await showRoutineLog({
    id: 'job',
    ...v,
    write: (b) => (out += b.toString()),
    notice: (m) => notices.push(m),
  });
  return { r, out, notices };
}

describe('showRoutineLog', () => {
  it("uses firing.ts's log path", () => {
    const stateDir = '/p/.routinely';
    expect(routineLogFiles(stateDir, 'job').current).toBe(routineLogPath({ stateDir } as Project, 'job'));
  });

  it('shows the rotated file first, then the current one', async () => {
    const s = state();
    writeFileSync(`${s.log}.1`, run(R1, ['one']));
    writeFileSync(s.log, run(R2, ['two']) + run(R3, ['three'], 'failure'));
    const { r, out } = await show({ stateDir: s.stateDir });
    expect(r).toEqual({ kind: 'shown' });
    expect(out).toBe(run(R1, ['one']) + run(R2, ['two']) + run(R3, ['three'], 'failure'));
  });

  it('a large log: each line written as it is read (none held for the end), and the event loop turning meanwhile (a scheduler reading it for a page or a notification keeps its ticks)', async () => {
    const s = state();
    const line = `${'x'.repeat(99)}\n`;
    // 6 MB of output in one run
    writeFileSync(
      s.log,
      run(
        R1,
        Array.from({ length: 60_000 }, () => line.slice(0, -1)),
      ),
    );
    let turned = false;
    const timer = setTimeout(() => (turned = true), 0);
    let written = 0;
    let writtenWhenTurned = -1;
    const r = await showRoutineLog({
      stateDir: s.stateDir,
      id: 'job',
      write: (b) => {
        written += b.length;
        if (turned && writtenWhenTurned < 0) writtenWhenTurned = written;
      },
      notice: () => {},
    });
    clearTimeout(timer);
    expect(r).toEqual({ kind: 'shown' });
    expect(written).toBeGreaterThan(6_000_000);
    // the timer ran while the log was being shown: lines were written before and after it
    expect(writtenWhenTurned).toBeGreaterThan(0);
    expect(writtenWhenTurned).toBeLessThan(written);
  });

  it('a rotation while the rotated file is read (a scheduler lets its fires go on meanwhile) loses nothing: both files were opened first', async () => {
    const s = state();
    // 2 MB in the rotated file: the reader lets the event loop run while it reads it
    writeFileSync(
      `${s.log}.1`,
      run(
        R1,
        Array.from({ length: 20_000 }, () => 'y'.repeat(99)),
      ),
    );
    writeFileSync(s.log, run(R2, ['two']));
    // a fire rotates the log at the reader's first pause: the current file becomes .1
    setImmediate(() => {
      renameSync(s.log, `${s.log}.1`);
      writeFileSync(s.log, run(R3, ['three']));
    });
    const { r, out } = await show({ stateDir: s.stateDir, runId: R2 });
    // (before: the current file was opened after the rotated one was read: R2 "not found")
    expect(r).toEqual({ kind: 'shown' });
    expect(out).toBe(run(R2, ['two']));
  });

  it("--lines N: the last N lines; --run: that run only, from either file; both: the run's last lines", async () => {
    const s = state();
    writeFileSync(`${s.log}.1`, run(R1, ['one']));
    writeFileSync(s.log, run(R2, ['a', 'b', 'c']));
    expect((await show({ stateDir: s.stateDir, lines: 2 })).out).toBe(`c\n${run(R2, []).split('\n')[1]}\n`);
    expect((await show({ stateDir: s.stateDir, runId: R1 })).out).toBe(run(R1, ['one']));
    expect((await show({ stateDir: s.stateDir, runId: R2, lines: 3 })).out).toBe(
      run(R2, ['a', 'b', 'c'])
        .split(/(?<=\n)/)
        .slice(-3)
        .join(''),
    );
    expect((await show({ stateDir: s.stateDir, runId: R3 })).r).toMatchObject({
      kind: 'run-not-found',
      inProgress: false,
    });
  });

  it('a routine without a log yet; an id that is not one is never a path', async () => {
    const s = state();
    expect((await show({ stateDir: s.stateDir })).r).toEqual({ kind: 'no-log', path: s.log });
    await expect(show({ stateDir: s.stateDir, id: '../../etc/passwd' })).rejects.toThrow(/is not a routine id/);
  });

  it('refuses a symlink and a FIFO at the log path (exit 2), and a logs folder others can write', async () => {
    const s = state();
    const secret = join(testdir(), 'secret');
    writeFileSync(secret, 'secret\n');
    symlinkSync(secret, s.log);
    await expect(show({ stateDir: s.stateDir })).rejects.toMatchObject({
      exitCode: 2,
      message: expect.stringMatching(/job\.log is a symbolic link; refusing to read it/),
    });
    const f = state();
    execFileSync('mkfifo', [`${f.log}.1`]);
    await expect(show({ stateDir: f.stateDir })).rejects.toMatchObject({
      exitCode: 2,
      message: expect.stringMatching(/job\.log\.1 is a FIFO, not a regular file/),
    });
    const g = state();
    execFileSync('chmod', ['777', join(g.stateDir, 'logs')]);
    await expect(show({ stateDir: g.stateDir })).rejects.toMatchObject({
      exitCode: 2,
      message: expect.stringMatching(/logs is writable by .*other users/),
    });
  });

  it('--follow: the last 10 lines, then what is written, through rotation and truncation, until aborted', async () => {
    const s = state();
    writeFileSync(s.log, Array.from({ length: 30 }, (_, i) => `old ${i}\n`).join(''), { mode: 0o600 });
    const stop = new AbortController();
    let out = '';
    const notices: string[] = [];
    const following = showRoutineLog({
      stateDir: s.stateDir,
      id: 'job',
      follow: true,
      signal: stop.signal,
      pollMs: 20,
      write: (b) => (out += b.toString()),
      notice: (m) => notices.push(m),
    });
    await eventually(() => out.includes('old 29'), 10_000, 'the last lines');
    expect(out).toBe(Array.from({ length: 10 }, (_, i) => `old ${20 + i}\n`).join(''));
    appendFileSync(s.log, 'partial ');
    await eventually(() => out.endsWith('partial '), 10_000, 'a partial line as it is written');
    appendFileSync(s.log, 'line\n');
    await eventually(() => out.endsWith('partial line\n'), 10_000, 'its end');
    // rotation: renamed to .1 (a last write lands in it), a new file begun
    renameSync(s.log, `${s.log}.1`);
    appendFileSync(`${s.log}.1`, 'last of the old file\n');
    writeFileSync(s.log, 'first of the new file\n', { mode: 0o600 });
    await eventually(() => out.includes('first of the new file\n'), 10_000, 'the new file');
    expect(out.indexOf('last of the old file')).toBeGreaterThan(0);
    expect(out.indexOf('last of the old file')).toBeLessThan(out.indexOf('first of the new file'));
    truncateSync(s.log, 0);
    appendFileSync(s.log, 'after truncation\n');
    await eventually(
      () => out.endsWith('after truncation\n'),
      10_000,
      'after truncation',
      () => out,
    );
    expect(notices.join('\n')).toMatch(/was truncated; reading it from its start/);
    stop.abort();
    expect(await following).toEqual({ kind: 'stopped' });
  });

  it('--follow a log that does not exist yet waits for it', async () => {
    const s = state();
    const stop = new AbortController();
    let out = '';
    const notices: string[] = [];
    const following = showRoutineLog({
      stateDir: s.stateDir,
      id: 'job',
      follow: true,
      signal: stop.signal,
      pollMs: 20,
      write: (b) => (out += b.toString()),
      notice: (m) => notices.push(m),
    });
    await eventually(() => notices.length > 0, 10_000, 'the notice');
    expect(notices).toEqual(['no output logged for job yet; waiting for it']);
    writeFileSync(s.log, 'hello\n', { mode: 0o600 });
    await eventually(() => out === 'hello\n', 10_000, 'the first output');
    stop.abort();
    await following;
  });

  it('--follow --run: that run as it is written, stopping at its end frame; a finished run is shown at once', async () => {
    const s = state();
    writeFileSync(s.log, run(R1, ['one']) + startFrame('job', R2, T, T, 'manual') + 'working\n', { mode: 0o600 });
    let out = '';
    const following = showRoutineLog({
      stateDir: s.stateDir,
      id: 'job',
      runId: R2,
      follow: true,
      pollMs: 20,
      write: (b) => (out += b.toString()),
      notice: () => {},
    });
    await eventually(() => out.includes('working'), 10_000, 'the run so far');
    expect(out).toBe(`${startFrame('job', R2, T, T, 'manual')}working\n`);
    appendFileSync(s.log, 'almost');
    appendFileSync(
      s.log,
      ' done\n' +
        endFrame('job', { run_id: R2, finished_at: T, result: 'success', reason: null, duration_ms: 5 }) +
        run(R3, ['next run']),
    );
    expect(await following).toEqual({ kind: 'run-ended' });
    expect(out).toBe(
      `${startFrame('job', R2, T, T, 'manual')}working\nalmost done\n${endFrame('job', { run_id: R2, finished_at: T, result: 'success', reason: null, duration_ms: 5 })}`,
    );
    const done = await show({ stateDir: s.stateDir, runId: R1, follow: true });
    expect(done).toMatchObject({ r: { kind: 'shown' }, out: run(R1, ['one']) });
  });

  it("--follow --run of an exec action's run waits for the end frame that names it", async () => {
    const s = state();
    writeFileSync(s.log, `${startFrame('job', null, T, T, 'schedule')}task output\n`, { mode: 0o600 });
    let out = '';
    const notices: string[] = [];
    const following = showRoutineLog({
      stateDir: s.stateDir,
      id: 'job',
      runId: R2,
      follow: true,
      pollMs: 20,
      write: (b) => (out += b.toString()),
      notice: (m) => notices.push(m),
    });
    await eventually(() => notices.length > 0, 10_000, 'the notice');
    expect(notices[0]).toMatch(/waiting for the run in progress to end/);
    expect(out).toBe('');
    appendFileSync(
      s.log,
      endFrame('job', {
        run_id: R2,
        finished_at: T,
        result: 'failure',
        reason: 'failed: 1 of 1 tasks failed',
        duration_ms: 5,
      }),
    );
    expect(await following).toEqual({ kind: 'run-ended' });
    expect(out).toMatch(
      /^--- routinely: job run pending started .*\ntask output\n--- routinely: job run r-20261130T120100Z-0002 finished .*: failure \(failed: 1 of 1 tasks failed\) in 0\.0s ---\n$/,
    );
    // without a run in progress, an unknown run is an error at once, also with --follow
    expect((await show({ stateDir: s.stateDir, runId: R3, follow: true })).r).toMatchObject({ kind: 'run-not-found' });
  });
});
