// The library's project-level API (SPEC §8): withProjectLock and projectLockStatus, on files and
// on PostgreSQL (where the lock folder says nothing about the lock).

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../src/errors.js';
import { projectLockStatus, withProjectLock } from '../src/project.js';
import { freshDatabase, pgCluster } from './helpers/pg-test.js';
import { testProject } from './helpers/testdir.js';

const cluster = pgCluster();

async function projects(): Promise<{ kind: string; cwd: string; env: NodeJS.ProcessEnv }[]> {
  const out = [{ kind: 'file', cwd: testProject(), env: process.env }];
  if (cluster) {
    const url = await freshDatabase(cluster);
    out.push({
      kind: 'postgres',
      cwd: testProject({ project: 'lib', backend: { type: 'postgres' } }),
      env: { ...process.env, ROUTINELY_DATABASE_URL: url },
    });
  }
  return out;
}

describe('withProjectLock and projectLockStatus', () => {
  it('hold the exec lock for the callback, refuse a second holder, and report the lock as the CLI does, on both backends', async () => {
    for (const p of await projects()) {
      expect((await projectLockStatus({ cwd: p.cwd, env: p.env })).state, p.kind).toBe('free');
      const r = await withProjectLock(
        { cwd: p.cwd, env: p.env, ifBusy: 'fail', owner: { command: 'migrate' } },
        async (lease) => {
          const seen = await projectLockStatus({ cwd: p.cwd, env: p.env });
          const second = await withProjectLock({ cwd: p.cwd, env: p.env, ifBusy: 'fail' }, async () => 'ran');
          return { seen, second, generation: lease.generation };
        },
      );
      expect(r.ok, p.kind).toBe(true);
      if (!r.ok) continue;
      expect(r.value.seen, p.kind).toMatchObject({
        state: 'held',
        record: { owner: { command: 'migrate', pid: process.pid } },
      });
      expect(r.value.second, p.kind).toMatchObject({
        ok: false,
        reason: 'busy',
        why: expect.stringContaining(`pid ${process.pid}`),
      });
      expect(typeof r.value.generation).toBe('number');
      expect((await projectLockStatus({ cwd: p.cwd, env: p.env })).state, p.kind).toBe('free');
    }
  }, 60_000);

  it('the owner a caller gives never replaces who holds the lock (a pid, start time or host in it made a live holder look dead, taken over at once)', async () => {
    const cwd = testProject();
    const r = await withProjectLock(
      { cwd, owner: { command: 'deploy', pid: 1, start_time: '1', host: 'elsewhere' } as never },
      async () => {
        const seen = await projectLockStatus({ cwd });
        const second = await withProjectLock({ cwd, ifBusy: 'fail' }, async () => 'ran');
        return { seen, second };
      },
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value.seen.record?.owner).toMatchObject({ command: 'deploy', pid: process.pid });
    expect(r.value.seen.record?.owner.host).not.toBe('elsewhere');
    expect(r.value.second).toMatchObject({ ok: false, reason: 'busy' });
  });

  it('bad options are refused (UsageError) before anything is written: not even the state folder', async () => {
    const cwd = testProject();
    for (const bad of [
      { ifBusy: 'WAIT' },
      { ifBusy: 'wait', waitTimeoutMs: '500' },
      { ifBusy: 'wait', waitTimeoutMs: -1 },
      { ifBusy: 'wait', waitTimeoutSeconds: 1 },
      { lock: 5 },
      { lock: 'Bad Name' },
      { lock: 'exec-run' },
      { lock: 'scheduler' },
      { lock: 'db', key: 'exec-run' },
      { key: '../x' },
      { signal: 'x' },
    ]) {
      await expect(
        withProjectLock({ cwd, ...(bad as object) }, async () => 1),
        JSON.stringify(bad),
      ).rejects.toBeInstanceOf(UsageError);
    }
    expect(existsSync(join(cwd, '.routinely'))).toBe(false);
  });

  it('a lease fn releases itself is no lost lock; an AbortSignal aborted before the call runs nothing', async () => {
    const cwd = testProject();
    const released = await withProjectLock({ cwd }, async (lease) => {
      await lease.release();
      return 'done';
    });
    expect(released).toEqual({ ok: true, value: 'done' });
    let ran = false;
    const aborted = await withProjectLock({ cwd, ifBusy: 'wait', signal: AbortSignal.abort() }, async () => {
      ran = true;
    });
    expect(aborted).toMatchObject({ ok: false, reason: 'aborted' });
    expect(ran).toBe(false);
  });
});
