// `lock status` and `lock break` (SPEC §4.8): read-only inspection, and removal of a lock only
// when the stale rules say so. Nothing here can make a caller the holder.

import { systemClock, type Clock } from '../clock.js';
import { readNoFollow } from './files.js';
import { readGeneration } from './generation.js';
import { systemProbe, type LivenessProbe } from './identity.js';
import { lockPaths } from './paths.js';
import { parseLockRecord, type LockRecord } from './record.js';
import { reclaimStale } from './reclaim.js';
import { describeHolder, judgeLock, type StaleReason } from './stale.js';
import type { OrphanReport } from './orphans.js';

export interface LockInspectOptions {
  lockDir: string;
  key: string;
  clock?: Clock;
  probe?: LivenessProbe;
}

export interface LockStatus {
  key: string;
  path: string;
  state: 'free' | 'held' | 'stale';
  record: LockRecord | null;
  /** The last generation handed out for this key (0 when never acquired). */
  generation: number;
  holder: string | null;
  heartbeat_age_s: number | null;
  expires_in_s: number | null;
  stale_reason: StaleReason | null;
  why: string | null;
}

const round1 = (n: number): number => Math.round(n * 10) / 10;

export function readLockStatus(opts: LockInspectOptions): LockStatus {
  return inspect(opts).status;
}

function inspect(opts: LockInspectOptions): { status: LockStatus; raw: string | null } {
  const clock = opts.clock ?? systemClock;
  const probe = opts.probe ?? systemProbe();
  const paths = lockPaths(opts.lockDir, opts.key);
  const raw = readNoFollow(paths.lock);
  return { status: describe(opts.key, paths.lock, raw, readGeneration(paths), clock, probe), raw };
}

function describe(key: string, path: string, raw: string | null, counter: number, clock: Clock, probe: LivenessProbe): LockStatus {
  const base = { key, path };
  if (raw === null) {
    return {
      ...base, state: 'free', record: null, generation: counter, holder: null,
      heartbeat_age_s: null, expires_in_s: null, stale_reason: null, why: null,
    };
  }
  const record = parseLockRecord(raw);
  const nowMs = clock.now();
  const verdict = judgeLock(record, nowMs, probe);
  const now = nowMs / 1000;
  return {
    ...base,
    state: verdict.stale ? 'stale' : 'held',
    record,
    generation: Math.max(counter, record?.generation ?? 0),
    holder: record ? describeHolder(record, nowMs) : null,
    heartbeat_age_s: record ? round1(now - record.heartbeat_at) : null,
    expires_in_s: record ? round1(record.expires_at - now) : null,
    stale_reason: verdict.stale ? verdict.reason : null,
    why: verdict.stale
      ? verdict.why
      : verdict.ownerCheck === 'alive'
        ? `owner pid ${record!.owner.pid} is alive and its heartbeat is fresh`
        : `heartbeat is fresh (owner on ${record!.owner.host}, judged by expiry)`,
  };
}

export type BreakResult =
  | { broken: true; why: string; staleFile: string; orphans: OrphanReport }
  | { broken: false; reason: 'FREE' | 'NOT_STALE' | 'RECLAIMING' | 'CHANGED'; why: string; status: LockStatus };

/** Removes the lock only when it is stale (SPEC §4.8), through the same guarded reclaim. */
export async function breakStaleLock(opts: LockInspectOptions): Promise<BreakResult> {
  const clock = opts.clock ?? systemClock;
  const probe = opts.probe ?? systemProbe();
  const paths = lockPaths(opts.lockDir, opts.key);
  const { status, raw } = inspect({ ...opts, clock, probe });
  if (raw === null || status.state === 'free') return { broken: false, reason: 'FREE', why: 'no lock to break', status };
  if (status.state === 'held') {
    return { broken: false, reason: 'NOT_STALE', why: `${status.holder}: ${status.why}`, status };
  }
  const outcome = await reclaimStale(raw, { paths, clock, probe });
  switch (outcome.kind) {
    case 'reclaimed':
      return { broken: true, why: status.why ?? 'stale', staleFile: outcome.staleFile, orphans: outcome.orphans };
    case 'guard-busy':
      return { broken: false, reason: 'RECLAIMING', why: 'another process is reclaiming it right now', status };
    case 'changed':
      return { broken: false, reason: 'CHANGED', why: 'the lock changed while we looked; run again', status };
  }
}
