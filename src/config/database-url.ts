// A PostgreSQL URL as libpq reads it, including the forms WHATWG `new URL` refuses: several
// hosts (`postgres://h1:5432,h2:5432/db?target_session_attrs=read-write`), a password holding
// `/` or `@` (common in base64), IPv6 hosts in brackets. Nothing here is printed with the
// password: `where` and redaction leave it out.

import { redactSecrets, rememberSecret } from '../redact.js';

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
  /** libpq's `connect_timeout` in ms (taken out of the query): null when not given; 0 waits
   * for ever, as in libpq. */
  connectTimeoutMs: number | null;
}

/** Query parameters the driver (node-postgres) honours as libpq does, passed on as they are;
 * `target_session_attrs` and `connect_timeout` are read here. `ssl` and `sslnegotiation` are
 * node-postgres' own. */
const PASSED = new Set([
  'user',
  'password',
  'application_name',
  'fallback_application_name',
  'client_encoding',
  'options',
  'sslmode',
  'sslcert',
  'sslkey',
  'sslrootcert',
  'ssl',
  'sslnegotiation',
  'uselibpqcompat',
]);

/** libpq's parameters that routinely cannot honour, and what to do instead: a URL that names
 * one is refused by name, never silently half-read (libpq itself refuses a name it does not know). */
const NOT_HONOURED: Record<string, string> = {
  host: 'write the host in the URL (postgres://host:5432/db; a socket folder percent-encoded: postgres://%2Fvar%2Frun%2Fpostgresql/db)',
  hostaddr: 'write the address as the host (postgres://10.0.0.5:5432/db)',
  port: 'write the port after the host (postgres://host:5433/db)',
  dbname: "write the database as the URL's path (postgres://host/db)",
  passfile: 'routinely reads ~/.pgpass (or PGPASSFILE), not a passfile parameter',
  service: 'service files are not read: write host, port, user and database in the URL',
  keepalives: 'routinely keeps TCP keepalives on by itself (first probe after 5 s)',
  keepalives_idle: 'routinely keeps TCP keepalives on by itself (first probe after 5 s)',
  keepalives_interval: 'routinely keeps TCP keepalives on by itself (first probe after 5 s)',
  keepalives_count: 'routinely keeps TCP keepalives on by itself (first probe after 5 s)',
  tcp_user_timeout:
    'a statement with no answer is given up after its own time-out (17 s), and the lease TTL judges a holder',
  replication: "a replication connection cannot run routinely's statements",
  load_balance_hosts: 'several hosts are tried in the order written (use target_session_attrs to skip standbys)',
};

/** The reason a query parameter is refused, or null when it is one routinely reads or passes on. */
function refusedParam(name: string): string | null {
  if (PASSED.has(name) || name === 'target_session_attrs' || name === 'connect_timeout') return null;
  const why = NOT_HONOURED[name];
  if (why) return `parameter ${name} is not honoured by routinely: ${why}`;
  return LIBPQ_ONLY.includes(name)
    ? `parameter ${name} is not honoured by routinely (its driver, node-postgres, has no such setting); remove it from the URL`
    : `unknown parameter ${JSON.stringify(name)} (libpq refuses it too; routinely reads ${[...PASSED, 'target_session_attrs', 'connect_timeout'].join(', ')})`;
}

/** The rest of libpq's connection parameters (PostgreSQL 17): known, and not honoured. */
const LIBPQ_ONLY = [
  'require_auth',
  'channel_binding',
  'gssencmode',
  'requiressl',
  'sslcompression',
  'sslpassword',
  'sslcertmode',
  'sslcrl',
  'sslcrldir',
  'sslsni',
  'requirepeer',
  'ssl_min_protocol_version',
  'ssl_max_protocol_version',
  'krbsrvname',
  'gsslib',
  'gssdelegation',
];

/** libpq's reading of connect_timeout: whole seconds; 0 (or less) waits for ever; 1 counts as 2. */
function connectTimeout(value: string): number | string {
  if (!/^-?\d+$/.test(value.trim())) return `connect_timeout=${value} is not a whole number of seconds`;
  const s = Number(value);
  return s <= 0 ? 0 : Math.max(2, s) * 1000;
}

const TARGETS = ['any', 'read-write', 'primary', 'read-only', 'standby', 'prefer-standby'] as const;

/** Parses; returns a problem (without the password) instead of throwing. */
export function parsePgUrl(url: string): PgUrl | string {
  const m = /^([a-z][a-z0-9+.-]*):\/\/(.*)$/is.exec(url);
  if (!m) return 'not a URL (expected postgres://user:password@host:5432/database)';
  const scheme = m[1]!.toLowerCase();
  if (scheme !== 'postgres' && scheme !== 'postgresql') return 'not a postgres:// URL';
  const all = m[2]!;
  // The user part ends at the last '@': a password may hold '/', ':', '?', '#' or '@' (libpq
  // wants those percent-encoded; base64 passwords often are not). Unless that '@' is in what
  // reads as a query (`?password=ab@cd&sslmode=…`): then at the last '@' before the query. Both
  // readings' passwords are known before anything is said (SPEC §12); the query reading is taken
  // when it parses, else the other.
  const last = all.lastIndexOf('@');
  const q0 = all.indexOf('?');
  const ends =
    q0 >= 0 && last > q0 && /^[A-Za-z_]+=/.test(all.slice(q0 + 1)) ? [all.slice(0, q0).lastIndexOf('@'), last] : [last];
  const secrets = ends.flatMap((at) => passwordsOf(all, at));
  for (const s of secrets) rememberSecret(s);
  let parsed: PgUrl | string = '';
  for (const at of ends) {
    parsed = parseFrom(scheme, all, at, secrets);
    if (typeof parsed !== 'string') return parsed;
  }
  return parsed;
}

/** The passwords of the URL read with its user part ending at `at`: the user's, and a
 * `password=` parameter. */
function passwordsOf(all: string, at: number): string[] {
  const out: string[] = [];
  const userinfo = at < 0 ? null : all.slice(0, at);
  if (userinfo !== null && userinfo.includes(':')) out.push(userinfo.slice(userinfo.indexOf(':') + 1));
  const rest = at < 0 ? all : all.slice(at + 1);
  const qi = rest.indexOf('?');
  if (qi >= 0) {
    const p = new URLSearchParams(rest.slice(qi + 1)).get('password');
    if (p) out.push(p);
  }
  return out;
}

function parseFrom(scheme: string, all: string, at: number, secrets: readonly string[]): PgUrl | string {
  const userinfo = at < 0 ? null : all.slice(0, at);
  const rest = at < 0 ? all : all.slice(at + 1);
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
    const host = h[1] ?? (h[2] || 'localhost');
    // a host that is a piece of a password was never meant as one: never sent to a resolver
    if (host.length >= 4 && secrets.some((s) => s.includes(host) || safeDecode(s).includes(host))) {
      return 'ambiguous: one of its host names is a piece of the password (percent-encode "@" as %40 and "/" as %2F in the password)';
    }
    hosts.push({ host, port });
  }
  const target = params.get('target_session_attrs') ?? 'any';
  if (!(TARGETS as readonly string[]).includes(target))
    return `target_session_attrs=${target} is not one of ${TARGETS.join(', ')}`;
  params.delete('target_session_attrs');
  for (const name of new Set(params.keys())) {
    const refused = refusedParam(name);
    if (refused) return refused;
  }
  const timeout = params.get('connect_timeout');
  const connectTimeoutMs = timeout === null ? null : connectTimeout(timeout);
  if (typeof connectTimeoutMs === 'string') return connectTimeoutMs;
  params.delete('connect_timeout');
  let database: string;
  try {
    database = decodeURIComponent(path.replace(/^\//, ''));
  } catch {
    return 'the database name is not percent-encoded correctly';
  }
  const query = params.toString();
  return {
    scheme,
    userinfo,
    hosts,
    database,
    query,
    targetSessionAttrs: target as PgUrl['targetSessionAttrs'],
    connectTimeoutMs,
  };
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
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
  return s
    .split(/(%[0-9A-Fa-f]{2})/)
    .map((part, i) => (i % 2 === 1 ? part : enc(part)))
    .join('');
}

/** `h1:5432,h2:5432/db`: where, for messages. */
export function describePgUrl(u: PgUrl): string {
  return `${u.hosts.map((h) => `${h.host.includes(':') ? `[${h.host}]` : h.host}:${h.port}`).join(',')}/${u.database}`;
}

/** The URL with its password replaced by `***` (redact.ts: the rule for every message). */
export function redactPgUrl(url: string): string {
  return redactSecrets(url);
}
