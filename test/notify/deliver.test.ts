// Delivery with real things (SPEC §10): a local HTTP server for the webhook (answering, failing,
// refusing, never answering), real shell commands for the command channel. Delivery never
// throws, retries 3 times, and never outlives its timeouts.

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { deliver } from '../../src/notify/deliver.js';
import type { NotifyPayload } from '../../src/notify/payload.js';
import { postWebhook, webhookLabel } from '../../src/notify/webhook.js';
import { eventually, processRuns } from '../helpers/cli.js';
import { testdir } from '../helpers/testdir.js';
import { closedPort, webhookServer } from '../helpers/webhook-server.js';

const payload: NotifyPayload = {
  event: 'failure',
  project: 'app',
  host: 'build-01',
  routine: 'backup',
  run_id: 'r-20261130T120000Z-ab12',
  result: 'failure',
  scheduled_at: '2026-11-30T12:00:00.000Z',
  finished_at: '2026-11-30T12:00:01.500Z',
  exit_code: 3,
  why: 'exit code 3',
  next: 'routinely routine logs backup --run r-20261130T120000Z-ab12',
  log: '/p/.routinely/logs/backup.log',
  consecutive_failures: 1,
  consecutive_skips: 0,
};
const fast = { attempts: 3, backoffMs: 10, timeoutMs: 5_000 };
const on = ['failure' as const];

describe('webhook', () => {
  it('POSTs the payload as JSON once when the receiver answers 2xx', async () => {
    const hook = await webhookServer([204]);
    const [d] = await deliver({ webhook: hook.url, on }, payload, { cwd: '/', passEnv: [], ...fast });
    expect(d).toEqual({
      channel: 'webhook',
      target: `http://127.0.0.1:${hook.port}/…`,
      delivered: true,
      attempts: 1,
      error: null,
    });
    expect(hook.received).toHaveLength(1);
    expect(hook.received[0]).toMatchObject({
      method: 'POST',
      url: '/hook',
      headers: { 'content-type': 'application/json' },
    });
    expect(JSON.parse(hook.received[0]!.body)).toEqual(payload);
  });

  it('retries after a 500 and stops at the first 2xx', async () => {
    const hook = await webhookServer([500, 200]);
    const [d] = await deliver({ webhook: hook.url, on }, payload, { cwd: '/', passEnv: [], ...fast });
    expect(d).toMatchObject({ delivered: true, attempts: 2 });
    expect(hook.received).toHaveLength(2);
  });

  it('a receiver that keeps failing gets exactly 3 attempts; the result says why, nothing throws', async () => {
    const hook = await webhookServer([500]);
    const [d] = await deliver({ webhook: hook.url, on }, payload, { cwd: '/', passEnv: [], ...fast });
    expect(d).toMatchObject({ delivered: false, attempts: 3, error: 'HTTP 500' });
    expect(hook.received).toHaveLength(3);
  });

  it('a redirect is a failure, not followed', async () => {
    const hook = await webhookServer([302]);
    const [d] = await deliver({ webhook: hook.url, on }, payload, { cwd: '/', passEnv: [], ...fast, attempts: 1 });
    expect(d).toMatchObject({ delivered: false, error: 'HTTP 302 (redirects are not followed)' });
  });

  it('connection refused: 3 attempts, reported', async () => {
    const port = await closedPort();
    const [d] = await deliver({ webhook: `http://127.0.0.1:${port}/hook`, on }, payload, {
      cwd: '/',
      passEnv: [],
      ...fast,
    });
    expect(d).toMatchObject({ delivered: false, attempts: 3 });
    expect(d!.error).toMatch(/ECONNREFUSED/);
  });

  it('a receiver that never answers: each attempt ends at the timeout, 3 attempts, then reported', async () => {
    const hook = await webhookServer(['hang']);
    const [d] = await deliver({ webhook: hook.url, on }, payload, {
      cwd: '/',
      passEnv: [],
      attempts: 3,
      backoffMs: 10,
      timeoutMs: 1500,
    });
    expect(d).toMatchObject({ delivered: false, attempts: 3, error: 'no answer within 1.5s' });
    expect(hook.received).toHaveLength(3);
  });

  it('an abort (scheduler shutdown) ends a hanging delivery at once, without more attempts', async () => {
    const hook = await webhookServer(['hang']);
    const stop = new AbortController();
    const pending = deliver({ webhook: hook.url, on }, payload, {
      cwd: '/',
      passEnv: [],
      attempts: 3,
      backoffMs: 10,
      timeoutMs: 60_000,
      signal: stop.signal,
    });
    await eventually(() => hook.received.length === 1, 10_000, 'the request');
    stop.abort();
    const [d] = await pending;
    expect(d).toMatchObject({ delivered: false, attempts: 1, error: 'stopped' });
  });

  it('credentials in the URL are sent (basic auth) but never shown', async () => {
    const hook = await webhookServer([500]);
    const url = `http://alert:s3cret@127.0.0.1:${hook.port}/hooks/T0/B0/tok3n?key=abc`;
    const [d] = await deliver({ webhook: url, on }, payload, { cwd: '/', passEnv: [], ...fast, attempts: 1 });
    expect(hook.received[0]!.headers.authorization).toBe(`Basic ${Buffer.from('alert:s3cret').toString('base64')}`);
    expect(hook.received[0]!.url).toBe('/hooks/T0/B0/tok3n?key=abc');
    expect(JSON.stringify(d)).not.toMatch(/s3cret|tok3n|abc|alert/);
    expect(d!.target).toBe(`http://127.0.0.1:${hook.port}/…`);
  });

  it('an https: URL is posted over TLS (node:https, loaded at the first delivery): a plain HTTP receiver fails the handshake', async () => {
    const hook = await webhookServer([204]);
    const url = hook.url.replace('http:', 'https:');
    const r = await postWebhook(url, '{}', 5_000);
    // not node:http's synchronous "Protocol not supported" (retry false): a TLS error, retried
    expect(r).toMatchObject({ ok: false, retry: true });
    expect((r as { error: string }).error).not.toMatch(/Protocol/);
    expect(hook.received).toHaveLength(0);
  });

  it('webhookLabel keeps scheme and host only', () => {
    expect(webhookLabel('https://u:p@hooks.example:8443/services/x?token=1')).toBe('https://hooks.example:8443/…');
    expect(webhookLabel('https://hooks.example')).toBe('https://hooks.example');
    expect(webhookLabel('not a url user:pw@host?token=1')).not.toMatch(/pw|token=1/);
  });
});

describe('command', () => {
  it('gets the payload on stdin and the event in its environment, in the project root; withheld variables stay withheld', async () => {
    const dir = testdir();
    const cmd = 'cat > stdin.json; env > env.txt; pwd > cwd.txt';
    const saved = { ...process.env };
    process.env.ROUTINELY_DATABASE_URL = 'postgres://u:pw@db/x';
    process.env.ROUTINELY_HTTP_TOKEN = 'tok';
    process.env.SOMETHING_ELSE = 'kept';
    try {
      const [d] = await deliver({ command: cmd, on }, payload, {
        cwd: dir,
        passEnv: ['ROUTINELY_HTTP_TOKEN'],
        ...fast,
      });
      expect(d).toEqual({ channel: 'command', target: 'command', delivered: true, attempts: 1, error: null });
    } finally {
      process.env = saved;
    }
    expect(JSON.parse(readFileSync(join(dir, 'stdin.json'), 'utf8'))).toEqual(payload);
    const env = Object.fromEntries(
      readFileSync(join(dir, 'env.txt'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    expect(env).toMatchObject({
      ROUTINELY_EVENT: 'failure',
      ROUTINELY_ROUTINE_ID: 'backup',
      ROUTINELY_RUN_ID: 'r-20261130T120000Z-ab12',
      ROUTINELY_RESULT: 'failure',
      ROUTINELY_LOG: '/p/.routinely/logs/backup.log',
      SOMETHING_ELSE: 'kept',
      ROUTINELY_HTTP_TOKEN: 'tok',
    });
    expect(env).not.toHaveProperty('ROUTINELY_DATABASE_URL');
    expect(readFileSync(join(dir, 'cwd.txt'), 'utf8').trim()).toBe(dir);
  });

  it('a failing command gets 3 attempts; its last output line says why', async () => {
    const dir = testdir();
    const [d] = await deliver({ command: 'echo try >> tries; echo "alert service down" >&2; exit 4', on }, payload, {
      cwd: dir,
      passEnv: [],
      ...fast,
    });
    expect(d).toMatchObject({ delivered: false, attempts: 3, error: 'exit code 4: alert service down' });
    expect(readFileSync(join(dir, 'tries'), 'utf8')).toBe('try\ntry\ntry\n');
  });

  it('the back-off between attempts runs on the injected clock (1 h, then 2 h: nothing waits for real)', async () => {
    const dir = testdir();
    const clock = new ManualClock();
    let settled = false;
    const done = deliver({ command: 'echo try >> tries; exit 4', on }, payload, {
      cwd: dir,
      passEnv: [],
      attempts: 3,
      backoffMs: 3_600_000,
      clock,
    }).then((r) => {
      settled = true;
      return r;
    });
    const tries = (): number =>
      existsSync(join(dir, 'tries')) ? readFileSync(join(dir, 'tries'), 'utf8').split('\n').length - 1 : 0;
    await eventually(() => tries() === 1 && clock.sleeping === 1, 10_000, 'the first attempt, then its back-off');
    clock.advance(3_599_999);
    await sleep(200); // room for a wrong early attempt
    expect([tries(), settled, clock.sleeping]).toEqual([1, false, 1]);
    clock.advance(1);
    await eventually(
      () => tries() === 2 && clock.sleeping === 1,
      10_000,
      'the second attempt, 1 h later, then a 2 h back-off',
    );
    clock.advance(3_600_000);
    await sleep(200);
    expect([tries(), settled, clock.sleeping]).toEqual([2, false, 1]);
    clock.advance(3_600_000);
    const [d] = await done;
    expect(d).toMatchObject({ delivered: false, attempts: 3 });
    expect(tries()).toBe(3);
  });

  it('a command that hangs is ended with its whole process group at the timeout', async () => {
    const dir = testdir();
    const [d] = await deliver({ command: 'sleep 60 & echo $! > bg.pid; wait', on }, payload, {
      cwd: dir,
      passEnv: [],
      attempts: 1,
      timeoutMs: 2000,
    });
    expect(d).toMatchObject({
      delivered: false,
      attempts: 1,
      error: 'no exit within 2s (its process group was ended)',
    });
    const bg = Number(readFileSync(join(dir, 'bg.pid'), 'utf8'));
    await eventually(() => !processRuns(bg), 10_000, 'the background sleep to end');
  });

  it("what a command that exits leaves running in its group is ended before the delivery counts as done, as a routine command's leftovers are; setsid keeps one", async () => {
    const dir = testdir();
    const [d] = await deliver(
      {
        // the command ends only once the kept process has left the group (setsid ran, then it
        // wrote its pid): ended earlier, it could still be in the group when the group is ended
        command:
          "sleep 60 & echo $! > bg.pid; setsid sh -c 'echo $$ > kept.pid; exec sleep 60' </dev/null >/dev/null 2>&1 & while [ ! -s kept.pid ]; do sleep 0.01; done; echo ok",
        on,
      },
      payload,
      { cwd: dir, passEnv: [], attempts: 1, timeoutMs: 10_000 },
    );
    expect(d).toMatchObject({ delivered: true, attempts: 1 });
    const bg = Number(readFileSync(join(dir, 'bg.pid'), 'utf8'));
    const kept = Number(readFileSync(join(dir, 'kept.pid'), 'utf8'));
    expect(processRuns(bg)).toBe(false);
    expect(processRuns(kept)).toBe(true);
    process.kill(kept, 'SIGKILL');
  });

  it('a command that does not read its stdin is fine', async () => {
    const [d] = await deliver(
      { command: 'exit 0', on },
      { ...payload, why: 'x'.repeat(1 << 20) },
      { cwd: testdir(), passEnv: [], ...fast },
    );
    expect(d).toMatchObject({ delivered: true });
  });

  it('webhook and command both get the event', async () => {
    const hook = await webhookServer([200]);
    const dir = testdir();
    const results = await deliver({ webhook: hook.url, command: 'cat > got.json', on }, payload, {
      cwd: dir,
      passEnv: [],
      ...fast,
    });
    expect(results.map((r) => [r.channel, r.delivered])).toEqual([
      ['webhook', true],
      ['command', true],
    ]);
    expect(hook.received).toHaveLength(1);
    expect(existsSync(join(dir, 'got.json'))).toBe(true);
  });
});
