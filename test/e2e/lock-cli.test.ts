// `routinely lock …` end to end: the built CLI, real processes, real signals.

import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseLockRecord, serializeLockRecord, type LockRecord } from '../../src/lock/record.js';
import { systemProbe } from '../../src/process/identity.js';
import { readLockStatus } from '../../src/file-lock/status.js';
import { CLI, childEnv, eventually, processRuns, runCli, sleep, startCli } from '../helpers/cli.js';
import { testdir, testProject } from '../helpers/testdir.js';

const lockFile = (project: string): string => join(project, '.routinely', 'locks', 'exec-run.lock');
/** The holder's record with its live heartbeat and children, as `lock status --json` shows it
 * (`exec-run.lock` itself is immutable once linked, SPEC §4.10). */
const readLock = (project: string): LockRecord | null => {
  try {
    return readLockStatus({ lockDir: join(project, '.routinely', 'locks'), key: 'exec-run' }).record;
  } catch {
    return null;
  }
};
/** The `exec-run.lock` file itself. */
const readLockFile = (project: string): LockRecord | null => {
  try {
    return parseLockRecord(readFileSync(lockFile(project), 'utf8'));
  } catch {
    return null;
  }
};

/** The built CLI copied where any user can read it: the clone itself may sit in a folder only
 * its owner can enter (/root, `mktemp -d`), and the bundle needs nothing outside dist/. */
function reachableCli(): string {
  const dir = testdir('routinely-dist-');
  chmodSync(dir, 0o755);
  cpSync(dirname(CLI), join(dir, 'dist'), { recursive: true });
  spawnSync('chmod', ['-R', 'a+rX', dir]);
  return join(dir, 'dist', 'cli.cjs');
}

/** Runs the CLI as an unprivileged user when we are root (root ignores file permissions). */
function asUnprivileged(args: string[], cwd: string) {
  const argv =
    process.getuid?.() === 0
      ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, reachableCli(), ...args]
      : [process.execPath, CLI, ...args];
  return new Promise<{ code: number | null; stderr: string }>((resolve) => {
    const child = spawn(argv[0]!, argv.slice(1), { cwd, env: childEnv(), stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

describe('lock run', () => {
  it("exits with the command's own code and leaves the lock free", async () => {
    const project = testProject();
    expect((await runCli(['lock', 'run', '--', 'sh', '-c', 'exit 7'], { cwd: project })).code).toBe(7);
    expect((await runCli(['lock', 'run', '--', 'true'], { cwd: project })).code).toBe(0);
    expect(existsSync(lockFile(project))).toBe(false);
    const missing = await runCli(['lock', 'run', '--', 'no-such-command-xyz'], { cwd: project });
    expect(missing.code).toBe(127);
    // flock's words: flock: failed to execute no-such-command-xyz: No such file or directory
    expect(missing.stderr).toBe(
      'routinely: lock run: failed to execute no-such-command-xyz: No such file or directory\n',
    );
    writeFileSync(join(project, 'not-executable'), 'echo hi\n', { mode: 0o644 });
    const denied = await runCli(['lock', 'run', '--', './not-executable'], { cwd: project });
    expect(denied.code).toBe(126);
    expect(denied.stderr).toBe('routinely: lock run: failed to execute ./not-executable: Permission denied\n');
    // an empty program name is bad input (2), said before any lock is taken
    const empty = await runCli(['lock', 'run', '--', ''], { cwd: project });
    expect(empty.code).toBe(2);
    expect(empty.stderr).toBe('routinely: lock run: the command after -- is empty: name a program to run\n');
  });

  it('busy: fail exits 75 naming the holder, skip exits 0, wait gets it after release', async () => {
    const project = testProject();
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo started; sleep 2'], { cwd: project });
    await holder.waitFor(/started/);
    const fail = await runCli(['lock', 'run', '--', 'echo', 'ran'], { cwd: project });
    expect(fail.code).toBe(75);
    expect(fail.stdout).toBe('');
    expect(fail.stderr).toMatch(
      new RegExp(`^exec busy: held by pid ${holder.pid} on \\S+ \\(lock run\\), heartbeat \\d+s ago`),
    );
    const skip = await runCli(['lock', 'run', '--if-busy', 'skip', '--', 'echo', 'ran'], { cwd: project });
    expect(skip).toMatchObject({ code: 0, stdout: 'skipped: exec busy\n' });
    const wait = await runCli(
      ['lock', 'run', '--if-busy', 'wait', '--', 'sh', '-c', 'echo ran $ROUTINELY_LOCK_GENERATION'],
      { cwd: project },
    );
    expect(wait).toMatchObject({ code: 0, stdout: 'ran 2\n' });
    expect((await holder.exited).code).toBe(0);
  });

  it('a waiter that came first (stopped while it waits): routine run is busy naming it, as lock run does, not "another process"', async () => {
    const project = testProject({
      routines: [{ id: 'r', schedule: '0 0 1 1 *', action: 'command', run: 'true' }],
    });
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo started; while [ ! -e go ]; do sleep 0.05; done'], {
      cwd: project,
    });
    await holder.waitFor(/started/);
    const waiter = startCli(['lock', 'run', '--if-busy', 'wait', '--', 'true'], { cwd: project });
    await waiter.waitFor(/waiting for the exec lock/);
    waiter.child.kill('SIGSTOP');
    try {
      writeFileSync(join(project, 'go'), '');
      expect((await holder.exited).code).toBe(0);
      const manual = await runCli(['routine', 'run', 'r'], { cwd: project });
      const locked = await runCli(['lock', 'run', '--', 'true'], { cwd: project });
      const named = new RegExp(
        `^exec busy: held by no one this moment, but a waiter that came first takes it next: lock run, pid ${waiter.pid} on `,
      );
      expect([manual.code, locked.code]).toEqual([75, 75]);
      expect(manual.stderr).toMatch(named);
      expect(locked.stderr).toMatch(named);
    } finally {
      waiter.child.kill('SIGCONT');
    }
    expect((await waiter.exited).code).toBe(0);
  });

  it('a routine that waits for its lock (ifBusy wait) starts once it holds it: the wait is lateness, not run time', async () => {
    const project = testProject({
      routines: [{ id: 'w', schedule: '0 0 1 1 *', action: 'command', run: 'date +%s%3N > began', ifBusy: 'wait' }],
    });
    const holder = startCli(
      ['lock', 'run', '--', 'sh', '-c', 'echo started; while [ ! -e go ]; do sleep 0.05; done; date +%s%3N > released'],
      { cwd: project },
    );
    await holder.waitFor(/started/);
    const manual = startCli(['routine', 'run', 'w'], { cwd: project });
    await manual.waitFor(/waiting for the exec lock/);
    await sleep(1500);
    writeFileSync(join(project, 'go'), '');
    expect((await holder.exited).code).toBe(0);
    expect((await manual.exited).code).toBe(0);
    const [fire] = JSON.parse((await runCli(['routine', 'history', 'w', '--json'], { cwd: project })).stdout) as {
      scheduled_at: string;
      started_at: string;
      finished_at: string;
    }[];
    const released = Number(readFileSync(join(project, 'released'), 'utf8'));
    const began = Number(readFileSync(join(project, 'began'), 'utf8'));
    // (date's milliseconds and the record's are one clock: the fire began after the release,
    // and ended after its command began)
    expect(Date.parse(fire!.started_at)).toBeGreaterThanOrEqual(released - 1);
    expect(Date.parse(fire!.started_at)).toBeGreaterThan(Date.parse(fire!.scheduled_at));
    expect(Date.parse(fire!.finished_at)).toBeGreaterThanOrEqual(began - 1);
  });

  it('wait with --wait-timeout exits 75 when the holder stays', async () => {
    const project = testProject();
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo started; sleep 30'], { cwd: project });
    await holder.waitFor(/started/);
    const r = await runCli(['lock', 'run', '--if-busy', 'wait', '--wait-timeout', '0.3', '--', 'true'], {
      cwd: project,
    });
    expect(r.code).toBe(75);
    expect(r.stderr).toMatch(/exec busy: still held by pid \d+ .* after waiting 0.3s/);
    holder.child.kill('SIGTERM');
    expect((await holder.exited).code).toBe(143);
  });

  it("SIGKILL of the holder: the next waiter gets the lock within a second and the holder's child no longer runs", async () => {
    const project = testProject();
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo "child $$"; sleep 60'], { cwd: project });
    const childPid = Number((await holder.waitFor(/child (\d+)/))[1]);
    await eventually(
      () => (readLock(project)?.owner.children ?? []).some((c) => c.pid === childPid),
      5000,
      'child recorded',
    );
    holder.child.kill('SIGKILL');
    await holder.exited;
    expect(processRuns(childPid)).toBe(true); // the orphan outlives its holder until a reclaim
    // --wait-timeout 1: exit 0 proves the dead holder was noticed and reclaimed within a second
    const next = await runCli(['lock', 'run', '--if-busy', 'wait', '--wait-timeout', '1', '--', 'echo', 'next'], {
      cwd: project,
    });
    expect(next).toMatchObject({ code: 0, stdout: 'next\n' });
    await eventually(() => !processRuns(childPid), 5000, 'orphan ended');
    const kept = readdirSync(join(project, '.routinely', 'locks')).filter((n) => n.startsWith('exec-run.lock.stale.'));
    expect(kept).toHaveLength(1);
  });

  it('heartbeat keeps a 2 s TTL lock for 3 x TTL', async () => {
    const project = testProject({ lock: { ttlSeconds: 2 } });
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo started; sleep 6'], { cwd: project });
    await holder.waitFor(/started/);
    const first = readLock(project)!;
    const beats = new Set<number>();
    let busyChecked = false;
    while (!(await Promise.race([holder.exited.then(() => true), sleep(250).then(() => false)]))) {
      const rec = readLock(project);
      if (!rec) continue; // released at the very end
      expect(rec.lock_id).toBe(first.lock_id);
      expect(rec.generation).toBe(first.generation);
      // each beat extends the lease by the TTL (the holder's own clock on both sides)
      expect(rec.expires_at - rec.heartbeat_at).toBeCloseTo(2, 1);
      beats.add(rec.heartbeat_at);
      if (beats.size >= 2 && !busyChecked) {
        busyChecked = true; // once renewed, still held: another taker is refused
        const busy = await runCli(['lock', 'run', '--', 'true'], { cwd: project });
        expect(busy.code).toBe(75);
      }
    }
    expect((await holder.exited).code).toBe(0);
    // the heartbeat moved (refreshed every TTL/3; how many beats a poller sees depends on load),
    // and the same lock was still held past the expiry it was taken with
    expect(beats.size).toBeGreaterThanOrEqual(2);
    expect(Math.max(...beats)).toBeGreaterThan(first.expires_at);
  });

  it('SIGSTOP past the TTL: another process takes over; after SIGCONT the old holder stops, says so, exits 1, leaves the new lock alone', async () => {
    const project = testProject({ lock: { ttlSeconds: 2 } });
    const old = startCli(['lock', 'run', '--', 'sh', '-c', 'echo "child $$"; sleep 60'], { cwd: project });
    const oldChild = Number((await old.waitFor(/child (\d+)/))[1]);
    await eventually(() => (readLock(project)?.owner.children ?? []).length === 1, 5000, 'child recorded');
    const oldLock = readLock(project)!;
    process.kill(old.pid, 'SIGSTOP');
    const next = startCli(
      ['lock', 'run', '--if-busy', 'wait', '--wait-timeout', '20', '--', 'sh', '-c', 'echo took-over; sleep 3'],
      { cwd: project },
    );
    await next.waitFor(/took-over/);
    const newLock = readLock(project)!;
    expect(newLock.lock_id).not.toBe(oldLock.lock_id);
    expect(newLock.generation).toBeGreaterThan(oldLock.generation);
    expect(processRuns(oldChild)).toBe(false); // work of a stale holder never runs beside the new one
    process.kill(old.pid, 'SIGCONT');
    const { code } = await old.exited;
    expect(code).toBe(1);
    expect(old.stderr()).toMatch(/lock lost: .*left the lock alone/);
    const after = readLock(project)!;
    expect(after.lock_id).toBe(newLock.lock_id);
    expect(after.owner.pid).toBe(next.pid);
    expect(readLockFile(project)?.lock_id).toBe(newLock.lock_id);
    expect((await next.exited).code).toBe(0);
  });

  it.each([
    ['SIGTERM', 143],
    ['SIGINT', 130],
    // (Ctrl-\: Node's default ended `lock run` alone, the command running on, the lock stale)
    ['SIGQUIT', 131],
  ] as const)(
    "%s is forwarded to the command's group, then the lock is released (exit %i)",
    async (signal, exitCode) => {
      const project = testProject();
      const p = startCli(
        [
          'lock',
          'run',
          '--',
          'sh',
          '-c',
          `trap 'echo got-${signal}; exit 0' ${signal.slice(3)}; echo ready; sleep 30 & wait`,
        ],
        { cwd: project },
      );
      await p.waitFor(/ready/);
      p.child.kill(signal);
      expect((await p.exited).code).toBe(exitCode);
      expect(p.stdout()).toContain(`got-${signal}`);
      expect(existsSync(lockFile(project))).toBe(false);
    },
  );
});

describe('lock status and lock break', () => {
  it('status --json shows holder, generation, heartbeat age, expiry and staleness', async () => {
    const project = testProject({ lock: { ttlSeconds: 30 } });
    const free = JSON.parse((await runCli(['lock', 'status', '--json'], { cwd: project })).stdout);
    expect(free).toMatchObject({ key: 'exec-run', state: 'free', generation: 0, record: null });
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo started; sleep 30'], { cwd: project });
    await holder.waitFor(/started/);
    const held = JSON.parse((await runCli(['lock', 'status', '--json'], { cwd: project })).stdout);
    expect(held).toMatchObject({
      state: 'held',
      generation: 1,
      stale_reason: null,
      record: { version: 1, key: 'exec-run', generation: 1, owner: { pid: holder.pid, command: 'lock run' } },
    });
    expect(held.heartbeat_age_s + held.expires_in_s).toBeCloseTo(30, 0); // the TTL, both seen at one moment
    expect(held.expires_in_s).toBeGreaterThan(0);
    const human = await runCli(['lock', 'status'], { cwd: project });
    expect(human.stdout).toMatch(/exec-run lock: held/);
    expect(human.stdout).toMatch(new RegExp(`holder: +pid ${holder.pid} on`));

    // lock break refuses a live lock
    const refused = await runCli(['lock', 'break'], { cwd: project });
    expect(refused.code).toBe(75);
    expect(refused.stderr).toMatch(/not breaking the exec-run lock: it is held by pid \d+/);
    expect(readLock(project)?.owner.pid).toBe(holder.pid);

    holder.child.kill('SIGKILL');
    await holder.exited;
    const stale = JSON.parse((await runCli(['lock', 'status', '--json'], { cwd: project })).stdout);
    expect(stale).toMatchObject({ state: 'stale', stale_reason: 'OWNER_DEAD' });
    const broken = await runCli(['lock', 'break'], { cwd: project });
    expect(broken.code).toBe(0);
    expect(broken.stdout).toMatch(/broke the stale exec-run lock: owner pid \d+ is not running/);
    expect(broken.stdout).toMatch(/ended 1 orphaned process group/);
    expect(existsSync(lockFile(project))).toBe(false);
  });

  it('a live holder on this host whose record claims an expiry a hundred years ahead, its heartbeat 100 s old: lock break watches it a TTL on its own clock, then breaks it (SPEC §4.4)', async () => {
    const project = testProject({ lock: { ttlSeconds: 2, refreshSeconds: 0.5 } });
    // a live process of this host as the owner, its heartbeat long gone still
    const owner = spawn('sleep', ['60'], { stdio: 'ignore' });
    const info = systemProbe().inspect(owner.pid!);
    if (info.state !== 'alive') throw new Error('owner not running');
    const probe = systemProbe();
    const now = Date.now() / 1000;
    mkdirSync(join(project, '.routinely', 'locks'), { recursive: true, mode: 0o700 });
    writeFileSync(
      lockFile(project),
      serializeLockRecord({
        version: 1,
        key: 'exec-run',
        lock_id: 'e'.repeat(32),
        generation: 4,
        owner: {
          pid: owner.pid!,
          host: probe.host,
          boot_id: probe.bootId,
          start_time: info.startTime,
          command: 'lock run',
        },
        created_at: now - 200,
        heartbeat_at: now - 100,
        expires_at: now + 100 * 365 * 86400,
      } as LockRecord),
      { mode: 0o600 },
    );
    try {
      // its record says "fresh for a century": nothing acts on that, in either direction
      expect(JSON.parse((await runCli(['lock', 'status', '--json'], { cwd: project })).stdout)).toMatchObject({
        state: 'held',
      });
      const broken = await runCli(['lock', 'break'], { cwd: project });
      expect(broken.stderr).toMatch(
        new RegExp(`pid ${owner.pid} on \\S+ .* is alive on this host: watching its heartbeat for up to 2s`),
      );
      expect(broken.code, broken.stderr).toBe(0);
      expect(broken.stdout).toMatch(
        /broke the stale exec-run lock: no heartbeat seen for 2(\.\d)?s on this host's clock \(TTL 2s\)/,
      );
      expect(processRuns(owner.pid!)).toBe(true); // the owner itself is not a child of its lock
    } finally {
      owner.kill('SIGKILL');
    }
  });

  it('a live holder whose heartbeat moves is never broken; its record looking fresh, lock break answers at once', async () => {
    const project = testProject({ lock: { ttlSeconds: 2, refreshSeconds: 0.5 } });
    const holder = startCli(['lock', 'run', '--', 'sh', '-c', 'echo started; sleep 5'], { cwd: project });
    await holder.waitFor(/started/);
    const refused = await runCli(['lock', 'break'], { cwd: project });
    expect(refused.code).toBe(75);
    expect(refused.stderr).not.toMatch(/watching/);
    expect((await holder.exited).code).toBe(0);
  });
});

describe('unsafe and unusable paths', () => {
  it('refuses a symlink at the lock path and never touches its target', async () => {
    const project = testProject();
    mkdirSync(join(project, '.routinely', 'locks'), { recursive: true });
    const target = join(project, 'target.txt');
    writeFileSync(target, 'keep me');
    symlinkSync(target, lockFile(project));
    const r = await runCli(['lock', 'run', '--', 'true'], { cwd: project });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/exec-run\.lock is a symbolic link; refusing/);
    expect(readFileSync(target, 'utf8')).toBe('keep me');
    expect((await runCli(['lock', 'status'], { cwd: project })).code).toBe(2);
  });

  it('creates a missing lock folder (0700)', async () => {
    const project = testProject();
    const lockDir = join(project, 'deep', 'er', 'locks');
    const r = await runCli(['lock', 'run', '--', 'true'], { cwd: project, env: { ROUTINELY_LOCK_DIR: lockDir } });
    expect(r.code).toBe(0);
    expect(statSync(lockDir).mode & 0o777).toBe(0o700);
  });

  it('names a lock folder it cannot write, with exit 2 and no hang', async () => {
    const project = testProject();
    chmodSync(project, 0o755);
    chmodSync(join(project, 'routinely.json'), 0o644);
    if (process.getuid?.() === 0) {
      // the project is the unprivileged user's; its lock folder is not
      chownSync(project, 65534, 65534);
      chownSync(join(project, 'routinely.json'), 65534, 65534);
      mkdirSync(join(project, '.routinely'), { mode: 0o700 });
      chownSync(join(project, '.routinely'), 65534, 65534);
    }
    mkdirSync(join(project, '.routinely', 'locks'), { recursive: true, mode: 0o755 });
    chmodSync(join(project, '.routinely', 'locks'), 0o555);
    const r = await asUnprivileged(['lock', 'run', '--if-busy', 'wait', '--', 'true'], project);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      process.getuid?.() === 0
        ? /\.routinely\/locks is owned by uid 0, not by this user/
        : /cannot create the lock in .*\.routinely\/locks: permission denied \(EACCES\)/,
    );
  });
});

describe('bad input exits 2 and names what is wrong', () => {
  it.each([
    [['lock', 'run', '--if-busy', 'maybe', '--', 'true'], {}, /--if-busy.*maybe.*fail, skip, wait/],
    [
      ['lock', 'run', '--wait-timeout', 'soon', '--', 'true'],
      {},
      /--wait-timeout takes a number of seconds, 0 to 2000000 \(a plain number such as 30 or 1.5\), got "soon"/,
    ],
    [
      ['lock', 'run', '--if-busy', 'fail', '--wait-timeout', '5', '--', 'true'],
      {},
      /--wait-timeout only applies with --if-busy wait/,
    ],
    // 0 would abort the run at once (the config's timeoutSeconds must be above 0 too)
    [
      ['exec', 'run', '--timeout', '0.0'],
      {},
      /--timeout takes a number of seconds above 0, got "0\.0" \(without --timeout: no limit\)/,
    ],
    // and its range, for a value that is no number, starts above 0 too
    [
      ['exec', 'run', '--timeout', '-1'],
      {},
      /--timeout takes a number of seconds, above 0 to 2000000 \(a plain number such as 30 or 1.5\), got "-1"/,
    ],
    [['lock', 'run'], {}, /missing required argument 'cmd'/],
    [['lock', 'status', '--key', '../etc'], {}, /--key.*exec-run, scheduler/],
    [['lock', 'frobnicate'], {}, /unknown command 'frobnicate'/],
    [['lock', 'status', '--colour'], {}, /unknown option '--colour'/],
    [
      ['lock', 'status'],
      { ROUTINELY_LOCK_TTL_SECONDS: '0' },
      /ROUTINELY_LOCK_TTL_SECONDS: "0" is not a number of seconds between 1 and 86400/,
    ],
    [['lock', 'status'], { ROUTINELY_LOCK_TTL_SECONDS: 'abc' }, /ROUTINELY_LOCK_TTL_SECONDS: "abc"/],
    [['lock', 'status'], { ROUTINELY_LOCK_TTL_SECONDS: '90000' }, /ROUTINELY_LOCK_TTL_SECONDS: "90000"/],
    [
      ['lock', 'status'],
      { ROUTINELY_LOCK_REFRESH_SECONDS: '40' },
      /ROUTINELY_LOCK_REFRESH_SECONDS: 40 must be below the lock TTL \/ 2 \(TTL 60s\)/,
    ],
    [['lock', 'status'], { ROUTINELY_LOCK_REFRESH_SECONDS: '-1' }, /ROUTINELY_LOCK_REFRESH_SECONDS: "-1"/],
    [['lock', 'status'], { ROUTINELY_CONFIG: 'nope.json' }, /ROUTINELY_CONFIG: nope.json does not exist/],
    [['--config', 'nope.json', 'lock', 'status'], {}, /--config: nope.json does not exist/],
  ])('%j %j', async (args, env, message) => {
    const project = testProject();
    const r = await runCli(args, { cwd: project, env });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).not.toMatch(/\n\s+at /); // never a stack trace
  });

  it('bad config: exit 2 naming file, path and value', async () => {
    const project = testProject({ routines: [{ id: 'x', schedule: '*/61 * * * *', action: 'exec-auto' }] });
    const r = await runCli(['lock', 'run', '--', 'true'], { cwd: project });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      'routinely: routinely.json: routines[0].schedule: "*/61 * * * *" is not a valid cron expression (minute 61 out of range 0-59)\n',
    );
    writeFileSync(join(project, 'routinely.json'), '{\n  "lock": { "ttlSeconds": 5, }\n}');
    const syntax = await runCli(['validate'], { cwd: project });
    expect(syntax.code).toBe(2);
    expect(syntax.stderr).toBe(
      'routinely: routinely.json: line 2, column 28: invalid JSON: trailing comma before "}" (JSON allows none)\n',
    );
  });

  it('no config anywhere up the tree: exit 2 with a hint', async () => {
    const dir = join(testProject(), 'sub');
    mkdirSync(dir);
    const r = await runCli(['lock', 'status'], { cwd: dir, env: { ROUTINELY_CONFIG: undefined } });
    expect(r.code).toBe(0); // found in the parent folder
    const lonely = await runCli(['lock', 'status'], { cwd: '/', env: { ROUTINELY_CONFIG: undefined } });
    expect(lonely.code).toBe(2);
    expect(lonely.stderr).toMatch(/no routinely\.json found in \/ or any parent folder; run `routinely init`/);
  });
});

describe('validate and version', () => {
  it('prints the next three fire times of each routine', async () => {
    const project = testProject({
      routines: [{ id: 'nightly', schedule: '0 3 * * *', timezone: 'Europe/Berlin', action: 'register' }],
    });
    const r = await runCli(['validate'], { cwd: project });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /^routinely\.json: valid \(1 routine, 0 inline tasks\)\nnightly {2}0 3 \* \* \* {2}\(Europe\/Berlin; register\)\n/,
    );
    expect(r.stdout.match(/^ {2}\d{4}-\d\d-\d\d 03:00:00 GMT\+\d/gm)).toHaveLength(3);
  });

  it('--version and --help exit 0', async () => {
    expect((await runCli(['--version'])).stdout).toMatch(/^\d+\.\d+\.\d+/);
    const help = await runCli(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/Examples:/);
    expect((await runCli(['lock', 'run', '--help'])).stdout).toMatch(/--if-busy <mode>/);
  });
});
