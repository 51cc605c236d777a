// A plain HTTP request for the status server's tests: node:http rather than fetch, because the tests
// send Host headers of their own (fetch does not let a caller choose it).

import { request } from 'node:http';

export interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export function httpGet(
  url: string,
  headers: Record<string, string> = {},
  method = 'GET',
  body?: string,
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers, timeout: 20_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${url} timed out`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** One sample of a Prometheus text exposition: `name{a="b",c="d"} value`. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([a-z_:][a-z0-9_:]*)(?:\{(.*)\})? (\S+)$/i.exec(line);
    if (!m || m[1] !== name) continue;
    const got: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-z_][a-z0-9_]*)="((?:[^"\\]|\\.)*)"/gi)) got[l[1]!] = l[2]!;
    if (
      Object.keys(labels).length === Object.keys(got).length &&
      Object.entries(labels).every(([k, v]) => got[k] === v)
    )
      return Number(m[3]);
  }
  return undefined;
}
