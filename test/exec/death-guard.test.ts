// The guard that ends a dead holder's work on its own host (src/exec/death-guard.ts): a real
// holder process (test/fixtures/guarded-holder.mjs, on the built library) killed in the ways a
// scheduler dies, and its commands' process groups looked at from outside.

import { describe, expect, it, onTestFinished } from 'vitest';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { eventually, processRuns } from '../helpers/cli.js';
import { testdir } from '../helpers/testdir.js';

const HOLDER = resolve(import.meta.dirname, '../fixtures/guarded-holder.mjs');

interface Holder {
  pid: number;
  pids: number[];
  guard: number;
  exited: Promise<void>;
  /** The next line the holder prints. */
  next(): Promise<{ guard: number }>;
}

/** Starts the holder with `scripts` (each a command of its own group), `detached` in a session
 * of its own (so its group can be killed whole); every process left is SIGKILLed at the end. */
async function holder(
  mode: 'guard' | 'unguard' | 'lock' | 'notify' | 'starved',
  scripts: string[],
  detached = false,
): Promise<Holder> {
  // (starved: few descriptors, which the holder then takes all of for a moment)
  const [cmd, args] =
    mode === 'starved'
      ? ['/bin/sh', ['-c', 'ulimit -n 64 && exec "$0" "$@"', process.execPath, HOLDER, mode, ...scripts]]
      : [process.execPath, [HOLDER, mode, ...scripts]];
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'], detached });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async (): Promise<{ guard: number; pids?: number[] }> => {
    const line = await lines.next();
    if (line.done) throw new Error('the holder exited');
    return JSON.parse(line.value as string) as { guard: number; pids?: number[] };
  };
  const { pids, guard } = (await next()) as { pids: number[]; guard: number };
  const guards = [guard];
  onTestFinished(() => {
    for (const p of [child.pid!, ...guards, ...pids])
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        // gone
      }
  });
  return {
    pid: child.pid!,
    pids,
    guard,
    exited,
    next: async () => {
      const line = await next();
      guards.push(line.guard);
      return line;
    },
  };
}

/** A command that writes its pid to `file` and sleeps (its own process: `exec`). */
const sleeper = (file: string): string => `echo $$ > ${file}; exec sleep 60`;

function pidIn(file: string): number {
  return Number(readFileSync(file, 'utf8'));
}

function groupOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
}

async function written(...files: string[]): Promise<void> {
  await eventually(
    () => files.every((f) => existsSync(f) && readFileSync(f, 'utf8').endsWith('\n')),
    10_000,
    'pid files',
  );
}

describe('death guard', () => {
  it("a SIGKILLed holder's guarded groups end with it, and the groups of their sessions that job control moved; a group it ended and forgot is left", async () => {
    const dir = testdir();
    const [a, b, job, left] = ['a', 'b', 'job', 'left'].map((n) => join(dir, n));
    const h = await holder('unguard', [
      sleeper(left!),
      sleeper(a!),
      // a background job of a shell with job control is a group of its own in the same session
      `exec bash -c 'set -m; sleep 61 & echo $! > ${job}; echo $$ > ${b}; wait'`,
    ]);
    await written(a!, b!, job!, left!);
    const [pa, pb, pj, pl] = [a, b, job, left].map((f) => pidIn(f!));
    expect(groupOf(pj!), 'the job in a group of its own').toBe(pj);
    expect([pa, pb, pj, pl].map((p) => processRuns(p!))).toEqual([true, true, true, true]);
    process.kill(h.pid, 'SIGKILL');
    await h.exited;
    await eventually(() => ![pa, pb, pj].some((p) => processRuns(p!)), 10_000, 'the guarded groups ended');
    expect(processRuns(pl!), 'the group it forgot').toBe(true);
    await eventually(() => !processRuns(h.guard), 10_000, 'the guard exits');
  });

  it('a guard killed by someone is replaced, the groups still running told to the new one', async () => {
    const dir = testdir();
    const a = join(dir, 'a');
    const h = await holder('guard', [sleeper(a)]);
    await written(a);
    process.kill(h.guard, 'SIGKILL');
    // (said once the holder saw the old one exit and told the new one)
    const { guard } = await h.next();
    expect(guard).not.toBe(h.guard);
    expect(processRuns(guard)).toBe(true);
    process.kill(h.pid, 'SIGKILL');
    await eventually(() => !processRuns(pidIn(a)), 10_000, 'the guarded group ended');
  });

  it('a guard that could not start (out of descriptors) starts once they are back, with nothing more to tell it', async () => {
    const dir = testdir();
    const a = join(dir, 'a');
    const h = await holder('starved', [sleeper(a)]);
    expect(h.guard, 'no guard while every descriptor is taken').toBeNull();
    await written(a);
    // (said once the holder saw it started; before, none started until the next guarded group)
    let bound: NodeJS.Timeout | undefined;
    const { guard } = await Promise.race([
      h.next(),
      new Promise<never>((_, no) => {
        bound = setTimeout(() => no(new Error('no guard started within 10 s')), 10_000);
      }),
    ]).finally(() => clearTimeout(bound));
    expect(processRuns(guard)).toBe(true);
    process.kill(h.pid, 'SIGKILL');
    await h.exited;
    await eventually(() => !processRuns(pidIn(a)), 10_000, 'the guarded group ended');
  });

  it("a kill of the holder's whole process group does not take the guard along (a session of its own)", async () => {
    const dir = testdir();
    const a = join(dir, 'a');
    const h = await holder('guard', [sleeper(a)], true);
    await written(a);
    process.kill(-h.pid, 'SIGKILL');
    await h.exited;
    await eventually(() => !processRuns(pidIn(a)), 10_000, 'the guarded group ended');
  });

  it.each(['lock', 'notify'] as const)(
    'a command started under a guarded %s id and not yet told to the guard (the instant after its spawn) ends with the holder all the same',
    async (mode) => {
      const dir = testdir();
      const a = join(dir, 'a');
      const h = await holder(mode, [sleeper(a)]);
      await written(a);
      process.kill(h.pid, 'SIGKILL');
      await h.exited;
      await eventually(() => !processRuns(pidIn(a)), 10_000, 'the group ended');
    },
  );
});
