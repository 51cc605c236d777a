// `routine list` (SPEC §6). One implementation: the routines and their next fire times come from
// the validated config's cache (scheduler/list-cache.ts, written by the scheduler and by any
// command that validated this very config) when it is for this config file, this environment
// and this user and holds a future time for every enabled routine; the records, phases and the
// scheduler line are then read straight from the state folder, and neither commander, zod,
// croner nor ICU's zone data is loaded. Otherwise (or with a database) they come from `fresh`
// (routine-commands.ts: validating the config, reading through the backend), which the command
// line's full path hands in. Whichever it was, the rows and the table are made here.

import { join } from 'node:path';
import type { Project } from '../config/load.js';
import { ExitCode, asStorageError, isStorageError } from '../errors.js';
import { namesIn, trustStateAndLocks } from '../fs/files.js';
import { stdoutIsTTY, writeOut } from '../fs/terminal.js';
import { readLockStatus } from '../file-lock/status.js';
import { SCHEDULER_LOCK_KEY } from '../lock/lock-backend.js';
import { stateOf } from '../control/status.js';
import { readRoutineStateShown, statePath } from '../state/file-store.js';
import { isSpooled } from '../state/spool.js';
import { lstatQuiet } from '../fs/look.js';
import { stayInBaselineTiers } from './baseline-tiers.js';
import { nextCached, readListCache } from '../scheduler/list-cache.js';
import { emptyRecord, type RoutineRecord } from '../state/routine-state.js';
import { readPhasesFile, type Phase } from '../state/phases.js';
import { processGone } from '../process/identity.js';
import { terminalText } from '../printable.js';
import { cachedConfig } from './cached-config.js';
import type { GlobalOptions } from './globals.js';
import { err } from './io.js';
import {
  listRows,
  phasesOf,
  printList,
  schedulerLineOf,
  withRemovedRunning,
  type ListedRoutine,
  type SchedulerLine,
} from './routine-list.js';

export interface ListFlags {
  json?: boolean;
  check?: boolean;
}

/** What the list shows, however it was read. */
export interface ListInputs {
  routines: ListedRoutine[];
  records: Record<string, RoutineRecord>;
  phases: Record<string, Phase>;
  scheduler: SchedulerLine;
  /** Said before the list, each as `routinely: warning: …`. */
  warnings: string[];
  now: number;
  /** The config is invalid: the routines the state knows, without schedules (SPEC §6). */
  fromState: boolean;
  /** The state folder: a fire whose record waits in its spool is not shown as lost. */
  stateDir: string;
}

/** routine-state.json of about 250 records or more (≈ 520 bytes a record). */
const BIG_INDEX_BYTES = 128 * 1024;

/** The inputs from the cache and the state folder, or null when the cache cannot answer
 * (nothing printed). A storage fault is thrown: it is reported as it is, not read again. */
function cachedInputs(configArg: string | undefined, env: NodeJS.ProcessEnv): ListInputs | null {
  const found = cachedConfig(configArg, env);
  if (!found) return null;
  const { stateDir, lockDir } = found.project;
  // hundreds of records: loops hot enough for TurboFan, whose compiles cost more CPU than this
  // process lives to gain (baseline-tiers.ts); set before the first of them
  if ((lstatQuiet(statePath({ stateDir }))?.size ?? 0) >= BIG_INDEX_BYTES) stayInBaselineTiers();
  const cache = readListCache(stateDir, found.key);
  const now = Date.now();
  if (!cache || now < cache.written_at) return null;
  const routines: ListedRoutine[] = [];
  for (const r of cache.routines) {
    let next = null;
    if (r.enabled) {
      next = nextCached(r, now);
      if (!next) return null; // the cache ran out: validating computes it
    }
    // the cached routine itself, with its next time: no copy (20 µs a routine at start-up with a
    // spread); a row takes only the facts from it (routine-list.ts, listRows)
    const listed = r as unknown as ListedRoutine;
    listed.next = next;
    routines.push(listed);
  }
  // the same checks as the file backend's (SPEC §12)
  trustStateAndLocks(stateDir, lockDir);
  // someone waits in the line of a routine's lock (`<lock>.<arrival>.<ticket>`; perhaps a
  // manual fire of it: manual-waits.ts): the full path reads that line (removing the tickets of
  // dead waiters) and the lock's holders. Other locks' tickets, and other names, change nothing.
  const locks = new Set(routines.map((r) => r.lock));
  if (namesIn(join(lockDir, 'line')).some((n) => locks.has(n.slice(0, n.indexOf('.'))))) return null;
  const warnings: string[] = [];
  const state = readRoutineStateShown({ stateDir } as Project, (m) => warnings.push(m));
  const scheduler = schedulerLineOf(stateOf([readLockStatus({ lockDir, key: SCHEDULER_LOCK_KEY })], 'file'));
  // the running scheduler's phases (delayed, queued, waiting), as the file backend reads them
  const board = scheduler.running ? readPhasesFile({ stateDir }, (m) => warnings.push(m)) : null;
  const phases = board && !processGone(board.owner) ? phasesOf([board]) : {};
  return {
    routines: withRemovedRunning(routines, state.routines),
    records: state.routines,
    phases,
    scheduler,
    warnings,
    now,
    fromState: false,
    stateDir,
  };
}

/** The command's exit code. Without `fresh` (the entry's start-up path) it answers only from the
 * cache and returns null when that cannot answer; the full path then runs it with `fresh`. */
export async function routineList(
  flags: ListFlags,
  g: GlobalOptions,
  fresh: ((flags: ListFlags, g: GlobalOptions) => Promise<ListInputs>) | null = null,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number | null> {
  let inputs: ListInputs | null = null;
  try {
    inputs = cachedInputs(g.config, env);
  } catch (e) {
    if (isStorageError(e)) {
      // a failing disk is reported as it is (exit 74, SPEC §7), not read again by the full path
      const error = asStorageError(e);
      err(`routinely: ${error instanceof Error ? error.message : String(error)}`);
      return ExitCode.IO;
    }
    // anything else: validating reports it properly
  }
  const fromCache = inputs !== null;
  if (!inputs) {
    if (!fresh) return null;
    inputs = await fresh(flags, g);
  }
  const { routines, scheduler, now, fromState } = inputs;
  const stateDir = inputs.stateDir;
  const rows = listRows(routines, inputs.records, emptyRecord, inputs.phases, (id) => isSpooled(stateDir, id));
  const notes = [
    ...(fromCache && env.ROUTINELY_DEBUG ? ["routinely: debug: routine list from the scheduler's cache"] : []),
    ...inputs.warnings.map((w) => `routinely: warning: ${w}`),
  ];
  // Output to a terminal goes through process.stdout (colour, width); to a pipe or a file it is
  // written at once, without creating Node's stdout stream (a few ms of a short start).
  if (stdoutIsTTY()) {
    for (const n of notes) err(n);
    return printList(routines, rows, scheduler, now, flags, fromState);
  }
  let stdout = '';
  let stderr = notes.map((n) => `${n}\n`).join('');
  const sink = { out: (l: string) => (stdout += `${l}\n`), err: (l: string) => (stderr += `${l}\n`) };
  const code = printList(routines, rows, scheduler, now, flags, fromState, sink, { isTTY: false });
  writeOut(2, terminalText(stderr));
  writeOut(1, terminalText(stdout));
  return code;
}
