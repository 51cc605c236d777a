// Finding, reading and resolving the project config (SPEC §2): routinely.json found by walking
// up from the current directory, `--config` / ROUTINELY_CONFIG overriding, environment
// overrides winning over the file. Bad values are errors, never silent defaults.

import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { parsePgUrl } from './database-url.js';
import { redactSecrets } from '../redact.js';
import { ConfigError, UnsafePathError, UsageError, errnoCode, errnoWords } from '../errors.js';
import { UntrustedPathError, checkLockFolder, checkTrustedPaths } from './trust.js';
import { realPath, statFollow } from '../fs/look.js';
import { printable } from '../printable.js';
import { hostIdProblem } from './host-id.js';
import {
  CONFIG_FILE,
  displayPath,
  findConfig,
  findConfigUpward,
  isFile,
  configTextOf,
  readConfigBytes,
  stripJsonComments,
} from './find.js';
import { findJsonSyntaxError, lineColumn } from './json-syntax.js';

export { CONFIG_FILE, displayPath, findConfig, findConfigUpward, isFile, stripJsonComments };
import type { Config } from './types.js';
import { validateConfig, type ValidateOptions } from './validate.js';

export interface LoadOptions extends ValidateOptions {
  cwd?: string;
  /** Explicit config path (`--config`); else ROUTINELY_CONFIG; else search upward. */
  configPath?: string;
  /** Where an explicit configPath came from, for messages (find.ts). */
  configSource?: string;
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

export type ProjectBackend = { type: 'file' } | { type: 'postgres'; url: string; project: string; poolSize: number };

/** Parses JSON (comments allowed); a syntax error names its line and column
 * (`routinely.json: line 7, column 3: invalid JSON: trailing comma before "}" (JSON allows none)`). */
export function parseJsonFile(text: string, shown: string): unknown {
  const json = text.includes('/') ? stripJsonComments(text) : text;
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (err) {
    const syntax = findJsonSyntaxError(json);
    if (syntax) {
      const { line, column } = lineColumn(json, syntax.offset);
      throw new ConfigError(shown, [
        { path: '', message: `line ${line}, column ${column}: invalid JSON: ${syntax.message}` },
      ]);
    }
    // Not found by our checker (it should be): JSON.parse's own words, without the quoted text.
    const msg = (err as Error).message.split('\n')[0]!.slice(0, 200);
    throw new ConfigError(shown, [{ path: '', message: `invalid JSON: ${msg}` }]);
  }
  // valid JSON, unless a key is given twice in one object (JSON.parse keeps the last, silently)
  const twice = findJsonSyntaxError(json);
  if (twice) {
    const { line, column } = lineColumn(json, twice.offset);
    throw new ConfigError(shown, [{ path: '', message: `line ${line}, column ${column}: ${twice.message}` }]);
  }
  return value;
}

export function readConfigFile(path: string, options: ValidateOptions = {}, cwd = process.cwd()): Config {
  return readConfig(path, options, cwd).config;
}

function configText(path: string, shown: string): string {
  try {
    return configTextOf(readConfigBytes(path));
  } catch (err) {
    throw new ConfigError(shown, [
      {
        path: '',
        message: errnoCode(err) ? `cannot read the file: ${errnoWords(errnoCode(err)!)}` : (err as Error).message,
      },
    ]);
  }
}

export function readConfig(
  path: string,
  options: ValidateOptions = {},
  cwd = process.cwd(),
): { config: Config; text: string } {
  const shown = displayPath(path, cwd);
  const text = configText(path, shown);
  const result = validateConfig(parseJsonFile(text, shown), options);
  if (!result.ok) throw new ConfigError(shown, result.issues);
  return { config: result.value, text };
}

/** Reads a number of seconds from the environment; bad values are errors, not defaults. */
function envSeconds(
  env: NodeJS.ProcessEnv,
  name: string,
  min: number,
  max: number,
  exclusiveMin = false,
): number | undefined {
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
  const { config, text } = readConfig(configPath, options, cwd);
  const cwdIssues = workingFolderIssues(dirname(configPath), config);
  if (cwdIssues.length > 0) throw new ConfigError(displayPath(configPath, cwd), cwdIssues);
  return { ...resolveProject(configPath, config, env), configText: text };
}

/** A routine's or an inline task's `cwd` that is there but is no folder, or leaves the project
 * through a symbolic link: refused by validate and at start, never found by the first fire (a
 * `cwd` not there yet is the fire's to say: a build may make it). */
function workingFolderIssues(root: string, config: Config): { path: string; message: string }[] {
  const issues: { path: string; message: string }[] = [];
  const look = (cwd: string | undefined, path: string): void => {
    if (cwd === undefined) return;
    const problem = workingFolderProblem(root, cwd);
    if (problem) issues.push({ path, message: `${JSON.stringify(cwd)} ${problem}` });
  };
  config.routines.forEach((r, i) => look(r.cwd, `routines[${i}].cwd`));
  config.exec.tasks.forEach((t, i) => look(t.cwd, `exec.tasks[${i}].cwd`));
  return issues;
}

/** Why `cwd` (relative to `root`) cannot be a command's working folder now, or null (a task
 * file's tasks are looked at where they are read: exec/task-source.ts). */
export function workingFolderProblem(root: string, cwd: string): string | null {
  const wanted = resolve(root, cwd);
  const st = statFollow(wanted);
  if (!st) return null;
  if (!st.isDirectory()) return 'is not a folder';
  let real: string;
  let rootReal: string;
  try {
    real = realPath(wanted);
    rootReal = realPath(root);
  } catch {
    return null;
  }
  const rel = relative(rootReal, real);
  return rel === '..' || rel.startsWith('../') || isAbsolute(rel)
    ? `leaves the project root through a symbolic link (it is ${printable(real)})`
    : null;
}

/** Applies the environment overrides of SPEC §2 to a validated config. */
export function resolveProject(configPath: string, config: Config, env: NodeJS.ProcessEnv = process.env): Project {
  const root = dirname(configPath);
  const stateDir = resolve(root, nonEmpty(env, 'ROUTINELY_STATE_DIR') ?? config.stateDir);
  const lockDir = resolve(root, nonEmpty(env, 'ROUTINELY_LOCK_DIR') ?? join(stateDir, 'locks'));
  const ttl = envSeconds(env, 'ROUTINELY_LOCK_TTL_SECONDS', 1, 86400) ?? config.lock.ttlSeconds;
  const refreshEnv = envSeconds(env, 'ROUTINELY_LOCK_REFRESH_SECONDS', 0, 86400, true);
  const refresh = refreshEnv ?? config.lock.refreshSeconds ?? ttl / 3;
  const hostWhy = hostIdProblem(env);
  if (hostWhy) throw new UsageError(hostWhy);
  // what the folder is first (a file, a device, a name too long), then whose it is
  const stateWhy = stateFolderProblem(stateDir);
  if (stateWhy) {
    if (nonEmpty(env, 'ROUTINELY_STATE_DIR')) throw new UsageError(`ROUTINELY_STATE_DIR: ${stateWhy}`);
    throw new ConfigError(displayPath(configPath), [{ path: 'stateDir', message: stateWhy }]);
  }
  // the state folder as a task folder, however it was given (validate compares the config's text)
  const taskDir = config.exec.taskDirs.find((d) => resolve(root, d) === stateDir);
  if (taskDir !== undefined) {
    const source = nonEmpty(env, 'ROUTINELY_STATE_DIR') ? 'ROUTINELY_STATE_DIR' : 'stateDir';
    throw new UsageError(
      `${source}: ${printable(stateDir)} is also the task folder ${JSON.stringify(taskDir)} (exec.taskDirs in ${displayPath(configPath)}): the files routinely keeps there would be read as task files; give the state folder a folder of its own`,
    );
  }
  const lockWhy = nonEmpty(env, 'ROUTINELY_LOCK_DIR') ? stateFolderProblem(lockDir) : null;
  if (lockWhy) throw new UsageError(`ROUTINELY_LOCK_DIR: ${lockWhy}`);
  try {
    checkTrustedPaths({ configPath, root, stateDir });
    if (nonEmpty(env, 'ROUTINELY_LOCK_DIR')) checkLockFolder(lockDir);
  } catch (err) {
    if (err instanceof UntrustedPathError) throw new UnsafePathError(err.message);
    throw err;
  }
  if (refresh >= ttl / 2) {
    const source = refreshEnv !== undefined ? 'ROUTINELY_LOCK_REFRESH_SECONDS' : 'lock.refreshSeconds';
    throw new UsageError(`${source}: ${refresh} must be below the lock TTL / 2 (TTL ${ttl}s)`);
  }
  return {
    root,
    configPath,
    config,
    stateDir,
    lockDir,
    lockTtlMs: ttl * 1000,
    lockRefreshMs: refresh * 1000,
    backend: resolveBackend(config, env, configPath),
  };
}

/** Why `dir` cannot be a state folder (a kernel pseudo file system, or a file that is not a
 * folder), or null: said by validate and at start, naming where it came from. */
function stateFolderProblem(dir: string): string | null {
  const pseudo = ['/proc', '/sys', '/dev'].find((p) => dir === p || dir.startsWith(`${p}/`));
  if (pseudo) return `${dir} is on ${pseudo}, a kernel pseudo file system; choose a real folder for state`;
  const shown = printable(dir);
  const parts = dir.split('/');
  if (parts.some((part) => part !== '' && part.trim() === ''))
    return `${JSON.stringify(dir)} has a folder name of blanks only in it (a typo?); give a real path`;
  const long = parts.find((part) => Buffer.byteLength(part) > NAME_MAX);
  if (long !== undefined)
    return `${shown} has a name of ${Buffer.byteLength(long)} bytes in it; a file system takes at most ${NAME_MAX}`;
  if (Buffer.byteLength(dir) > STATE_PATH_MAX)
    return `${shown} is ${Buffer.byteLength(dir)} bytes long; the files in it need a path of at most ${STATE_PATH_MAX} for the folder (4096 in all)`;
  // the folder, or the nearest part of its path that exists: a folder (it is made below it)
  for (let at = dir; ; at = dirname(at)) {
    const st = statFollow(at);
    if (st) {
      if (st.isDirectory()) return null;
      return at === dir ? `${shown} is not a folder` : `${shown} cannot be made: ${printable(at)} is not a folder`;
    }
    if (dirname(at) === at) return null;
  }
}

/** The longest name of one part of a path (Linux, macOS), and how long a state folder's own path
 * may be: the longest file routinely makes in it (a named lock's kept stale record, a routine's
 * history temp) stays within PATH_MAX, 4096. */
const NAME_MAX = 255;
const STATE_PATH_MAX = 3800;

/** Shows a database URL (or any text holding one) without its password (SPEC §12): the
 * `user:password@` part with or without a scheme, and `password=` parameters of a URL query or
 * a libpq key-value string. */
export function redactUrl(url: string): string {
  return redactSecrets(url);
}

function resolveBackend(config: Config, env: NodeJS.ProcessEnv, configPath: string): ProjectBackend {
  if (config.backend.type === 'file') return { type: 'file' };
  const fromEnv = nonEmpty(env, 'ROUTINELY_DATABASE_URL');
  const url = fromEnv ?? config.backend.url;
  const source = fromEnv !== undefined ? 'ROUTINELY_DATABASE_URL' : 'backend.url';
  if (url === undefined) {
    throw new UsageError(
      'the postgres backend needs a database URL: set backend.url in the config or ROUTINELY_DATABASE_URL',
    );
  }
  // libpq's forms too: several hosts, target_session_attrs, a password holding '/' (SPEC §9)
  const parsed = parsePgUrl(url);
  if (typeof parsed === 'string') {
    const message = `${JSON.stringify(redactUrl(url))}: ${parsed}`;
    // the config's own value: named with its file and JSON path (validate --json has both)
    if (fromEnv === undefined) throw new ConfigError(displayPath(configPath), [{ path: source, message }]);
    throw new UsageError(`${source}: ${message}`);
  }
  return { type: 'postgres', url, project: config.project!, poolSize: config.backend.poolSize };
}

/** An empty variable counts as unset (as in `ROUTINELY_STATE_DIR= routinely …`). */
function nonEmpty(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v === '' ? undefined : v;
}
