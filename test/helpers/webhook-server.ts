// A real local HTTP server that receives webhooks (SPEC §10 tests): it records every request and
// answers each with the next behaviour of a script (a status code, or never answering).

import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { onTestFinished } from 'vitest';

export interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A status code to answer with, or 'hang': read the request and never answer. */
export type Behaviour = number | 'hang';

export interface WebhookServer {
  url: string;
  port: number;
  received: Received[];
  /** Bodies of the requests received, parsed as JSON. */
  payloads(): Record<string, unknown>[];
  /** Connections accepted (also those that never got an answer). */
  connections(): number;
}

/** Answers the n-th request with `script[n]` (the last entry repeats; default 200). */
export async function webhookServer(
  script: Behaviour[] = [200],
  onFinished: (fn: () => void) => void = onTestFinished,
): Promise<WebhookServer> {
  const received: Received[] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      });
      const b = script[Math.min(received.length - 1, script.length - 1)] ?? 200;
      if (b === 'hang') return;
      res.writeHead(b, { 'content-type': 'text/plain' }).end(b < 300 ? 'ok' : 'no');
    });
  });
  server.on('connection', (s) => {
    connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  onFinished(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    received,
    payloads: () => received.map((r) => JSON.parse(r.body) as Record<string, unknown>),
    connections: () => connections,
  };
}

/** A port on which nothing listens (connection refused): bound once, then closed. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}
