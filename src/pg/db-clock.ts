// The database's clock, as seen from this host (SPEC §9: one clock for every host sharing a
// project). The lease already trusts only the database's now(); ticks, history times and run ids
// follow it too, or two hosts whose clocks differ by 10 s fire every real second twice and then
// fall silent for 10 s (SPEC §9). We measure the offset to the database clock the NTP way —
// offset = db_now − (t_send + rtt / 2) — at connect and then periodically, and keep
// `now() = Date.now() + offset`. Durations stay on the local monotonic clock.

import { monotonicMs, systemClock, type Clock } from '../clock.js';
import type { Db } from './connect.js';
import { sessionSql } from './statements.js';
import type { Logger } from '../fire/log.js';

/** One measurement: how far the database clock is ahead of ours, ± rttMs / 2. */
export interface OffsetSample {
  offsetMs: number;
  rttMs: number;
}

/** Past this skew every host's operator should fix NTP: a loud warning (the times still follow
 * the database, but a file-backed tool or a person reading local logs sees another time). */
export const SKEW_WARN_MS = 1000;
/** A change of the offset by this much since it was last logged is logged again. */
export const OFFSET_LOG_STEP_MS = 250;

/** The offset of one round trip: the database read its clock somewhere between our send and our
 * receive; the middle is the best guess, wrong by at most half the round trip. */
export function offsetSample(sentWallMs: number, rttMs: number, dbNowMs: number): OffsetSample {
  return { offsetMs: dbNowMs - (sentWallMs + rttMs / 2), rttMs };
}

/** Of several samples the one with the shortest round trip is the most exact. */
export function bestSample(samples: readonly OffsetSample[]): OffsetSample | null {
  let best: OffsetSample | null = null;
  for (const s of samples) if (Number.isFinite(s.offsetMs) && s.rttMs >= 0 && (!best || s.rttMs < best.rttMs)) best = s;
  return best;
}

/** The offset to use after a sample: a new one only when the sample says it really differs (more
 * than its own uncertainty, plus a few ms), so that a jittery round trip does not make our time
 * wobble back and forth between two writes. */
export function nextOffset(current: number | null, s: OffsetSample): number {
  if (current === null) return s.offsetMs;
  return Math.abs(s.offsetMs - current) > s.rttMs / 2 + 5 ? s.offsetMs : current;
}

/** Whether an offset is worth a log line: the first one, and any that moved notably since the
 * last one logged. */
export function offsetNews(lastLogged: number | null, offsetMs: number): 'first' | 'changed' | null {
  if (lastLogged === null) return 'first';
  return Math.abs(offsetMs - lastLogged) >= OFFSET_LOG_STEP_MS ? 'changed' : null;
}

/** `this host's clock is 10.0s ahead of the database's` (offset = database − host). */
export function describeOffset(offsetMs: number): string {
  const s = (Math.abs(offsetMs) / 1000).toFixed(Math.abs(offsetMs) < 1000 ? 3 : 1);
  if (offsetMs === 0) return "this host's clock agrees with the database's";
  return `this host's clock is ${s}s ${offsetMs < 0 ? 'ahead of' : 'behind'} the database's`;
}

/** The warning for a skew past SKEW_WARN_MS, else null. */
export function skewWarning(offsetMs: number): string | null {
  if (Math.abs(offsetMs) < SKEW_WARN_MS) return null;
  return `${describeOffset(offsetMs)}; schedules, history times and run ids follow the database clock, fix this host's time sync (NTP)`;
}

export type OffsetListener = (offsetMs: number, sample: OffsetSample) => void;

/** The wall clock corrected to the database's; monotonic time and sleeps stay local. */
export class DbClock implements Clock {
  private offset: number | null = null;
  private timer: NodeJS.Timeout | undefined;
  private readonly listeners = new Set<OffsetListener>();
  private measuring: Promise<void> | null = null;
  /** The sample behind the offset in force (its round trip says how exact it is). */
  lastSample: OffsetSample | null = null;

  constructor(private readonly db: Pick<Db, 'query'>) {}

  now(): number {
    return Date.now() + (this.offset ?? 0);
  }

  monotonic(): number {
    return systemClock.monotonic();
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return systemClock.sleep(ms, signal);
  }

  /** Database − host, in ms; null until first measured. */
  get offsetMs(): number | null {
    return this.offset;
  }

  /** Told of every offset in force after a measurement (the scheduler logs the notable ones). */
  onMeasured(fn: OffsetListener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Takes `rounds` samples and applies the best. Errors propagate (the caller decides whether a
   * database it cannot read the time of is fatal: at connect it is, later the old offset stays). */
  measure(rounds = 2): Promise<void> {
    this.measuring ??= (async () => {
      const samples: OffsetSample[] = [];
      for (let i = 0; i < rounds; i++) {
        const sent = Date.now();
        const started = monotonicMs();
        const { rows } = await this.db.query<{ ms: number }>(sessionSql.clockMs);
        const rtt = monotonicMs() - started;
        const ms = Number(rows[0]?.ms);
        if (Number.isFinite(ms)) samples.push(offsetSample(sent, rtt, ms));
      }
      const best = bestSample(samples);
      if (!best) return;
      const next = nextOffset(this.offset, best);
      if (next !== this.offset || !this.lastSample) this.lastSample = best;
      this.offset = next;
      for (const fn of this.listeners) fn(this.offset, best);
    })().finally(() => {
      this.measuring = null;
    });
    return this.measuring;
  }

  /** Measures again every `everyMs` (never keeping the process alive); failures keep the last
   * offset (the database is away: nothing is fired or written meanwhile anyway). */
  startRefreshing(everyMs: number): void {
    this.stopRefreshing();
    this.timer = setInterval(() => void this.measure().catch(() => {}), everyMs);
    this.timer.unref();
  }

  stopRefreshing(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}

/** Logs the offset to the database clock when first measured and whenever it moves notably, with
 * a warning past SKEW_WARN_MS; a notable move wakes the loop (a clock step). */
export function watchOffset(clock: DbClock, log: Logger, stepped: () => void): () => void {
  let logged: number | null = null;
  const seen = (offset: number, sample: OffsetSample): void => {
    const news = offsetNews(logged, offset);
    if (!news) return;
    logged = offset;
    log({
      event: 'scheduler.clock',
      offset_ms: Math.round(offset * 10) / 10,
      rtt_ms: Math.round(sample.rttMs * 10) / 10,
      change: news,
      text: describeOffset(offset),
    });
    const warning = skewWarning(offset);
    if (warning) log({ event: 'scheduler.warning', message: warning });
    if (news === 'changed') stepped();
  };
  if (clock.offsetMs !== null) seen(clock.offsetMs, clock.lastSample ?? { offsetMs: clock.offsetMs, rttMs: 0 });
  return clock.onMeasured(seen);
}
