// Once per test run, in the vitest process: checks that dist/ is built, starts one throwaway
// PostgreSQL cluster for the database backend's tests (without the binaries those tests skip on
// a developer machine and fail under CI=true, where `.ci/run` installs the server), and makes sure
// nothing the run starts outlives it (scripts/suite-processes.mjs): every process a test starts
// carries the run's name in its environment; what an earlier run of this checkout left (cut short
// by SIGKILL) is killed here, what this run leaves is killed at its end, by the teardown or, when
// vitest is stopped by a signal or killed, by a detached reaper that watches it.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { TestProject } from 'vitest/node';
import { destroyCluster, findPgBin, startCluster, type TestCluster } from './helpers/postgres.js';
import { runTag, SUITE_VAR, sweep, sweepEarlierRuns, type SuiteProcess } from '../scripts/suite-processes.mjs';

declare module 'vitest' {
  export interface ProvidedContext {
    pg: { url: string; dataDir: string; bin: string; runAs: string | null } | { unavailable: string };
    /** Where this run's package is made (helpers/package.ts). */
    packageDir: string;
  }
}

const ROOT = resolve(import.meta.dirname, '..');
let cluster: TestCluster | undefined;
let tag: string | undefined;
let packageDir: string | undefined;

export async function setup(project: TestProject): Promise<void> {
  // The e2e tests and the lock tests' fixtures run the built CLI and library: without them every
  // such test would fail with an unrelated-looking assertion ("expected 1 to be +0").
  const dist = new URL('../dist/', import.meta.url);
  const missing = ['cli.cjs', 'index.js', 'index.cjs'].filter((f) => !existsSync(new URL(f, dist)));
  if (missing.length > 0)
    throw new Error(
      `dist/ has no ${missing.join(', ')}: run \`npm run build\` first (npm test and npm run test:unit build it)`,
    );
  tag = runTag(ROOT);
  const earlier = sweepEarlierRuns(tag);
  if (earlier.length > 0)
    console.warn(`killed ${earlier.length} processes an earlier test run of this checkout left:\n${describe(earlier)}`);
  // the workers are forked after this, with this environment, and hand it to what they start
  process.env[SUITE_VAR] = tag;
  startReaper(tag);
  process.once('exit', () => sweep((t) => t === tag));
  // where the package of this run is made, by the first test that needs it (helpers/package.ts)
  packageDir = mkdtempSync(join(tmpdir(), 'routinely-package-'));
  project.provide('packageDir', packageDir);
  if (!findPgBin()) {
    project.provide('pg', { unavailable: 'PostgreSQL binaries not found (Debian package "postgresql")' });
    return;
  }
  try {
    cluster = await startCluster();
    project.provide('pg', cluster);
  } catch (err) {
    project.provide('pg', { unavailable: `could not start PostgreSQL: ${(err as Error).message}` });
  }
}

export function teardown(): void {
  if (cluster) destroyCluster(cluster);
  const left = sweep((t) => t === tag);
  if (packageDir) rmSync(packageDir, { recursive: true, force: true });
  // A server, browser or scheduler still running is a test that does not stop what it starts,
  // also when it fails. (A command orphaned on purpose, its lock holder SIGKILLed, is not.)
  const servers = left.filter((p) => /postgres|pgbouncer|prometheus|chrom|scheduler start|serve/.test(p.cmdline));
  if (servers.length > 0) throw new Error(`the suite left servers running (now killed):\n${describe(servers)}`);
}

function describe(ps: SuiteProcess[]): string {
  return ps.map((p) => `  pid ${p.pid}: ${p.cmdline.slice(0, 200)}`).join('\n');
}

/** The watcher for the ends the teardown never sees (a signal to vitest, SIGKILL, a CI time-out):
 * a process of its own session, without the run's variable, so that no sweep takes it. */
function startReaper(run: string): void {
  const env = { ...process.env };
  delete env[SUITE_VAR];
  spawn(process.execPath, [resolve(ROOT, 'scripts/suite-reaper.mjs'), run], {
    detached: true,
    stdio: 'ignore',
    env,
  }).unref();
}
