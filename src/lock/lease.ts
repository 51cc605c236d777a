// The lease contract shared by every lock backend: the lock folder and PostgreSQL (SPEC §4, §9).
// Outcomes that callers must handle (busy, lost, not the owner) are typed values, not throws.

import type { LockRecord } from './record.js';

export type IfBusy = 'fail' | 'skip' | 'wait';

export interface LockOwnerInfo {
  /** What the holder is doing, e.g. `exec run`, `lock run`, `scheduler`. */
  command: string;
  run_id?: string | null;
  routine?: string | null;
  /** The config file a scheduler runs with (shown by `scheduler status`). */
  config?: string | null;
  /** A scheduler that is shutting down (`scheduler status` says `stopping`). */
  stopping?: boolean;
  /** Held for a scheduled tick of a routine (a scheduler's fire, not a manual `routine run`): a
   * tick of another scheduler of the project that meets it waits for its turn (SPEC §6). */
  scheduled?: boolean;
  /** A scheduler's lease taken again after a stall: the lock id of its first lease, which its
   * claims of ticks name (a shared database; scheduler/claims.ts). */
  claimer?: string;
}

export interface LockLost {
  code: 'LOCK_LOST';
  why: string;
  /** How long the holder's work may still take to stop (SIGTERM, then SIGKILL by then) before
   * anyone else can take the lock (SPEC §4.14); 0 when someone else holds it already. */
  graceMs: number;
}

/** Test and diagnosis hooks (the stall harness): `step` runs before every file-system step of
 * acquire, heartbeat, raise-generation and release, and may block. */
export interface LockHooks {
  step?(name: string): void;
  /** Things a holder should say but that are not errors (a wall-clock jump it rode out). */
  notice?(message: string): void;
}

export type RefreshResult = { ok: true } | { ok: false; lost: LockLost };

export type ReleaseResult =
  { released: true } | { released: false; reason: 'NOT_OWNER'; holder: LockRecord | null; why: string };

export interface Lease extends AsyncDisposable {
  readonly key: string;
  readonly lockId: string;
  /** Fencing token: strictly increases with every acquisition of the key (SPEC §4.7). */
  readonly generation: number;
  /** Aborted (with a LockLost reason) as soon as the lease is found lost. */
  readonly signal: AbortSignal;
  readonly lost: LockLost | null;
  /** Lost because its own heartbeats could not be written (the state folder is read-only or
   * failing), not because anyone took the lock (files only). */
  readonly lostToWriteErrors?: boolean;
  /** Taken over from a holder judged stale (dead, or stalled past its TTL): whatever that holder
   * left open (a fire's marker) is now for someone to close. */
  readonly tookOver?: boolean;
  /** …and that holder, as its record named it (null: its record could not be read). */
  readonly tookOverFrom?: LockRecord | null;
  record(): LockRecord;
  /** Rewrites the heartbeat if the lock is still ours; called by the heartbeat timer. */
  refresh(): RefreshResult;
  /** Check before a fenced write: still our lock_id in the file, and our lease not expired. */
  verify(): RefreshResult;
  /** Confirms the lease by our own clock, for writes frequent enough that a read of the lock each
   * would dominate (readers fence those by generation): false when it is lost, released or
   * expired, and an expired lease is marked lost here (its signal aborts). The file lease reads
   * its slots only when its expiry by the wall clock is near (a clock jump, SPEC §4.13). */
  confirm(): boolean;
  /** Right before a command starts under the lease: a lease another host may take over has this
   * process's guard told its lock id (exec/death-guard.ts), so a command started in the instant
   * before `trackChild` dies with this process all the same. */
  beforeSpawn?(): void;
  /** Records a process group we started, so a reclaimer can end it if we die (SPEC §4.4). */
  trackChild(pid: number): void;
  untrackChild(pid: number): void;
  /** Moves our own generation up to at least `atLeast` (state written under an older lock
   * counter shows a higher one: the counter was lost). Only ever raises. */
  raiseGeneration(atLeast: number): Promise<void>;
  /** Adds context to the owner record (e.g. the run id once the run exists). */
  annotate(fields: Partial<LockOwnerInfo>): void;
  /** Removes the lock only if it still carries our lock_id (SPEC §4.6). */
  release(): Promise<ReleaseResult>;
}

export type AcquireResult =
  | { ok: true; lease: Lease }
  | { ok: false; reason: 'LOCK_HELD'; holder: LockRecord | null; why: string }
  | { ok: false; reason: 'WAIT_TIMEOUT'; holder: LockRecord | null; why: string }
  | { ok: false; reason: 'ABORTED'; holder: LockRecord | null; why: string };

export interface BusyPolicy {
  ifBusy?: IfBusy;
  waitTimeoutMs?: number;
  signal?: AbortSignal;
  /** With fail or skip: a live holder on this host whose record looks expired (a stalled holder,
   * or a forged time) is watched for up to a TTL before the answer, and this is told when the
   * watch begins (SPEC §4.4; `scheduler start`, as `lock break`). */
  watchStalled?: (holder: LockRecord, forMs: number) => void;
  /** Whether it is this one's turn in the lock's line (line.ts): null when it may take the lock,
   * else why not (read after "held by"). Asked before every attempt. */
  turn?: () => Promise<string | null>;
}
