// Where the HTTP server listens and with which token (SPEC §11): `--http` wins over
// `http.listen`; a non-loopback address without ROUTINELY_HTTP_TOKEN is refused (exit 2) before
// anything starts. Light on purpose (scheduler-command imports it, and `routine list` imports
// scheduler-command): the checks load on use, prom-client and the server only after this says yes.

import { formatListen, parseListen } from '../config/listen.js';
import { displayPath, type Project } from '../config/load.js';
import { ConfigError, UsageError } from '../errors.js';

import type { HttpSetup, RoutineRows } from '../http/wiring.js';

export type { HttpSetup };

/** null when neither `--http` nor `http.listen` asks for the server. */
export async function httpSetup(
  flag: string | undefined,
  project: Project,
  env: NodeJS.ProcessEnv = process.env,
): Promise<HttpSetup | null> {
  const text = flag ?? project.config.http?.listen ?? undefined;
  if (text === undefined) return null;
  // named as the user gave it: the flag (exit 2), or the config's key (a config error naming the
  // file and the JSON path, as `validate --json` reports it)
  const refuse = (key: 'http.listen' | 'http.actions', message: string): Error =>
    flag !== undefined && key === 'http.listen'
      ? new UsageError(`--http ${message}`)
      : new ConfigError(displayPath(project.configPath), [{ path: key, message }]);
  const listen = parseListen(text);
  if (typeof listen === 'string') throw refuse('http.listen', `${JSON.stringify(text)} is not [HOST:]PORT: ${listen}`);
  const { checkExposure, TOKEN_ENV } = await import('../http/security.js');
  const exposure = checkExposure(listen, env);
  if (!exposure.ok) throw refuse('http.listen', `${formatListen(listen)} ${exposure.why}`);
  const actions = project.config.http?.actions === true;
  // an action changes what runs: never without the token, also on loopback (SPEC §11)
  if (actions && exposure.token === null) {
    throw refuse(
      'http.actions',
      `the actions need ${TOKEN_ENV} (at least 16 characters, e.g. \`openssl rand -hex 32\`), also on loopback; clients send it as "Authorization: Bearer <token>"`,
    );
  }
  return { listen, token: exposure.token, actions };
}

/** `routine list --json`'s rows for the page, imported on use: a static import would make
 * esbuild split routine-commands into a shared chunk, one more file for every `routine list`. */
export const routineRows: RoutineRows = async (project, now, backend, warn) =>
  (await import('./routine-commands.js')).routineRows(project, now, backend, warn);
