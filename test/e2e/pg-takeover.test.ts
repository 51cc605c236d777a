// A claimed tick is fired, recorded or taken over (SPEC §9, issue 50): schedulers SIGKILLed
// right after a tick leave claims nobody works on; a live scheduler takes them over within a
// TTL and fires them late, or records them `claimer died`. Three schedulers on one database,
// every per-second tick accounted for.

import { describe, expect, it, onTestFinished } from 'vitest';
import { sleep, startCli, type Spawned } from '../helpers/cli.js';
import { freshDatabase, pgCluster, sql } from '../helpers/pg-test.js';
import { perSecond, stopAll, tickAccount } from '../helpers/pg-topology.js';
import { testProject } from '../helpers/testdir.js';

const cluster = pgCluster();
const suite = cluster ? describe : describe.skip; // skipped only outside CI, where no server could be started

/** Sleeps until `ms` past the next whole second. */
const justAfterTick = async (ms: number): Promise<void> => sleep(1000 - (Date.now() % 1000) + ms);

suite('claims of a scheduler killed right after a tick', () => {
  it(
    '3 schedulers x 20 per-second routines, the one with the most claims of the tick SIGKILLed 6 times: every tick recorded exactly once',
    { timeout: 180_000 },
    async () => {
      const url = await freshDatabase(cluster!);
      const { ids, routines } = perSecond(20);
      // a short lease: a claimer on another host is judged gone within 3 s
      const project = testProject({ project: 'app', backend: { type: 'postgres' }, lock: { ttlSeconds: 3 }, routines });
      const env = { ROUTINELY_DATABASE_URL: url };
      const all: Spawned[] = [];
      onTestFinished(() => {
        for (const s of all) if (s.child.exitCode === null) s.child.kill('SIGKILL');
      });
      const start = async (host: string): Promise<Spawned> => {
        const s = startCli(['scheduler', 'start'], {
          cwd: project,
          env: { ...env, ROUTINELY_HOST_ID: host },
          timeoutMs: 170_000,
        });
        all.push(s);
        await s.waitFor(/\[scheduler\] started/, 60_000);
        return s;
      };
      const hosts = ['h1', 'h2', 'h3'];
      const running = new Map<string, Spawned>();
      for (const h of hosts) running.set(h, await start(h));
      await sleep(2000);
      const from = Math.ceil(Date.now() / 1000) * 1000;
      let killed = 0;
      for (let round = 0; round < 6; round++) {
        await sleep(2000);
        // just after a tick: the host that claimed most of it is killed while it starts them
        await justAfterTick(15);
        const tick = new Date(Math.floor(Date.now() / 1000) * 1000).toISOString();
        const [top] = await sql<{ host: string }>(
          url,
          `SELECT host FROM routinely_ticks WHERE scheduled_at = '${tick}' GROUP BY host ORDER BY count(*) DESC LIMIT 1`,
        );
        const victim = running.get(top?.host ?? hosts[round % 3]!)!;
        victim.child.kill('SIGKILL');
        await victim.exited;
        killed++;
        // every other round it comes back at once (its lease is reclaimed: its own process is
        // gone), otherwise a few seconds later (its claims wait for its lease to run out)
        const host = [...running].find(([, s]) => s === victim)![0];
        if (round % 2 === 1) await sleep(4000);
        running.set(host, await start(host));
      }
      await sleep(6000);
      const to = Math.floor(Date.now() / 1000) * 1000 - 4000;
      // what is left to take over or reconcile gets a little longer (a loaded machine)
      let a = await tickAccount(url, ids, from, to);
      for (const deadline = Date.now() + 20_000; a.recorded < a.expected && Date.now() < deadline;) {
        await sleep(500);
        a = await tickAccount(url, ids, from, to);
      }
      await stopAll([...running.values()]);
      const said = all
        .map((s) =>
          s
            .stdout()
            .split('\n')
            .filter((l) => /took over|warning/.test(l))
            .slice(-10)
            .join('\n'),
        )
        .join('\n--\n');
      const takenOver = all.reduce((n, s) => n + (s.stdout().match(/took over/g) ?? []).length, 0);
      console.log(
        `killed claimers: ${killed} kills, ${a.expected} ticks, ${a.recorded} recorded once, ${a.unclaimed} unclaimed, ${a.claimedLost} claimed and lost, ${a.twice} twice; ${takenOver} claims taken over`,
      );
      expect(a, `${a.gaps.slice(0, 60).join(' ')}\n${said}`).toMatchObject({
        recorded: a.expected,
        twice: 0,
        claimedLost: 0,
        unclaimed: 0,
      });
    },
  );
});
