// Finding, reading and resolving the project config (SPEC §2): routinely.json found by walking
// up from the current directory, `--config` / ROUTINELY_CONFIG overriding, environment
// overrides winning over the file. Bad values are errors, never silent defaults.

import { createHash } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readFileSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { ConfigError, UsageError, errnoCode } from '../errors.js';
import type { Config } from './schema.js';
import { validateConfig, type ValidateOptions } from './validate.js';

export const CONFIG_FILE = 'routinely.json';

export interface LoadOptions extends ValidateOptions {
  cwd?: string;
  /** Explicit config path (`--config`); else ROUTINELY_CONFIG; else search upward. */
  configPath?: string;
  env?: NodeJS.ProcessEnv;
}

export interface Project {
  /** The folder holding the config file. */
  root: string;
  configPath: string;
  config: Config;
  stateDir: string;
  lockDir: string;
  lockTtlMs: number;
  lockRefreshMs: number;
  /** The exact config text that validated (kept for the scheduler's snapshot). */
  configText?: string;
  backend: ProjectBackend;
}

export type ProjectBackend = { type: 'file' } | { type: 'postgres'; url: string; project: string };

/** The config path as the user should read it in messages. */
export function displayPath(path: string, cwd = process.cwd()): string {
  const rel = relative(cwd, path);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : path;
}

export function findConfig(options: LoadOptions = {}): string {
  const cwd = options.cwd ?? process.cwd();
  const env = options.env ?? process.env;
  const explicit = options.configPath ?? (env.ROUTINELY_CONFIG || undefined);
  if (explicit !== undefined) {
    const p = resolve(cwd, explicit);
    const source = options.configPath !== undefined ? '--config' : 'ROUTINELY_CONFIG';
    if (!isFile(p)) throw new UsageError(`${source}: ${explicit} does not exist or is not a file`);
    checkConfigOwner(p, source);
    return p;
  }
  // Like git's safe.directory: the search never crosses into a folder of another user, and a
  // config that another user owns or may write is refused (it decides what runs as you).
  const me = uid();
  for (let dir = resolve(cwd); ; dir = dirname(dir)) {
    const owner = ownerOf(dir);
    if (me !== null && owner !== null && owner !== me) {
      throw new UsageError(
        `no ${CONFIG_FILE} found in ${resolve(cwd)}${dir === resolve(cwd) ? '' : ' or its parents'}: the search stopped at ${dir}, which belongs to uid ${owner}, not to this user (uid ${me}); routinely never reads a config from another user's folder — pass --config PATH for one of yours`,
      );
    }
    const candidate = join(dir, CONFIG_FILE);
    if (isFile(candidate)) {
      checkConfigOwner(candidate, 'the config search');
      return candidate;
    }
    if (dirname(dir) === dir) break;
  }
  throw new UsageError(
    `no ${CONFIG_FILE} found in ${resolve(cwd)} or any parent folder; run \`routinely init\` or pass --config PATH`,
  );
}

const uid = (): number | null => (typeof process.geteuid === 'function' ? process.geteuid() : null);

function ownerOf(p: string): number | null {
  try {
    return statSync(p).uid;
  } catch {
    return null;
  }
}

/** A config owned by another user, or writable by group or others, is refused (SPEC §12). */
function checkConfigOwner(p: string, source: string): void {
  const st = statSync(p);
  const me = uid();
  if (me !== null && st.uid !== me) {
    throw new UsageError(`${source}: refusing ${p}: it belongs to uid ${st.uid}, not to this user (uid ${me}); a config decides what runs as you — run routinely as its owner`);
  }
  if ((st.mode & 0o022) !== 0) {
    throw new UsageError(`${source}: refusing ${p}: other users may write it (mode ${(st.mode & 0o777).toString(8).padStart(4, '0')}); fix it with: chmod 644 ${p}`);
  }
}

function isFile(p: string): boolean {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
}

/** Blanks out line (`//`) and block comments outside strings (JSONC, as `routinely init` writes and
 * editors accept), keeping every line and column where it was for error messages. */
export function stripJsonComments(text: string): string {
  let out = '';
  let i = 0;
  let inString = false;
  while (i < text.length) {
    const c = text[i]!;
    if (inString) {
      out += c;
      if (c === '\\') {
        out += text[i + 1] ?? '';
        i += 2;
        continue;
      }
      if (c === '"') inString = false;
      i++;
    } else if (c === '"') {
      inString = true;
      out += c;
      i++;
    } else if (c === '/' && text[i + 1] === '/') {
      while (i < text.length && text[i] !== '\n') {
        out += ' ';
        i++;
      }
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      const stop = end === -1 ? text.length : end + 2;
      for (; i < stop; i++) out += text[i] === '\n' ? '\n' : ' ';
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

/** Parses JSON (comments allowed), naming the line and column of a syntax error. */
export function parseJsonFile(text: string, shown: string): unknown {
  try {
    return JSON.parse(text.includes('/') ? stripJsonComments(text) : text);
  } catch (err) {
    const msg = (err as Error).message;
    const pos = /position (\d+)/.exec(msg);
    let where = '';
    if (pos) {
      const before = text.slice(0, Number(pos[1]));
      const line = before.split('\n').length;
      const col = before.length - before.lastIndexOf('\n');
      where = ` at line ${line}, column ${col}`;
    }
    throw new ConfigError(shown, [{ path: '', message: `invalid JSON${where}: ${msg}` }]);
  }
}

export function readConfigFile(path: string, options: ValidateOptions = {}, cwd = process.cwd()): Config {
  return readConfig(path, options, cwd).config;
}

/** The environment variable through which the scheduler hands its children the config text it
 * validated: a routine keeps running with the config the scheduler kept, even while the file
 * on disk holds a newer, invalid one (SPEC §6: a bad new config is logged and the old one kept). */
export const SNAPSHOT_ENV = 'ROUTINELY_CONFIG_SNAPSHOT';

/** The SHA-256 of the snapshot file's content, handed to children beside its path: a child uses
 * the snapshot only if it is exactly what its scheduler wrote (SPEC §12). */
export const SNAPSHOT_HASH_ENV = 'ROUTINELY_CONFIG_SNAPSHOT_SHA256';

export interface ConfigSnapshot {
  config_path: string;
  text: string;
}

function configText(path: string, shown: string, env: NodeJS.ProcessEnv): string {
  const snapshotPath = env[SNAPSHOT_ENV];
  const hash = env[SNAPSHOT_HASH_ENV];
  if (snapshotPath && hash) {
    try {
      // never through a symlink, only a file of ours, and only the exact bytes the scheduler wrote
      const fd = openSync(snapshotPath, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
      let bytes: Buffer;
      try {
        const st = fstatSync(fd);
        if (!st.isFile() || (uid() !== null && st.uid !== uid()) || st.size > 16 * 1024 * 1024) throw new Error('not ours');
        bytes = readFileSync(fd);
      } finally {
        closeSync(fd);
      }
      if (createHash('sha256').update(bytes).digest('hex') === hash) {
        const snap = JSON.parse(bytes.toString('utf8')) as Partial<ConfigSnapshot>;
        if (snap.config_path === path && typeof snap.text === 'string') return snap.text;
      }
    } catch {
      // no usable snapshot: read the file itself
    }
  }
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(shown, [{ path: '', message: `cannot read the file (${errnoCode(err) ?? String(err)})` }]);
  }
}

export function readConfig(path: string, options: ValidateOptions = {}, cwd = process.cwd(), env: NodeJS.ProcessEnv = process.env): { config: Config; text: string } {
  const shown = displayPath(path, cwd);
  const text = configText(path, shown, env);
  const result = validateConfig(parseJsonFile(text, shown), options);
  if (!result.ok) throw new ConfigError(shown, result.issues);
  return { config: result.value, text };
}

/** Reads a number of seconds from the environment; bad values are errors, not defaults. */
function envSeconds(env: NodeJS.ProcessEnv, name: string, min: number, max: number, exclusiveMin = false): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!/^\s*\d+(\.\d+)?\s*$/.test(raw) || !Number.isFinite(n) || n > max || (exclusiveMin ? n <= min : n < min)) {
    const range = exclusiveMin ? `greater than ${min} and at most ${max}` : `between ${min} and ${max}`;
    throw new UsageError(`${name}: ${JSON.stringify(raw)} is not a number of seconds ${range}`);
  }
  return n;
}

export function loadProject(options: LoadOptions = {}): Project {
  const cwd = options.cwd ?? process.cwd();
  const env = options.env ?? process.env;
  const configPath = findConfig(options);
  const { config, text } = readConfig(configPath, options, cwd, env);
  return { ...resolveProject(configPath, config, env), configText: text };
}

/** Applies the environment overrides of SPEC §2 to a validated config. */
export function resolveProject(configPath: string, config: Config, env: NodeJS.ProcessEnv = process.env): Project {
  const root = dirname(configPath);
  const stateDir = resolve(root, nonEmpty(env, 'ROUTINELY_STATE_DIR') ?? config.stateDir);
  const lockDir = resolve(root, nonEmpty(env, 'ROUTINELY_LOCK_DIR') ?? join(stateDir, 'locks'));
  const ttl = envSeconds(env, 'ROUTINELY_LOCK_TTL_SECONDS', 1, 86400) ?? config.lock.ttlSeconds;
  const refreshEnv = envSeconds(env, 'ROUTINELY_LOCK_REFRESH_SECONDS', 0, 86400, true);
  const refresh = refreshEnv ?? config.lock.refreshSeconds ?? ttl / 3;
  if (refresh >= ttl / 2) {
    const source = refreshEnv !== undefined ? 'ROUTINELY_LOCK_REFRESH_SECONDS' : 'lock.refreshSeconds';
    throw new UsageError(`${source}: ${refresh} must be below the lock TTL / 2 (TTL ${ttl}s)`);
  }
  return {
    root, configPath, config, stateDir, lockDir, lockTtlMs: ttl * 1000, lockRefreshMs: refresh * 1000,
    backend: resolveBackend(config, env),
  };
}

/** Shows a database URL (or any text holding one) without its password (SPEC §12): the
 * `user:password@` part with or without a scheme, and `password=` parameters of a URL query or
 * a libpq key-value string. */
export function redactUrl(url: string): string {
  let out = url;
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    for (const key of [...u.searchParams.keys()]) if (/password/i.test(key)) u.searchParams.set(key, '***');
    out = u.toString().replace(/%2A%2A%2A/g, '***');
  } catch {
    // not a URL: the patterns below
  }
  return out
    .replace(/(^|[\s/"'=(])([^\s:/@"'=(]+):[^@\s/"']*@/g, '$1$2:***@')
    .replace(/(password\s*=\s*)('[^']*'|"[^"]*"|[^\s&;'"]+)/gi, '$1***');
}

function resolveBackend(config: Config, env: NodeJS.ProcessEnv): ProjectBackend {
  if (config.backend.type === 'file') return { type: 'file' };
  const fromEnv = nonEmpty(env, 'ROUTINELY_DATABASE_URL');
  const url = fromEnv ?? config.backend.url;
  const source = fromEnv !== undefined ? 'ROUTINELY_DATABASE_URL' : 'backend.url';
  if (url === undefined) {
    throw new UsageError('the postgres backend needs a database URL: set backend.url in the config or ROUTINELY_DATABASE_URL');
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError(`${source}: ${JSON.stringify(redactUrl(url))} is not a URL (expected postgres://user:password@host:5432/database)`);
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') {
    throw new UsageError(`${source}: ${JSON.stringify(redactUrl(url))} is not a postgres:// URL`);
  }
  return { type: 'postgres', url, project: config.project! };
}

/** An empty variable counts as unset (as in `ROUTINELY_STATE_DIR= routinely …`). */
function nonEmpty(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v === '' ? undefined : v;
}
