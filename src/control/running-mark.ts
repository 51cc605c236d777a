// `<stateDir>/scheduler.running`: the file every scheduler opens at start and keeps open for its
// life (Node opens files close-on-exec: its commands do not inherit it). `scheduler stop` signals a
// process only if it holds this project's mark open (control/control.ts): a lock record or a
// database row can name any process, only the process itself can hold the file (SPEC §12).

import { join } from 'node:path';
import { holdOpen } from '../fs/names.js';
import { ensureStateRoot } from '../state/json-file.js';

export const runningMark = (stateDir: string): string => join(stateDir, 'scheduler.running');

let held: number | null = null;

/** Opens this project's mark and keeps it open for the life of the process; when it cannot, says
 * so through `warn` (the scheduler runs on, but `scheduler stop` will not signal it). */
export function holdRunningMark(stateDir: string, warn: (message: string) => void): void {
  try {
    openMark(stateDir);
  } catch (err) {
    warn(
      `${(err as Error).message}: \`routinely scheduler stop\` cannot prove this is the project's scheduler, and will not signal it (stop it with SIGTERM)`,
    );
  }
}

function openMark(stateDir: string): void {
  if (held !== null) return;
  ensureStateRoot(stateDir);
  // read-only: a file held open for writing would keep the state disk from being remounted
  // read-only (EBUSY), and nothing is ever written to the mark
  held = holdOpen(runningMark(stateDir));
}
