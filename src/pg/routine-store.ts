// Routine state, history and tick claims in PostgreSQL. Each record is a read-modify-write in
// one transaction with the row locked (FOR UPDATE), so concurrent writers on any host never lose
// each other's updates.
// (Over 300 lines: one store object, every method a transaction over statements.ts; the SQL is
// there, the decisions here.)

import {
  claimKey,
  type Claimant,
  type FireQuery,
  type NotRecorded,
  type OrphanClaim,
  type PauseChange,
  type RecordOptions,
  type RoutineStore,
  type ShownFire,
  type Warn,
} from '../state/store.js';
import { ClaimTakenError } from '../errors.js';
import { checkBoard, type PhaseBoard } from '../state/phases.js';
import { processGone } from '../process/identity.js';
import { checkFireEntry } from '../state/fire-entry.js';
import { historyEntryOf, type HistoryEntry } from '../state/history.js';
import {
  applyFire,
  applyLateFire,
  checkRecord,
  isLate,
  emptyRecord,
  emptyState,
  interruptedFire,
  isInterrupted,
  setPaused,
  type Fire,
  type OpenFire,
  type RoutineRecord,
  type RoutineStateFile,
} from '../state/routine-state.js';
import type { Db, TxClient } from './connect.js';
import { ENTRY_ROW_MAX, RECORD_ROW_MAX, routineSql as sql } from './statements.js';

/** History lines are trimmed to `historyLines` once per this many records (each reader takes the
 * newest `historyLines` only). */
const TRIM_EVERY = 16;

type Stored = 'stored' | 'had' | 'refused';

/** `historyLines`: fires kept per routine (retention.historyLines). */
export function pgRoutineStore(db: Db, project: string, historyLines: number): RoutineStore {
  /** The routine's record, its row locked until the transaction ends (made first when missing:
   * one round trip when it exists, as it does after a routine's first record). With `claim`, the
   * claim of that tick is settled in the same round trip (ClaimTakenError when another
   * scheduler holds it now; no claim at all — a manual fire, a claim forgotten after a day, one
   * made before claims named their claimer — settles nothing and is no one's). */
  async function locked(
    client: TxClient,
    routine: string,
    claim?: { scheduledAt: string; claimer: string },
  ): Promise<RoutineRecord | undefined> {
    const read = async (): Promise<{ record: unknown; settled?: number }[]> =>
      (claim
        ? await client.query<{ record: unknown; settled: number }>(
            sql.settleAndLock(project, routine, claim.scheduledAt, claim.claimer),
          )
        : await client.query<{ record: unknown }>(sql.lockedRecord(project, routine))
      ).rows;
    let rows = await read();
    if (rows.length === 0) {
      await client.query(sql.ensureRow(project, routine));
      rows = await read();
    }
    if (claim && rows[0]?.settled !== 1) {
      const { rows: held } = await client.query<{ claimer: string | null }>(
        sql.claimerOf(project, routine, claim.scheduledAt),
      );
      const holder = held[0]?.claimer ?? null;
      if (holder !== null && holder !== claim.claimer)
        throw new ClaimTakenError(
          `the tick of ${claim.scheduledAt} of routine ${routine} was taken over by another scheduler (this one was judged gone: its lease ran out)`,
        );
    }
    return parseRecord(rows[0]?.record);
  }

  async function update(
    client: TxClient,
    routine: string,
    change: (r: RoutineRecord | undefined) => RoutineRecord,
  ): Promise<void> {
    const prior = await locked(client, routine);
    await client.query(sql.writeRecord(project, routine, JSON.stringify(change(prior))));
  }

  /** Now and then (about once per 100 claims), claims older than a day are forgotten: a batch
   * found through its index, never awaited by the claim, and on the connection of the lease
   * heartbeats (idle between beats; a batch takes milliseconds), not on the one that claims and
   * fires (with backend.poolSize 1 they are one). */
  function forgetOldTicks(): void {
    void db.leaseQuery(sql.forgetOldTicks(project)).catch(() => {});
  }

  /** Stores a fire's record; false when it was stored already (sent again), or when its claim
   * is another scheduler's now (that one records the tick). */
  /** Stores `fire` unless it is stored already (`had`) or another record of the fire stands
   * (`refused`, said through `warn`). */
  async function store(routine: string, fire: Fire, opts: RecordOptions, warn?: Warn): Promise<Stored> {
    let stored: Stored = 'had';
    await db.transaction(async (client) => {
      stored = 'had'; // (the transaction may run its callback again)
      // The routine's row locked first: a record sent again after a lost answer (the spool) is
      // decided stored or not with it held, so once, whoever else sends it at the same time. A
      // record of a claimed tick settles its claim in the same round trip, while it is its
      // claimer's: one that opened no fire (a skip), and one whose open marker was never stored
      // (it could not start: its record closes a marker that may not be there).
      let prior: RoutineRecord | undefined;
      try {
        prior = await locked(
          client,
          routine,
          opts.claimer ? { scheduledAt: fire.scheduled_at, claimer: opts.claimer } : undefined,
        );
      } catch (err) {
        if (!(err instanceof ClaimTakenError)) throw err;
        stored = 'refused';
        warn?.(`${routine}: not recorded (${fire.result}${fire.reason ? `: ${fire.reason}` : ''}): ${err.message}`);
        return;
      }
      if (opts.again && !fire.closes && fire.key) {
        const { rowCount } = await client.query(sql.historyHas(project, routine, 'key', fire.key));
        if ((rowCount ?? 0) > 0) return; // stored already
      }
      if (opts.again && fire.closes) {
        // a record that closes an open fire is stored already when history holds a record
        // closing it (this one, or reconcile's); its marker may never have been stored at all
        // (a fire that did not start because the marker's answer was lost)
        const { rows: closing } = await client.query<{ result: Fire['result']; reason: string | null }>(
          sql.historyClosing(project, routine, fire.closes),
        );
        if (closing[0]) {
          // this very record, or another closing the same fire: when that is the interrupted
          // record of a scheduler that judged this one gone (its lease ran out while the database
          // was away) and this one has the real outcome, the first record stands and this is said
          if (isInterrupted(closing[0]) && !isInterrupted(fire)) {
            stored = 'refused';
            warn?.(
              `${routine}: not recorded (${fire.result}${fire.reason ? `: ${fire.reason}` : ''}): another scheduler recorded this fire already, as interrupted (this one was judged gone: its lease ran out)`,
            );
          }
          return;
        }
        // its open fire is closed: recorded already — for records from before history lines
        // carried `closes`; a fire that did not start may close none
        if (!fire.unstarted && !(prior?.open_fires ?? []).some((o) => o.id === fire.closes)) return;
      } else if (fire.closes && !fire.unstarted && !(prior?.open_fires ?? []).some((o) => o.id === fire.closes)) {
        // its marker was closed by someone else: a fire whose lock was taken over from it while it
        // stalled, recorded interrupted by the taker (the first record of a fire stands, as the
        // file backend's fold keeps the first) — said, as the log has this one's result
        stored = 'refused';
        warn?.(
          `${routine}: not recorded (${fire.result}${fire.reason ? `: ${fire.reason}` : ''}): another scheduler recorded this fire already, as interrupted (this one was judged gone while it stalled)`,
        );
        return;
      }
      let next = opts.again && isLate(prior, fire) ? applyLateFire(prior!, fire) : applyFire(prior, fire);
      if (fire.closes) {
        const left = (next.open_fires ?? []).filter((o) => o.id !== fire.closes);
        const { open_fires: _o, ...rest } = next;
        next = left.length > 0 ? { ...rest, open_fires: left } : rest;
      }
      const entry = historyEntryOf(fire);
      const { rows } = await client.query<{ seq: string }>(
        sql.writeRecordAndHistory(project, routine, JSON.stringify(next), JSON.stringify(entry)),
      );
      stored = 'stored';
      // beyond the kept lines, a few more wait for the next trim (every reader takes the
      // newest `historyLines` only): one trim per TRIM_EVERY records, not one each
      if (historyLines < TRIM_EVERY * 4 || Number(rows[0]?.seq ?? 0) % TRIM_EVERY === 0)
        await client.query(sql.trimHistory(project, routine, historyLines));
    });
    return stored;
  }

  return {
    sharedTicks: true,
    async read(warn: Warn): Promise<RoutineStateFile> {
      const { rows } = await db.query<{ routine: string; record: unknown; readable: boolean }>(sql.records(project));
      // each row on its own (SPEC §12): one that does not check out is that routine's loss only
      // (read as never run, until its next record writes it anew), said once per read
      const state = emptyState();
      const bad: string[] = [];
      for (const r of rows) {
        if (!r.readable) bad.push(r.routine);
        else if (Object.keys(r.record as object).length > 0) {
          const checked = parseRecord(r.record);
          if (checked) state.routines[r.routine] = checked;
          else bad.push(r.routine);
        }
      }
      if (bad.length > 0) {
        const shown = bad.slice(0, 5).join(', ') + (bad.length > 5 ? ` and ${bad.length - 5} more` : '');
        warn(
          `database ${db.where}: the state of routine${bad.length === 1 ? '' : 's'} ${shown} of project ${project} is not a routine's record (or over ${RECORD_ROW_MAX / 1024} KiB); read as never run until the next record`,
        );
      }
      return state;
    },

    async readOne(routine: string): Promise<RoutineRecord | undefined> {
      const { rows } = await db.query<{ record: unknown }>({ ...sql.record(project, routine), urgent: true });
      return parseRecord(rows[0]?.record);
    },

    async openFire(routine: string, open: OpenFire, _warn: Warn, claimer?: string): Promise<void> {
      await db.transaction(
        async (client) => {
          // a claimed tick opens only while the claim is its claimer's: settled from here on
          const r =
            (await locked(client, routine, claimer ? { scheduledAt: open.scheduled_at, claimer } : undefined)) ??
            emptyRecord();
          await client.query(
            sql.writeRecord(
              project,
              routine,
              JSON.stringify({ ...r, open_fires: [...(r.open_fires ?? []).filter((o) => o.id !== open.id), open] }),
            ),
          );
        },
        { urgent: true },
      );
    },

    async reconcile(isGone, warn, recorded): Promise<number> {
      const state = await this.read(warn);
      let closed = 0;
      for (const [id, record] of Object.entries(state.routines)) {
        for (const open of record.open_fires ?? []) {
          if (!isGone(open.owner, open, id)) continue;
          // as "again": of two processes of this host reconciling at once, one records it
          const fire = interruptedFire(open);
          if ((await store(id, fire, { again: true })) !== 'stored') continue;
          recorded?.(id, fire, record);
          closed++;
        }
      }
      return closed;
    },

    async recordFire(routine: string, fire: Fire, warn: Warn, opts: RecordOptions = {}): Promise<NotRecorded | void> {
      if ((await store(routine, fire, opts, warn)) === 'refused') return { notRecorded: true };
    },

    async setPaused(routine: string, paused: boolean, note: string | null): Promise<PauseChange> {
      let change: PauseChange = { wasPaused: false, note: null };
      await db.transaction((client) =>
        update(client, routine, (prior) => {
          const wasPaused = prior?.paused === true;
          const kept = paused ? (note ?? (wasPaused ? (prior?.paused_note ?? null) : null)) : null;
          change = { wasPaused, note: kept };
          return setPaused(prior, paused, kept);
        }),
      );
      return change;
    },

    async history(routine: string, warn?: Warn): Promise<HistoryEntry[]> {
      // by start, never more rows than are kept (statements.ts)
      const { rows } = await db.query<{ entry: unknown }>(sql.history(project, routine, historyLines));
      return checkedEntries(
        rows,
        (bad) => warn?.(unreadableRows(db.where, project, bad.length, [routine])),
        (_r, entry) => entry,
      );
    },

    async recentFires(routines: readonly string[], q: FireQuery, warn: Warn): Promise<ShownFire[]> {
      // each routine's newest rows as history() keeps them, then the newest that match; rows
      // that are not a fire's record come back only as the routines they are of (statements.ts)
      const iso = (ms: number): string | null => (Number.isFinite(ms) ? new Date(ms).toISOString() : null);
      const { rows } = await db.query<{ routine: string; entry: unknown; bad: string[] | null }>(
        sql.recentFires(project, {
          routines,
          keep: historyLines,
          since: iso(q.since),
          until: iso(q.until),
          result: q.result ?? null,
          limit: Number.isFinite(q.limit) ? q.limit : null,
        }),
      );
      const bad = [...(rows[0]?.bad ?? [])];
      const shown = checkedEntries(
        rows.reverse(),
        (b) => bad.push(...b.map((r) => r.routine)),
        (r, entry): ShownFire => ({ routine: r.routine, ...entry }),
      );
      if (bad.length > 0) warn(unreadableRows(db.where, project, bad.length, [...new Set(bad)]));
      return shown;
    },

    async claimTick(routine: string, scheduledAt: Date, by: Claimant): Promise<boolean> {
      const r = await db.query({
        ...sql.claimTick(project, routine, scheduledAt.toISOString(), by.host, by.claimer),
        urgent: true,
      });
      // now and then, forget claims older than a day: after the claim, never awaited by it (the
      // tick fires meanwhile), a batch found through its index
      if (Math.random() < 0.01) forgetOldTicks();
      return r.rowCount === 1;
    },

    async claimTicks(
      asked: readonly { routine: string; scheduledAt: Date }[],
      by: Claimant,
      again = false,
    ): Promise<Set<string>> {
      // rows locked in one order by every scheduler (routine, then time): two batches of the
      // same ticks wait for each other instead of deadlocking
      const ticks = [...asked].sort((a, b) =>
        a.routine < b.routine ? -1 : a.routine > b.routine ? 1 : a.scheduledAt.getTime() - b.scheduledAt.getTime(),
      );
      const { rows } = await db.query<{ routine: string; scheduled_at: Date }>({
        ...sql.claimTicks(
          project,
          ticks.map((t) => t.routine),
          ticks.map((t) => t.scheduledAt.toISOString()),
          by.host,
          by.claimer,
          again,
        ),
        urgent: true,
      });
      if (Math.random() < 0.01 * ticks.length) forgetOldTicks();
      return new Set(rows.map((r) => claimKey(r.routine, r.scheduled_at)));
    },

    async orphanClaims(claimer: string, limit: number): Promise<OrphanClaim[]> {
      const { rows } = await db.query<{ routine: string; scheduled_at: Date; host: string; claimer: string }>(
        sql.orphanClaims(project, claimer, limit),
      );
      return rows.map((r) => ({ routine: r.routine, scheduledAt: r.scheduled_at, host: r.host, claimer: r.claimer }));
    },

    async openFiresOfGoneClaimers(claimer: string): Promise<string[]> {
      const { rows } = await db.query<{ id: string }>(sql.openFiresOfGoneClaimers(project, claimer));
      return rows.map((r) => r.id);
    },

    async settleClaim(routine: string, scheduledAt: Date, claimer: string): Promise<void> {
      await db.query(sql.settleClaim(project, routine, scheduledAt.toISOString(), claimer));
    },

    async takeOverClaim(claim: OrphanClaim, to: Claimant): Promise<boolean> {
      const r = await db.query(
        sql.takeOverClaim(project, claim.routine, claim.scheduledAt.toISOString(), claim.claimer, to),
      );
      return (r.rowCount ?? 0) === 1;
    },

    async releaseClaim(routine: string, scheduledAt: Date, host: string): Promise<boolean> {
      const at = scheduledAt.toISOString();
      return db.transaction(async (client) => {
        // a fire of that tick, open or recorded, keeps its claim (locked: no record meanwhile)
        const { rows } = await client.query<{ record: unknown }>(sql.lockedRecord(project, routine));
        const record = parseRecord(rows[0]?.record);
        if ((record?.open_fires ?? []).some((o) => Date.parse(o.scheduled_at) === scheduledAt.getTime())) return false;
        // compared as text (every writer writes toISOString's form): a cast would fail on a row
        // whose time is not one (SPEC §12), and keep the claim for ever
        const fired = await client.query(sql.historyHas(project, routine, 'scheduled_at', at));
        if ((fired.rowCount ?? 0) > 0) return false;
        const r = await client.query(sql.releaseClaim(project, routine, at, host));
        return r.rowCount === 1;
      });
    },

    async writePhases(board: PhaseBoard): Promise<void> {
      await db.query(sql.writePhases(project, board.owner.host, JSON.stringify(board)));
    },

    async readPhases(warn: Warn): Promise<PhaseBoard[]> {
      const { rows } = await db.query<{ board: unknown }>(sql.readPhases(project));
      const boards = rows.map((r) => checkBoard(r.board));
      if (boards.some((b) => b === null))
        warn(
          `database ${db.where}: a row of routinely_phases is not a board of phases (written by something else than routinely?): left out`,
        );
      // a board of a scheduler on this host whose process is gone ended with it, lease or not
      return boards.filter((b): b is PhaseBoard => b !== null && !processGone(b.owner));
    },
  };
}

/** A row's record, checked field by field as routine-state.json's records are; undefined when
 * the row holds none (not an object, or the empty one of a routine not recorded yet). */
function parseRecord(value: unknown): RoutineRecord | undefined {
  if (!value || typeof value !== 'object' || Object.keys(value).length === 0) return undefined;
  return checkRecord(value) ?? undefined;
}

/** The rows whose entries check out (checkFireEntry), as `shape` makes them; the others go to
 * `skipped` (when there are any). */
function checkedEntries<R extends { entry: unknown }, T>(
  rows: readonly R[],
  skipped: (bad: R[]) => void,
  shape: (row: R, entry: HistoryEntry) => T,
): T[] {
  const out: T[] = [];
  const bad: R[] = [];
  for (const r of rows) {
    const entry = checkFireEntry(r.entry);
    if (entry) out.push(shape(r, entry));
    else bad.push(r);
  }
  if (bad.length > 0) skipped(bad);
  return out;
}

function unreadableRows(where: string, project: string, n: number, routines: string[]): string {
  const named =
    routines.length === 1
      ? `routine ${routines[0]}`
      : `routines ${routines.slice(0, 5).join(', ')}${routines.length > 5 ? ` and ${routines.length - 5} more` : ''}`;
  return `database ${where}: ${n} history row${n === 1 ? '' : 's'} of ${named} of project ${project} ${n === 1 ? 'is' : 'are'} not a fire's record (or over ${ENTRY_ROW_MAX / 1024} KiB) and ${n === 1 ? 'was' : 'were'} skipped`;
}
