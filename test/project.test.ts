// The library's project-level API (SPEC §8): withProjectLock and projectLockStatus, on files and
// on PostgreSQL (where the lock folder says nothing about the lock).

import { describe, expect, it } from 'vitest';
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
});
