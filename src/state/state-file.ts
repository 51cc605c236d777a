// routine-state.json (SPEC §3, §6): every routine's record, for status scripts and every view; an
// index of the history files (which hold the facts) showing every record within a second of it,
// whoever wrote it. Writers take the `routine-state` lock for the read-modify-write; a long-running
// publisher rewrites only what it recorded since. Readers never depend on it being current
// (history_at). How and why: docs/design.md "routine-state.json".
// (Over 300 lines: the publisher and the reader, which share the file's format and the cache of
// its identity and per-routine bytes.)

import { join } from 'node:path';
import type { Project } from '../config/load.js';
import { acquireFileLease } from '../file-lock/wait.js';
import type { Lease } from '../lock/lease.js';
import type { LockRecord } from '../lock/record.js';
import { ensureDir } from '../fs/files.js';
import { watchFolder } from '../fs/names.js';
import { lstatQuiet } from '../fs/look.js';
import { statExact } from '../fs/look.js';
import { historyIdOf, historyIds, historyListing, historyPath, unheard } from './history.js';
import { currentStamp, parkHeldMarks, stampHistory, writersIn } from './history-stamp.js';
import { writeFileDurable } from '../fs/durable.js';
import { corruptMessage, ensureStateRoot, readJsonState } from './json-file.js';
import { checkRoutineState, type RoutineRecord, type RoutineStateFile } from './routine-state.js';
import {
  checkFolders,
  isCount,
  newerOf,
  readIndex,
  readRoutineIndexed,
  unmoved,
  type FoldedAt,
  type IndexCache,
} from './routine-index.js';
import { isObj, own } from '../is-object.js';
import { systemClock, type Clock } from '../clock.js';
import type { Warn } from './store.js';

export function statePath(project: Pick<Project, 'stateDir'>): string {
  return join(project.stateDir, 'routine-state.json');
}

/** The lock that serializes writers of routine-state.json: held for one rewrite, or by a running
 * scheduler for as long as it runs (StatePublisher.holdWhileRunning). */
export const STATE_LOCK_KEY = 'routine-state';

/** The owner a scheduler holds the routine-state lock as: a writer that finds it so leaves its
 * records, already in their histories, for that scheduler to show (SPEC §3: "within one second",
 * and a command brings the file up to date itself only when no scheduler runs). */
export const SCHEDULER_PUBLISHER = 'routine state (scheduler)';

/** routine-state.json: the records, where each routine's history was folded to, and the history
 * folder's stamp when every history was folded after it (history-stamp.ts), else null. */
interface StateFile {
  routines: Record<string, RoutineRecord>;
  /** `history_at` as parsed: positionsOf reads it (a reader whose folder has the stamp never does). */
  history: unknown;
  stamp: string | null;
}

/** The file's records by the one checker of routine-state.json (checkRoutineState), plus where
 * each routine's history was folded to. */
function checkStateFile(v: unknown): StateFile | string {
  const file = checkRoutineState(v);
  if (typeof file === 'string') return file;
  const stamp = (v as { history_stamp?: unknown }).history_stamp;
  return {
    routines: file.routines,
    history: (v as { history_at?: unknown }).history_at,
    stamp: typeof stamp === 'string' ? stamp : null,
  };
}

/** Where the file says each routine's history was folded to (its well-formed entries). */
function positionsOf(history: unknown): Record<string, FoldedAt> {
  const at: Record<string, FoldedAt> = {};
  if (isObj(history)) {
    for (const [id, pos] of Object.entries(history)) {
      if (Array.isArray(pos) && isCount(pos[0]) && isCount(pos[1]) && Number.isFinite(pos[2]))
        at[id] = { ino: pos[0], size: pos[1], mtime: pos[2] };
    }
  }
  return at;
}

/** The record routine-state.json holds of `id` and where its history was folded to for it, as
 * the file is (nothing folded, moved or written); null: none, or the file is not readable. */
export function recordOnFile(project: Project, id: string): { record: RoutineRecord; at: FoldedAt } | null {
  const r = readJsonState(statePath(project), checkStateFile, { moveAside: false });
  if (r.kind !== 'ok') return null;
  const record = own(r.value.routines, id);
  const at = own(positionsOf(r.value.history), id);
  return record && at ? { record, at } : null;
}

interface FoldedState {
  state: RoutineStateFile;
  at: Record<string, FoldedAt>;
  /** The file already said all of this (nothing to rewrite). */
  current: boolean;
  /** The file as it was when read (identityOf, taken before reading it); null: not there. */
  identity: string | null;
  /** It was there and damaged (a writer moves it aside). */
  corrupt: boolean;
  /** The history folder's stamp this fold is as of; null: none (history-stamp.ts). */
  stamp: string | null;
}

/** How a fold reads: a writer moves a damaged file aside, and stamps the history folder before
 * it folds every history (history-stamp.ts); a view takes the file as it is while the folder
 * has its stamp; a reader that decides something (catch-up, reconciling) looks at every
 * history, as a writer does (a history edited in place, by hand, changes no folder). */
interface ReadMode {
  moveAside: boolean;
  /** `keep`: a stamp that still holds; `set`: that, or a new one. */
  stamp: 'none' | 'keep' | 'set';
  view: boolean;
}
const READER: ReadMode = { moveAside: false, stamp: 'none', view: false };
const VIEW: ReadMode = { moveAside: false, stamp: 'none', view: true };
/** A writer's fold before it takes the lock (a damaged file is moved aside only under it). It
 * stamps too, so that the fold under the lock is not done twice (one `lstat` a history, 1 000 in
 * a command of a large project): a stamp set by someone else after it only makes the file's
 * stamp stale, never one that holds (history-stamp.ts reads back its own value). */
const PREPARING: ReadMode = { moveAside: false, stamp: 'set', view: false };
const WRITER: ReadMode = { moveAside: true, stamp: 'set', view: false };

/** `cache`: the routine folds this process made (a writer's): each next read folds only what a
 * history gained since. */
function readWithPositions(project: Project, warn: Warn, mode: ReadMode, cache?: IndexCache): FoldedState {
  checkFolders(project);
  const path = statePath(project);
  const identity = currentIdentity(path);
  const r = readJsonState(path, checkStateFile, { moveAside: mode.moveAside });
  if (r.kind === 'corrupt') warnCorrupt(path, identity, r, warn);
  const file: StateFile = r.kind === 'ok' ? r.value : { routines: {}, history: undefined, stamp: null };
  const dir = join(project.stateDir, 'history');
  // the folder as the file's writer stamped it: no history changed since (one lstat, not one a
  // history); a view takes every record as it is (and no positions: it uses none)
  const stamped = file.stamp !== null && file.stamp === currentStamp(dir);
  if (stamped && mode.view)
    return {
      state: { version: 1, routines: file.routines },
      at: {},
      current: true,
      identity,
      corrupt: false,
      stamp: file.stamp,
    };
  // a writer keeps a stamp that still holds (the fold below is exact as of now, and nothing
  // changed the folder since it), else sets one — after parking its own mark, if it keeps one
  // named `.writing.` between appends (a scheduler), which would keep any stamp away
  const setStamp = (): string | null => {
    parkHeldMarks(dir);
    return stampHistory(dir);
  };
  let stamp = stamped && mode.stamp !== 'none' ? file.stamp : mode.stamp === 'set' ? setStamp() : null;
  const names = historyListing(project.stateDir);
  if (stamp !== null) {
    // a writer appending now (or one gone, whose mark is removed: a change after the stamp)
    const writers = writersIn(dir, names);
    if (writers.live || writers.removed) stamp = null;
  }
  const routines = file.routines; // fresh from checkStateFile: ours to add to
  const was = positionsOf(file.history);
  const at: Record<string, FoldedAt> = {};
  let current = r.kind === 'ok' && (stamp === null || stamp === file.stamp);
  for (const id of historyIds(project.stateDir, names)) {
    const st = lstatQuiet(historyPath(project.stateDir, id));
    // (not a regular file: never read; the fold says so and answers from the routine's index)
    if (!st) continue;
    const pos = own(was, id);
    if (pos && unmoved(pos, st) && own(routines, id)) {
      at[id] = pos;
      continue;
    }
    // a history cut in place goes on from this file's record when that was folded further
    const onFile = (): { record: RoutineRecord; at: FoldedAt } | null => {
      const record = pos && own(routines, id);
      return record ? { record, at: pos } : null;
    };
    const folded = readRoutineIndexed(project, id, warn, cache, onFile);
    if (!folded) continue;
    current = false;
    routines[id] = folded.record;
    at[id] = { ino: folded.ino, size: folded.size, mtime: folded.mtime };
  }
  // a history folded before (a position on record) whose file is gone, removed by hand: shown
  // as the next write makes it — from what its index keeps (file-store.ts starts the history
  // again from it), or, with the index gone too, as never run — and said once
  for (const id of Object.keys(was)) {
    if (own(at, id) || !own(routines, id) || lstatQuiet(historyPath(project.stateDir, id))) continue;
    // the newest record of the file known: this process's own fold, the index, or the one on
    // record here when it was folded further (a running scheduler writes the index only every
    // 16 KiB, and keeps this file current)
    const index = readIndex(project, id);
    const kept = index ? newerOf(cache?.get(id), index) : null;
    const pos = was[id]!;
    current = false;
    if (!kept) delete routines[id];
    else if (!(pos.ino === kept.ino && pos.size > kept.size)) routines[id] = kept.record;
    warnGone(historyPath(project.stateDir, id), pos, kept !== null, warn);
  }
  return { state: { version: 1, routines }, at, current, identity, corrupt: r.kind === 'corrupt', stamp };
}

function warnGone(path: string, was: FoldedAt, kept: boolean, warn: Warn): void {
  const key = `${path}\0${was.ino}`;
  if (leftReported.has(key)) return;
  leftReported.add(key);
  warn(
    kept
      ? `${path} is gone (removed?): its routine is shown as its index keeps it, and its next fire goes on from there`
      : `${path} and its index are gone (removed?): its routine is shown as never run, as its next fire starts it again`,
  );
}

/** The damaged files this process has said it leaves in place (path and identity): a scheduler
 * reads the file several times before it writes it, and says so once, then once that it moved it. */
const leftReported = new Set<string>();

function warnCorrupt(
  path: string,
  identity: string | null,
  r: { movedTo: string | null; problem: string },
  warn: Warn,
): void {
  const rebuilt = 'rebuilt from the history files';
  if (r.movedTo) {
    warn(corruptMessage(path, r, rebuilt));
    return;
  }
  const key = `${path}\0${identity ?? ''}`;
  if (leftReported.has(key)) return;
  leftReported.add(key);
  // a view writes nothing; whoever next writes the file (a scheduler, a routine run) sets it aside
  warn(corruptMessage(path, r, `${rebuilt}; the next write of it sets it aside`));
}

/** Every routine's record: from routine-state.json where a routine's history has not moved since
 * it was written, else from the routine's own index and history. Nothing is written. */
export function readRoutineState(project: Project, warn: Warn = unheard): RoutineStateFile {
  return readWithPositions(project, warn, READER).state;
}

/** readRoutineState for a view (`routine list` from its cache): all of routine-state.json as it is
 * while the history folder has the file's stamp (one lstat for 1 000 routines; a history edited
 * in place by hand shows at the next rewrite that folds every history, within a minute under a
 * scheduler). */
export function readRoutineStateShown(project: Project, warn: Warn = unheard): RoutineStateFile {
  return readWithPositions(project, warn, VIEW).state;
}

/** A routine as the file shows it, with its bytes there (kept, so that a rewrite re-encodes only
 * the routines that changed). */
interface Shown {
  record: RoutineRecord;
  at: FoldedAt | null;
  recordBytes: Buffer;
  atBytes: Buffer | null;
}

function shown(id: string, record: RoutineRecord, at: FoldedAt | null): Shown {
  const key = JSON.stringify(id);
  return {
    record,
    at,
    recordBytes: Buffer.from(`${key}: ${JSON.stringify(record)}`),
    atBytes: at ? Buffer.from(`${key}: [${at.ino}, ${at.size}, ${at.mtime}]`) : null,
  };
}

const HEAD = Buffer.from('{ "version": 1,\n  "routines": {\n    ');
const NEXT_ROUTINE = Buffer.from(',\n    ');
const MIDDLE = Buffer.from('\n  },\n  "history_at": {\n    ');
const TAIL = Buffer.from('\n  } }\n');
/** The end with the history folder's stamp (readers compare it with the folder's). */
const stampedTail = (stamp: string): Buffer => Buffer.from(`\n  },\n  "history_stamp": ${JSON.stringify(stamp)} }\n`);

/** Routines per chunk of the file's bytes kept joined: a rewrite after one routine changed
 * joins that chunk again and a few dozen chunks, not every routine. */
const CHUNK = 32;

/** The routines the file shows, in the order they were first shown (one a line), with their
 * bytes kept joined by chunks. */
class ShownRoutines {
  private readonly ids: string[] = [];
  private readonly at = new Map<string, number>();
  private readonly entries: Shown[] = [];
  private readonly records: (Buffer | null)[] = [];
  private readonly positions: (Buffer | null)[] = [];

  get(id: string): Shown | undefined {
    const i = this.at.get(id);
    return i === undefined ? undefined : this.entries[i];
  }

  set(id: string, s: Shown): void {
    let i = this.at.get(id);
    if (i === undefined) {
      i = this.ids.length;
      this.ids.push(id);
      this.at.set(id, i);
      this.entries.push(s);
    } else this.entries[i] = s;
    this.records[Math.floor(i / CHUNK)] = null;
    this.positions[Math.floor(i / CHUNK)] = null;
  }

  /** The file's bytes; `stamp`: the history folder's, when every history was folded after it. */
  encode(stamp: string | null): Buffer {
    const chunks = Math.ceil(this.entries.length / CHUNK);
    const section = (cache: (Buffer | null)[], part: (s: Shown) => Buffer | null): Buffer[] => {
      const out: Buffer[] = [];
      for (let c = 0; c < chunks; c++) {
        let joined = cache[c];
        if (!joined) {
          const pieces: Buffer[] = [];
          for (const s of this.entries.slice(c * CHUNK, (c + 1) * CHUNK)) {
            const bytes = part(s);
            if (!bytes) continue;
            if (pieces.length > 0) pieces.push(NEXT_ROUTINE);
            pieces.push(bytes);
          }
          joined = cache[c] = Buffer.concat(pieces);
        }
        if (joined.length === 0) continue;
        if (out.length > 0) out.push(NEXT_ROUTINE);
        out.push(joined);
      }
      return out;
    };
    return Buffer.concat([
      HEAD,
      ...section(this.records, (s) => s.recordBytes),
      MIDDLE,
      ...section(this.positions, (s) => s.atBytes),
      stamp === null ? TAIL : stampedTail(stamp),
    ]);
  }
}

/** What identifies one write of the file: a file written by anyone else since differs. */
function identityOf(st: { ino: bigint; size: bigint; mtimeNs: bigint }): string {
  return `${st.ino}:${st.size}:${st.mtimeNs}`;
}

function currentIdentity(path: string): string | null {
  const st = statExact(path, false);
  return st ? identityOf(st) : null;
}

export interface PublisherOptions {
  project: Project;
  /** The store's cache of routine indexes (the folds it just wrote). */
  cache: IndexCache;
  /** Where a rewrite that failed is said (once per cause). */
  warn: Warn;
  /** Shortest time between two rewrites (SPEC §3: at most once a second). */
  intervalMs?: number;
  /** Times the rewrites (default: the system clock). */
  clock?: Pick<Clock, 'monotonic' | 'sleep'>;
}

/** How long a rewrite trusts its memory of the file before folding every history again. */
const SWEEP_MS = 60_000;

/** Keeps routine-state.json up to date for the routines this process records (see the top). */
export class StatePublisher {
  private shown: ShownRoutines | null = null;
  /** The file as this publisher left it (identityOf); null: not known. */
  private identity: string | null = null;
  private sweptAt = -Infinity;
  private readonly dirty = new Set<string>();
  /** Cancels the wait for the next rewrite, or null when none is waiting. */
  private timer: AbortController | null = null;
  /** The rewrite under way (one at a time in a process), or null. */
  private running: Promise<Error | null> | null = null;
  /** The next rewrite reads and folds every history (a file that may be stale: a rewrite that
   * found its lock taken over, a sweep). */
  private pendingFull = false;
  private sweeper: NodeJS.Timeout | null = null;
  private lastStart = -Infinity;
  /** Holding the lock between rewrites and watching the histories (holdWhileRunning). */
  private holding = false;
  /** The routine-state lock while holding, or null (taken at the next rewrite). */
  private held: Lease | null = null;
  private watcher: { close(): void } | null = null;
  /** Why the last rewrite failed (said once until it changes), or null. */
  private problem: string | null = null;
  private readonly intervalMs: number;
  private readonly clock: Pick<Clock, 'monotonic' | 'sleep'>;

  constructor(private readonly o: PublisherOptions) {
    this.intervalMs = o.intervalMs ?? 1000;
    this.clock = o.clock ?? systemClock;
  }

  /** A fact of `routineId` was appended to its history: the file shows it within a second. */
  touched(routineId: string): void {
    this.dirty.add(routineId);
    this.schedule();
  }

  /** For a long-running process (the scheduler): every `everyMs` the file is checked against
   * every history, so a fact appended by a writer killed before its rewrite (or an older file put
   * back by a writer that stalled past its lock) shows within that time even when nothing is
   * recorded here. Written only if something changed. */
  sweepEvery(everyMs: number): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = setInterval(() => {
      this.pendingFull = true;
      this.schedule();
    }, everyMs);
    this.sweeper.unref();
  }

  /** For the scheduler: the one writer of the file while it runs. It watches the history folder
   * (inotify), so a fact anyone appends is shown within a second, and keeps the routine-state
   * lock from one rewrite to the next (no lock cycle per rewrite); a command that records beside
   * it finds the lock held by SCHEDULER_PUBLISHER and leaves the rewrite to it. Without a watch
   * (not Linux, no inotify watches left, a watch that failed) every rewrite takes and leaves the
   * lock, as every other writer's does. */
  holdWhileRunning(): void {
    // inotify reports every append to a file of the folder; other systems' folder watches are
    // not relied on for that
    if (process.platform !== 'linux') return;
    const dir = join(this.o.project.stateDir, 'history');
    try {
      ensureDir(dir);
    } catch {
      return; // the first record says why
    }
    const w = watchFolder(dir, (name) => {
      if (name === null) {
        this.pendingFull = true;
        this.schedule();
        return;
      }
      const id = historyIdOf(name);
      if (id !== null) this.touched(id);
    });
    if (!w) return;
    // a watch that fails (it closes itself) no longer sees what others append: stop holding;
    // what they left to us until then is found by a rewrite that folds every history
    w.on('error', () => this.stopHolding());
    this.watcher = w;
    this.holding = true;
  }

  private stopHolding(): void {
    this.watcher?.close();
    this.watcher = null;
    if (!this.holding) return;
    this.holding = false;
    const held = this.held;
    this.held = null;
    // after the release, every history is folded again, under a lock taken as any writer does:
    // a record someone left to us before it is in that fold, one after it is published by its
    // own writer (it finds the lock free, or held by someone else: not handed to us)
    // (a release that fails — a failing folder — is said by that rewrite, which takes the lock)
    void held?.release().catch(() => {});
    this.pendingFull = true;
    this.schedule();
  }

  /** Brings the file up to date now (after a rewrite under way), whether or not anything was
   * recorded here: a damaged file is moved aside and rebuilt. */
  sync(): Promise<Error | null> {
    this.cancelTimer();
    return this.run(true);
  }

  /** What is pending is written before the process goes (the commands' exit): also a rewrite
   * found to have landed on a newer file (a few tries; one that fails is said, and stays for the
   * next writer). */
  async close(): Promise<void> {
    // a command's last rewrite folds every history, so that it can stamp the history folder for
    // the readers after it (history-stamp.ts); a trusted one folds only its own routines
    if (!this.sweeper && !this.holding && this.dirty.size > 0) this.pendingFull = true;
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
    await this.writePending();
    // a scheduler's last rewrite: after it lets go of the lock, the records others left to it
    // since its last look are folded in (stopHolding)
    this.stopHolding();
    await this.writePending();
    this.cancelTimer();
  }

  /** After the rewrite under way: what is pending, written now (a few tries). */
  private async writePending(): Promise<void> {
    this.cancelTimer();
    while (this.running) await this.running;
    for (let tries = 0; tries < 3 && (this.dirty.size > 0 || this.pendingFull); tries++) {
      if ((await this.run(false)) !== null) break;
    }
  }

  private cancelTimer(): void {
    this.timer?.abort();
    this.timer = null;
  }

  /** A rewrite within a second of the last one's start (at once after a quiet while); none while
   * one runs: its end schedules the next if anything is left. */
  private schedule(): void {
    if (this.timer || this.running) return;
    const wait = Math.max(0, this.lastStart + this.intervalMs - this.clock.monotonic());
    const timer = new AbortController();
    this.timer = timer;
    // a process never stays up for its index (unref): close() writes what is pending
    void this.clock.sleep(wait, timer.signal, { unref: true }).then(() => {
      if (this.timer !== timer) return; // cancelled
      this.timer = null;
      if (!this.running) void this.run(false);
    });
  }

  /** Runs one rewrite after the one under way, if any (never two at once). */
  private run(full: boolean): Promise<Error | null> {
    const before = this.running ?? Promise.resolve(null);
    const p: Promise<Error | null> = before
      .then(() => this.publish(full))
      .finally(() => {
        if (this.running === p) this.running = null;
        if (!this.running && (this.dirty.size > 0 || this.pendingFull)) this.schedule();
      });
    this.running = p;
    return p;
  }

  /** One rewrite; the error when it failed (said once, and tried again within a second). */
  private async publish(asked: boolean): Promise<Error | null> {
    this.lastStart = this.clock.monotonic();
    const full = asked || this.pendingFull;
    this.pendingFull = false;
    const ids = [...this.dirty];
    this.dirty.clear();
    const { project } = this.o;
    try {
      ensureStateRoot(project.stateDir);
      // A rewrite that folds every history does so before taking the lock: the first one in a
      // process may have a thousand histories to fold from their start (no index yet), which
      // holds the event loop — and a lock's heartbeat — for seconds. Under the lock that read
      // is used as it is if the file is still the one it read (nobody published since; what
      // others appended meanwhile they publish after us), else done again (the routines folded
      // already: one lstat each).
      const prepared = full || !this.shown ? readWithPositions(project, this.o.warn, PREPARING, this.o.cache) : null;
      const lease = await this.takeLock();
      if (lease === null) {
        // a running scheduler holds the lock: it shows what we appended within a second
        this.problem = null;
        return null;
      }
      let lost = false;
      try {
        this.rewrite(full, ids, prepared);
        // Stalled past the lock's time-out while someone else took it, this rewrite may have
        // put an older file back: the next one, at once, reads and folds everything again.
        lost = !lease.verify().ok;
      } catch (err) {
        // Stalled past the lock's time-out, this writer's half-written file was removed by the
        // next holder (its leftover temp): nothing was put back; done again, from the histories.
        if (lease.verify().ok) throw err;
        this.lostLock(ids);
        lost = true;
        return null;
      } finally {
        if (lease !== this.held || lost) await this.letGo(lease);
      }
      if (lost) this.lostLock([]);
      this.problem = null;
      return null;
    } catch (err) {
      for (const id of ids) this.dirty.add(id);
      if (full) {
        this.forget();
        this.pendingFull = true;
      }
      const message = (err as Error).message;
      // said once per cause (a full disk says ENOSPC of the lock, then of the file: one cause)
      const cause = (err as NodeJS.ErrnoException).code ?? message;
      if (cause !== this.problem)
        this.o.warn(
          `could not rewrite ${statePath(project)} (${message}); every record is in the history files, and the file is rewritten once it can be`,
        );
      this.problem = cause;
      return err as Error;
    }
  }

  /** The lock for one rewrite: the one this scheduler holds while it is still ours, else taken
   * (waiting for a writer that holds it). null: a running scheduler holds it (see the top). */
  private async takeLock(): Promise<Lease | null> {
    if (this.held) {
      if (this.held.verify().ok) return this.held;
      await this.letGo(this.held); // lost (a stall past its time-out): taken again below
      this.forget();
    }
    const { project } = this.o;
    const lock = {
      lockDir: project.lockDir,
      key: STATE_LOCK_KEY,
      ttlMs: Math.min(10_000, project.lockTtlMs),
      refreshMs: Math.min(3_000, project.lockRefreshMs),
      owner: { command: this.holding ? SCHEDULER_PUBLISHER : 'routine state' },
    };
    // a running scheduler writes the file: what this process recorded is left to it (a command
    // beside it; also a second `scheduler start`, whose store opens before it is refused)
    const now = await acquireFileLease({ ...lock, ifBusy: 'fail' });
    if (!now.ok && now.reason === 'LOCK_HELD' && leftToScheduler(now.holder, lock.refreshMs)) return null;
    const got = now.ok ? now : await acquireFileLease({ ...lock, ifBusy: 'wait', waitTimeoutMs: lock.ttlMs + 5_000 });
    if (!got.ok) {
      // a scheduler that kept up its heartbeat for all that time runs: the record is left to it
      if (got.holder?.owner.command === SCHEDULER_PUBLISHER) return null;
      throw new Error(`its lock is ${got.why}`);
    }
    if (this.holding) this.held = got.lease;
    return got.lease;
  }

  private async letGo(lease: Lease): Promise<void> {
    if (lease === this.held) this.held = null;
    await lease.release();
  }

  private lostLock(ids: string[]): void {
    for (const id of ids) this.dirty.add(id);
    this.forget();
    this.pendingFull = true;
  }

  private forget(): void {
    this.shown = null;
    this.identity = null;
  }

  /** Under the lock: the file's content folded forward, then written if it changed. */
  private rewrite(full: boolean, ids: string[], prepared: FoldedState | null): void {
    const { project, cache, warn } = this.o;
    const path = statePath(project);
    const trusted =
      !full &&
      this.shown !== null &&
      this.identity !== null &&
      this.clock.monotonic() - this.sweptAt < SWEEP_MS &&
      currentIdentity(path) === this.identity;
    let routines: ShownRoutines;
    // the trusted path folds only the routines it was told of: no stamp
    let stamp: string | null = null;
    if (trusted) {
      routines = this.shown!;
      checkFolders(project);
      let changed = false;
      for (const id of ids) {
        const folded = readRoutineIndexed(project, id, warn, cache, () => recordOnFile(project, id));
        if (!folded) continue;
        const was = routines.get(id)?.at;
        // already shown (a watched append of our own, seen after the rewrite that showed it)
        if (was && unmoved(was, { ino: folded.ino, size: folded.size, mtimeMs: folded.mtime })) continue;
        routines.set(id, shown(id, folded.record, { ino: folded.ino, size: folded.size, mtime: folded.mtime }));
        changed = true;
      }
      if (!changed) return;
    } else {
      const fresh = prepared !== null && !prepared.corrupt && currentIdentity(path) === prepared.identity;
      const read = fresh ? prepared : readWithPositions(project, warn, WRITER, cache);
      stamp = read.stamp;
      this.sweptAt = this.clock.monotonic();
      routines = new ShownRoutines();
      for (const [id, record] of Object.entries(read.state.routines))
        routines.set(id, shown(id, record, own(read.at, id) ?? null));
      if (read.current) {
        this.shown = routines;
        this.identity = currentIdentity(path);
        return;
      }
    }
    this.shown = null; // until the write is known to have happened
    // not fsynced: a view of the histories, which every reader checks it against and the first
    // rewrite of every process folds again (a power loss can only leave an older, whole file)
    const written = writeFileDurable(path, routines.encode(stamp), { cleanTemps: true, sync: false });
    this.shown = routines;
    this.identity = identityOf(written);
  }
}

/** Whether the lock is held by a running scheduler, which shows what this process appended: one
 * whose heartbeat is recent. An older one (a scheduler paused, SIGSTOP) is waited out like any
 * holder, and the record written here once its lease has run out. */
function leftToScheduler(holder: LockRecord | null, refreshMs: number): boolean {
  if (holder?.owner.command !== SCHEDULER_PUBLISHER) return false;
  return Date.now() - holder.heartbeat_at * 1000 <= 2 * refreshMs;
}

/** Rewrites routine-state.json from the history now (a damaged one moved aside first), or
 * throws why it could not. Processes that record use their store's publisher. */
export async function publishRoutineState(project: Project, warn: Warn = unheard): Promise<void> {
  const failed = await new StatePublisher({ project, cache: new Map(), warn }).sync();
  if (failed) throw failed;
}
