// Spare heartbeat files (docs/lock.md rule 15): a released holder's heartbeat file is left as
// `<key>.spare.<random>` for the next holder. Only a whole heartbeat file of ours is taken; the
// names of another key (keys may contain dots) are never touched; a fault while taking one is
// said and a new file made; the collector keeps a few; a reader that meets a release between
// its listing and its read sees a free lock, not a stale one.

import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { readChecksummed } from '../../src/checksum.js';
import { attemptAcquire, type FileLockOptions } from '../../src/file-lock/acquire.js';
import { setDurableIoForTests } from '../../src/fs/durable.js';
import { setIoNoticeSink } from '../../src/fs/io-notice.js';
import { systemProbe } from '../../src/process/identity.js';
import { testdir } from '../helpers/testdir.js';

const options = (lockDir: string, extra: Partial<FileLockOptions> = {}): FileLockOptions => ({
  lockDir,
  key: 'exec-run',
  ttlMs: 10_000,
  refreshMs: 3_000,
  owner: { command: 'test' },
  ...extra,
});

async function take(opts: FileLockOptions) {
  const r = await attemptAcquire(opts);
  if (!r.ok) throw new Error(`expected the lock, got ${r.reason}: ${r.why}`);
  onTestFinished(() => {
    r.lease.releaseSync();
  });
  return r;
}

const spares = (dir: string, key = 'exec-run'): string[] =>
  readdirSync(dir).filter((n) => new RegExp(`^${key.replace(/\./g, '\\.')}\\.spare\\.[0-9a-f]{16}$`).test(n));

/** The heartbeat file of `lockId` is a fresh one of ours: 0600, one name, its own record. */
function expectOwnBeat(dir: string, lockId: string): void {
  const file = join(dir, `exec-run.beat.${lockId}`);
  const st = statSync(file);
  expect(st.isFile()).toBe(true);
  expect(st.mode & 0o777).toBe(0o600);
  expect(st.nlink).toBe(1);
  expect(JSON.parse(readChecksummed(readFileSync(file, 'utf8'))!)).toMatchObject({ lock_id: lockId });
}

let restoreIo: (() => void) | null = null;
afterEach(() => {
  restoreIo?.();
  restoreIo = null;
  setIoNoticeSink((m) => process.stderr.write(`routinely: warning: ${m}\n`));
});

describe('spare heartbeat files', () => {
  const planted: [string, (path: string, victim: string) => void][] = [
    ['a symlink to a file of ours', (p, victim) => symlinkSync(victim, p)],
    ['a FIFO', (p) => execFileSync('mkfifo', ['-m', '600', p])],
    ['a folder', (p) => mkdirSync(p, { mode: 0o700 })],
    ['a file that others may write (0666)', (p) => writeFileSync(p, 'x'.repeat(4096), { mode: 0o666 })],
    ['a file of another size', (p) => writeFileSync(p, 'x'.repeat(100), { mode: 0o600 })],
  ];
  it.each(planted)('never takes %s: the lock is taken with a new heartbeat file', async (_what, plant) => {
    const dir = join(testdir(), 'locks');
    (await take(options(dir))).lease.releaseSync();
    for (const s of spares(dir)) execFileSync('rm', [join(dir, s)]);
    const victim = join(testdir(), 'state.json');
    writeFileSync(victim, 'x'.repeat(4096), { mode: 0o600 });
    const name = 'exec-run.spare.0123456789abcdef';
    plant(join(dir, name), victim);
    const { lease } = await take(options(dir));
    expectOwnBeat(dir, lease.lockId);
    expect(readFileSync(victim, 'utf8')).toBe('x'.repeat(4096));
    expect(lease.refresh()).toEqual({ ok: true });
  });

  it('never touches the files of a key that starts with this key’s spare prefix', async () => {
    // routine ids may contain dots: `backup` and `backup.spare.weekly` rotate their histories
    // under the keys `history-backup` and `history-backup.spare.weekly`, in one folder
    const dir = join(testdir(), 'locks');
    const other = await take(options(dir, { key: 'history-backup.spare.weekly' }));
    const before = new Map(readdirSync(dir).map((n) => [n, statSync(join(dir, n)).ino] as const));
    // enough cycles of the shorter key for its collector to run
    for (let i = 0; i < 30; i++) (await take(options(dir, { key: 'history-backup' }))).lease.releaseSync();
    for (const [name, ino] of before) expect(statSync(join(dir, name)).ino, name).toBe(ino);
    expect(other.lease.refresh()).toEqual({ ok: true });
    const again = await attemptAcquire(options(dir, { key: 'history-backup.spare.weekly' }));
    expect(again.ok).toBe(false);
  });

  it('a released holder’s late calls never touch the heartbeat file it handed on', async () => {
    const dir = join(testdir(), 'locks');
    const first = (await take(options(dir))).lease;
    const firstId = first.lockId;
    first.releaseSync();
    const next = (await take(options(dir))).lease;
    const beat = join(dir, `exec-run.beat.${next.lockId}`);
    const before = readFileSync(beat);
    expect(first.refresh().ok).toBe(false);
    first.annotate({ run_id: 'r-20261205T000000Z-abcd' });
    first.trackChild(process.pid);
    await new Promise((r) => setTimeout(r, 300)); // past the child write's delay
    expect(readFileSync(beat).equals(before)).toBe(true);
    expect(existsSync(join(dir, `exec-run.children.${firstId}`))).toBe(false);
    expect(next.refresh()).toEqual({ ok: true });
  });

  it('keeps a few spares: the collector removes the rest', async () => {
    const dir = join(testdir(), 'locks');
    (await take(options(dir))).lease.releaseSync();
    for (let i = 0; i < 7; i++)
      writeFileSync(join(dir, `exec-run.spare.${String(i).repeat(16)}`), 'x'.repeat(4096), { mode: 0o600 });
    (await take(options(dir))).lease.releaseSync();
    expect(spares(dir).length).toBeGreaterThan(0);
    expect(spares(dir).length).toBeLessThanOrEqual(3);
  });

  it('a spare that cannot be written is said and removed, and a new heartbeat file made', async () => {
    const dir = join(testdir(), 'locks');
    (await take(options(dir))).lease.releaseSync();
    expect(spares(dir)).toHaveLength(1);
    const said: string[] = [];
    setIoNoticeSink((m) => said.push(m));
    restoreIo = setDurableIoForTests({
      write: (fd, buf, off, len, pos) => {
        if (len === 4096) throw Object.assign(new Error('EIO: injected'), { code: 'EIO' });
        return writeSync(fd, buf, off, len, pos);
      },
    });
    const { lease } = await take(options(dir));
    restoreIo();
    restoreIo = null;
    expectOwnBeat(dir, lease.lockId);
    expect(spares(dir)).toHaveLength(0);
    expect(said.join('\n')).toMatch(/writing the spare heartbeat file .*exec-run\.beat\./);
  });

  it('a holder released between a reader’s listing and its read of the slot is free to it, not stale', async () => {
    const dir = join(testdir(), 'locks');
    // the first holder's own record says it expired (a short TTL, no heartbeat since), and the
    // reader judges it as another host's: by that expiry alone
    const first = await take(options(dir, { ttlMs: 200 }));
    await new Promise((r) => setTimeout(r, 300));
    const elsewhere = { ...systemProbe(), host: 'another-host' };
    const r = await take(
      options(dir, {
        probe: elsewhere,
        hooks: {
          step: (name) => {
            if (name === 'acquire:read-slot') first.lease.releaseSync();
          },
        },
      }),
    );
    expect(r.takeover).toBeNull();
    expect(readdirSync(dir).filter((n) => n.includes('.lock.stale.'))).toEqual([]);
    expect(existsSync(join(dir, 'exec-run.free.1'))).toBe(true);
  });
});
