// Starts one throwaway PostgreSQL cluster for the whole test run (the database backend's
// tests). Without the binaries the database tests are skipped on a developer machine, and fail
// under CI (CI=true), where `.ci/run` installs the server.

import type { TestProject } from 'vitest/node';
import { destroyCluster, findPgBin, startCluster, type TestCluster } from './helpers/postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pg: { url: string; dataDir: string; bin: string; runAs: string | null } | { unavailable: string };
  }
}

let cluster: TestCluster | undefined;

export async function setup(project: TestProject): Promise<void> {
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
}
