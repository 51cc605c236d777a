// Arrival order (SPEC §4.16, issue 47 item 4; docs/lock.md "Arrival order") with real processes,
// on both backends: waiters take a lock in the order they came; a scheduler's tick queued behind
// its own routine keeps its place ahead of a manual waiter that came later; a waiter SIGKILLed
// or stopped (SIGSTOP) past its TTL holds up no one.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually, runCli, startCli, type Spawned } from '../helpers/cli.js';
import { freshDatabase, pgCluster } from '../helpers/pg-test.js';
import { testProject } from '../helpers/testdir.js';

const cluster = pgCluster();
const backends = cluster ? (['file', 'postgres'] as const) : (['file'] as const);

interface Setup {
  project: string;
  env: Record<string, string>;
}

async function setup(backend: 'file' | 'postgres', config: object = {}): Promise<Setup> {
  if (backend === 'file') return { project: testProject(config), env: {} };
  const url = await freshDatabase(cluster!);
  return {
    project: testProject({ project: 'app', backend: { type: 'postgres' }, ...config }),
    env: { ROUTINELY_DATABASE_URL: url },
  };
}

/** `--lock db`, or none: the exec lock (`lock run`'s fast path). */
const which = (lock: string): string[] => (lock === 'exec' ? [] : ['--lock', lock]);

/** Holds `lock` until the file `go` exists. */
const holder = (s: Setup, lock = 'db'): Spawned =>
  startCli(['lock', 'run', ...which(lock), '--', 'sh', '-c', 'echo holding; while [ ! -e go ]; do sleep 0.05; done'], {
    cwd: s.project,
    env: s.env,
    timeoutMs: 90_000,
  });

/** Waits for `lock`, then appends its tag to `order`, holding the lock a moment. */
const waiter = (s: Setup, tag: string, lock = 'db'): Spawned =>
  startCli(['lock', 'run', ...which(lock), '--if-busy', 'wait', '--', 'sh', '-c', `echo ${tag} >> order; sleep 0.1`], {
    cwd: s.project,
    env: s.env,
    timeoutMs: 90_000,
  });

const order = (s: Setup): string[] =>
  existsSync(join(s.project, 'order')) ? readFileSync(join(s.project, 'order'), 'utf8').trim().split('\n') : [];

describe.each(backends)('waiters in arrival order, %s backend', (backend) => {
  it.each(['db', 'exec'])(
    'four waiters that came one after another take the lock (%s) in that order once it frees',
    { timeout: 90_000 },
    async (lock) => {
      const s = await setup(backend);
      const h = holder(s, lock);
      await h.waitFor(/holding/);
      const waiters: Spawned[] = [];
      for (const tag of ['w1', 'w2', 'w3', 'w4']) {
        const w = waiter(s, tag, lock);
        await w.waitFor(new RegExp(`waiting for the ${lock} lock, held by `));
        waiters.push(w);
      }
      writeFileSync(join(s.project, 'go'), '');
      expect((await h.exited).code).toBe(0);
      for (const w of waiters) expect((await w.exited).code, w.stderr()).toBe(0);
      expect(order(s)).toEqual(['w1', 'w2', 'w3', 'w4']);
    },
  );

  it(
    'a waiter SIGKILLed holds up no one; one stopped (SIGSTOP) holds up the line only until its beat is a TTL old',
    { timeout: 90_000 },
    async () => {
      // (a TTL of 4 s: at 2 s a loaded machine's database answered a heartbeat of the stopped
      // waiter, once it held the lock, too late for it: lock lost, in a fresh-clone run)
      const s = await setup(backend, { lock: { ttlSeconds: 4, refreshSeconds: 1 } });
      const h = holder(s);
      await h.waitFor(/holding/);
      const killed = waiter(s, 'killed');
      await killed.waitFor(/waiting for the db lock/);
      const stopped = waiter(s, 'stopped');
      await stopped.waitFor(/waiting for the db lock/);
      const last = waiter(s, 'last');
      await last.waitFor(/waiting for the db lock/);
      killed.child.kill('SIGKILL');
      await killed.exited;
      stopped.child.kill('SIGSTOP');
      writeFileSync(join(s.project, 'go'), '');
      expect((await h.exited).code).toBe(0);
      // the one after them takes the lock: the dead one's place is gone, the stopped one's passed over
      expect((await last.exited).code, last.stderr()).toBe(0);
      expect(order(s)).toEqual(['last']);
      stopped.child.kill('SIGCONT');
      expect((await stopped.exited).code, stopped.stderr()).toBe(0);
      expect(order(s)).toEqual(['last', 'stopped']);
    },
  );

  it(
    'a newcomer that would not wait is busy while an earlier waiter has its turn, though the lock is free this moment, naming who is first',
    { timeout: 90_000 },
    async () => {
      const s = await setup(backend, { lock: { ttlSeconds: 20, refreshSeconds: 1 } });
      const h = holder(s);
      await h.waitFor(/holding/);
      const w = waiter(s, 'w1');
      await w.waitFor(/waiting for the db lock/);
      // stopped, it cannot take the lock when it frees; its beat is fresh for a TTL yet
      w.child.kill('SIGSTOP');
      writeFileSync(join(s.project, 'go'), '');
      expect((await h.exited).code).toBe(0);
      const busy = await runCli(['lock', 'run', '--lock', 'db', '--', 'true'], { cwd: s.project, env: s.env });
      expect(busy.code, busy.stderr).toBe(75);
      expect(busy.stderr).toMatch(
        new RegExp(
          `^db busy: held by no one this moment, but a waiter that came first takes it next: lock run, pid ${w.pid} on \\S+\n`,
        ),
      );
      const skip = await runCli(['lock', 'run', '--lock', 'db', '--if-busy', 'skip', '--', 'true'], {
        cwd: s.project,
        env: s.env,
      });
      expect([skip.code, skip.stdout]).toEqual([0, 'skipped: db busy\n']);
      w.child.kill('SIGCONT');
      expect((await w.exited).code).toBe(0);
      expect(order(s)).toEqual(['w1']);
      // nobody waits: a newcomer takes it at once
      expect((await runCli(['lock', 'run', '--lock', 'db', '--', 'true'], { cwd: s.project, env: s.env })).code).toBe(
        0,
      );
    },
  );

  it(
    'a tick queued behind its own routine keeps its place ahead of a manual waiter that came later',
    { timeout: 120_000 },
    async () => {
      const s = await setup(backend, {
        routines: [
          {
            id: 'first',
            schedule: '*/30 * * * * *',
            action: 'command',
            run: 'echo first >> order; while [ ! -e go ]; do sleep 0.05; done',
            lock: 'db',
          },
          {
            id: 'second',
            schedule: '*/30 * * * * *',
            action: 'command',
            run: 'echo second >> order; sleep 0.3',
            lock: 'db',
          },
        ],
      });
      const sch = startCli(['scheduler', 'start'], { cwd: s.project, env: s.env, timeoutMs: 110_000 });
      const queued = await sch.waitFor(/\[routine\] queued (first|second): behind (first|second)/, 60_000);
      // came after the queued tick: waits behind it, however quick it is to see the lock free
      const w = waiter(s, 'manual');
      await w.waitFor(/waiting for the db lock/);
      writeFileSync(join(s.project, 'go'), '');
      expect((await w.exited).code, w.stderr()).toBe(0);
      await eventually(
        () => order(s).length === 3,
        30_000,
        'all three ran',
        () => sch.stdout(),
      );
      expect(order(s)).toEqual([queued[2], queued[1], 'manual']);
      expect(sch.stdout()).not.toMatch(/\[routine\] skipped/);
      sch.child.kill('SIGTERM');
      expect((await sch.exited).code).toBe(0);
    },
  );
});
