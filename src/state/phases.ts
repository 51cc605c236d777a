// Where each routine's fire is before it runs (SPEC §6: a fire in progress in its phase), as the
// scheduler writes it when the phase changes, for every view to read rather than guess:
// `delayed` (its jitter or a retry's back-off, until when), `queued` (behind which routine, in
// the scheduler's queue for its lock), `waiting` (for which lock, held by whom). `running` needs
// no board: the fire's open marker says it (running_since).
// A board is one scheduler's, naming its process: a view trusts it only while that scheduler
// lives (its process on this host, its lease in a database).

import { join } from 'node:path';
import type { Clock } from '../clock.js';
import { isObj } from '../is-object.js';
import { corruptMessage, readJsonState } from './json-file.js';

export type Phase =
  | { phase: 'queued'; since: string; scheduled_at: string; behind: string }
  | { phase: 'waiting'; since: string; scheduled_at: string; lock: string; holder: string }
  | Delayed;

/** A fire held back on purpose until `until`: its jitter, or the back-off before retry `attempt`
 * (of `of` runs in all). */
export type Delayed = { phase: 'delayed'; since: string; scheduled_at: string } & DelayedFor;

/** What a delayed fire waits for, as views show it: until when, and why. */
export type DelayedFor = { until: string } & ({ why: 'jitter' } | { why: 'retry'; attempt: number; of: number });

export const delayedFor = (p: Delayed): DelayedFor =>
  p.why === 'jitter'
    ? { until: p.until, why: 'jitter' }
    : { until: p.until, why: 'retry', attempt: p.attempt, of: p.of };

/** One scheduler's phases. */
export interface PhaseBoard {
  /** The scheduler's process (its identity on its host) and host id. */
  owner: { pid: number; host: string; boot_id: string | null; start_time: string | null; pid_ns?: string };
  written_at: string;
  routines: Record<string, Phase>;
}

const isStr = (v: unknown, max = 4096): v is string => typeof v === 'string' && v.length <= max;
const isIso = (v: unknown): v is string => isStr(v, 40) && Number.isFinite(Date.parse(v));
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 1 && (v as number) <= 1000;

/** The board, when `v` is one in every field (a file or a row is input, SPEC §12); else null. */
export function checkBoard(v: unknown): PhaseBoard | null {
  if (!isObj(v) || !isObj(v.owner) || !isObj(v.routines) || !isIso(v.written_at)) return null;
  const o = v.owner;
  if (!Number.isSafeInteger(o.pid) || (o.pid as number) < 1 || !isStr(o.host, 256)) return null;
  if ((o.boot_id !== null && !isStr(o.boot_id, 64)) || (o.start_time !== null && !isStr(o.start_time, 64))) return null;
  const routines: Record<string, Phase> = {};
  for (const [id, p] of Object.entries(v.routines)) {
    if (!isObj(p) || !isIso(p.since) || !isIso(p.scheduled_at)) return null;
    if (p.phase === 'queued' && isStr(p.behind, 64))
      routines[id] = { phase: 'queued', since: p.since, scheduled_at: p.scheduled_at, behind: p.behind };
    else if (p.phase === 'waiting' && isStr(p.lock, 64) && isStr(p.holder, 512))
      routines[id] = { phase: 'waiting', since: p.since, scheduled_at: p.scheduled_at, lock: p.lock, holder: p.holder };
    else if (p.phase === 'delayed' && isIso(p.until) && p.why === 'jitter')
      routines[id] = { phase: 'delayed', since: p.since, scheduled_at: p.scheduled_at, until: p.until, why: 'jitter' };
    else if (p.phase === 'delayed' && isIso(p.until) && p.why === 'retry' && isCount(p.attempt) && isCount(p.of))
      routines[id] = {
        phase: 'delayed',
        since: p.since,
        scheduled_at: p.scheduled_at,
        until: p.until,
        why: 'retry',
        attempt: p.attempt,
        of: p.of,
      };
    else return null;
  }
  return {
    owner: {
      pid: o.pid as number,
      host: o.host,
      boot_id: (o.boot_id as string | null) ?? null,
      start_time: (o.start_time as string | null) ?? null,
      ...(isStr(o.pid_ns, 64) ? { pid_ns: o.pid_ns } : {}),
    },
    written_at: v.written_at,
    routines,
  };
}

/** The scheduler's side: sets and clears phases, and writes the board as they change — one write
 * at a time, the newest board after the one under way (a burst of changes is a write or two),
 * never throwing into the scheduler (a board that cannot be written is said once). */
export class PhaseRecorder {
  private readonly routines = new Map<string, Phase>();
  private writing: Promise<void> | null = null;
  private dirty = false;
  private failed = false;

  constructor(
    private readonly o: {
      owner: PhaseBoard['owner'];
      clock: Pick<Clock, 'now'>;
      write: (board: PhaseBoard) => Promise<void>;
      warn: (message: string) => void;
    },
  ) {}

  queued(id: string, scheduledAt: Date, behind: string): void {
    this.set(id, { phase: 'queued', since: this.now(), scheduled_at: scheduledAt.toISOString(), behind });
  }

  /** The queued fire of `scheduledAt` waits behind another routine now (the turn passed on);
   * since when it is queued stays. */
  behind(id: string, scheduledAt: Date, behind: string): void {
    const p = this.routines.get(id);
    if (p?.phase !== 'queued' || p.scheduled_at !== scheduledAt.toISOString() || p.behind === behind) return;
    this.set(id, { ...p, behind });
  }

  /** The fire of `scheduledAt` is held back until `untilMs`: its jitter, or a retry's back-off. */
  delayed(
    id: string,
    scheduledAt: Date,
    untilMs: number,
    why: { why: 'jitter' } | { why: 'retry'; attempt: number; of: number },
  ): void {
    const at = { since: this.now(), scheduled_at: scheduledAt.toISOString(), until: new Date(untilMs).toISOString() };
    this.set(id, { phase: 'delayed', ...at, ...why });
  }

  waiting(id: string, scheduledAt: Date, lock: string, holder: string): void {
    this.set(id, { phase: 'waiting', since: this.now(), scheduled_at: scheduledAt.toISOString(), lock, holder });
  }

  /** The fire of `scheduledAt` runs (the open marker says so from here), was skipped, or ended;
   * a phase of another fire of it (the next tick, which took its place in the queue) stays. */
  clear(id: string, scheduledAt: Date): void {
    if (this.routines.get(id)?.scheduled_at !== scheduledAt.toISOString()) return;
    this.routines.delete(id);
    this.changed();
  }

  /** The writes under way are done (shutdown; tests). */
  async settled(): Promise<void> {
    while (this.writing) await this.writing;
  }

  private now(): string {
    return new Date(this.o.clock.now()).toISOString();
  }

  private set(id: string, p: Phase): void {
    this.routines.set(id, p);
    this.changed();
  }

  private changed(): void {
    this.dirty = true;
    if (!this.writing) this.writing = this.flush();
  }

  private async flush(): Promise<void> {
    while (this.dirty) {
      this.dirty = false;
      const board: PhaseBoard = {
        owner: this.o.owner,
        written_at: this.now(),
        routines: Object.fromEntries(this.routines),
      };
      try {
        await this.o.write(board);
        this.failed = false;
      } catch (err) {
        if (!this.failed)
          this.o.warn(
            `the routines' phases (delayed, queued, waiting) could not be written: ${(err as Error).message}; views show them once they can be`,
          );
        this.failed = true;
      }
    }
    this.writing = null;
  }
}

/** The file backend's board (one scheduler per project): `<stateDir>/phases.json`. */
export const phasesPath = (project: { stateDir: string }): string => join(project.stateDir, 'phases.json');

/** The board in phases.json, when there is a readable one (a damaged one is said and left: the
 * next write replaces it). */
export function readPhasesFile(project: { stateDir: string }, warn: (message: string) => void): PhaseBoard | null {
  const r = readJsonState(phasesPath(project), (v) => checkBoard(v) ?? 'not a board of phases');
  if (r.kind === 'corrupt')
    warn(
      corruptMessage(
        phasesPath(project),
        r,
        'the routines show no delayed, queued or waiting phase until the scheduler writes it again',
      ),
    );
  return r.kind === 'ok' ? r.value : null;
}
