// The one runner of a command's process group under a lease (src/exec/group-run.ts), with real
// processes and a real file lock: the lock named to the command, what is left of its group ended
// and counted, who stopped it, and a missing folder that starts nothing.

import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runGroupUnderLease, withLockEnv } from '../../src/exec/group-run.js';
import { runProcess } from '../../src/exec/process.js';
import { processGone, systemProbe } from '../../src/process/identity.js';
import { trustRoot } from '../../src/fs/files.js';
import { fileLockBackend } from '../../src/file-lock/backend.js';
import type { Lease } from '../../src/lock/lease.js';
import { parseLockRecord, serializeLockRecord } from '../../src/lock/record.js';
import { testdir } from '../helpers/testdir.js';

async function leaseIn(dir: string): Promise<Lease> {
  const lockDir = join(dir, 'locks');
  mkdirSync(lockDir, { mode: 0o700 });
  trustRoot(lockDir);
  const got = await fileLockBackend({ lockDir, ttlMs: 30_000, refreshMs: 10_000 }).acquire('exec-run', {
    command: 'test',
  });
  if (!got.ok) throw new Error(got.why);
  return got.lease;
}

/** `sleep 30` under `lease`, following only a stop signal that the lease's loss aborts too (as
 * exec run's is); `meanwhile` is given that stop once the command is on its way. */
function sleepFollowingStop(
  lease: Lease,
  meanwhile: (stop: AbortController) => void,
): ReturnType<typeof runGroupUnderLease> {
  const stop = new AbortController();
  lease.signal.addEventListener('abort', () => stop.abort(lease.signal.reason), { once: true });
  meanwhile(stop);
  return runGroupUnderLease(lease, {
    file: 'sleep 30',
    shell: true,
    signal: stop.signal,
    signalFollowsLease: true,
    killGraceMs: 500,
  });
}

describe('runGroupUnderLease', () => {
  it('names the lock to the command and ends what its group left running (counted)', async () => {
    const dir = testdir();
    const lease = await leaseIn(dir);
    const out = join(dir, 'out');
    const r = await runGroupUnderLease(lease, {
      file: `echo "$ROUTINELY_LOCK_NAME $ROUTINELY_LOCK_GENERATION $ROUTINELY_LOCK_ID" > ${out}; sleep 30 & echo $! >> ${out}`,
      shell: true,
      env: { PATH: process.env.PATH },
      lockName: 'db',
      killGraceMs: 1000,
    });
    const [named, bg] = readFileSync(out, 'utf8').trim().split('\n');
    expect(named).toBe(`db ${lease.generation} ${lease.lockId}`);
    expect(r.process.exitCode).toBe(0);
    expect(r.leftovers).toBe(1);
    expect(r.stoppedBy).toBeNull();
    expect(processGone({ pid: Number(bg), host: lease.record().owner.host })).toBe(true);
    await lease.release();
  });

  it("output its log cannot take (a full disk: /dev/full) is counted, bytes and why, and the command's result kept", async () => {
    const lease = await leaseIn(testdir());
    const fd = openSync('/dev/full', 'w');
    try {
      const r = await runGroupUnderLease(lease, {
        file: 'printf 0123456789; exit 0',
        shell: true,
        output: { fd, capBytes: 4096 },
        killGraceMs: 500,
      });
      expect(r.process.exitCode).toBe(0);
      expect(r.lost).toEqual({ bytes: 10, code: 'ENOSPC' });
    } finally {
      closeSync(fd);
      await lease.release();
    }
    // a log that takes it all: nothing lost
    const log = join(testdir(), 'log');
    const ok = openSync(log, 'w');
    const lease2 = await leaseIn(testdir());
    const r = await runGroupUnderLease(lease2, {
      file: 'printf 0123456789',
      shell: true,
      output: { fd: ok, capBytes: 4096 },
    });
    closeSync(ok);
    await lease2.release();
    expect(r.lost).toBeUndefined();
    expect(readFileSync(log, 'utf8')).toBe('0123456789');
  });

  it('says who stopped it: its timeout, or the caller', async () => {
    const lease = await leaseIn(testdir());
    const timedOut = await runGroupUnderLease(lease, {
      file: 'sleep 30',
      shell: true,
      timeoutMs: 100,
      killGraceMs: 500,
    });
    expect(timedOut.stoppedBy).toBe('timeout');
    const stop = new AbortController();
    setTimeout(() => stop.abort('stopped by the test'), 100);
    const stopped = await runGroupUnderLease(lease, {
      file: 'sleep 30',
      shell: true,
      signal: stop.signal,
      killGraceMs: 500,
    });
    expect(stopped.stoppedBy).toBe('stop');
    expect(stopped.process.canceled).toBe(true);
    await lease.release();
  });

  it("gives a command the lock's variables, copying its environment only when they are not in it", async () => {
    const lease = await leaseIn(testdir());
    const vars = { ROUTINELY_LOCK_GENERATION: String(lease.generation), ROUTINELY_LOCK_ID: lease.lockId };
    const base = { PATH: '/bin' };
    const given = withLockEnv(base, lease);
    expect(given).toEqual({ ...base, ...vars });
    expect(base).toEqual({ PATH: '/bin' });
    // exec run's environment has them already: taken as it is, for each of its tasks
    expect(withLockEnv(given, lease)).toBe(given);
    // a task's own env that names them otherwise, or a lock named to the command, gets a copy
    const spoofed = { ...given, ROUTINELY_LOCK_ID: 'f'.repeat(32) };
    expect(withLockEnv(spoofed, lease)).toEqual({ ...base, ...vars });
    expect(withLockEnv(given, lease, 'db')).toEqual({ ...base, ...vars, ROUTINELY_LOCK_NAME: 'db' });
    // the lease's signal aborts the caller's signal too (exec run's stop): only that one is followed
    const r = await sleepFollowingStop(lease, (stop) => setTimeout(() => stop.abort('stopped by the test'), 100));
    expect(r.stoppedBy).toBe('stop');
    await lease.release();
  });

  it("with only the caller's signal followed, a lost lease still stops the command, and says so", async () => {
    const dir = testdir();
    const lease = await leaseIn(dir);
    // someone else's record where ours was: the next refresh finds the lease lost
    const view = join(dir, 'locks', 'exec-run.lock');
    const theirs = { ...parseLockRecord(readFileSync(view, 'utf8'))!, lock_id: 'e'.repeat(32), generation: 99 };
    const r = await sleepFollowingStop(lease, () =>
      setTimeout(() => {
        writeFileSync(view, serializeLockRecord(theirs));
        lease.refresh();
      }, 100),
    );
    expect(lease.lost).not.toBeNull();
    expect(r.stoppedBy).toBe('lock');
    expect(r.process.canceled).toBe(true);
  });

  it('starts nothing in a folder that is not there, and says why (exit 127, as a shell would)', async () => {
    const dir = testdir();
    const marker = join(dir, 'ran');
    const r = await runGroupUnderLease(null, {
      file: `touch ${marker}`,
      shell: true,
      cwd: { error: 'no such folder: nope' },
    });
    expect(r.process).toMatchObject({ exitCode: 127, reason: 'spawn-error', error: 'no such folder: nope', pid: null });
    expect(() => readFileSync(marker)).toThrow();
  });

  it('starts a command with the environment, folder and arguments given, and refuses a NUL byte in them as a start that failed (never a throw)', async () => {
    const dir = testdir();
    const out = join(dir, 'out');
    const r = await runProcess({
      file: '/bin/sh',
      args: ['-c', 'printf "%s|%s|%s" "$A" "$(pwd)" "$1" > out', 'sh', 'one two'],
      cwd: dir,
      env: { PATH: '/usr/bin:/bin', A: 'a=b c', UNSET: undefined },
    });
    expect(r).toMatchObject({ exitCode: 0, reason: 'exited' });
    expect(readFileSync(out, 'utf8')).toBe(`a=b c|${dir}|one two`);
    for (const spec of [
      { file: 'true', shell: true, env: { A: 'x\0y' } },
      { file: 'printf', args: ['x\0y'] },
      { file: 'true', shell: true, cwd: `${dir}\0x` },
    ]) {
      const bad = await runProcess(spec);
      expect(bad).toMatchObject({ exitCode: 127, reason: 'spawn-error', pid: null });
      expect(bad.error).toMatch(/NUL byte/);
    }
  });

  it.runIf(process.platform === 'linux')(
    'a stop that comes after the command ended on its own (not yet reaped: this process was stopped, or busy) leaves its result its own',
    async () => {
      const stop = new AbortController();
      let pid = 0;
      const ran = runProcess({ file: 'exit 0', shell: true, signal: stop.signal, onSpawn: (p) => (pid = p) });
      // the event loop held until the command has exited (a zombie: its exit not seen yet), as a
      // runner that was SIGSTOPped meanwhile finds it when it goes on — then the stop (a lost lease)
      const until = Date.now() + 10_000;
      while (systemProbe().inspect(pid).state !== 'dead' && Date.now() < until);
      stop.abort();
      expect(await ran).toMatchObject({ exitCode: 0, signal: null, canceled: false, reason: 'exited' });
    },
  );
});
