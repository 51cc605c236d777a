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

(globalThis as Record<symbol, unknown>)[PROGRAM] = () =>
  Promise.resolve(requireWithCodeCache(join(__dirname, 'cli-program.cjs')));
const entry = join(__dirname, 'cli-main.cjs');
try {
  requireWithCodeCache(entry);
} catch (err) {
  // the program's own file cannot be read (a failing disk, a broken install): said as the
  // storage fault it is (SPEC §7: 74), not as a stack trace; anything else is the entry's own
  const e = err as NodeJS.ErrnoException;
  if (typeof e?.code !== 'string' || e.path !== entry) throw err;
  process.stderr.write(`routinely: cannot read its own program ${entry} (${e.code}); reinstall routinely\n`);
  process.exitCode = 74;
}
