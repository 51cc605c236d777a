// A holder of a lease in the database dies (SIGKILL): its work ends with it on its own host, so the
// host that takes the lease over never starts the routine beside the dead holder's command
// (SPEC §4.14; src/exec/death-guard.ts). Found by a fault pass: the command ran on to its end,
// generations 1 and 2 of an exclusive routine side by side on two hosts.

import { describe, expect, it, onTestFinished } from 'vitest';
import { mkdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { eventually, processRuns, runCli, sleep, startCli } from '../helpers/cli.js';
import { freshDatabase, pgCluster } from '../helpers/pg-test.js';
import { schedulers, stopAll } from '../helpers/pg-topology.js';
import { testProject } from '../helpers/testdir.js';
import { httpGet } from '../helpers/http.js';

const cluster = pgCluster();
const suite = cluster ? describe : describe.skip; // skipped only outside CI, where no server could be started

const read = (file: string): string => (existsSync(file) ? readFileSync(file, 'utf8') : '');

suite('a holder of a database lease killed', () => {
  it(
    "an exclusive routine's command ends with its SIGKILLed scheduler, before the other host's scheduler starts the routine",
    { timeout: 90_000 },
    async () => {
      const url = await freshDatabase(cluster!);
      // each start looks for a command of an earlier generation still running (not a zombie)
      const run = [
        'for f in pids/*; do [ -f "$f" ] || continue; p=$(cat "$f")',
        `case $(cut -d' ' -f3 /proc/$p/stat 2>/dev/null) in ''|Z|X) ;; *) echo "overlap $f" >> marks ;; esac; done`,
        'echo $$ > pids/$ROUTINELY_LOCK_GENERATION',
        'echo "start $ROUTINELY_LOCK_GENERATION $ROUTINELY_HOST_ID" >> marks',
        'exec sleep 8',
      ].join('\n');
      const project = testProject({
        project: 'dead',
        backend: { type: 'postgres' },
        lock: { ttlSeconds: 3, refreshSeconds: 1 },
        routines: [{ id: 'x', schedule: '*/2 * * * * *', action: 'command', run }],
      });
      mkdirSync(join(project, 'pids'));
      const marks = join(project, 'marks');
      const [h1, h2] = await schedulers(['h1', 'h2'], project, { ROUTINELY_DATABASE_URL: url }, 80_000);
      await eventually(() => /^start 1 /m.test(read(marks)), 30_000, 'the first start');
      const first = /^start 1 (\S+)$/m.exec(read(marks))![1];
      const [dead, other] = first === 'h1' ? [h1!, h2!] : [h2!, h1!];
      const pid = Number(readFileSync(join(project, 'pids', '1'), 'utf8'));
      expect(processRuns(pid)).toBe(true);
      dead.child.kill('SIGKILL');
      await dead.exited;
      await eventually(() => /^start [2-9]\d* /m.test(read(marks)), 40_000, 'a start by the other host');
      expect(read(marks)).not.toMatch(/overlap/);
      expect(processRuns(pid)).toBe(false);
      await stopAll([other]);
    },
  );

  it("lock run's command, and a job it moved to a group of its own, end with a SIGKILLed lock run", async () => {
    const url = await freshDatabase(cluster!);
    // a TTL no test waits out: nothing but the guard can end them in time
    const project = testProject({ project: 'dead2', backend: { type: 'postgres' }, lock: { ttlSeconds: 300 } });
    const job = join(project, 'job');
    const main = join(project, 'main');
    const holder = startCli(
      ['lock', 'run', '--', 'bash', '-c', `set -m; sleep 61 & echo $! > ${job}; echo $$ > ${main}; wait`],
      {
        cwd: project,
        env: { ROUTINELY_DATABASE_URL: url },
      },
    );
    await eventually(() => read(job).endsWith('\n') && read(main).endsWith('\n'), 20_000, 'the command and its job');
    const pids = [Number(read(main)), Number(read(job))];
    expect(pids.map(processRuns)).toEqual([true, true]);
    holder.child.kill('SIGKILL');
    await holder.exited;
    await eventually(() => !pids.some(processRuns), 10_000, 'the command and its job ended');
  });

  it(
    'a scheduler stalled past its lease while its fire ran: the fire is recorded once (interrupted, by the other host), and the stalled one says its own result was not recorded',
    { timeout: 90_000 },
    async () => {
      const url = await freshDatabase(cluster!);
      const project = testProject({
        project: 'stalled',
        backend: { type: 'postgres' },
        lock: { ttlSeconds: 3, refreshSeconds: 1 },
        routines: [
          { id: 'x', schedule: '*/2 * * * * *', action: 'command', run: 'echo "$ROUTINELY_HOST_ID" >> marks; sleep 8' },
        ],
      });
      const marks = join(project, 'marks');
      const [h1, h2] = await schedulers(['h1', 'h2'], project, { ROUTINELY_DATABASE_URL: url }, 80_000);
      await eventually(() => read(marks) !== '', 30_000, 'the first start');
      const stalled = read(marks).startsWith('h1') ? h1! : h2!;
      stalled.child.kill('SIGSTOP');
      await sleep(6000);
      stalled.child.kill('SIGCONT');
      const [line] = await stalled.waitFor(
        /x: not recorded \(failure: .*\): another scheduler recorded this fire already, as interrupted/,
        30_000,
      );
      expect(line).toBeTruthy();
      const { sql } = await import('../helpers/pg-test.js');
      const rows = await sql<{ at: string; reason: string | null }>(
        url,
        "SELECT entry->>'scheduled_at' AS at, entry->>'reason' AS reason FROM routinely_history WHERE routine = 'x' ORDER BY seq",
      );
      // each tick once; the stalled fire's record is the other host's
      expect(new Set(rows.map((r) => r.at)).size).toBe(rows.length);
      expect(rows.some((r) => /^interrupted: /.test(r.reason ?? ''))).toBe(true);
      await stopAll([h1!, h2!]);
    },
  );

  it(
    "a lockless routine's fire left open by a scheduler SIGKILLed on another host is recorded interrupted by the host that lives (routine list said running for ever)",
    { timeout: 90_000 },
    async () => {
      const url = await freshDatabase(cluster!);
      // the routine's first fire runs long (the one its scheduler dies in); the others end at once
      const run = [
        'echo "start $ROUTINELY_HOST_ID $$" >> marks',
        'if [ ! -e first ]; then echo $$ > first; exec sleep 60; fi',
      ].join('\n');
      const project = testProject({
        project: 'dead4',
        backend: { type: 'postgres' },
        lock: { ttlSeconds: 3, refreshSeconds: 1 },
        routines: [{ id: 'x', schedule: '*/3 * * * * *', action: 'command', run, exclusive: false }],
      });
      const marks = join(project, 'marks');
      const env = { ROUTINELY_DATABASE_URL: url };
      const [h1, h2] = await schedulers(['h1', 'h2'], project, env, 80_000);
      await eventually(() => read(join(project, 'first')).endsWith('\n'), 30_000, 'the first fire');
      const [, host, pid] = /^start (\S+) (\d+)$/m.exec(read(marks))!;
      const [dead, other] = host === 'h1' ? [h1!, h2!] : [h2!, h1!];
      dead.child.kill('SIGKILL');
      await dead.exited;
      process.kill(Number(pid), 'SIGKILL'); // (no lock: nothing of the dead host ends it here)
      await other.waitFor(/left open by a scheduler whose lease ran out .*\(interrupted\)/, 30_000);
      const history = await runCli(['routine', 'history', 'x', '--json'], { cwd: project, env });
      expect(history.code, history.stderr).toBe(0);
      expect(history.stdout).toContain(
        `interrupted: pid ${dead.child.pid} on ${host} ended before the outcome was recorded`,
      );
      // nothing of it is open any more: the list says what the living host's fires did
      await eventually(
        async () => {
          const list = await runCli(['routine', 'list', '--json'], { cwd: project, env });
          const x = (JSON.parse(list.stdout) as { id: string; phase?: string }[]).find((r) => r.id === 'x');
          return x !== undefined && !JSON.stringify(x).includes('"phase":"running"');
        },
        20_000,
        'no open fire of the dead host',
      );
      await stopAll([other]);
    },
  );

  it(
    "a fire started from a scheduler's page whose scheduler is SIGKILLed is recorded interrupted by another host's scheduler",
    { timeout: 90_000 },
    async () => {
      const url = await freshDatabase(cluster!);
      const project = testProject({
        project: 'dead5',
        http: { actions: true },
        backend: { type: 'postgres' },
        lock: { ttlSeconds: 3, refreshSeconds: 1 },
        routines: [
          { id: 'm', schedule: '0 0 1 1 *', action: 'command', run: 'echo $$ > pid; exec sleep 60', exclusive: false },
        ],
      });
      const env = { ROUTINELY_DATABASE_URL: url };
      const token = 'a-token-for-this-test-only';
      const dead = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], {
        cwd: project,
        env: { ...env, ROUTINELY_HOST_ID: 'h1', ROUTINELY_HTTP_TOKEN: token },
        timeoutMs: 80_000,
      });
      onTestFinished(() => {
        if (dead.child.exitCode === null) dead.child.kill('SIGKILL');
      });
      const page = (await dead.waitFor(/\[http\] listening on (http:\/\/\S+)/, 60_000))[1]!;
      const [other] = await schedulers(['h2'], project, env, 80_000);
      const posted = await httpGet(
        `${page}api/routines/m/run`,
        { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        'POST',
        '{}',
      );
      expect(posted.status).toBe(202);
      await eventually(() => read(join(project, 'pid')).endsWith('\n'), 30_000, 'the manual fire');
      dead.child.kill('SIGKILL');
      await dead.exited;
      process.kill(Number(read(join(project, 'pid'))), 'SIGKILL');
      await other!.waitFor(/left open by a scheduler whose lease ran out .*\(interrupted\)/, 30_000);
      const history = await runCli(['routine', 'history', 'm', '--json'], { cwd: project, env });
      expect(history.stdout).toContain(
        `interrupted: pid ${dead.child.pid} on h1 ended before the outcome was recorded`,
      );
      await stopAll([other!]);
    },
  );
});
