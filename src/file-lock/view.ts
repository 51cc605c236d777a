// `<key>.lock`, the view (docs/lock.md "Design"): one more name of the holder's slot file, so
// people, scripts and `cat` find the holder where SPEC §3/§4 say. Placed when the lock is taken,
// healed by the holder, removed on release; a record there that is no slot's copy is judged
// like a slot (look.ts). Who holds the lock is never decided by the view alone.

import type { Stats } from 'node:fs';
import { errnoCode } from '../errors.js';
import { ioNotice } from '../fs/io-notice.js';
import { renameOver } from '../fs/names.js';
import { printable } from '../printable.js';
import { LOCK_FILE_CAP, linkNew, readFileChecked, unlinkQuiet } from '../fs/files.js';
import { randomHex } from '../fs/random-ids.js';
import { lstatQuiet } from '../fs/look.js';
import { slotPath, type LockPaths } from './paths.js';
import { parseLockRecord, type LockRecord } from '../lock/record.js';
import type { SlotHolder } from './slots.js';

/** `<key>.lock` as found: absent, unreadable, or a record with the inode it is linked to. */
export type ViewRead =
  | { kind: 'missing' }
  | { kind: 'unreadable'; ino: number; text: string }
  | { kind: 'ok'; record: LockRecord; ino: number; text: string };

/** Reads `<key>.lock`. A symlink, FIFO, device or oversized file there is refused (thrown):
 * nobody but the user can put it there, and it is nothing routinely wrote. */
export function readView(paths: LockPaths): ViewRead {
  const content = readFileChecked(paths.lock, LOCK_FILE_CAP);
  if (content === null) return { kind: 'missing' };
  const rec = parseLockRecord(content.text);
  if (!rec || rec.key !== paths.key) return { kind: 'unreadable', ino: content.ino, text: content.text };
  return { kind: 'ok', record: rec, ino: content.ino, text: content.text };
}

/** `<key>.lock` when it is not the copy of the top slot or of an older one: a record written in
 * SPEC §4's format by something else than our slots (a tool, a test, a hand), or garbage. SPEC
 * §4 names this file as the lock, so such a record is honoured by the rules of §4.4 like a slot:
 * held while its owner lives and its heartbeat is fresh, taken over (and kept) once stale. */
export function classifyView(
  view: ViewRead,
  max: number | null,
  top: SlotHolder | null,
  ofReleasedTop = false,
): { record: LockRecord | null; ino: number; text: string } | null {
  if (view.kind === 'missing') return null;
  // (`ofReleasedTop`: the very file of the top slot, released — left by a release that could not
  // remove it, an I/O error: the lock is free)
  if (ofReleasedTop) return null;
  if (
    view.kind === 'ok' &&
    max !== null &&
    (view.record.generation < max || view.record.lock_id === top?.record.lock_id)
  )
    return null;
  return { record: view.kind === 'ok' ? view.record : null, ino: view.ino, text: view.text };
}

/** Puts our record under `<key>.lock` as one more name of the slot's file: link(2) when the name
 * is free, a rename of our temp name over it when an older view is there. */
export function placeView(paths: LockPaths, tmp: string, replace: boolean): true {
  if (!replace && linkNew(tmp, paths.lock)) return true;
  renameOver(tmp, paths.lock);
  return true;
}

/** The view as it is now (inode and change time), so the holder notices any later edit. */
export function stampView(paths: LockPaths, ino: number): ViewStamp | null {
  let st;
  try {
    st = lstatQuiet(paths.lock);
  } catch (err) {
    // (an I/O error: the view is for people and tools, the slot is the lock; healed at a beat)
    if (errnoCode(err) === undefined) throw err;
    return null;
  }
  return st && st.ino === ino ? { ino: st.ino, ctimeMs: st.ctimeMs } : null;
}

/** Removes `<key>.lock` if it is still the copy we wrote (inode `ino`): moved to a temp name of
 * ours first, then checked, and put back if a successor's view had replaced ours meanwhile (a
 * stall between our check and the move). So a stalled release never deletes a successor's view;
 * at worst the name is empty for the moment between the move and the put-back. */
export function removeView(paths: LockPaths, ino: number, step: (name: string) => void): void {
  const aside = `${paths.dir}/${paths.tmpPrefix}${randomHex(8)}`;
  step('release:move-view');
  try {
    renameOver(paths.lock, aside);
  } catch (err) {
    // gone already (a successor, or `lock break`), or a fault that leaves only the view behind:
    // the release is the mark linked next, and the next holder replaces the view
    if (errnoCode(err) !== 'ENOENT')
      ioNotice(
        err,
        'moving aside the lock view',
        paths.lock,
        'only the view is left behind: the lock is released all the same, and its next holder replaces the view',
      );
    return;
  }
  if (lstatQuiet(aside)?.ino !== ino && !lstatQuiet(paths.lock)) linkNew(aside, paths.lock);
  unlinkQuiet(aside);
}

export interface ViewStamp {
  ino: number;
  ctimeMs: number;
}

/** Points `<key>.lock` at slot `generation` again (one more link to its file, renamed over
 * whatever view is there: replaced whole, never half-written). Returns the view's stamp. */
export function linkView(paths: LockPaths, generation: number, slotIno: number): ViewStamp | null {
  const tmp = `${paths.dir}/${paths.tmpPrefix}${randomHex(8)}`;
  if (!linkNew(slotPath(paths, generation), tmp)) return null;
  try {
    renameOver(tmp, paths.lock);
  } finally {
    unlinkQuiet(tmp);
  }
  const st = lstatQuiet(paths.lock);
  return st && st.ino === slotIno ? { ino: st.ino, ctimeMs: st.ctimeMs } : null;
}

/** The view `st` is the very file we stamped, unchanged since. */
export const sameStamp = (st: Stats, stamp: ViewStamp | null): boolean =>
  st.ino === stamp?.ino && st.ctimeMs === stamp.ctimeMs;

export type ViewFinding = { kind: 'ours'; stamp: ViewStamp } | { kind: 'harmless' } | { kind: 'claim'; who: string };

/** What the holder of `rec` makes of a `<key>.lock` (found as `st`) that is not the copy it
 * stamped: its own record after all (stamped anew); harmless (gone, unreadable for now, or an
 * older holder's view that a stalled release or acquire put back: healed at the next beat); or a
 * claim by someone else — a record of our generation or a later one, or one nobody can read. */
export function judgeView(paths: LockPaths, rec: LockRecord, st: Stats, slotIno?: number): ViewFinding {
  let read: ViewRead;
  try {
    read = readView(paths);
  } catch {
    return { kind: 'harmless' };
  }
  if (read.kind === 'missing') return { kind: 'harmless' };
  if (read.kind === 'ok' && read.record.lock_id === rec.lock_id && read.record.generation === rec.generation) {
    return { kind: 'ours', stamp: { ino: st.ino, ctimeMs: st.ctimeMs } };
  }
  if (read.kind === 'ok' && (read.record.generation < rec.generation || read.record.lock_id === rec.lock_id))
    return { kind: 'harmless' };
  // our own slot's file (the view is a hard link to it) made unreadable — zeroed by a crash or a
  // hand — claims nothing: our slot is still the top one (checked before), so still ours
  if (read.kind !== 'ok' && st.ino === slotIno) return { kind: 'ours', stamp: { ino: st.ino, ctimeMs: st.ctimeMs } };
  // an empty file put there (`rm exec-run.lock; touch exec-run.lock`) names nobody: no claim
  // (SPEC §4.3: a lock is lost to another lock_id), healed at the next beat; a non-empty one
  // that does not read is taken for a claim being written
  if (read.kind === 'unreadable' && read.text.trim() === '') return { kind: 'harmless' };
  const who =
    read.kind === 'ok'
      ? `pid ${read.record.owner.pid} on ${printable(read.record.owner.host)} (generation ${read.record.generation})`
      : 'an unreadable record';
  return { kind: 'claim', who };
}

/** The holder's view, put back if it is missing or shows an older holder (its new stamp). */
export function healView(
  paths: LockPaths,
  rec: LockRecord,
  slotIno: number,
  stamp: ViewStamp | null,
  step: (name: string) => void,
): ViewStamp | null {
  const view = lstatQuiet(paths.lock);
  if (view && sameStamp(view, stamp)) return stamp;
  if (view) {
    const read = readView(paths);
    if (read.kind === 'ok' && read.record.lock_id === rec.lock_id && read.record.generation === rec.generation)
      return { ino: view.ino, ctimeMs: view.ctimeMs };
  }
  step('beat:heal-view');
  return linkView(paths, rec.generation, slotIno);
}
