// `[HOST:]PORT` for --http and http.listen (SPEC §11).

import { describe, expect, it } from 'vitest';
import { formatListen, isIPv6, parseListen } from '../../src/config/listen.js';

describe('parseListen', () => {
  it.each([
    ['9464', { host: '127.0.0.1', port: 9464 }],
    ['0', { host: '127.0.0.1', port: 0 }],
    ['127.0.0.1:9464', { host: '127.0.0.1', port: 9464 }],
    ['localhost:9464', { host: '127.0.0.1', port: 9464 }],
    ['0.0.0.0:80', { host: '0.0.0.0', port: 80 }],
    ['[::]:9464', { host: '::', port: 9464 }],
    ['[::1]:9464', { host: '::1', port: 9464 }],
    ['metrics.internal:9464', { host: 'metrics.internal', port: 9464 }],
  ])('%s', (text, want) => {
    expect(parseListen(text)).toEqual(want);
  });

  it.each([
    ['', /is not a port/],
    ['http', /"http" is not a port/],
    ['65536', /is not a port/],
    [':9464', /the host before ":" is empty/],
    ['::1:9464', /IPv6 address goes in brackets/],
    ['[::1]9464', /IPv6 address goes in brackets before the port/],
    ['[nope]:9464', /"nope" is not an IPv6 address/],
    ['bad host:9464', /"bad host" is not an IP address or host name/],
    ['127.0.0.1:-1', /is not a port/],
  ])('refuses %j', (text, why) => {
    expect(parseListen(text)).toMatch(why);
  });

  it('writes addresses back with IPv6 in brackets', () => {
    expect(formatListen({ host: '::1', port: 1 })).toBe('[::1]:1');
    expect(formatListen({ host: '127.0.0.1', port: 1 })).toBe('127.0.0.1:1');
    expect(isIPv6('::ffff:127.0.0.1')).toBe(true);
    expect(isIPv6('127.0.0.1')).toBe(false);
  });
});
