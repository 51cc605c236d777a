// Whether a lock may be reclaimed (SPEC §4.4). Pure: the record, the time and the process table
// come in as data, so every rule is tested with fixed values.

import { printable } from '../printable.js';
import type { LivenessProbe } from '../process/identity.js';
import type { LockOwner, LockRecord } from './record.js';
import { seconds } from '../duration.js';

export type StaleReason = 'UNREADABLE' | 'EXPIRED' | 'REBOOTED' | 'OWNER_DEAD' | 'PID_REUSED' | 'UNCHANGED';

export type Judgement =
  { stale: false; ownerCheck: 'alive' | 'remote' | 'unknown' } | { stale: true; reason: StaleReason; why: string };

export interface Observation {
  /** How long this observer has seen the same record (lock_id + heartbeat_at), on its own
   * monotonic clock. Lets an observer distrust another host's clock (SPEC §4.4). */
  unchangedForMs: number;
  /** The observer's own TTL for the key: a record that claims an implausible one (longer than
   * anyone may configure: an expiry a hundred years ahead) is timed by this instead. */
  ttlMs?: number;
}

/** The longest TTL anyone may configure (SPEC §2): an expiry further past its heartbeat than
 * this is not believed. */
export const MAX_TTL_MS = 86_400_000;

const secs = (s: number): string => seconds(s * 1000);

export function judgeLock(
  record: LockRecord | null,
  nowMs: number,
  probe: LivenessProbe,
  observation?: Observation,
): Judgement {
  if (record === null) {
    return { stale: true, reason: 'UNREADABLE', why: 'the lock file is empty or not a valid lock record' };
  }
  const owner = record.owner;
  let ownerCheck: 'alive' | 'remote' | 'unknown' = 'remote';
  // Another pid namespace on this host (a container) is judged like another host.
  if (owner.host === probe.host && (!owner.pid_ns || !probe.pidNs || owner.pid_ns === probe.pidNs)) {
    if (owner.boot_id && probe.bootId && owner.boot_id !== probe.bootId) {
      return {
        stale: true,
        reason: 'REBOOTED',
        why: `host ${owner.host} rebooted since pid ${owner.pid} took the lock`,
      };
    }
    const proc = probe.inspect(owner.pid);
    if (proc.state === 'dead') {
      const what = proc.why === 'zombie' ? 'has exited (zombie)' : 'is not running';
      return { stale: true, reason: 'OWNER_DEAD', why: `owner pid ${owner.pid} ${what}` };
    }
    if (proc.state === 'alive' && proc.startTime && owner.start_time && proc.startTime !== owner.start_time) {
      return {
        stale: true,
        reason: 'PID_REUSED',
        why: `pid ${owner.pid} now belongs to another process (start time ${proc.startTime}, lock says ${owner.start_time})`,
      };
    }
    ownerCheck = proc.state === 'alive' ? 'alive' : 'unknown';
  }
  const claimedMs = Math.max(0, (record.expires_at - record.heartbeat_at) * 1000);
  const ttlMs = believedTtlMs(record, observation?.ttlMs ?? MAX_TTL_MS);
  const unchanged = (): Judgement | null =>
    observation && observation.unchangedForMs > ttlMs
      ? {
          stale: true,
          reason: 'UNCHANGED',
          why: `no heartbeat seen for ${secs(observation.unchangedForMs / 1000)} on this host's clock (TTL ${secs(ttlMs / 1000)})`,
        }
      : null;
  // A live owner on this host is judged by the monotonic clock alone (SPEC §4.4): the times in its
  // record (written by anyone who can write the lock folder or the database row) and a step of
  // the wall clock never make it stale; only a heartbeat this observer saw stay unchanged for a
  // whole TTL does (a stalled holder).
  if (ownerCheck === 'alive') return unchanged() ?? { stale: false, ownerCheck };
  const now = nowMs / 1000;
  const expiresAt = record.heartbeat_at + ttlMs / 1000;
  if (expiresAt < now) {
    return {
      stale: true,
      reason: 'EXPIRED',
      why: `heartbeat expired ${secs(now - expiresAt)} ago (last heartbeat ${secs(now - record.heartbeat_at)} ago)${claimedMs > ttlMs ? `; its record claims a TTL of ${secs(claimedMs / 1000)}, more than the ${secs(ttlMs / 1000)} believed` : ''}`,
    };
  }
  return unchanged() ?? { stale: false, ownerCheck };
}

/** The TTL a record claims, believed when anyone could have configured it (at most a day); a
 * longer one is implausible, and the observer's own TTL stands in for it. What a holder is
 * judged by, so what a watcher must watch it for (not its own TTL: a holder configured with 70 s
 * beats every 23 s). */
export function believedTtlMs(record: LockRecord, observerTtlMs: number): number {
  const claimedMs = Math.max(0, (record.expires_at - record.heartbeat_at) * 1000);
  return claimedMs <= MAX_TTL_MS ? claimedMs : Math.min(MAX_TTL_MS, observerTtlMs);
}

/** What the holder does, `exec run, run r-…` (a routine's fire says "routine X" once, not
 * "routine, routine X"). Self-contained: the status page inlines its source. */
export function holderDoing(o: LockOwner): string {
  return [
    o.command === 'routine' && o.routine ? null : o.command,
    o.routine ? `routine ${o.routine}` : null,
    o.run_id ? `run ${o.run_id}` : null,
  ]
    .filter(Boolean)
    .join(', ');
}

/** Who keeps a lock busy, as every command and the page's run action say it: each holder of a
 * lock whose every slot is held (`…, and … (all 2 slots)`), else the one holder, else `ahead`
 * (a waiter before this one), else `another process`. */
export function describeBusy(
  o: { holder?: LockRecord | null; holders?: LockRecord[] | undefined; ahead?: string | undefined },
  nowMs: number,
): string {
  if (o.holders)
    return `${o.holders.map((h) => describeHolder(h, nowMs)).join(', and ')} (all ${o.holders.length} slots)`;
  return o.holder ? describeHolder(o.holder, nowMs) : (o.ahead ?? 'another process');
}

/** `pid 4711 on build-01 (exec run, run r-…), heartbeat 3s ago` — the holder as a person reads it. */
export function describeHolder(record: LockRecord, nowMs: number): string {
  const o = record.owner;
  const age = Math.max(0, nowMs / 1000 - record.heartbeat_at);
  return printable(`pid ${o.pid} on ${o.host} (${holderDoing(o)}), heartbeat ${Math.round(age)}s ago`);
}
