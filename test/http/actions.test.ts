// The actions of the HTTP server in-process (SPEC §11): POST /api/routines/ID/run|pause|resume
// only when enabled, always with the token, never from another origin, with checked bodies; and
// a routine's page and its JSON (fires newest first, the output of a run, escaped).

import { connect } from 'node:net';
import { describe, expect, it, onTestFinished } from 'vitest';
import { Metrics } from '../../src/http/metrics.js';
import { startStatusServer, type StatusServer } from '../../src/http/server.js';
import type { FireView, RoutineActions, RunAnswer, StatusSources } from '../../src/http/sources.js';
import { httpGet } from '../helpers/http.js';
import { fixedSources, pageData } from './fixtures.js';

const TOKEN = 'test-token-0123456789abcdef';
const AUTH = { authorization: `Bearer ${TOKEN}` };

/** Actions that record what they were asked and answer `run` with `answer`. */
function fakeActions(answer: RunAnswer = { state: 'started', run_id: 'r-1' }) {
  const asked: string[] = [];
  const actions: RoutineActions = {
    run: async (id) => (asked.push(`run ${id}`), answer),
    pause: async (id, note) => (asked.push(`pause ${id} ${note}`), { was_paused: false, note }),
    resume: async (id) => (asked.push(`resume ${id}`), { was_paused: true }),
    stopFire: async (id, address) => (
      asked.push(`stop ${id} ${address}`),
      { state: 'stopped', run_id: 'r-9', killed: false, recorded: true, waited_ms: 40 }
    ),
  };
  return { asked, actions };
}

async function serve(over: Partial<StatusSources> = {}, token: string | null = TOKEN): Promise<StatusServer> {
  const server = await startStatusServer({
    listen: { host: '127.0.0.1', port: 0 },
    token,
    sources: fixedSources(pageData(), over),
    metrics: new Metrics(true),
    warn: () => {},
  });
  onTestFinished(() => server.close());
  return server;
}

const post = (s: StatusServer, path: string, headers: Record<string, string> = AUTH, body = '{}') =>
  httpGet(`${s.url}${path}`, { 'content-type': 'application/json', ...headers }, 'POST', body);

interface RawAnswer {
  /** The first status line the server sent after any 100 Continue, and every status line. */
  status: string;
  lines: string[];
  headers: string;
  /** Bytes of the body the server let the client write before it closed. */
  written: number;
}

/**
 * A POST over a plain socket, announcing `size` bytes of body (or sending `body`) and writing
 * them while it reads, as a careless client does; with `expect: 100-continue` it writes only
 * after the server says to go on.
 */
function rawPost(
  port: number,
  path: string,
  headers: Record<string, string>,
  size: number,
  body?: string,
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const payload = body === undefined ? null : Buffer.from(body);
    const total = payload ? payload.length : size;
    const head = Object.entries({
      host: `127.0.0.1:${port}`,
      'content-type': 'application/json',
      'content-length': String(total),
      ...headers,
    })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    let written = 0;
    let text = '';
    let pumping = false;
    const chunk = Buffer.alloc(64 * 1024, 32);
    const pump = (): void => {
      pumping = true;
      if (payload) {
        written = payload.length;
        return void socket.write(payload);
      }
      while (written < total && !socket.destroyed) {
        written += chunk.length;
        if (!socket.write(chunk)) return void socket.once('drain', pump);
      }
    };
    socket.on('error', () => {}); // a reset while writing is what a closed connection looks like
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      if (!pumping && text.startsWith('HTTP/1.1 100 Continue\r\n\r\n')) pump();
      // with a complete answer after 100 Continue, an asking client is done
      const final = text.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, '');
      const m = /\r\ncontent-length: (\d+)\r\n[\s\S]*?\r\n\r\n/i.exec(final);
      if (m && final.length >= final.indexOf('\r\n\r\n') + 4 + Number(m[1]) && headers.expect) socket.end();
    });
    socket.on('close', () => {
      const final = text.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, '');
      const lines = text.split('\r\n').filter((l) => l.startsWith('HTTP/1.1 '));
      resolve({
        status: final.split('\r\n')[0] ?? '',
        lines,
        headers: final.split('\r\n\r\n')[0] ?? '',
        written: Math.min(written, total),
      });
    });
    socket.once('connect', () => {
      socket.write(`POST /${path} HTTP/1.1\r\n${head}\r\n`);
      if (!headers.expect) pump();
    });
    setTimeout(() => reject(new Error(`POST /${path}: no end after 60 s`)), 60_000).unref();
  });
}

describe('actions', () => {
  it('run, pause (with its note) and resume do what they are asked and say so', async () => {
    const { asked, actions } = fakeActions();
    const s = await serve({ actions });
    const run = await post(s, 'api/routines/tick/run');
    expect(run.status).toBe(202);
    expect(JSON.parse(run.body)).toMatchObject({
      state: 'started',
      run_id: 'r-1',
      routine: 'tick',
      message: 'started tick (run r-1)',
    });
    const pause = await post(s, 'api/routines/tick/pause', AUTH, JSON.stringify({ note: '  until Monday ' }));
    expect(pause.status).toBe(200);
    expect(JSON.parse(pause.body)).toMatchObject({ paused: true, was_paused: false, note: 'until Monday' });
    expect((await post(s, 'api/routines/tick/resume', AUTH, '')).status).toBe(200);
    // stop: who asked goes with it (the client's address)
    const stop = await post(s, 'api/routines/tick/stop', AUTH, '');
    expect(stop.status).toBe(200);
    expect(JSON.parse(stop.body)).toMatchObject({
      state: 'stopped',
      run_id: 'r-9',
      message: 'stopped tick (run r-9); recorded as failure: stopped by hand',
    });
    expect(asked).toEqual(['run tick', 'pause tick until Monday', 'resume tick', 'stop tick 127.0.0.1']);
  });

  it('a run refused as busy is a 409 naming the holder; a skip is a 200 that says nothing was recorded', async () => {
    const busy = await serve({
      actions: fakeActions({ state: 'busy', error: 'exec busy: held by pid 7 on h (exec run)' }).actions,
    });
    const r = await post(busy, 'api/routines/tick/run');
    expect(r.status).toBe(409);
    expect(JSON.parse(r.body).message).toBe('exec busy: held by pid 7 on h (exec run) (nothing recorded)');
    const skip = await serve({ actions: fakeActions({ state: 'skipped', reason: 'exec busy' }).actions });
    const k = await post(skip, 'api/routines/tick/run');
    expect(k.status).toBe(200);
    expect(JSON.parse(k.body)).toMatchObject({ state: 'skipped', reason: 'exec busy' });
  });

  it('always needs the token, also on loopback; without it nothing is done', async () => {
    const { asked, actions } = fakeActions();
    const s = await serve({ actions });
    for (const auth of [
      {},
      { authorization: 'Bearer wrong-token-0123456789abcdef' },
      { authorization: `Basic ${TOKEN}` },
    ] as Record<string, string>[]) {
      const r = await post(s, 'api/routines/tick/run', auth);
      expect(r.status, JSON.stringify(auth)).toBe(401);
    }
    expect(asked).toEqual([]);
  });

  it('never reads a body it did not ask for: 100 MB sent without the token get the 401 and a closed connection, not a drain', async () => {
    const { asked, actions } = fakeActions();
    const s = await serve({ actions });
    const size = 100 * 1024 * 1024;
    for (const target of ['api/routines/tick/run', 'api/routines/tick/pause']) {
      const r = await rawPost(s.port, target, {}, size);
      expect(r.status, target).toBe('HTTP/1.1 401 Unauthorized');
      expect(r.headers, target).toMatch(/^connection: close$/im);
      // the kernel's buffers and the server's short linger take in a few MB; a drain takes all 100
      expect(r.written, target).toBeLessThan(32 * 1024 * 1024);
    }
    // a client that asks first is never told to go on: its body is not even sent
    const asking = await rawPost(s.port, 'api/routines/tick/run', { expect: '100-continue' }, size);
    expect(asking.status).toBe('HTTP/1.1 401 Unauthorized');
    expect(asking.written).toBe(0);
    // another origin, with the token, is refused the same way
    const cross = await rawPost(s.port, 'api/routines/tick/run', { ...AUTH, origin: 'https://evil.example' }, size);
    expect(cross.status).toBe('HTTP/1.1 403 Forbidden');
    expect(cross.written).toBeLessThan(32 * 1024 * 1024);
    expect(asked).toEqual([]);
    // with the token, a client that asks is told to go on and its action is taken
    const ok = await rawPost(
      s.port,
      'api/routines/tick/pause',
      { ...AUTH, expect: '100-continue' },
      0,
      '{"note":"asked first"}',
    );
    expect(ok.lines).toEqual(['HTTP/1.1 100 Continue', 'HTTP/1.1 200 OK']);
    expect(asked).toEqual(['pause tick asked first']);
  });

  it('refuses another origin, and a browser that says the request is cross-site, even with the token', async () => {
    const { asked, actions } = fakeActions();
    const s = await serve({ actions });
    const own = `http://127.0.0.1:${s.port}`;
    for (const h of [
      { origin: 'http://evil.example' },
      { origin: `http://localhost:${s.port + 1}` },
      { origin: 'null' },
      { 'sec-fetch-site': 'cross-site' },
      { origin: own, 'sec-fetch-site': 'same-site' },
    ] as Record<string, string>[]) {
      const r = await post(s, 'api/routines/tick/run', { ...AUTH, ...h });
      expect(r.status, JSON.stringify(h)).toBe(403);
      expect(JSON.parse(r.body).error).toMatch(/^cross-origin request refused/);
    }
    expect(asked).toEqual([]);
    // its own page (same origin), and curl (no Origin) may
    expect(
      (await post(s, 'api/routines/tick/run', { ...AUTH, origin: own, 'sec-fetch-site': 'same-origin' })).status,
    ).toBe(202);
    expect((await post(s, 'api/routines/tick/run')).status).toBe(202);
  });

  it('checks what it is given: the routine, the body, the note', async () => {
    const { asked, actions } = fakeActions();
    const s = await serve({ actions });
    const cases: [string, string, number, RegExp][] = [
      ['api/routines/nope/run', '{}', 404, /no routine "nope" in the config/],
      ['api/routines/..%2Fetc/run', '{}', 404, /is not a routine id/],
      ['api/routines/tick/pause', 'not json', 400, /the body is not JSON/],
      ['api/routines/tick/pause', '[1]', 400, /not a JSON object/],
      ['api/routines/tick/pause', JSON.stringify({ note: 42 }), 400, /^note: a string of at most 500 characters/],
      ['api/routines/tick/pause', JSON.stringify({ note: 'x'.repeat(501) }), 400, /^note:/],
      ['api/routines/tick/pause', JSON.stringify({ note: 'x'.repeat(20_000) }), 413, /larger than 16384 bytes/],
    ];
    for (const [path, body, code, message] of cases) {
      const r = await post(s, path, AUTH, body);
      expect(r.status, `${path} ${body.slice(0, 20)}`).toBe(code);
      expect(JSON.parse(r.body).error).toMatch(message);
    }
    expect(asked).toEqual([]);
    expect((await post(s, 'api/routines/tick/restart')).status).toBe(405);
    // 500 characters as people count them: 300 emoji (600 UTF-16 units) are 300
    expect((await post(s, 'api/routines/tick/pause', AUTH, JSON.stringify({ note: '😀'.repeat(300) }))).status).toBe(
      200,
    );
    expect((await post(s, 'api/routines/tick/pause', AUTH, JSON.stringify({ note: '😀'.repeat(501) }))).status).toBe(
      400,
    );
  });

  it('a reload that turns http.actions off turns them off at once: POST is 405, the page and the API say so', async () => {
    let on = true;
    const { asked, actions } = fakeActions();
    const s = await serve({ actions, actionsOn: () => on });
    expect((await post(s, 'api/routines/tick/pause')).status).toBe(200);
    on = false;
    const r = await post(s, 'api/routines/tick/resume');
    expect(r.status).toBe(405);
    expect(r.body).toMatch(/read-only \(actions are off: http.actions\)/);
    expect(JSON.parse((await httpGet(`${s.url}api/routines/tick`, AUTH)).body).actions).toBe(false);
    expect(asked).toEqual(['pause tick null']);
  });

  it('are off unless enabled: POST is 405 and the page shows no buttons', async () => {
    const s = await serve({}, null);
    const r = await post(s, 'api/routines/tick/run', {});
    expect(r.status).toBe(405);
    expect(r.headers.allow).toBe('GET, HEAD');
    expect(r.body).toMatch(/read-only \(actions are off: http.actions\)/);
    expect((await httpGet(`${s.url}routines/tick`)).body).not.toContain('data-action="run"');
    const on = await serve({ actions: fakeActions().actions });
    const page = await httpGet(`${on.url}routines/tick`, AUTH);
    expect(page.body).toMatch(/<section aria-labelledby="actions-title" class="js-only" hidden>/);
    expect(page.body).toContain('<button type="button" data-action="run">Run now</button>');
  });
});

const fire = (over: Partial<FireView> = {}): FireView => ({
  scheduled_at: '2026-11-29T19:00:00.000Z',
  started_at: '2026-11-29T19:00:02.500Z',
  finished_at: '2026-11-29T19:00:07.500Z',
  result: 'failure',
  reason: 'exit code 3',
  exit_code: 3,
  run_id: 'r-20261129T190000Z-aa',
  trigger: 'schedule',
  ...over,
});

describe("a routine's page", () => {
  const fires = [
    fire({ trigger: 'retry', attempt: 2, run_id: 'r-20261129T190100Z-bb' }),
    fire({
      result: 'skipped',
      reason: 'exec busy',
      exit_code: null,
      run_id: null,
      started_at: '2026-11-29T19:00:00.000Z',
      finished_at: '2026-11-29T19:00:00.000Z',
    }),
    fire({ result: 'success', reason: null, exit_code: 0, trigger: 'manual' }),
  ];
  const asked: string[] = [];
  const sources: Partial<StatusSources> = {
    fires: async (_id, n) => fires.slice(0, n),
    output: async (_id, run, lines) => (
      asked.push(`${run} ${lines}`),
      { run_id: run, text: '<script>alert(1)</script>\u001b[31mred\n', lines, cut_lines: true, notices: [] }
    ),
  };

  it('lists its newest fires (result, reason, lateness, duration, trigger and attempt) and the output of the newest run, escaped', async () => {
    const s = await serve(sources, null);
    const r = await httpGet(`${s.url}routines/tick`);
    expect(r.status).toBe(200);
    expect(r.headers['content-security-policy']).toMatch(/^default-src 'none'; script-src 'sha256-/);
    const rows = r.body.slice(
      r.body.indexOf('<tbody id="fires"'),
      r.body.indexOf('</tbody>', r.body.indexOf('<tbody id="fires"')),
    );
    expect(rows.match(/<tr role="row">/g)).toHaveLength(3);
    expect(rows).toMatch(
      /failed \(exit 3\).*exit code 3.*>2\.5s<.*>5\.0s<.*retry, attempt 2.*\?run=r-20261129T190100Z-bb#output/,
    );
    // a skip never ran: no lateness, no duration, no output link
    expect(rows).toMatch(
      /S<\/span> skipped<\/td><td role="cell" data-label="Reason">exec busy<\/td><td[^>]*><span class="muted">–<\/span><\/td><td[^>]*><span class="muted">–<\/span><\/td><td role="cell" data-label="Trigger">schedule<\/td><td role="cell" data-label="Run"><span class="muted">–<\/span>/,
    );
    expect(rows).toContain('by hand');
    expect(asked).toEqual(['r-20261129T190100Z-bb 200']);
    expect(r.body).toContain('&lt;script&gt;alert(1)&lt;/script&gt;\\x1b[31mred');
    expect(r.body).not.toContain('<script>alert(1)');
    expect(r.body).toContain(
      'its last 200 lines; <code>routinely routine logs tick --run r-20261129T190100Z-bb</code> shows all',
    );
  });

  it('shows the run asked for; refuses a run id that is not one, and a routine the config does not have', async () => {
    asked.length = 0;
    const s = await serve(sources, null);
    expect((await httpGet(`${s.url}routines/tick?run=r-20261129T190000Z-aa`)).status).toBe(200);
    expect(asked).toEqual(['r-20261129T190000Z-aa 200']);
    const bad = await httpGet(`${s.url}routines/tick?run=../../etc/passwd`);
    expect(bad).toMatchObject({ status: 400, body: 'run "../../etc/passwd" is not a run id (r-…)\n' });
    expect((await httpGet(`${s.url}routines/nope`)).status).toBe(404);
    expect((await httpGet(`${s.url}routines/.hidden`)).status).toBe(404);
    expect(asked).toHaveLength(1);
  });

  it('is also JSON at /api/routines/ID', async () => {
    const s = await serve(sources, null);
    const j = JSON.parse((await httpGet(`${s.url}api/routines/tick`)).body);
    expect(j.routine.id).toBe('tick');
    expect(j.fires).toHaveLength(3);
    expect(j.output.run_id).toBe('r-20261129T190100Z-bb');
    expect(j.actions).toBe(false);
    expect(j.status).toBeUndefined();
  });
});
