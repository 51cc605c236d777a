// Schedulers sharing a database as a fleet runs them: all stalled at once (SIGSTOP, as a loaded
// machine does), and rolling restarts. Every per-second tick is recorded exactly once.

import { describe, expect, it, onTestFinished } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { eventually, runCli, sleep, startCli } from '../helpers/cli.js';
import { freshDatabase, pgCluster } from '../helpers/pg-test.js';
import { nextSecond, perSecond, schedulers, secondsAgo, stopAll, tickAccount } from '../helpers/pg-topology.js';
import { testProject } from '../helpers/testdir.js';

const cluster = pgCluster();
const suite = cluster ? describe : describe.skip; // skipped only outside CI, where no server could be started

suite('rolling restarts of schedulers sharing a database', () => {
  it(
    "a scheduler stalled past its TTL takes its lock again, and its claims stay its own: none after the retake is taken over as a dead one's",
    { timeout: 120_000 },
    async () => {
      const url = await freshDatabase(cluster!);
      const { sql } = await import('../helpers/pg-test.js');
      const project = testProject({
        project: 'app',
        backend: { type: 'postgres' },
        lock: { ttlSeconds: 3, refreshSeconds: 1 },
        // several, so that h1 wins some of the ticks both schedulers go for
        routines: ['n0', 'n1', 'n2', 'n3', 'n4'].map((id) => ({
          id,
          schedule: '* * * * * *',
          action: 'command',
          run: 'true',
          exclusive: false,
        })),
      });
      const env = { ROUTINELY_DATABASE_URL: url };
      const [h1, h2] = await schedulers(['h1', 'h2'], project, env, 110_000);
      h1!.child.kill('SIGSTOP');
      await sleep(5000);
      h1!.child.kill('SIGCONT');
      await h1!.waitFor(/scheduler lock taken again/, 30_000);
      const since = new Date().toISOString();
      const claimersSince = async (): Promise<string[]> =>
        (
          await sql<{ claimer: string }>(
            url,
            `SELECT DISTINCT claimer FROM routinely_ticks WHERE host = 'h1' AND scheduled_at > '${since}'`,
          )
        ).map((c) => c.claimer);
      // (h1 may lose every tick for a while to h2: waited for until it has claimed some)
      await eventually(
        async () => (await claimersSince()).length > 0,
        30_000,
        'a claim of h1 since it took its lock again',
      );
      await sleep(2000);
      // the new lease names the claimer of the first (the lock id its claims carry)
      const lease = await sql<{ lock_id: string; claimer: string | null }>(
        url,
        "SELECT lock_id, owner->>'claimer' AS claimer FROM routinely_leases WHERE key = 'scheduler@h1'",
      );
      expect(lease[0]!.claimer).toMatch(/^[0-9a-f]{32}$/);
      expect(lease[0]!.lock_id).not.toBe(lease[0]!.claimer);
      expect(await claimersSince()).toEqual([lease[0]!.claimer]);
      // (claims h1 made before it stalled, and had not fired, are h2's to take over while h1's
      // lease has run out: only a tick after the retake must never be)
      const takenSince = [...h2!.stdout().matchAll(/took over n\d of (\S+) \(claimed by h1/g)].filter(
        (t) => t[1]! > since,
      );
      expect(takenSince.map((t) => t[0])).toEqual([]);
      const refusedSince = [...h1!.stdout().matchAll(/the tick of (\S+) of routine n\d was taken over/g)].filter(
        (t) => t[1]! > since,
      );
      expect(refusedSince.map((t) => t[0])).toEqual([]);
      await stopAll([h1!, h2!]);
    },
  );

  it(
    'a retry due after its scheduler took its lock again runs: the claim of its tick is still its own',
    { timeout: 150_000 },
    async () => {
      const url = await freshDatabase(cluster!);
      // once a minute, at a second a few seconds from now (after the scheduler is up, also on a
      // loaded machine): one tick, then its retry 9-11 s later
      const at = new Date(Date.now() + 8000).getSeconds();
      const project = testProject({
        project: 'app',
        backend: { type: 'postgres' },
        lock: { ttlSeconds: 3, refreshSeconds: 1 },
        routines: [
          {
            id: 'r',
            schedule: `${at} * * * * *`,
            action: 'command',
            run: 'echo try >> tries; exit 4',
            retry: { attempts: 1, backoffSeconds: 9 },
          },
        ],
      });
      const tries = (): number => {
        try {
          return readFileSync(join(project, 'tries'), 'utf8').split('\n').length - 1;
        } catch {
          return 0;
        }
      };
      const [h1] = await schedulers(['h1'], project, { ROUTINELY_DATABASE_URL: url }, 140_000);
      await eventually(() => tries() === 1, 40_000, 'the first attempt');
      // stalled past the TTL during the back-off: its lease runs out, and it takes its lock again
      h1!.child.kill('SIGSTOP');
      await sleep(4500);
      h1!.child.kill('SIGCONT');
      await h1!.waitFor(/scheduler lock taken again/, 20_000);
      await eventually(() => tries() === 2, 20_000, `the retry (${h1!.stdout()})`);
      await stopAll([h1!]);
      expect(h1!.stdout()).not.toMatch(/taken over by another scheduler|not started/);
      expect(h1!.stdout()).toMatch(/\[routine\] retrying r/);
    },
  );

  it(
    'a scheduler SIGKILLed while its fire holds the exec lock: the other scheduler records that fire interrupted (it showed as running for good on every host)',
    { timeout: 120_000 },
    async () => {
      const url = await freshDatabase(cluster!);
      const project = testProject({
        project: 'app',
        backend: { type: 'postgres' },
        lock: { ttlSeconds: 3, refreshSeconds: 1 },
        routines: [
          { id: 'ex', schedule: '*/2 * * * * *', action: 'command', run: 'echo "start $$" >> marks; sleep 60' },
        ],
      });
      const env = { ROUTINELY_DATABASE_URL: url };
      const all = await schedulers(['h1', 'h2'], project, env, 110_000);
      // the fire that holds the lock, and its scheduler
      let held: { owner: { host: string; run_id?: string } } | null = null;
      await eventually(async () => {
        const r = await runCli(['lock', 'status', '--json'], { cwd: project, env });
        held = (JSON.parse(r.stdout) as { record: typeof held }).record;
        return held?.owner.run_id !== undefined;
      }, 30_000);
      const { host, run_id: runId } = held!.owner;
      // its command started, so its open marker is written (the lock names the run a moment
      // before: killed in between, the fire never started, and is a tick never fired)
      await eventually(() => existsSync(join(project, 'marks')), 30_000);
      const doomed = all[host === 'h1' ? 0 : 1]!;
      const survivor = all[host === 'h1' ? 1 : 0]!;
      onTestFinished(() => {
        // every fire's command (the doomed scheduler's outlives it: another host's, never ended here)
        for (const pid of readFileSync(join(project, 'marks'), 'utf8').match(/\d+/g)!.map(Number)) {
          try {
            process.kill(-pid, 'SIGKILL');
          } catch {
            /* gone */
          }
        }
      });
      doomed.child.kill('SIGKILL');
      await doomed.exited;
      // once its leases run out the survivor closes that fire: its sweep (the fire's claimer is
      // gone) or its tick's takeover of the lock, whichever comes first
      await survivor.waitFor(
        /recorded 1 fire left open by (a process that died|a scheduler whose lease ran out \(it stopped or died\)) as failed \(interrupted\)/,
        60_000,
      );
      const history = JSON.parse(
        (await runCli(['routine', 'history', 'ex', '--json'], { cwd: project, env })).stdout,
      ) as { run_id: string | null; result: string; reason: string | null }[];
      expect(history.find((h) => h.run_id === runId)).toMatchObject({
        result: 'failure',
        reason: expect.stringMatching(/^interrupted/),
      });
      const list = JSON.parse((await runCli(['routine', 'list', '--json'], { cwd: project, env })).stdout) as {
        id: string;
        running_since?: string | null;
      }[];
      const row = list.find((r) => r.id === 'ex')!;
      // running now, if at all, is the survivor's own fire (started after the takeover)
      const own = (
        JSON.parse((await runCli(['lock', 'status', '--json'], { cwd: project, env })).stdout) as {
          record: { owner: { host: string } } | null;
        }
      ).record;
      if (row.running_since) expect(own?.owner.host).toBe(host === 'h1' ? 'h2' : 'h1');
      // its own fire runs a minute: not waited for
      survivor.child.kill('SIGKILL');
      await survivor.exited;
    },
  );

  it(
    'every scheduler stalled at once for 3 s (SIGSTOP, as a loaded machine does): each tick it slept through is claimed and recorded once',
    { timeout: 120_000 },
    async () => {
      const url = await freshDatabase(cluster!);
      const { ids, routines } = perSecond(10);
      const project = testProject({ project: 'app', backend: { type: 'postgres' }, routines });
      const env = { ROUTINELY_DATABASE_URL: url };
      const all = await schedulers(['h1', 'h2'], project, env, 110_000);
      const from = nextSecond();
      for (let round = 0; round < 2; round++) {
        await sleep(3000);
        for (const s of all) s.child.kill('SIGSTOP');
        await sleep(3000);
        for (const s of all) s.child.kill('SIGCONT');
      }
      await sleep(3000);
      const to = secondsAgo(2);
      await stopAll(all);
      const a = await tickAccount(url, ids, from, to);
      console.log(
        `stalled schedulers: ${a.expected} ticks, ${a.recorded} recorded once, ${a.unclaimed} unclaimed, ${a.claimedLost} claimed and lost, ${a.twice} twice`,
      );
      expect(a, a.gaps.slice(0, 60).join(' ')).toMatchObject({
        recorded: a.expected,
        twice: 0,
        claimedLost: 0,
        unclaimed: 0,
      });
    },
  );

  it(
    '3 schedulers x 20 per-second routines, one restarted by SIGTERM every 6 s: every tick recorded exactly once',
    { timeout: 180_000 },
    async () => {
      const url = await freshDatabase(cluster!);
      const ids = Array.from({ length: 20 }, (_, i) => `r${String(i).padStart(2, '0')}`);
      const project = testProject({
        project: 'app',
        backend: { type: 'postgres' },
        routines: ids.map((id) => ({ id, schedule: '* * * * * *', action: 'command', run: 'true', exclusive: false })),
      });
      const env = { ROUTINELY_DATABASE_URL: url };
      const start = async (host: string) => {
        const s = startCli(['scheduler', 'start'], {
          cwd: project,
          env: { ...env, ROUTINELY_HOST_ID: host },
          timeoutMs: 170_000,
        });
        await s.waitFor(/\[scheduler\] started/);
        return s;
      };
      const hosts = ['h1', 'h2', 'h3'];
      const running = await Promise.all(hosts.map(start));
      const stopped: typeof running = [];
      const from = Math.ceil(Date.now() / 1000) * 1000 + 1000;
      for (let round = 0; round < 4; round++) {
        await sleep(6000);
        const i = round % 3;
        running[i]!.child.kill('SIGTERM');
        expect((await running[i]!.exited).code, running[i]!.stderr()).toBe(0);
        stopped.push(running[i]!);
        running[i] = await start(hosts[i]!);
      }
      await sleep(3000);
      const to = Math.floor(Date.now() / 1000) * 1000 - 2000;
      for (const s of running) s.child.kill('SIGTERM');
      for (const s of running) expect((await s.exited).code, s.stderr()).toBe(0);
      expect((to - from) / 1000 + 1).toBeGreaterThan(20);
      const a = await tickAccount(url, ids, from, to);
      console.log(
        `rolling restarts: ${a.expected} ticks, ${a.recorded} recorded once, ${a.unclaimed} unclaimed, ${a.claimedLost} claimed and lost, ${a.twice} twice`,
      );
      // what went wrong where, should it: the ticks, and what the schedulers said about them
      const said = [...stopped, ...running]
        .map((s) =>
          s
            .stdout()
            .split('\n')
            .filter((l) => /warning|skipped|lost|late|step/.test(l))
            .slice(-20)
            .join('\n'),
        )
        .join('\n--\n');
      expect(a, `${a.gaps.slice(0, 60).join(' ')}\n${said}`).toMatchObject({
        recorded: a.expected,
        twice: 0,
        claimedLost: 0,
        unclaimed: 0,
      });
    },
  );
});
