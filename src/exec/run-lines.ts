// What an exec run says, line by line, wherever it is said: `exec run` / `exec resume` on the
// terminal (cli/progress.ts, with colour) and a routine's log when a routine runs exec work
// (fire/firing.ts, plain), so the page and `routine logs` show what the terminal shows.

import { humanDuration } from '../duration.js';
import { printable } from '../printable.js';
import { attemptStart } from './outcome.js';
import type { RegisterSummary } from './registry-sync.js';
import { summarize, type RunEvent, type RunState } from './run-state.js';
import { own } from '../is-object.js';

/** Colours a word (the terminal's painter; plain text elsewhere). */
export type Painter = (text: string, colour: 'green' | 'yellow' | 'red') => string;
const plain: Painter = (text) => text;

export const registerLine = (s: RegisterSummary): string =>
  `${s.added.length} new, ${s.changed.length} changed, ${s.retired.length} retired`;

export function runHeader(state: RunState): string {
  const n = Object.keys(state.tasks).length;
  return `run ${state.run_id}: ${n} task${n === 1 ? '' : 's'}${state.attempt > 1 ? ` (resume, attempt ${state.attempt})` : ''}`;
}

/** The line for a task event, or null for events that say nothing on their own. `logDir`: the
 * run's folder as the reader should see it (a failed task names its log there). */
export function eventLine(e: RunEvent, state: RunState, logDir: string, paint: Painter = plain): string | null {
  if (e.type === 'task-started') return `started ${e.task}`;
  if (e.type !== 'task-finished') return null;
  const t = own(state.tasks, e.task);
  const took = e.duration_ms !== null ? ` in ${humanDuration(e.duration_ms)}` : '';
  switch (e.status) {
    case 'succeeded':
      return `${paint('succeeded', 'green')} ${e.task}${took}${lostText(e.output_lost_bytes, logDir, t?.log)}`;
    case 'skipped_dependency':
      return `${paint('skipped', 'yellow')} ${e.task}: ${printable(e.why ?? 'dependency failed')}`;
    case 'interrupted':
      return `${paint('interrupted', 'yellow')} ${e.task}${took}`;
    default:
      return `${paint('failed', 'red')} ${e.task}: ${printable(e.why ?? e.status)}${took}${t ? `  (log: ${logDir}/${t.log})` : ''}`;
  }
}

/** What a task's log could not take (a full disk, an I/O error), said beside its result. */
function lostText(bytes: number | undefined, logDir: string, log: string | undefined): string {
  if (!bytes) return '';
  return `  (${bytes} bytes of its output could not be written to ${log ? `${logDir}/${log}` : 'its log'})`;
}

/** The run's result: its status and counts, why, what was not recorded, what to do next. */
export function runSummary(state: RunState, paint: Painter = plain): string[] {
  const c = summarize(state);
  const parts = [`${c.succeeded} succeeded`];
  if (c.failed) parts.push(`${c.failed} failed`);
  if (c.skipped_dependency) parts.push(`${c.skipped_dependency} skipped`);
  if (c.interrupted) parts.push(`${c.interrupted} interrupted`);
  if (c.pending) parts.push(`${c.pending} not started`);
  // A resumed run reports this attempt's time, not the time since the run was first created.
  const took = state.finished_at
    ? ` in ${humanDuration(Date.parse(state.finished_at) - Date.parse(attemptStart(state)))}`
    : '';
  const statusColour = state.status === 'SUCCEEDED' ? 'green' : state.status === 'INTERRUPTED' ? 'yellow' : 'red';
  const attempt = state.attempt > 1 ? ` (resume, attempt ${state.attempt})` : '';
  const lines = [`run ${state.run_id} ${paint(state.status, statusColour)}${attempt}: ${parts.join(', ')}${took}`];
  if (state.why) lines.push(`  why:  ${printable(state.why)}`);
  // Said after the live `succeeded a` line: the record does not have it (SPEC §5).
  for (const [id, t] of Object.entries(state.tasks)) {
    if (t.why_code === 'NOT_RECORDED') lines.push(`  ${id}: ${t.why}; exec resume will run it again`);
  }
  if (state.next) lines.push(`  next: ${state.next}`);
  return lines;
}
