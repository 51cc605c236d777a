// Taking over from a stale holder (SPEC §4.4, §4.5), and keeping the lock folder small.
//
// With slots, a reclaim needs no guard: whoever finds the top slot's holder stale ends that
// holder's orphaned groups and then tries to link the next slot, which only one process can do.
// Every reclaimer ends the orphans before its own link, so the winner never runs beside them.
// What is moved or removed here is named by the stale holder's own lock_id or generation, so a
// reclaimer that stalls anywhere can only repeat work on files of a holder that is gone anyway.

import type { Clock } from '../clock.js';
import { errnoCode } from '../errors.js';
import { readChildJournal } from './children.js';
import { linkNew, readFileChecked, unlinkQuiet, writeNewFile, LOCK_FILE_CAP } from '../fs/files.js';
import { lstatQuiet } from '../fs/look.js';
import { childPath, renameOver } from '../fs/names.js';
import { samePidSpace, type LivenessProbe } from '../process/identity.js';
import { endOrphanGroups, lockMarker, type OrphanReport } from './orphans.js';
import {
  freeGeneration,
  holderFileOwner,
  isSpareName,
  isStaleName,
  isTempName,
  journalPath,
  slotGeneration,
  type LockPaths,
} from './paths.js';
import { isLockId } from '../lock/record.js';
import { parseLockRecord, type ChildGroup, type LockRecord } from '../lock/record.js';
import { listLockDir } from './slots.js';

/** What reclaiming works on: the lock's files, the time, and who is alive. */
export interface ReclaimContext {
  paths: LockPaths;
  clock: Clock;
  probe: LivenessProbe;
}

const ORPHAN_GRACE_MS = 1_000;
const STALE_FILES_KEPT = 20;
/** Slots kept below the current one (forensics; the one below tells how the lock was taken). */
const SLOTS_KEPT = 3;
/** A temp file older than this belongs to a writer that died between creating and linking it. */
const TEMP_MAX_AGE_MS = 60_000;
/** Spare heartbeat files kept for the next holders (`<key>.spare.<random>`, file-lease.ts). */
const SPARES_KEPT = 2;

/** Ends the process groups a stale holder started on this host: those in its heartbeat and its
 * children journal, and (Linux) every process-group leader that carries its ROUTINELY_LOCK_ID,
 * which finds a command started in the moment before the holder recorded it (a holder can
 * stall or die right there). Never a group whose identity is not proven. */
export async function endHolderOrphans(holder: LockRecord, ctx: ReclaimContext): Promise<OrphanReport> {
  const none: OrphanReport = { ended: [], killed: [] };
  if (!samePidSpace(holder.owner, ctx.probe)) return none;
  const children: ChildGroup[] = [...(holder.owner.children ?? [])];
  if (isLockId(holder.lock_id)) {
    children.push(...readChildJournal(journalPath(ctx.paths, holder.lock_id), ctx.probe));
    for (const p of ctx.probe.markedGroupLeaders?.(lockMarker(holder.lock_id)) ?? [])
      children.push({ pid: p.pid, start_time: p.startTime });
  }
  if (children.length === 0) return none;
  const unique = [...new Map(children.map((c) => [c.pid, c])).values()];
  return endOrphanGroups(unique, {
    lockId: isLockId(holder.lock_id) ? holder.lock_id : null,
    holderPid: holder.owner.pid,
    probe: ctx.probe,
    clock: ctx.clock,
    graceMs: ORPHAN_GRACE_MS,
  });
}

/** Keeps the record of a reclaimed holder as `<key>.lock.stale.<ts>` (a new file). */
export function keepStaleCopy(ctx: ReclaimContext, text: string): string | null {
  for (let i = 0; i < 100; i++) {
    const name = staleName(ctx, i);
    try {
      writeNewFile(name, text);
      pruneStaleFiles(ctx.paths);
      return name;
    } catch (err) {
      if (errnoCode(err) === 'EEXIST') continue;
      return null; // forensics only: a full disk must not stop the takeover
    }
  }
  return null;
}

function staleName(ctx: ReclaimContext, i: number): string {
  const base = childPath(ctx.paths.dir, `${ctx.paths.stalePrefix}${ctx.clock.now()}`);
  return i === 0 ? base : `${base}-${i}`;
}

export type MoveAside = { moved: true; staleFile: string } | { moved: false };

/** Moves aside a `<key>.lock` that is no slot's copy (a record written in SPEC §4's format by
 * something else than our slots) after it was judged stale. The rename is verified by inode;
 * if a fresh view slipped in meanwhile it is linked back (the view is only a view: the slots
 * still say who holds the lock). */
export function moveAsideView(ctx: ReclaimContext, judgedIno: number): MoveAside {
  for (let i = 0; i < 100; i++) {
    const name = staleName(ctx, i);
    if (lstatQuiet(name)) continue;
    try {
      renameOver(ctx.paths.lock, name);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return { moved: false };
      throw err;
    }
    if (lstatQuiet(name)?.ino === judgedIno) {
      pruneStaleFiles(ctx.paths);
      return { moved: true, staleFile: name };
    }
    if (linkNew(name, ctx.paths.lock)) unlinkQuiet(name);
    return { moved: false };
  }
  return { moved: false };
}

/** Keeps the newest STALE_FILES_KEPT reclaimed locks of this key for forensics. */
export function pruneStaleFiles(paths: LockPaths, names?: readonly string[]): void {
  const prefix = paths.stalePrefix;
  let list: string[];
  try {
    list = (names ?? listLockDir(paths)).filter((n) => isStaleName(paths, n));
  } catch {
    return;
  }
  if (list.length <= STALE_FILES_KEPT) return;
  const stamp = (n: string): [number, number] => {
    const [ms, seq] = n.slice(prefix.length).split('-');
    return [Number(ms) || 0, Number(seq) || 0];
  };
  list.sort((a, b) => {
    const [am, as] = stamp(a);
    const [bm, bs] = stamp(b);
    return am - bm || as - bs;
  });
  for (const n of list.slice(0, list.length - STALE_FILES_KEPT)) unlinkQuiet(childPath(paths.dir, n));
}

/** After taking slot `generation` (the listing `names` taken just after): once garbage has
 * piled up a little (so a cycle does not pay for it every time), drops slots SLOTS_KEPT or more
 * below ours, the heartbeat and journal files of every holder but the kept slots' and ours,
 * and temp files of writers that died. Everything here is below the top slot or older than any
 * live writer's file, so removing it can never take anything from a holder. */
export function collectGarbage(
  ctx: ReclaimContext,
  names: readonly string[],
  generation: number,
  lockId: string,
): void {
  const { paths } = ctx;
  let slots = 0;
  let holders = 0;
  let temps = 0;
  let stale = 0;
  let spares = 0;
  for (const name of names) {
    if (isSpareName(paths, name)) spares++;
    else if (slotGeneration(paths, name) !== null || freeGeneration(paths, name) !== null) slots++;
    else if (holderFileOwner(paths, name) !== null) holders++;
    else if (isTempName(paths, name)) temps++;
    else if (isStaleName(paths, name)) stale++;
  }
  if (
    slots <= 2 * (SLOTS_KEPT + 3) &&
    holders <= 2 * SLOTS_KEPT + 2 &&
    temps <= 2 &&
    stale <= STALE_FILES_KEPT &&
    spares <= SPARES_KEPT + 2
  )
    return;
  // spares beyond a few (each holder takes one and leaves one: more are left by holders that
  // found none, or by two releases in a row)
  let sparesLeft = SPARES_KEPT;
  const keep = new Set([lockId]);
  for (let g = generation - SLOTS_KEPT + 1; g < generation; g++) {
    try {
      const rec = parseLockRecord(
        readFileChecked(childPath(paths.dir, `${paths.slotPrefix}${g}`), LOCK_FILE_CAP)?.text ?? '',
      );
      if (rec) keep.add(rec.lock_id);
    } catch {
      // unreadable: its files go
    }
  }
  const now = ctx.clock.now();
  const old = (name: string, ageMs: number): boolean => {
    const st = lstatQuiet(childPath(paths.dir, name));
    return st !== null && now - st.mtimeMs > ageMs;
  };
  for (const name of names) {
    try {
      const g = slotGeneration(paths, name) ?? freeGeneration(paths, name);
      if (g !== null) {
        if (g <= generation - SLOTS_KEPT) unlinkQuiet(childPath(paths.dir, name));
        continue;
      }
      const owner = holderFileOwner(paths, name);
      if (owner !== null) {
        if (!keep.has(owner)) unlinkQuiet(childPath(paths.dir, name));
        continue;
      }
      if (isSpareName(paths, name)) {
        if (sparesLeft-- <= 0) unlinkQuiet(childPath(paths.dir, name));
      } else if (isTempName(paths, name) && old(name, TEMP_MAX_AGE_MS)) unlinkQuiet(childPath(paths.dir, name));
    } catch {
      // garbage collection is best effort
    }
  }
  pruneStaleFiles(paths, names);
}

/** The highest generation any kept stale record shows (a floor when no slot survives). */
export function highestStaleGeneration(paths: LockPaths, names: readonly string[]): number {
  let max = 0;
  for (const name of names) {
    if (!isStaleName(paths, name)) continue;
    try {
      const rec = parseLockRecord(readFileChecked(childPath(paths.dir, name), LOCK_FILE_CAP)?.text ?? '');
      if (rec && rec.generation > max) max = rec.generation;
    } catch {
      // unreadable: contributes nothing
    }
  }
  return max;
}
