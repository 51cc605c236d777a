// Manual fires waiting for their lock, for every view (SPEC §6: a fire in progress in its phase,
// `waiting`, for which lock, held by whom). A `routine run --if-busy wait`, or a run from the
// page of a routine whose manual busy rule is wait, waits in its lock's line (lock/line.ts) with
// its routine named on its ticket; the views read the lines of the routines' locks and show such
// a ticket as its routine waiting, held by the lock's holders at the look. A scheduler's ticks
// are on its board (state/phases.ts), which wins where both name a routine.

import { holderText, holdersText } from '../fire/log.js';
import type { LockBackend } from '../lock/lock-backend.js';
import { slotKeys, slotsOf } from '../lock/named.js';
import type { LockRecord } from '../lock/record.js';
import type { Phase } from '../state/phases.js';
import { own } from '../is-object.js';

/** The routines (id, lock: a name, or "none") with a manual fire waiting in their lock's line,
 * in their `waiting` phase since it joined; the earliest of several of one routine. */
export async function manualWaits(
  lock: LockBackend,
  routines: readonly { id: string; lock: string | null }[],
  locks: Record<string, { slots: number }>,
): Promise<Record<string, Phase>> {
  const out: Record<string, Phase> = {};
  const line = lock.line;
  if (!line) return out;
  const byLock = new Map<string, Set<string>>();
  for (const r of routines)
    if (r.lock && r.lock !== 'none') byLock.set(r.lock, (byLock.get(r.lock) ?? new Set()).add(r.id));
  for (const [name, ids] of byLock) {
    // every live waiter of the lock, oldest first (this process's too: a scheduler's server
    // shows a run from its page that waits)
    const waiting = (await line.waiters(name)).filter(
      (e) => e.owner.routine && ids.has(e.owner.routine) && e.owner.scheduled !== true,
    );
    if (waiting.length === 0) continue;
    const holder = await heldBy(lock, name, slotsOf(locks, name));
    for (const e of waiting) {
      const id = e.owner.routine!;
      if (own(out, id)) continue;
      const since = new Date(e.arrived).toISOString();
      out[id] = { phase: 'waiting', since, scheduled_at: since, lock: name, holder };
    }
  }
  return out;
}

/** A scheduler's boards' `waiting` phases with the holders of their locks at the look (its board
 * names the holder it met when it began to wait, who may have handed the lock on since), as
 * manual waits show theirs. */
export async function waitingNow(
  lock: LockBackend,
  phases: Record<string, Phase>,
  locks: Record<string, { slots: number }>,
): Promise<Record<string, Phase>> {
  const held = new Map<string, Promise<string>>();
  const out: Record<string, Phase> = {};
  for (const [id, p] of Object.entries(phases)) {
    if (p.phase !== 'waiting') {
      out[id] = p;
      continue;
    }
    let h = held.get(p.lock);
    if (!h) held.set(p.lock, (h = heldBy(lock, p.lock, slotsOf(locks, p.lock))));
    try {
      out[id] = { ...p, holder: await h };
    } catch {
      out[id] = p; // (the lock cannot be read now: the board's words stand)
    }
  }
  return out;
}

/** The lock's holders in the words of a scheduler's board ("routine a r-… since 10:00:00"). */
async function heldBy(lock: LockBackend, name: string, slots: number): Promise<string> {
  const keys = slotKeys(name, slots);
  const held: LockRecord[] = [];
  for (const s of await Promise.all(keys.map((k) => lock.status(k))))
    if (s.state === 'held' && s.record) held.push(s.record);
  if (held.length === 0) return 'no one this moment (a waiter that came first takes it next)';
  return held.length > 1 && held.length === keys.length ? holdersText(held) : held.map(holderText).join(', and ');
}
