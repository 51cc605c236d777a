import { describe, expect, it } from 'vitest';
import { describePgUrl, parsePgUrl, redactPgUrl, singleHostUrl, type PgUrl } from '../../src/config/database-url.js';

const parsed = (url: string): PgUrl => {
  const u = parsePgUrl(url);
  if (typeof u === 'string') throw new Error(u);
  return u;
};

describe('PostgreSQL URLs as libpq reads them', () => {
  it('several hosts, default ports, IPv6, target_session_attrs taken out of the query', () => {
    const u = parsed('postgres://app:pw@h1:5433,h2,[::1]:6000/app?target_session_attrs=read-write&sslmode=verify-full');
    expect(u.hosts).toEqual([
      { host: 'h1', port: 5433 },
      { host: 'h2', port: 5432 },
      { host: '::1', port: 6000 },
    ]);
    expect(u.targetSessionAttrs).toBe('read-write');
    expect(u.query).toBe('sslmode=verify-full');
    expect(describePgUrl(u)).toBe('h1:5433,h2:5432,[::1]:6000/app');
    expect(singleHostUrl(u, u.hosts[2]!)).toBe('postgres://app:pw@[::1]:6000/app?sslmode=verify-full');
  });

  it('a password holding / + @ (base64) is read whole, passed encoded, and never shown', () => {
    const url = 'postgres://app:Zm9v/YmFy+c@XV4@db.internal:5432/app';
    const u = parsed(url);
    expect(u.hosts).toEqual([{ host: 'db.internal', port: 5432 }]);
    expect(u.userinfo).toBe('app:Zm9v/YmFy+c@XV4');
    const one = singleHostUrl(u, u.hosts[0]!);
    expect(decodeURIComponent(new URL(one).password)).toBe('Zm9v/YmFy+c@XV4');
    expect(redactPgUrl(url)).toBe('postgres://app:***@db.internal:5432/app');
    expect(redactPgUrl('postgres://rt:p@ss@[bad')).not.toMatch(/p@ss|ss@/);
    expect(redactPgUrl('postgres://h/db?password=hunter2&x=1')).toBe('postgres://h/db?password=***&x=1');
  });

  it('refuses what libpq would refuse, saying what', () => {
    expect(parsePgUrl('http://h/db')).toBe('not a postgres:// URL');
    expect(parsePgUrl('db.internal')).toMatch(/^not a URL/);
    expect(parsePgUrl('postgres://h:99999/db')).toMatch(/port 99999 is out of range/);
    expect(parsePgUrl('postgres://h/db?target_session_attrs=fast')).toMatch(/target_session_attrs=fast is not one of/);
  });

  it('connect_timeout is read as libpq reads it (whole seconds, 0 for ever, at least 2) and taken out of the query', () => {
    expect(parsed('postgres://h/db?connect_timeout=30&sslmode=disable')).toMatchObject({
      connectTimeoutMs: 30_000,
      query: 'sslmode=disable',
    });
    expect(parsed('postgres://h/db?connect_timeout=0').connectTimeoutMs).toBe(0);
    expect(parsed('postgres://h/db?connect_timeout=1').connectTimeoutMs).toBe(2000);
    expect(parsed('postgres://h/db').connectTimeoutMs).toBeNull();
    expect(parsePgUrl('postgres://h/db?connect_timeout=2.5')).toBe(
      'connect_timeout=2.5 is not a whole number of seconds',
    );
  });

  it('libpq parameters routinely cannot honour are refused by name, never half-read', () => {
    expect(parsePgUrl('postgres://h/db?keepalives_idle=10')).toMatch(
      /^parameter keepalives_idle is not honoured by routinely: routinely keeps TCP keepalives on/,
    );
    expect(parsePgUrl('postgres://h/db?sslmode=require&channel_binding=require')).toMatch(
      /^parameter channel_binding is not honoured by routinely \(its driver, node-postgres, has no such setting\)/,
    );
    expect(parsePgUrl('postgres://h/db?host=/var/run/postgresql')).toMatch(
      /^parameter host is not honoured by routinely: write the host in the URL/,
    );
    expect(parsePgUrl('postgres://h/db?service=prod')).toMatch(/^parameter service is not honoured/);
    expect(parsePgUrl('postgres://h/db?conect_timeout=5')).toMatch(
      /^unknown parameter "conect_timeout" \(libpq refuses it too; routinely reads .*connect_timeout/,
    );
    // what the driver does honour passes
    expect(
      parsed('postgres://h/db?sslmode=verify-full&application_name=nightly&options=-c%20search_path%3Dops').query,
    ).toBe('sslmode=verify-full&application_name=nightly&options=-c+search_path%3Dops');
  });
});
