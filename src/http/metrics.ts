// /metrics (SPEC §11) with prom-client, in the Prometheus text format. Fires are counted as this
// scheduler records them (so on a shared database each scheduler exports what it fired); the
// shared state (last success, consecutive skips, paused, the exec lock) is read on each scrape.
// This module is loaded only when --http is given: prom-client costs ≈ 40 ms to import.
// (Over 300 lines: every metric of SPEC §11 declared with its labels and help text.)

import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { isInterrupted, type Fire } from '../state/routine-state.js';

/** Seconds: cron work runs from a blink (a few ms) to hours. */
export const DURATION_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200,
];
/** Why a tick was skipped, as the label of routinely_skips_total (snake_case: label values are
 * matched in rules and dashboards, where a space needs quoting everywhere): its lock busy
 * (`exec_busy`, or `<name>_busy` for a named lock, SPEC §4.16), its previous run, a stop; and,
 * from their first one on, a time the scheduler slept through (`missed`) and a claim of a
 * shared database nobody fired in time (`claim_lost`). */
export const SKIP_REASONS = ['exec_busy', 'previous_run', 'scheduler_stopping'] as const;

/** The label of a busy skip of `lock`: `exec_busy`, `db_busy` (a "-" in a name becomes "_"). */
export const busyLabel = (lock: string): string => `${lock.replace(/-/g, '_')}_busy`;

function skipReason(reason: string | null): string {
  if (reason?.startsWith('previous run')) return 'previous_run';
  if (reason?.startsWith('scheduler')) return 'scheduler_stopping';
  if (reason?.startsWith('missed:')) return 'missed';
  if (reason?.startsWith('claimer died:') || reason?.startsWith('claim unanswered:')) return 'claim_lost';
  const busy = /^([a-z0-9][a-z0-9_-]*) busy\b/.exec(reason ?? '');
  return busyLabel(busy?.[1] ?? 'exec');
}

/** The skip reasons of a routine whose busy skips are of `lock`. */
const reasonsOf = (lock: string): string[] =>
  lock === 'none' ? ['previous_run', 'scheduler_stopping'] : [busyLabel(lock), 'previous_run', 'scheduler_stopping'];
const RESULTS = ['success', 'failure', 'skipped'] as const;

export interface SharedState {
  routines: {
    id: string;
    paused: boolean;
    last_success_at: string | null;
    last_failure_at: string | null;
    consecutive_skips: number;
    consecutive_failures: number;
    next_run_at: string | null;
    starved: boolean;
    /** A fire of it is running now (on any host). */
    running: boolean;
    /** Its last fire's scheduled time, of any result. */
    last_scheduled_at: string | null;
    /** How long its last fire that ran (success or failure) took; null: none ran. */
    last_run_duration_ms: number | null;
    /** What the config says of it; null when the config is not at hand. */
    config: {
      schedule: string;
      timezone: string;
      action: string;
      exclusive: boolean;
      if_busy: string;
      lock: string;
    } | null;
  }[];
  /** null: the exec lock could not be read (something in the way at its path): 0, nobody can hold it. */
  execLockHeld: boolean | null;
  schedulerUp: boolean;
  info: { version: string; project: string; host: string };
  /** PostgreSQL backend: the database clock minus ours, as last measured (null: not yet). */
  clockOffsetSeconds?: number | null;
}

/** The series that are one gauge per routine: its metric name and help, by the field that keeps it
 * (kube-state-metrics' CronJob series are the counterparts of running, lastSchedule and lastDuration). */
const ROUTINE_GAUGES = {
  lastSuccess: [
    'routinely_last_success_timestamp_seconds',
    'When the routine last succeeded (epoch seconds, any scheduler); 0 until it has.',
  ],
  skips: [
    'routinely_consecutive_skips',
    'Busy skips of the routine (the exec lock held by something else) since it last ran; its own previous run still going does not count.',
  ],
  paused: ['routinely_routine_paused', '1 while the routine is paused (routine pause), else 0.'],
  failing: [
    'routinely_routine_failing',
    '1 while the last run of the routine failed (skips do not clear it; a success does), else 0.',
  ],
  failures: ['routinely_consecutive_failures', 'Failed runs of the routine since it last succeeded.'],
  lastFailure: [
    'routinely_last_failure_timestamp_seconds',
    'When the routine last failed (epoch seconds); 0 if never.',
  ],
  nextFire: [
    'routinely_next_fire_timestamp_seconds',
    'When the routine fires next (epoch seconds); 0 when it has no next time (disabled).',
  ],
  starved: [
    'routinely_routine_starved',
    '1 while the routine has met a busy exec lock starvedAfterSkips times in a row, else 0.',
  ],
  running: ['routinely_routine_running', '1 while a fire of the routine is running (on any host), else 0.'],
  lastSchedule: [
    'routinely_last_schedule_timestamp_seconds',
    "The scheduled time of the routine's last fire, of any result (epoch seconds); 0 if never.",
  ],
  lastDuration: [
    'routinely_last_duration_seconds',
    "How long the routine's last fire that ran (success or failure) took; 0 if none ran.",
  ],
} as const;

/** The other series: name and help. */
const HELP = {
  routinely_fires_total: 'Fires recorded by this scheduler, by routine and result (success, failure, skipped).',
  routinely_fire_duration_seconds:
    'How long the fires of a routine that ran took (busy skips did no work and are not observed).',
  routinely_exec_lock_held: '1 while someone holds the project exec lock, else 0.',
  routinely_scheduler_up:
    '1 while the scheduler loop is alive and holds its scheduler lock (serve: while a scheduler holds it), else 0; 0 from the moment it stops.',
  routinely_skips_total:
    'Ticks this scheduler skipped, by routine and reason (exec_busy, or <lock>_busy for a named lock; previous_run, scheduler_stopping; missed, claim_lost once one happens).',
  routinely_routine_info:
    'Always 1: the routine as the config has it (schedule, timezone, action, exclusive, if_busy, and the lock it takes: exec, a named lock, or none).',
  routinely_database_clock_offset_seconds:
    "The database clock minus this host's clock, as last measured (PostgreSQL backend): ticks and times follow the database.",
  routinely_info: 'Always 1: the version of routinely, the project and the host.',
} as const;
const series = (name: keyof typeof HELP) => ({ name, help: HELP[name] });

export class Metrics {
  private readonly registry = new Registry();
  readonly contentType: string = this.registry.contentType;
  private readonly fires: Counter<'routine' | 'result'>;
  private readonly gauge: Record<keyof typeof ROUTINE_GAUGES, Gauge<'routine'>>;
  private readonly duration: Histogram<'routine'>;
  private readonly lockHeld: Gauge;
  private readonly up: Gauge;
  private readonly skipsTotal: Counter<'routine' | 'reason'>;
  private readonly routineInfo: Gauge<
    'routine' | 'schedule' | 'timezone' | 'action' | 'exclusive' | 'if_busy' | 'lock'
  >;
  private readonly info: Gauge<'version' | 'project' | 'host'>;
  private readonly clockOffset: Gauge | null;
  /** Routines whose fire series exist, with the skip reasons they were made with. */
  private readonly seen = new Map<string, string[]>();

  /** Scrapes one at a time: gauges are reset and refilled for each. */
  private queue: Promise<unknown> = Promise.resolve();

  /** @param countsFires false for `serve`, which fires nothing and so exports no fire series.
   * @param lockOf a routine's lock as the config has it now (its busy skips are `<lock>_busy`). */
  constructor(
    private readonly countsFires: boolean,
    withDbClock = false,
    private readonly lockOf: (routine: string) => string = () => 'exec',
  ) {
    const registers = [this.registry];
    // most series are one gauge per routine
    const entries = Object.entries(ROUTINE_GAUGES).map(([key, [name, help]]) => [
      key,
      new Gauge({ name, help, labelNames: ['routine'], registers }),
    ]);
    this.gauge = Object.fromEntries(entries) as Record<keyof typeof ROUTINE_GAUGES, Gauge<'routine'>>;
    this.fires = new Counter({ ...series('routinely_fires_total'), labelNames: ['routine', 'result'], registers });
    this.duration = new Histogram({
      ...series('routinely_fire_duration_seconds'),
      labelNames: ['routine'],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.lockHeld = new Gauge({ ...series('routinely_exec_lock_held'), registers });
    this.up = new Gauge({ ...series('routinely_scheduler_up'), registers });
    this.skipsTotal = new Counter({ ...series('routinely_skips_total'), labelNames: ['routine', 'reason'], registers });
    this.routineInfo = new Gauge({
      ...series('routinely_routine_info'),
      labelNames: ['routine', 'schedule', 'timezone', 'action', 'exclusive', 'if_busy', 'lock'],
      registers,
    });
    this.clockOffset = withDbClock
      ? new Gauge({ ...series('routinely_database_clock_offset_seconds'), registers })
      : null;
    this.info = new Gauge({ ...series('routinely_info'), labelNames: ['version', 'project', 'host'], registers });
  }

  /** The scheduler's observer hook: never throws into the scheduler. */
  fired(routine: string, fire: Fire): void {
    try {
      this.ensureSeries(routine);
      this.fires.inc({ routine, result: fire.result });
      // (a fire lost with its process has no known duration: not observed)
      if (fire.result !== 'skipped') {
        if (!isInterrupted(fire)) this.duration.observe({ routine }, Math.max(0, fire.duration_ms) / 1000);
      } else {
        const reason = skipReason(fire.reason);
        const known = this.seen.get(routine)!;
        if (!known.includes(reason)) known.push(reason);
        this.skipsTotal.inc({ routine, reason });
      }
    } catch {
      // a metric that cannot be counted must not cost the fire
    }
  }

  /** Every fire series of a routine exists from its first scrape or fire on, so rate() and
   * increase() see the first fire. Once per routine: zero() empties a histogram. */
  private ensureSeries(routine: string): void {
    const reasons = reasonsOf(this.lockOf(routine));
    const had = this.seen.get(routine);
    if (had) {
      // its lock changed (a reload): the busy skips of the new one exist from now on
      for (const reason of reasons)
        if (!had.includes(reason)) (had.push(reason), this.skipsTotal.inc({ routine, reason }, 0));
      return;
    }
    this.seen.set(routine, reasons);
    for (const result of RESULTS) this.fires.inc({ routine, result }, 0);
    for (const reason of reasons) this.skipsTotal.inc({ routine, reason }, 0);
    this.duration.zero({ routine });
  }

  /** A routine no longer in the config (a reload removed it) loses all of its series. */
  private dropSeries(routine: string): void {
    for (const reason of this.seen.get(routine) ?? []) this.skipsTotal.remove({ routine, reason });
    this.seen.delete(routine);
    for (const result of RESULTS) this.fires.remove({ routine, result });
    this.duration.remove({ routine });
  }

  /** The exposition text for one scrape. */
  render(state: SharedState): Promise<string> {
    const run = this.queue.then(() => this.fill(state));
    this.queue = run.catch(() => {});
    return run;
  }

  private async fill(state: SharedState): Promise<string> {
    for (const g of [
      this.gauge.lastSuccess,
      this.gauge.skips,
      this.gauge.paused,
      this.gauge.failing,
      this.gauge.failures,
      this.gauge.lastFailure,
      this.gauge.nextFire,
      this.gauge.starved,
      this.gauge.running,
      this.gauge.lastSchedule,
      this.gauge.lastDuration,
      this.routineInfo,
      this.info,
    ])
      g.reset();
    const ids = new Set(state.routines.map((r) => r.id));
    for (const routine of [...this.seen.keys()]) if (!ids.has(routine)) this.dropSeries(routine);
    const seconds = (iso: string | null): number => {
      const t = iso ? Date.parse(iso) : NaN;
      return Number.isFinite(t) ? t / 1000 : 0;
    };
    for (const r of state.routines) {
      const routine = r.id;
      if (this.countsFires) this.ensureSeries(routine);
      // every series from the first scrape: a time never set is 0, so "no success in N hours"
      // also fires for a routine that never succeeded
      this.gauge.lastSuccess.set({ routine }, seconds(r.last_success_at));
      this.gauge.lastFailure.set({ routine }, seconds(r.last_failure_at));
      this.gauge.nextFire.set({ routine }, seconds(r.next_run_at));
      this.gauge.skips.set({ routine }, r.consecutive_skips);
      this.gauge.paused.set({ routine }, r.paused ? 1 : 0);
      this.gauge.failing.set({ routine }, r.consecutive_failures > 0 ? 1 : 0);
      this.gauge.failures.set({ routine }, r.consecutive_failures);
      this.gauge.starved.set({ routine }, r.starved ? 1 : 0);
      this.gauge.running.set({ routine }, r.running ? 1 : 0);
      this.gauge.lastSchedule.set({ routine }, seconds(r.last_scheduled_at));
      this.gauge.lastDuration.set({ routine }, Math.max(0, r.last_run_duration_ms ?? 0) / 1000);
      if (r.config) this.routineInfo.set({ routine, ...r.config, exclusive: String(r.config.exclusive) }, 1);
    }
    this.lockHeld.set(state.execLockHeld === true ? 1 : 0);
    this.up.set(state.schedulerUp ? 1 : 0);
    this.info.set(state.info, 1);
    if (this.clockOffset && typeof state.clockOffsetSeconds === 'number')
      this.clockOffset.set(state.clockOffsetSeconds);
    return this.registry.metrics();
  }
}
