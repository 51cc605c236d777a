// Starts one throwaway PostgreSQL cluster for the whole test run (the database backend's
// tests). Without the binaries the database tests are skipped on a developer machine, and fail
// under CI (CI=true), where `.ci/run` installs the server.

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import type { TestProject } from 'vitest/node';
import { destroyCluster, findPgBin, startCluster, type TestCluster } from './helpers/postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pg: { url: string; dataDir: string; bin: string; runAs: string | null } | { unavailable: string };
  }
}

let cluster: TestCluster | undefined;

export async function setup(project: TestProject): Promise<void> {
  // The e2e tests and the lock tests' fixtures run the built CLI and library: without them every
  // such test would fail with an unrelated-looking assertion ("expected 1 to be +0").
  const dist = new URL('../dist/', import.meta.url);
  const missing = ['cli.cjs', 'index.js', 'index.cjs'].filter((f) => !existsSync(new URL(f, dist)));
  if (missing.length > 0) throw new Error(`dist/ has no ${missing.join(', ')}: run \`npm run build\` first (npm test and npm run test:unit build it)`);
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

export async function teardown(): Promise<void> {
  if (cluster) destroyCluster(cluster);
  const left = leftServers();
  if (left.length > 0) {
    // every server a test starts is stopped in its teardown, also when the test fails
    for (const p of left) {
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    throw new Error(`the suite left servers running (now killed):\n${left.map((p) => `  pid ${p.pid}: ${p.cmdline}`).join('\n')}`);
  }
}

/** PgBouncers and PostgreSQL servers a test started whose folder is gone: nobody stopped them. */
function leftServers(): { pid: number; cmdline: string }[] {
  const out: { pid: number; cmdline: string }[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').join(' ').trim();
    } catch {
      continue;
    }
    const dir = /(\/\S*\/routinely-(?:pgbouncer|pg)-[^/\s]+)/.exec(cmdline)?.[1];
    if (dir && !existsSync(dir)) out.push({ pid: Number(name), cmdline });
  }
  return out;
}
