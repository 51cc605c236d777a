// How the entry (main.ts) reaches the full path's program (program.ts, an ES module): through
// the import() the executable (bin.ts) hands it, since the entry, compiled from V8's code cache,
// cannot import itself; its own import() where it runs without the executable (tests, the library).

import type * as Program from './program.js';

export const PROGRAM = Symbol.for('routinely.program');

export function importProgram(): Promise<typeof Program> {
  const handed = (globalThis as Record<symbol, unknown>)[PROGRAM] as (() => Promise<typeof Program>) | undefined;
  return handed ? handed() : import('./program.js');
}
