// The history folder's stamp: how a reader of routine-state.json knows with one lstat that no
// history changed since the file was written (issue 52: `routine list` of 1 000 routines had
// looked at every history). A writer of the file that folds every history first sets the
// folder's times to a value of its own (a second ago, a random fraction) and writes it in the
// file. Whatever changes a history later changes the folder: an append is marked by a file of
// its writer's in the folder (`.writing.<who>`), named so before it and renamed away after it (to
// `.parked.<who>`, which the next append renames back: no file is made or removed per append). A
// mark of a live writer means no stamp; the mark, or parked mark, of a writer that is gone is
// removed. How and why: docs/design.md "routine-state.json".

import { join } from 'node:path';
import { uptime } from 'node:os';
import { monotonicMs } from '../clock.js';
import { unlinkQuiet } from '../fs/files.js';
import { lstatQuiet, statExact } from '../fs/look.js';
import { childPath, createMark, moveMark, removeMark, stampFolder } from '../fs/names.js';
import { ioNotice } from '../fs/io-notice.js';
import { selfIdentity, systemProbe, type LivenessProbe, type ProcessIdentity } from '../process/identity.js';

/** The start of a writer's mark: `.writing.<pid>.<start time>.<host>.<boot>.<pid namespace>`
 * (the last three hashed; `x` where unknown). No routine id starts with a dot. */
export const WRITING = '.writing.';

/** The start of a writer's mark between its appends: `.parked.` and the mark's own fields. */
export const PARKED = '.parked.';

const stampOf = (st: { ino: bigint; mtimeNs: bigint }): string => `${st.ino}:${st.mtimeNs}`;

/** The folder's stamp as it is now (inode and modification time to the nanosecond); null when
 * there is no such folder. */
export function currentStamp(dir: string): string | null {
  const st = statExact(dir, false);
  return st?.isDirectory() ? stampOf(st) : null;
}

/** Stamps the folder: its times set to a past second (up to 1 000 s ago) and a random count of
 * microseconds, which no later change gives it (a change sets the time it happens), nor another
 * stamp but by a one-in-a-billion chance. null when the folder does not then hold exactly that
 * value (someone changed it between the two calls; a file system that keeps whole seconds, where
 * every stamp of a second would be one) or its times cannot be set (a folder of another user's):
 * no stamp, readers look at every history. */
export function stampHistory(dir: string): string | null {
  const second = Math.floor(Date.now() / 1000) - 1 - Math.floor(Math.random() * 1000);
  const micros = 1000 + Math.floor(Math.random() * 998_000);
  try {
    const st = stampFolder(dir, second + micros / 1e6);
    // (the call takes seconds as a double, kept to the microsecond: ± 1 µs of rounding)
    const off = st.mtimeNs - (BigInt(second) * 1_000_000_000n + BigInt(micros) * 1000n);
    return off >= -1000n && off <= 1000n ? stampOf(st) : null;
  } catch {
    return null;
  }
}

/** 64 bits of FNV-1a (two 32-bit passes) in hex: names a host, boot or namespace in a mark. */
function hashed(s: string | null | undefined): string {
  if (!s) return 'x';
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ 0x5bd1e995;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x01000193) ^ (b >>> 13);
  }
  return (a >>> 0).toString(16).padStart(8, '0') + (b >>> 0).toString(16).padStart(8, '0');
}

/** The name of the mark of the process `who` names. */
export function markNameOf(who: ProcessIdentity): string {
  return `${WRITING}${who.pid}.${who.start_time ?? 'x'}.${hashed(who.host)}.${hashed(who.boot_id)}.${hashed(who.pid_ns)}`;
}

let mark: { pid: number; name: string } | null = null;

/** This process's mark. */
function markName(): string {
  if (mark?.pid !== process.pid) mark = { pid: process.pid, name: markNameOf(selfIdentity()) };
  return mark.name;
}

const parkedOf = (markName: string): string => `${PARKED}${markName.slice(WRITING.length)}`;

/** How many long-running stores of this process keep its mark named `.writing.` from one
 * append to the next (a scheduler, which appends twice a fire), and the folders where it is so. */
let keepers = 0;
const held = new Set<string>();

/** From now on (until the returned function is called), this process's mark stays named
 * `.writing.` after an append, until parkHeldMarks: two renames an append saved, at the cost of no
 * stamp while it is so. */
export function keepMarksBetweenAppends(parkAfterMs = PARK_AFTER_MS): () => void {
  parkAfter = parkAfterMs;
  keepers++;
  let done = false;
  return () => {
    if (!done) keepers--;
    done = true;
  };
}

/** A mark kept named `.writing.` is parked once this process has not appended for this long: a
 * scheduler killed (SIGKILL) or stopped (SIGSTOP) between its bursts of fires leaves no mark that
 * keeps every stamp away (a mark of another pid namespace is never removed here). */
const PARK_AFTER_MS = 2_000;
let parkAfter = PARK_AFTER_MS;
let lastAppend = 0;
let parkTimer: NodeJS.Timeout | null = null;

function parkWhenIdle(): void {
  lastAppend = monotonicMs();
  if (parkTimer === null) parkTimer = setTimeout(parkIdle, parkAfter).unref();
}

function parkIdle(): void {
  parkTimer = null;
  const idle = monotonicMs() - lastAppend;
  if (held.size > 0 && idle < parkAfter) parkTimer = setTimeout(parkIdle, parkAfter - idle).unref();
  else parkAllHeldMarks();
}

/** Every mark this process keeps named `.writing.`, parked (as it stops). */
export function parkAllHeldMarks(): void {
  for (const dir of [...held]) parkHeldMarks(dir);
}

/** This process's marks kept named `.writing.` in `dir`, parked now (before a stamp is set, and
 * as the process ends): the rename changes the folder after its last append, as endAppend's
 * does. A mark found gone changes the folder another way (endAppend). */
export function parkHeldMarks(dir: string): void {
  if (!held.delete(dir)) return;
  endAppend(dir, childPath(dir, markName()), false);
}

/** Before an append to a history in `dir`: the mark, to be parked after it (endAppend); null when
 * none could be made (no inode left): endAppend then touches the folder. The mark is this
 * process's parked one renamed (no file made: on ext4 without a journal a new file's inode is
 * looked for past every inode freed in the last minutes, docs/benchmarks.md), or, at its first
 * append, a file made. A rename sets the file's change time: markGone's "made before this boot"
 * reads that. */
export function beginAppend(dir: string): string | null {
  const name = markName();
  const path = childPath(dir, name);
  // kept named so since this process's last append here: nothing to rename (a mark removed
  // meanwhile, by someone who judged this process gone, is named again first)
  if (held.has(dir)) {
    if (lstatQuiet(path)) return path;
    held.delete(dir);
  }
  try {
    // (a mark left by this very process — a parking that failed — serves as well)
    if (!parkedMoved(childPath(dir, parkedOf(name)), path)) createMark(path);
    return path;
  } catch {
    return null;
  }
}

/** moveMark, with a failure other than "not there" said (a failing disk is never swallowed) and
 * taken as not moved: the callers then make the mark, or change the folder, another way. */
function parkedMoved(from: string, to: string): boolean {
  try {
    return moveMark(from, to);
  } catch (err) {
    ioNotice(err, 'renaming the history mark', from, 'the append is marked another way');
    return false;
  }
}

/** After the append: the mark parked, which changes the folder. Without a mark, or when it was
 * gone already (removed by someone who judged this process gone), the folder is changed anyway:
 * the mark made and removed again (what a writer may do in the folder), else its times set to
 * now (which only its owner may do). */
export function endAppend(dir: string, made: string | null, keep = true): void {
  // kept for the next append (a process that appends every second): still there, it keeps every
  // stamp away until it is parked (parkHeldMarks), which changes the folder after this append
  if (keep && keepers > 0 && made !== null && lstatQuiet(made)) {
    held.add(dir);
    parkWhenIdle();
    return;
  }
  held.delete(dir);
  if (made !== null && parkedMoved(made, childPath(dir, parkedOf(markName())))) return;
  const path = childPath(dir, markName());
  try {
    createMark(path);
    if (removeMark(path)) return;
  } catch {
    // no inode left, as at the start: the times, then
  }
  try {
    stampFolder(dir, Date.now() / 1000);
  } catch {
    // neither: the window docs/design.md names (a writer that could not mark its append)
  }
}

/** Whether a listing of the folder holds the mark of a writer that may be appending now (alive,
 * or one that cannot be told: another host's, another pid namespace's). Marks and parked marks of
 * writers that are gone are removed; `removed` says whether one was (the folder changed). */
export function writersIn(
  dir: string,
  names: readonly string[],
  probe: LivenessProbe = systemProbe(),
): { live: boolean; removed: boolean } {
  let live = false;
  let removed = false;
  const bootedAt = Date.now() - uptime() * 1000;
  for (const n of names) {
    const parked = n.startsWith(PARKED);
    if (!parked && !n.startsWith(WRITING)) continue;
    // the change time: when the file was made, or last renamed to this name (an append began)
    const madeBeforeBoot = (): boolean => (lstatQuiet(join(dir, n))?.ctimeMs ?? Infinity) < bootedAt;
    if (!markGone(parked ? `${WRITING}${n.slice(PARKED.length)}` : n, probe, madeBeforeBoot)) {
      // a parked mark is no append: its writer lives, and is not appending through it
      if (!parked) live = true;
      continue;
    }
    unlinkQuiet(join(dir, n));
    removed = true;
  }
  return { live, removed };
}

/** Whether the writer a mark names is gone: of this host and another boot, made before this
 * machine booted (a host name shared by another machine is not taken for a reboot), or, in this
 * boot and pid namespace, its pid is dead or now another process's. Anything that cannot be told
 * is not gone. */
export function markGone(name: string, probe: LivenessProbe, madeBeforeBoot: () => boolean): boolean {
  const [pid, start, host, boot, ns, more] = name.slice(WRITING.length).split('.');
  const n = Number(pid);
  if (more !== undefined || !Number.isSafeInteger(n) || n < 1 || host !== hashed(probe.host)) return false;
  if (boot !== hashed(probe.bootId)) return boot !== 'x' && probe.bootId !== null && madeBeforeBoot();
  if (ns !== hashed(probe.pidNs)) return false;
  const p = probe.inspect(n);
  if (p.state === 'dead') return true;
  return p.state === 'alive' && !!p.startTime && start !== 'x' && p.startTime !== start;
}
