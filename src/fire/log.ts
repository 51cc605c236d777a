import { jsonText, printable } from '../printable.js';
import { stepText, tenthsOfSeconds } from '../duration.js';

// Scheduler log lines (SPEC §6): one per event on stdout, prefixed by an ISO-8601 UTC
// timestamp, e.g. `2026-11-29T19:05:00.012Z [routine] skipped auto: exec busy`; with
// `--log-format json`, the same events as JSON lines.

export type LogEvent =
  | { event: 'scheduler.started'; routines: number; pid: number }
  | { event: 'scheduler.stopping'; running: number }
  | { event: 'scheduler.stopped' }
  | {
      event: 'scheduler.reloaded';
      routines: number;
      added?: string[];
      removed?: string[];
      changed?: string[];
      /** Other top-level settings it changed (`locks`, `http`…); left out when none. */
      settings?: string[];
    }
  | { event: 'scheduler.reload_failed'; error: string }
  | { event: 'scheduler.warning'; message: string }
  | { event: 'scheduler.lock_lost'; why: string }
  | { event: 'scheduler.clock_step'; direction: 'back' | 'forward'; step_ms: number }
  | { event: 'scheduler.state'; writable: boolean; message: string | null }
  | { event: 'scheduler.clock'; offset_ms: number; rtt_ms: number; change: 'first' | 'changed'; text: string }
  | { event: 'routine.started'; routine: string; scheduled_at: string }
  | { event: 'routine.succeeded'; routine: string; duration_ms: number; run_id: string | null }
  | { event: 'routine.failed'; routine: string; reason: string; duration_ms: number; run_id: string | null }
  | { event: 'routine.skipped'; routine: string; reason: string; holder?: string }
  | { event: 'routine.waiting'; routine: string; lock: string; holder: string }
  | { event: 'routine.queued'; routine: string; behind: string }
  | { event: 'routine.retrying'; routine: string; attempt: number; of: number; in_ms: number }
  | { event: 'routine.catch_up'; routine: string; scheduled_at: string }
  /** A claim nobody worked on, taken over (scheduler/claims.ts): fired late, or recorded. */
  | { event: 'routine.taken_over'; routine: string; scheduled_at: string; from: string; fires: boolean }
  | { event: 'routine.paused'; routine: string; note: string | null }
  | { event: 'routine.resumed'; routine: string }
  | {
      event: 'notify.sent';
      routine: string;
      notify_event: NotifyEventName;
      channel: 'webhook' | 'command';
      target: string;
      attempts: number;
    }
  | {
      event: 'notify.failed';
      routine: string;
      notify_event: NotifyEventName | null;
      channel: 'webhook' | 'command' | null;
      target: string | null;
      attempts: number;
      error: string;
    }
  | { event: 'http.listening'; url: string; token: boolean }
  | { event: 'http.warning'; message: string }
  /** An action taken through the HTTP server (SPEC §11). */
  | { event: 'http.action'; action: 'run' | 'pause' | 'resume' | 'stop'; routine: string; outcome: string };

/** SPEC §10's notification events (config/schema.ts's NotifyEvent; stated here to keep this file
 * free of imports). */
type NotifyEventName = 'failure' | 'recovery' | 'starved';

const secs = tenthsOfSeconds;

/** `exec run r-… since 12:01:07` — who holds the exec lock, for a skip's log line (SPEC §10). */
export function holderText(h: {
  owner: { command: string; run_id?: string | null; routine?: string | null; pid: number; host: string };
  created_at: number;
}): string {
  const what = h.owner.routine ? `routine ${h.owner.routine}` : h.owner.command;
  const run = h.owner.run_id ? ` ${h.owner.run_id}` : '';
  const since = new Date(h.created_at * 1000).toISOString().slice(11, 19);
  return printable(`${what}${run} since ${since}`);
}

/** Every slot's holder of a lock of several slots, all held: "routine a r-… since 10:00:00, lock
 * run since 10:00:02 (all 2 slots)". */
export const holdersText = (holders: Parameters<typeof holderText>[0][]): string =>
  `${holders.map(holderText).join(', ')} (all ${holders.length} slots)`;

export function formatText(e: LogEvent): string {
  switch (e.event) {
    case 'scheduler.started':
      return `[scheduler] started (${e.routines} routine${e.routines === 1 ? '' : 's'})`;
    case 'scheduler.stopping':
      return `[scheduler] stopping${e.running ? ` (waiting for ${e.running} running routine${e.running === 1 ? '' : 's'})` : ''}`;
    case 'scheduler.stopped':
      return '[scheduler] stopped';
    case 'scheduler.reloaded': {
      const what = [
        ['added', e.added],
        ['removed', e.removed],
        ['changed', e.changed],
      ]
        .filter((x): x is [string, string[]] => Array.isArray(x[1]) && x[1].length > 0)
        .map(([verb, ids]) => `${verb} ${ids.join(', ')}`);
      const settings = e.settings?.length ? `; settings changed: ${e.settings.join(', ')}` : '';
      const changes =
        e.added || e.removed || e.changed
          ? `: ${what.length > 0 ? what.join('; ') : 'no routine changed'}${settings}`
          : '';
      return `[scheduler] reloaded config (${e.routines} routine${e.routines === 1 ? '' : 's'}${changes})`;
    }
    case 'scheduler.reload_failed':
      // one line, whatever the error (a config error names each problem on a line of its own)
      return `[scheduler] config reload failed, keeping the old config: ${e.error.split(/\s*\n\s*/).join('; ')}`;
    case 'scheduler.warning':
      return `[scheduler] warning: ${e.message}`;
    case 'scheduler.lock_lost':
      return `[scheduler] scheduler lock lost (${e.why}); stopping`;
    case 'scheduler.state':
      return e.writable
        ? '[scheduler] state folder writable again; fires go on'
        : `[scheduler] state folder not writable: ${printable(e.message ?? 'unknown')}; fires are held until it is writable`;
    case 'scheduler.clock_step':
      return e.direction === 'back'
        ? `[scheduler] wall clock stepped back ${stepText(e.step_ms)}; firing on the new time, no tick fired twice`
        : `[scheduler] wall clock stepped forward ${stepText(e.step_ms)}; each routine's missed tick fires once, the times jumped over are not replayed`;
    case 'scheduler.clock':
      return `[scheduler] database clock ${e.change === 'first' ? 'offset' : 'offset changed'}: ${e.offset_ms >= 0 ? '+' : '-'}${(Math.abs(e.offset_ms) / 1000).toFixed(3)}s (${e.text}; measured to ±${(e.rtt_ms / 2).toFixed(1)}ms); ticks and times follow the database`;
    case 'routine.started':
      return `[routine] started ${e.routine}`;
    case 'routine.succeeded':
      return `[routine] succeeded ${e.routine} in ${secs(e.duration_ms)}`;
    case 'routine.failed':
      return `[routine] failed ${e.routine}: ${e.reason} in ${secs(e.duration_ms)}`;
    case 'routine.skipped':
      return `[routine] skipped ${e.routine}: ${e.reason}${e.holder ? ` (held by ${e.holder})` : ''}`;
    case 'routine.queued':
      return `[routine] queued ${e.routine}: behind ${e.behind}`;
    case 'routine.waiting':
      return `[routine] waiting ${e.routine}: ${e.lock} busy (held by ${e.holder})`;
    case 'routine.retrying':
      return `[routine] retrying ${e.routine} in ${secs(e.in_ms)} (attempt ${e.attempt} of ${e.of})`;
    case 'routine.catch_up':
      return `[routine] catching up ${e.routine} (missed ${e.scheduled_at})`;
    case 'routine.taken_over':
      return `[routine] took over ${e.routine} of ${e.scheduled_at} (claimed by ${e.from}, never fired): ${e.fires ? 'firing it late' : 'its next tick came first: recorded as skipped'}`;
    case 'routine.paused':
      return `[routine] paused ${e.routine}${e.note ? ` (${e.note})` : ''}`;
    case 'routine.resumed':
      return `[routine] resumed ${e.routine}`;
    case 'notify.sent':
      return `[notify] ${e.notify_event} ${e.routine}: sent to ${e.target}${e.attempts > 1 ? ` (attempt ${e.attempts})` : ''}`;
    case 'notify.failed':
      if (e.channel === null) return `[notify] ${e.routine}: could not notify: ${printable(e.error)}`;
      return `[notify] ${e.notify_event} ${e.routine}: ${e.channel === 'webhook' ? `webhook ${e.target}` : 'command'} failed after ${e.attempts} attempt${e.attempts === 1 ? '' : 's'}: ${printable(e.error)}`;
    case 'http.listening':
      return `[http] listening on ${e.url}${e.token ? ' (token required)' : ''}`;
    case 'http.warning':
      return `[http] warning: ${e.message}`;
    case 'http.action':
      return `[http] ${e.action} ${e.routine}: ${printable(e.outcome)}`;
  }
}

export type LogFormat = 'text' | 'json';
export type Logger = (e: LogEvent) => void;

export function createLogger(format: LogFormat, write: (line: string) => void, now: () => number = Date.now): Logger {
  return (e) => {
    const ts = new Date(now()).toISOString();
    // one line per event, whatever a record put in a reason or a note (SPEC §12)
    write(format === 'json' ? jsonText(JSON.stringify({ ts, ...e })) : `${ts} ${printable(formatText(e))}`);
  };
}
