// `history/<routine-id>.jsonl`: one line per fire, bounded to the newest HISTORY_LIMIT lines.
// Appends are single write(2)s with O_APPEND, so concurrent writers never interleave within a
// line; trimming rewrites the file (atomically) only once it has grown well past the limit.

import { closeSync, constants, fstatSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { readNoFollow } from '../lock/files.js';
import { ensureStateDir, writeJsonLinesAtomicSync } from './json-file.js';
import type { Fire } from './routine-state.js';

export const HISTORY_LIMIT = 1000;
/** Trim when the file is this many bytes (≈ 1.5 × the limit at ≈ 250 bytes per line). */
const TRIM_AT_BYTES = 384 * 1024;

export type HistoryEntry = Pick<Fire, 'scheduled_at' | 'started_at' | 'finished_at' | 'result' | 'reason' | 'exit_code' | 'run_id'>;

export function historyPath(stateDir: string, routineId: string): string {
  return join(stateDir, 'history', `${routineId}.jsonl`);
}

export function appendHistory(path: string, fire: Fire): void {
  const entry: HistoryEntry = {
    scheduled_at: fire.scheduled_at,
    started_at: fire.started_at,
    finished_at: fire.finished_at,
    result: fire.result,
    reason: fire.reason,
    exit_code: fire.exit_code,
    run_id: fire.run_id,
  };
  ensureStateDir(join(path, '..'));
  const fd = openSync(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
  let size: number;
  try {
    writeSync(fd, `${JSON.stringify(entry)}\n`);
    size = fstatSync(fd).size;
  } finally {
    closeSync(fd);
  }
  if (size > TRIM_AT_BYTES) {
    const entries = readHistory(path);
    if (entries.length > HISTORY_LIMIT) writeJsonLinesAtomicSync(path, entries.slice(-HISTORY_LIMIT));
  }
}

/** Every readable entry, oldest first (a torn or foreign line is skipped). */
export function readHistory(path: string): HistoryEntry[] {
  const text = readNoFollow(path);
  if (text === null) return [];
  const out: HistoryEntry[] = [];
  for (const line of text.split('\n')) {
    if (!line) continue;
    try {
      const e = JSON.parse(line) as HistoryEntry;
      if (typeof e.scheduled_at === 'string' && typeof e.result === 'string') out.push(e);
    } catch {
      // torn line
    }
  }
  return out;
}
