// /metrics (SPEC §11) with prom-client, in the Prometheus text format. Fires are counted as this
// scheduler records them (so on a shared database each scheduler exports what it fired); the
// shared state (last success, consecutive skips, paused, the exec lock) is read on each scrape.
// This module is loaded only when --http is given: prom-client costs ≈ 40 ms to import.

import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Fire } from '../state/routine-state.js';

/** Seconds: cron work runs from a blink to hours. */
export const DURATION_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200];
const RESULTS = ['success', 'failure', 'skipped'] as const;

export interface SharedState {
  routines: { id: string; paused: boolean; last_success_at: string | null; consecutive_skips: number }[];
  execLockHeld: boolean;
  schedulerUp: boolean;
}

export class Metrics {
  private readonly registry = new Registry();
  readonly contentType: string = this.registry.contentType;
  private readonly fires: Counter<'routine' | 'result'>;
  private readonly duration: Histogram<'routine'>;
  private readonly lastSuccess: Gauge<'routine'>;
  private readonly skips: Gauge<'routine'>;
  private readonly paused: Gauge<'routine'>;
  private readonly lockHeld: Gauge;
  private readonly up: Gauge;
  /** Routines whose fire series exist. */
  private readonly seen = new Set<string>();
  /** Scrapes one at a time: gauges are reset and refilled for each. */
  private queue: Promise<unknown> = Promise.resolve();

  /** @param countsFires false for `serve`, which fires nothing and so exports no fire series. */
  constructor(private readonly countsFires: boolean) {
    const registers = [this.registry];
    this.fires = new Counter({ name: 'routinely_fires_total', help: 'Fires recorded by this scheduler, by routine and result (success, failure, skipped).', labelNames: ['routine', 'result'], registers });
    this.duration = new Histogram({ name: 'routinely_fire_duration_seconds', help: 'How long the fires of a routine that ran took (busy skips did no work and are not observed).', labelNames: ['routine'], buckets: DURATION_BUCKETS, registers });
    this.lastSuccess = new Gauge({ name: 'routinely_last_success_timestamp_seconds', help: 'When the routine last succeeded (epoch seconds, any scheduler); absent until it has.', labelNames: ['routine'], registers });
    this.skips = new Gauge({ name: 'routinely_consecutive_skips', help: 'Busy skips of the routine since it last ran.', labelNames: ['routine'], registers });
    this.paused = new Gauge({ name: 'routinely_routine_paused', help: '1 while the routine is paused (routine pause), else 0.', labelNames: ['routine'], registers });
    this.lockHeld = new Gauge({ name: 'routinely_exec_lock_held', help: '1 while someone holds the project exec lock, else 0.', registers });
    this.up = new Gauge({ name: 'routinely_scheduler_up', help: '1 while the scheduler loop is alive and holds its scheduler lock (serve: while a scheduler holds it), else 0.', registers });
  }

  /** The scheduler's observer hook: never throws into the scheduler. */
  fired(routine: string, fire: Fire): void {
    try {
      this.ensureSeries(routine);
      this.fires.inc({ routine, result: fire.result });
      if (fire.result !== 'skipped') this.duration.observe({ routine }, Math.max(0, fire.duration_ms) / 1000);
    } catch {
      // a metric that cannot be counted must not cost the fire
    }
  }

  /** Every fire series of a routine exists from its first scrape or fire on, so rate() and
   * increase() see the first fire. Once per routine: zero() empties a histogram. */
  private ensureSeries(routine: string): void {
    if (this.seen.has(routine)) return;
    this.seen.add(routine);
    for (const result of RESULTS) this.fires.inc({ routine, result }, 0);
    this.duration.zero({ routine });
  }

  /** The exposition text for one scrape. */
  render(state: SharedState): Promise<string> {
    const run = this.queue.then(() => this.fill(state));
    this.queue = run.catch(() => {});
    return run;
  }

  private async fill(state: SharedState): Promise<string> {
    this.lastSuccess.reset();
    this.skips.reset();
    this.paused.reset();
    for (const r of state.routines) {
      const routine = r.id;
      if (this.countsFires) this.ensureSeries(routine);
      const success = r.last_success_at ? Date.parse(r.last_success_at) : NaN;
      if (Number.isFinite(success)) this.lastSuccess.set({ routine }, success / 1000);
      this.skips.set({ routine }, r.consecutive_skips);
      this.paused.set({ routine }, r.paused ? 1 : 0);
    }
    this.lockHeld.set(state.execLockHeld ? 1 : 0);
    this.up.set(state.schedulerUp ? 1 : 0);
    return this.registry.metrics();
  }
}
