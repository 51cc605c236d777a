// `lock status` and `lock break` (SPEC §4.8): read-only inspection, and removal of a lock only
// when the stale rules say so. Nothing here can make a caller the holder of a live lock.

import { systemClock, type Clock } from '../clock.js';
import { attemptAcquire } from './acquire.js';
import { lookAtLock } from './look.js';
import { systemProbe, type LivenessProbe } from '../process/identity.js';
import { checkFolder } from '../fs/files.js';
import { readChildJournal } from './children.js';
import { journalPath, lockPaths, type LockPaths } from './paths.js';
import type { LockRecord } from '../lock/record.js';
import { recordLooksFresh } from '../lock/observer.js';
import { believedTtlMs, MAX_TTL_MS, type Observation } from '../lock/stale.js';
import type { BreakResult, LockStatus } from '../lock/status.js';

export interface LockInspectOptions {
  lockDir: string;
  key: string;
  clock?: Clock;
  probe?: LivenessProbe;
  generationFloor?: () => number;
  /** `lock break`: the key's TTL (the project's), for watching a live holder on this host. */
  ttlMs?: number;
  /** `lock break`: told once that a live holder on this host is being watched, and how long. */
  onWatch?: (holder: string, forMs: number) => void;
}

const round1 = (n: number): number => Math.round(n * 10) / 10;

/** The holder's children: its heartbeat copies them at most every 250 ms, its journal has each
 * at once; the live ones of both. */
function withJournalChildren(r: LockRecord, paths: LockPaths, probe: LivenessProbe): LockRecord {
  const known = new Map((r.owner.children ?? []).map((c) => [c.pid, c]));
  for (const c of readChildJournal(journalPath(paths, r.lock_id), probe)) {
    if (known.has(c.pid)) continue;
    const p = probe.inspect(c.pid);
    if (p.state === 'alive' && (!c.start_time || !p.startTime || p.startTime === c.start_time)) known.set(c.pid, c);
  }
  return known.size === (r.owner.children ?? []).length
    ? r
    : { ...r, owner: { ...r.owner, children: [...known.values()] } };
}

export function readLockStatus(opts: LockInspectOptions): LockStatus {
  const clock = opts.clock ?? systemClock;
  const probe = opts.probe ?? systemProbe();
  const paths = lockPaths(opts.lockDir, opts.key);
  checkFolder(paths.dir);
  const nowMs = clock.now();
  const now = nowMs / 1000;
  for (let i = 0; ; i++) {
    const look = lookAtLock(paths, nowMs, probe, { floor: opts.generationFloor });
    if (look.kind === 'retry' && i < 8) continue;
    const base = { key: opts.key, path: paths.lock };
    const timing = (r: LockRecord) => ({
      heartbeat_age_s: round1(now - r.heartbeat_at),
      expires_in_s: round1(r.expires_at - now),
    });
    if (look.kind === 'held') {
      const r = withJournalChildren(look.holder, paths, probe);
      return {
        ...base,
        state: 'held',
        record: r,
        generation: r.generation,
        holder: look.why,
        ...timing(r),
        stale_reason: null,
        why:
          look.ownerCheck !== 'alive'
            ? `heartbeat is fresh (owner on ${r.owner.host}, judged by expiry)`
            : recordLooksFresh(r, nowMs)
              ? `owner pid ${r.owner.pid} is alive and its heartbeat is fresh`
              : // the words that are true: the record's times say expired, which decides nothing for a
                // live owner on this host (SPEC §4.4)
                `owner pid ${r.owner.pid} is alive; its heartbeat is ${round1(now - r.heartbeat_at)}s old by its record, past the ${round1(believedTtlMs(r, MAX_TTL_MS) / 1000)}s TTL it claims — for a live owner on this host the record's times decide nothing: it is stale once its heartbeat stays unchanged for that TTL on this host's clock (lock break and a waiter watch it that long)`,
      };
    }
    if (look.kind === 'free' && (look.stale || look.foreign)) {
      const r = look.stale ? (look.top?.record ?? null) : (look.foreign?.record ?? null);
      const reason = look.stale ? look.stale.reason : look.foreign?.record ? 'EXPIRED' : 'UNREADABLE';
      return {
        ...base,
        state: 'stale',
        record: r,
        generation: look.next - 1,
        holder: r ? `pid ${r.owner.pid} on ${r.owner.host}` : null,
        ...(r ? timing(r) : { heartbeat_age_s: null, expires_in_s: null }),
        stale_reason: reason,
        why: look.stale ? look.stale.why : (look.foreign?.why ?? 'unreadable'),
      };
    }
    return {
      ...base,
      state: 'free',
      record: null,
      generation: look.kind === 'free' ? look.next - 1 : 0,
      holder: null,
      heartbeat_age_s: null,
      expires_in_s: null,
      stale_reason: null,
      why: null,
    };
  }
}

/** Watches a live holder on this host for up to the TTL: the observation that finds it stalled
 * (its heartbeat unchanged all that time; the lock may also have been released meanwhile), or
 * null once it showed a sign of life. */
async function watchHolder(
  opts: LockInspectOptions,
  status: LockStatus,
): Promise<((signature: string) => Observation) | null> {
  const clock = opts.clock ?? systemClock;
  const probe = opts.probe ?? systemProbe();
  const paths = lockPaths(opts.lockDir, opts.key);
  // as long as the holder is judged by: its record's TTL when believed, at least ours
  const ttlMs = Math.max(opts.ttlMs!, status.record ? believedTtlMs(status.record, opts.ttlMs!) : 0);
  const since = clock.monotonic();
  let seen: string | null = null;
  let moved = false;
  const observe = (signature: string): Observation => {
    if (seen === null) seen = signature;
    else if (signature !== seen) moved = true; // a heartbeat, or another holder
    return { unchangedForMs: moved ? 0 : clock.monotonic() - since, ttlMs };
  };
  opts.onWatch?.(status.holder ?? 'its holder', ttlMs);
  for (;;) {
    const look = lookAtLock(paths, clock.now(), probe, { observe, floor: opts.generationFloor });
    if (moved) return null;
    if (look.kind === 'free') return observe;
    if (look.kind === 'retry') continue;
    if (clock.monotonic() - since > 2 * ttlMs + 1000) return null;
    await clock.sleep(250);
  }
}

/** Breaks a stale lock (SPEC §4.8): takes it over exactly as an acquirer would (ending the stale
 * holder's orphans, keeping its record as `.stale.<ts>`) and releases it at once. A live or free
 * lock is left alone. */
export async function breakStaleLock(opts: LockInspectOptions): Promise<BreakResult> {
  const status = readLockStatus(opts);
  if (status.state === 'free') return { broken: false, reason: 'FREE', why: 'no lock to break', status };
  let observe: ((signature: string) => Observation) | undefined;
  if (status.state === 'held') {
    // A live holder on this host is judged by its heartbeat on our own clock, never by the times
    // in its record (SPEC §4.4). One whose record looks fresh is left alone at once (trusting a
    // record to refuse takes nothing from anyone); one whose record looks expired, or claims an
    // implausible expiry, is watched for up to a TTL: stale once its heartbeat has not moved all
    // that time (a stalled holder), alive the moment it moves.
    const r = status.record;
    const looksFresh = r !== null && recordLooksFresh(r, (opts.clock ?? systemClock).now());
    const watched =
      opts.ttlMs !== undefined && r !== null && !looksFresh && /is alive/.test(status.why ?? '')
        ? await watchHolder(opts, status)
        : null;
    if (!watched) return { broken: false, reason: 'NOT_STALE', why: `${status.holder}: ${status.why}`, status };
    observe = watched;
  }
  const r = await attemptAcquire(
    {
      lockDir: opts.lockDir,
      key: opts.key,
      ttlMs: 10_000,
      refreshMs: 3_000,
      owner: { command: 'lock break' },
      clock: opts.clock,
      probe: opts.probe,
      generationFloor: opts.generationFloor,
    },
    observe ? { observe } : {},
  );
  if (!r.ok) {
    return {
      broken: false,
      reason: 'CHANGED',
      why: `the lock changed while we looked (${r.why}); run again`,
      status: readLockStatus(opts),
    };
  }
  r.lease.releaseSync();
  if (!r.takeover)
    return { broken: false, reason: 'CHANGED', why: 'the lock was released meanwhile; nothing to break', status };
  return { broken: true, why: r.takeover.why, staleFile: r.takeover.staleFile, orphans: r.takeover.orphans };
}
