// Finding the project config (SPEC §2, §12): `--config`, ROUTINELY_CONFIG, or the nearest
// routinely.json upward, never another user's. Kept apart from validation (zod) so that the
// fast `routine list` path can find its config without loading it.

import type { Stats } from 'node:fs';
import { fileProblem, readFollowing } from '../fs/files.js';
import { lstatQuiet, statFollow, statOrWhy } from '../fs/look.js';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { UsageError, errnoWords } from '../errors.js';
import { printable } from '../printable.js';

export const CONFIG_FILE = 'routinely.json';

/** The config path as the user should read it in messages. */
export function displayPath(path: string, cwd = process.cwd()): string {
  const rel = relative(cwd, path);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : path;
}

export interface FindOptions {
  cwd?: string;
  /** Explicit config path (`--config`); else ROUTINELY_CONFIG; else search upward. */
  configPath?: string;
  /** Where an explicit configPath came from, for messages (default `--config`; a scheduler's
   * reload says `the config file`). */
  configSource?: string;
  env?: NodeJS.ProcessEnv;
}

export function findConfig(options: FindOptions = {}): string {
  const cwd = options.cwd ?? process.cwd();
  const env = options.env ?? process.env;
  const explicit = options.configPath ?? (env.ROUTINELY_CONFIG || undefined);
  if (explicit !== undefined) {
    const source = options.configPath !== undefined ? (options.configSource ?? '--config') : 'ROUTINELY_CONFIG';
    if (explicit === '') throw new UsageError(`${source} is empty: give the path of a ${CONFIG_FILE}`);
    const p = resolve(cwd, explicit);
    const not = notAFile(p);
    if (not) throw new UsageError(`${source}: ${printable(explicit)} ${not}`);
    checkConfigOwner(p, source);
    return p;
  }
  const found = findConfigUpward(resolve(cwd), true);
  if (found) return found;
  throw new UsageError(
    `no ${CONFIG_FILE} found in ${resolve(cwd)} or any parent folder; run \`routinely init\` or pass --config PATH`,
  );
}

const uid = (): number | null => (typeof process.geteuid === 'function' ? process.geteuid() : null);

function uidOf(p: string): number | null {
  return statFollow(p)?.uid ?? null;
}

/** A config owned by another user, or writable by group or others, is refused (SPEC §12). */
function checkConfigOwner(p: string, source: string): void {
  const st = statFollow(p);
  if (!st) throw new UsageError(`${source}: ${p} ${notAFile(p) ?? 'cannot be looked at'}`);
  const problem = fileProblem(st, { othersMayNot: 0o022 });
  if (problem?.kind === 'owner') {
    throw new UsageError(
      `${source}: refusing ${p}: it belongs to uid ${problem.uid}, not to this user (uid ${problem.me}); a config decides what runs as you — run routinely as its owner`,
    );
  }
  if (problem?.kind === 'mode') {
    throw new UsageError(
      `${source}: refusing ${p}: other users may write it (mode ${problem.mode}); fix it with: chmod 644 ${p}`,
    );
  }
}

/** The nearest `routinely.json` in `dir` or one of its parent folders. Like git's
 * safe.directory, the search never crosses into a folder of another user, and a config that
 * another user owns or may write is refused (it decides what runs as you): `strict` says so
 * (exit 2), otherwise the search just ends there (null). */
export function findConfigUpward(dir: string, strict = false): string | null {
  const me = uid();
  for (let d = dir; ; d = dirname(d)) {
    const owner = uidOf(d);
    if (me !== null && owner !== null && owner !== me) {
      if (!strict) return null;
      throw new UsageError(
        `no ${CONFIG_FILE} found in ${dir}${d === dir ? '' : ' or its parents'}: the search stopped at ${d}, which belongs to uid ${owner}, not to this user (uid ${me}); routinely never reads a config from another user's folder — pass --config PATH for one of yours`,
      );
    }
    const candidate = join(d, CONFIG_FILE);
    if (isFile(candidate)) {
      if (strict) checkConfigOwner(candidate, 'the config search');
      return candidate;
    }
    // something else at the name (a folder, a FIFO, a link to nothing or a loop): this folder's
    // config cannot be read, and a parent's is not this project's — stop here, named
    const there = lstatQuiet(candidate);
    if (there) {
      if (!strict) return null;
      const what =
        there.isSymbolicLink() && statFollow(candidate) === null ? brokenLink(candidate) : notAFile(candidate);
      throw new UsageError(
        `${candidate} ${what}: the config search stops at it (a parent folder's config is not this project's); fix it or pass --config PATH`,
      );
    }
    if (dirname(d) === d) return null;
  }
}

/** What `p` is when it is not a regular file (a FIFO, a device, a folder…), named as what it is;
 * null for a regular file. */
export function notAFile(p: string): string | null {
  const st = statOrWhy(p);
  if ('code' in st) {
    const code = st.code;
    return code === 'ENOENT'
      ? 'does not exist'
      : code === 'ENOTDIR'
        ? 'does not exist (a folder on its path is a file)'
        : `cannot be looked at: ${errnoWords(code ?? 'unknown error')}`;
  }
  if (st.isFile()) return null;
  const kind = st.isDirectory()
    ? 'a folder'
    : st.isFIFO()
      ? 'a FIFO (named pipe)'
      : st.isSocket()
        ? 'a socket'
        : st.isCharacterDevice()
          ? 'a character device'
          : st.isBlockDevice()
            ? 'a block device'
            : 'something else';
  return `is ${kind}, not a regular file`;
}

/** What a symbolic link that leads nowhere does: to a missing file, or round in a loop. */
function brokenLink(p: string): string {
  const why = statOrWhy(p);
  return 'code' in why && why.code === 'ELOOP'
    ? 'is a symbolic link in a loop'
    : 'is a symbolic link to nothing (its target does not exist)';
}

export function isFile(p: string): boolean {
  return statFollow(p)?.isFile() ?? false;
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

/** The most a config or task file may hold: thousands of routines stay far below it. */
export const CONFIG_FILE_CAP = 4 * 1024 * 1024;

/** Why an opened config or task file must not be read, or null (SPEC §6 "Reload", §12). */
function configRefusal(st: Stats, cap: number): string | null {
  const p = fileProblem(st, { othersMayNot: 0o022, cap });
  if (!p) return null;
  if (p.kind === 'type') return `it is ${p.what}, not a regular file`;
  if (p.kind === 'owner') return `it belongs to uid ${p.uid}, not to this user (uid ${p.me})`;
  if (p.kind === 'mode') return `other users may write it (mode ${p.mode})`;
  return `it is ${p.size} bytes, more than a config may hold (${p.cap})`;
}

/** A config or task file's bytes as text; bytes that are not UTF-8 are refused (an Error naming
 * the line and column), never replaced: what runs is what the file says. */
export function configTextOf(bytes: Buffer): string {
  const decoded = bytes.toString('utf8');
  // a byte-order mark (editors on Windows write one) is no part of the JSON (RFC 8259 §8.1)
  const text = decoded.charCodeAt(0) === 0xfeff ? decoded.slice(1) : decoded;
  // U+FFFD is how Node replaces a bad sequence (the file may also hold that character itself)
  if (!text.includes('\uFFFD')) return text;
  const again = Buffer.from(decoded, 'utf8');
  let at = 0;
  while (at < bytes.length && at < again.length && bytes[at] === again[at]) at++;
  if (at === bytes.length && at === again.length) return text;
  const before = bytes.subarray(0, at);
  const line = before.filter((b) => b === 0x0a).length + 1;
  // in characters, as an editor counts them (the bytes before it on its line are good UTF-8)
  const column = [...before.subarray(before.lastIndexOf(0x0a) + 1).toString('utf8')].length + 1;
  throw new Error(
    `line ${line}, column ${column}: byte 0x${bytes[at]!.toString(16).padStart(2, '0')} is not UTF-8 (save the file as UTF-8)`,
  );
}

/** Reads a config or task file as start-up and every reload do: opened O_NONBLOCK (a FIFO never
 * blocks the reader), then checked on the open file (a regular file of ours that nobody else
 * may write, at most `cap` bytes: a link to /dev/zero is refused, never read), and read to its
 * size. Throws an Error saying why. */
export function readConfigBytes(path: string, cap = CONFIG_FILE_CAP): Buffer {
  return readFollowing(path, cap, (st) => configRefusal(st, cap));
}
