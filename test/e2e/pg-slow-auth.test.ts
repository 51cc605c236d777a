// A slow link to the database (round trips of 2.6–3 s through a delaying proxy): SCRAM password
// authentication completes because the connect time-out follows the TTL, a lease outlives its
// TTL, and a connect_timeout in the URL is honoured.

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { pgCluster } from '../helpers/pg-test.js';
import { delayingProxy, destroy, ownPrimary, portOf, psql } from '../helpers/pg-topology.js';
import { testProject } from '../helpers/testdir.js';

const cluster = pgCluster();
const suite = cluster ? describe : describe.skip; // skipped only outside CI, where no server could be started

suite('a slow link to the database', () => {
  it(
    'SCRAM password authentication over round trips of 2.6–3 s, TTL 30: the connect time-out follows the TTL, a lease outlives its TTL; connect_timeout in the URL is honoured',
    { timeout: 300_000 },
    async () => {
      const primary = await ownPrimary('app');
      onTestFinished(() => destroy(primary));
      psql(
        primary,
        portOf(primary),
        'postgres',
        `SET password_encryption = 'scram-sha-256'; CREATE ROLE app LOGIN PASSWORD 's3cret'; ALTER DATABASE app OWNER TO app`,
      );
      // the role authenticates with SCRAM (three round trips after the startup packet), not trust
      const hba = join(primary.dataDir, 'pg_hba.conf');
      writeFileSync(hba, `host all app 127.0.0.1/32 scram-sha-256\n${readFileSync(hba, 'utf8')}`);
      psql(primary, portOf(primary), 'postgres', 'SELECT pg_reload_conf()');
      const proxy = await delayingProxy(portOf(primary), 1300, 1500);
      onTestFinished(() => proxy.close());
      const project = testProject({ project: 'app', backend: { type: 'postgres' }, lock: { ttlSeconds: 30 } });
      const slow = `postgres://app:s3cret@127.0.0.1:${proxy.port}/app`;
      const wrong = await runCli(['lock', 'status'], {
        cwd: project,
        env: { ROUTINELY_DATABASE_URL: `postgres://app:wrong@127.0.0.1:${portOf(primary)}/app` },
      });
      expect(wrong.stderr, 'SCRAM is in force').toMatch(/authentication failed/);
      const r = await runCli(['lock', 'run', '--', 'sh', '-c', 'sleep 32; echo done'], {
        cwd: project,
        env: { ROUTINELY_DATABASE_URL: slow },
        timeoutMs: 280_000,
      });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain('done');
      expect(r.stderr).not.toMatch(/lost|timed out|unexpected/);
      // a connect time-out of the user's own, shorter than SCRAM takes here
      const short = await runCli(['lock', 'status'], {
        cwd: project,
        env: { ROUTINELY_DATABASE_URL: `${slow}?connect_timeout=3` },
        timeoutMs: 60_000,
      });
      expect(short.code, short.stderr).toBe(74);
      expect(short.stderr).toMatch(
        /timed out connecting \(no answer within 3s; set connect_timeout=N in the URL for a slower link\)/,
      );
      expect(`${r.stderr}${short.stderr}`).not.toContain('s3cret');
    },
  );
});
