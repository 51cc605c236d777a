// Named locks and their slots (SPEC §4.16; docs/lock.md "Locks"). A named lock of N slots is N
// keys of the lock backend, `named.<name>.<slot>`, each an exclusive lease with every rule of §4
// (its own record, heartbeat, generation, reclaim, orphans): a holder takes whichever slot is
// free, so at most N hold the lock at once, and a dead holder's slot is reclaimed as a dead exec
// lock holder is. The project exec lock is the name `exec` (key `exec-run`, one slot).
// (Over 300 lines: a take of a slot, its place in the line and the wait on every slot as the
// config's count changes are one algorithm.)

import { EXEC_LOCK_NAME } from '../config/types.js';
import { EXEC_LOCK_KEY, type BusyPolicy, type LockBackend } from './lock-backend.js';
import type { AcquireResult, Lease, LockOwnerInfo } from './lease.js';
import { lineNext, lineWhy, type LineEntry, type LineTicket, type WaitLine } from './line.js';
import { fixedSlots, type SlotCount } from './live-slots.js';
import { monotonicMs } from '../clock.js';
import type { LockRecord } from './record.js';
import type { LockStatus } from './status.js';

const NAMED_PREFIX = 'named.';

/** The backend key of slot `slot` (1-based) of lock `name`. */
export function lockKey(name: string, slot = 1): string {
  return name === EXEC_LOCK_NAME ? EXEC_LOCK_KEY : `${NAMED_PREFIX}${name}.${slot}`;
}

/** The keys of every slot of `name`. */
export function slotKeys(name: string, slots: number): string[] {
  return Array.from({ length: name === EXEC_LOCK_NAME ? 1 : slots }, (_, i) => lockKey(name, i + 1));
}

/** The lock name and slot a backend key stands for, or null for another key (the scheduler's,
 * routine-state's). */
export function lockOfKey(key: string): { name: string; slot: number } | null {
  if (key === EXEC_LOCK_KEY) return { name: EXEC_LOCK_NAME, slot: 1 };
  const m = /^named\.([a-z0-9][a-z0-9_-]{0,62})\.([1-9][0-9]?)$/.exec(key);
  return m ? { name: m[1]!, slot: Number(m[2]) } : null;
}

/** The prefix of every named lock's keys (for LockBackend.keys). */
export const NAMED_KEY_PREFIX = NAMED_PREFIX;

/** The slots of `name` in a config (`locks`); an undeclared name has one, the exec lock one. */
export function slotsOf(locks: Record<string, { slots: number }>, name: string): number {
  return name === EXEC_LOCK_NAME ? 1 : (locks[name]?.slots ?? 1);
}

/** The slots of `name` to look at: the config's count, and any slot above it that has a record
 * (the count was lowered while it was held: its holder keeps it until it ends, and a dead one's
 * orphans are ended only where someone looks — `lock status --lock`, `lock break --lock`, the
 * scheduler's start and reload). */
export async function slotsInUse(lock: LockBackend, name: string, configured: number): Promise<number> {
  if (name === EXEC_LOCK_NAME) return 1;
  let top = configured;
  for (const key of await lock.keys(`${NAMED_PREFIX}${name}.`)) {
    const l = lockOfKey(key);
    if (l?.name === name) top = Math.max(top, l.slot);
  }
  return top;
}

/** Reclaims every slot above its lock's count (lowered while it was held) whose holder is
 * stale — dead, or its heartbeat expired — as `lock break` does: its orphaned groups ended. A
 * live holder keeps its slot until it ends. Returns what was said; never throws. */
export async function reclaimStrandedSlots(
  lock: LockBackend,
  locks: Record<string, { slots: number }>,
): Promise<string[]> {
  const said: string[] = [];
  try {
    for (const key of await lock.keys(NAMED_PREFIX)) {
      const l = lockOfKey(key);
      if (!l || l.name === EXEC_LOCK_NAME || l.slot <= slotsOf(locks, l.name)) continue;
      if ((await lock.status(key)).state !== 'stale') continue;
      const r = await lock.breakStale(key);
      if (!r.broken) continue;
      const ended = r.orphans.ended.length;
      said.push(
        `lock ${l.name}: slot ${l.slot}, above its ${slotsOf(locks, l.name)} slot${slotsOf(locks, l.name) === 1 ? '' : 's'}, reclaimed from a stale holder (${r.why})${ended > 0 ? `; ended ${ended} orphaned process group${ended === 1 ? '' : 's'}` : ''}`,
      );
    }
  } catch (err) {
    said.push(`could not look at the slots above each lock's count: ${(err as Error).message}`);
  }
  return said;
}

/** How a busy lock is named in messages and records: `exec busy`, `db busy`. */
export const busyReason = (name: string): string => `${name} busy`;

/** Busy; `ahead`: because these waiters came first (the lock may be free this moment). */
export type NamedAcquireResult =
  | (AcquireResult & { ok: false; ahead?: LineEntry[]; holders?: LockRecord[] })
  | { ok: true; lease: Lease; slot: number };

/**
 * Takes a free slot of `name` (the first free one, in slot order). Busy when every slot is held:
 * `fail` and `skip` answer at once; `wait` waits on every slot together and takes the first that
 * frees (a dead holder's slot at once), giving back any other it got in the same moment. `onWait`
 * is told once, before the wait, whom it waits for.
 *
 * In arrival order (line.ts): with waiters of other processes in the lock's line before it, it
 * is busy however free the lock is (their turn first); a wait joins the line, and attempts only
 * when its turn comes. `ticket`: a place in the line taken earlier (a scheduler's tick queued
 * behind its own routine), kept by the caller.
 */
export async function acquireLock(
  lock: LockBackend,
  name: string,
  slots: number | SlotCount,
  owner: LockOwnerInfo,
  policy: BusyPolicy & { ticket?: LineTicket | null },
  onWait?: (why: string, holder: LockRecord | null, holders?: LockRecord[]) => void,
): Promise<NamedAcquireResult> {
  const count = typeof slots === 'number' ? fixedSlots(slots) : slots;
  let keys = slotKeys(name, count.first);
  const { ticket, ...busyPolicy } = policy;
  let mine = ticket ?? null;
  const line = lock.line;
  // one look at the line at a time: the waits on every slot ask together
  let looking: Promise<LineEntry[] | null> | null = null;
  const ahead = line
    ? () => (looking ??= aheadInLine(lock, line, name, keys, mine).finally(() => (looking = null)))
    : undefined;
  const turn = ahead
    ? async () => {
        const a = await ahead();
        return a ? lineWhy(a) : null;
      }
    : undefined;
  const busy: (AcquireResult & { ok: false })[] = [];
  const notYet = ahead ? await ahead() : null;
  if (notYet === null) {
    for (const [i, key] of keys.entries()) {
      const r = await lock.acquire(key, owner, {
        ...busyPolicy,
        ifBusy: busyPolicy.ifBusy === 'wait' ? 'fail' : busyPolicy.ifBusy,
      });
      if (r.ok) return { ok: true, lease: r.lease, slot: i + 1 };
      if (r.reason !== 'LOCK_HELD') return r;
      busy.push(r);
    }
  }
  const held: AcquireResult & { ok: false; ahead?: LineEntry[]; holders?: LockRecord[] } =
    notYet === null
      ? allHeld(busy)
      : { ok: false, reason: 'LOCK_HELD', holder: null, why: await lineHeldWhy(lock, keys, notYet), ahead: notYet };
  if (busyPolicy.ifBusy !== 'wait') return held;
  // its place in the line from now (none when the line cannot be written: order lost, not the wait)
  const joined = line && !mine ? await line.join(name, owner).catch(() => null) : null;
  mine ??= joined;
  try {
    onWait?.(held.why, held.holder, held.holders);
    const deadline = busyPolicy.waitTimeoutMs === undefined ? null : monotonicMs() + busyPolicy.waitTimeoutMs;
    // a wait on the slots the config has now: before each attempt it asks the config again, and
    // a count that changed ends this round (a slot above a lowered count is never attempted) and
    // starts one on the new slots
    for (;;) {
      const n = keys.length;
      let latest = n;
      const changed = new AbortController();
      const outer = busyPolicy.signal;
      const onOuter = (): void => changed.abort();
      outer?.addEventListener('abort', onOuter, { once: true });
      if (outer?.aborted) changed.abort();
      const slotTurn = async (): Promise<string | null> => {
        latest = await count.current();
        if (latest !== n) {
          changed.abort();
          return `the config now has ${latest} slot${latest === 1 ? '' : 's'}`;
        }
        return turn ? await turn() : null;
      };
      let r: NamedAcquireResult;
      try {
        r = await waitForAnySlot(lock, keys, owner, {
          ...busyPolicy,
          signal: changed.signal,
          turn: slotTurn,
          ...(deadline === null ? {} : { waitTimeoutMs: Math.max(0, deadline - monotonicMs()) }),
        });
      } finally {
        outer?.removeEventListener('abort', onOuter);
      }
      if (!r.ok && latest !== n && !outer?.aborted) {
        keys = slotKeys(name, latest);
        continue;
      }
      // a slot taken in the moment the count was lowered (the config changed between the look
      // and the take) is above the count now: given back, and the wait goes on below it
      if (r.ok && r.slot > 1) {
        const now = await count.current();
        if (r.slot > now) {
          await r.lease.release();
          keys = slotKeys(name, now);
          continue;
        }
      }
      // a wait that ended on its turn in the line names the holders too, not "no one"
      if (!r.ok && r.reason === 'WAIT_TIMEOUT' && r.holder === null && ahead) {
        const a = await ahead();
        if (a) return { ...r, why: await lineHeldWhy(lock, keys, a) };
      }
      return r;
    }
  } finally {
    await joined?.leave();
  }
}

/** Why a newcomer (or a waiter that gave up) is busy while waiters that came first have their
 * turn: the holders, when the lock is held (one `status` a slot), then who is next; "no one this
 * moment" only when it is free. */
async function lineHeldWhy(lock: LockBackend, keys: readonly string[], ahead: LineEntry[]): Promise<string> {
  let held: LockStatus[] = [];
  try {
    held = (await Promise.all(keys.map((k) => lock.status(k)))).filter((s) => s.state === 'held' && s.holder);
  } catch {
    // (a look that fails names the line alone)
  }
  if (held.length === 0) return lineWhy(ahead);
  const slots =
    keys.length === 1
      ? ''
      : held.length === keys.length
        ? ` (all ${keys.length} slots)`
        : ` (${held.length} of ${keys.length} slots)`;
  return `${held.map((s) => s.holder).join(', and ')}${slots}; then ${lineNext(ahead)}`;
}

/** null when it is this waiter's turn (`mine`; a newcomer's when null): no live waiter of
 * another process came before it, or fewer than the slots free now; else those waiters. A line
 * that cannot be read orders nothing (every take is still the lock's own). */
async function aheadInLine(
  lock: LockBackend,
  line: WaitLine,
  name: string,
  keys: readonly string[],
  mine: LineTicket | null,
): Promise<LineEntry[] | null> {
  try {
    const ahead = await line.ahead(name, mine);
    if (ahead.length === 0) return null;
    if (keys.length > 1 && ahead.length < keys.length - (await heldSlots(lock, name, keys))) return null;
    return ahead;
  } catch {
    return null;
  }
}

/** How many of a lock's slots are held now: one look each where the backend has it. */
async function heldSlots(lock: LockBackend, name: string, keys: readonly string[]): Promise<number> {
  if (!lock.holds) return (await namedLockStatus(lock, name, keys.length)).held;
  return (await Promise.all(keys.map((k) => lock.holds!(k)))).filter(Boolean).length;
}

/** Every slot held: one answer that names the holders (for one slot, that slot's words);
 * `holders`: each slot's, for the words of a skip or a wait. */
function allHeld(busy: (AcquireResult & { ok: false })[]): AcquireResult & { ok: false; holders?: LockRecord[] } {
  if (busy.length === 1) return busy[0]!;
  const holders = busy.map((b) => b.holder).filter((h): h is LockRecord => h !== null);
  return {
    ok: false,
    reason: 'LOCK_HELD',
    holder: busy[0]?.holder ?? null,
    why: slotsWhy(busy),
    ...(holders.length === busy.length ? { holders } : {}),
  };
}

/** "pid 1 on a (lock run), …, and pid 2 on b (routine x), … (all 2 slots)": as a holder is named. */
const slotsWhy = (busy: { why: string }[]): string =>
  `${busy.map((b) => b.why).join(', and ')} (all ${busy.length} slots)`;

/** Waits on every slot at once; the first lease wins, the others are given back. */
async function waitForAnySlot(
  lock: LockBackend,
  keys: string[],
  owner: LockOwnerInfo,
  policy: BusyPolicy,
): Promise<NamedAcquireResult> {
  if (keys.length === 1) {
    const r = await lock.acquire(keys[0]!, owner, policy);
    return r.ok ? { ...r, slot: 1 } : r;
  }
  const done = new AbortController();
  const onOuter = (): void => done.abort();
  policy.signal?.addEventListener('abort', onOuter, { once: true });
  let winner: { lease: Lease; slot: number } | null = null;
  try {
    const tries = keys.map(async (key, i) => {
      const r = await lock.acquire(key, owner, { ...policy, signal: done.signal });
      if (!r.ok) return r;
      if (winner === null) {
        winner = { lease: r.lease, slot: i + 1 };
        done.abort();
      } else await r.lease.release(); // taken in the same moment as the winner's: given back
      return r;
    });
    const results = await Promise.all(tries);
    if (winner) return { ok: true, ...(winner as { lease: Lease; slot: number }) };
    if (policy.signal?.aborted)
      return results.find((r) => !r.ok && r.reason === 'ABORTED') as AcquireResult & { ok: false };
    const failed = results.filter((r): r is AcquireResult & { ok: false } => !r.ok);
    const timedOut = failed.every((r) => r.reason === 'WAIT_TIMEOUT');
    const why = slotsWhy(failed);
    return timedOut
      ? { ok: false, reason: 'WAIT_TIMEOUT', holder: failed[0]?.holder ?? null, why }
      : (failed.find((r) => r.reason !== 'WAIT_TIMEOUT') ?? failed[0]!);
  } finally {
    policy.signal?.removeEventListener('abort', onOuter);
  }
}

/** One slot's status, named. */
export interface SlotStatus extends LockStatus {
  lock: string;
  slot: number;
}

/** A named lock's status: every slot (`lock status --lock NAME`). */
export interface NamedLockStatus {
  lock: string;
  slots: number;
  /** Slots held now (a stale one is not). */
  held: number;
  /** The config's count, when a slot above it is shown (lowered while that slot was held). */
  configured_slots?: number;
  slot_status: SlotStatus[];
}

/** Every slot of `name`; `configured`: the config's count, when `slots` looks above it. */
export async function namedLockStatus(
  lock: LockBackend,
  name: string,
  slots: number,
  configured = slots,
): Promise<NamedLockStatus> {
  const all = await Promise.all(
    slotKeys(name, slots).map(async (key, i) => ({ ...(await lock.status(key)), lock: name, slot: i + 1 })),
  );
  // a free slot above the config's count is no slot of the lock any more
  const slot_status = all.filter((x) => x.slot <= configured || x.state !== 'free');
  return {
    lock: name,
    slots: slot_status.length,
    held: slot_status.filter((s) => s.state === 'held').length,
    ...(slot_status.length > configured ? { configured_slots: configured } : {}),
    slot_status,
  };
}

/** The exec lock's status (as it always was), with every named lock in use beside it: a slot
 * held, or stale (`lock status` without `--lock`). `slots`: the config's count of a lock's
 * slots, when known (else: as many as have been used). */
export async function lockStatusAll(
  lock: LockBackend,
  slots?: (name: string) => number,
): Promise<LockStatus & { lock: string; slot: number; named: NamedLockStatus[] }> {
  const exec = await lock.status(EXEC_LOCK_KEY);
  const used = new Map<string, number>();
  for (const key of await lock.keys(NAMED_PREFIX)) {
    const l = lockOfKey(key);
    if (l && l.name !== EXEC_LOCK_NAME) used.set(l.name, Math.max(used.get(l.name) ?? 0, l.slot));
  }
  const named: NamedLockStatus[] = [];
  for (const [name, seen] of [...used].sort(([a], [b]) => a.localeCompare(b))) {
    const all = await namedLockStatus(lock, name, Math.max(seen, slots?.(name) ?? 0), slots?.(name) ?? seen);
    if (all.slot_status.some((s) => s.state !== 'free')) named.push(all);
  }
  return { ...exec, lock: EXEC_LOCK_NAME, slot: 1, named };
}
