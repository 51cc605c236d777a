// How the entry (main.ts) reaches the full path's program (program.ts): through the loader the
// executable (bin.ts) hands it, which compiles the built program (cli-program.cjs) with its code
// cache; its own import() where it runs without the executable (tests, from the sources).

import type * as Program from './program.js';

export const PROGRAM = Symbol.for('routinely.program');

export function importProgram(): Promise<typeof Program> {
  const handed = (globalThis as Record<symbol, unknown>)[PROGRAM] as (() => Promise<typeof Program>) | undefined;
  return handed ? handed() : import('./program.js');
}
