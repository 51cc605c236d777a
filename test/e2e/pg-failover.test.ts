// PostgreSQL as teams run it (docs/postgres.md "Production topologies"), where the primary is:
// a replicated primary that fails over (asynchronous and synchronous standbys, our own servers,
// killed and promoted), a standby in the URL, and libpq's multi-host URLs. The built CLI.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { eventually, runCli, startCli } from '../helpers/cli.js';
import { freshDatabase, pgCluster } from '../helpers/pg-test.js';
import {
  caughtUp,
  crash,
  dbUrl,
  destroy,
  freePort,
  makeSynchronous,
  ownPrimary,
  portOf,
  promote,
  startStandby,
  stop,
} from '../helpers/pg-topology.js';
import { startServer } from '../helpers/postgres.js';
import { testProject } from '../helpers/testdir.js';

const cluster = pgCluster();
const suite = cluster ? describe : describe.skip; // skipped only outside CI, where no server could be started
const TTL_S = 5;

/** A bash command that appends `<who> start <epoch ms> <generation>`, then `<who> mark <epoch
 * µs>` every 50 ms for `seconds`, then `<who> end <epoch ms>`: while its marks go on, it works. */
const stamp = (file: string, who: string, seconds: number): string =>
  `echo "${who} start $(date +%s%3N) $ROUTINELY_LOCK_GENERATION" >> ${file}; for i in $(seq ${seconds * 20}); do echo "${who} mark \${EPOCHREALTIME/./}" >> ${file}; sleep 0.05; done; echo "${who} end $(date +%s%3N)" >> ${file}`;

function events(file: string): Map<string, { start: number; gen: number; lastMark?: number; end?: number }> {
  const m = new Map<string, { start: number; gen: number; lastMark?: number; end?: number }>();
  if (!existsSync(file)) return m;
  // only whole lines: the file exists (bash's `>>` made it) before its first line is written
  const text = readFileSync(file, 'utf8');
  for (const line of text.slice(0, text.lastIndexOf('\n') + 1).split('\n')) {
    const [who, kind, t, gen] = line.split(' ');
    if (kind === 'start') m.set(who!, { start: Number(t), gen: Number(gen) });
    else if (kind === 'mark') m.get(who!)!.lastMark = Number(t) / 1000;
    else if (kind === 'end') m.get(who!)!.end = Number(t);
  }
  return m;
}

suite('failover of a replicated primary: one holder, generations only rise', () => {
  it.each(['asynchronous, the standby lagging', 'synchronous'])('%s', { timeout: 120_000 }, async (mode) => {
    const primary = await ownPrimary('app');
    onTestFinished(() => destroy(primary));
    const project = testProject({ project: 'app', backend: { type: 'postgres' }, lock: { ttlSeconds: TTL_S } });
    const ev = join(project, 'events');
    const onPrimary = { ROUTINELY_DATABASE_URL: dbUrl(portOf(primary), 'app') };
    // the schema and a first lease exist, and reach the standby
    expect((await runCli(['lock', 'run', '--', 'true'], { cwd: project, env: onPrimary })).code).toBe(0);
    const standby = await startStandby(primary);
    onTestFinished(() => destroy(standby));
    await caughtUp(primary, standby);
    const onStandby = { ROUTINELY_DATABASE_URL: dbUrl(portOf(standby), 'app') };
    // a URL that reaches a standby: exit 74 naming it, never "unexpected error"
    const ro = await runCli(['lock', 'run', '--', 'true'], { cwd: project, env: onStandby });
    expect(ro.code, ro.stderr).toBe(74);
    expect(ro.stderr).toMatch(
      new RegExp(`database 127\\.0\\.0\\.1:${portOf(standby)}/app: the server is a read-only standby`),
    );
    if (mode === 'synchronous') makeSynchronous(primary);
    else stop(standby); // lags from here on: it never sees A's lease

    const a = startCli(['lock', 'run', '--', 'bash', '-c', stamp(ev, 'A', 30)], {
      cwd: project,
      env: onPrimary,
      timeoutMs: 120_000,
    });
    await eventually(() => events(ev).has('A'), 20_000, 'A started');
    crash(primary);
    if (mode !== 'synchronous') startServer(standby);
    promote(standby);
    const b = startCli(['lock', 'run', '--if-busy', 'wait', '--', 'bash', '-c', stamp(ev, 'B', 0.2)], {
      cwd: project,
      env: onStandby,
      timeoutMs: 120_000,
    });
    const aExit = await a.exited;
    expect(aExit.code, a.stderr()).not.toBe(0); // its lease ran out with its primary: its work was stopped
    expect((await b.exited).code, b.stderr()).toBe(0);
    const e = events(ev);
    const A = e.get('A')!;
    const B = e.get('B')!;
    expect(A.end, 'A was stopped, never finished').toBeUndefined();
    // both commands stamp the same clock: A's last sign of work came before B began
    expect(A.lastMark, 'A worked a while').toBeDefined();
    expect(B.start, `B started only after A's work was gone (A's last mark ${A.lastMark})`).toBeGreaterThan(
      A.lastMark!,
    );
    expect(B.gen, `B's generation ${B.gen} above A's ${A.gen}`).toBeGreaterThan(A.gen);
    // in plain words: nobody holds it, and why not yet
    expect(b.stderr()).toMatch(
      /waiting for the exec lock, held by no one yet: the database failed over \(timeline 2, first seen [^)]+\), and no lease is granted until every lease of the old primary has run out, one TTL later \(\d+s more\)/,
    );
  });
});

suite('multi-host URLs (libpq)', () => {
  it('the first host down, the second the primary: target_session_attrs=read-write follows the primary', async () => {
    const direct = await freshDatabase(cluster!);
    const db = new URL(direct).pathname.slice(1);
    const down = await freePort();
    const project = testProject({ project: 'app', backend: { type: 'postgres' } });
    const url = `postgres://postgres@127.0.0.1:${down},127.0.0.1:${portOf(cluster!)}/${db}?target_session_attrs=read-write`;
    const r = await runCli(['lock', 'run', '--', 'sh', '-c', 'echo ran > ran'], {
      cwd: project,
      env: { ROUTINELY_DATABASE_URL: url },
    });
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(join(project, 'ran'), 'utf8')).toBe('ran\n');
    const st = await runCli(['lock', 'status'], { cwd: project, env: { ROUTINELY_DATABASE_URL: url } });
    expect(st.code, st.stderr).toBe(0);
    // every host down: 74, naming each
    const none = await runCli(['lock', 'run', '--', 'true'], {
      cwd: project,
      env: { ROUTINELY_DATABASE_URL: `postgres://postgres@127.0.0.1:${down},127.0.0.1:${down}/${db}` },
    });
    expect(none.code).toBe(74);
    expect(none.stderr).toMatch(
      new RegExp(
        `no host is reachable \\(127\\.0\\.0\\.1:${down}/${db}: connection refused[^;]*; 127\\.0\\.0\\.1:${down}/${db}: connection refused`,
      ),
    );
    // a password with '/' (base64) is never shown, in any message
    writeFileSync(join(project, 'x'), '');
    const secret = await runCli(['lock', 'status'], {
      cwd: project,
      env: { ROUTINELY_DATABASE_URL: `postgres://app:Zm9v/YmFy+cXV4@127.0.0.1:${down}/${db}` },
    });
    expect(secret.code).toBe(74);
    expect(secret.stderr).not.toMatch(/YmFy|Zm9v/);
  });
});
