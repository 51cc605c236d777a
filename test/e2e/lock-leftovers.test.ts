// Leftovers (SPEC §4.11), the generation after a damaged or lost counter (§4.12), and work that
// dies with its lease (§4.14), with the built CLI and real processes.

import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readChecksummed } from '../../src/checksum.js';
import { describe, expect, it } from 'vitest';
import { eventually, processRuns, runCli, startCli, startCliWithFault } from '../helpers/cli.js';
import { testProject } from '../helpers/testdir.js';

/** Pids of processes whose command line contains `needle`. */
function pgrep(needle: string): number[] {
  const r = spawnSync('pgrep', ['-f', needle], { encoding: 'utf8' });
  return r.stdout
    .trim()
    .split('\n')
    .filter(Boolean)
    .map(Number)
    .filter((p) => p !== process.pid);
}

let sleeps = 0;
/** `sleep 30.<unique>`: a command line nothing else on the machine has. */
const uniqueSleep = (): string => `sleep 30.${process.pid}${++sleeps}${Date.now() % 100000}`;

const gen = async (project: string): Promise<number> => {
  const r = await runCli(['lock', 'run', '--', 'sh', '-c', 'echo $ROUTINELY_LOCK_GENERATION'], { cwd: project });
  expect(r.code, r.stderr).toBe(0);
  return Number(r.stdout.trim());
};

describe('leftovers of the command end before the lock is released (SPEC §4.11)', () => {
  it('job-control children in groups of their own (bash set -m) are ended too: lock run, routine run, an exec task (issue 49, item 1)', async () => {
    const tags = [uniqueSleep(), uniqueSleep(), uniqueSleep()];
    const escape = (tag: string): string => `bash -c 'set -m; ${tag} & ${tag}1 & exit 0'`;
    const project = testProject({
      routines: [{ id: 'jobs', schedule: '0 0 1 1 *', action: 'command', run: escape(tags[1]!) }],
      exec: { tasks: [{ id: 'jobs', run: escape(tags[2]!) }] },
    });
    const held = await runCli(['lock', 'run', '--', 'bash', '-c', `set -m; ${tags[0]} & ${tags[0]}1 & exit 0`], {
      cwd: project,
    });
    expect(held.code, held.stderr).toBe(0);
    expect(held.stderr).toMatch(/ended 2 leftover processes of the command's group/);
    const fired = await runCli(['routine', 'run', 'jobs'], { cwd: project });
    expect(fired.code, fired.stderr).toBe(0);
    const ran = await runCli(['exec', 'run'], { cwd: project });
    expect(ran.code, ran.stderr).toBe(0);
    for (const tag of tags) expect(pgrep(tag), tag).toEqual([]);
    expect(readFileSync(join(project, '.routinely', 'logs', 'jobs.log'), 'utf8')).toMatch(/ended 2 leftover processes/);
  });

  it('exec run, 4 at a time: the job-control children of every task are ended, with the other tasks (sessions of their own, started since) between them', async () => {
    const tags = [uniqueSleep(), uniqueSleep(), uniqueSleep(), uniqueSleep()];
    const tasks = tags.flatMap((tag, i) => [
      { id: `jobs${i}`, run: `bash -c 'set -m; ${tag} & exit 0'` },
      { id: `plain${i}`, run: 'true' },
    ]);
    const project = testProject({ exec: { parallel: 4, tasks } });
    const ran = await runCli(['exec', 'run'], { cwd: project });
    expect(ran.code, ran.stderr).toBe(0);
    for (const tag of tags) expect(pgrep(tag), tag).toEqual([]);
    const runs = join(project, '.routinely', 'exec', 'runs');
    const [run] = readdirSync(runs);
    for (let i = 0; i < tags.length; i++)
      expect(readFileSync(join(runs, run!, `jobs${i}.log`), 'utf8'), `jobs${i}`).toMatch(
        /ended 1 leftover process of the task's group/,
      );
  });

  it('lock run: a background job is ended and reported; the next holder never runs beside it', async () => {
    const project = testProject();
    const tag = uniqueSleep();
    const bg = await runCli(['lock', 'run', '--', 'sh', '-c', `${tag} & exit 0`], { cwd: project });
    expect(bg.code).toBe(0);
    expect(bg.stderr).toMatch(/ended 1 leftover process of the command's group/);
    expect(pgrep(tag)).toEqual([]);
    // `[s]leep` so that pgrep does not find its own shell
    const next = await runCli(
      ['lock', 'run', '--if-busy', 'fail', '--', 'sh', '-c', `pgrep -f '[s]${tag.slice(1)}' || echo alone`],
      { cwd: project },
    );
    expect(next).toMatchObject({ code: 0, stdout: 'alone\n' });
  });

  it("a SIGKILLed holder's job-control group is ended at the takeover, also one whose environment was cleared (env -i: no marker); the next holder never runs beside it", async () => {
    const project = testProject();
    const [job, fg] = [uniqueSleep(), uniqueSleep()];
    // (anchored: lock run's own command line holds both)
    const running = (): number[] => [...pgrep(`^/bin/${job}`), ...pgrep(`^${fg}`)];
    const holder = startCli(['lock', 'run', '--', 'bash', '-c', `set -m; env -i /bin/${job} & ${fg}`], {
      cwd: project,
    });
    await eventually(() => running().length === 2, 10_000, 'both sleeps running');
    holder.child.kill('SIGKILL');
    await holder.exited;
    const next = await runCli(
      [
        'lock',
        'run',
        '--if-busy',
        'fail',
        '--',
        'sh',
        '-c',
        `pgrep -f '^/bin/${job}' || pgrep -f '^${fg}' || echo alone`,
      ],
      { cwd: project },
    );
    for (const p of running()) process.kill(p, 'SIGKILL');
    expect(next).toMatchObject({ code: 0, stdout: 'alone\n' });
  });

  it('a process that left the group with setsid is not ended (documented)', async () => {
    const project = testProject();
    const tag = uniqueSleep();
    // the command ends only once the process has left the group (setsid ran, it wrote its pid),
    // so the leftover sweep cannot meet it while it is still a member
    const left = join(project, 'left');
    const r = await runCli(
      [
        'lock',
        'run',
        '--',
        'sh',
        '-c',
        `setsid sh -c 'echo $$ > ${left}; exec ${tag}' </dev/null >/dev/null 2>&1 & while [ ! -s ${left} ]; do sleep 0.01; done; exit 0`,
      ],
      { cwd: project },
    );
    expect(r.code).toBe(0);
    await eventually(() => pgrep(tag).length === 1, 5000, 'setsid process running');
    for (const p of pgrep(tag)) process.kill(p, 'SIGKILL');
  });

  it('a command routine fired by the scheduler: its background process is ended when the fire ends', async () => {
    const tag = uniqueSleep();
    const project = testProject({
      routines: [{ id: 'bg', schedule: '* * * * * *', action: 'command', run: `${tag} & echo started` }],
    });
    const s = startCli(['scheduler', 'start'], { cwd: project });
    await s.waitFor(/\[routine\] succeeded bg/, 15_000);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
    expect(pgrep(tag)).toEqual([]);
    const log = readFileSync(join(project, '.routinely', 'logs', 'bg.log'), 'utf8');
    expect(log).toMatch(/ended 1 leftover process of the command's group/);
  });
});

describe('the generation is never reissued (SPEC §4.12)', () => {
  it.each([
    ['garbled', 'garbage\n'],
    ['truncated', '00000000000'],
    ['zero-length', ''],
  ])(
    'a %s newest slot (the record that carries the generation; there is no counter file) changes nothing: the next generation is above every earlier one',
    async (_name, content) => {
      const project = testProject();
      for (let i = 1; i <= 6; i++) expect(await gen(project)).toBe(i);
      const locks = join(project, '.routinely', 'locks');
      rmSync(join(locks, 'exec-run.free.6'));
      writeFileSync(join(locks, 'exec-run.slot.6'), content);
      expect(await gen(project)).toBe(7);
    },
  );

  it('with every slot lost, the kept stale locks give the floor', async () => {
    const project = testProject();
    const locks = join(project, '.routinely', 'locks');
    // a holder killed with SIGKILL leaves its record; the next one reclaims it and keeps it
    const h = startCli(['lock', 'run', '--', 'sh', '-c', 'echo up; sleep 30'], { cwd: project });
    await h.waitFor(/up/);
    for (let i = 0; i < 3; i++) await runCli(['lock', 'run', '--if-busy', 'skip', '--', 'true'], { cwd: project });
    h.child.kill('SIGKILL');
    await h.exited;
    expect(await gen(project)).toBe(2);
    expect(readdirSync(locks).some((n) => n.startsWith('exec-run.lock.stale.'))).toBe(true);
    for (const n of readdirSync(locks)) if (!n.startsWith('exec-run.lock.stale.')) unlinkSync(join(locks, n));
    expect(await gen(project)).toBeGreaterThan(1);
  });

  it('with the whole lock folder lost, exec state gives the floor', async () => {
    const project = testProject({ exec: { tasks: [{ id: 'a', run: 'true' }] } });
    for (let i = 0; i < 4; i++) await gen(project);
    expect((await runCli(['exec', 'run'], { cwd: project })).code).toBe(0);
    const run = JSON.parse((await runCli(['exec', 'runs', '--json'], { cwd: project })).stdout) as {
      generation: number;
    }[];
    const highest = Math.max(...run.map((r) => r.generation));
    expect(highest).toBe(5);
    rmSync(join(project, '.routinely', 'locks'), { recursive: true });
    expect(await gen(project)).toBeGreaterThan(highest);
  });
});

describe('the work dies with the lease (SPEC §4.14)', () => {
  const haveStrace = spawnSync('strace', ['-V']).status === 0;
  it.skipIf(!haveStrace && process.env.CI !== 'true')(
    'a command that ignores SIGTERM is SIGKILLed before its lease can expire for anyone else',
    async () => {
      const project = testProject({ lock: { ttlSeconds: 2, refreshSeconds: 0.5 } });
      const marks = join(project, 'marks');
      const work = (name: string) => [
        'bash',
        '-c',
        `trap '' TERM; echo up; while :; do echo "${name} $EPOCHREALTIME" >> '${marks}'; sleep 0.02; done`,
      ];
      // Every heartbeat of A fails from its 3rd in-place write on (as on a failing disk): A cannot
      // renew. (A full disk no longer stops a heartbeat: it rewrites the same block, SPEC §4.15.)
      const a = startCliWithFault({ cwd: project, trace: 'pwrite64', inject: 'pwrite64:error=EIO:when=3+' }, [
        'lock',
        'run',
        '--',
        ...work('A'),
      ]);
      let aErr = '';
      a.stderr!.on('data', (d: Buffer) => (aErr += d.toString()));
      const aExit = new Promise<number | null>((res) => a.on('exit', (c) => res(c)));
      await eventually(() => existsSync(marks), 10_000, 'A working');
      // A's lease as everyone else sees it: the expiry of its last heartbeat that got written.
      const locks = join(project, '.routinely', 'locks');
      let expiredA = 0;
      const watchBeats = setInterval(() => {
        for (const n of readdirSync(locks).filter((x) => x.startsWith('exec-run.beat.'))) {
          try {
            const beat = JSON.parse(readChecksummed(readFileSync(join(locks, n), 'utf8')) ?? 'null') as {
              expires_at: number;
            };
            expiredA = Math.max(expiredA, beat.expires_at);
          } catch {
            // replaced while we read it
          }
        }
      }, 10);
      // B waits for the lock; it gets it only once A's lease has expired.
      const b = startCli(
        [
          'lock',
          'run',
          '--if-busy',
          'wait',
          '--wait-timeout',
          '30',
          '--',
          'bash',
          '-c',
          `echo "B $EPOCHREALTIME" >> '${marks}'; echo "B $EPOCHREALTIME" >> '${marks}'`,
        ],
        { cwd: project },
      );
      expect((await b.exited).code).toBe(0);
      expect(await aExit).toBe(1);
      clearInterval(watchBeats);
      expect(aErr).toMatch(
        /lock lost: no successful heartbeat for [\d.]+s.*; its heartbeat could not be written to \S+exec-run\.beat\.[0-9a-f]{32} \(EIO: i\/o error/,
      );
      const lines = readFileSync(marks, 'utf8')
        .trim()
        .split('\n')
        .map((l) => l.split(' '));
      const lastA = Math.max(...lines.filter((l) => l[0] === 'A').map((l) => Number(l[1])));
      const firstB = Math.min(...lines.filter((l) => l[0] === 'B').map((l) => Number(l[1])));
      expect(lastA, `A still worked ${(lastA - firstB).toFixed(3)}s after B started`).toBeLessThan(firstB);
      expect(expiredA).toBeGreaterThan(0);
      expect(lastA, `A still worked ${(lastA - expiredA).toFixed(3)}s after its lease expired`).toBeLessThan(expiredA);
      await eventually(() => !processRuns(a.pid!), 5000, 'A gone');
    },
  );
});

describe('also (issue 8)', () => {
  it('a state folder on /proc is refused at once with exit 2, never a spinning mkdir', async () => {
    const project = testProject();
    const r = await runCli(['lock', 'run', '--', 'true'], {
      cwd: project,
      env: { ROUTINELY_STATE_DIR: '/proc/nope' },
      timeoutMs: 10_000,
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/\/proc\/nope(\/locks)? is on \/proc, a kernel pseudo file system/);
  });
});
