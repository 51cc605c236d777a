#!/usr/bin/env node
// The command line's entry. `routine list` with nothing but its own flags first tries the fast
// path (fast-list.ts: the running scheduler's cache, no commander, zod, croner or ICU); every
// other command, and a list the cache cannot answer, goes through commander (program.ts).

import { fastListArgs } from './fast-args.js';
import { fastList } from './fast-list.js';

export type { GlobalOptions } from './program.js';

async function run(argv: string[]): Promise<void> {
  const fast = fastListArgs(argv.slice(2));
  if (fast) {
    const code = fastList(fast);
    if (code !== null) {
      // everything is written (synchronously); nothing else keeps the process alive
      process.exitCode = code;
      return;
    }
  }
  // A reader that goes away (`routinely routine list | head -1`) is no error of ours: output to
  // a closed pipe is dropped, never an unhandled 'error' event with a stack trace.
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {});
  const program = await import('./program.js');
  const code = await program.main(argv);
  // Flush stdout (pipes are asynchronous) before exiting; within a limit where one is set (the
  // limit is the command's, set in the program's own bundle).
  if (process.stdout.destroyed || !process.stdout.writable) process.exit(code);
  const limit = program.exitFlushLimit();
  if (limit !== null) setTimeout(() => process.exit(code), limit);
  process.stdout.write('', () => process.exit(code));
}

void run(process.argv);
