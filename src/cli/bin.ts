#!/usr/bin/env node
// The command line's executable (package.json "bin"): compiles the entry (cli-main.cjs, built
// from main.ts) with the V8 code cache the build made beside it (scripts/code-cache.mjs), so a
// short command does not parse and compile its code again on every start (issue 52: ≈ 7 % of
// `routine list`'s CPU time at 1 000 routines). A cache this Node.js does not accept (another V8,
// other flags) is ignored by V8 itself, and the entry compiles as usual.
//
// The full path's program (cli-program.cjs, built from program.ts) is loaded the same way, when
// the entry asks for it: handed to the entry here, since the entry runs from its cache.

import { join } from 'node:path';
import { PROGRAM } from './program-import.js';
import { requireWithCodeCache } from './code-cache.js';

/** The program's own file cannot be read (a failing disk, a broken install, no descriptor left):
 * said as the storage fault it is (SPEC §7: 74), not as a stack trace; anything else is the
 * file's own error, thrown on. Nothing has run yet when either file is loaded. */
function cannotRead(err: unknown, file: string): void {
  const e = err as NodeJS.ErrnoException;
  if (typeof e?.code !== 'string' || e.path !== file) throw err;
  const remedy =
    e.code === 'EMFILE' || e.code === 'ENFILE'
      ? 'no file descriptor was left: raise the limit (ulimit -n) or close some'
      : 'reinstall routinely';
  process.stderr.write(`routinely: cannot read its own program ${file} (${e.code}); ${remedy}\n`);
  process.exitCode = 74;
}

const program = join(__dirname, 'cli-program.cjs');
(globalThis as Record<symbol, unknown>)[PROGRAM] = () => {
  try {
    return Promise.resolve(requireWithCodeCache(program));
  } catch (err) {
    cannotRead(err, program);
    process.exit(74);
  }
};
const entry = join(__dirname, 'cli-main.cjs');
try {
  requireWithCodeCache(entry);
} catch (err) {
  cannotRead(err, entry);
}
