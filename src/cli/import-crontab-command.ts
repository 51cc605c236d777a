// `routinely import-crontab [FILE|-] [--merge]` (SPEC §10): prints a crontab's jobs as
// routinely.json content on stdout, or with --merge adds them to the project's routinely.json
// (config/merge-import.ts); what it could not carry, or carried with another meaning, on stderr.

import { isUtf8 } from 'node:buffer';
import { spawnSync } from 'node:child_process';
import { basename, dirname, join, resolve } from 'node:path';
import { importCrontab } from '../config/crontab.js';
import { configTextOf, findConfig, readConfigBytes, stripJsonComments } from '../config/find.js';
import { mergeImported } from '../config/merge-import.js';
import { validateConfig } from '../config/validate.js';
import { ConfigChangedError, ConfigError, ExitCode, UsageError } from '../errors.js';
import { writeFileDurable } from '../fs/durable.js';
import { readInputFile } from '../fs/project-files.js';
import { realPath, statFollow } from '../fs/look.js';
import { displayPath, parseJsonFile } from '../config/load.js';
import { err, out } from './io.js';
import { schemaRefFor } from './schema-ref.js';
import type { GlobalOptions } from './globals.js';
import { machineZone } from '../zone-time.js';

/** A crontab is a few kilobytes; a larger input is not one. */
const MAX_BYTES = 1 << 20;

export async function importCrontabCommand(
  file: string | undefined,
  flags: { system?: boolean; merge?: boolean },
  g: GlobalOptions = {},
): Promise<number> {
  const fromStdin = file === undefined || file === '-';
  if (fromStdin && process.stdin.isTTY) {
    throw new UsageError(
      'import-crontab reads a crontab from FILE or from standard input: routinely import-crontab /etc/cron.d/backup, or crontab -l | routinely import-crontab -',
    );
  }
  if (file === '')
    throw new UsageError('import-crontab: FILE is empty: name a crontab file, or - to read standard input');
  const source = fromStdin ? 'stdin' : file;
  const text = fromStdin ? await readStdin() : readCrontab(file);
  const system = flags.system === true || (!fromStdin && /^\/etc\/(crontab$|cron\.d\/)/.test(resolve(file)));
  // the project the output is for: where --merge writes, or where `> routinely.json` puts it
  const configPath = flags.merge ? findConfig({ configPath: g.config }) : null;
  const schema = schemaRefFor(configPath ? dirname(configPath) : process.cwd()).ref;
  const cronSkips = fromStdin ? undefined : cronDSkips(resolve(file));
  // a project on PostgreSQL schedules a routine without "timezone" in UTC, not in the zone cron
  // ran it in (this machine's): each imported routine says its zone then
  const zoneForUnzoned = configPath && onPostgres(configPath) ? machineZone() : undefined;
  const imported = importCrontab(text, {
    source,
    system,
    schema,
    userKnown: userExists(),
    ...(cronSkips ? { cronSkips } : {}),
    ...(zoneForUnzoned ? { zoneForUnzoned } : {}),
  });
  for (const note of imported.notes) err(`routinely: import-crontab: ${note}`);
  if (!configPath) {
    process.stdout.write(imported.text);
    return ExitCode.OK;
  }
  const shown = displayPath(configPath);
  if (imported.routines === 0) {
    out(`${shown}: nothing to add`);
    return ExitCode.OK;
  }
  let bytes: Buffer;
  let current: string;
  try {
    bytes = readConfigBytes(configPath);
    current = configTextOf(bytes);
  } catch (err) {
    throw new UsageError(`import-crontab --merge: ${shown}: ${(err as Error).message}`);
  }
  // read as validate reads it: a syntax error at its line and column, a key given twice (which
  // JSON.parse would let the merge write into) refused — nothing is written (exit 2)
  parseJsonFile(current, `${shown} (nothing was written)`);
  const merged = mergeImported(current, imported, shown);
  if ('refused' in merged) throw new UsageError(`import-crontab --merge: ${merged.refused}`);
  // what is written validates, or nothing is written
  const check = validateConfig(JSON.parse(stripJsonComments(merged.text)));
  if (!check.ok) throw new ConfigError(`${shown} (merged; nothing was written)`, check.issues);
  // a config that is a symbolic link (dotfiles, a shared config) is written where it points, as
  // an editor does: the link stays, and its file is replaced whole (the config is no state file)
  const target = realPath(configPath);
  const mode = (statFollow(target)?.mode ?? 0o644) & 0o777;
  // a file nobody may write (chmod a-w: someone meant it kept as it is) is not replaced, even by
  // root, whom the kernel would let: an editor asks first too
  if ((mode & 0o222) === 0)
    throw new UsageError(
      `import-crontab --merge: ${shown} is read-only (mode ${mode.toString(8)}): make it writable (chmod u+w) to merge into it; nothing was written`,
    );
  // its byte-order mark kept (configTextOf reads past it)
  const bom = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? '\uFEFF' : '';
  writeFileDurable(target, bom + merged.text, {
    mode,
    // Another edit saved meanwhile (a second merge, an editor) is never overwritten: the file is
    // read again just before the new one takes its place, and must be what was merged into.
    beforeReplace: () => {
      let same = false;
      try {
        same = readConfigBytes(configPath).equals(bytes);
      } catch {
        // gone or unreadable now: changed too
      }
      if (!same)
        throw new ConfigChangedError(
          `import-crontab --merge: ${shown} changed while the crontab was merged into it (another edit or import): nothing was written; import again`,
        );
    },
  });
  const locks =
    merged.added.locks.length > 0
      ? ` and ${merged.added.locks.length} lock${merged.added.locks.length === 1 ? '' : 's'} (${merged.added.locks.join(', ')})`
      : '';
  out(
    `${shown}${target === join(realPath(dirname(configPath)), basename(configPath)) ? '' : ` (a link to ${target})`}: added ${merged.added.routines} routine${merged.added.routines === 1 ? '' : 's'}${locks}; check it with routinely validate`,
  );
  return ExitCode.OK;
}

/** Why Debian's cron skips a file of /etc/cron.d whatever it holds (measured beside the daemon:
 * `my.job`, `app.cron` and `bak~` never ran; a file of mode 664 was skipped, "INSECURE MODE"),
 * or undefined. */
export function cronDSkips(path: string, cronD = '/etc/cron.d'): string | undefined {
  if (dirname(path) !== cronD) return undefined;
  const name = basename(path);
  if (!/^[A-Za-z0-9_-]+$/.test(name))
    return `its name ${JSON.stringify(name)} holds a character other than a letter, a digit, _ or - (cron reads the files of /etc/cron.d named as run-parts(8) runs them)`;
  const st = statFollow(path);
  if (!st) return undefined;
  if ((st.mode & 0o022) !== 0)
    return `its group or others may write it (mode ${(st.mode & 0o777).toString(8)}: cron's "INSECURE MODE")`;
  if (st.uid !== 0) return `it is not owned by root (cron's "WRONG FILE OWNER")`;
  if (st.nlink > 1) return `it has another hard link (cron's "NUMBER OF HARD LINKS > 1")`;
  return undefined;
}

function readCrontab(file: string): string {
  let bytes: Buffer;
  try {
    bytes = readInputFile(file, MAX_BYTES);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new UsageError(
      code === 'ENOTREG'
        ? `${file} is not a regular file (a pipe's crontab goes on stdin: crontab -l | routinely import-crontab)`
        : code === 'EFBIG'
          ? `${file} is over ${MAX_BYTES} bytes: not a crontab`
          : `cannot read ${file}: ${code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : (e as Error).message}`,
    );
  }
  return decoded(bytes, file);
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of process.stdin as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > MAX_BYTES) throw new UsageError(`standard input is over ${MAX_BYTES} bytes: not a crontab`);
    chunks.push(chunk);
  }
  return decoded(Buffer.concat(chunks), 'standard input');
}

function decoded(bytes: Buffer, what: string): string {
  const text = bytes.toString('utf8');
  if (text.includes('\0')) throw new UsageError(`${what} holds NUL bytes: not a crontab`);
  // bytes that are not UTF-8 (a Latin-1 é) would be carried as U+FFFD, a command changed
  // unseen; cron passed them on as they were
  if (!isUtf8(bytes)) {
    const line = bytes
      .toString('latin1')
      .split('\n')
      .findIndex((l) => !isUtf8(Buffer.from(l, 'latin1')));
    throw new UsageError(
      `${what}:${line + 1} holds bytes that are not UTF-8, which routinely.json (text) cannot carry as they are: convert the crontab (iconv -f latin1 -t utf-8), or move that command into a script, then import again`,
    );
  }
  return text;
}

/** Whether a user exists here as cron looks it up (getpwnam: /etc/passwd and the name service),
 * through `id`, once per name; a machine where `id` cannot run takes every user as known. */
function userExists(): (name: string) => boolean {
  const known = new Map<string, boolean>();
  return (name) => {
    let answer = known.get(name);
    if (answer === undefined) {
      const r = spawnSync('id', ['-u', '--', name], { stdio: 'ignore' });
      answer = r.error !== undefined || r.status === 0;
      known.set(name, answer);
    }
    return answer;
  };
}

/** Whether the project at `configPath` names the PostgreSQL backend (read as the merge reads it:
 * a config it cannot read is the merge's to refuse, below). */
function onPostgres(configPath: string): boolean {
  try {
    const raw = JSON.parse(stripJsonComments(configTextOf(readConfigBytes(configPath)))) as {
      backend?: { type?: unknown };
    };
    return raw?.backend?.type === 'postgres';
  } catch {
    return false;
  }
}
