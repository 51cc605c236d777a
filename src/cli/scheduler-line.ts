// How the scheduler's state reads (SPEC §10): `scheduler status`, and the first line of
// `routine list`.

import { printable } from '../printable.js';
import type { SchedulerInstance, SchedulerState } from '../control/status.js';
import { humanDuration } from './io.js';

const ago = (s: number | null): string =>
  s === null ? 'unknown' : s < 60 ? `${Math.max(0, Math.round(s))}s ago` : `${humanDuration(s * 1000)} ago`;

/** `running, pid 4711 on build-01 since 2026-11-30 12:01:07 UTC (heartbeat 2s ago)` (`stopping, …`
 * while it shuts down): in UTC,
 * which needs no time-zone data (`routine list` prints it when it starts from the cache too). */
export function describeScheduler(s: SchedulerInstance, heartbeat = true): string {
  const since = s.since.replace('T', ' ').slice(0, 19);
  return printable(
    `${s.stopping ? 'stopping' : 'running'}, pid ${s.pid} on ${s.host} since ${since} UTC${heartbeat ? ` (heartbeat ${ago(s.heartbeat_age_s)})` : ''}`,
  );
}

/** ` (a stale lock is left by pid 4711 on build-01: owner pid 4711 is not running)`, or ''. */
function staleNote(state: SchedulerState): string {
  const [first, ...more] = state.stale;
  if (!first) return '';
  const who = first.pid !== null ? `pid ${first.pid} on ${first.host}` : first.key;
  return printable(` (a stale lock is left by ${who}: ${first.why}${more.length ? `; and ${more.length} more` : ''})`);
}

/** One line (`routine list`'s first, without the heartbeat's age, which moves every second):
 * `scheduler: running, pid 4711 on build-01 since … (heartbeat 2s ago)`, `scheduler:
 * running on 2 hosts: build-01 (pid 4711), build-02 (pid 88)`, or `scheduler: not running`. */
export function schedulerLine(state: SchedulerState, heartbeat = true): string {
  const [one, ...more] = state.schedulers;
  if (!one) return `scheduler: not running${staleNote(state)}`;
  if (more.length === 0) return `scheduler: ${describeScheduler(one, heartbeat)}`;
  return printable(
    `scheduler: running on ${state.schedulers.length} hosts: ${state.schedulers.map((s) => `${s.host} (pid ${s.pid})`).join(', ')}`,
  );
}

/** The lines of `scheduler status`: one per running scheduler, with its config. */
export function statusLines(state: SchedulerState): string[] {
  if (!state.running) return [schedulerLine(state)];
  return state.schedulers.flatMap((s) => [
    `scheduler: ${describeScheduler(s)}`,
    ...(s.config ? [printable(`  config: ${s.config}`)] : []),
  ]);
}

/** `scheduler status --json`: the state without the raw lock records. */
export function stateJson(state: SchedulerState): object {
  return {
    running: state.running,
    backend: state.backend,
    schedulers: state.schedulers.map(({ record: _record, ...s }) => s),
    stale: state.stale,
  };
}
