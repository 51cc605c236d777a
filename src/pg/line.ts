// The waiting line of each lock with PostgreSQL (lock/line.ts has the rules): a row per waiter
// in `routinely_line`, arrival and beats on the database clock, so waiters on every host agree
// on one order. A waiter of a dead process on this host is removed at once; one on another host
// counts until its beat is a TTL old.

import { DatabaseError } from '../errors.js';
import { randomHex } from '../fs/random-ids.js';
import { aheadOf, before, isLineOwner, ticketOwner, type LineEntry, type WaitLine } from '../lock/line.js';
import {
  processGone,
  selfIdentity,
  systemProbe,
  type LivenessProbe,
  type ProcessIdentity,
} from '../process/identity.js';
import type { Db } from './connect.js';
import { lineSql } from './statements.js';

interface WaiterRow {
  ticket: string;
  arrived: number;
  owner: unknown;
  stale: boolean;
}

/** This process's tickets while they wait, of every line object it made (the library makes one
 * per call): a row of this process that is not one of them was left (its removal did not reach
 * the database: a blip) and is removed when met. */
const held = new Set<string>();

export function pgWaitLine(o: {
  db: Db;
  project: string;
  ttlMs: number;
  refreshMs: number;
  probe?: LivenessProbe;
}): WaitLine {
  const probe = o.probe ?? systemProbe();
  /** Tickets left whose removal failed: tried again every refresh until the database takes it,
   * so another process never waits a TTL behind a waiter that gave up. */
  const unremoved = new Map<string, { name: string; ticket: string }>();
  let retry: NodeJS.Timeout | null = null;
  const removeLeft = async (): Promise<void> => {
    for (const [key, { name, ticket }] of unremoved) {
      try {
        await o.db.query(lineSql.leave(o.project, name, ticket));
        unremoved.delete(key);
      } catch (err) {
        if (!(err instanceof DatabaseError)) throw err;
        return; // the database is still away: the next round
      }
    }
    if (unremoved.size === 0 && retry) {
      clearInterval(retry);
      retry = null;
    }
  };
  const quiet = (p: Promise<unknown>): void => {
    p.catch((err: unknown) => {
      // a beat or a removal that did not reach the database: order may be lost, never safety
      if (!(err instanceof DatabaseError)) throw err;
    });
  };
  /** The rows of `name` that count: this process's, and those of other processes that live (a
   * dead one's on this host is removed) and beat them within a TTL. */
  const live = async (name: string, self: ProcessIdentity): Promise<LineEntry[]> => {
    const { rows } = await o.db.query<WaiterRow>(lineSql.waiters(o.project, name, o.ttlMs / 1000));
    const found: LineEntry[] = [];
    for (const r of rows) {
      if (!isLineOwner(r.owner)) continue; // not a row routinely wrote: orders nothing
      const own = r.owner.pid === self.pid && r.owner.host === self.host;
      if (processGone(r.owner, probe) || (own && !held.has(`${name}\0${r.ticket}`))) {
        quiet(o.db.query(lineSql.leave(o.project, name, r.ticket)));
        continue;
      }
      if (r.stale && !own) continue;
      found.push({ ticket: r.ticket, arrived: Number(r.arrived), owner: r.owner });
    }
    return found;
  };

  return {
    async join(name, owner) {
      const ticket = randomHex(8);
      // held from before the row is there: a look of this process never takes it for a left one
      const key = `${name}\0${ticket}`;
      held.add(key);
      let rows: { arrived: number }[];
      try {
        ({ rows } = await o.db.query<{ arrived: number }>(
          lineSql.join(o.project, name, ticket, JSON.stringify(ticketOwner(owner, probe))),
        ));
      } catch (err) {
        held.delete(key);
        throw err;
      }
      const timer = setInterval(() => quiet(o.db.query(lineSql.beat(o.project, name, ticket))), o.refreshMs);
      timer.unref();
      let left = false;
      return {
        ticket,
        arrived: Number(rows[0]!.arrived),
        async leave() {
          if (left) return;
          left = true;
          clearInterval(timer);
          held.delete(key);
          try {
            await o.db.query(lineSql.leave(o.project, name, ticket));
          } catch {
            unremoved.set(key, { name, ticket });
            retry ??= setInterval(() => quiet(removeLeft()), o.refreshMs);
            retry.unref();
          }
        },
      };
    },

    async ahead(name, mine) {
      const self = selfIdentity(probe);
      return aheadOf(await live(name, self), self, mine);
    },

    async waiters(name) {
      return (await live(name, selfIdentity(probe))).sort((a, b) => (before(a, b) ? -1 : 1));
    },
  };
}
