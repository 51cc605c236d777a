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

import { join } from 'node:path';
import { systemClock, type Clock } from '../clock.js';
import { ensureDir, namesIn, readFileChecked, unlinkQuiet } from '../fs/files.js';
import { randomHex } from '../fs/random-ids.js';
import { lstatQuiet } from '../fs/look.js';
import { closeFd, createHeld, touchFd } from '../fs/names.js';
import { isObj } from '../is-object.js';
import {
  processGone,
  selfIdentity,
  systemProbe,
  type LivenessProbe,
  type ProcessIdentity,
} from '../process/identity.js';
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
  const first = ahead[0]!;
  const who = `${first.owner.command}${first.owner.routine ? ` ${first.owner.routine}` : ''}, pid ${first.owner.pid} on ${first.owner.host}`;
  if (ahead.length === 1) return `no one this moment, but a waiter that came first takes it next: ${who}`;
  return `no one this moment, but ${ahead.length} waiters that came first take it next: ${who}, and ${ahead.length - 1} more`;
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

export interface FileLineOptions {
  lockDir: string;
  ttlMs: number;
  refreshMs: number;
  clock?: Clock;
  probe?: LivenessProbe;
}

/** The owner a ticket file names; null when it is garbled (removed once it is a TTL old: its
 * writer is long done), 'later' when it is gone or cannot be read now. */
function readOwner(path: string, now: number, ttlMs: number): LineEntry['owner'] | null | 'later' {
  let read;
  try {
    read = readFileChecked(path, 4096);
  } catch {
    return null; // a name that is not a ticket file of ours: not a waiter
  }
  if (!read) return 'later'; // it left meanwhile
  let owner: unknown;
  try {
    owner = (JSON.parse(read.text) as { owner?: unknown }).owner;
  } catch {
    owner = null;
  }
  if (isLineOwner(owner)) return owner;
  if (now - read.mtimeMs > ttlMs) unlinkQuiet(path);
  // a ticket is written whole before it is seen only if its writer is done: a half-written one
  // (empty, a torn line) is asked again next time
  return read.text.endsWith('\n') ? null : 'later';
}

/** `<name>.<arrival ms, 15 digits>.<16 hex>`: sorts in arrival order, made once (O_EXCL). */
const TICKET = /^([a-z0-9][a-z0-9_-]{0,62})\.(\d{15})\.([0-9a-f]{16})$/;

/** The line kept as one file per ticket in `<lockDir>/line/` (0700, files 0600, never through a
 * symlink). A ticket's file is beaten through its open descriptor (futimes), never its name. */
export function fileWaitLine(o: FileLineOptions): WaitLine {
  const clock = o.clock ?? systemClock;
  const probe = o.probe ?? systemProbe();
  const dir = join(o.lockDir, 'line');
  const me = (): ProcessIdentity => selfIdentity(probe);
  /** The owner of each ticket file seen (null: garbled, ordering nothing). */
  const owners = new Map<string, LineEntry['owner'] | null>();

  return {
    async join(name, owner) {
      ensureDir(dir);
      const arrived = clock.now();
      const id = randomHex(8);
      const path = join(dir, `${name}.${String(arrived).padStart(15, '0')}.${id}`);
      const fd = createHeld(
        path,
        `${JSON.stringify({ version: 1, lock: name, arrived_at: new Date(arrived).toISOString(), owner: ticketOwner(owner, probe) })}\n`,
      );
      // its beat: the file's mtime, each refresh (a stopped process stops beating)
      const timer = setInterval(() => {
        try {
          touchFd(fd, clock.now() / 1000);
        } catch {
          // a beat that cannot be written makes the ticket look stale: order lost, never safety
        }
      }, o.refreshMs);
      timer.unref();
      let left = false;
      return {
        ticket: id,
        arrived,
        async leave() {
          if (left) return;
          left = true;
          clearInterval(timer);
          unlinkQuiet(path);
          closeFd(fd);
        },
      };
    },

    async ahead(name, mine) {
      const now = clock.now();
      const self = me();
      const listed = new Set<string>();
      const all: (LineEntry & { path: string })[] = [];
      for (const n of namesIn(dir)) {
        const m = TICKET.exec(n);
        if (!m || m[1] !== name) continue;
        listed.add(n);
        const path = join(dir, n);
        // a ticket's file never changes after it is written: read once per process
        let owner: LineEntry['owner'] | null;
        const known = owners.get(n);
        if (known !== undefined) owner = known;
        else {
          const read = readOwner(path, now, o.ttlMs);
          if (read === 'later') continue;
          owners.set(n, (owner = read));
        }
        if (owner === null) continue;
        all.push({ ticket: m[3]!, arrived: Number(m[2]), owner, path });
      }
      for (const n of owners.keys()) if (n.startsWith(`${name}.`) && !listed.has(n)) owners.delete(n);
      // those before this process's place count while their process lives and beats its ticket
      const found: LineEntry[] = [];
      for (const e of aheadOf(all, self, mine)) {
        if (processGone(e.owner, probe)) {
          unlinkQuiet((e as LineEntry & { path: string }).path);
          continue;
        }
        const st = lstatQuiet((e as LineEntry & { path: string }).path);
        if (!st || now - st.mtimeMs > o.ttlMs) continue; // gone, or not beaten for a TTL: passed over
        found.push({ ticket: e.ticket, arrived: e.arrived, owner: e.owner });
      }
      return found;
    },
  };
}
