// Taking the lock (SPEC §4.1, §4.2, §4.5, §4.7, §4.10): a sequence of immutable slots
// `<key>.slot.<generation>`, each linked from a complete temp file; the holder's slot is the
// highest, released by its `<key>.free.<generation>` mark. Taking it links the next slot, which
// exactly one process can do; `<key>.lock` then points at it (docs/lock.md "Design",
// docs/design.md "Taking the file lock"). One look at the folder is look.ts, the wait loop
// wait.ts, the view view.ts.

import { systemClock, type Clock } from '../clock.js';
import { UnsafePathError, errnoCode, errnoWords, stateWriteError } from '../errors.js';
import { FileLease, VIEW_ONLY } from './file-lease.js';
import { checkFolder, ensureDir, linkNew, unlinkQuiet, writeNewFile } from '../fs/files.js';
import { randomHex } from '../fs/random-ids.js';
import { lstatQuiet } from '../fs/look.js';
import { selfIdentity, systemProbe, type LivenessProbe } from '../process/identity.js';
import type { BusyPolicy, LockHooks, LockOwnerInfo } from '../lock/lease.js';
import { giveUpLeadMs } from '../lock/lease-state.js';
import { lookAtLock, stepOf } from './look.js';
import type { OrphanReport } from './orphans.js';
import { beatPath, isSpareName, lockPaths, slotPath, type LockPaths } from './paths.js';
import { serializeLockRecord, toEpochSeconds, MAX_GENERATION, type LockRecord } from '../lock/record.js';
import { collectGarbage, endHolderOrphans, keepStaleCopy, moveAsideView, type ReclaimContext } from './reclaim.js';
import { highestSlot, listLockDir } from './slots.js';
import type { Observation } from '../lock/stale.js';
import { placeView, stampView, type ViewStamp } from './view.js';
import { ioNotice } from '../fs/io-notice.js';

export interface FileLockOptions {
  lockDir: string;
  key: string;
  ttlMs: number;
  refreshMs: number;
  owner: LockOwnerInfo;
  clock?: Clock;
  probe?: LivenessProbe;
  hooks?: LockHooks;
  /** The highest generation that state written under this lock shows (exec runs, routine
   * history): consulted only when no slot survives, so a wiped lock folder never reissues one. */
  generationFloor?: () => number;
}

export interface AcquireOptions extends FileLockOptions, BusyPolicy {
  /** Longest pause between two polls while waiting; a dead holder is noticed within it. */
  pollMaxMs?: number;
  /** Start the heartbeat timer on success (default true). */
  heartbeat?: boolean;
}

/** What taking over from a stale holder did. */
export interface Takeover {
  why: string;
  staleFile: string | null;
  orphans: OrphanReport;
}

export type AttemptResult =
  | { ok: true; lease: FileLease; takeover: Takeover | null }
  | {
      ok: false;
      reason: 'LOCK_HELD';
      holder: LockRecord | null;
      why: string;
      /** With `busyOnLostRace`: the slot another process linked just before us. */
      lostTo?: number;
    };

const MAX_LOOPS = 16;

export interface AttemptOptions {
  /** Lets a waiter time how long the holder stays unchanged on its own clock. */
  observe?: (signature: string) => Observation;
  /** A waiter's attempt: another process linking the slot we were about to link makes it busy
   * at once (that process holds the lock), without a second look that would only say so. */
  busyOnLostRace?: boolean;
}

/** One non-blocking attempt: look; if free (or stale, after ending the stale holder's orphans),
 * link the next slot. */
export async function attemptAcquire(opts: FileLockOptions, attempt: AttemptOptions = {}): Promise<AttemptResult> {
  const clock = opts.clock ?? systemClock;
  const probe = opts.probe ?? systemProbe();
  const paths = lockPaths(opts.lockDir, opts.key);
  const ctx: ReclaimContext = { paths, clock, probe };
  const step = stepOf(opts.hooks);
  checkFolder(paths.dir);
  let garbage: string[] = [];
  for (let loop = 0; loop < MAX_LOOPS; loop++) {
    const look = lookAtLock(paths, clock.now(), probe, {
      observe: attempt.observe,
      hooks: opts.hooks,
      floor: opts.generationFloor,
    });
    if (look.kind === 'retry') continue;
    if (look.kind === 'held') return { ok: false, reason: 'LOCK_HELD', holder: look.holder, why: look.why };

    let orphans: OrphanReport = { ended: [], killed: [] };
    const merge = (r: OrphanReport): void => {
      orphans = { ended: [...orphans.ended, ...r.ended], killed: [...orphans.killed, ...r.killed] };
    };
    // The stale holder's work must be gone before ours can start (SPEC §4.4).
    // (A top slot that cannot be read names its holder by its heartbeat file.)
    const staleHolder = look.stale ? (look.top?.record ?? look.beaten) : null;
    if (staleHolder) merge(await endHolderOrphans(staleHolder, ctx));
    let staleFile: string | null = null;
    // A stale `<key>.lock` of no slot (see classifyView) whose generation is above every slot
    // first becomes a slot of its own generation, and the takeover goes on
    // from that slot. Moving it aside first would let a racer that listed the folder before the
    // move and read the view after it see neither slot nor view, start again at generation 1 and
    // hold the lock beside us (observed with 8 racers). With the slot, everyone computes the next
    // generation from the same name.
    if (look.foreign?.record && look.foreign.record.generation > (highestSlot(paths, look.names) ?? 0)) {
      const adopted = `${paths.dir}/${paths.tmpPrefix}${randomHex(8)}`;
      step('acquire:adopt-slot');
      writeTemp(paths, adopted, look.foreign.text);
      try {
        linkNew(adopted, slotPath(paths, look.foreign.record.generation)); // or someone was quicker: the same
      } catch (err) {
        throw lockDirError(paths, err);
      } finally {
        unlinkQuiet(adopted);
      }
      continue;
    }
    if (look.foreign) {
      if (look.foreign.record) merge(await endHolderOrphans(look.foreign.record, ctx));
      step('acquire:move-aside');
      const moved = moveAsideView(ctx, look.foreign.ino);
      if (!moved.moved) continue; // it changed while we looked
      staleFile = moved.staleFile;
    }
    if (look.next > MAX_GENERATION) {
      throw new UnsafePathError(
        `the ${opts.key} lock's generation would pass ${MAX_GENERATION}; a record in ${paths.dir} is not believable`,
      );
    }

    const started = clock.monotonic();
    const record = newRecord(opts, probe, look.next, clock.now());
    const tmp = `${paths.dir}/${paths.tmpPrefix}${randomHex(8)}`;
    step('acquire:write-temp');
    const ino = writeTemp(paths, tmp, serializeLockRecord(record));
    let placed = false;
    let mine: number;
    try {
      step('acquire:link-slot');
      let linked: boolean;
      try {
        linked = linkNew(tmp, slotPath(paths, record.generation));
      } catch (err) {
        throw lockDirError(paths, err);
      }
      if (!linked) {
        // someone else took this generation: busy, for a waiter; else look again (to name them)
        if (attempt.busyOnLostRace)
          return {
            ok: false,
            reason: 'LOCK_HELD',
            holder: null,
            why: 'a process that took it a moment ago',
            lostTo: record.generation,
          };
        continue;
      }

      // The slot is ours unless it refilled a gap below the top (we stalled while others went
      // on, and old slots were collected): then it is withdrawn, and nobody ever judged it.
      // §4.2's read-back is by inode: the slot is the very file we wrote.
      step('acquire:recheck');
      let names: string[];
      let slot: ReturnType<typeof lstatQuiet>;
      try {
        names = listLockDir(paths);
        slot = lstatQuiet(slotPath(paths, record.generation));
      } catch (err) {
        // a folder we cannot list now: withdraw the slot we cannot vouch for (left, it would
        // read as a live holder — ourselves — to our next look) and report the fault
        unlinkIfInode(slotPath(paths, record.generation), ino);
        throw lockDirError(paths, err);
      }
      if (highestSlot(paths, names) !== record.generation || slot?.ino !== ino) {
        if (slot?.ino === ino) unlinkQuiet(slotPath(paths, record.generation));
        continue;
      }
      mine = slot.ino;
      garbage = names;
      // The view: the same file under `<key>.lock` (a third link; no data written again).
      if (!pausedSince(started, clock, opts)) {
        try {
          step('acquire:write-view');
          placed = placeView(paths, tmp, names.includes(paths.lockName) || look.foreign !== null);
        } catch (err) {
          // the view is for people and tools; the slot is the lock
          ioNotice(err, 'linking the lock view', paths.lock, VIEW_ONLY);
        }
      }
    } finally {
      unlinkQuiet(tmp);
    }
    const view: ViewStamp | null = placed ? stampView(paths, mine) : null;
    const lease = new FileLease({
      paths,
      record,
      slotIno: mine,
      view,
      timing: opts,
      clock,
      probe,
      confirmedAt: started,
      ...(opts.hooks ? { hooks: opts.hooks } : {}),
    });
    try {
      // the heartbeat file exists from now on, rewritten in place: keeping the lease needs no
      // new blocks or inodes (SPEC §4.15)
      lease.createBeat(garbage.filter((n) => isSpareName(paths, n)));
    } catch (err) {
      lease.releaseSync();
      throw stateWriteError(err, beatPath(paths, record.lock_id), 'creating the lock in');
    }
    if (pausedSince(started, clock, opts)) {
      // Paused long enough for our own record to expire: someone may judge it stale any moment.
      lease.releaseSync();
      return { ok: false, reason: 'LOCK_HELD', holder: null, why: 'paused while acquiring; try again' };
    }
    let takeover: Takeover | null = null;
    if (look.stale) {
      const text = look.top ? serializeLockRecord(look.top.record) : look.badText;
      staleFile = (text === null ? null : keepStaleCopy(ctx, text)) ?? staleFile;
      takeover = { why: look.stale.why, staleFile, orphans };
    } else if (look.foreign) {
      takeover = { why: look.foreign.why, staleFile, orphans };
    }
    collectGarbage(ctx, garbage, record.generation, record.lock_id);
    lease.tookOver = takeover !== null;
    if (takeover) lease.tookOverFrom = look.top?.record ?? look.beaten ?? look.foreign?.record ?? null;
    return { ok: true, lease, takeover };
  }
  const look = lookAtLock(paths, clock.now(), probe, { floor: opts.generationFloor });
  const holder = look.kind === 'held' ? look.holder : null;
  return { ok: false, reason: 'LOCK_HELD', holder, why: 'the lock changed hands too often to take it' };
}

function newRecord(opts: FileLockOptions, probe: LivenessProbe, generation: number, nowMs: number): LockRecord {
  return {
    version: 1,
    key: opts.key,
    lock_id: randomHex(16),
    generation,
    // who holds it is this process, whatever `owner` says (a caller's pid, host, boot or start
    // time would make a live holder look dead or foreign, and be taken over)
    owner: { ...opts.owner, ...selfIdentity(probe), children: [] },
    created_at: toEpochSeconds(nowMs),
    heartbeat_at: toEpochSeconds(nowMs),
    expires_at: toEpochSeconds(nowMs + opts.ttlMs),
  };
}

const pausedSince = (started: number, clock: Clock, opts: FileLockOptions): boolean =>
  clock.monotonic() - started >= opts.ttlMs - giveUpLeadMs(opts.ttlMs);

function writeTemp(paths: LockPaths, tmp: string, data: string): number {
  try {
    return writeNewFile(tmp, data);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') {
      try {
        ensureDir(paths.dir);
        return writeNewFile(tmp, data);
      } catch (again) {
        throw lockDirError(paths, again);
      }
    }
    throw lockDirError(paths, err);
  }
}

/** Removes `path` if it is still the file `ino` (quietly: this is clean-up on a failing path). */
function unlinkIfInode(path: string, ino: number): void {
  try {
    if (lstatQuiet(path)?.ino === ino) unlinkQuiet(path);
  } catch {
    // the folder fails: the slot stays, and its holder (us) is gone when we exit
  }
}

function lockDirError(paths: LockPaths, err: unknown): Error {
  if (err instanceof UnsafePathError) return err;
  const code = errnoCode(err);
  if (code === undefined) return err as Error;
  // A full or failing disk is an I/O error on state (exit 74), not bad usage.
  if (code === 'ENOSPC' || code === 'EDQUOT' || code === 'EIO' || code === 'EROFS')
    return stateWriteError(err, paths.dir, 'creating the lock in');
  const said = code === 'EEXIST' ? `a leftover temp file is in the way (${code})` : errnoWords(code);
  return new UnsafePathError(`cannot create the lock in ${paths.dir}: ${said}; check ROUTINELY_LOCK_DIR / stateDir`);
}
