// One look at the lock folder (docs/lock.md "Design"): the listing, the highest slot and its
// holder's heartbeat, `<key>.lock` when it is no slot's copy; and the verdict of SPEC §4.4 on
// them: held, free (stale holders included, with what to take over), or look again.

import type { LockHooks } from '../lock/lease.js';
import type { LivenessProbe } from '../process/identity.js';
import { readBeat } from './beat.js';
import { generationFloor } from './generation.js';
import { listLockDir, highestFree, highestSlot, readSlot, type SlotHolder } from './slots.js';
import { freePath, slotPath, type LockPaths } from './paths.js';
import { lstatQuiet } from '../fs/look.js';
import { errnoCode } from '../errors.js';
import type { LockRecord } from '../lock/record.js';
import { describeHolder, judgeLock, type Judgement, type Observation } from '../lock/stale.js';
import { lostByThisProcess } from '../lock/lease-state.js';
import { classifyView, readView, type ViewRead } from './view.js';

/** The lock as one look at the folder finds it. */
export type Look =
  | { kind: 'retry' }
  | { kind: 'held'; holder: LockRecord; why: string; ownerCheck: 'alive' | 'remote' | 'unknown' }
  | {
      kind: 'free';
      /** The next generation to take. */
      next: number;
      names: string[];
      top: SlotHolder | null;
      /** Set when the top slot's holder is stale (not released): why. */
      stale: (Judgement & { stale: true }) | null;
      /** A top slot that does not parse: its content, kept for forensics on takeover. */
      badText: string | null;
      /** The stale holder of a top slot that does not parse, as its heartbeat file names it (its
       * groups are ended before the takeover, as a readable holder's are); null without one. */
      beaten: LockRecord | null;
      /** A `<key>.lock` that is no slot's copy, judged stale (moved aside when taking over). */
      foreign: { record: LockRecord | null; ino: number; text: string; why: string } | null;
    };

/** The step hook of a lock operation (tests pause or race at named steps). */
export const stepOf =
  (hooks: LockHooks | undefined) =>
  (name: string): void =>
    hooks?.step?.(name);

/** Reads the folder once and decides: held, free (perhaps after a takeover), or look again. */
export function lookAtLock(
  paths: LockPaths,
  nowMs: number,
  probe: LivenessProbe,
  o: { observe?: (signature: string) => Observation; hooks?: LockHooks; floor?: () => number } = {},
): Look {
  const step = stepOf(o.hooks);
  step('acquire:list');
  const names = listLockDir(paths);
  // The view is read only when the listing shows one (usually not: release removes it). A view
  // that appears after the listing belongs to a slot we did not see; our link then fails.
  let view: ViewRead = { kind: 'missing' };
  if (names.includes(paths.lockName)) {
    step('acquire:read-view');
    view = readView(paths);
  }
  const max = highestSlot(paths, names);
  let top: SlotHolder | null = null;
  let topBad: { why: string; text: string | null } | null = null;
  // A released top slot needs no reading at all: the common, uncontended case.
  const released = max !== null && names.includes(`${paths.freePrefix}${max}`);
  if (max !== null && !released) {
    step('acquire:read-slot');
    const r = readSlot(paths, max);
    if (r.kind === 'missing') return { kind: 'retry' }; // withdrawn or collected meanwhile
    if (r.kind === 'bad') topBad = r;
    else top = r.holder;
  }
  // A top slot that cannot be read (zeroed by a crash of a file system that does not journal
  // data, or by a hand) is judged by its holder's heartbeat, which names the holder: busy while
  // that holder lives and beats, stale on evidence (SPEC §4 rule 4), never free at once.
  const beaten = topBad && max !== null ? newestBeat(paths, names, max) : null;
  // (a view left by a release that could not remove it is the released top slot's own file)
  const ofReleasedTop = released && view.kind !== 'missing' && sameFile(slotPath(paths, max), view.ino);
  const foreignView = classifyView(view, max, top, ofReleasedTop);
  // What an observer times: the holder's identity and heartbeat — the same for a record seen as
  // the view and, once adopted, as a slot (a stale view is first made a slot of its own)
  const viewSig = foreignView
    ? foreignView.record
      ? `${foreignView.record.lock_id}@${foreignView.record.heartbeat_at}`
      : foreignView.text
    : '';
  const signature = [
    top?.signature ?? (beaten ? `${beaten.lock_id}@${beaten.heartbeat_at}` : topBad?.why) ?? '',
    viewSig,
  ]
    .filter((x) => x !== '')
    .join('|');
  const observation = o.observe?.(signature);

  let stale: (Judgement & { stale: true }) | null = null;
  if (top) {
    const verdict = lostByThisProcess(top.record.lock_id)
      ? {
          stale: true as const,
          reason: 'UNCHANGED' as const,
          why: 'a lease this process held and lost (its heartbeat could not be kept)',
        }
      : judgeLock(top.record, nowMs, probe, observation);
    if (!verdict.stale)
      return {
        kind: 'held',
        holder: top.record,
        why: describeHolder(top.record, nowMs),
        ownerCheck: verdict.ownerCheck,
      };
    // released since the listing (its heartbeat file, left as a spare, then no longer says how
    // fresh it was): free, not a takeover
    if (lstatQuiet(freePath(paths, max!))) return { kind: 'retry' };
    stale = verdict;
  } else if (topBad) {
    const verdict = beaten ? judgeLock(beaten, nowMs, probe, observation) : null;
    if (verdict && !verdict.stale) {
      return {
        kind: 'held',
        holder: beaten!,
        why: `${describeHolder(beaten!, nowMs)}; its lock record is unreadable (${topBad.why})`,
        ownerCheck: verdict.ownerCheck,
      };
    }
    stale = {
      stale: true,
      reason: 'UNREADABLE',
      why: verdict?.stale ? `${topBad.why}; its holder's heartbeat: ${verdict.why}` : topBad.why,
    };
  }
  let foreign: Extract<Look, { kind: 'free' }>['foreign'] = null;
  if (foreignView) {
    const verdict = judgeLock(foreignView.record, nowMs, probe, observation);
    if (!verdict.stale && foreignView.record) {
      return {
        kind: 'held',
        holder: foreignView.record,
        why: describeHolder(foreignView.record, nowMs),
        ownerCheck: verdict.ownerCheck,
      };
    }
    foreign = { ...foreignView, why: verdict.stale ? verdict.why : 'unreadable' };
  }
  const below = Math.max(max ?? 0, highestFree(paths, names), foreign?.record?.generation ?? 0);
  const floor = max === null ? generationFloor(paths, names, o.floor) : 0;
  const next = Math.max(below, floor) + 1;
  return { kind: 'free', next, names, top, stale, badText: topBad?.text ?? null, beaten, foreign };
}

/** The holder of slot `generation` as its newest heartbeat file tells it (a beat names its
 * holder), when the slot's record cannot be read; null without a beat that names one. */
function newestBeat(paths: LockPaths, names: readonly string[], generation: number): LockRecord | null {
  let best: LockRecord | null = null;
  for (const n of names) {
    if (!n.startsWith(paths.beatPrefix)) continue;
    const beat = readBeat(paths, n.slice(paths.beatPrefix.length));
    if (!beat?.owner || (best && best.heartbeat_at >= beat.heartbeat_at)) continue;
    best = {
      version: 1,
      key: paths.key,
      lock_id: beat.lock_id,
      generation,
      owner: { ...beat.owner, run_id: beat.run_id, routine: beat.routine, children: beat.children },
      created_at: beat.heartbeat_at,
      heartbeat_at: beat.heartbeat_at,
      expires_at: beat.expires_at,
    };
  }
  return best;
}

/** Whether `path` is the file with inode `ino` (false when it cannot be looked at now). */
function sameFile(path: string, ino: number): boolean {
  try {
    return lstatQuiet(path)?.ino === ino;
  } catch (err) {
    if (errnoCode(err) === undefined) throw err;
    return false;
  }
}
