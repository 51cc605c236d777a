// Who may talk to the HTTP server (SPEC §11, §12): loopback by default; any other address only
// with a token; every request's Host header must name this server, so a web page whose DNS name
// was rebound to 127.0.0.1 cannot read the API from a browser on this machine.

import { createHash, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import { hostname, networkInterfaces } from 'node:os';
import type { ListenAddress } from '../config/listen.js';

export const TOKEN_ENV = 'ROUTINELY_HTTP_TOKEN';
/** A shorter token can be guessed by anyone who can reach the port. */
export const MIN_TOKEN_LENGTH = 16;

export function isLoopback(host: string): boolean {
  const h = host.toLowerCase();
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) === 6) return h === '::1' || h === '0:0:0:0:0:0:0:1' || /^::ffff:127\./.test(h);
  return h === 'localhost';
}

const isWildcard = (host: string): boolean => host === '0.0.0.0' || host === '::' || host === '0:0:0:0:0:0:0:0';

export type Exposure = { ok: true; token: string | null } | { ok: false; why: string };

/** Whether the server may listen there with the environment's token (exit 2 when not); `why`
 * follows the address in the message. */
export function checkExposure(listen: ListenAddress, env: NodeJS.ProcessEnv): Exposure {
  const raw = env[TOKEN_ENV];
  const token = raw === undefined || raw === '' ? null : raw;
  // printable ASCII only: an HTTP header carries bytes, which Node reads as latin1, so a token
  // with other characters could never be sent (every request would be 401)
  if (token !== null && (token.length < MIN_TOKEN_LENGTH || !/^[\x21-\x7e]+$/.test(token))) {
    return {
      ok: false,
      why: `${TOKEN_ENV} must be at least ${MIN_TOKEN_LENGTH} printable ASCII characters without spaces (e.g. the output of \`openssl rand -hex 32\`)`,
    };
  }
  if (token === null && !isLoopback(listen.host)) {
    const what = isWildcard(listen.host) ? 'every interface' : 'a non-loopback address';
    return {
      ok: false,
      why: `listens on ${what}: set ${TOKEN_ENV} (clients send "Authorization: Bearer <token>"), or listen on 127.0.0.1`,
    };
  }
  return { ok: true, token };
}

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/** `Authorization: Bearer <token>`, compared in constant time: both sides are hashed first, so
 * neither the comparison nor an early length mismatch tells how much of a guess was right. */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const m = /^Bearer +(\S+) *$/i.exec(header ?? '');
  const same = timingSafeEqual(digest(m?.[1] ?? ''), digest(token));
  return m !== null && same;
}

/** The host names a Host header may carry for a server listening at `listen` (bound to `port`). */
function acceptedNames(listen: ListenAddress): Set<string> {
  const names = new Set<string>([listen.host.toLowerCase()]);
  if (isLoopback(listen.host) || isWildcard(listen.host)) {
    for (const n of ['localhost', '127.0.0.1', '::1']) names.add(n);
  }
  if (isWildcard(listen.host)) {
    // Reached by any local address (a Kubernetes probe uses the pod IP) or the machine's name.
    names.add(hostname().toLowerCase());
    for (const list of Object.values(networkInterfaces())) {
      for (const a of list ?? []) names.add(a.address.toLowerCase().replace(/%.*$/, ''));
    }
  }
  return names;
}

/** Whether the Host header names this server: one of its addresses (or names) and its port. */
export function hostAllowed(header: string | undefined, listen: ListenAddress, port: number): boolean {
  if (!header || header.length > 300) return false;
  let url: URL;
  try {
    url = new URL(`http://${header}`);
  } catch {
    return false;
  }
  if (url.username || url.password || url.pathname !== '/' || url.search || url.hash) return false;
  const given = url.port === '' ? 80 : Number(url.port);
  if (given !== port) return false;
  const name = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return acceptedNames(listen).has(name);
}

/** Whether a request that changes something comes from this server's own page, or from no page
 * at all (curl sends no Origin): an Origin naming another host, or a browser that says the
 * request is cross-site, is refused. */
export function sameOrigin(
  origin: string | undefined,
  fetchSite: string | string[] | undefined,
  host: string | undefined,
): boolean {
  if (fetchSite !== undefined && fetchSite !== 'same-origin' && fetchSite !== 'none') return false;
  if (origin === undefined) return true;
  return host !== undefined && origin.toLowerCase() === `http://${host.toLowerCase()}`;
}
