// A slow link to the database (round trips of 2.6–3 s through a delaying proxy): a scheduler's
// lease and an exec lease that nobody else takes are kept, heartbeat after heartbeat.

import { describe, expect, it, onTestFinished } from 'vitest';
import { runCli, startCli } from '../helpers/cli.js';
import { freshDatabase, pgCluster } from '../helpers/pg-test.js';
import { delayingProxy } from '../helpers/pg-topology.js';
import { testProject } from '../helpers/testdir.js';

const cluster = pgCluster();
const suite = cluster ? describe : describe.skip; // skipped only outside CI, where no server could be started

suite('a slow link to the database', () => {
  it(
    "3 s round trips, TTL 10 / refresh 3: a scheduler's lease and an exec lease nobody else takes are kept for 4 TTLs (40 s)",
    { timeout: 300_000 },
    async () => {
      const url = new URL(await freshDatabase(cluster!));
      // the schema first, directly
      const project = testProject({
        project: 'app',
        backend: { type: 'postgres' },
        lock: { ttlSeconds: 10, refreshSeconds: 3 },
      });
      expect(
        (await runCli(['lock', 'run', '--', 'true'], { cwd: project, env: { ROUTINELY_DATABASE_URL: url.toString() } }))
          .code,
      ).toBe(0);
      const proxy = await delayingProxy(Number(url.port), 1300, 1500); // round trips of 2.6–3 s: the slow end of 1–3 s
      onTestFinished(() => proxy.close());
      url.port = String(proxy.port);
      const env = { ROUTINELY_DATABASE_URL: url.toString() };
      // the scheduler's own lease (no command of its own to report) and an exec lease
      const s = startCli(['scheduler', 'start'], { cwd: project, env, timeoutMs: 290_000 });
      await s.waitFor(/\[scheduler\] started/, 60_000);
      const r = await runCli(['lock', 'run', '--', 'sh', '-c', 'sleep 40; echo done'], {
        cwd: project,
        env,
        timeoutMs: 290_000,
      });
      expect(r.stderr).not.toMatch(/lost|unexpected/);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain('done');
      expect(s.child.exitCode, s.stdout()).toBeNull();
      expect(s.stdout()).not.toMatch(/lock lost|lease/);
      s.child.kill('SIGTERM');
      expect((await s.exited).code, s.stdout()).toBe(0);
    },
  );
});
