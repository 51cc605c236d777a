// Every statement routinely runs against PostgreSQL, in one place (the tables themselves and
// their migration are in schema.ts), as graphile-worker keeps its SQL: the stores (lease.ts,
// exec-store.ts, routine-store.ts) and the connection (connect.ts, db-clock.ts) say which
// statement to run with named values, and decide what the answer means; the text, the order of
// its parameters and the names of prepared statements live here, each table's statements beside
// each other. Every value is a parameter, never text spliced into a statement (the numbers and
// field names spliced below are constants of this program).
// (Over 300 lines: the statements of five tables, which read best together.)

import { TIMELINE_GENERATIONS } from './schema.js';

/** A statement with its values. `name`: prepared once per connection under that name (Db.query). */
export interface Statement {
  text: string;
  values?: unknown[];
  name?: string;
  /** On a fire's way to its start (a claim, the pause flag, the open marker): it goes before
   * the statements of records waiting for the same connection (connect.ts). */
  urgent?: boolean;
}

/** The connection's own statements (connect.ts, db-clock.ts). */
export const sessionSql = {
  begin: { text: 'BEGIN' } as Statement,
  /** For the transaction only: nothing of it outlives the transaction in a pooler's server connection. */
  statementTimeout: (ms: number): Statement => ({ text: `SET LOCAL statement_timeout = ${Math.trunc(ms)}` }),
  /** BEGIN, the transaction's statement time-out and its idle time-out in one round trip (a
   * simple query of three): a process stopped inside a transaction (SIGSTOP, a frozen VM) has its
   * session ended by the server after `idleMs`, and with it the row locks every other process
   * of the fleet would wait behind. */
  beginWithTimeout: (ms: number, idleMs: number): Statement => ({
    text: `BEGIN; SET LOCAL statement_timeout = ${Math.trunc(ms)}; SET LOCAL idle_in_transaction_session_timeout = ${Math.trunc(idleMs)}`,
  }),
  commit: { text: 'COMMIT' } as Statement,
  rollback: { text: 'ROLLBACK' } as Statement,
  standby: { text: 'SELECT pg_is_in_recovery() AS standby' } as Statement,
  /** The database's clock now, in ms since the epoch (`clock_timestamp()`, not the transaction's time). */
  clockMs: { text: 'SELECT extract(epoch from clock_timestamp())::float8 * 1000 AS ms' } as Statement,
};

// ---- routinely_leases (lease.ts; SPEC §9) ----

/** A lease row: (project, key). */
export interface LeaseKey {
  project: string;
  key: string;
}

/** A held lease's row: the lock id and epoch that fence every statement of its holder. */
export interface LeaseHold extends LeaseKey {
  lockId: string;
  epoch: number | string;
}

/** A new holder's row: its lock id, owner (JSON) and TTL. */
export interface LeaseGrant extends LeaseKey {
  lockId: string;
  owner: string;
  ttlSecs: number;
  /** No row whose epoch + 1 would pass it is taken (nor overflows). */
  maxGeneration: number;
}

/** A lease row as lease.ts reads it (times in seconds since the epoch, by the database clock). */
const LEASE_COLUMNS = `lock_id, epoch, owner, extract(epoch from created_at)::float8 AS created_at,
  extract(epoch from heartbeat_at)::float8 AS heartbeat_at, extract(epoch from expires_at)::float8 AS expires_at,
  released_at IS NOT NULL AS released, extract(epoch from now())::float8 AS db_now`;

const LEASE_ROW = `SELECT ${LEASE_COLUMNS} FROM routinely_leases WHERE project = $1 AND key = $2`;

// The fast path of an acquire, one round trip: the timeline gate (docs/postgres.md: when this
// database first saw its current timeline, recorded the first time; no lease for a TTL after a
// failover) and, when it is open, a free key (never used, or released) taken.
const LEASE_ACQUIRE = `WITH tl AS (SELECT routinely_timeline() AS t),
      seen AS (INSERT INTO routinely_timelines (timeline) SELECT t FROM tl
                WHERE NOT EXISTS (SELECT 1 FROM routinely_timelines, tl WHERE timeline = tl.t)
               ON CONFLICT (timeline) DO NOTHING RETURNING first_seen),
      gate AS (SELECT t, coalesce((SELECT first_seen FROM seen), (SELECT first_seen FROM routinely_timelines WHERE timeline = t)) AS first_seen FROM tl),
      open AS (SELECT t FROM gate WHERE t <= 1 OR now() >= first_seen + make_interval(secs => $5::float8 + 1)),
      taken AS (
        INSERT INTO routinely_leases AS l (project, key, lock_id, epoch, owner, created_at, heartbeat_at, expires_at, timeline)
        SELECT $1, $2, $3, (t - 1)::bigint * ${TIMELINE_GENERATIONS} + 1, $4, now(), now(), now() + make_interval(secs => $5::float8), t FROM open
        ON CONFLICT (project, key) DO UPDATE
          SET lock_id = excluded.lock_id, epoch = GREATEST(l.epoch + 1, excluded.epoch), owner = excluded.owner, created_at = now(),
              heartbeat_at = now(), expires_at = excluded.expires_at, released_at = NULL, timeline = excluded.timeline
        WHERE l.released_at IS NOT NULL AND l.epoch BETWEEN 1 AND $6::bigint - 1
        RETURNING ${LEASE_COLUMNS})
 SELECT gate.t AS gate_timeline, extract(epoch from gate.first_seen)::float8 AS gate_first_seen, extract(epoch from now())::float8 AS gate_now, taken.*
   FROM gate LEFT JOIN taken ON true`;

// A take-over of exactly the lease that was judged stale (a compare-and-set on lock_id and
// epoch: of several reclaimers, one wins), on the timeline the gate was read on.
const LEASE_RECLAIM = `UPDATE routinely_leases SET lock_id = $3, epoch = GREATEST(epoch + 1, $10::bigint + 1), owner = $4, created_at = now(), heartbeat_at = now(),
        expires_at = now() + make_interval(secs => $5), released_at = NULL, timeline = $9
  WHERE project = $1 AND key = $2 AND lock_id = $6 AND epoch = $7 AND released_at IS NULL
    AND (expires_at < now() OR $8::boolean) AND routinely_timeline() = $9 AND epoch < $11::bigint
  RETURNING ${LEASE_COLUMNS}`;

// Ours while the row still carries our lock id and epoch: whoever takes a lease over changes
// both in one conditional statement, so a heartbeat that finds them is not beside a new holder.
// Its expiry is not asked: the holder times its lease on its own clock, and an expires_at that a
// database writer set into the past is no reason to stop a live holder's work (SPEC §4.4) — the
// beat writes it anew.
const LEASE_HEARTBEAT = `UPDATE routinely_leases SET heartbeat_at = now(), expires_at = now() + make_interval(secs => $5), owner = $6
  WHERE project = $1 AND key = $2 AND lock_id = $3 AND epoch = $4 AND released_at IS NULL
    AND timeline = routinely_timeline()
  RETURNING extract(epoch from heartbeat_at)::float8 AS heartbeat_at, extract(epoch from expires_at)::float8 AS expires_at`;

const LEASE_RAISE = `UPDATE routinely_leases SET epoch = GREATEST(epoch, $5)
  WHERE project = $1 AND key = $2 AND lock_id = $3 AND epoch = $4 AND released_at IS NULL AND expires_at >= now()
    AND timeline = routinely_timeline()
  RETURNING epoch`;

const LEASE_RELEASE = `UPDATE routinely_leases SET released_at = now(), expires_at = now()
  WHERE project = $1 AND key = $2 AND lock_id = $3 AND epoch = $4 AND released_at IS NULL`;

const LEASE_BREAK = `UPDATE routinely_leases SET released_at = now(), expires_at = now()
  WHERE project = $1 AND key = $2 AND lock_id = $3 AND epoch = $4 AND released_at IS NULL
    AND (expires_at < now() OR $5::boolean)`;

const LEASE_KEYS = 'SELECT key FROM routinely_leases WHERE project = $1 AND left(key, length($2)) = $2 ORDER BY key';

const sqlText = (v: string): string => `'${v.replace(/'/g, "''")}'`;

export const leaseSql = {
  row: (k: LeaseKey): Statement => ({ text: LEASE_ROW, values: [k.project, k.key] }),
  acquire: (g: LeaseGrant): Statement => ({
    text: LEASE_ACQUIRE,
    values: [g.project, g.key, g.lockId, g.owner, g.ttlSecs, g.maxGeneration],
    name: 'routinely_acquire_1',
  }),
  /** `stale`: the row judged stale; `dead`: its holder is known dead (else only an expired row is
   * taken); `floor`: the first generation of `timeline` less one. */
  reclaim: (
    g: LeaseGrant & {
      stale: { lockId: string; epoch: number | string };
      dead: boolean;
      timeline: number;
      floor: number;
    },
  ): Statement => ({
    text: LEASE_RECLAIM,
    values: [
      g.project,
      g.key,
      g.lockId,
      g.owner,
      g.ttlSecs,
      g.stale.lockId,
      g.stale.epoch,
      g.dead,
      g.timeline,
      g.floor,
      g.maxGeneration,
    ],
  }),
  heartbeat: (h: LeaseHold & { ttlSecs: number; owner: string }): Statement => ({
    text: LEASE_HEARTBEAT,
    values: [h.project, h.key, h.lockId, h.epoch, h.ttlSecs, h.owner],
    name: 'routinely_heartbeat_1',
  }),
  raiseGeneration: (h: LeaseHold & { atLeast: number }): Statement => ({
    text: LEASE_RAISE,
    values: [h.project, h.key, h.lockId, h.epoch, h.atLeast],
  }),
  release: (h: LeaseHold): Statement => ({
    text: LEASE_RELEASE,
    values: [h.project, h.key, h.lockId, h.epoch],
    name: 'routinely_release_1',
  }),
  /** The holder's lease freed by someone else (lock break), only while it is stale: expired, or
   * its holder known dead (`dead`). */
  breakStale: (h: LeaseHold & { dead: boolean }): Statement => ({
    text: LEASE_BREAK,
    values: [h.project, h.key, h.lockId, h.epoch, h.dead],
  }),
  keys: (project: string, prefix: string): Statement => ({ text: LEASE_KEYS, values: [project, prefix] }),
  /** The statement a person runs to remove a row routinely will not act on (said in messages). */
  deleteAdvice: (k: LeaseKey): string =>
    `DELETE FROM routinely_leases WHERE project = ${sqlText(k.project)} AND key = ${sqlText(k.key)}`,
};

// ---- routinely_registry, routinely_runs, routinely_run_events (exec-store.ts) ----

/** The exec lock's lease that fences a write. */
export interface Fence {
  lockId: string;
  generation: number;
}

/** The lease check that fences a write: the row must still carry the writer's lock_id and epoch
 * (whoever takes a lease over changes both; its expiry is not asked: a holder times its own lease,
 * and a row's times never stop a live holder, SPEC §4.4), and have been granted on the server's
 * current timeline (after a failover, a holder's writes are refused even where its row was
 * replicated). FOR SHARE makes a concurrent reclaim wait for the writing transaction, so the
 * check and the write are one atomic step. Parameters: $1 project, $3 lock id, $4 epoch. */
const FENCE = `fence AS (
    SELECT 1 FROM routinely_leases
     WHERE project = $1 AND key = 'exec-run' AND lock_id = $3 AND epoch = $4
       AND released_at IS NULL AND timeline = routinely_timeline()
       FOR SHARE
  )`;

const REGISTRY_SAVE = `WITH ${FENCE}
  INSERT INTO routinely_registry (project, registry, updated_at)
  SELECT $1, $2::json, now() FROM fence
  ON CONFLICT (project) DO UPDATE SET registry = excluded.registry, updated_at = now()`;

const RUN_REMOVE = `WITH ${FENCE},
  gone AS (DELETE FROM routinely_runs WHERE project = $1 AND run_id = $2 AND EXISTS (SELECT 1 FROM fence) RETURNING run_id),
  events AS (DELETE FROM routinely_run_events WHERE project = $1 AND run_id IN (SELECT run_id FROM gone))
  SELECT EXISTS (SELECT 1 FROM fence) AS ours`;

const EVENT_APPEND = `WITH ${FENCE}
  INSERT INTO routinely_run_events (project, run_id, gen, event) SELECT $1, $2, $4, $5::json FROM fence`;

/** The last event a snapshot includes. */
const EVENTS_SEQ = '(SELECT coalesce(max(seq), 0) FROM routinely_run_events WHERE project = $1 AND run_id = $2)';

const SNAPSHOT_INSERT = `WITH ${FENCE}
  INSERT INTO routinely_runs (project, run_id, snapshot, generation, events_seq)
  SELECT $1, $2, $5::json, $4, ${EVENTS_SEQ} FROM fence`;

// never replaces a snapshot written under a newer generation
const SNAPSHOT_UPDATE = `WITH ${FENCE}
  UPDATE routinely_runs SET snapshot = $5::json, generation = $4, events_seq = ${EVENTS_SEQ}, updated_at = now()
   WHERE project = $1 AND run_id = $2 AND generation <= $4 AND EXISTS (SELECT 1 FROM fence)`;

/** A write fenced by the exec lock's lease (FENCE): $1 project, $2 the run or the document,
 * $3 lock id, $4 generation, and $5 the document when $2 names the run. */
function fenced(text: string, project: string, second: string, f: Fence, doc?: string): Statement {
  const values = [project, second, f.lockId, f.generation];
  return { text, values: doc === undefined ? values : [...values, doc] };
}

export const execSql = {
  registry: (project: string): Statement => ({
    text: 'SELECT registry FROM routinely_registry WHERE project = $1',
    values: [project],
  }),
  /** A registry that does not check out, kept under another project name for inspection. */
  moveRegistry: (project: string, aside: string): Statement => ({
    text: 'UPDATE routinely_registry SET project = $2 WHERE project = $1',
    values: [project, aside],
  }),
  saveRegistry: (project: string, doc: string, f: Fence) => fenced(REGISTRY_SAVE, project, doc, f),
  snapshot: (project: string, runId: string): Statement => ({
    text: 'SELECT snapshot, events_seq FROM routinely_runs WHERE project = $1 AND run_id = $2',
    values: [project, runId],
  }),
  eventsAfter: (project: string, runId: string, seq: string): Statement => ({
    text: 'SELECT event FROM routinely_run_events WHERE project = $1 AND run_id = $2 AND seq > $3 ORDER BY seq',
    values: [project, runId, seq],
  }),
  /** Newest by the database's order, not by the ids (they carry the creating host's clock). */
  newestRuns: (project: string, limit: number): Statement => ({
    text: 'SELECT run_id FROM routinely_runs WHERE project = $1 ORDER BY created_seq DESC LIMIT $2',
    values: [project, limit],
  }),
  removeRun: (project: string, runId: string, f: Fence) => fenced(RUN_REMOVE, project, runId, f),
  appendEvent: (project: string, runId: string, f: Fence, doc: string) => fenced(EVENT_APPEND, project, runId, f, doc),
  /** The final record of a holder that lost its lease, under its old generation `gen`. */
  appendEventUnfenced: (project: string, runId: string, gen: number, doc: string): Statement => ({
    text: 'INSERT INTO routinely_run_events (project, run_id, gen, event) VALUES ($1, $2, $3, $4::json)',
    values: [project, runId, gen, doc],
  }),
  insertSnapshot: (project: string, runId: string, f: Fence, doc: string) =>
    fenced(SNAPSHOT_INSERT, project, runId, f, doc),
  updateSnapshot: (project: string, runId: string, f: Fence, doc: string) =>
    fenced(SNAPSHOT_UPDATE, project, runId, f, doc),
};

// ---- routinely_routine_state, routinely_history, routinely_ticks (routine-store.ts) ----

/** The largest routine state row read (its text): ours are a few KiB. */
export const RECORD_ROW_MAX = 1024 * 1024;
/** Whether a routine state row's record is a JSON object of at most RECORD_ROW_MAX. */
const RECORD_OK = `json_typeof(record) = 'object' AND octet_length(record::text) <= ${RECORD_ROW_MAX}`;
/** A routine state row's record, or NULL when it is no JSON object or larger than RECORD_ROW_MAX. */
const RECORD = `CASE WHEN ${RECORD_OK} THEN record END AS record`;

/** The largest history row read (its text): ours are a few hundred bytes. */
export const ENTRY_ROW_MAX = 64 * 1024;
/** A history row's entry, or NULL when it is no JSON object or is larger than ENTRY_ROW_MAX:
 * its bytes never leave the database. */
const ENTRY = `CASE WHEN json_typeof(entry) = 'object' AND octet_length(entry::text) <= ${ENTRY_ROW_MAX} THEN entry END AS entry`;
/** Whether a history row may be a fire's record (checkFireEntry says the rest). */
const FIRE_ROW_OK = `(json_typeof(entry) = 'object' AND octet_length(entry::text) <= ${ENTRY_ROW_MAX}
  AND entry->>'scheduled_at' IS NOT NULL AND entry->>'started_at' IS NOT NULL AND entry->>'finished_at' IS NOT NULL
  AND coalesce(entry->>'result' IN ('success', 'failure', 'skipped'), false))`;

// bounded: keep the newest `$3` entries of the routine
const HISTORY_TRIM = `DELETE FROM routinely_history WHERE project = $1 AND routine = $2 AND seq <=
  (SELECT seq FROM routinely_history WHERE project = $1 AND routine = $2 ORDER BY seq DESC OFFSET $3 LIMIT 1)`;

// by start: a record that waited in the spool through an outage takes its place in time; never
// more rows than are kept, even when a writer with a larger limit left more
const HISTORY = `SELECT ${ENTRY} FROM (SELECT entry, seq FROM routinely_history WHERE project = $1 AND routine = $2 ORDER BY seq DESC LIMIT $3) newest
  ORDER BY entry->>'started_at', seq`;

// Each routine's newest rows as HISTORY keeps them, then the newest that match, by the fire's
// times (ISO strings compare as times), ties in the order the routines were asked for, then as
// written; LIMIT NULL is no limit. A row that is not a fire's record (or too large to be one) is
// read only as far as to say it was skipped (SPEC §12): checked before the LIMIT, so that bad rows
// take no place of good ones; their routines come with every row.
const RECENT_FIRES = `SELECT routine, entry, bad FROM (
   SELECT routine, entry, seq, ok, array_agg(routine) FILTER (WHERE NOT ok) OVER () AS bad FROM (
     SELECT routine, entry, seq, ${FIRE_ROW_OK} AS ok, row_number() OVER (PARTITION BY routine ORDER BY seq DESC) AS n
       FROM routinely_history WHERE project = $1 AND routine = ANY($2::text[])) numbered
    WHERE n <= $3) kept
  WHERE ok
    AND ($4::text IS NULL OR entry->>'scheduled_at' >= $4)
    AND ($5::text IS NULL OR entry->>'scheduled_at' < $5)
    AND ($6::text IS NULL OR entry->>'result' = $6)
  ORDER BY entry->>'scheduled_at' DESC NULLS LAST, entry->>'started_at' DESC, array_position($2::text[], routine) DESC, seq DESC
  LIMIT $7`;

/** What recentFires asks: the kept history of `routines`, fires scheduled in [since, until)
 * (ISO times, null for open), of one result (null for any), at most `limit` (null for all). */
export interface FireFilter {
  routines: readonly string[];
  keep: number;
  since: string | null;
  until: string | null;
  result: string | null;
  limit: number | null;
}

/** Claims forgotten by one prune at most: 1 % of claims prune, so 1 000 a prune keeps up with
 * any rate of claims while no prune holds the connection long. */
export const PRUNE_BATCH = 1000;

export const routineSql = {
  /** The routine's row, made if missing, so that it can be locked. */
  ensureRow: (project: string, routine: string): Statement => ({
    text: `INSERT INTO routinely_routine_state (project, routine, record) VALUES ($1, $2, '{}'::json) ON CONFLICT DO NOTHING`,
    values: [project, routine],
  }),
  lockRow: (project: string, routine: string): Statement => ({
    text: 'SELECT 1 FROM routinely_routine_state WHERE project = $1 AND routine = $2 FOR UPDATE',
    values: [project, routine],
  }),
  /** The routine's record, its row locked until the transaction ends (no row: none made). */
  lockedRecord: (project: string, routine: string): Statement => ({
    text: `SELECT ${RECORD} FROM routinely_routine_state WHERE project = $1 AND routine = $2 FOR UPDATE`,
    values: [project, routine],
    name: 'routinely_locked_record_5',
  }),
  /** lockedRecord, and the claim of the tick at `scheduledAt` settled for `claimer` in the same
   * round trip (`settled`: 1 when the claim is that claimer's). */
  settleAndLock: (project: string, routine: string, scheduledAt: string, claimer: string): Statement => ({
    text: `WITH s AS (UPDATE routinely_ticks SET settled = true WHERE project = $1 AND routine = $2 AND scheduled_at = $3 AND claimer = $4 RETURNING 1)
      SELECT (SELECT count(*) FROM s)::int AS settled, ${RECORD} FROM routinely_routine_state WHERE project = $1 AND routine = $2 FOR UPDATE`,
    values: [project, routine, scheduledAt, claimer],
    name: 'routinely_settle_lock_5',
  }),
  /** The record written and a history line added, one round trip; answers the line's seq. */
  writeRecordAndHistory: (project: string, routine: string, doc: string, entry: string): Statement => ({
    text: `WITH w AS (UPDATE routinely_routine_state SET record = $3::json WHERE project = $1 AND routine = $2)
      INSERT INTO routinely_history (project, routine, entry) VALUES ($1, $2, $4::json) RETURNING seq`,
    values: [project, routine, doc, entry],
    name: 'routinely_write_record_history_5',
  }),
  writeRecord: (project: string, routine: string, doc: string): Statement => ({
    text: 'UPDATE routinely_routine_state SET record = $3::json WHERE project = $1 AND routine = $2',
    values: [project, routine, doc],
  }),
  record: (project: string, routine: string): Statement => ({
    text: `SELECT ${RECORD} FROM routinely_routine_state WHERE project = $1 AND routine = $2`,
    values: [project, routine],
  }),
  /** Every routine's record, and whether its row is one (`readable`). */
  records: (project: string): Statement => ({
    text: `SELECT routine, ${RECORD}, (${RECORD_OK}) AS readable FROM routinely_routine_state WHERE project = $1`,
    values: [project],
  }),
  /** Whether the routine's history holds a record whose `field` (key, closes, scheduled_at) is `value`. */
  /** The result and reason of the history entry that closes open fire `closes`, if any: a
   * record sent again told from another's interrupted record of the same fire. */
  historyClosing: (project: string, routine: string, closes: string): Statement => ({
    text: `SELECT entry->>'result' AS result, entry->>'reason' AS reason
      FROM routinely_history WHERE project = $1 AND routine = $2 AND entry->>'closes' = $3 LIMIT 1`,
    values: [project, routine, closes],
  }),
  historyHas: (
    project: string,
    routine: string,
    field: 'key' | 'closes' | 'scheduled_at',
    value: string,
  ): Statement => ({
    text: `SELECT 1 FROM routinely_history WHERE project = $1 AND routine = $2 AND entry->>'${field}' = $3 LIMIT 1`,
    values: [project, routine, value],
  }),
  addHistory: (project: string, routine: string, doc: string): Statement => ({
    text: 'INSERT INTO routinely_history (project, routine, entry) VALUES ($1, $2, $3::json)',
    values: [project, routine, doc],
  }),
  trimHistory: (project: string, routine: string, keep: number): Statement => ({
    text: HISTORY_TRIM,
    values: [project, routine, keep],
  }),
  history: (project: string, routine: string, keep: number): Statement => ({
    text: HISTORY,
    values: [project, routine, keep],
  }),
  recentFires: (project: string, f: FireFilter): Statement => ({
    text: RECENT_FIRES,
    values: [project, f.routines, f.keep, f.since, f.until, f.result, f.limit],
  }),
  /** A tick taken for `claimer`, unsettled; also yes when the claim is this claimer's already
   * and still unsettled (sent again after its answer was lost: it committed after all). */
  claimTick: (project: string, routine: string, scheduledAt: string, host: string, claimer: string): Statement => ({
    text: `INSERT INTO routinely_ticks AS t (project, routine, scheduled_at, host, claimer, settled) VALUES ($1, $2, $3, $4, $5, false)
      ON CONFLICT (project, routine, scheduled_at) DO UPDATE SET claimed_at = t.claimed_at
      WHERE t.claimer = excluded.claimer AND NOT t.settled RETURNING 1`,
    values: [project, routine, scheduledAt, host, claimer],
    name: 'routinely_claim_5',
  }),
  /** claimTick for several ticks in one round trip: answers the ticks taken. `again` (claims
   * sent again after an answer was lost): also those this claimer holds already, unsettled — a
   * first claim of a tick this claimer holds is a second way to the same tick, and answered no. */
  claimTicks: (
    project: string,
    routines: readonly string[],
    scheduledAts: readonly string[],
    host: string,
    claimer: string,
    again: boolean,
  ): Statement => ({
    text: `INSERT INTO routinely_ticks AS t (project, routine, scheduled_at, host, claimer, settled)
      SELECT $1, u.r, u.a, $4, $5, false FROM unnest($2::text[], $3::timestamptz[]) AS u(r, a)
      ON CONFLICT (project, routine, scheduled_at) DO ${
        again
          ? `UPDATE SET claimed_at = t.claimed_at
      WHERE t.claimer = excluded.claimer AND NOT t.settled`
          : 'NOTHING'
      } RETURNING routine, scheduled_at`,
    values: [project, routines, scheduledAts, host, claimer],
    name: again ? 'routinely_claim_again_5' : 'routinely_claim_many_5',
  }),
  /** The tick's fire opened or its record is written: settled, if the claim is still
   * `claimer`'s (one row: a take-over of the same claim is either before, and this finds none,
   * or after, and finds it settled). */
  settleClaim: (project: string, routine: string, scheduledAt: string, claimer: string): Statement => ({
    text: 'UPDATE routinely_ticks SET settled = true WHERE project = $1 AND routine = $2 AND scheduled_at = $3 AND claimer = $4 RETURNING 1',
    values: [project, routine, scheduledAt, claimer],
    name: 'routinely_settle_5',
  }),
  /** Who holds the claim of a tick now (none: no row). */
  claimerOf: (project: string, routine: string, scheduledAt: string): Statement => ({
    text: 'SELECT claimer FROM routinely_ticks WHERE project = $1 AND routine = $2 AND scheduled_at = $3',
    values: [project, routine, scheduledAt],
  }),
  /** Unsettled claims, oldest first, of claimers whose scheduler lease is not held (released,
   * or expired by the database clock; a lease taken again after a stall names the claimer of
   * the one it replaces in its owner's `claimer`), and this claimer's own (its caller knows which of those
   * it still works on). Through routinely_ticks_unsettled: costs what is unsettled. */
  orphanClaims: (project: string, claimer: string, limit: number): Statement => ({
    text: `SELECT t.routine, t.scheduled_at, t.host, t.claimer FROM routinely_ticks t
      WHERE t.project = $1 AND NOT t.settled AND t.scheduled_at <= now()
        AND (t.claimer = $2 OR (
          NOT EXISTS (SELECT 1 FROM routinely_leases l WHERE l.project = t.project AND l.lock_id = t.claimer
            AND l.released_at IS NULL AND l.expires_at > now())
          -- two tests, not one with OR: each stays a hashed subplan, read once a sweep (with OR,
          -- the leases were scanned and their owners parsed once for every unsettled claim)
          AND NOT EXISTS (SELECT 1 FROM routinely_leases l WHERE l.project = t.project AND l.owner->>'claimer' = t.claimer
            AND l.released_at IS NULL AND l.expires_at > now())))
      ORDER BY t.scheduled_at LIMIT $3`,
    values: [project, claimer, limit],
  }),
  /** The ids of the open fire markers that name a claimer, other than `claimer`, whose scheduler
   * lease is not held (the two tests of orphanClaims): a scheduler that died with a fire open, on
   * any host. A routine's record holds a few markers at most; most hold none. */
  openFiresOfGoneClaimers: (project: string, claimer: string): Statement => ({
    text: `SELECT f.value->>'id' AS id FROM routinely_routine_state s
      CROSS JOIN LATERAL json_array_elements(CASE WHEN json_typeof(s.record->'open_fires') = 'array'
        THEN s.record->'open_fires' ELSE '[]'::json END) f
      CROSS JOIN LATERAL (SELECT f.value->'owner'->>'claimer' AS claimer) c
      WHERE s.project = $1 AND c.claimer IS NOT NULL AND c.claimer <> $2
        -- (json is kept as text: a record naming no claimer is passed over unparsed)
        AND strpos(s.record::text, '"claimer"') > 0
        AND NOT EXISTS (SELECT 1 FROM routinely_leases l WHERE l.project = s.project AND l.lock_id = c.claimer
          AND l.released_at IS NULL AND l.expires_at > now())
        AND NOT EXISTS (SELECT 1 FROM routinely_leases l WHERE l.project = s.project AND l.owner->>'claimer' = c.claimer
          AND l.released_at IS NULL AND l.expires_at > now())`,
    values: [project, claimer],
  }),
  /** The claim moved from `from` to `to`, only while it is still `from`'s and unsettled. */
  takeOverClaim: (
    project: string,
    routine: string,
    scheduledAt: string,
    from: string,
    to: { host: string; claimer: string },
  ): Statement => ({
    text: `UPDATE routinely_ticks SET claimer = $5, host = $6, claimed_at = now()
      WHERE project = $1 AND routine = $2 AND scheduled_at = $3 AND claimer = $4 AND NOT settled RETURNING 1`,
    values: [project, routine, scheduledAt, from, to.claimer, to.host],
  }),
  /** At most `batch` claims older than a day, found through routinely_ticks_age: a prune costs
   * what it removes. */
  forgetOldTicks: (project: string, batch = PRUNE_BATCH): Statement => ({
    text: `DELETE FROM routinely_ticks WHERE ctid IN (SELECT ctid FROM routinely_ticks
      WHERE project = $1 AND scheduled_at < now() - interval '1 day' ORDER BY scheduled_at LIMIT $2)`,
    values: [project, batch],
  }),
  releaseClaim: (project: string, routine: string, scheduledAt: string, host: string): Statement => ({
    text: 'DELETE FROM routinely_ticks WHERE project = $1 AND routine = $2 AND scheduled_at = $3 AND host = $4',
    values: [project, routine, scheduledAt, host],
  }),
  writePhases: (project: string, host: string, board: string): Statement => ({
    text: `INSERT INTO routinely_phases (project, host, board) VALUES ($1, $2, $3::json)
      ON CONFLICT (project, host) DO UPDATE SET board = excluded.board, updated_at = now()`,
    values: [project, host, board],
  }),
  /** The boards of the hosts whose scheduler lease is held now (by the database clock). */
  readPhases: (project: string): Statement => ({
    text: `SELECT p.board FROM routinely_phases p JOIN routinely_leases l
      ON l.project = p.project AND l.key = 'scheduler@' || p.host
      WHERE p.project = $1 AND l.released_at IS NULL AND l.expires_at > now()`,
    values: [project],
  }),
};

/** The waiting line of each lock (lock/line.ts), timed by the database clock. */
export const lineSql = {
  join: (project: string, lock: string, ticket: string, owner: string): Statement => ({
    text: `INSERT INTO routinely_line (project, lock, ticket, owner) VALUES ($1, $2, $3, $4::json)
      RETURNING extract(epoch from arrived_at)::float8 * 1000 AS arrived`,
    values: [project, lock, ticket, owner],
  }),
  beat: (project: string, lock: string, ticket: string): Statement => ({
    text: 'UPDATE routinely_line SET beat_at = clock_timestamp() WHERE project = $1 AND lock = $2 AND ticket = $3',
    values: [project, lock, ticket],
  }),
  leave: (project: string, lock: string, ticket: string): Statement => ({
    text: 'DELETE FROM routinely_line WHERE project = $1 AND lock = $2 AND ticket = $3',
    values: [project, lock, ticket],
  }),
  /** Every waiter of a lock, oldest first, and whether its beat is older than a TTL. */
  waiters: (project: string, lock: string, ttlSecs: number): Statement => ({
    text: `SELECT ticket, extract(epoch from arrived_at)::float8 * 1000 AS arrived, owner,
      beat_at < clock_timestamp() - make_interval(secs => $3) AS stale
      FROM routinely_line WHERE project = $1 AND lock = $2 ORDER BY arrived_at, ticket`,
    values: [project, lock, ttlSecs],
  }),
};
