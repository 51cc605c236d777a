// Frames and run sections of a routine's log (SPEC §10), over lines: the frames firing.ts writes
// parse back; a run's section is found by its start frame, or, for an exec action's `pending`
// start, by the end frame that follows; a killed run's section ends at the next start.

import { describe, expect, it } from 'vitest';
import { endFrame, startFrame } from '../../src/fire/log-frames.js';
import { LastLines, RunFilter, parseFrame } from '../../src/fire/log-frames.js';

const A = 'r-20261130T120000Z-aaaa';
const B = 'r-20261130T120100Z-bbbb';
const C = 'r-20261130T120200Z-cccc';
const T = '2026-11-30T12:00:00.000Z';
const start = (run: string | null, id = 'job'): string => startFrame(id, run, T, T, 'schedule');
const end = (
  run: string | null,
  result: 'success' | 'failure' = 'success',
  id = 'job',
  reason: string | null = null,
): string => endFrame(id, { run_id: run, finished_at: T, result, reason, duration_ms: 1234 });

/** The lines of `log` that RunFilter picks for `run`. */
function pick(log: string, run: string): { out: string; found: boolean; complete: boolean; waiting: boolean } {
  const f = new RunFilter('job', run);
  const lines = log.split(/(?<=\n)/).filter((l) => l !== '');
  const out = lines
    .flatMap((l) => f.push(Buffer.from(l)))
    .map((b) => b.toString())
    .join('');
  return { out, found: f.found, complete: f.complete, waiting: f.waiting };
}

describe('parseFrame', () => {
  it("reads back firing.ts's frames", () => {
    expect(parseFrame(start(A).trimEnd())).toEqual({
      kind: 'start',
      routine: 'job',
      runId: A,
      startedAt: T,
      scheduledAt: T,
      trigger: 'schedule',
    });
    expect(parseFrame(startFrame('job', null, T, T, 'retry').trimEnd())).toMatchObject({
      kind: 'start',
      runId: null,
      trigger: 'retry',
    });
    expect(parseFrame(end(A, 'failure', 'job', 'exit code 3 (from (sh))').trimEnd())).toEqual({
      kind: 'end',
      routine: 'job',
      runId: A,
      finishedAt: T,
      result: 'failure',
      reason: 'exit code 3 (from (sh))',
      seconds: 1.2,
    });
    expect(parseFrame(end(null).trimEnd())).toMatchObject({
      kind: 'end',
      runId: null,
      result: 'success',
      reason: null,
    });
  });

  it('finds a frame after output that had no final newline; plain output is no frame', () => {
    expect(parseFrame(`progress 40%${end(A).trimEnd()}`)).toMatchObject({ kind: 'end', runId: A });
    expect(parseFrame('--- routinely: is a word in this output')).toBeNull();
    expect(parseFrame('plain output')).toBeNull();
  });
});

describe('RunFilter', () => {
  const log = [start(A), 'a1\n', 'a2\n', end(A), start(B), 'b1\n', end(B, 'failure'), start(C), 'c1\n', end(C)].join(
    '',
  );

  it("picks one run's section, frames included", () => {
    expect(pick(log, B)).toEqual({
      out: [start(B), 'b1\n', end(B, 'failure')].join(''),
      found: true,
      complete: true,
      waiting: false,
    });
    expect(pick(log, A).out).toBe([start(A), 'a1\n', 'a2\n', end(A)].join(''));
  });

  it('a run that is not in the log: nothing', () => {
    expect(pick(log, 'r-20000101T000000Z-0000')).toMatchObject({ out: '', found: false, complete: false });
  });

  it("an exec action's pending start is matched by the end frame that names the run", () => {
    const exec = [
      start(A),
      'a1\n',
      end(A),
      start(null),
      'task output\n',
      end(B),
      start(null),
      'other\n',
      end(null),
    ].join('');
    expect(pick(exec, B).out).toBe([start(null), 'task output\n', end(B)].join(''));
    expect(pick(exec, A).out).toBe([start(A), 'a1\n', end(A)].join(''));
  });

  it('held output past its 16 MiB cap keeps the newest lines, in order, through many thousands of lines let go', () => {
    const f = new RunFilter('job', B);
    f.push(Buffer.from(start(null)));
    // 24 MiB of unframed output in 64-byte lines: the first 8 MiB (and the pending start) go
    const line = (i: number): Buffer => Buffer.from(`${String(i).padStart(10, '0')} ${'x'.repeat(52)}\n`);
    const n = (24 * 1024 * 1024) / 64;
    for (let i = 0; i < n; i++) expect(f.push(line(i))).toEqual([]);
    const out = f.push(Buffer.from(end(B)));
    const kept = out.slice(0, -1);
    expect(kept.length).toBe((16 * 1024 * 1024) / 64);
    expect(kept[0]!.toString()).toBe(line(n - kept.length).toString());
    expect(kept.at(-1)!.toString()).toBe(line(n - 1).toString());
    expect(kept.every((b, i) => b.toString().startsWith(String(n - kept.length + i).padStart(10, '0')))).toBe(true);
    expect(out.at(-1)!.toString()).toBe(end(B));
  });

  it('a run in progress: a named one is inside and found; a pending one is waited for', () => {
    const named = pick([end(A), start(B), 'b1\n'].join(''), B);
    expect(named).toMatchObject({ out: [start(B), 'b1\n'].join(''), found: true, complete: false });
    expect(pick([end(A), start(null), 'x\n'].join(''), B)).toMatchObject({ out: '', found: false, waiting: true });
  });

  it("a run killed without its end frame ends where the next run's start frame begins", () => {
    const killed = [start(A), 'a1\n', 'half a li', start(B), 'b1\n', end(B)].join('');
    expect(pick(killed, A)).toMatchObject({
      out: [start(A), 'a1\n', 'half a li\n'].join(''),
      found: true,
      complete: false,
    });
    expect(pick(killed, B).out).toBe([start(B), 'b1\n', end(B)].join(''));
  });

  it('output without a start frame (its start rotated away) belongs to the end frame that follows', () => {
    expect(pick(['tail of a1\n', end(A), start(B), 'b\n', end(B)].join(''), A).out).toBe(
      ['tail of a1\n', end(A)].join(''),
    );
  });

  it('an end frame after output without a newline is found; the line is kept whole', () => {
    expect(pick([start(A), `no newline${end(A, 'failure')}`].join(''), A)).toMatchObject({
      out: [start(A), `no newline${end(A, 'failure')}`].join(''),
      complete: true,
    });
  });

  it("another routine's frames (in its output) are output, not frames", () => {
    const nested = [start(A), start(B, 'other'), end(B, 'success', 'other'), end(A)].join('');
    expect(pick(nested, A).out).toBe(nested);
    expect(pick(nested, B)).toMatchObject({ out: '', found: false });
  });
});

describe('LastLines', () => {
  const lines = (n: number): Buffer[] => Array.from({ length: n }, (_, i) => Buffer.from(`${i}\n`));
  const text = (b: Buffer[]): string => b.map((x) => x.toString()).join('');

  it('keeps the last n, in order, across pushes', () => {
    const k = new LastLines(3);
    k.push(lines(2));
    k.push(lines(5).slice(2));
    expect(text(k.take())).toBe('2\n3\n4\n');
    expect(k.take()).toEqual([]);
  });

  it('keeps everything without n, and fewer than n as they are', () => {
    const all = new LastLines(undefined);
    all.push(lines(1000));
    expect(all.take()).toHaveLength(1000);
    const few = new LastLines(10);
    few.push(lines(2));
    expect(text(few.take())).toBe('0\n1\n');
  });
});
