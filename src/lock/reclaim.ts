// Race-free reclaim of a stale lock (SPEC §4.5).
//
// The naive "judge stale, then rename" lets two reclaimers judge the same stale lock, and the
// slower one then moves aside the fresh lock the faster one just created (proper-lockfile #121).
// So reclaimers serialize on a short-lived guard file (`<key>.lock.reclaim`, created with link
// like the lock itself), and under the guard re-read the lock and move it aside only if its bytes
// are still exactly the ones judged stale. The rename goes to a unique name and is verified; if a
// fresh lock slipped in (its owner released and someone re-acquired between our check and our
// rename), it is linked back. A guard whose owner is dead, or that is older than a minute, is
// itself broken the same way, so a crashed reclaimer never blocks the lock for long.

import { readdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import type { Clock } from '../clock.js';
import { errnoCode } from '../errors.js';
import { linkNew, randomHex, readNoFollow, unlinkQuiet, writeNewFile } from './files.js';
import { raiseGeneration } from './generation.js';
import { samePidSpace, selfIdentity, type LivenessProbe } from './identity.js';
import { readChildJournal } from './children.js';
import { endOrphanGroups, type OrphanReport } from './orphans.js';
import type { LockPaths } from './paths.js';
import { parseLockRecord, type ChildGroup } from './record.js';

export const GUARD_MAX_AGE_MS = 60_000;
export const ORPHAN_GRACE_MS = 1_000;
export const STALE_FILES_KEPT = 20;

interface GuardRecord {
  guard_id: string;
  pid: number;
  host: string;
  boot_id: string | null;
  start_time: string | null;
  created_at: number;
}

export type ReclaimOutcome =
  | { kind: 'reclaimed'; staleFile: string; orphans: OrphanReport }
  | { kind: 'changed' }
  | { kind: 'guard-busy'; guardPid: number | null };

export interface ReclaimContext {
  paths: LockPaths;
  clock: Clock;
  probe: LivenessProbe;
}

/** Moves aside the lock whose exact bytes were judged stale. */
export async function reclaimStale(judgedRaw: string, ctx: ReclaimContext): Promise<ReclaimOutcome> {
  const guard = takeGuard(ctx);
  if (!guard.ok) return { kind: 'guard-busy', guardPid: guard.holderPid };
  try {
    if (readNoFollow(ctx.paths.lock) !== judgedRaw) return { kind: 'changed' };
    const record = parseLockRecord(judgedRaw);
    // Fencing survives the reclaim even if the dead holder never recorded its generation.
    if (record) raiseGeneration(ctx.paths, record.generation);
    // The stale holder's children: from its record, and from the children journals, which
    // also cover groups started since its last lock rewrite (and an unreadable record).
    const journals = readChildJournals(ctx);
    const children = [...journals.children];
    if (record && samePidSpace(record.owner, ctx.probe)) children.push(...(record.owner.children ?? []));
    let orphans: OrphanReport = { ended: [], killed: [] };
    if (children.length > 0) {
      orphans = await endOrphanGroups(uniqueChildren(children), ctx.probe, ctx.clock, ORPHAN_GRACE_MS);
      if (readNoFollow(ctx.paths.lock) !== judgedRaw) return { kind: 'changed' };
    }
    const staleFile = uniqueStaleName(ctx);
    try {
      renameSync(ctx.paths.lock, staleFile);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return { kind: 'changed' };
      throw err;
    }
    if (readNoFollow(staleFile) !== judgedRaw) {
      // A fresh lock slipped in between the check and the rename: put it back.
      if (linkNew(staleFile, ctx.paths.lock)) unlinkQuiet(staleFile);
      return { kind: 'changed' };
    }
    for (const f of journals.files) unlinkQuiet(f);
    pruneStaleFiles(ctx.paths);
    return { kind: 'reclaimed', staleFile, orphans };
  } finally {
    dropGuard(ctx, guard.id);
  }
}

/** Every `<key>.children.<lock_id>` file: while the lock is stale, no live holder owns one. */
function readChildJournals(ctx: ReclaimContext): { children: ChildGroup[]; files: string[] } {
  let names: string[];
  try {
    names = readdirSync(ctx.paths.dir).filter((n) => n.startsWith(ctx.paths.childrenPrefix));
  } catch {
    return { children: [], files: [] };
  }
  const files = names.map((n) => join(ctx.paths.dir, n));
  return { children: files.flatMap((f) => readChildJournal(f, ctx.probe)), files };
}

function uniqueChildren(children: ChildGroup[]): ChildGroup[] {
  const seen = new Map<number, ChildGroup>();
  for (const c of children) seen.set(c.pid, c);
  return [...seen.values()];
}

function uniqueStaleName(ctx: ReclaimContext): string {
  // Only guard holders create stale names, so checking for a free name is race-free here.
  const base = `${ctx.paths.lock}.stale.${ctx.clock.now()}`;
  for (let i = 0; ; i++) {
    const name = i === 0 ? base : `${base}-${i}`;
    try {
      if (readNoFollow(name) === null) return name;
    } catch {
      // a symlink or unreadable name: not free
    }
  }
}

/** Keeps the newest STALE_FILES_KEPT reclaimed locks of this key for forensics. */
export function pruneStaleFiles(paths: LockPaths): void {
  const prefix = `${paths.lockName}.stale.`;
  let names: string[];
  try {
    names = readdirSync(paths.dir).filter((n) => n.startsWith(prefix));
  } catch {
    return;
  }
  if (names.length <= STALE_FILES_KEPT) return;
  const stamp = (n: string): [number, number] => {
    const [ms, seq] = n.slice(prefix.length).split('-');
    return [Number(ms) || 0, Number(seq) || 0];
  };
  names.sort((a, b) => {
    const [am, as] = stamp(a);
    const [bm, bs] = stamp(b);
    return am - bm || as - bs;
  });
  for (const n of names.slice(0, names.length - STALE_FILES_KEPT)) unlinkQuiet(join(paths.dir, n));
}

type GuardTake = { ok: true; id: string } | { ok: false; holderPid: number | null };

function takeGuard(ctx: ReclaimContext): GuardTake {
  const me = selfIdentity(ctx.probe);
  const id = randomHex(16);
  const record: GuardRecord = { guard_id: id, ...me, created_at: ctx.clock.now() / 1000 };
  const tmp = `${ctx.paths.guard}.${id}.tmp`;
  writeNewFile(tmp, JSON.stringify(record));
  try {
    for (let attempt = 0; attempt < 3; attempt++) {
      if (linkNew(tmp, ctx.paths.guard)) return { ok: true, id };
      const raw = readNoFollow(ctx.paths.guard);
      if (raw === null) continue; // released in between
      const holder = parseGuard(raw);
      if (!guardIsStale(holder, ctx)) return { ok: false, holderPid: holder?.pid ?? null };
      if (!breakGuard(raw, ctx)) return { ok: false, holderPid: holder?.pid ?? null };
    }
    return { ok: false, holderPid: null };
  } finally {
    unlinkQuiet(tmp);
  }
}

function parseGuard(raw: string): GuardRecord | null {
  try {
    const v = JSON.parse(raw) as Partial<GuardRecord>;
    if (typeof v.guard_id === 'string' && typeof v.pid === 'number' && typeof v.host === 'string' && typeof v.created_at === 'number') {
      return v as GuardRecord;
    }
  } catch {
    // fall through
  }
  return null;
}

function guardIsStale(g: GuardRecord | null, ctx: ReclaimContext): boolean {
  if (g === null) return true;
  if (ctx.clock.now() / 1000 - g.created_at > GUARD_MAX_AGE_MS / 1000) return true;
  if (g.host !== ctx.probe.host) return false;
  if (g.boot_id && ctx.probe.bootId && g.boot_id !== ctx.probe.bootId) return true;
  const p = ctx.probe.inspect(g.pid);
  if (p.state === 'dead') return true;
  return p.state === 'alive' && !!p.startTime && !!g.start_time && p.startTime !== g.start_time;
}

/** Moves aside a stale guard, verifying it is the one judged; puts back anything else. */
function breakGuard(judgedRaw: string, ctx: ReclaimContext): boolean {
  const aside = `${ctx.paths.guard}.broken.${randomHex(6)}`;
  try {
    renameSync(ctx.paths.guard, aside);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return true;
    throw err;
  }
  if (readNoFollow(aside) === judgedRaw) {
    unlinkQuiet(aside);
    return true;
  }
  linkNew(aside, ctx.paths.guard);
  unlinkQuiet(aside);
  return false;
}

function dropGuard(ctx: ReclaimContext, id: string): void {
  try {
    const raw = readNoFollow(ctx.paths.guard);
    if (raw !== null && parseGuard(raw)?.guard_id === id) unlinkQuiet(ctx.paths.guard);
  } catch {
    // a guard we cannot read is not ours to remove; it goes stale on its own
  }
}
