// Who may talk to the HTTP server (SPEC §11, §12): loopback by default, a token elsewhere, the
// Host header naming this server.

import { hostname, networkInterfaces } from 'node:os';
import { describe, expect, it } from 'vitest';
import { bearerMatches, checkExposure, hostAllowed, isLoopback } from '../../src/http/security.js';

const TOKEN = 'a-token-of-32-characters-0123456';

describe('exposure', () => {
  it('tells loopback from everything else', () => {
    for (const h of ['127.0.0.1', '127.1.2.3', '::1', 'localhost', '::ffff:127.0.0.1'])
      expect(isLoopback(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '10.0.0.1', '192.168.1.1', 'fe80::1', 'example.com', '128.0.0.1'])
      expect(isLoopback(h), h).toBe(false);
  });

  it('needs ROUTINELY_HTTP_TOKEN for every address but loopback', () => {
    expect(checkExposure({ host: '127.0.0.1', port: 9464 }, {})).toEqual({ ok: true, token: null });
    for (const host of ['0.0.0.0', '::', '10.1.2.3', 'metrics.internal']) {
      const r = checkExposure({ host, port: 9464 }, {});
      expect(r.ok, host).toBe(false);
      if (!r.ok)
        expect(r.why).toMatch(
          /^listens on (every interface|a non-loopback address): set ROUTINELY_HTTP_TOKEN \(clients send "Authorization: Bearer <token>"\), or listen on 127\.0\.0\.1/,
        );
      expect(checkExposure({ host, port: 9464 }, { ROUTINELY_HTTP_TOKEN: TOKEN })).toEqual({ ok: true, token: TOKEN });
    }
    expect(checkExposure({ host: '0.0.0.0', port: 1 }, {})).toMatchObject({
      why: expect.stringMatching(/^listens on every interface/),
    });
    // an empty variable is unset
    expect(checkExposure({ host: '::', port: 1 }, { ROUTINELY_HTTP_TOKEN: '' }).ok).toBe(false);
  });

  it('refuses a guessable token, also on loopback', () => {
    expect(checkExposure({ host: '127.0.0.1', port: 1 }, { ROUTINELY_HTTP_TOKEN: 'short' })).toMatchObject({
      ok: false,
      why: expect.stringMatching(/at least 16 printable ASCII characters/),
    });
    expect(
      checkExposure({ host: '127.0.0.1', port: 1 }, { ROUTINELY_HTTP_TOKEN: 'has a space in it, long enough' }).ok,
    ).toBe(false);
    // a header carries bytes: a token no client can send is refused at start (every request was 401)
    expect(checkExposure({ host: '127.0.0.1', port: 1 }, { ROUTINELY_HTTP_TOKEN: '€€€€€€€€€€€€€€€€€€' })).toMatchObject(
      { ok: false, why: expect.stringMatching(/printable ASCII/) },
    );
    expect(checkExposure({ host: '127.0.0.1', port: 1 }, { ROUTINELY_HTTP_TOKEN: TOKEN })).toEqual({
      ok: true,
      token: TOKEN,
    });
  });
});

describe('bearerMatches', () => {
  it('accepts exactly the token as a Bearer credential', () => {
    expect(bearerMatches(`Bearer ${TOKEN}`, TOKEN)).toBe(true);
    expect(bearerMatches(`bearer ${TOKEN}`, TOKEN)).toBe(true);
    for (const h of [
      undefined,
      '',
      'Bearer',
      `Bearer ${TOKEN}x`,
      `Bearer ${TOKEN.slice(1)}`,
      `Basic ${TOKEN}`,
      TOKEN,
      `Bearer ${TOKEN} extra`,
    ]) {
      expect(bearerMatches(h, TOKEN), String(h)).toBe(false);
    }
  });
});

describe('hostAllowed (DNS rebinding)', () => {
  const loop = { host: '127.0.0.1', port: 9464 };
  it('a loopback server answers only to loopback names with its port', () => {
    for (const h of ['127.0.0.1:9464', 'localhost:9464', 'LOCALHOST:9464', '[::1]:9464'])
      expect(hostAllowed(h, loop, 9464), h).toBe(true);
    for (const h of [
      undefined,
      '',
      'evil.example:9464',
      'localhost',
      'localhost:80',
      '127.0.0.1:9465',
      'localhost:9464/x',
      'user@localhost:9464',
      '127.0.0.1.evil.example:9464',
      'localhost:9464#x',
    ]) {
      expect(hostAllowed(h, loop, 9464), String(h)).toBe(false);
    }
  });

  it('checks against the bound port when listening on port 0', () => {
    expect(hostAllowed('127.0.0.1:41234', { host: '127.0.0.1', port: 0 }, 41234)).toBe(true);
    expect(hostAllowed('127.0.0.1:0', { host: '127.0.0.1', port: 0 }, 41234)).toBe(false);
  });

  it('a specific address answers to that address only', () => {
    const at = { host: '10.9.8.7', port: 9464 };
    expect(hostAllowed('10.9.8.7:9464', at, 9464)).toBe(true);
    expect(hostAllowed('localhost:9464', at, 9464)).toBe(false);
  });

  it('a wildcard server answers to its interfaces and its host name', () => {
    const any = { host: '0.0.0.0', port: 9464 };
    const addresses = Object.values(networkInterfaces()).flatMap((l) =>
      (l ?? []).map((a) => (a.family === 'IPv6' ? `[${a.address.replace(/%.*$/, '')}]` : a.address)),
    );
    for (const a of addresses) expect(hostAllowed(`${a}:9464`, any, 9464), a).toBe(true);
    expect(hostAllowed(`${hostname()}:9464`, any, 9464)).toBe(true);
    expect(hostAllowed('localhost:9464', any, 9464)).toBe(true);
    expect(hostAllowed('rebound.evil.example:9464', any, 9464)).toBe(false);
  });
});
