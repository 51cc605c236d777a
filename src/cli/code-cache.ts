// Loading one of the command line's own CommonJS files (dist/cli-main.cjs, dist/cli-lock.cjs) with
// the V8 code cache the build made beside it (scripts/code-cache.mjs), so a short command does not
// parse and compile its code again on every start. A cache this Node.js does not accept (another
// V8, other flags) is ignored by V8 itself, and the file compiles as usual. A script compiled so
// cannot import() (Node.js keeps no import callback for it): these files only require().

import Module, { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { Script } from 'node:vm';
import { readPackageCache, readPackageText } from '../fs/package-file.js';

/** Runs `file` (an absolute path) as a CommonJS module compiled with its code cache; its exports. */
export function requireWithCodeCache(file: string): unknown {
  // without a cache (or with one older than the file), compiled as usual
  const cachedData = readPackageCache(`${file}.v8cache`, file);
  const script = new Script(Module.wrap(readPackageText(file)), { filename: file, cachedData });
  const entry = new Module(file);
  entry.filename = file;
  const run = script.runInThisContext() as (...args: unknown[]) => void;
  run.call(entry.exports, entry.exports, createRequire(file), entry, file, dirname(file));
  return entry.exports;
}
