// Access to the test cluster from a test file: a fresh database per test file or test, and the
// rule that database tests fail, not skip, under CI.

import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import type { TestCluster } from './postgres.js';

export function pgCluster(): TestCluster | null {
  const info = inject('pg');
  if ('unavailable' in info) {
    if (process.env.CI === 'true') throw new Error(`CI=true but ${info.unavailable}`);
    return null;
  }
  return info;
}

/** Creates an empty database and returns its URL. */
export async function freshDatabase(cluster: TestCluster): Promise<string> {
  const name = `t_${randomBytes(6).toString('hex')}`;
  const client = new pg.Client({ connectionString: cluster.url });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(cluster.url);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Runs one statement on its own connection and returns its rows. */
export async function sql<R extends pg.QueryResultRow>(
  url: string,
  text: string,
  values: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/** Runs an SQL script with psql (its text on stdin, so a row of any size fits), as an operator or
 * a database writer would; throws with psql's own words when a statement fails. */
export function psqlScript(url: string, script: string): string {
  const r = spawnSync('psql', ['-X', '-q', '-At', '-v', 'ON_ERROR_STOP=1', '-d', url], {
    input: script,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.status !== 0) throw new Error(`psql: ${r.stderr || r.error?.message}`);
  return r.stdout;
}
