// What a project's routine state holds, read the way every view reads it (SPEC §3): the shared
// index where it is current, each routine's own index and history where it is not.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Project } from '../../src/config/load.js';
import { readRoutineState } from '../../src/state/file-store.js';
import type { Fire, RoutineStateFile } from '../../src/state/routine-state.js';

/** A successful fire that started, and finished, at `at` (ISO). */
export function successAt(at: string): Fire {
  return {
    result: 'success',
    reason: null,
    scheduled_at: at,
    started_at: at,
    finished_at: at,
    duration_ms: 1,
    exit_code: 0,
    run_id: null,
  };
}

export function routineStateOf(dir: string, stateDir = join(dir, '.routinely')): RoutineStateFile {
  try {
    return readRoutineState({ stateDir } as Project);
  } catch {
    return { version: 1, routines: {} };
  }
}

/** routine-state.json itself, as a status script reads it (`jq .routines.ID`): null when the
 * file is not there. */
export function stateFileOf(dir: string, stateDir = join(dir, '.routinely')): RoutineStateFile | null {
  try {
    return JSON.parse(readFileSync(join(stateDir, 'routine-state.json'), 'utf8')) as RoutineStateFile;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** What a routine's history lines say, counted here from the raw lines (the rotated file
 * first), independently of the code under test. */
export interface HistoryFacts {
  counts: { success: number; failure: number; skipped: number };
  last: { result: string; reason: string | null; scheduled_at: string } | null;
  paused: boolean;
  /** Open markers not closed by a record. */
  open: number;
  /** Fire lines (records) in all. */
  fires: number;
}

export function historyFactsOf(dir: string, id: string, stateDir = join(dir, '.routinely')): HistoryFacts {
  const facts: HistoryFacts = {
    counts: { success: 0, failure: 0, skipped: 0 },
    last: null,
    paused: false,
    open: 0,
    fires: 0,
  };
  const open = new Set<string>();
  for (const name of [`${id}.jsonl.1`, `${id}.jsonl`]) {
    let text: string;
    try {
      text = readFileSync(join(stateDir, 'history', name), 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n')) {
      let v: Record<string, unknown>;
      try {
        v = JSON.parse(line) as Record<string, unknown>;
      } catch {
        continue;
      }
      if (v.event === 'summary') {
        const r = v.record as { counts: HistoryFacts['counts']; paused: boolean };
        facts.counts = { ...r.counts };
        facts.paused = r.paused;
      } else if (v.event === 'open') open.add(v.id as string);
      else if (v.event === 'paused') facts.paused = true;
      else if (v.event === 'resumed') facts.paused = false;
      else if (typeof v.result === 'string') {
        facts.counts[v.result as keyof HistoryFacts['counts']]++;
        facts.fires++;
        facts.last = {
          result: v.result,
          reason: (v.reason as string | null) ?? null,
          scheduled_at: v.scheduled_at as string,
        };
        if (typeof v.closes === 'string') open.delete(v.closes);
      }
    }
  }
  facts.open = open.size;
  return facts;
}

/** How the file's record of a routine compares with its history: the same facts, or what differs. */
export function shownAsRecorded(file: RoutineStateFile | null, facts: HistoryFacts, id: string): string | null {
  const r = file?.routines[id];
  if (!r) return facts.fires > 0 || facts.paused || facts.open > 0 ? `${id}: not in routine-state.json` : null;
  const shown = {
    counts: r.counts,
    last_result: r.last_result,
    last_reason: r.last_reason,
    last_scheduled_at: r.last_scheduled_at,
    paused: r.paused,
    open: r.open_fires?.length ?? 0,
  };
  const recorded = {
    counts: facts.counts,
    last_result: facts.last?.result ?? null,
    last_reason: facts.last?.reason ?? null,
    last_scheduled_at: facts.last?.scheduled_at ?? null,
    paused: facts.paused,
    open: facts.open,
  };
  return JSON.stringify(shown) === JSON.stringify(recorded)
    ? null
    : `${id}: routine-state.json shows ${JSON.stringify(shown)}, the history ${JSON.stringify(recorded)}`;
}
