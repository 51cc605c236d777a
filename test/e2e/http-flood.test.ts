// The status port under a connection flood (SPEC §11, §12): 150 connections from one client that
// trickle their headers one byte at a time (and come back when closed) while /healthz is probed
// once a second: the probe is answered, as a Kubernetes liveness probe needs.

import { connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { sleep, startCli } from '../helpers/cli.js';
import { httpGet } from '../helpers/http.js';
import { testProject } from '../helpers/testdir.js';

describe('HTTP under a flood of half-open connections', () => {
  it('150 trickling connections: /healthz answers at least 18 of 20 probes, /metrics too', { timeout: 90_000 }, async () => {
    const project = testProject({ routines: [{ id: 'r', schedule: '0 0 1 1 *', action: 'command', run: 'true' }] });
    const s = startCli(['scheduler', 'start', '--http', '127.0.0.1:0'], { cwd: project, timeoutMs: 85_000 });
    const url = new URL((await s.waitFor(/\[http\] listening on (http:\/\/\S+)/))[1]!);
    let stop = false;
    const open = new Set<Socket>();
    const attacker = (): void => {
      if (stop) return;
      const c = connect(Number(url.port), '127.0.0.1');
      open.add(c);
      let sent = 0;
      const head = 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ';
      const timer = setInterval(() => {
        if (!c.destroyed) c.write(head[sent] ?? 'a');
        sent++;
      }, 1000);
      c.on('error', () => {});
      c.on('close', () => {
        clearInterval(timer);
        open.delete(c);
        setTimeout(attacker, 50); // back again
      });
    };
    for (let i = 0; i < 150; i++) attacker();
    await sleep(2000);
    let answered = 0;
    let metrics = 0;
    for (let i = 0; i < 20; i++) {
      const started = Date.now();
      try {
        const h = await Promise.race([httpGet(`${url}healthz`), sleep(900).then(() => null)]);
        if (h?.status === 200) answered++;
        if (i % 5 === 0) {
          const m = await Promise.race([httpGet(`${url}metrics`), sleep(900).then(() => null)]);
          if (m?.status === 200) metrics++;
        }
      } catch {
        // refused or reset: not answered
      }
      await sleep(Math.max(0, 1000 - (Date.now() - started)));
    }
    stop = true;
    for (const c of open) c.destroy();
    expect(answered, `${answered} of 20 probes answered`).toBeGreaterThanOrEqual(18);
    expect(metrics).toBeGreaterThanOrEqual(3);
    expect(s.child.exitCode).toBeNull();
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
  });
});
