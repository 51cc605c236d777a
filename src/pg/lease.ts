// The lease in PostgreSQL (SPEC §9): one row per (project, key) with holder, lock_id, epoch and
// expires_at, judged by the database clock. Acquire and reclaim are single conditional statements;
// heartbeat and release are conditional on lock_id and epoch (0 rows = lost). Who may be reclaimed
// when: docs/design.md "The lease in PostgreSQL".
// (Over 300 lines: acquire, reclaim, heartbeat, release, status, and the object holding a lease;
// their statements are in statements.ts.)

import { Backoff } from '../backoff.js';
import { systemClock, type Clock } from '../clock.js';
import { DatabaseError, DatabaseRowError } from '../errors.js';
import type { BusyPolicy, LockBackend } from '../lock/lock-backend.js';
import { randomHex } from '../fs/random-ids.js';
import { samePidSpace, selfIdentity, systemProbe, type LivenessProbe } from '../process/identity.js';
import type { AcquireResult, Lease, LockOwnerInfo, RefreshResult, ReleaseResult } from '../lock/lease.js';
import { LeaseState, lostByThisProcess } from '../lock/lease-state.js';
import { ChildJournal } from '../file-lock/children.js';
import { guardGroup, guardLock, unguardGroup, unguardLock } from '../exec/death-guard.js';
import { unlinkQuiet } from '../fs/files.js';
import type { OrphanReport } from '../file-lock/orphans.js';
import { journalPath, lockPaths, type LockPaths } from '../file-lock/paths.js';
import {
  checkLockRecord,
  isGeneration,
  isOwner,
  MAX_GENERATION,
  type LockOwner,
  type LockRecord,
} from '../lock/record.js';
import { endHolderOrphans } from '../file-lock/reclaim.js';
import { observerOf } from '../lock/observer.js';
import { acquireUnderPolicy } from '../lock/if-busy.js';
import { describeHolder, judgeLock, type Observation } from '../lock/stale.js';
import type { BreakResult, LockStatus } from '../lock/status.js';
import type { Db } from './connect.js';
import { TIMELINE_GENERATIONS } from './schema.js';
import { pgWaitLine } from './line.js';
import { leaseSql, type LeaseGrant } from './statements.js';

export interface PgLockOptions {
  db: Db;
  project: string;
  /** Local folder for the children journals of leases held on this host. */
  lockDir: string;
  ttlMs: number;
  refreshMs: number;
  clock?: Clock;
  probe?: LivenessProbe;
}

/** What the acquire statement says of the timeline gate. */
interface GateRow {
  gate_timeline: number;
  gate_first_seen: number;
  gate_now: number;
}

interface LeaseRow {
  lock_id: string;
  epoch: string;
  owner: LockOwner;
  created_at: number;
  heartbeat_at: number;
  expires_at: number;
  released: boolean;
  db_now: number;
}

/** The local files of a lease held in the database (its children journal). A key such as
 * `scheduler@<host>` is no file name, so it is made one: every character outside the lock key
 * pattern becomes `_`. Names may then coincide; the journals in them are named by lock id. */
export function localLockPaths(lockDir: string, key: string): LockPaths {
  const safe = key
    .replace(/[^A-Za-z0-9._-]/g, '_')
    .replace(/\.{2,}/g, '_')
    .replace(/^[._-]/, '_')
    .slice(0, 64);
  return lockPaths(lockDir, safe);
}

/**
 * The row, if its epoch is a generation this program can keep exact and fence with (SPEC §12: a
 * row is input). Ours are below 2^32 per failover timeline; MAX_GENERATION (10^15) is far above
 * any count and below where a JS number stops being exact, so every accepted generation is kept
 * exact end to end. A row beyond it (a database writer's) is never acted on: the key cannot be
 * taken until it is set right, and the message says how.
 */
function checkedRow(o: PgLockOptions, key: string, row: LeaseRow): LeaseRow {
  if (/^[0-9]{1,16}$/.test(String(row.epoch)) && isGeneration(Number(row.epoch))) return row;
  throw rowError(
    o,
    key,
    `has epoch ${String(row.epoch).slice(0, 40)}, outside the generations routinely writes and can fence with exactly (1 to ${MAX_GENERATION}); it was not written by routinely and is not acted on`,
  );
}

function rowError(o: PgLockOptions, key: string, what: string): DatabaseRowError {
  return new DatabaseRowError(
    `routinely_leases row (project ${o.project}, key ${key}) in database ${o.db.where} ${what}. ` +
      `Once nothing runs under it, delete the row (${leaseSql.deleteAdvice({ project: o.project, key })}), or set its epoch to the highest generation your fenced systems have seen`,
  );
}

/** The row as a lock record, only if every field is in range. */
function validRecord(key: string, r: LeaseRow): LockRecord | null {
  return checkLockRecord(toRecord(key, r));
}

/** Who holds a row whose owner is not one (a database writer's): no process on any host, so it
 * is judged by the database clock alone, and nothing is ever signalled for it. */
const UNREADABLE_OWNER: LockOwner = {
  pid: 0,
  host: '?',
  boot_id: null,
  start_time: null,
  command: 'an owner in the database row that is not one',
  children: [],
};

function toRecord(key: string, r: LeaseRow): LockRecord {
  return {
    version: 1,
    key,
    lock_id: r.lock_id,
    generation: Number(r.epoch),
    owner: isOwner(r.owner) ? r.owner : UNREADABLE_OWNER,
    created_at: r.created_at,
    heartbeat_at: r.heartbeat_at,
    expires_at: r.expires_at,
  };
}

export function pgLockBackend(o: PgLockOptions): LockBackend {
  const clock = o.clock ?? systemClock;
  const probe = o.probe ?? systemProbe();
  const ttlSecs = o.ttlMs / 1000;

  /** The timeline gate (docs/postgres.md), from what the acquire statement read: whether leases
   * may be granted on the database's current timeline yet. */
  function gateOf(g: GateRow): { timeline: number; closedWhy: string | null } {
    const timeline = Number(g.gate_timeline);
    // Timeline 1 has no timeline before it. Above 1, the server was promoted at some point:
    // leases of the old primary may still be running (their holders end them by their own
    // clocks within a TTL of their last heartbeat, which was before this timeline was seen).
    const opensAt = g.gate_first_seen + ttlSecs + 1;
    if (timeline <= 1 || g.gate_now >= opensAt) return { timeline, closedWhy: null };
    const at = new Date(g.gate_first_seen * 1000).toISOString();
    return {
      timeline,
      // read after "held by" (the waiter's line, the busy exit): nobody holds it, and why not yet
      closedWhy: `no one yet: the database failed over (timeline ${timeline}, first seen ${at}), and no lease is granted until every lease of the old primary has run out, one TTL later (${Math.ceil(opensAt - g.gate_now)}s more)`,
    };
  }

  async function current(key: string): Promise<LeaseRow | null> {
    const { rows } = await o.db.query<LeaseRow>(leaseSql.row({ project: o.project, key }));
    return rows[0] ? checkedRow(o, key, rows[0]) : null;
  }

  /** Ends the children of an owner on this host before its lease is taken (SPEC §4.4). A row
   * that does not validate as a lock record (a path-shaped lock_id, pid 0 or 1 among the
   * children) is never acted on (SPEC §12). */
  async function endOrphans(key: string, row: LeaseRow): Promise<OrphanReport> {
    const rec = validRecord(key, row);
    if (!rec || !samePidSpace(rec.owner, probe)) return { ended: [], killed: [] };
    const paths = localLockPaths(o.lockDir, key);
    // The groups named in the row are not trusted (anyone who can write the database could name
    // any process): only our own children journal and the processes carrying the holder's
    // ROUTINELY_LOCK_ID are ended.
    const report = await endHolderOrphans({ ...rec, owner: { ...rec.owner, children: [] } }, { paths, clock, probe });
    unlinkQuiet(journalPath(paths, rec.lock_id));
    return report;
  }

  /** A row's verdict by SPEC §4.4, on the database clock; a live holder on this host is judged only
   * by `observation` (a waiter's own clock), never by the times in its row. */
  function staleness(key: string, row: LeaseRow, observation?: Observation) {
    // a lease this process lost (a database outage) is known lost by the process it names
    if (lostByThisProcess(row.lock_id))
      return { stale: true as const, reason: 'UNCHANGED' as const, why: 'a lease this process held and lost' };
    return judgeLock(toRecord(key, row), row.db_now * 1000, probe, observation);
  }

  type Attempt = { ok: true; lease: PgLease } | { ok: false; holder: LockRecord | null; why: string };

  /**
   * A grant that came back past this process's give-up point, timed from before it was sent (the
   * process stopped between reading its clock and sending, or a link that stalled): no work ran
   * under it yet, but a waiter may have judged the row stale meanwhile and be about to reclaim it
   * by its lock id and epoch, which a heartbeat does not change. So it is taken again as a
   * reclaim of our own row (a new lock id and generation, compare-and-set on the old pair): a
   * reclaim decided on the old pair then fails, and one that landed first makes ours fail (busy,
   * tried again). A link that stalls every time gives the row back after three tries.
   */
  async function retaken(
    key: string,
    lease: PgLease,
    grant: LeaseGrant,
    timeline: number,
    floor: number,
  ): Promise<PgLease | null> {
    for (let tries = 0; lease.lapsed(); tries++) {
      if (tries === 3) {
        await lease.release().catch(() => {});
        return null;
      }
      const started = clock.monotonic();
      const { rows } = await o.db.query<LeaseRow>(
        leaseSql.reclaim({
          ...grant,
          lockId: randomHex(16),
          stale: { lockId: lease.lockId, epoch: lease.generation },
          dead: true,
          timeline,
          floor,
        }),
      );
      if (!rows[0]) return null;
      const next = new PgLease(o, key, checkedRow(o, key, rows[0]), clock, probe, started);
      next.tookOver = lease.tookOver;
      next.tookOverFrom = lease.tookOverFrom;
      lease = next;
    }
    return lease;
  }

  async function attempt(
    key: string,
    owner: LockOwnerInfo,
    observe?: (signature: string) => Observation,
  ): Promise<Attempt> {
    const lockId = randomHex(16);
    // this process's identity, whatever `owner` says (file-lock/acquire.ts)
    const ownerRec: LockOwner = { ...owner, ...selfIdentity(probe), children: [] };
    for (let loop = 0; loop < 8; loop++) {
      const started = clock.monotonic();
      // Fast path, one round trip: the timeline gate, and a free key taken when it is open.
      const grant = {
        project: o.project,
        key,
        lockId,
        owner: JSON.stringify(ownerRec),
        ttlSecs,
        maxGeneration: MAX_GENERATION,
      };
      const { rows } = await o.db.query<GateRow & Partial<LeaseRow>>(leaseSql.acquire(grant));
      const answer = rows[0]!;
      const gate = gateOf(answer);
      if (gate.closedWhy) return { ok: false, holder: null, why: gate.closedWhy };
      const floor = (gate.timeline - 1) * TIMELINE_GENERATIONS;
      if (answer.lock_id != null) {
        const lease = await retaken(
          key,
          new PgLease(o, key, checkedRow(o, key, answer as LeaseRow), clock, probe, started),
          grant,
          gate.timeline,
          floor,
        );
        if (lease) return { ok: true, lease };
        continue;
      }
      const row = await current(key);
      // the statements take no row whose epoch + 1 would pass MAX_GENERATION (nor overflow)
      if (row && Number(row.epoch) >= MAX_GENERATION)
        throw rowError(
          o,
          key,
          `has epoch ${row.epoch}, the last generation routinely hands out exactly; the key cannot be taken again`,
        );
      if (!row || row.released) continue;
      const verdict = staleness(key, row, observe?.(`${row.lock_id}|${row.epoch}|${row.heartbeat_at}`));
      if (!verdict.stale)
        return { ok: false, holder: toRecord(key, row), why: describeHolder(toRecord(key, row), row.db_now * 1000) };
      // Stale: end what the old holder started here, then take over exactly that lease (a
      // compare-and-set on lock_id and epoch: of several reclaimers, one wins).
      await endOrphans(key, row);
      const dead = verdict.reason !== 'EXPIRED';
      const reclaimStarted = clock.monotonic();
      const swapped = await o.db.query<LeaseRow>(
        leaseSql.reclaim({
          ...grant,
          stale: { lockId: row.lock_id, epoch: row.epoch },
          dead,
          timeline: gate.timeline,
          floor,
        }),
      );
      if (swapped.rows[0]) {
        const lease = new PgLease(o, key, checkedRow(o, key, swapped.rows[0]), clock, probe, reclaimStarted);
        lease.tookOver = true;
        lease.tookOverFrom = validRecord(key, row);
        const settled = await retaken(key, lease, grant, gate.timeline, floor);
        if (settled) return { ok: true, lease: settled };
      }
    }
    const row = await current(key);
    return { ok: false, holder: row ? toRecord(key, row) : null, why: 'the lock changed hands too often to take it' };
  }

  return {
    async acquire(key, owner, policy: BusyPolicy = {}): Promise<AcquireResult> {
      const pause = new Backoff(5, 100, clock);
      // every attempt of this process times the holder's row on its own clock (lock/observer.ts)
      const observe = observerOf(`pg ${o.db.where} ${o.project} ${key}`, ttlSecs * 1000, clock);
      return acquireUnderPolicy(policy, {
        clock,
        ttlMs: ttlSecs * 1000,
        attempt: () => attempt(key, owner, observe),
        pause: (signal, leftMs) => pause.wait(signal, leftMs),
        // a waiter outlives a database outage, not a row that cannot be used (it stays so until
        // someone sets it right)
        outlives: (err) => err instanceof DatabaseError && !(err instanceof DatabaseRowError),
      });
    },

    async status(key): Promise<LockStatus> {
      const base = { key, path: `database ${o.db.where}, project ${o.project}` };
      let row: LeaseRow | null;
      try {
        row = await current(key);
      } catch (err) {
        // a row not acted on is shown as what it is, so one bad key does not break every view
        if (!(err instanceof DatabaseRowError)) throw err;
        return {
          ...base,
          state: 'stale',
          record: null,
          generation: 0,
          holder: 'a database row routinely does not act on',
          heartbeat_age_s: null,
          expires_in_s: null,
          stale_reason: 'UNREADABLE',
          why: err.message,
        };
      }
      if (!row || row.released) {
        return {
          ...base,
          state: 'free',
          record: null,
          generation: Number(row?.epoch ?? 0),
          holder: null,
          heartbeat_age_s: null,
          expires_in_s: null,
          stale_reason: null,
          why: null,
        };
      }
      const rec = toRecord(key, row);
      const v = staleness(key, row);
      const round1 = (n: number): number => Math.round(n * 10) / 10;
      return {
        ...base,
        state: v.stale ? 'stale' : 'held',
        record: rec,
        generation: rec.generation,
        holder: describeHolder(rec, row.db_now * 1000),
        heartbeat_age_s: round1(row.db_now - row.heartbeat_at),
        expires_in_s: round1(row.expires_at - row.db_now),
        stale_reason: v.stale ? v.reason : null,
        why: v.stale
          ? `${v.why} (database clock)`
          : v.ownerCheck === 'alive'
            ? `owner pid ${rec.owner.pid} is alive and its heartbeat is fresh`
            : 'heartbeat is fresh by the database clock',
      };
    },

    async keys(prefix): Promise<string[]> {
      const { rows } = await o.db.query<{ key: string }>(leaseSql.keys(o.project, prefix));
      return rows.map((r) => r.key);
    },

    line: pgWaitLine({ db: o.db, project: o.project, ttlMs: o.ttlMs, refreshMs: o.refreshMs, probe }),

    async breakStale(key): Promise<BreakResult> {
      const status = await this.status(key);
      const row = await current(key);
      if (!row || row.released) return { broken: false, reason: 'FREE', why: 'no lock to break', status };
      const v = staleness(key, row);
      if (!v.stale) return { broken: false, reason: 'NOT_STALE', why: `${status.holder}: ${status.why}`, status };
      const orphans = await endOrphans(key, row);
      const r = await o.db.query(
        leaseSql.breakStale({
          project: o.project,
          key,
          lockId: row.lock_id,
          epoch: row.epoch,
          dead: v.reason !== 'EXPIRED',
        }),
      );
      if (r.rowCount === 0)
        return { broken: false, reason: 'CHANGED', why: 'the lock changed while we looked; run again', status };
      return {
        broken: true,
        why: v.why,
        staleFile: `row (${o.project}, ${key}) released at epoch ${row.epoch}`,
        orphans,
      };
    },
  };
}

export class PgLease extends LeaseState implements Lease {
  tookOver = false;
  tookOverFrom: LockRecord | null = null;
  private beating: Promise<void> | null = null;
  private journal: ChildJournal | undefined;
  private again = false;
  /** Why the last heartbeat failed (the database, in its words), until one goes through. */
  private lastBeatError: string | null = null;

  /** Run out: said with what the heartbeats met, whichever noticed first (a heartbeat, or the
   * deadline while one hangs). */
  protected override expiredBy(): string | null {
    const why = super.expiredBy();
    return why && this.lastBeatError ? `${why}; last error: ${this.lastBeatError}` : why;
  }

  constructor(
    private readonly o: PgLockOptions,
    key: string,
    row: LeaseRow,
    clock: Clock,
    private readonly probe: LivenessProbe,
    confirmedAt: number,
  ) {
    super(toRecord(key, row), clock, o.ttlMs, confirmedAt);
  }

  /** This lease's row, as its statements fence on it. */
  private hold() {
    return { project: this.o.project, key: this.key, lockId: this.rec.lock_id, epoch: this.rec.generation };
  }

  startHeartbeat(): void {
    // paced: on a slow link the first heartbeat is due a refresh after the acquire was *sent*,
    // not after it returned (issue: a 1–3 s link with TTL 10 / refresh 3 lost its lease)
    this.startTimers(() => this.beat(), this.o.refreshMs, true);
  }

  /** Past the point where this process gives the lease up, by its own clock (which times a
   * lease from before its request was sent). */
  lapsed(): boolean {
    return this.expiredBy() !== null;
  }

  /** One heartbeat statement: true when the row was still ours and now runs from when it was
   * sent; false when it is not ours any more. */
  private async renew(): Promise<boolean> {
    const sent = this.clock.monotonic();
    // ours while the row carries our lock id and epoch (its expiry is not asked: statements.ts)
    const { rows } = await this.o.db.leaseQuery<{ heartbeat_at: number; expires_at: number }>(
      leaseSql.heartbeat({ ...this.hold(), ttlSecs: this.o.ttlMs / 1000, owner: JSON.stringify(this.rec.owner) }),
    );
    const r = rows[0];
    if (!r) return false;
    this.rec = { ...this.rec, heartbeat_at: r.heartbeat_at, expires_at: r.expires_at };
    this.confirmed(sent);
    return true;
  }

  /** One heartbeat; conditional on lock_id and epoch and judged by the database clock. A
   * database that cannot be reached is retried until our own clock says the lease ran out. */
  private beat(): Promise<void> {
    if (this.beating) {
      this.again = true;
      const expired = this.expiredBy();
      if (expired) this.markLost(expired);
      return this.beating;
    }
    this.beating = (async () => {
      do {
        this.again = false;
        if (this.lostInfo || this.released) return;
        const expired = this.expiredBy();
        if (expired) {
          this.markLost(expired);
          return;
        }
        try {
          const renewed = await this.renew();
          this.lastBeatError = null;
          if (!renewed) {
            this.markLost(
              'the lease row is no longer ours (taken over, released, or granted before the database failed over)',
              true,
            );
            return;
          }
        } catch (err) {
          this.lastBeatError = (err as Error).message;
          const expired = this.expiredBy();
          if (expired) this.markLost(expired);
          return;
        }
      } while (this.again);
    })().finally(() => {
      this.beating = null;
    });
    return this.beating;
  }

  refresh(): RefreshResult {
    const check = this.verify();
    if (check.ok) void this.beat();
    return check;
  }

  /** No I/O: the database fences each write itself (same statement); this says whether we may
   * still believe we hold the lease. */
  verify(): RefreshResult {
    if (this.lostInfo) return { ok: false, lost: this.lostInfo };
    if (this.released) return { ok: false, lost: { code: 'LOCK_LOST', why: 'the lease was released', graceMs: 0 } };
    const expired = this.expiredBy();
    if (expired) return { ok: false, lost: this.markLost(expired) };
    return { ok: true };
  }

  confirm(): boolean {
    return this.verify().ok;
  }

  beforeSpawn(): void {
    // Another host that takes the lease over cannot end our work: a guard here does if we die
    guardLock(this.rec.lock_id);
  }

  trackChild(pid: number): void {
    guardGroup(pid);
    // At once in the local journal (the database update below is asynchronous)
    this.journal ??= new ChildJournal(localLockPaths(this.o.lockDir, this.key), this.rec.lock_id, this.probe);
    this.withChild(this.journal.add(pid));
    void this.beat();
  }

  override untrackChild(pid: number): void {
    super.untrackChild(pid);
    unguardGroup(pid);
  }

  async raiseGeneration(atLeast: number): Promise<void> {
    if (atLeast <= this.rec.generation || !isGeneration(atLeast) || atLeast >= MAX_GENERATION || !this.verify().ok)
      return;
    const { rows } = await this.o.db.leaseQuery<{ epoch: string }>(
      leaseSql.raiseGeneration({ ...this.hold(), atLeast }),
    );
    if (rows[0] && isGeneration(Number(rows[0].epoch))) this.rec = { ...this.rec, generation: Number(rows[0].epoch) };
  }

  annotate(fields: Partial<LockOwnerInfo>): void {
    this.withOwner(fields);
    void this.beat();
  }

  async release(): Promise<ReleaseResult> {
    unguardLock(this.rec.lock_id);
    this.stopHeartbeat();
    if (this.released) return { released: true };
    if (this.lostInfo) return { released: false, reason: 'NOT_OWNER', holder: null, why: this.lostInfo.why };
    await this.beating?.catch(() => {});
    try {
      const r = await this.o.db.leaseQuery(leaseSql.release(this.hold()));
      if (r.rowCount === 0)
        return {
          released: false,
          reason: 'NOT_OWNER',
          holder: null,
          why: 'the lease row is no longer ours; left it alone',
        };
      this.journal?.close(true);
    } catch (err) {
      // The database is unreachable: the lease expires on its own within the TTL. Until then
      // the release is tried again now and then in the background (the same conditional
      // statement, so it can only ever free this lease), so that the next holder need not wait
      // out the TTL when the database comes back sooner.
      this.journal?.close(false);
      this.releaseLater();
      // the cause in words, with the database (a DatabaseError names it; the driver's own errors
      // do not), never only an error class such as DATABASE
      const cause =
        err instanceof DatabaseError ? err.message : `database ${this.o.db.where}: ${(err as Error).message}`;
      return {
        released: false,
        reason: 'NOT_OWNER',
        holder: null,
        why: `could not release it (${cause}); it expires within ${this.o.ttlMs / 1000}s, and the release is tried again until then`,
      };
    }
    this.released = true;
    return { released: true };
  }

  private releaseLater(): void {
    const attempt = (): void => {
      if (this.released || this.expiredBy()) return;
      this.o.db.query(leaseSql.release(this.hold())).then(
        () => {
          this.released = true;
        },
        () => setTimeout(attempt, 500).unref(),
      );
    };
    setTimeout(attempt, 500).unref();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }

  protected override onLost(): void {
    this.journal?.close(false); // a reclaimer on this host reads it
  }
}
