// Where routine state lives, as the scheduler sees it: routine-state.json and history in files
// (the default), or tables in PostgreSQL (SPEC §9).

import { randomHex } from '../fs/random-ids.js';
import type { HistoryEntry } from './history.js';
import type { PhaseBoard } from './phases.js';
import type { Fire, OpenFire, RoutineRecord, RoutineResult, RoutineStateFile } from './routine-state.js';

export type Warn = (message: string) => void;

export interface PauseChange {
  wasPaused: boolean;
  /** The note now in effect. */
  note: string | null;
}

export interface RecordOptions {
  again?: boolean;
  /** The record of a claimed tick by its claimer (a database backend): stored only while the
   * claim is still this claimer's, and it settles the claim. */
  claimer?: string;
}

/** Who claims ticks: a scheduler, by its host and the lock id of its first scheduler lease
 * (whether a lease with that id, or naming it as `claimer`, is held says whether it lives). */
export interface Claimant {
  host: string;
  claimer: string;
}

/** A tick as sets of claims name it: its routine and its time. */
export const claimKey = (routine: string, scheduledAt: Date): string => `${routine}@${scheduledAt.getTime()}`;

/** An unsettled claim (no fire opened, no record) of a claimer that is gone, or of the asker. */
export interface OrphanClaim {
  routine: string;
  scheduledAt: Date;
  host: string;
  claimer: string;
}

/** A record the database did not take now, kept in this host's spool to be sent again. */
export interface Deferred {
  spooledTo: string;
  why: string;
}

/** A record not stored, said through `warn`: another record of the same fire stands (another
 * scheduler judged its process gone and recorded it interrupted first), or its tick's claim is
 * another scheduler's now. */
export interface NotRecorded {
  notRecorded: true;
}

export interface FlushResult {
  recorded: number;
  released: number;
  /** Spooled fires another record of which stood (said through warn when sent). */
  refused: number;
  /** Records still spooled (the database is still away). */
  left: number;
}

/** Which fires `routine history` shows: scheduled in [since, until) (epoch ms), of `result` when
 * given; the newest `limit` of them (Infinity: all). */
export interface FireQuery {
  limit: number;
  since: number;
  until: number;
  result?: RoutineResult;
}

export type ShownFire = HistoryEntry & { routine: string };

/** A record that closes no open fire gets a key of its own first, so that sending it again
 * after a lost answer (or retrying it) stores it once. */
export const withKey = (fire: Fire): Fire => (fire.closes || fire.key ? fire : { ...fire, key: randomHex(8) });

export interface RoutineStore {
  /** Whether several schedulers share the ticks (claimTick decides who fires each): then a
   * claimed tick nobody else will fire is recorded even by a scheduler that lost its lease. */
  readonly sharedTicks: boolean;
  read(warn: Warn): Promise<RoutineStateFile>;
  /** One routine's record, at a cost that does not grow with the number of routines (what a
   * fire reads: its pause flag, its record before it for notifications). */
  readOne(routineId: string, warn: Warn): Promise<RoutineRecord | undefined>;
  /** Where the shared index of every routine is a file (routine-state.json): brings it up to
   * date now (a damaged one moved aside). Otherwise the store keeps it within a second of every
   * record by itself (SPEC §3); the scheduler calls this at start. */
  publish?(): Promise<void>;
  /** Writes what is pending (routine-state.json) before the process goes; the backend's
   * close() calls it. */
  close?(): Promise<void>;
  /** Where the state lives in a folder: throws the error when a file with data cannot be created
   * in it now (full, out of inodes, read-only, failing), for a scheduler that holds its fires
   * until it can (SPEC §4.15). */
  probeWritable?(): void;
  /** Records that a fire has started (before its work starts); the fire's record (recordFire with
   * `closes: open.id`) closes it. A fire whose process dies in between is found by reconcile. */
  openFire(routineId: string, open: OpenFire, warn: Warn, claimer?: string): Promise<void>;
  /** With `again` (the record is sent once more after an answer was lost, from the spool): a
   * record whose open fire is already closed, or whose key is already in history, is stored
   * already and is not stored twice; one older than the last fire recorded counts without
   * replacing the last result. Answers Deferred when the record waits in this host's spool
   * (a database that did not take it: SpoolingStore), NotRecorded when another record of the
   * fire stands. */
  recordFire(routineId: string, fire: Fire, warn: Warn, opts?: RecordOptions): Promise<Deferred | NotRecorded | void>;
  /** Where records can wait in this host's spool (a database backend, SpoolingStore): sends them
   * again; what is left when the database is still away. */
  flushSpool?(warn: Warn): Promise<FlushResult>;
  /** Records every open fire whose process is gone as a failure (reason `interrupted`): each fire
   * that started is then recorded exactly once (SPEC §6). Returns how many it closed; each one
   * is told to `recorded` (the metrics and notifications of the process that records it), with
   * the routine's record as it was read before (the counters its announcement goes on from). */
  reconcile(
    isGone: (owner: OpenFire['owner'], open: OpenFire, routineId: string) => boolean,
    warn: Warn,
    recorded?: (routineId: string, fire: Fire, prior: RoutineRecord | undefined) => void,
  ): Promise<number>;
  /** Pausing again without a note keeps the first note. */
  setPaused(routineId: string, paused: boolean, note: string | null): Promise<PauseChange>;
  /** Oldest first. */
  history(routineId: string, warn?: Warn): Promise<HistoryEntry[]>;
  /** The newest fires of `routines` that `q` selects, oldest first (scheduled, then started),
   * at a cost that follows what is asked for, not the whole histories. */
  recentFires(routines: readonly string[], q: FireQuery, warn: Warn): Promise<ShownFire[]>;
  /** Claims one scheduled time of a routine for this scheduler; false when another scheduler
   * already did (several schedulers share a database backend, SPEC §9). */
  claimTick(routineId: string, scheduledAt: Date, by: Claimant): Promise<boolean>;
  /** claimTick for several ticks at once (one round trip): the keys (`claimKey`) of those taken.
   * Only with `again` (sent again after a lost answer) is a claim this claimer holds, unsettled,
   * answered yes. */
  claimTicks?(
    ticks: readonly { routine: string; scheduledAt: Date }[],
    by: Claimant,
    again?: boolean,
  ): Promise<Set<string>>;
  /** Where ticks are shared: unsettled claims of claimers that are gone and `claimer`'s own,
   * oldest first (scheduler/claims.ts decides what becomes of them). */
  orphanClaims?(claimer: string, limit: number): Promise<OrphanClaim[]>;
  /** Where ticks are shared: the ids of the open fire markers naming a claimer other than
   * `claimer` whose scheduler lease is not held (their outcomes are lost: recorder.reconcile).
   * Only those: a marker opened after the look (its claimer back) is not judged by it. */
  openFiresOfGoneClaimers?(claimer: string): Promise<string[]>;
  /** Settles a claim of `claimer` whose tick ends with no fire and no record (a paused routine):
   * no sweep takes it over. */
  settleClaim?(routineId: string, scheduledAt: Date, claimer: string): Promise<void>;
  /** Moves an unsettled claim from its claimer to `to`; false when it is no longer that
   * claimer's or was settled meanwhile. */
  takeOverClaim?(claim: OrphanClaim, to: Claimant): Promise<boolean>;
  /** Gives back a claim this host made but did not fire (its answer was lost, so the tick was
   * not fired): the tick is no longer attributed to this host. Not when a fire of that tick is
   * open or recorded. Returns whether a claim was released. */
  releaseClaim(routineId: string, scheduledAt: Date, host: string): Promise<boolean>;
  /** The scheduler's phases of its routines' fires (queued, waiting: phases.ts), replacing the
   * board it wrote before. */
  writePhases(board: PhaseBoard): Promise<void>;
  /** The boards of the schedulers that live (a board of a scheduler that is gone is not
   * returned: its phases ended with it). */
  readPhases(warn: Warn): Promise<PhaseBoard[]>;
}
