// The command line's entry. `routine list` and `validate` with nothing but their own flags run
// their command straight away, which answers from the validated config's cache (no commander,
// zod, croner or ICU loaded) or returns null; every other command, and those the cache cannot
// answer, go through commander (program.ts).

import { listArgs, lockArgs, validateArgs } from './entry-args.js';
import { routineList } from './routine-list-command.js';
import { validate } from './validate-command.js';
import { createRequire } from 'node:module';
import { VERSION } from '../version.js';
import { reportError } from './report-error.js';
import { importProgram } from './program-import.js';
import { stayInBaselineTiers } from './baseline-tiers.js';
import { requireWithCodeCache } from './code-cache.js';
import { outputFailed } from '../fs/terminal.js';

const lazyRequire = createRequire(import.meta.url);

import type { GlobalOptions } from './globals.js';

export type { GlobalOptions };

async function run(argv: string[]): Promise<void> {
  const args = argv.slice(2);
  // what commander would print, without loading it (a version check in a script is a cold start)
  if (args.length === 1 && (args[0] === '--version' || args[0] === '-V')) {
    process.stdout.on('error', (e) => outputFailed(e, 1)).write(`${VERSION}\n`);
    return;
  }
  // a working folder removed under the shell (`cd d; rmdir ../d`): every path is made from it
  try {
    process.cwd();
  } catch {
    process.stderr.write(
      'routinely: the current folder no longer exists (removed, or moved away from this shell): cd to one that does\n',
    );
    process.exit(2);
  }
  // the start-up paths from the validated config's cache; null: the full path runs
  const fastPaths: (() => number | null | Promise<number | null>)[] = [
    () => {
      const a = listArgs(args);
      return a && routineList({ json: a.json, check: a.check }, { config: a.config });
    },
    () => {
      const a = validateArgs(args);
      if (!a) return null;
      stayInBaselineTiers();
      return validate({ config: a.config }, {});
    },
    () => {
      const a = lockArgs(args);
      // in a file of its own (cli-lock.cjs: it spawns, and other commands never load that),
      // required, not imported (import() would start the ESM loader: 10 ms), and compiled with
      // its code cache
      if (!a) return null;
      const commands = requireWithCodeCache(
        lazyRequire.resolve('./cli-lock.cjs'),
      ) as typeof import('./lock-commands.js');
      const g = { config: a.config };
      // reported by that file's own reporter: its error classes are its own copies
      return (
        a.kind === 'run'
          ? commands.lockRun(a.cmd, { ifBusy: a.ifBusy, waitTimeout: a.waitTimeout }, g)
          : commands.lockStatus({ json: a.json, key: a.key }, g)
      ).catch(commands.reportError);
    },
  ];
  for (const fast of fastPaths) {
    let code: number | null;
    try {
      code = await fast();
    } catch (error) {
      code = reportError(error);
    }
    if (code !== null) {
      // everything is written (synchronously: writeOut, or a terminal); exiting here skips the
      // tear-down of the heap the command grew (≈ 1 ms of `routine list` at 1 000 routines)
      process.exit(exitWith(code));
    }
  }
  stayInBaselineTiers();
  // A reader that goes away (`routinely routine list | head -1`) is no error of ours: output to
  // a closed pipe is dropped, never an unhandled 'error' event with a stack trace.
  // Output that cannot be written otherwise (a full disk) is said, and is no success (exit 74).
  for (const stream of [process.stdout, process.stderr])
    stream.on('error', (e) => outputFailed(e, stream === process.stdout ? 1 : 2));
  const program = await importProgram();
  const code = await program.main(argv);
  // a failed write's 'error' event comes a tick later (after this): the stream already knows
  if (process.stdout.errored) outputFailed(process.stdout.errored, 1);
  // Flush stdout (pipes are asynchronous) before exiting; within a limit where one is set (the
  // limit is the command's, set in the program's own bundle).
  if (process.stdout.destroyed || !process.stdout.writable) process.exit(exitWith(code));
  const limit = program.exitFlushLimit();
  if (limit !== null) setTimeout(() => process.exit(exitWith(code)), limit);
  process.stdout.write('', () => process.exit(exitWith(code)));
}

/** The command's exit code; a view (or `--version`) whose output could not be written exits 74
 * instead of 0: what it was asked for was not given, and nothing ran. A command that did its work
 * keeps its code (its work is recorded; the loss of its report was said on stderr). */
function exitWith(code: number): number {
  if (code !== 0 || process.exitCode !== 74) return code;
  // the command's words: not options, nor the value of the one global option that takes one
  const args = process.argv.slice(2);
  const [first = '', second = ''] = args.filter(
    (a, i) => !a.startsWith('-') && args[i - 1] !== '-c' && args[i - 1] !== '--config',
  );
  const view =
    first === '' ||
    ['validate', 'help'].includes(first) ||
    (first === 'exec' && ['status', 'runs', 'show', 'logs'].includes(second)) ||
    (first === 'routine' && ['list', 'history', 'logs'].includes(second)) ||
    (first === 'lock' && second === 'status') ||
    (first === 'scheduler' && second === 'status');
  return view ? 74 : code;
}

void run(process.argv);
