// One webhook delivery attempt: a JSON POST over node:http(s), judged by the status code. Bounded
// by a timeout over the whole attempt (connect, request, response) and abortable, so a receiver
// that never answers can hold a caller no longer than that.

import type { ClientRequest, IncomingMessage } from 'node:http';
import { createRequire } from 'node:module';
import { redactUrl } from '../config/load.js';

const lazyRequire = createRequire(import.meta.url);

export type AttemptResult = { ok: true } | { ok: false; error: string; retry: boolean };

/** `https://hooks.example/…`: the URL as logs show it, without credentials, path or query,
 * where webhook tokens usually sit. */
export function webhookLabel(url: string): string {
  try {
    const u = new URL(url);
    const more = u.pathname !== '/' || u.search !== '' || u.hash !== '';
    return `${u.protocol}//${u.host}${more ? '/…' : ''}`;
  } catch {
    return redactUrl(url).replace(/[?#].*$/, '?…');
  }
}

/** Error texts of node:http name the host and port at most; a URL in them is cut down anyway. */
function protocolOf(url: string): string {
  try {
    return new URL(url).protocol;
  } catch {
    return '';
  }
}

function clean(message: string, url: string): string {
  return message.split(url).join(webhookLabel(url));
}

export async function postWebhook(
  url: string,
  body: string,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<AttemptResult> {
  // node:http and node:https (with TLS) load at the first delivery: a scheduler that never posts
  // does not carry them (≈ 3 MB of its memory, docs/benchmarks.md). Required, not imported: the
  // command line's program is compiled from a code cache, where import() has no loader.
  const { request } = (
    protocolOf(url) === 'https:' ? lazyRequire('node:https') : lazyRequire('node:http')
  ) as typeof import('node:http');
  return new Promise((resolve) => {
    let settled = false;
    let req: ClientRequest | undefined;
    const done = (r: AttemptResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      req?.destroy();
      resolve(r);
    };
    const onAbort = (): void => done({ ok: false, error: 'stopped', retry: false });
    const timer = setTimeout(
      () => done({ ok: false, error: `no answer within ${timeoutMs / 1000}s`, retry: true }),
      timeoutMs,
    );
    if (signal?.aborted) return onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    let u: URL;
    try {
      u = new URL(url);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('not an http: or https: URL');
    } catch (err) {
      return done({ ok: false, error: `invalid webhook URL: ${(err as Error).message}`, retry: false });
    }
    try {
      req = request(u, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'user-agent': 'routinely',
        },
      });
    } catch (err) {
      return done({ ok: false, error: clean((err as Error).message, url), retry: false });
    }
    req.on('error', (err) => done({ ok: false, error: clean(err.message, url), retry: true }));
    req.on('response', (res: IncomingMessage) => {
      const status = res.statusCode ?? 0;
      // The body is not needed; read it to the end so the connection is let go.
      res.resume();
      res.on('error', () => {});
      if (status >= 200 && status < 300) done({ ok: true });
      else
        done({
          ok: false,
          error: `HTTP ${status}${status >= 300 && status < 400 ? ' (redirects are not followed)' : ''}`,
          retry: true,
        });
    });
    req.end(body);
  });
}
