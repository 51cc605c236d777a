#!/usr/bin/env node
// The command line's executable (package.json "bin"): compiles the entry (cli-main.cjs, built
// from main.ts) with the V8 code cache the build made beside it (scripts/code-cache.mjs), so a
// short command does not parse and compile its code again on every start (issue 52: ≈ 7 % of
// `routine list`'s CPU time at 1 000 routines). A cache this Node.js does not accept (another V8,
// other flags) is ignored by V8 itself, and the entry compiles as usual.
//
// A script compiled from a code cache cannot import() (Node.js keeps no import callback for it):
// the full path's program, an ES module, is imported here and handed to the entry.

import Module, { createRequire } from 'node:module';
import { join } from 'node:path';
import { Script } from 'node:vm';
import { PROGRAM } from './program-import.js';
import { readPackageCache, readPackageText } from '../fs/package-file.js';

(globalThis as Record<symbol, unknown>)[PROGRAM] = () => import('./program.js');
const file = join(__dirname, 'cli-main.cjs');
// without a cache (or with one older than the entry), compiled as usual
const cachedData = readPackageCache(`${file}.v8cache`, file);
const script = new Script(Module.wrap(readPackageText(file)), { filename: file, cachedData });
const entry = new Module(file, module);
entry.filename = file;
const run = script.runInThisContext() as (...args: unknown[]) => void;
run.call(entry.exports, entry.exports, createRequire(file), entry, file, __dirname);
