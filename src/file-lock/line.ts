// The waiting line kept in files (lock/line.ts says what a line is).

import { join } from 'node:path';
import { systemClock, type Clock } from '../clock.js';
import { ensureDir, namesIn, readFileChecked, unlinkQuiet } from '../fs/files.js';
import { randomHex } from '../fs/random-ids.js';
import { lstatQuiet } from '../fs/look.js';
import { closeFd, createHeld, touchFd } from '../fs/names.js';
import {
  processGone,
  selfIdentity,
  systemProbe,
  type LivenessProbe,
  type ProcessIdentity,
} from '../process/identity.js';
import { aheadOf, before, isLineOwner, ticketOwner, type LineEntry, type WaitLine } from '../lock/line.js';

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

  /** The tickets of `name` that count: this process's, and those of other processes that live
   * and beat them (a dead one's is removed; one not beaten for a TTL is passed over). */
  const live = (name: string, self: ProcessIdentity): LineEntry[] => {
    const now = clock.now();
    const listed = new Set<string>();
    const found: LineEntry[] = [];
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
      const entry = { ticket: m[3]!, arrived: Number(m[2]), owner };
      if (owner.pid !== self.pid || owner.host !== self.host) {
        if (processGone(owner, probe)) {
          unlinkQuiet(path);
          continue;
        }
        const st = lstatQuiet(path);
        if (!st || now - st.mtimeMs > o.ttlMs) continue; // gone, or not beaten for a TTL: passed over
      }
      found.push(entry);
    }
    for (const n of owners.keys()) if (n.startsWith(`${name}.`) && !listed.has(n)) owners.delete(n);
    return found;
  };

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
      const self = me();
      return aheadOf(live(name, self), self, mine);
    },

    async waiters(name) {
      return live(name, me()).sort((a, b) => (before(a, b) ? -1 : 1));
    },
  };
}
