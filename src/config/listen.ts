// The `[HOST:]PORT` of `scheduler start --http` and `http.listen` (SPEC §11). Pure parsing, shared
// by the config validator and the CLI flag, so both accept and refuse exactly the same values.

export interface ListenAddress {
  /** An IP literal (IPv6 without brackets); `localhost` is read as 127.0.0.1. */
  host: string;
  /** 0 asks the system for a free port (tests). */
  port: number;
}

export const DEFAULT_HTTP_HOST = '127.0.0.1';

// Not node:net's isIP: every command validates its config, and node:net is not loaded otherwise.
const IPV4 = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;
export const isIPv4 = (s: string): boolean => IPV4.test(s);
export function isIPv6(s: string): boolean {
  if (!/^[0-9A-Fa-f:.]+$/.test(s) || !s.includes(':')) return false;
  try {
    return new URL(`http://[${s}]/`).hostname !== '';
  } catch {
    return false;
  }
}

const HOST_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/** `9464`, `127.0.0.1:9464`, `0.0.0.0:9464`, `[::1]:9464`, `localhost:9464`, `myhost:9464`.
 * Returns the address, or what is wrong with the text. */
export function parseListen(text: string): ListenAddress | string {
  const s = text.trim();
  let host = DEFAULT_HTTP_HOST;
  let portText = s;
  if (s.startsWith('[')) {
    const end = s.indexOf(']');
    if (end < 0 || s[end + 1] !== ':') return 'an IPv6 address goes in brackets before the port, e.g. [::1]:9464';
    host = s.slice(1, end);
    portText = s.slice(end + 2);
    if (!isIPv6(host)) return `${JSON.stringify(host)} is not an IPv6 address`;
  } else if (s.includes(':')) {
    const at = s.lastIndexOf(':');
    host = s.slice(0, at);
    portText = s.slice(at + 1);
    if (host.includes(':')) return 'an IPv6 address goes in brackets, e.g. [::1]:9464';
    if (host === '') return 'the host before ":" is empty (omit it for 127.0.0.1)';
    if (host === 'localhost') host = DEFAULT_HTTP_HOST;
    else if (!isIPv4(host) && !HOST_NAME.test(host)) return `${JSON.stringify(host)} is not an IP address or host name`;
  }
  if (!/^\d{1,5}$/.test(portText) || Number(portText) > 65535)
    return `${JSON.stringify(portText)} is not a port (0-65535)`;
  return { host, port: Number(portText) };
}

/** `127.0.0.1:9464`, `[::]:9464`: how the address is written back in messages and URLs. */
export function formatListen(a: ListenAddress): string {
  return `${isIPv6(a.host) ? `[${a.host}]` : a.host}:${a.port}`;
}
