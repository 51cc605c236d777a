// The stall rule (SPEC §4.10) from the outside: the built CLI's `lock run` is paused by strace for
// 8 s at chosen system calls on `exec-run.lock` (strace counts each system call apart, so
// `when=K` pauses the K-th call of every kind) — once while taking the lock, once in a
// heartbeat — while a second `lock run --if-busy wait` takes over. The second keeps the lock to
// the end, generations rise, and the two commands never run at the same time. The second starts
// on events, not after a pause: once the first is stalled (strace has written the stalled call's
// start), or once the first holds the lock, for the stalls in a heartbeat.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'vitest';
import { CLI, childEnv, eventually, startCli } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

const haveStrace = spawnSync('strace', ['-V']).status === 0;
const mustRun = process.env.CI === 'true';

/** A command that says its generation, then marks its work with timestamps for `seconds`. */
const work = (name: string, marks: string, seconds: number): string[] => [
  'bash',
  '-c',
  `echo "gen $ROUTINELY_LOCK_GENERATION"; for i in $(seq ${seconds * 20}); do echo "${name} $EPOCHREALTIME" >> '${marks}'; sleep 0.05; done`,
];

function underStrace(project: string, when: number, args: string[]) {
  const lock = join(project, '.routinely', 'locks', 'exec-run.lock');
  const argv = [
    '-f',
    '-qq',
    '-o',
    join(project, 'trace'),
    '-P',
    lock,
    '-e',
    'trace=%file,%desc',
    '-e',
    `inject=all:delay_enter=8000000:when=${when}`,
    process.execPath,
    CLI,
    ...args,
  ];
  const child = spawn('strace', argv, { cwd: project, env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let errText = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (errText += d.toString()));
  // its last words (`lock lost`) may still be in the pipe at its exit: read until the pipe
  // closes (or 5 s, should a leftover of its command hold it)
  const exited = new Promise<number | null>((res) =>
    child.on('exit', (code) => {
      const timer = setTimeout(() => res(code), 5000);
      child.on('close', () => {
        clearTimeout(timer);
        res(code);
      });
    }),
  );
  return { exited, stdout: () => out, stderr: () => errText };
}

/** Whether a traced call is stalled now: strace wrote its start and not its end (the trace ends
 * mid-line, or with a call `<unfinished ...>` and nothing resumed after it). */
function stalledNow(trace: string): boolean {
  let text: string;
  try {
    text = readFileSync(trace, 'utf8');
  } catch {
    return false;
  }
  if (text.length > 0 && !text.endsWith('\n')) return true;
  const unfinished = text.lastIndexOf('<unfinished ...>');
  return unfinished >= 0 && !text.slice(unfinished).includes('resumed>');
}

function blocks(marks: string): string {
  if (!existsSync(marks)) return '';
  const lines = readFileSync(marks, 'utf8')
    .trim()
    .split('\n')
    .map((l) => l.split(' '));
  lines.sort((a, b) => Number(a[1]) - Number(b[1]));
  const order: string[] = [];
  for (const [who] of lines) if (order.at(-1) !== who) order.push(who!);
  return order.join('');
}

describe.skipIf(!haveStrace && !mustRun)('lock run stalled by strace (SPEC §4.10)', () => {
  it.concurrent.for([
    ['while taking the lock', 3],
    ['in a heartbeat', 10],
    ['later in a heartbeat', 13],
  ] as const)(
    '%s: the next holder keeps the lock, generations rise, the commands never overlap',
    { timeout: 60_000 },
    async ([, when], { onTestFinished, expect }) => {
      expect(haveStrace, 'strace is required (CI installs it)').toBe(true);
      const project = testProject({ lock: { ttlSeconds: 2, refreshSeconds: 0.5 } }, onTestFinished);
      const marks = join(project, 'marks');
      const a = underStrace(project, when, ['lock', 'run', '--if-busy', 'wait', '--', ...work('A', marks, 3)]);
      if (when === 3)
        await eventually(
          () => stalledNow(join(project, 'trace')),
          30_000,
          'A stalled while taking the lock',
          () => a.stdout() + a.stderr(),
        );
      else
        await eventually(
          () => /gen \d+/.test(a.stdout()),
          30_000,
          'A holds the lock',
          () => a.stdout() + a.stderr(),
        );
      const b = startCli(['lock', 'run', '--if-busy', 'wait', '--wait-timeout', '30', '--', ...work('B', marks, 5)], {
        cwd: project,
        onFinished: onTestFinished,
      });
      const [codeA, rb] = await Promise.all([a.exited, b.exited]);
      const detail = `A(${codeA}): ${a.stdout()} ${a.stderr()}\nB(${rb.code}): ${b.stdout()} ${b.stderr()}\ntrace: ${readFileSync(
        join(project, 'trace'),
        'utf8',
      )
        .split('\n')
        .filter((l) => l.includes('DELAYED'))
        .join('\n')}`;
      expect(rb.code, detail).toBe(0);
      expect(b.stderr(), detail).not.toMatch(/lock lost/);
      const order = blocks(marks);
      // stalled in a heartbeat, A held the lock first; stalled while taking it, A may never run
      expect(
        when === 3 ? ['AB', 'B'] : ['AB'],
        `commands overlapped or ran out of turn (${order}); ${detail}`,
      ).toContain(order);
      const genA = Number(/gen (\d+)/.exec(a.stdout())?.[1] ?? 0);
      const genB = Number(/gen (\d+)/.exec(b.stdout())?.[1]);
      if (order.startsWith('A')) {
        // A held the lock when it stalled: it learned it lost it, stopped, and said so.
        expect(genB, detail).toBeGreaterThan(genA);
        expect(codeA, detail).toBe(1);
        expect(a.stderr(), detail).toMatch(/lock lost/);
      } else if (genA > 0) {
        expect(genA, detail).toBeGreaterThan(genB);
      }
      const status = spawnSync(process.execPath, [CLI, 'lock', 'status', '--json'], {
        cwd: project,
        env: childEnv(),
        encoding: 'utf8',
      });
      expect(JSON.parse(status.stdout)).toMatchObject({ state: 'free' });
    },
  );
});
