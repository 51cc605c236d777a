// The waiting line of a lock (SPEC §4.16, docs/lock.md "Arrival order"): who waits for a lock
// takes it in the order they came, across processes — a manual `lock run --if-busy wait`, an
// `exec run` that waits, a scheduler's tick queued behind a routine of its own. Each waiter holds
// a ticket (its arrival time, its process) while it waits; a waiter attempts the lock only when
// no live ticket of another process came before it (with slots: fewer than the slots free), and
// a newcomer that would not wait is busy while anyone waits. The line orders; it never excludes:
// every take is still the lock's own atomic acquire, so a line lost or garbled costs order, never
// safety. A ticket counts while its process lives and beats it (each refresh): one of a dead
// process (on this host) is removed by whoever sees it, one not beaten for a TTL (a stopped or
// cut-off process) is passed over until it beats again.

import { selfIdentity, type LivenessProbe, type ProcessIdentity } from '../process/identity.js';
import { isObj } from '../is-object.js';
import { printable } from '../printable.js';
import type { LockOwnerInfo } from './lease.js';

/** One waiter in a line, as others see it. */
export interface LineEntry {
  ticket: string;
  /** When it joined (ms since the epoch, on the clock of the line: this host's, or the database's). */
  arrived: number;
  owner: ProcessIdentity & { command: string; routine?: string | null; scheduled?: boolean };
}

/** A waiter's place in a line; `leave` when it took the lock or gave up (also when it never
 * did either: a ticket of a process that is gone is removed by others). */
export interface LineTicket {
  readonly ticket: string;
  readonly arrived: number;
  leave(): Promise<void>;
}

export interface WaitLine {
  /** Joins the line of lock `name` now. */
  join(name: string, owner: LockOwnerInfo): Promise<LineTicket>;
  /** The live waiters of other processes that came before `me` (every live one of another
   * process when `me` is null), oldest first. */
  ahead(name: string, me: LineTicket | null): Promise<LineEntry[]>;
  /** Every live waiter of lock `name`, this process's own too, oldest first (what the views
   * show: cli/manual-waits.ts). */
  waiters(name: string): Promise<LineEntry[]>;
}

/** Whether `a` came before `b` (arrival, then ticket: one order every process agrees on). */
export const before = (a: { arrived: number; ticket: string }, b: { arrived: number; ticket: string }): boolean =>
  a.arrived < b.arrived || (a.arrived === b.arrived && a.ticket < b.ticket);

/**
 * The live waiters of other processes before this process's place: `mine`, or an earlier ticket
 * of this process (a scheduler orders its own queue: a fire of it waiting for the lock stands
 * where its earliest queued tick stands, or two processes could each wait for the other), or —
 * for a newcomer of a process with no ticket — every one. Oldest first.
 */
export function aheadOf(
  all: readonly LineEntry[],
  self: { pid: number; host: string },
  mine: { arrived: number; ticket: string } | null,
): LineEntry[] {
  const isSelf = (e: LineEntry): boolean => e.owner.pid === self.pid && e.owner.host === self.host;
  let place = mine;
  for (const e of all) if (isSelf(e) && (!place || before(e, place))) place = e;
  return all.filter((e) => !isSelf(e) && (!place || before(e, place))).sort((a, b) => (before(a, b) ? -1 : 1));
}

/** The waiters ahead in words, read after "held by" (a busy message): the lock may be free this
 * moment, but it is theirs first. */
export function lineWhy(ahead: readonly LineEntry[]): string {
  return `no one this moment, but ${lineNext(ahead)}`;
}

/** "a waiter that came first takes it next: lock run, pid 4712 on build-01" */
export function lineNext(ahead: readonly LineEntry[]): string {
  const first = ahead[0]!;
  // (a ticket's strings are a record's: escaped, as a holder's are in its busy line)
  const o = first.owner;
  const who = printable(`${o.command}${o.routine ? ` ${o.routine}` : ''}, pid ${o.pid} on ${o.host}`);
  if (ahead.length === 1) return `a waiter that came first takes it next: ${who}`;
  return `${ahead.length} waiters that came first take it next: ${who}, and ${ahead.length - 1} more`;
}

/** The owner fields a ticket keeps: who, where, doing what. */
export function ticketOwner(owner: LockOwnerInfo, probe: LivenessProbe): LineEntry['owner'] {
  return {
    ...selfIdentity(probe),
    command: owner.command,
    routine: owner.routine ?? null,
    ...(owner.scheduled ? { scheduled: true } : {}),
  };
}

export function isLineOwner(v: unknown): v is LineEntry['owner'] {
  // (scheduled: a scheduled tick of a routine waits there, as a lock holder's record says)
  return (
    isObj(v) &&
    Number.isSafeInteger(v.pid) &&
    (v.pid as number) > 0 &&
    typeof v.host === 'string' &&
    typeof v.command === 'string'
  );
}
