// `routinely init`: a commented starter routinely.json with `$schema`, unless the folder already
// belongs to a project (then commands run here use that project's config, and a second,
// nested project is almost always a mistake).

import { amendProjectFile, writeProjectFile } from '../fs/project-files.js';
import { isExecutable, statFollow } from '../fs/look.js';
import { lstatQuiet } from '../fs/look.js';
import { delimiter, dirname, join, resolve } from 'node:path';
import { displayPath, findConfigUpward } from '../config/load.js';
import { ExitCode, UsageError } from '../errors.js';
import { out } from './io.js';
import { npmWrapper } from './wrapper.js';
import type { GlobalOptions } from './globals.js';
import { schemaRefFor, type SchemaRef } from './schema-ref.js';

export function starter(schema: SchemaRef): string {
  return `{
  // routinely project configuration. Comments are allowed; unknown keys are errors.
  // Reference: routinely's README and docs/; \`routinely validate\` checks this file.
${schema.comment.map((c) => `  // ${c}`).join('\n')}
  "$schema": ${JSON.stringify(schema.ref)},

  // State (routine-state.json, history, locks, exec runs), relative to this file.
  "stateDir": ".routinely",

  // The project exec lock: held for every routine, exec run and lock run.
  // A holder that misses its heartbeat for ttlSeconds loses the lock.
  "lock": { "ttlSeconds": 60 },

  "exec": {
    // Tasks run at once by \`routinely exec run\`.
    "parallel": 2,
    "tasks": [
      { "id": "build", "run": "echo build" },
      { "id": "test", "run": "echo test", "dependsOn": ["build"] }
    ]
  },

  "routines": [
    // Every 5 minutes: run the ready exec tasks (skipped, not failed, when the lock is busy).
    { "id": "auto", "schedule": "*/5 * * * *", "action": "exec-auto" },
    // Every 15 minutes: finish a run that was interrupted.
    { "id": "resume", "schedule": "*/15 * * * *", "action": "exec-resume" },
    // Nightly, in a given time zone; fires once at start-up if a night was missed.
    { "id": "nightly", "schedule": "0 3 * * *", "timezone": "UTC", "catchUp": "latest",
      "action": "command", "run": "echo nightly", "timeoutSeconds": 3600 }
  ]
}
`;
}

/** `--config PATH` names the file to write (default ./routinely.json). */
export async function init(flags: { force?: boolean }, g: GlobalOptions): Promise<number> {
  const path = resolve(g.config ?? 'routinely.json');
  const dir = dirname(path);
  if (!isDirectory(dir)) throw new UsageError(`cannot write ${path}: the folder ${dir} does not exist`);
  // Never through a symlink, even a dangling one: it could point anywhere (SPEC §12).
  const st = lstatQuiet(path);
  if (st?.isSymbolicLink())
    throw new UsageError(`${path} is a symbolic link; refusing to write through it (remove it first)`);
  if (st && !flags.force) {
    throw new UsageError(`${path} already exists; pass --force to overwrite it`);
  }
  // (a FIFO would hold the write until someone reads it; a folder or a device is no config)
  if (st && !st.isFile())
    throw new UsageError(`${path} is not a regular file; refusing to write over it (remove it first)`);
  const outer = dirname(dir) === dir ? null : findConfigUpward(dirname(dir));
  if (outer && !flags.force) {
    throw new UsageError(
      `${displayPath(dir) || '.'} is already inside the project of ${outer} (routinely commands run here use it); ` +
        'to start a separate project nested in it, pass --force',
    );
  }
  writeProjectFile(path, starter(schemaRefFor(dir)), flags.force === true);
  out(`wrote ${path}`);
  if (outer) out(`note: a nested project; commands run in ${dirname(outer)} outside this folder still use ${outer}`);
  const ignored = ignoreStateFolder(dir);
  if (ignored) out(ignored);
  // `routinely` alone works only where it is on PATH (a global install); in a project that has
  // it as a dependency, npx finds it. Under npx (or an npm script) PATH holds node_modules/.bin
  // only while npm runs, so what works after it is `npx routinely`.
  const cmd = npmWrapper(process.env) === null && onPath('routinely') ? 'routinely' : 'npx routinely';
  out(`next: ${cmd} validate, then ${cmd} scheduler start`);
  return ExitCode.OK;
}

/** Whether an executable `name` is in one of PATH's folders. */
function onPath(name: string, env: NodeJS.ProcessEnv = process.env): boolean {
  for (const d of (env.PATH ?? '').split(delimiter)) {
    if (!d) continue;
    if (isExecutable(join(d, name))) return true;
  }
  return false;
}

const STATE_LINE = /^\/?\.routinely\/?\s*$/m;

/** Adds `.routinely/` (the state folder: locks, history, logs) to the folder's .gitignore,
 * creating it; says what it did, or null when it was there already. A .gitignore that is a
 * symbolic link, or not a regular file, is left alone (with a note). */
function ignoreStateFolder(dir: string): string | null {
  const path = join(dir, '.gitignore');
  const st = lstatQuiet(path);
  if (st && !st.isFile())
    return `note: ${displayPath(path)} is not a regular file; add .routinely/ to it yourself so the state folder is not committed`;
  try {
    if (!st) {
      writeProjectFile(
        path,
        "# routinely's state: locks, history, logs (this machine's, never committed)\n.routinely/\n",
      );
      return `wrote ${displayPath(path)} (.routinely/: the state folder is not committed)`;
    }
    // O_NONBLOCK: a FIFO swapped in after the lstat must not hang init; then only a regular
    // file of a sane size is read
    let had = false;
    const ok = amendProjectFile(path, 1024 * 1024, (text) => {
      had = STATE_LINE.test(text);
      return had ? null : `${text === '' || text.endsWith('\n') ? '' : '\n'}.routinely/\n`;
    });
    if (!ok)
      return `note: ${displayPath(path)} is not a regular file of a sane size; add .routinely/ to it yourself so the state folder is not committed`;
    return had ? null : `added .routinely/ to ${displayPath(path)}`;
  } catch (err) {
    return `note: could not add .routinely/ to ${displayPath(path)} (${(err as Error).message}); add it yourself so the state folder is not committed`;
  }
}

function isDirectory(p: string): boolean {
  return statFollow(p)?.isDirectory() ?? false;
}
