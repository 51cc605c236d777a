import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { readChecksummed } from '../../src/checksum.js';
import { UsageError } from '../../src/errors.js';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { UnsafePathError } from '../../src/errors.js';
import { attemptAcquire, type FileLockOptions } from '../../src/file-lock/acquire.js';
import { acquireFileLease } from '../../src/file-lock/wait.js';
import { systemProbe } from '../../src/process/identity.js';
import { parseLockRecord, serializeLockRecord, type LockRecord } from '../../src/lock/record.js';
import { breakStaleLock, readLockStatus } from '../../src/file-lock/status.js';
import { readChildJournal } from '../../src/file-lock/children.js';
import { processRuns, eventually } from '../helpers/cli.js';
import { testdir } from '../helpers/testdir.js';

function options(lockDir: string, extra: Partial<FileLockOptions> = {}): FileLockOptions {
  return { lockDir, key: 'exec-run', ttlMs: 10_000, refreshMs: 3_000, owner: { command: 'test' }, ...extra };
}

async function mustAcquire(opts: FileLockOptions) {
  const r = await attemptAcquire(opts);
  if (!r.ok) throw new Error(`expected the lock, got ${r.reason}: ${r.why}`);
  onTestFinished(async () => {
    await r.lease.release();
  });
  return r.lease;
}

const readLock = (dir: string): LockRecord | null => parseLockRecord(readFileSync(join(dir, 'exec-run.lock'), 'utf8'));

/** A pid that certainly existed and has certainly exited. */
function deadPid(): number {
  const r = spawnSync('sh', ['-c', 'echo $$']);
  return Number(r.stdout.toString().trim());
}

function selfStart(): string | null {
  const me = systemProbe().inspect(process.pid);
  return me.state === 'alive' ? me.startTime : null;
}

function staleRecord(over: Partial<LockRecord> = {}, owner: Partial<LockRecord['owner']> = {}): LockRecord {
  const now = Date.now() / 1000;
  const probe = systemProbe();
  return {
    version: 1,
    key: 'exec-run',
    lock_id: 'd'.repeat(32),
    generation: 5,
    owner: { pid: deadPid(), host: probe.host, boot_id: probe.bootId, start_time: '1', command: 'exec run', ...owner },
    created_at: now - 10,
    heartbeat_at: now - 1,
    expires_at: now + 59,
    ...over,
  };
}

describe('acquire and release', () => {
  it('creates a complete lock file (0600 in a 0700 folder) and removes it on release', async () => {
    const dir = join(testdir(), 'locks');
    const lease = await mustAcquire(options(dir));
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, 'exec-run.lock')).mode & 0o777).toBe(0o600);
    const rec = readLock(dir)!;
    expect(rec).toMatchObject({ version: 1, key: 'exec-run', lock_id: lease.lockId, generation: 1 });
    expect(rec.owner).toMatchObject({ pid: process.pid, host: systemProbe().host, command: 'test' });
    expect(rec.expires_at - rec.heartbeat_at).toBeCloseTo(10, 1);
    // the slot is the same record
    expect(parseLockRecord(readFileSync(join(dir, 'exec-run.slot.1'), 'utf8'))).toEqual(rec);
    lease.refresh();
    expect(await lease.release()).toEqual({ released: true });
    expect(existsSync(join(dir, 'exec-run.lock'))).toBe(false);
    // the slot stays (it carries the generation), the release mark says it is free, the
    // heartbeat file is left as a spare for the next holder; no temp files
    const names = readdirSync(dir).sort();
    expect(names).toEqual([
      'exec-run.free.1',
      'exec-run.slot.1',
      expect.stringMatching(/^exec-run\.spare\.[0-9a-f]{16}$/),
    ]);
    for (const name of names) expect(statSync(join(dir, name)).mode & 0o777).toBe(0o600);
    // rewritten in place: the record, its checksum, padding to one block
    const spare = join(dir, names[2]!);
    const beatFile = readFileSync(spare, 'utf8');
    expect(beatFile.length).toBe(4096);
    const beat = JSON.parse(readChecksummed(beatFile)!);
    expect(beat).toMatchObject({ lock_id: lease.lockId, expires_at: expect.any(Number) });
    expect(readLockStatus({ lockDir: dir, key: 'exec-run' })).toMatchObject({ state: 'free', generation: 1 });
    // the next holder takes that file as its heartbeat (the same inode, rewritten in place), and
    // leaves it again
    const ino = statSync(spare).ino;
    const next = await mustAcquire(options(dir));
    expect(existsSync(spare)).toBe(false);
    const beat2 = join(dir, `exec-run.beat.${next.lockId}`);
    expect(statSync(beat2).ino).toBe(ino);
    expect(JSON.parse(readChecksummed(readFileSync(beat2, 'utf8'))!)).toMatchObject({ lock_id: next.lockId });
    expect(await next.release()).toEqual({ released: true });
    expect(readdirSync(dir).filter((n) => n.includes('.spare.'))).toHaveLength(1);
  });

  it('never takes a spare that is not a whole heartbeat file of ours with no other name', async () => {
    const dir = join(testdir(), 'locks');
    await (await mustAcquire(options(dir))).release();
    const [spare] = readdirSync(dir).filter((n) => n.includes('.spare.'));
    // a hard link to a file of someone else's (here: a state file): never written through
    const other = join(testdir(), 'state.json');
    writeFileSync(other, 'x'.repeat(4096));
    rmSync(join(dir, spare!));
    linkSync(other, join(dir, spare!));
    const lease = await mustAcquire(options(dir));
    expect(readFileSync(other, 'utf8')).toBe('x'.repeat(4096));
    expect(statSync(join(dir, `exec-run.beat.${lease.lockId}`)).nlink).toBe(1);
    expect(existsSync(join(dir, spare!))).toBe(false);
    await lease.release();
  });

  it('keeps only a few slots and no files of earlier holders', async () => {
    const dir = testdir();
    for (let i = 0; i < 30; i++) {
      const l = await mustAcquire(options(dir));
      l.refresh();
      await l.release();
    }
    const lease = await mustAcquire(options(dir));
    expect(lease.generation).toBe(31);
    // collected in batches: a bounded handful of the newest slots and marks, beats of those only
    const names = readdirSync(dir);
    const slots = names.filter((n) => n.startsWith('exec-run.slot.')).map((n) => Number(n.split('.').pop()));
    expect(slots).toContain(31);
    expect(slots.length).toBeLessThanOrEqual(12);
    expect(Math.min(...slots)).toBeGreaterThan(31 - 12);
    expect(names.filter((n) => n.startsWith('exec-run.beat.')).length).toBeLessThanOrEqual(8);
    expect(names.filter((n) => n.includes('.tmp.'))).toEqual([]);
  });

  it('reports the holder when busy', async () => {
    const dir = testdir();
    const first = await mustAcquire(options(dir));
    const second = await attemptAcquire(options(dir));
    expect(second).toMatchObject({ ok: false, reason: 'LOCK_HELD' });
    if (second.ok) return;
    expect(second.holder?.lock_id).toBe(first.lockId);
    expect(second.why).toMatch(new RegExp(`^pid ${process.pid} on .+ \\(test\\), heartbeat \\d+s ago$`));
  });

  it('hands out strictly increasing generations across releases', async () => {
    const dir = testdir();
    const seen: number[] = [];
    for (let i = 0; i < 20; i++) {
      const lease = await mustAcquire(options(dir));
      seen.push(lease.generation);
      await lease.release();
    }
    expect(seen).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
  });

  it('continues above the generation of a reclaimed lock whose holder never recorded it', async () => {
    const dir = testdir();
    writeFileSync(join(dir, 'exec-run.lock'), serializeLockRecord(staleRecord({ generation: 50 })));
    const lease = await mustAcquire(options(dir));
    expect(lease.generation).toBe(51);
  });

  it('a stale record at the SPEC lock file, above every slot, becomes a slot before it is taken over: at no step does a looker find neither (two-holder race)', async () => {
    for (const slotsBefore of [0, 2]) {
      const dir = testdir();
      for (let g = 1; g <= slotsBefore; g++) {
        const done = await mustAcquire(options(dir));
        await done.release();
      }
      writeFileSync(join(dir, 'exec-run.lock'), serializeLockRecord(staleRecord({ generation: 13 })));
      // What a racer that listed the folder a moment ago and reads now relies on: a slot of
      // generation 13 or more, or the view that names it. Checked at every step of the takeover.
      const gaps: string[] = [];
      const check = (step: string): void => {
        const names = readdirSync(dir);
        const slot = names.some((n) => /^exec-run\.slot\.(\d+)$/.test(n) && Number(n.split('.').pop()) >= 13);
        if (!slot && !names.includes('exec-run.lock')) gaps.push(step);
      };
      const lease = await mustAcquire(options(dir, { hooks: { step: check } }));
      check('after');
      expect(gaps).toEqual([]);
      expect(lease.generation).toBe(14);
      // that record is kept for forensics, as every reclaimed one
      expect(readdirSync(dir).filter((n) => n.startsWith('exec-run.lock.stale.'))).toHaveLength(1);
    }
  });

  it('takes a fresh start when the counter is lost, above the reclaimed locks kept for forensics', async () => {
    const dir = testdir();
    writeFileSync(join(dir, 'exec-run.lock.stale.1000'), serializeLockRecord(staleRecord({ generation: 9 })));
    const lease = await mustAcquire(options(dir));
    expect(lease.generation).toBe(10);
  });

  it('releasing twice is harmless', async () => {
    const lease = await mustAcquire(options(testdir()));
    expect(await lease.release()).toEqual({ released: true });
    expect(await lease.release()).toEqual({ released: true });
  });
});

// Every stale rule is proven on a real slot (what routinely writes) and on `exec-run.lock` (the
// file SPEC §4 names, as another tool or a test following it would write it).
const PLACES = [
  ['a slot', (g: number) => `exec-run.slot.${g}`],
  ['the SPEC lock file', () => 'exec-run.lock'],
] as const;

describe.each(PLACES)('stale locks and reclaim (SPEC §4.4, §4.5) in %s', (_where, fileOf) => {
  const plant = (dir: string, content: string | LockRecord): string => {
    const file = join(dir, fileOf(typeof content === 'string' ? 5 : content.generation));
    writeFileSync(file, typeof content === 'string' ? content : serializeLockRecord(content));
    return file;
  };

  it.each([
    ['empty', ''],
    ['corrupt', '{"version":1,"key":"exec-'],
  ])('reclaims an %s lock file and keeps it as .stale.<ts>', async (_name, content) => {
    const dir = testdir();
    plant(dir, content);
    const r = await attemptAcquire(options(dir));
    if (!r.ok) throw new Error(`expected the lock: ${r.why}`);
    onTestFinished(() => {
      r.lease.releaseSync();
    });
    // above a slot's number; an unreadable lock file shows no generation to go above
    expect(r.lease.generation).toBe(fileOf(5) === 'exec-run.lock' ? 1 : 6);
    expect(readLock(dir)?.lock_id).toBe(r.lease.lockId);
    const kept = readdirSync(dir).filter((n) => /^exec-run\.lock\.stale\.\d+$/.test(n));
    expect(kept).toHaveLength(1);
    expect(readFileSync(join(dir, kept[0]!), 'utf8')).toBe(content);
    // a takeover, said as one (what `lock break` and the log report)
    expect(r.takeover).toMatchObject({
      why: expect.stringMatching(/not a valid lock record|unreadable/),
      staleFile: join(dir, kept[0]!),
    });
  });

  it('reclaims at once when the owner on this host is dead', async () => {
    const dir = testdir();
    plant(dir, staleRecord());
    const lease = await mustAcquire(options(dir));
    expect(lease.generation).toBe(6);
    expect(readdirSync(dir).filter((n) => n.startsWith('exec-run.lock.stale.'))).toHaveLength(1);
  });

  it('never reclaims a live owner with a fresh heartbeat', async () => {
    const dir = testdir();
    const probe = systemProbe();
    const me = probe.inspect(process.pid);
    const live = staleRecord({}, { pid: process.pid, start_time: me.state === 'alive' ? me.startTime : null });
    const file = plant(dir, live);
    const r = await attemptAcquire(options(dir));
    expect(r).toMatchObject({ ok: false, reason: 'LOCK_HELD', holder: { lock_id: live.lock_id } });
    expect(readFileSync(file, 'utf8')).toBe(serializeLockRecord(live));
    // nothing was linked: the planted slot stays the only one (the SPEC file never becomes one)
    expect(readdirSync(dir).filter((n) => /^exec-run\.slot\.\d+$/.test(n))).toEqual(
      fileOf(5) === 'exec-run.lock' ? [] : ['exec-run.slot.5'],
    );
  });

  it('reclaims an owner whose pid now belongs to another process', async () => {
    const dir = testdir();
    plant(dir, staleRecord({}, { pid: process.pid, start_time: '1' }));
    expect((await mustAcquire(options(dir))).generation).toBe(6);
  });

  it('judges another host by expiry only', async () => {
    const dir = testdir();
    const remote = staleRecord({}, { host: 'elsewhere', pid: 1 });
    plant(dir, remote);
    expect(await attemptAcquire(options(dir))).toMatchObject({ ok: false, reason: 'LOCK_HELD' });
    const now = Date.now() / 1000;
    plant(dir, { ...remote, heartbeat_at: now - 70, expires_at: now - 10 });
    expect((await mustAcquire(options(dir))).generation).toBe(6);
  });

  it('ends the orphaned process group of a dead holder before taking over', async () => {
    const dir = testdir();
    const orphan = spawn('sh', ['-c', 'sleep 60 & sleep 60; wait'], { detached: true, stdio: 'ignore' });
    onTestFinished(() => {
      try {
        process.kill(-orphan.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    });
    const info = systemProbe().inspect(orphan.pid!);
    expect(info.state).toBe('alive');
    const rec = staleRecord(
      {},
      { children: [{ pid: orphan.pid!, start_time: info.state === 'alive' ? info.startTime : null }] },
    );
    plant(dir, rec);
    await mustAcquire(options(dir));
    expect(processRuns(orphan.pid!)).toBe(false);
    expect(systemProbe().groupMembers(orphan.pid!)).toEqual([]);
  });

  it('never signals a recorded child whose pid identity does not match', async () => {
    const dir = testdir();
    const bystander = spawn('sleep', ['60'], { detached: true, stdio: 'ignore' });
    onTestFinished(() => {
      bystander.kill('SIGKILL');
    });
    const rec = staleRecord({}, { children: [{ pid: bystander.pid!, start_time: '12345' }] });
    plant(dir, rec);
    await mustAcquire(options(dir));
    expect(processRuns(bystander.pid!)).toBe(true);
  });

  it('keeps only the newest 20 reclaimed locks', async () => {
    const dir = testdir();
    for (let i = 0; i < 25; i++) writeFileSync(join(dir, `exec-run.lock.stale.${1000 + i}`), '');
    plant(dir, '');
    await mustAcquire(options(dir));
    const kept = readdirSync(dir).filter((n) => n.startsWith('exec-run.lock.stale.'));
    expect(kept).toHaveLength(20);
    expect(kept).not.toContain('exec-run.lock.stale.1000');
  });
});

describe('stale slots', () => {
  it('takes over a holder whose slot is the highest and whose owner died, keeping its record', async () => {
    const dir = testdir();
    const dead = staleRecord({ generation: 7 });
    writeFileSync(join(dir, 'exec-run.slot.7'), serializeLockRecord(dead));
    const lease = await mustAcquire(options(dir));
    expect(lease.generation).toBe(8);
    const kept = readdirSync(dir).filter((n) => n.startsWith('exec-run.lock.stale.'));
    expect(kept).toHaveLength(1);
    expect(parseLockRecord(readFileSync(join(dir, kept[0]!), 'utf8'))?.lock_id).toBe(dead.lock_id);
  });

  it('lock break takes over a garbled top slot: its bytes kept, and said', async () => {
    const dir = testdir();
    writeFileSync(join(dir, 'exec-run.slot.9'), 'garbage\n');
    const broke = await breakStaleLock({ lockDir: dir, key: 'exec-run' });
    expect(broke).toMatchObject({
      broken: true,
      why: expect.stringMatching(/exec-run\.slot\.9 is not a valid lock record/),
    });
    expect(broke.broken && readFileSync(broke.staleFile!, 'utf8')).toBe('garbage\n');
    expect(readLockStatus({ lockDir: dir, key: 'exec-run' })).toMatchObject({ state: 'free', generation: 10 });
  });

  it('withdraws a slot that refilled a gap below the highest one', async () => {
    const dir = testdir();
    const first = await mustAcquire(options(dir));
    first.releaseSync();
    // a slot far above, as if others went on while we stalled and old slots were collected
    const ahead = staleRecord({ generation: 40 }, { pid: process.pid, start_time: selfStart() });
    writeFileSync(join(dir, 'exec-run.slot.40'), serializeLockRecord(ahead));
    const r = await attemptAcquire(options(dir));
    expect(r).toMatchObject({ ok: false, reason: 'LOCK_HELD', holder: { generation: 40 } });
    expect(existsSync(join(dir, 'exec-run.slot.2'))).toBe(false);
  });
});

describe('paths we refuse (security)', () => {
  it('refuses a symlink at the lock path and leaves its target untouched', async () => {
    const dir = testdir();
    const target = join(dir, 'precious.txt');
    writeFileSync(target, 'do not touch');
    const before = statSync(target);
    symlinkSync(target, join(dir, 'exec-run.lock'));
    await expect(attemptAcquire(options(dir))).rejects.toThrow(UnsafePathError);
    await expect(attemptAcquire(options(dir))).rejects.toThrow(/symbolic link/);
    expect(readFileSync(target, 'utf8')).toBe('do not touch');
    expect(statSync(target).mtimeMs).toBe(before.mtimeMs);
  });

  it('names the folder when the lock folder cannot be created', async () => {
    const dir = testdir();
    writeFileSync(join(dir, 'file'), '');
    const err = await attemptAcquire(options(join(dir, 'file', 'locks'))).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnsafePathError);
    expect(String(err)).toMatch(
      /cannot create the lock in .*file\/locks: a path component is not a directory \(ENOTDIR\)/,
    );
  });

  it('rejects keys that would be paths', async () => {
    await expect(attemptAcquire(options(testdir(), { key: '../evil' }))).rejects.toThrow(/invalid lock key/);
    // a usage error (exit 2), as every other input it cannot take (the library's callers see its class)
    await expect(attemptAcquire(options(testdir(), { key: '../evil' }))).rejects.toBeInstanceOf(UsageError);
  });
});

describe('heartbeat, loss and release (SPEC §4.3, §4.6)', () => {
  it('moves heartbeat_at and expires_at forward on refresh (in its own heartbeat file)', async () => {
    const dir = testdir();
    const clock = new ManualClock(Date.now());
    const lease = await mustAcquire(options(dir, { clock }));
    const view = readFileSync(join(dir, 'exec-run.lock'), 'utf8');
    const before = readLockStatus({ lockDir: dir, key: 'exec-run', clock }).record!;
    clock.advance(3_000);
    expect(lease.refresh()).toEqual({ ok: true });
    // the lock record never changes once linked (SPEC §4.10)
    expect(readFileSync(join(dir, 'exec-run.lock'), 'utf8')).toBe(view);
    const after = readLockStatus({ lockDir: dir, key: 'exec-run', clock }).record!;
    expect(after.heartbeat_at - before.heartbeat_at).toBeCloseTo(3, 2);
    expect(after.expires_at - before.expires_at).toBeCloseTo(3, 2);
    expect(after.lock_id).toBe(before.lock_id);
    expect(after.generation).toBe(before.generation);
  });

  it('reports the lease lost when the file carries another lock_id, and never overwrites it', async () => {
    const dir = testdir();
    const lease = await mustAcquire(options(dir));
    const intruder = { ...readLock(dir)!, lock_id: 'e'.repeat(32), generation: 99 };
    writeFileSync(join(dir, 'exec-run.lock'), serializeLockRecord(intruder));
    const r = lease.refresh();
    expect(r).toMatchObject({ ok: false, lost: { code: 'LOCK_LOST' } });
    expect(lease.signal.aborted).toBe(true);
    expect(lease.signal.reason).toMatchObject({ code: 'LOCK_LOST', why: expect.stringMatching(/generation 99/) });
    expect(readLock(dir)).toEqual(intruder);
    expect(await lease.release()).toMatchObject({ released: false, reason: 'NOT_OWNER' });
    expect(readLock(dir)).toEqual(intruder);
  });

  it('an empty file put at the view (rm; touch) claims nothing: the lease holds, the view is healed, the release is clean', async () => {
    const dir = testdir();
    const clock = new ManualClock(Date.now());
    const lease = await mustAcquire(options(dir, { clock }));
    const view = readFileSync(join(dir, 'exec-run.lock'), 'utf8');
    rmSync(join(dir, 'exec-run.lock'));
    writeFileSync(join(dir, 'exec-run.lock'), '');
    expect(lease.verify()).toEqual({ ok: true });
    clock.advance(3_000);
    expect(lease.refresh()).toEqual({ ok: true });
    expect(lease.signal.aborted).toBe(false);
    expect(readFileSync(join(dir, 'exec-run.lock'), 'utf8')).toBe(view);
    expect(await lease.release()).toMatchObject({ released: true });
    // a non-empty record that does not read is still taken for a claim being written
    const other = await mustAcquire(options(dir, { clock }));
    rmSync(join(dir, 'exec-run.lock'));
    writeFileSync(join(dir, 'exec-run.lock'), '{"version":1,"key":"exec-run","lock_id":"');
    expect(other.verify()).toMatchObject({ ok: false, lost: { why: expect.stringMatching(/unreadable record/) } });
  });

  it('reports the lease lost after a pause past the TTL, without writing', async () => {
    const dir = testdir();
    const clock = new ManualClock(Date.now());
    const lease = await mustAcquire(options(dir, { clock }));
    const before = readFileSync(join(dir, 'exec-run.lock'), 'utf8');
    clock.advance(10_000);
    expect(lease.refresh()).toMatchObject({ ok: false, lost: { why: expect.stringMatching(/TTL/) } });
    expect(readFileSync(join(dir, 'exec-run.lock'), 'utf8')).toBe(before);
  });

  it.each([
    ['+2 h', 2 * 3600_000],
    ['-10 min', -600_000],
  ])('rides out a wall-clock jump of %s while the lock is still ours (SPEC §4.13)', async (_name, jump) => {
    const dir = testdir();
    const clock = new ManualClock(Date.now());
    const notices: string[] = [];
    const lease = await mustAcquire(options(dir, { clock, hooks: { notice: (m) => notices.push(m) } }));
    clock.advance(1_000);
    expect(lease.confirm()).toBe(true);
    clock.jumpWall(jump);
    expect(lease.confirm()).toBe(true);
    expect(lease.verify()).toEqual({ ok: true });
    expect(lease.refresh()).toEqual({ ok: true });
    const status = readLockStatus({ lockDir: dir, key: 'exec-run', clock });
    expect(status).toMatchObject({ state: 'held', generation: 1 });
    expect(status.expires_in_s).toBeGreaterThan(8);
    if (jump > 0) expect(notices.join('\n')).toMatch(/wall clock jumped forward.*still ours/);
    else expect(notices).toEqual([]);
  });

  it('after a wall-clock jump, a lock someone else took meanwhile is lost', async () => {
    const dir = testdir();
    const clock = new ManualClock(Date.now());
    const lease = await mustAcquire(options(dir, { clock }));
    clock.jumpWall(2 * 3600_000);
    // an observer judged it expired and took the next slot
    const next = staleRecord({ generation: 2, lock_id: 'a'.repeat(32) }, { pid: process.pid, start_time: selfStart() });
    writeFileSync(join(dir, 'exec-run.slot.2'), serializeLockRecord(next));
    expect(lease.confirm()).toBe(false);
    expect(lease.lost).toMatchObject({ why: expect.stringMatching(/generation 2/), graceMs: 0 });
  });

  it('release by a lease that is no longer the owner is a reported no-op', async () => {
    const dir = testdir();
    const lease = await mustAcquire(options(dir));
    const other = { ...readLock(dir)!, lock_id: 'c'.repeat(32) };
    writeFileSync(join(dir, 'exec-run.lock'), serializeLockRecord(other));
    const r = await lease.release();
    expect(r).toMatchObject({ released: false, reason: 'NOT_OWNER', holder: { lock_id: 'c'.repeat(32) } });
    expect(readLock(dir)?.lock_id).toBe('c'.repeat(32));
  });

  it('records tracked children at once (journal and heartbeat)', async () => {
    const dir = testdir();
    const lease = await mustAcquire(options(dir));
    const child = spawn('sleep', ['30'], { detached: true, stdio: 'ignore' });
    onTestFinished(() => {
      child.kill('SIGKILL');
    });
    lease.trackChild(child.pid!);
    const rec = readLockStatus({ lockDir: dir, key: 'exec-run' }).record!;
    expect(rec.owner.children).toEqual([{ pid: child.pid, start_time: expect.any(String) }]);
    // one line, as JSON.stringify writes the group with this host's facts, read back by a reclaimer
    const journal = join(dir, `exec-run.children.${lease.lockId}`);
    const probe = systemProbe();
    const line = { pid: child.pid, start_time: rec.owner.children![0]!.start_time };
    const where = { host: probe.host, boot_id: probe.bootId, pid_ns: probe.pidNs ?? null };
    expect(readFileSync(journal, 'utf8')).toBe(`\n${JSON.stringify({ ...line, ...where })}\n`);
    expect(readChildJournal(journal, probe)).toEqual([line]);
  });
});

describe('--if-busy policies', () => {
  // A waiter between two full looks at most pollMaxMs apart (docs/lock.md "`--if-busy`"): a system
  // call or two say the slot it found held still is, and a race lost to another waiter is busy at
  // once. Counted by the look's first step; the clock is the test's.
  it('wait: between full looks a waiter only checks the release mark; at pollMaxMs it looks in full again', async () => {
    const dir = testdir();
    const first = await mustAcquire(options(dir));
    const clock = new ManualClock(Date.now());
    let looks = 0;
    let settled = false;
    const waiting = acquireFileLease({
      ...options(dir),
      ifBusy: 'wait',
      heartbeat: false,
      clock,
      pollMaxMs: 50,
      hooks: { step: (n) => void (n === 'acquire:list' && looks++) },
    }).finally(() => (settled = true));
    let slept = 0;
    const tick = async (ms: number): Promise<void> => {
      await eventually(() => clock.sleeping >= 1, 15_000, 'the waiter to pause');
      clock.advance(ms);
      slept += ms;
    };
    // pauses of 1, 2, 4, 8, 16 ms: 31 ms, no full look after the first
    for (const ms of [1, 2, 4, 8, 16]) await tick(ms);
    await eventually(() => clock.sleeping >= 1, 15_000, 'the waiter to pause');
    expect([looks, slept]).toEqual([1, 31]);
    // the next pause (32 ms) ends past 50 ms since the full look: a full look again
    await tick(32);
    await eventually(() => clock.sleeping >= 1, 15_000, 'the waiter to pause');
    expect(looks).toBe(2);
    expect(settled).toBe(false);
    // a release: the mark is seen, the waiter looks in full and takes the lock
    await first.release();
    await eventually(
      () => {
        if (!settled) clock.advance(50);
        return settled;
      },
      15_000,
      'the waiter to take the lock',
    );
    const r = await waiting;
    expect(r.ok).toBe(true);
    if (r.ok) await r.lease.release();
  });

  it('wait: a race lost to another process linking the same slot is busy at once, with no second look', async () => {
    const dir = testdir();
    let looks = 0;
    let raced = false;
    const r = await acquireFileLease({
      ...options(dir),
      ifBusy: 'wait',
      heartbeat: false,
      waitTimeoutMs: 0,
      hooks: {
        step: (n) => {
          if (n === 'acquire:list') looks++;
          // another process takes the slot this attempt is about to link
          if (n === 'acquire:link-slot' && !raced) {
            raced = true;
            linkSync(
              join(
                dir,
                readdirSync(dir).find((f) => f.startsWith('exec-run.tmp.'))!,
              ),
              join(dir, 'exec-run.slot.1'),
            );
          }
        },
      },
    });
    expect(r).toMatchObject({ ok: false, reason: 'WAIT_TIMEOUT', why: 'a process that took it a moment ago' });
    expect(looks).toBe(1);
  });

  it('fail: a race lost the same way looks again, to name the one that won (as every busy answer does)', async () => {
    const dir = testdir();
    let looks = 0;
    let raced = false;
    const r = await acquireFileLease({
      ...options(dir),
      ifBusy: 'fail',
      heartbeat: false,
      hooks: {
        step: (n) => {
          if (n === 'acquire:list') looks++;
          // another process takes the slot this attempt is about to link
          if (n === 'acquire:link-slot' && !raced) {
            raced = true;
            linkSync(
              join(
                dir,
                readdirSync(dir).find((f) => f.startsWith('exec-run.tmp.'))!,
              ),
              join(dir, 'exec-run.slot.1'),
            );
          }
        },
      },
    });
    expect(r).toMatchObject({ ok: false, reason: 'LOCK_HELD', why: expect.stringMatching(/^pid \d+ on \S+ \(test\)/) });
    expect(looks).toBe(2);
  });

  it('wait: gets the lock when the holder releases', async () => {
    const dir = testdir();
    const first = await mustAcquire(options(dir));
    // the waiter's pauses on a clock of the test's: it is released only once the waiter waits
    const clock = new ManualClock(Date.now());
    let settled = false;
    const waiting = acquireFileLease({ ...options(dir), ifBusy: 'wait', heartbeat: false, clock }).finally(
      () => (settled = true),
    );
    await eventually(() => clock.sleeping >= 1, 15_000, 'the waiter to wait');
    expect(settled).toBe(false);
    await first.release();
    // the release wakes it (inotify), or the next pause does once the clock moves
    await eventually(
      () => {
        if (!settled) clock.advance(50);
        return settled;
      },
      15_000,
      'the waiter to take the lock',
    );
    const r = await waiting;
    expect(r.ok).toBe(true);
    if (r.ok) await r.lease.release();
  });

  it('wait: gives up with WAIT_TIMEOUT', async () => {
    const dir = testdir();
    await mustAcquire(options(dir));
    const r = await acquireFileLease({ ...options(dir), ifBusy: 'wait', waitTimeoutMs: 100 });
    expect(r).toMatchObject({ ok: false, reason: 'WAIT_TIMEOUT' });
  });

  it('wait: stops early when aborted', async () => {
    const dir = testdir();
    await mustAcquire(options(dir));
    const ac = new AbortController();
    // aborted while it waits (its pauses on a clock that never moves: only the abort ends them)
    const clock = new ManualClock(Date.now());
    const waiting = acquireFileLease({ ...options(dir), ifBusy: 'wait', signal: ac.signal, clock });
    await eventually(() => clock.sleeping >= 1, 15_000, 'the waiter to wait');
    ac.abort();
    expect(await waiting).toMatchObject({ ok: false, reason: 'ABORTED' });
  });

  it('wait: notices a holder that dies without releasing', async () => {
    const dir = testdir();
    mkdirSync(dir, { recursive: true });
    const holder = spawn('sleep', ['60'], { stdio: 'ignore' });
    const info = systemProbe().inspect(holder.pid!);
    writeFileSync(
      join(dir, 'exec-run.lock'),
      serializeLockRecord(
        staleRecord({}, { pid: holder.pid!, start_time: info.state === 'alive' ? info.startTime : null }),
      ),
    );
    const clock = new ManualClock(Date.now());
    let settled = false;
    const waiting = acquireFileLease({ ...options(dir), ifBusy: 'wait', heartbeat: false, clock }).finally(
      () => (settled = true),
    );
    // killed only once the waiter found it alive and waits
    await eventually(() => clock.sleeping >= 1, 15_000, 'the waiter to wait');
    expect(settled).toBe(false);
    holder.kill('SIGKILL');
    await eventually(() => !processRuns(holder.pid!), 15_000, 'the holder to die');
    // a death changes nothing in the folder: the waiter's next pause ends, it looks again
    await eventually(
      () => {
        if (!settled) clock.advance(50);
        return settled;
      },
      15_000,
      'the waiter to take the lock',
    );
    const r = await waiting;
    expect(r.ok).toBe(true);
    if (r.ok) await r.lease.release();
  });
});
