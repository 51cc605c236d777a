// The status server's routine rows (`routine list --json`'s), for the scheduler and `serve`.

import type { RoutineRows } from '../http/wiring.js';

/** `routine list --json`'s rows for the page, imported on use: a static import would make
 * esbuild split routine-commands into a shared chunk, one more file for every `routine list`. */
export const routineRows: RoutineRows = async (project, now, backend, warn) =>
  (await import('./routine-commands.js')).routineRows(project, now, backend, warn);
