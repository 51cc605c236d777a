// `routine list` from the running scheduler's cache (SPEC §6; scheduler/list-cache.ts): the same
// rows and the same bytes as the full path, without loading commander, zod, croner or ICU's zone
// data. It answers only when the cache is for this very config file (unchanged since the
// scheduler validated it), this environment and this user, and holds a future fire time for
// every enabled routine; otherwise it returns null before printing anything, and the full path
// runs as if this did not exist.

import type { Project } from '../config/load.js';
import { ExitCode, asStorageError, isStorageError } from '../errors.js';
import { trustRoot } from '../fs/files.js';
import { stdoutIsTTY, writeOut } from '../fs/terminal.js';
import { readLockStatus } from '../file-lock/status.js';
import { SCHEDULER_LOCK_KEY } from '../lock/lock-backend.js';
import { stateOf } from '../control/status.js';
import { readRoutineState } from '../state/file-store.js';
import { nextCached, readListCache } from '../scheduler/list-cache.js';
import { emptyRecord } from '../state/routine-state.js';
import type { FastListArgs } from './fast-args.js';
import { cachedConfig } from './fast-config.js';
import { err } from './io.js';
import { terminalText } from '../printable.js';
import {
  factsOf,
  listRows,
  phasesOf,
  printList,
  schedulerLineOf,
  type ListedRoutine,
  type SchedulerLine,
} from './routine-list.js';
import type { Phase } from '../state/phases.js';
import { readPhasesFile } from '../state/phases.js';
import { processGone } from '../process/identity.js';
import type { RoutineRecord } from '../state/routine-state.js';

interface Gathered {
  routines: ListedRoutine[];
  records: Record<string, RoutineRecord>;
  phases: Record<string, Phase>;
  scheduler: SchedulerLine;
  warnings: string[];
  now: number;
}

/** Everything the list needs, or null when the cache cannot answer (nothing printed yet). */
function gather(a: FastListArgs, env: NodeJS.ProcessEnv): Gathered | null {
  const found = cachedConfig(a.config, env);
  if (!found) return null;
  const { stateDir, lockDir } = found.project;
  const cache = readListCache(stateDir, found.key);
  const now = Date.now();
  if (!cache || now < cache.written_at) return null;
  const routines: ListedRoutine[] = [];
  for (const r of cache.routines) {
    let next = null;
    if (r.enabled) {
      next = nextCached(r, now);
      if (!next) return null; // the cache ran out: the full path computes it
    }
    // not a spread into a literal: 20 µs a routine at start-up (routine-list.ts, listRows)
    const listed = factsOf(r) as ListedRoutine;
    listed.starvedAfterSkips = r.starvedAfterSkips;
    listed.next = next;
    routines.push(listed);
  }
  // the same checks as the full path's backend (SPEC §12)
  trustRoot(stateDir);
  trustRoot(lockDir);
  const warnings: string[] = [];
  const state = readRoutineState({ stateDir } as Project, (m) => warnings.push(m));
  const scheduler = schedulerLineOf(stateOf([readLockStatus({ lockDir, key: SCHEDULER_LOCK_KEY })], 'file'));
  // the running scheduler's phases (queued, waiting), as the full path reads them
  const board = scheduler.running ? readPhasesFile({ stateDir }, (m) => warnings.push(m)) : null;
  const phases = board && !processGone(board.owner) ? phasesOf([board]) : {};
  return { routines, records: state.routines, phases, scheduler, warnings, now };
}

/** The list's exit code, or null to leave it to the full path. Output to a terminal goes
 * through process.stdout (colour, width); to a pipe or file it is written at once, without
 * creating Node's stdout stream (a few milliseconds of a start-up budget of about fifteen). */
export function fastList(a: FastListArgs, env: NodeJS.ProcessEnv = process.env): number | null {
  if (env.ROUTINELY_LIST_CACHE === '0') return null;
  let g: Gathered | null;
  try {
    g = gather(a, env);
  } catch (e) {
    if (isStorageError(e)) {
      // a failing disk is reported as it is (exit 74, SPEC §7), not read again by the full path
      const error = asStorageError(e);
      err(`routinely: ${error instanceof Error ? error.message : String(error)}`);
      return ExitCode.IO;
    }
    return null; // whatever it is, the full path reports it properly
  }
  if (!g) return null;
  const rows = listRows(g.routines, g.records, emptyRecord, g.phases);
  const notes = [
    ...(env.ROUTINELY_DEBUG ? ["routinely: debug: routine list from the scheduler's cache"] : []),
    ...g.warnings.map((w) => `routinely: warning: ${w}`),
  ];
  if (stdoutIsTTY()) {
    for (const n of notes) err(n);
    return printList(g.routines, rows, g.scheduler, g.now, a);
  }
  let stdout = '';
  let stderr = notes.map((n) => `${n}\n`).join('');
  const code = printList(
    g.routines,
    rows,
    g.scheduler,
    g.now,
    a,
    false,
    { out: (l) => (stdout += `${l}\n`), err: (l) => (stderr += `${l}\n`) },
    { isTTY: false },
  );
  writeOut(2, terminalText(stderr));
  writeOut(1, terminalText(stdout));
  return code;
}
