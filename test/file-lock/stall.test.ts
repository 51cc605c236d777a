// The stall harness (SPEC §4.10): holder A is paused — its whole event loop blocked, as SIGSTOP,
// a frozen VM or a hung disk would — at every file-system step of acquire, heartbeat,
// raise-generation and release, while holder B waits and takes the lock from it. Whatever the
// step, B keeps the lock to the end, generations only rise, the work of the two never overlaps,
// and an A that was holding learns it lost and stops (exit 1, `lost`).

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readLockStatus } from '../../src/file-lock/status.js';
import { FIXTURES, start, type Spawned } from '../helpers/cli.js';
import { testdir } from '../helpers/testdir.js';

const TTL = 2000;
const REFRESH = 400;
const STALL = 5000;
const HOLD_A = 1500;
const HOLD_B = 5000;

/** Every step the file lease reports to its hook; a new step must be added here to be tested. */
const ACQUIRE = [
  'acquire:list',
  'acquire:read-slot',
  'acquire:write-temp',
  'acquire:link-slot',
  'acquire:recheck',
  'acquire:write-view',
  'acquire:beat',
];
const HOLD = [
  'children:append',
  'verify:slots',
  'verify:view',
  'beat:write',
  'beat:recheck:slots',
  'beat:recheck:view',
];
const RELEASE = ['release:slots', 'release:view', 'release:move-view', 'release:mark', 'release:spare'];
const RAISE = ['raise:write', 'raise:link', 'raise:recheck', 'raise:recheck:slots', 'raise:recheck:view'];

interface Event {
  won?: boolean;
  generation?: number;
  raised?: number;
  lost?: string;
  released?: boolean;
  stalled?: string;
  steps?: string[];
}

const events = (p: Spawned): Event[] =>
  p
    .stdout()
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Event);

type Finished = (fn: () => void) => void;

function holder(
  dir: string,
  name: string,
  hold: number,
  onFinished: Finished,
  stall?: { at: string; n?: number },
  raise = false,
  releaseWhen = '-',
): Spawned {
  return start(
    join(FIXTURES, 'stall-holder.mjs'),
    [
      join(dir, 'locks'),
      String(TTL),
      String(REFRESH),
      String(hold),
      join(dir, 'marks'),
      name,
      stall?.at ?? '-',
      String(stall?.n ?? 1),
      String(STALL),
      raise ? '1' : '0',
      releaseWhen,
    ],
    { onFinished },
  );
}

/** The work marks of A and B never interleave: one holder's marks form one block. */
function checkMarks(dir: string): { a: number; b: number; order: string } {
  const file = join(dir, 'marks');
  const lines = existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').filter(Boolean) : [];
  const marks = lines
    .map((l) => {
      const [who, t] = l.split(' ');
      return { who: who!, t: Number(t) };
    })
    .filter((m) => m.who !== 'W');
  marks.sort((x, y) => x.t - y.t);
  const blocks: string[] = [];
  for (const m of marks) if (blocks.at(-1) !== m.who) blocks.push(m.who);
  return {
    a: marks.filter((m) => m.who === 'A').length,
    b: marks.filter((m) => m.who === 'B').length,
    order: blocks.join(''),
  };
}

async function scenario(
  step: string,
  phase: 'acquire' | 'hold' | 'release' | 'raise',
  onFinished: Finished,
): Promise<void> {
  const dir = testdir('routinely-', onFinished);
  // Someone took and released the lock before, so acquiring meets an existing slot; to stall A
  // while it reads a holder's slot, that holder (W, no work) holds it until A has stalled there.
  const busy = step === 'acquire:read-slot';
  const stalledA = join(dir, 'a-stalled');
  const warm = holder(dir, 'W', busy ? 30_000 : 0, onFinished, undefined, false, busy ? stalledA : '-');
  if (busy) await warm.waitFor(/"won"/);
  else expect((await warm.exited).code).toBe(0);
  const a = holder(dir, 'A', HOLD_A, onFinished, { at: step }, phase === 'raise');
  await a.waitFor(/"stalled"/, 15_000);
  writeFileSync(stalledA, '');
  const b = holder(dir, 'B', HOLD_B, onFinished);
  const [ea, eb] = await Promise.all([a.exited, b.exited]);
  const A = events(a);
  const B = events(b);
  await warm.exited;
  const detail = `A: ${a.stdout()} ${a.stderr()}\nB: ${b.stdout()} ${b.stderr()}`;

  // B kept its lock to the end, and released it.
  expect(eb.code, detail).toBe(0);
  expect(
    B.some((e) => e.lost),
    detail,
  ).toBe(false);
  expect(B.find((e) => e.released !== undefined)?.released, detail).toBe(true);

  // Generations only rise, in the order the holders held.
  const genA = Math.max(...A.flatMap((e) => [e.generation ?? 0, e.raised ?? 0]));
  const genB = B.find((e) => e.won)!.generation!;
  const marks = checkMarks(dir);
  expect(['AB', 'BA', 'B', 'A', ''], `work overlapped (${marks.order}); ${detail}`).toContain(marks.order);
  expect(marks.b, detail).toBeGreaterThan(0);
  if (marks.order.startsWith('A')) expect(genB, detail).toBeGreaterThan(genA);
  if (marks.order === 'BA') expect(genA, detail).toBeGreaterThan(genB);

  if (phase === 'hold' || phase === 'raise') {
    // A held the lock when it stalled: it must learn it lost it and stop.
    expect(ea.code, detail).toBe(1);
    expect(A.find((e) => e.lost)?.lost, detail).toMatch(/generation|TTL|heartbeat|paused|belongs/);
    expect(marks.order, detail).toBe('AB');
  } else {
    expect([0, 1], detail).toContain(ea.code);
  }
  // Afterwards the lock is free, nobody's view is left behind, and no temp file stays.
  const status = readLockStatus({ lockDir: join(dir, 'locks'), key: 'exec-run' });
  expect(status.state, detail).toBe('free');
  expect(status.generation, detail).toBeGreaterThanOrEqual(Math.max(genA, genB));
  expect(existsSync(join(dir, 'locks', 'exec-run.lock')), detail).toBe(false);
}

describe('a holder stalled at any step never hurts the next holder (SPEC §4.10)', () => {
  it('the harness covers every step the lease reports', async ({ onTestFinished }) => {
    const dir = testdir('routinely-', onTestFinished);
    expect((await holder(dir, 'W', 0, onTestFinished).exited).code).toBe(0);
    const a = holder(dir, 'A', 900, onTestFinished, undefined, true);
    expect((await a.exited).code).toBe(0);
    const steps = events(a).find((e) => e.steps)!.steps!;
    const known = new Set([
      ...ACQUIRE,
      ...HOLD,
      ...RELEASE,
      ...RAISE,
      'acquire:read-view',
      'beat:heal-view',
      'acquire:move-aside',
    ]);
    expect(steps.filter((s) => !known.has(s))).toEqual([]);
    for (const s of [...ACQUIRE, ...HOLD, ...RELEASE, ...RAISE])
      if (s !== 'acquire:read-slot') expect(steps).toContain(s);
  });

  describe.concurrent('stalled', () => {
    it.for(ACQUIRE)('while acquiring, at %s', { timeout: 40_000 }, (step, { onTestFinished }) =>
      scenario(step, 'acquire', onTestFinished),
    );
    it.for(HOLD)('while holding, at %s', { timeout: 40_000 }, (step, { onTestFinished }) =>
      scenario(step, 'hold', onTestFinished),
    );
    it.for(RELEASE)('while releasing, at %s', { timeout: 40_000 }, (step, { onTestFinished }) =>
      scenario(step, 'release', onTestFinished),
    );
    it.for(RAISE)('while raising its generation, at %s', { timeout: 40_000 }, (step, { onTestFinished }) =>
      scenario(step, 'raise', onTestFinished),
    );
  });
});
