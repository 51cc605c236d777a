// The status port under a connection flood (SPEC §11, §12): 150 connections from one client that
// trickle their headers one byte at a time (and come back when closed) while /healthz is probed
// once a second, each probe on a new connection, as a kubelet's: every probe is answered (however
// long an answer takes: a probe that hangs fails the test; one refused or reset is missed).

import { connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { eventually, sleep, startCli } from '../helpers/cli.js';
import { httpGet } from '../helpers/http.js';
import { testProject } from '../helpers/testdir.js';

/** `p`, or a failure after `ms` (a hang, not a slow answer: far above normal). */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${ms / 1000}s`)), ms);
  });
  return Promise.race([p, limit]).finally(() => clearTimeout(timer));
}

/** How many connections without a whole request head the server keeps per client (server.ts
 * PENDING_PER_CLIENT): past it, it closes that client's oldest one. */
const PENDING_PER_CLIENT = 16;

describe('HTTP under a flood of half-open connections', () => {
  it.each([
    // connections that never send a whole request head
    { n: 150, first: '', waves: 30 },
    // more than the server's connections (256), each first sending one whole request without a
    // token to a wrong host (421), then trickling the next: answered once, it is half-open again
    { n: 260, first: 'GET / HTTP/1.1\r\nHost: evil\r\n\r\n', waves: 5 },
  ])(
    '$n trickling connections (first request: $first): every /healthz and /metrics probe on a new connection is answered while the flood runs',
    { timeout: 90_000 },
    async ({ n, first, waves }) => {
      const project = testProject({ routines: [{ id: 'r', schedule: '0 0 1 1 *', action: 'command', run: 'true' }] });
      const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], { cwd: project, timeoutMs: 85_000 });
      const url = new URL((await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!);
      let stop = false;
      const open = new Set<Socket>();
      let turnedAway = 0; // flood connections the server closed (evicted, timed out, refused)
      const attacker = (): void => {
        if (stop) return;
        const c = connect(Number(url.port), '127.0.0.1');
        open.add(c);
        let sent = 0;
        if (first) c.write(first);
        const head = 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ';
        const timer = setInterval(() => {
          if (!c.destroyed) c.write(head[sent] ?? 'a');
          sent++;
        }, 1000);
        c.on('error', () => {});
        c.on('close', () => {
          clearInterval(timer);
          open.delete(c);
          if (stop) return;
          turnedAway++;
          setTimeout(attacker, 50); // back again
        });
      };
      for (let i = 0; i < n; i++) attacker();
      // the flood in place: more connections than the server keeps for one client (PENDING_PER_CLIENT),
      // each turned away and back again, 30 times over on average (past the first waves, when all
      // 150 come back at once)
      await eventually(
        () => open.size >= PENDING_PER_CLIENT && turnedAway >= waves * n,
        60_000,
        'the flood to run',
        () => `${open.size} open, ${turnedAway} turned away`,
      );
      const flood: { open: number; turnedAway: number }[] = [];
      let before = turnedAway;
      // a probe answered, or not (refused, reset, an error status); one that hangs fails the test.
      // Each on a connection of its own, as a kubelet's (node's agent would keep the first one
      // open, and every later probe would pass the flood by on it)
      const answered = async (path: string, i: number, missed: string[]): Promise<boolean> => {
        const r = await within(
          httpGet(`${url}${path}`, { Connection: 'close' }).catch((err: Error) => err),
          10_000,
          `${path} probe ${i}`,
        );
        if (r instanceof Error || r.status !== 200)
          missed.push(`${path} probe ${i}: ${r instanceof Error ? r.message : `${r.status} ${r.body}`}`);
        return !(r instanceof Error) && r.status === 200;
      };
      const missed: string[] = [];
      const healthz: boolean[] = [];
      let metrics = 0;
      for (let i = 0; i < 20; i++) {
        const started = Date.now();
        healthz.push(await answered('healthz', i, missed));
        if (i % 5 === 0 && (await answered('metrics', i, missed))) metrics++;
        const opened = open.size; // while probed
        await sleep(Math.max(0, 1000 - (Date.now() - started))); // probed once a second, as a liveness probe is
        flood.push({ open: opened, turnedAway: turnedAway - before }); // in this second
        before = turnedAway;
      }
      stop = true;
      for (const c of open) c.destroy();
      // however long they took, every probe answered, each on a new connection (a connection that
      // sends its request at once is never closed for the flood's sake: server.ts), and every scrape
      expect(missed).toEqual([]);
      expect(healthz.filter(Boolean)).toHaveLength(20);
      expect(metrics).toBe(4);
      // and while they were probed, the flood held connections and kept coming back
      // (turned away in waves: a connection answered once is closed a grace after its answer at
      // the earliest, so a second may pass without one; never two in a row)
      for (const [i, f] of flood.entries()) {
        expect(f.open, `probe ${i}: ${JSON.stringify(flood)}`).toBeGreaterThan(0);
        if (i > 0)
          expect(f.turnedAway + flood[i - 1]!.turnedAway, `probe ${i}: ${JSON.stringify(flood)}`).toBeGreaterThan(0);
      }
      expect(s.child.exitCode).toBeNull();
      s.child.kill('SIGTERM');
      expect((await s.exited).code).toBe(0);
    },
  );
});
