// The local spool of records the database could not take (SPEC §6: every fire that started is
// recorded exactly once): `<stateDir>/spool/<routine>.<key>.json`, one durable file per record,
// removed once the database has it; keyed by the open fire's id, so a record spooled twice is one
// file and recording it again a no-op. Every file is input when read back (SPEC §12): one that is
// not ours is moved aside and reported (docs/design.md "The spool").

import { join } from 'node:path';
import { lstatQuiet } from '../fs/look.js';
import { namesIn, unlinkQuiet } from '../fs/files.js';
import { moveAside } from '../fs/names.js';
import { readJsonState, writeJsonDurable } from './json-file.js';
import { checkFire, type Fire } from './routine-state.js';

export type SpoolRecord =
  | { kind: 'fire'; routine: string; fire: Fire; spooled_at: string; why: string; claimer?: string }
  | { kind: 'claim'; routine: string; scheduled_at: string; host: string; spooled_at: string; why: string };

export interface Spooled {
  path: string;
  record: SpoolRecord;
}

const ROUTINE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const NAME = /^([A-Za-z0-9][A-Za-z0-9._-]{0,63})\.((?:claim-)?[0-9a-f]{1,64})\.json$/;
/** A spool file is a few hundred bytes; anything much larger is not ours. */
const SPOOL_FILE_CAP = 64 * 1024;

export const spoolDir = (stateDir: string): string => join(stateDir, 'spool');

/** The record's idempotency key: the open fire it closes, or its own key. */
export function spoolKey(r: SpoolRecord): string {
  if (r.kind === 'claim') return `claim-${Date.parse(r.scheduled_at).toString(16)}`;
  const key = r.fire.closes ?? r.fire.key;
  if (!key) throw new Error('a spooled fire needs an id (closes or key)');
  return key;
}

/** Writes the record durably and returns its path. */
export function writeSpool(stateDir: string, record: SpoolRecord): string {
  // (an id has no `/`, so even `a..b` names a file in the spool folder, as config ids may)
  if (!ROUTINE_ID.test(record.routine)) throw new Error(`invalid routine id ${JSON.stringify(record.routine)}`);
  const path = join(spoolDir(stateDir), `${record.routine}.${spoolKey(record)}.json`);
  writeJsonDurable(path, { version: 1, ...record });
  return path;
}

/** Validates one spool file's content against the name it was found under. */
export function checkSpoolRecord(v: unknown, routine: string): SpoolRecord | string {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return 'not an object';
  const o = v as Record<string, unknown>;
  if (o.version !== 1) return `unknown version ${JSON.stringify(o.version)}`;
  if (o.routine !== routine) return `routine ${JSON.stringify(o.routine)} does not match the file name`;
  const spooledAt = typeof o.spooled_at === 'string' && Number.isFinite(Date.parse(o.spooled_at)) ? o.spooled_at : null;
  if (!spooledAt) return 'no spooled_at';
  const why = typeof o.why === 'string' ? o.why.slice(0, 1024) : '';
  if (o.kind === 'fire') {
    const fire = checkFire(o.fire);
    if (!fire) return 'not a fire record';
    if (!fire.closes && !fire.key) return 'a fire without an id';
    // the claimer of a claimed tick's record: stored only while the claim is still its own
    const claimer =
      typeof o.claimer === 'string' && o.claimer.length > 0 && o.claimer.length <= 255 ? { claimer: o.claimer } : {};
    return { kind: 'fire', routine, fire, spooled_at: spooledAt, why, ...claimer };
  }
  if (o.kind === 'claim') {
    if (typeof o.scheduled_at !== 'string' || !Number.isFinite(Date.parse(o.scheduled_at))) return 'no scheduled_at';
    if (typeof o.host !== 'string' || o.host.length === 0 || o.host.length > 255) return 'no host';
    return {
      kind: 'claim',
      routine,
      scheduled_at: new Date(o.scheduled_at).toISOString(),
      host: o.host,
      spooled_at: spooledAt,
      why,
    };
  }
  return `unknown kind ${JSON.stringify(o.kind)}`;
}

/** Every spooled record, oldest fire first. A file that is not one (corrupt, forged, a symlink,
 * a FIFO) is moved aside as `<name>.corrupt.<ts>` and reported through `warn`. */
export function listSpool(stateDir: string, warn: (message: string) => void): Spooled[] {
  const dir = spoolDir(stateDir);
  const names = namesIn(dir);
  const out: Spooled[] = [];
  for (const name of names) {
    const m = NAME.exec(name);
    if (!m) continue; // temp files of a writer, files moved aside
    const path = join(dir, name);
    // written 0600 by us: a file others could have written is not taken as a fact
    const st = lstatQuiet(path);
    if (st?.isFile() && (st.mode & 0o022) !== 0) {
      const aside = `${path}.corrupt.${Date.now()}`;
      const moved = moveAside(path, aside);
      warn(
        `spool file ${path} is not a record of ours (others may write it, mode ${(st.mode & 0o777).toString(8).padStart(4, '0')}); ${moved ? `moved aside to ${aside}` : 'left in place'}, not recorded`,
      );
      continue;
    }
    const r = readJsonState(path, (v) => checkSpoolRecord(v, m[1]!), { moveAside: true, cap: SPOOL_FILE_CAP });
    if (r.kind === 'ok') out.push({ path, record: r.value });
    else if (r.kind === 'corrupt')
      warn(
        `spool file ${path} is not a record of ours (${r.problem}); ${r.movedTo ? `moved aside to ${r.movedTo}` : 'left in place'}, not recorded`,
      );
  }
  const at = (s: Spooled): string => (s.record.kind === 'fire' ? s.record.fire.started_at : s.record.scheduled_at);
  return out.sort((a, b) => (at(a) < at(b) ? -1 : at(a) > at(b) ? 1 : 0));
}

/** How many records wait in the spool (for `routine list`). */
export function spoolCount(stateDir: string): number {
  try {
    return namesIn(spoolDir(stateDir)).filter((n) => NAME.test(n)).length;
  } catch {
    return 0;
  }
}

export const removeSpooled = (path: string): void => unlinkQuiet(path);

/** Whether the spool holds a record closing `openId` (a fire whose outcome waits there is not
 * lost: views do not show it as interrupted either). */
export function isSpooled(stateDir: string, openId: string): boolean {
  try {
    return namesIn(spoolDir(stateDir)).some((name) => name.endsWith(`.${openId}.json`));
  } catch {
    return false; // a spool that cannot be read cannot be recorded from either (missing: nothing spooled)
  }
}
