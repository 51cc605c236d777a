// The validated config as the short commands find it without validating it again (SPEC §3 "the
// cost of a fire does not grow"): the cache of scheduler/list-cache.ts, written by the
// scheduler and by the full path of `routine list`, `validate`, `lock run` and `lock status`
// once they have validated the config, keyed by this very config file (inode, size and times),
// every ROUTINELY_* variable and TZ, the version and the user. A key that does not match means
// the full path, which validates and reports exactly as before.

import { checkLockFolder, checkTrustedPaths } from '../config/trust.js';
import { hostIdProblem } from '../config/host-id.js';
import { dirname, join, resolve } from 'node:path';
import { configTextOf, findConfig, readConfigBytes, stripJsonComments } from '../config/find.js';
import { listCacheKey, readProjectCache, type CachedProject } from '../scheduler/list-cache.js';
import { VERSION } from '../version.js';
import { isObj } from '../is-object.js';

const nonEmpty = (v: string | undefined): string | undefined => (v === undefined || v === '' ? undefined : v);

export interface CachedConfig {
  configPath: string;
  root: string;
  /** The cache's key (list-cache.ts): the list cache is read with it. */
  key: string;
  project: CachedProject;
}

/** The cache for the config the command would use, or null (then the full path runs). Throws
 * nothing the full path would not report itself: callers treat a throw as null. */
export function cachedConfig(configArg: string | undefined, env: NodeJS.ProcessEnv): CachedConfig | null {
  // (a variable the full path refuses: it says why)
  if (env.ROUTINELY_LIST_CACHE === '0' || hostIdProblem(env) !== null) return null;
  const configPath = findConfig({ configPath: configArg, env });
  const key = listCacheKey(configPath, env, VERSION);
  if (key === null) return null;
  const root = dirname(configPath);
  // where the cache usually is — the environment's state folder, or the default one — is tried
  // before the config is read: a cache there for this key was written for this very config, and
  // names the folder it gave (1 000 routines: the config's parse and its garbage, ≈ 2 ms)
  const usual = resolve(root, nonEmpty(env.ROUTINELY_STATE_DIR) ?? '.routinely');
  const atUsual = () => {
    // SPEC §12 on every start, as the full path does (a refusal: the full path says why)
    checkTrustedPaths({ configPath, root, stateDir: usual });
    const p = readProjectCache(usual, key);
    return p?.stateDir === usual ? p : null;
  };
  const project = atUsual() ?? configuredProject(configPath, root, key, env);
  if (!project) return null;
  if (project.lockDir !== resolve(root, nonEmpty(env.ROUTINELY_LOCK_DIR) ?? join(project.stateDir, 'locks')))
    return null;
  if (nonEmpty(env.ROUTINELY_LOCK_DIR)) checkLockFolder(project.lockDir);
  return { configPath, root, key, project };
}

/** The cache in the state folder the config names (stateDir as resolveProject, config/load.ts,
 * places it), or null. */
function configuredProject(
  configPath: string,
  root: string,
  key: string,
  env: NodeJS.ProcessEnv,
): CachedProject | null {
  const raw = parseJsonc(configTextOf(readConfigBytes(configPath)));
  if (!isObj(raw)) return null;
  // files only (the database backend has no cache)
  if (raw.backend !== undefined && !(isObj(raw.backend) && raw.backend.type === 'file')) return null;
  if (isObj(raw.lock) && raw.lock.backend !== undefined && raw.lock.backend !== 'file') return null;
  const stateDirRaw = raw.stateDir ?? '.routinely';
  if (typeof stateDirRaw !== 'string') return null;
  const stateDir = resolve(root, nonEmpty(env.ROUTINELY_STATE_DIR) ?? stateDirRaw);
  checkTrustedPaths({ configPath, root, stateDir });
  const project = readProjectCache(stateDir, key);
  return project?.stateDir === stateDir ? project : null;
}

/** JSON, or JSON with comments: the native parser first (a zone like "Europe/Berlin" has a slash
 * but no comment), the comments blanked only when that fails. */
function parseJsonc(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return JSON.parse(stripJsonComments(text));
  }
}
