// Named locks and their slots (SPEC §4.16) with real processes, on both backends: two names
// exclude only their own holders; a 2-slot lock lets two in and turns the third away; a holder
// SIGKILLed gives its slot back at once with its command's group ended; a holder stopped past its
// TTL loses its slot and says `lock lost`; every slot's generation only rises.

import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, eventually, processRuns, runCli, sleep, startCli, type Spawned } from '../helpers/cli.js';
import { freshDatabase, pgCluster } from '../helpers/pg-test.js';
import { overlapping, spansOf } from '../helpers/spans.js';
import { testdir, testProject } from '../helpers/testdir.js';

const cluster = pgCluster();

/** A command that says it holds (its lock and generation), then works until `go` exists. */
const holding = (tag: string): string[] => [
  'sh',
  '-c',
  `echo "holding ${tag} $ROUTINELY_LOCK_NAME $ROUTINELY_LOCK_GENERATION"; while [ ! -e go ]; do sleep 0.05; done`,
];

interface Setup {
  backend: 'file' | 'postgres';
  project: string;
  env: Record<string, string>;
}

async function setup(backend: Setup['backend'], config: object = {}): Promise<Setup> {
  if (backend === 'file')
    return { backend, project: testProject({ locks: { agents: { slots: 2 } }, ...config }), env: {} };
  const url = await freshDatabase(cluster!);
  return {
    backend,
    project: testProject({ project: 'app', backend: { type: 'postgres' }, locks: { agents: { slots: 2 } }, ...config }),
    env: { ROUTINELY_DATABASE_URL: url },
  };
}

/** SIGKILL to a holder and, with a database lease, to its guard (src/exec/death-guard.ts), as a
 * cgroup's kill does: its commands then outlive it until a reclaim on this host ends them, the
 * path these cases are about (killed alone, the guard ends them at once:
 * test/e2e/pg-dead-holder.test.ts). The guard is stopped first and killed once the holder is
 * gone: a guard that died first would be replaced by the holder, and the new one end them. */
async function killWithGuard(holder: Spawned): Promise<void> {
  const guards: number[] = [];
  const children = readFileSync(`/proc/${holder.pid}/task/${holder.pid}/children`, 'utf8').trim().split(/\s+/);
  for (const c of children.filter(Boolean)) {
    let args = '';
    try {
      args = readFileSync(`/proc/${c}/cmdline`, 'utf8');
    } catch {
      continue; // gone
    }
    if (args.includes('routinely-guard')) guards.push(Number(c));
  }
  for (const g of guards) process.kill(g, 'SIGSTOP');
  holder.child.kill('SIGKILL');
  await holder.exited;
  for (const g of guards) process.kill(g, 'SIGKILL');
}

const lockRun = (s: Setup, args: string[], tag: string): Spawned =>
  startCli(['lock', 'run', ...args, '--', ...holding(tag)], { cwd: s.project, env: s.env, timeoutMs: 60_000 });

const backends = cluster ? (['file', 'postgres'] as const) : (['file'] as const);

describe.each(backends)('named locks, %s backend', (backend) => {
  it('two names exclude only their own holders; the exec lock is apart from both', async () => {
    const s = await setup(backend);
    const db = lockRun(s, ['--lock', 'db'], 'db');
    const cache = lockRun(s, ['--lock', 'cache'], 'cache');
    const exec = lockRun(s, [], 'exec');
    // all three at once: each holds its own lock
    for (const [p, tag, name] of [
      [db, 'db', 'db'],
      [cache, 'cache', 'cache'],
      [exec, 'exec', 'exec'],
    ] as const) {
      await p.waitFor(new RegExp(`holding ${tag} ${name} \\d+`));
    }
    // a second holder of db is turned away, naming the holder; of another name it is not
    const busy = await runCli(['lock', 'run', '--lock', 'db', '--', 'true'], { cwd: s.project, env: s.env });
    expect(busy.code, busy.stderr).toBe(75);
    expect(busy.stderr).toMatch(new RegExp(`^db busy: held by pid ${db.pid} on \\S+ \\(lock run\\)`));
    const skip = await runCli(['lock', 'run', '--lock', 'db', '--if-busy', 'skip', '--', 'true'], {
      cwd: s.project,
      env: s.env,
    });
    expect([skip.code, skip.stdout]).toEqual([0, 'skipped: db busy\n']);
    const other = await runCli(['lock', 'run', '--lock', 'queue', '--', 'sh', '-c', 'echo $ROUTINELY_LOCK_NAME'], {
      cwd: s.project,
      env: s.env,
    });
    expect([other.code, other.stdout]).toEqual([0, 'queue\n']);
    // lock status: the exec lock first, then each named lock in use; --json names each
    const status = await runCli(['lock', 'status'], { cwd: s.project, env: s.env });
    expect(status.stdout).toMatch(/^exec-run lock: held\n(.*\n)*cache lock: held\n(.*\n)*db lock: held\n/);
    expect(status.stdout).not.toMatch(/queue lock/); // released: not in use
    // the exec lock's key and the scheduler's are not names of named locks (they would read as
    // the same lock in lock status, and be another)
    for (const [name, why] of [
      ['exec-run', '"exec-run" is the key of the project exec lock: call it "exec" (or name no lock)'],
      ['scheduler', '"scheduler" is the scheduler\'s own lock: choose another name'],
      // the views' word for no lock (the page, /api/routines, /metrics)
      ['none', '"none" means no lock (`"exclusive": false`) in the views: choose another name'],
    ] as const)
      for (const args of [
        ['lock', 'run', '--lock', name, '--', 'true'],
        ['lock', 'status', '--lock', name],
        ['lock', 'break', '--lock', name],
      ])
        expect(await runCli(args, { cwd: s.project, env: s.env })).toMatchObject({
          code: 2,
          stderr: `routinely: --lock ${name}: ${why}\n`,
        });
    const json = JSON.parse((await runCli(['lock', 'status', '--json'], { cwd: s.project, env: s.env })).stdout) as {
      lock: string;
      state: string;
      named: { lock: string; held: number }[];
    };
    expect(json).toMatchObject({ lock: 'exec', state: 'held' });
    expect(json.named.map((n) => [n.lock, n.held])).toEqual([
      ['cache', 1],
      ['db', 1],
    ]);
    writeGo(s);
    for (const p of [db, cache, exec]) expect((await p.exited).code).toBe(0);
  });

  it('a 2-slot lock: three at once, two hold it and the third is busy; a waiter gets the first slot freed', async () => {
    const s = await setup(backend);
    const first = lockRun(s, ['--lock', 'agents'], 'one');
    const second = lockRun(s, ['--lock', 'agents'], 'two');
    await first.waitFor(/holding one agents/);
    await second.waitFor(/holding two agents/);
    const third = await runCli(['lock', 'run', '--lock', 'agents', '--', 'true'], { cwd: s.project, env: s.env });
    expect(third.code).toBe(75);
    expect(third.stderr).toMatch(/^agents busy: held by pid \d+ .*, and pid \d+ .* \(all 2 slots\)\n/);
    const named = JSON.parse(
      (await runCli(['lock', 'status', '--lock', 'agents', '--json'], { cwd: s.project, env: s.env })).stdout,
    ) as {
      slots: number;
      held: number;
      slot_status: { slot: number; state: string; record: { owner: { pid: number } } }[];
    };
    expect(named).toMatchObject({ slots: 2, held: 2 });
    expect(named.slot_status.map((x) => x.record.owner.pid).sort()).toEqual([first.pid, second.pid].sort());
    const text = await runCli(['lock', 'status', '--lock', 'agents'], { cwd: s.project, env: s.env });
    expect(text.stdout).toMatch(/^agents lock: 2 of 2 slots held\n {2}slot 1: held\n(.*\n)* {2}slot 2: held\n/);
    // a waiter: in when one of them lets go
    const waiter = startCli(
      ['lock', 'run', '--lock', 'agents', '--if-busy', 'wait', '--', 'sh', '-c', 'echo in $ROUTINELY_LOCK_NAME'],
      { cwd: s.project, env: s.env, timeoutMs: 60_000 },
    );
    await waiter.waitFor(/waiting for the agents lock, held by .* \(all 2 slots\)/);
    first.child.kill('SIGTERM');
    expect((await waiter.exited).code, waiter.stderr()).toBe(0);
    expect(waiter.stdout()).toBe('in agents\n');
    writeGo(s);
    await second.exited;
  });

  it('slots lowered while a waiter waits: it takes no slot above the new count; raised: it takes the new slot at once', async () => {
    const s = await setup(backend);
    const config = (slots: number): void =>
      writeFileSync(
        join(s.project, 'routinely.json'),
        JSON.stringify({ ...readConfig(s), locks: { agents: { slots } } }),
      );
    const a = lockRun(s, ['--lock', 'agents'], 'a');
    await a.waitFor(/holding a agents/);
    const b = startCli(
      ['lock', 'run', '--lock', 'agents', '--', 'sh', '-c', 'while [ ! -e go-b ]; do sleep 0.05; done'],
      {
        cwd: s.project,
        env: s.env,
        timeoutMs: 60_000,
      },
    );
    await eventually(async () => (await slotsHeld(s)).length === 2, 15_000, 'both slots held');
    // the waiter's command says which slot its process holds
    const w = startCli(
      [
        'lock',
        'run',
        '--lock',
        'agents',
        '--if-busy',
        'wait',
        '--',
        'sh',
        '-c',
        `'${process.execPath}' '${CLI}' lock status --lock agents --json > w-status.json`,
      ],
      { cwd: s.project, env: s.env, timeoutMs: 60_000 },
    );
    await w.waitFor(/waiting for the agents lock/);
    config(1);
    writeFileSync(join(s.project, 'go-b'), '');
    expect((await b.exited).code).toBe(0);
    // slot 2 is free now, above the count: the waiter had this second to take it (it did, with
    // the count it started with), and must wait for slot 1
    await sleep(1000);
    writeGo(s);
    expect((await a.exited).code).toBe(0);
    expect((await w.exited).code, w.stderr()).toBe(0);
    const seen = JSON.parse(readFileSync(join(s.project, 'w-status.json'), 'utf8')) as {
      slot_status: { slot: number; state: string; record: { owner: { pid: number } } | null }[];
    };
    expect(seen.slot_status.find((x) => x.record?.owner.pid === w.pid)?.slot).toBe(1);
    // raised while one waits: it takes the new slot while slot 1's holder goes on
    rmSync(join(s.project, 'go'));
    const c = lockRun(s, ['--lock', 'agents'], 'c');
    await c.waitFor(/holding c agents/);
    const v = startCli(['lock', 'run', '--lock', 'agents', '--if-busy', 'wait', '--', 'echo', 'v in'], {
      cwd: s.project,
      env: s.env,
      timeoutMs: 60_000,
    });
    await v.waitFor(/waiting for the agents lock/);
    config(2);
    expect((await v.exited).code, v.stderr()).toBe(0);
    expect(v.stdout()).toBe('v in\n');
    expect(c.child.exitCode, 'slot 1 is still held').toBeNull();
    writeGo(s);
    await c.exited;
  });

  it('a routine on a 1-slot lock, its slots raised while a second run of it waits: that run does not go beside the first (it took slot 2)', async () => {
    const s = await setup(backend, {
      locks: { db: { slots: 1 } },
      routines: [
        { id: 'a', schedule: '0 0 1 1 *', action: 'command', run: 'echo start >> starts; sleep 3', lock: 'db' },
      ],
    });
    const first = startCli(['routine', 'run', 'a'], { cwd: s.project, env: s.env, timeoutMs: 60_000 });
    await first.waitFor(/started a/);
    const second = startCli(['routine', 'run', 'a', '--if-busy', 'wait'], {
      cwd: s.project,
      env: s.env,
      timeoutMs: 60_000,
    });
    await second.waitFor(/waiting for the db lock/);
    writeFileSync(join(s.project, 'routinely.json'), JSON.stringify({ ...readConfig(s), locks: { db: { slots: 2 } } }));
    await second.exited;
    expect(second.stdout() + second.stderr()).toMatch(/a: previous run still running/);
    expect((await first.exited).code).toBe(0);
    expect(readFileSync(join(s.project, 'starts'), 'utf8')).toBe('start\n');
  });

  it('a newcomer turned away while a waiter came first names the holder, then the waiter (not "held by no one")', async () => {
    const s = await setup(backend);
    const holder = lockRun(s, ['--lock', 'db'], 'h');
    await holder.waitFor(/holding h db/);
    const waiter = startCli(['lock', 'run', '--lock', 'db', '--if-busy', 'wait', '--', 'true'], {
      cwd: s.project,
      env: s.env,
      timeoutMs: 60_000,
    });
    await waiter.waitFor(/waiting for the db lock/);
    const busy = await runCli(['lock', 'run', '--lock', 'db', '--', 'true'], { cwd: s.project, env: s.env });
    expect(busy.code).toBe(75);
    expect(busy.stderr).toMatch(
      new RegExp(
        `^db busy: held by pid ${holder.pid} on \\S+ \\(lock run\\), heartbeat \\d+s ago; then a waiter that came first takes it next: lock run, pid ${waiter.pid} on `,
      ),
    );
    writeGo(s);
    expect((await waiter.exited).code).toBe(0);
    await holder.exited;
  });

  it("a slot holder SIGKILLed: its slot is taken at once by the next, its command's group ended; generations only rise", async () => {
    const s = await setup(backend, { locks: { agents: { slots: 2 } }, lock: { ttlSeconds: 30 } });
    const keep = lockRun(s, ['--lock', 'agents'], 'keep');
    const doomed = lockRun(s, ['--lock', 'agents'], 'doomed');
    await keep.waitFor(/holding keep/);
    const genBefore = Number((await doomed.waitFor(/holding doomed agents (\d+)/))[1]);
    const status = JSON.parse(
      (await runCli(['lock', 'status', '--lock', 'agents', '--json'], { cwd: s.project, env: s.env })).stdout,
    ) as { slot_status: { slot: number; record: { owner: { pid: number; children?: { pid: number }[] } } }[] };
    const slot = status.slot_status.find((x) => x.record.owner.pid === doomed.pid)!;
    const orphan = slot.record.owner.children?.[0]?.pid;
    expect(orphan, "the command's group is recorded").toBeGreaterThan(1);
    await killWithGuard(doomed);
    expect(processRuns(orphan!), 'the orphan outlives its holder until a taker ends it').toBe(true);
    // the next taker gets the dead holder's slot (not the one `keep` holds) at once
    const next = await runCli(
      ['lock', 'run', '--lock', 'agents', '--', 'sh', '-c', 'echo "gen $ROUTINELY_LOCK_GENERATION"'],
      { cwd: s.project, env: s.env },
    );
    expect(next.code, next.stderr).toBe(0);
    const genAfter = Number(/gen (\d+)/.exec(next.stdout)![1]);
    expect(genAfter, "the slot's generation rose").toBeGreaterThan(genBefore);
    await eventually(() => !processRuns(orphan!), 10_000, "the dead holder's command ended");
    expect(keep.child.exitCode, "the other slot's holder goes on").toBeNull();
    writeGo(s);
    expect((await keep.exited).code).toBe(0);
  });

  it('a slot holder stopped (SIGSTOP) past its TTL: its slot is taken, and resumed it stops with `lock lost`', async () => {
    const s = await setup(backend, { locks: { agents: { slots: 1 } }, lock: { ttlSeconds: 2, refreshSeconds: 0.5 } });
    const stalled = lockRun(s, ['--lock', 'agents'], 'stalled');
    const gen = Number((await stalled.waitFor(/holding stalled agents (\d+)/))[1]);
    stalled.child.kill('SIGSTOP');
    try {
      const taker = startCli(
        [
          'lock',
          'run',
          '--lock',
          'agents',
          '--if-busy',
          'wait',
          '--wait-timeout',
          '60',
          '--',
          'sh',
          '-c',
          'echo "gen $ROUTINELY_LOCK_GENERATION"',
        ],
        { cwd: s.project, env: s.env, timeoutMs: 90_000 },
      );
      expect((await taker.exited).code, taker.stderr()).toBe(0);
      expect(Number(/gen (\d+)/.exec(taker.stdout())![1])).toBeGreaterThan(gen);
    } finally {
      stalled.child.kill('SIGCONT');
    }
    const { code } = await stalled.exited;
    expect(code).toBe(1);
    expect(stalled.stderr()).toMatch(/lock lost/);
  });

  it('lock break --lock: a stale slot only, each slot said', async () => {
    const s = await setup(backend);
    const holder = lockRun(s, ['--lock', 'agents'], 'h');
    await holder.waitFor(/holding h/);
    const refused = await runCli(['lock', 'break', '--lock', 'agents'], { cwd: s.project, env: s.env });
    expect(refused.code).toBe(75);
    expect(refused.stderr).toMatch(/not breaking the agents \(slot \d\) lock: it is held by pid \d+/);
    expect(refused.stdout).toMatch(/agents \(slot \d\) lock: free; nothing to break/);
    writeGo(s);
    await holder.exited;
  });

  it.each(['lock break --lock', 'a scheduler started', "a running scheduler's reload"] as const)(
    "slots lowered while the top one is held, then its holder SIGKILLed: lock status --lock still shows that slot, stale, and %s reclaims it, ending its command's group",
    async (reclaimer) => {
      const s = await setup(backend, { locks: { agents: { slots: 2 } }, lock: { ttlSeconds: 30 } });
      const keep = lockRun(s, ['--lock', 'agents'], 'keep');
      await keep.waitFor(/holding keep/);
      const doomed = lockRun(s, ['--lock', 'agents'], 'doomed');
      await doomed.waitFor(/holding doomed/);
      // already running when the config changes (it reloads a config file that changed)
      const running =
        reclaimer === "a running scheduler's reload"
          ? startCli(['scheduler', 'start'], { cwd: s.project, env: s.env, timeoutMs: 60_000 })
          : null;
      await running?.waitFor(/\[scheduler\] started/);
      type Slots = {
        slots: number;
        slot_status: {
          slot: number;
          state: string;
          record: { owner: { pid: number; children?: { pid: number }[] } };
        }[];
      };
      const statusOf = async (): Promise<Slots> =>
        JSON.parse(
          (await runCli(['lock', 'status', '--lock', 'agents', '--json'], { cwd: s.project, env: s.env })).stdout,
        ) as Slots;
      const slot = (await statusOf()).slot_status.find((x) => x.record.owner.pid === doomed.pid)!;
      expect(slot.slot).toBe(2);
      const orphan = slot.record.owner.children?.[0]?.pid;
      expect(orphan, "the command's group is recorded").toBeGreaterThan(1);
      // the config now has one slot: slot 2's holder keeps it until it ends, and dies
      const config = JSON.parse(readFileSync(join(s.project, 'routinely.json'), 'utf8')) as {
        locks: { agents: { slots: number } };
      };
      config.locks.agents.slots = 1;
      // (the running scheduler reloads the moment the file changes: its holder dies first)
      if (!running) writeFileSync(join(s.project, 'routinely.json'), JSON.stringify(config));
      await killWithGuard(doomed);
      expect(processRuns(orphan!), 'the orphan outlives its holder until a reclaim').toBe(true);
      if (running) {
        writeFileSync(join(s.project, 'routinely.json'), JSON.stringify(config));
        await running.waitFor(/\[scheduler\] reloaded config/);
      }
      if (!running) {
        const seen = await statusOf();
        expect(seen).toMatchObject({ slots: 2, configured_slots: 1 });
        const text = await runCli(['lock', 'status', '--lock', 'agents'], { cwd: s.project, env: s.env });
        expect(text.stdout).toMatch(/^agents lock: 1 of 2 slots held\n {2}\(the config has 1 slot: /);
        expect(seen.slot_status.map((x) => x.state)).toEqual(['held', 'stale']);
      }
      if (reclaimer === 'lock break --lock') {
        const broken = await runCli(['lock', 'break', '--lock', 'agents'], { cwd: s.project, env: s.env });
        expect(broken.stdout).toMatch(/broke the stale agents \(slot 2\) lock/);
        expect(broken.stdout).toMatch(/ended 1 orphaned process group/);
        // slot 1's holder is alive: not broken (75), and said
        expect(broken.code).toBe(75);
      } else {
        const scheduler =
          running ?? startCli(['scheduler', 'start'], { cwd: s.project, env: s.env, timeoutMs: 60_000 });
        await scheduler.waitFor(
          /lock agents: slot 2, above its 1 slot, reclaimed from a stale holder \(.*\); ended 1 orphaned process group/,
        );
        scheduler.child.kill('SIGTERM');
        await scheduler.exited;
      }
      expect(processRuns(orphan!), "the dead holder's command ended").toBe(false);
      const after = await statusOf();
      expect(after.slot_status.map((x) => x.state)).toEqual(['held']);
      expect(after).not.toHaveProperty('configured_slots');
      expect(keep.child.exitCode, "slot 1's holder goes on").toBeNull();
      writeGo(s);
      expect((await keep.exited).code).toBe(0);
    },
  );
});

/** The config as the test wrote it. */
function readConfig(s: Setup): object {
  return JSON.parse(readFileSync(join(s.project, 'routinely.json'), 'utf8')) as object;
}

/** The slots of agents held now. */
async function slotsHeld(s: Setup): Promise<number[]> {
  const st = JSON.parse(
    (await runCli(['lock', 'status', '--lock', 'agents', '--json'], { cwd: s.project, env: s.env })).stdout,
  ) as { slot_status: { slot: number; state: string }[] };
  return st.slot_status.filter((x) => x.state === 'held').map((x) => x.slot);
}

/** Lets the holders' commands finish (they run in the project folder). */
function writeGo(s: Setup): void {
  writeFileSync(join(s.project, 'go'), '');
}

describe('routines on named locks under one scheduler (SPEC §4.16, §6)', () => {
  it('every slot of a 2-slot lock held from outside: a tick is a busy skip naming both holders, and so does routine run', async () => {
    const project = testProject({
      locks: { agents: { slots: 2 } },
      routines: [{ id: 'r', schedule: '* * * * * *', action: 'command', run: 'true', lock: 'agents' }],
    });
    const s: Setup = { backend: 'file', project, env: {} };
    const one = lockRun(s, ['--lock', 'agents'], 'one');
    const two = lockRun(s, ['--lock', 'agents'], 'two');
    await one.waitFor(/holding one/);
    await two.waitFor(/holding two/);
    const manual = await runCli(['routine', 'run', 'r'], { cwd: project });
    expect(manual.code).toBe(75);
    expect(manual.stderr).toMatch(
      new RegExp(
        `^agents busy: held by pid (${one.pid}|${two.pid}) .*, and pid (${one.pid}|${two.pid}) .* \\(all 2 slots\\)\n`,
      ),
    );
    const sched = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 60_000 });
    await sched.waitFor(
      /\[routine\] skipped r: agents busy \(held by lock run since \d\d:\d\d:\d\d, lock run since \d\d:\d\d:\d\d \(all 2 slots\)\)/,
      15_000,
    );
    sched.child.kill('SIGTERM');
    await sched.exited;
    writeGo(s);
    expect([(await one.exited).code, (await two.exited).code]).toEqual([0, 0]);
  });

  it('slots raised by a reload while two ticks are queued on the lock: one takes the new slot at once, the other once the holder ends, and the scheduler stays responsive (it spun, starved its heartbeat and lost ticks)', async () => {
    const config = (slots: number) => ({
      locks: { ag: { slots } },
      routines: ['r1', 'r2', 'r3'].map((id) => ({
        id,
        schedule: '*/10 * * * * *',
        action: 'command',
        run: 'sleep 4',
        lock: 'ag',
      })),
    });
    const project = testProject(config(1));
    const sched = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], { cwd: project, timeoutMs: 90_000 });
    const base = (await sched.waitFor(/\[http\] listening on (http:\/\/\S+)/, 30_000))[1]!;
    const first = (await sched.waitFor(/\[routine\] started (r\d)/, 30_000))[1]!;
    await sched.waitFor(/\[routine\] queued r\d: behind r\d\n[^]*\[routine\] queued r\d: behind /, 5_000);
    writeFileSync(join(project, 'routinely.json'), JSON.stringify(config(2)));
    await sched.waitFor(/\[scheduler\] reloaded config/, 10_000);
    // the slot added: one queued tick takes it at once, while the first holder still runs
    await eventually(
      () => (sched.stdout().match(/\[routine\] started r\d/g) ?? []).length >= 2,
      10_000,
      'a queued tick to take the new slot',
      () => sched.stdout(),
    );
    expect(sched.stdout()).not.toMatch(new RegExp(`succeeded ${first} `));
    // the holder ends: the other queued tick starts, and both end
    await sched.waitFor(new RegExp(`succeeded ${first} `), 20_000);
    await eventually(
      () => (sched.stdout().match(/\[routine\] succeeded r\d /g) ?? []).length >= 3,
      20_000,
      'the two queued ticks to run',
      () => sched.stdout(),
    );
    expect((await fetch(`${base}healthz`, { signal: AbortSignal.timeout(5_000) })).status).toBe(200);
    sched.child.kill('SIGTERM');
    expect((await sched.exited).code, sched.stdout()).toBe(0);
    expect(sched.stdout()).not.toMatch(/lock lost/);
    const history = async (id: string) =>
      JSON.parse((await runCli(['routine', 'history', id, '--json'], { cwd: project })).stdout) as { result: string }[];
    for (const id of ['r1', 'r2', 'r3'])
      expect(
        (await history(id)).map((h) => h.result),
        id,
      ).toContain('success');
  });

  it('a routine on db and one on cache run side by side; two on db take turns; a 2-slot lock runs two at once; a db held from outside is a busy skip named db', async () => {
    const marks = 'marks';
    const work = (id: string): string =>
      `echo "${id} start $(date +%s%3N)" >> ${marks}; sleep 0.6; echo "${id} end $(date +%s%3N)" >> ${marks}`;
    const routine = (id: string, lock: string) => ({
      id,
      schedule: '*/2 * * * * *',
      action: 'command',
      run: work(id),
      lock,
    });
    const project = testProject({
      locks: { pool: { slots: 2 } },
      routines: [
        routine('db1', 'db'),
        routine('db2', 'db'),
        routine('cache', 'cache'),
        routine('p1', 'pool'),
        routine('p2', 'pool'),
        routine('p3', 'pool'),
      ],
    });
    const s = startCli(['scheduler', 'start'], { cwd: project, timeoutMs: 90_000 });
    await s.waitFor(/\[scheduler\] started \(6 routines\)/);
    const file = join(project, marks);
    await eventually(
      () => (spansOf(file).get('db2') ?? []).filter((x) => x.e < Infinity).length >= 3,
      30_000,
      'three turns of db2',
      () => s.stdout(),
    );
    const sp = spansOf(file);
    // different locks: side by side; one lock: one at a time; two slots: two at once, never three
    expect(overlapping(sp.get('db1')!, sp.get('cache')!), 'db1 and cache side by side').toBeGreaterThan(0);
    expect(overlapping(sp.get('db1')!, sp.get('db2')!), 'db1 and db2 never at once').toBe(0);
    const pool = ['p1', 'p2', 'p3'].flatMap((id) => sp.get(id)!.map((x) => ({ ...x, id })));
    const most = Math.max(...pool.map((x) => pool.filter((y) => y.s <= x.s && x.s < y.e).length));
    expect(most, 'the pool lock: two at once at most').toBe(2);
    expect(
      pool.some((x) => pool.some((y) => y !== x && x.s < y.e && y.s < x.e)),
      'the pool lock: two at once',
    ).toBe(true);
    expect(s.stdout()).toMatch(/\[routine\] queued db2: behind db1/);
    expect(s.stdout()).not.toMatch(/busy/);
    // db held by `lock run --lock db`: the db routines skip, named; the others go on (the holder
    // waits its turn: at a tick db1 and db2 queue for db one behind the other, and a newcomer
    // that would not wait is busy then, by design)
    const holder = startCli(
      ['lock', 'run', '--lock', 'db', '--if-busy', 'wait', '--', 'sh', '-c', 'echo holding; sleep 4'],
      {
        cwd: project,
        timeoutMs: 60_000,
      },
    );
    await holder.waitFor(/holding/);
    await s.waitFor(/\[routine\] skipped db1: db busy \(held by lock run since \d\d:\d\d:\d\d\)/, 15_000);
    const list = JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project })).stdout) as {
      id: string;
      lock: string;
      last_result: string;
      last_reason: string | null;
    }[];
    expect(list.find((r) => r.id === 'db1')).toMatchObject({
      lock: 'db',
      last_result: 'skipped',
      last_reason: 'db busy',
    });
    expect(list.find((r) => r.id === 'cache')).toMatchObject({ lock: 'cache' });
    expect((await holder.exited).code).toBe(0);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
  });
});

(cluster ? describe : describe.skip)('one project, one queue, across schedulers (SPEC §6; PostgreSQL)', () => {
  it(
    'two schedulers, four exclusive routines due together: every tick runs, one at a time, none skipped as busy',
    { timeout: 120_000 },
    async () => {
      const url = await freshDatabase(cluster!);
      const marks = join(testdir('routinely-marks-'), 'marks');
      const routine = (id: string) => ({
        id,
        schedule: '*/4 * * * * *',
        action: 'command',
        run: `echo "${id} start $(date +%s%3N)" >> ${marks}; sleep 0.3; echo "${id} end $(date +%s%3N)" >> ${marks}`,
      });
      // two hosts' checkouts of one project: each scheduler fires the routines of its own config,
      // so every tick, two routines of each meet the exec lock held by the other's
      const checkouts = [
        ['r1', 'r2'],
        ['r3', 'r4'],
      ].map((ids) => testProject({ project: 'app', backend: { type: 'postgres' }, routines: ids.map(routine) }));
      const env = { ROUTINELY_DATABASE_URL: url };
      const schedulers = checkouts.map((cwd, i) =>
        startCli(['scheduler', 'start'], { cwd, env: { ...env, ROUTINELY_HOST_ID: `h${i + 1}` }, timeoutMs: 110_000 }),
      );
      for (const s of schedulers) await s.waitFor(/\[scheduler\] started/, 60_000);
      const ids = ['r1', 'r2', 'r3', 'r4'];
      const done = (): number =>
        Math.min(...ids.map((id) => (spansOf(marks).get(id) ?? []).filter((x) => x.e < Infinity).length));
      await eventually(
        () => done() >= 4,
        60_000,
        'four ticks of every routine',
        () => schedulers.map((s) => s.stdout()).join('\n--\n'),
      );
      for (const s of schedulers) s.child.kill('SIGTERM');
      for (const s of schedulers) expect((await s.exited).code, s.stderr()).toBe(0);
      const said = schedulers.map((s) => s.stdout()).join('\n');
      expect(said).not.toMatch(/skipped r\d: exec busy/);
      // the other scheduler's tick was met (holding the lock, or queued ahead in its line), and waited for
      expect(said).toMatch(
        /\[routine\] waiting r\d: exec busy \(held by (routine r\d |pid \d+ on h\d \(routine r\d, run r-\S+\), heartbeat \d+s ago; then a waiter that came first takes it next: routine r\d, pid \d+ on h\d\)|no one this moment, but a waiter that came first takes it next: routine r\d, pid \d+ on h\d)/,
      );
      // one at a time under the exec lock, across both hosts
      const all = ids.flatMap((id) =>
        spansOf(marks)
          .get(id)!
          .filter((x) => x.e < Infinity),
      );
      for (const x of all) expect(all.filter((y) => y !== x && x.s < y.e && y.s < x.e)).toEqual([]);
      // every tick of each routine recorded once, and run (none skipped)
      for (const cwd of checkouts) {
        const rows = JSON.parse((await runCli(['routine', 'list', '--json'], { cwd, env })).stdout) as {
          id: string;
          counts: { success: number; failure: number; skipped: number };
        }[];
        for (const r of rows) expect(r.counts, r.id).toMatchObject({ failure: 0, skipped: 0 });
      }
    },
  );
});
