// The HTTP server in-process with fixed data (SPEC §11, §12): routes, content types, the Host
// check, the token, read-only methods, errors that do not leak, and the cache of reads.

import { connect, type Socket } from 'node:net';
import { describe, expect, it, onTestFinished } from 'vitest';
import { UnsafePathError } from '../../src/errors.js';
import { Metrics } from '../../src/http/metrics.js';
import { startStatusServer, type StatusServer } from '../../src/http/server.js';
import { cachedSources, type StatusSources } from '../../src/http/sources.js';
import { httpGet, sample } from '../helpers/http.js';
import { sleep } from '../helpers/cli.js';
import { fixedSources, pageData, row } from './fixtures.js';

const TOKEN = 'test-token-0123456789abcdef';

async function serve(
  o: { sources?: StatusSources; token?: string | null; host?: string; warn?: (m: string) => void } = {},
): Promise<StatusServer> {
  const server = await startStatusServer({
    listen: { host: o.host ?? '127.0.0.1', port: 0 },
    token: o.token ?? null,
    sources: o.sources ?? fixedSources(),
    metrics: new Metrics(true),
    warn: o.warn ?? (() => {}),
  });
  onTestFinished(() => server.close());
  return server;
}

describe('status server', () => {
  it('serves the page, metrics, health and the API on loopback', async () => {
    const s = await serve();
    expect(s.url).toBe(`http://127.0.0.1:${s.port}/`);
    const page = await httpGet(s.url);
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['content-security-policy']).toMatch(/^default-src 'none'; script-src 'sha256-/);
    expect(page.headers['cache-control']).toBe('no-store');
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    expect(page.body).toContain('<a class="id" href="/routines/tick">tick</a>');
    const metrics = await httpGet(`${s.url}metrics`);
    expect(metrics.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(sample(metrics.body, 'routinely_consecutive_skips', { routine: 'tick' })).toBe(1);
    expect(sample(metrics.body, 'routinely_exec_lock_held')).toBe(1);
    expect(await httpGet(`${s.url}healthz`)).toMatchObject({ status: 200, body: 'ok\n' });
    const d = pageData();
    expect(JSON.parse((await httpGet(`${s.url}api/routines`)).body)).toEqual(d.routines);
    expect(JSON.parse((await httpGet(`${s.url}api/lock`)).body)).toEqual(d.lock);
    expect(JSON.parse((await httpGet(`${s.url}api/runs`)).body)).toEqual(d.runs);
    expect(JSON.parse((await httpGet(`${s.url}api/history`)).body)).toEqual(d.recent);
    expect(JSON.parse((await httpGet(`${s.url}api/status?x=1`)).body)).toMatchObject({
      project: 'app',
      mode: 'scheduler',
      health: { ok: true },
      scheduler_up: true,
    });
    expect((await httpGet(`${s.url}nope`)).status).toBe(404);
    expect(await httpGet(`${s.url}healthz`, {}, 'HEAD')).toMatchObject({ status: 200, body: '' });
  });

  it('is read-only: other methods get 405', async () => {
    const s = await serve();
    for (const m of ['POST', 'PUT', 'DELETE', 'PATCH']) {
      const r = await httpGet(`${s.url}api/routines`, {}, m);
      expect(r.status, m).toBe(405);
      expect(r.headers.allow).toBe('GET, HEAD');
    }
  });

  it('answers 421 to a Host header that does not name it (DNS rebinding), before anything else', async () => {
    const s = await serve({ token: TOKEN });
    for (const host of ['rebound.evil.example', `rebound.evil.example:${s.port}`, `localhost:${s.port + 1}`]) {
      const r = await httpGet(`${s.url}api/routines`, { host, authorization: `Bearer ${TOKEN}` });
      expect(r.status, host).toBe(421);
      expect(r.body).not.toContain('tick');
    }
    expect(
      (await httpGet(`${s.url}healthz`, { host: `localhost:${s.port}`, authorization: `Bearer ${TOKEN}` })).status,
    ).toBe(200);
  });

  it('a request target that is not a URL path is a 400 with the common headers, and nothing in the log', async () => {
    const warned: string[] = [];
    const s = await serve({ warn: (m) => warned.push(m) });
    const answer = await new Promise<string>((resolve) => {
      let text = '';
      const c = connect(s.port, '127.0.0.1', () =>
        c.write(`GET http://[ HTTP/1.1\r\nHost: 127.0.0.1:${s.port}\r\nConnection: close\r\n\r\n`),
      );
      c.on('data', (d: Buffer) => (text += d.toString('latin1')));
      c.on('close', () => resolve(text));
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toMatch(/\r\ncache-control: no-store\r\n/i);
    expect(answer).toMatch(/\r\nx-content-type-options: nosniff\r\n/i);
    expect(answer).toContain('bad request: the request target is not a URL path');
    expect(warned).toEqual([]);
  });

  it('/metrics with the exec lock unreadable (a folder at its path): the routines are scraped, the lock held by nobody, said once', async () => {
    const warned: string[] = [];
    const s = await serve({
      sources: fixedSources(pageData(), {
        lock: async () => {
          throw new UnsafePathError('.routinely/locks/exec-run.lock is a folder, not a regular file');
        },
      }),
      warn: (m) => warned.push(m),
    });
    for (let i = 0; i < 2; i++) {
      const metrics = await httpGet(`${s.url}metrics`);
      expect(metrics.status).toBe(200);
      expect(sample(metrics.body, 'routinely_consecutive_skips', { routine: 'tick' })).toBe(1);
      expect(sample(metrics.body, 'routinely_exec_lock_held', {})).toBe(0);
    }
    expect(warned).toEqual([
      'the exec lock could not be read for /metrics: .routinely/locks/exec-run.lock is a folder, not a regular file',
    ]);
  });

  it('pipelined requests leave no count behind: a keep-alive client from the same address is kept between its requests afterwards', async () => {
    const s = await serve();
    const head = `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${s.port}\r\n\r\n`;
    /** A connection that sends `n` requests at once; resolves with it once all are answered. */
    const asking = (n: number) =>
      new Promise<Socket>((resolve) => {
        let text = '';
        const c = connect(s.port, '127.0.0.1', () => c.write(head.repeat(n)));
        c.on('error', () => {});
        c.on('data', (d: Buffer) => {
          text += d.toString('latin1');
          if (text.split('HTTP/1.1 200').length - 1 === n) resolve(c);
        });
      });
    const burst = await Promise.all(Array.from({ length: 20 }, () => asking(2)));
    await sleep(600); // past the grace after the answers: each is counted as waiting, once
    for (const c of burst) c.destroy();
    await sleep(100);
    const client = await asking(1);
    let closed = false;
    client.on('close', () => (closed = true));
    await sleep(1500); // well within the keep-alive timeout (5 s)
    expect(closed).toBe(false);
    client.destroy();
  });

  it('a connection that sends a thousand requests in one write before it reads an answer is closed after a few answers (the others would queue in memory: a gigabyte from 10 such clients that never read); one that pipelines a few gets them all', async () => {
    const s = await serve({ token: TOKEN });
    // the page shell, 32 KB an answer, is what a client without the token gets
    const page = `GET / HTTP/1.1\r\nHost: 127.0.0.1:${s.port}\r\n\r\n`;
    /** Sends `n` requests in one write; the answers it got when the connection closed, or when
     * all `n` were answered (the server keeps a connection that has its answers open). */
    const pipelining = (n: number) =>
      new Promise<number>((resolve) => {
        let text = '';
        const count = (): number => text.split('HTTP/1.1 200').length - 1;
        const c = connect(s.port, '127.0.0.1', () => c.write(page.repeat(n)));
        c.on('error', () => {});
        c.on('close', () => resolve(count()));
        c.on('data', (d: Buffer) => {
          text += d.toString('latin1');
          if (count() === n && text.endsWith('</html>\n')) c.destroy();
        });
      });
    expect(await pipelining(1000)).toBeLessThanOrEqual(4);
    expect(await pipelining(4)).toBe(4);
  });

  it('with a token: 401 without it or with a wrong one, on every path but the pages, which come without data', async () => {
    const s = await serve({ token: TOKEN });
    for (const path of ['', 'routines/tick']) {
      for (const auth of [undefined, 'Bearer wrong-token-0123456789abcdef']) {
        const r = await httpGet(`${s.url}${path}`, auth ? { authorization: auth } : {});
        expect(r.status, `${path} ${auth}`).toBe(200);
        expect(r.body).toContain('data-shell="1"');
        expect(r.body).toContain('id="token-form"');
        // nothing read from the state: not the project's name, not a result
        expect(r.body).not.toMatch(/· app|build-01|exit code 3|r-2026/);
      }
    }
    for (const path of [
      'metrics',
      'healthz',
      'api/routines',
      'api/routines/tick',
      'api/lock',
      'api/runs',
      'routines/no such',
      'nope',
    ]) {
      for (const auth of [undefined, 'Bearer wrong-token-0123456789abcdef', `Basic ${TOKEN}`, `Bearer ${TOKEN}x`]) {
        const r = await httpGet(`${s.url}${path}`, auth ? { authorization: auth } : {});
        expect(r.status, `${path} ${auth}`).toBe(401);
        expect(r.headers['www-authenticate']).toBe('Bearer realm="routinely"');
        expect(r.body).not.toContain('tick');
      }
    }
    expect((await httpGet(`${s.url}api/routines`, { authorization: `Bearer ${TOKEN}` })).status).toBe(200);
  });

  it('a failing read is a 500 (503 for /healthz) that names nothing; the details go to the log', async () => {
    const warned: string[] = [];
    const fail = async (): Promise<never> => {
      throw new Error('connect ECONNREFUSED 10.1.1.1:5432 password=hunter2');
    };
    const s = await serve({
      sources: fixedSources(pageData(), { routines: fail, health: fail }),
      warn: (m) => warned.push(m),
    });
    for (const path of ['', 'metrics', 'api/routines']) {
      const r = await httpGet(`${s.url}${path}`);
      expect(r.status, path).toBe(500);
      expect(r.body).not.toMatch(/ECONNREFUSED|hunter2/);
    }
    const health = await httpGet(`${s.url}healthz`);
    expect(health.status).toBe(503);
    expect(health.body).not.toMatch(/hunter2/);
    expect(warned.join('\n')).toMatch(/ECONNREFUSED/);
    // the server goes on
    expect((await httpGet(`${s.url}api/lock`)).status).toBe(200);
  });

  it('503 with the reason while unhealthy', async () => {
    const s = await serve({
      sources: fixedSources(pageData(), {
        health: async () => ({ ok: false, reason: 'scheduler lock lost (taken over)' }),
      }),
    });
    expect(await httpGet(`${s.url}healthz`)).toMatchObject({ status: 503, body: 'scheduler lock lost (taken over)\n' });
  });

  it('a port in use is a usage error (exit 2) naming the address', async () => {
    const s = await serve();
    await expect(
      startStatusServer({
        listen: { host: '127.0.0.1', port: s.port },
        token: null,
        sources: fixedSources(),
        metrics: new Metrics(true),
        warn: () => {},
      }),
    ).rejects.toMatchObject({
      exitCode: 2,
      message: `--http 127.0.0.1:${s.port}: the address is already in use`,
    });
  });
});

describe('routinely_last_duration_seconds', () => {
  it('after a fire lost with its process (no known duration): the last fire that ran, from the history', async () => {
    const fire = (result: string, reason: string | null, started: string, finished: string) => ({
      result,
      reason,
      scheduled_at: started,
      started_at: started,
      finished_at: finished,
      duration_ms: Date.parse(finished) - Date.parse(started),
      exit_code: null,
      run_id: null,
      trigger: 'schedule',
    });
    const lost = fire(
      'failure',
      'interrupted: pid 1 on h ended before the outcome was recorded',
      '2026-12-06T10:00:02.000Z',
      '2026-12-06T10:00:02.000Z',
    );
    const ran = fire('success', null, '2026-12-06T10:00:00.000Z', '2026-12-06T10:00:01.500Z');
    for (const last of [
      row({ last_result: 'failure', last_duration_ms: null }),
      row({ last_result: 'skipped', last_duration_ms: 0 }),
    ]) {
      const data = pageData({ routines: [last] });
      const s = await serve({
        sources: fixedSources(data, { fires: async () => [lost, ran] as never }),
      });
      const metrics = (await httpGet(`${s.url}metrics`)).body;
      expect(sample(metrics, 'routinely_last_duration_seconds', { routine: 'tick' }), last.last_result!).toBe(1.5);
    }
  });
});

describe('routinely_last_duration_seconds, late records', () => {
  it('a fire that ran, recorded after a later tick skipped behind it (the last result stays that skip): its duration, not the one seen before it', async () => {
    const fire = (result: string, started: string, ms: number, reason: string | null = null) => ({
      result,
      reason,
      scheduled_at: started,
      started_at: started,
      finished_at: new Date(Date.parse(started) + ms).toISOString(),
      duration_ms: ms,
      exit_code: null,
      run_id: null,
      trigger: 'schedule',
    });
    const first = fire('success', '2026-12-06T10:00:00.000Z', 1500);
    const skip = fire('skipped', '2026-12-06T10:00:02.000Z', 0, 'previous run still running');
    const late = fire('success', '2026-12-06T10:00:01.000Z', 1250);
    let now = {
      last: row({ last_result: 'skipped', counts: { success: 1, failure: 0, skipped: 1 } }),
      fires: [skip, first],
    };
    const s = await serve({
      sources: fixedSources(pageData(), {
        routines: async () => [now.last],
        fires: async () => now.fires as never,
      }),
    });
    const scrape = async (): Promise<number | undefined> =>
      sample((await httpGet(`${s.url}metrics`)).body, 'routinely_last_duration_seconds', { routine: 'tick' });
    expect(await scrape()).toBe(1.5);
    // the fire of 10:00:01 ran on past the tick of 10:00:02, and is recorded now
    now = {
      last: row({ last_result: 'skipped', counts: { success: 2, failure: 0, skipped: 1 } }),
      fires: [late, skip, first],
    };
    expect(await scrape()).toBe(1.25);
  });

  it('a history that cannot be read at a scrape is read again at the next (not kept as "none ran")', async () => {
    const ran = {
      result: 'success',
      reason: null,
      scheduled_at: '2026-12-06T10:00:00.000Z',
      started_at: '2026-12-06T10:00:00.000Z',
      finished_at: '2026-12-06T10:00:02.000Z',
      duration_ms: 2000,
      exit_code: 0,
      run_id: null,
      trigger: 'schedule',
    };
    let failing = true;
    const s = await serve({
      sources: fixedSources(pageData({ routines: [row({ last_result: 'skipped', last_duration_ms: 0 })] }), {
        fires: async () => {
          if (failing) throw new Error('EIO');
          return [ran] as never;
        },
      }),
    });
    const scrape = async (): Promise<number | undefined> =>
      sample((await httpGet(`${s.url}metrics`)).body, 'routinely_last_duration_seconds', { routine: 'tick' });
    expect(await scrape()).toBe(0);
    failing = false;
    expect(await scrape()).toBe(2);
  });
});

describe('cachedSources', () => {
  it('shares one read per second between requests, and does not keep failures', async () => {
    let reads = 0;
    let clock = 0;
    let failNext = false;
    const base = fixedSources(pageData(), {
      routines: async () => {
        reads++;
        if (failNext) {
          failNext = false;
          throw new Error('down');
        }
        return [];
      },
    });
    const s = cachedSources(base, 1000, () => clock);
    await Promise.all([s.routines(), s.routines(), s.routines()]);
    expect(reads).toBe(1);
    clock = 1500;
    failNext = true;
    await expect(s.routines()).rejects.toThrow('down');
    await s.routines();
    expect(reads).toBe(3);
  });

  it('routines and history are shared only by requests that come while they are read, never after (no view shows less than the history holds)', async () => {
    let reads = 0;
    const base = fixedSources(pageData(), {
      routines: async () => {
        reads++;
        return [];
      },
    });
    const s = cachedSources(base, 1000, () => 0);
    await Promise.all([s.routines(), s.routines()]);
    expect(reads).toBe(1);
    // the read is over: a fire may have been recorded since, within the second
    await s.routines();
    expect(reads).toBe(2);
  });

  it("a routine's newest fire lost with its process: its output is the one shown (up to the crash), though it is out of the durations chart", async () => {
    const at = (m: number): string => new Date(Date.UTC(2026, 10, 29, 18, m)).toISOString();
    const fire = (m: number, runId: string, reason: string | null) => ({
      scheduled_at: at(m),
      started_at: at(m),
      finished_at: at(m),
      result: 'failure' as const,
      reason,
      exit_code: null,
      run_id: runId,
    });
    const asked: string[] = [];
    const s = await serve({
      sources: fixedSources(pageData(), {
        fires: async () => [
          fire(59, 'r-20261129T185900Z-0002', 'interrupted: pid 7 on h ended before the outcome was recorded'),
          fire(58, 'r-20261129T185800Z-0001', 'exit code 1'),
        ],
        output: async (_id, runId, lines) => {
          asked.push(runId);
          return { run_id: runId, text: 'up to the crash\n', lines, cut_lines: false, notices: [] };
        },
      }),
    });
    const r = await httpGet(`${s.url}api/routines/tick`);
    expect(r.status).toBe(200);
    expect(asked).toEqual(['r-20261129T185900Z-0002']);
    expect((JSON.parse(r.body) as { output: { run_id: string } }).output.run_id).toBe('r-20261129T185900Z-0002');
  });
});
