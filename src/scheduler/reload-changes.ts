// What a reload changed, for its log line (`[scheduler] reloaded config (6 routines: added x;
// changed y)`): the scheduler's and `serve`'s.

import type { Config, RoutineDef } from '../config/types.js';

/** Which routines a reload added, removed and changed (any key of its definition), by id. */
export function routineChanges(
  before: readonly RoutineDef[],
  after: readonly RoutineDef[],
): { added: string[]; removed: string[]; changed: string[] } {
  const old = new Map(before.map((r) => [r.id, JSON.stringify(r)]));
  const ids = new Set(after.map((r) => r.id));
  return {
    added: after.filter((r) => !old.has(r.id)).map((r) => r.id),
    removed: before.filter((r) => !ids.has(r.id)).map((r) => r.id),
    changed: after.filter((r) => old.has(r.id) && old.get(r.id) !== JSON.stringify(r)).map((r) => r.id),
  };
}

/** The top-level settings other than the routines a reload changed (`locks`, `lock`, `http`…),
 * by name: a reload that changed only them is not "no change". */
export function settingsChanged(before: Config, after: Config): string[] {
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  keys.delete('routines');
  const b = before as unknown as Record<string, unknown>;
  const a = after as unknown as Record<string, unknown>;
  return [...keys].filter((k) => JSON.stringify(b[k]) !== JSON.stringify(a[k])).sort();
}
