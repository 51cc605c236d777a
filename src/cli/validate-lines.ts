// The lines of `routinely validate`, shared by the full command (validate-command.ts) and the
// fast path from the cache (fast-validate.ts), so the two print the same bytes by construction.

/** `routinely.json: valid (3 routines, 2 inline tasks)` */
export function validHeader(path: string, routines: number, tasks: number): string {
  return `${path}: valid (${routines} routine${routines === 1 ? '' : 's'}, ${tasks} inline task${tasks === 1 ? '' : 's'})`;
}

/** `nightly  0 3 * * *  (Europe/Paris; command, disabled)` */
export function routineLine(
  r: { id: string; schedule: string; action: string; enabled: boolean },
  zone: string,
): string {
  const flags = [r.action, r.enabled ? null : 'disabled'].filter(Boolean).join(', ');
  return `${r.id}  ${r.schedule}  (${zone}; ${flags})`;
}

/** `  2026-12-03 03:00:00 GMT+1   2026-12-03T02:00:00.000Z`: the time as shown in its zone, and UTC. */
export function timeLine(shown: string, atMs: number): string {
  return `  ${shown}   ${new Date(atMs).toISOString()}`;
}
