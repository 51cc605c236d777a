// A PostgreSQL URL as libpq reads it, including the forms WHATWG `new URL` refuses: several
// hosts (`postgres://h1:5432,h2:5432/db?target_session_attrs=read-write`), a password holding
// `/` or `@` (common in base64), IPv6 hosts in brackets. Nothing here is printed with the
// password: `where` and redaction leave it out.

import { redactSecrets } from '../redact.js';

export interface PgHost {
  host: string;
  port: number;
}

export interface PgUrl {
  scheme: string;
  /** `user:password` as written (still percent-encoded), or null. */
  userinfo: string | null;
  hosts: PgHost[];
  database: string;
  /** The query string without `target_session_attrs` (passed on to the driver as is). */
  query: string;
  /** libpq's `target_session_attrs`: `read-write` and `primary` skip standbys. */
  targetSessionAttrs: 'any' | 'read-write' | 'primary' | 'read-only' | 'standby' | 'prefer-standby';
}

const TARGETS = ['any', 'read-write', 'primary', 'read-only', 'standby', 'prefer-standby'] as const;

/** Parses; returns a problem (without the password) instead of throwing. */
export function parsePgUrl(url: string): PgUrl | string {
  const m = /^([a-z][a-z0-9+.-]*):\/\/(.*)$/is.exec(url);
  if (!m) return 'not a URL (expected postgres://user:password@host:5432/database)';
  const scheme = m[1]!.toLowerCase();
  if (scheme !== 'postgres' && scheme !== 'postgresql') return 'not a postgres:// URL';
  let rest = m[2]!;
  // the user part ends at the last '@': a password may hold '/', ':', '?', '#' or '@'
  const at = rest.lastIndexOf('@');
  const userinfo = at < 0 ? null : rest.slice(0, at);
  rest = at < 0 ? rest : rest.slice(at + 1);
  const slash = rest.search(/[/?]/);
  const authority = slash < 0 ? rest : rest.slice(0, slash);
  const tail = slash < 0 ? '' : rest.slice(slash);
  const q = tail.indexOf('?');
  const path = q < 0 ? tail : tail.slice(0, q);
  const params = new URLSearchParams(q < 0 ? '' : tail.slice(q + 1));
  const hosts: PgHost[] = [];
  for (const part of authority.split(',')) {
    const h = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]*))(?::(\d{1,5}))?$/.exec(part);
    if (!h) return `host ${JSON.stringify(part)} is not host or host:port`;
    const port = h[3] === undefined ? 5432 : Number(h[3]);
    if (port < 1 || port > 65535) return `port ${h[3]} is out of range 1-65535`;
    hosts.push({ host: h[1] ?? (h[2] || 'localhost'), port });
  }
  const target = params.get('target_session_attrs') ?? 'any';
  if (!(TARGETS as readonly string[]).includes(target)) return `target_session_attrs=${target} is not one of ${TARGETS.join(', ')}`;
  params.delete('target_session_attrs');
  let database: string;
  try {
    database = decodeURIComponent(path.replace(/^\//, ''));
  } catch {
    return 'the database name is not percent-encoded correctly';
  }
  const query = params.toString();
  return { scheme, userinfo, hosts, database, query, targetSessionAttrs: target as PgUrl['targetSessionAttrs'] };
}

/** The URL of one of its hosts, for the driver (which takes one host). A password the driver
 * would misread (holding '/', '@', '?', '#' unencoded) is percent-encoded. */
export function singleHostUrl(u: PgUrl, h: PgHost): string {
  const host = h.host.includes(':') ? `[${h.host}]` : h.host;
  let user = '';
  if (u.userinfo !== null) {
    const colon = u.userinfo.indexOf(':');
    const enc = (s: string): string => s.replace(/[/@?#%:]/g, encodeURIComponent);
    const name = colon < 0 ? u.userinfo : u.userinfo.slice(0, colon);
    const pass = colon < 0 ? null : u.userinfo.slice(colon + 1);
    user = `${keepEncoded(name, enc)}${pass === null ? '' : `:${keepEncoded(pass, enc)}`}@`;
  }
  return `${u.scheme}://${user}${host}:${h.port}/${encodeURIComponent(u.database)}${u.query ? `?${u.query}` : ''}`;
}

/** Leaves valid %XX escapes as they are; encodes the characters the driver's parser splits on. */
function keepEncoded(s: string, enc: (s: string) => string): string {
  return s.split(/(%[0-9A-Fa-f]{2})/).map((part, i) => (i % 2 === 1 ? part : enc(part))).join('');
}

/** `h1:5432,h2:5432/db`: where, for messages. */
export function describePgUrl(u: PgUrl): string {
  return `${u.hosts.map((h) => `${h.host.includes(':') ? `[${h.host}]` : h.host}:${h.port}`).join(',')}/${u.database}`;
}

/** The URL with its password replaced by `***` (redact.ts: the rule for every message). */
export function redactPgUrl(url: string): string {
  return redactSecrets(url);
}
