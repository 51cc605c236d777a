// Where the HTTP server listens and with which token (SPEC §11): `--http` wins over
// `http.listen`; a non-loopback address without ROUTINELY_HTTP_TOKEN is refused (exit 2) before
// anything starts. Light on purpose (scheduler-command imports it, and `routine list` imports
// scheduler-command): the checks load on use, prom-client and the server only after this says yes.

import { formatListen, parseListen, type ListenAddress } from '../config/listen.js';
import type { Project } from '../config/load.js';
import { UsageError } from '../errors.js';

export interface HttpSetup {
  listen: ListenAddress;
  token: string | null;
}

/** null when neither `--http` nor `http.listen` asks for the server. */
export async function httpSetup(flag: string | undefined, project: Project, env: NodeJS.ProcessEnv = process.env): Promise<HttpSetup | null> {
  const text = flag ?? project.config.http?.listen;
  if (text === undefined) return null;
  const listen = parseListen(text);
  if (typeof listen === 'string') throw new UsageError(`--http ${JSON.stringify(text)} is not [HOST:]PORT: ${listen}`);
  const exposure = (await import('../http/security.js')).checkExposure(listen, env);
  if (!exposure.ok) throw new UsageError(`--http ${formatListen(listen)} ${exposure.why}`);
  return { listen, token: exposure.token };
}
