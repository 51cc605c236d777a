// What a command that threw says and exits with (SPEC §7): one reporter for the commands the
// entry runs itself (main.ts) and for commander's (program.ts). Never a stack trace (but with
// ROUTINELY_DEBUG for an unexpected error). Light: the entry loads it before anything else.

import { ExitCode, RoutinelyError, asStorageError } from '../errors.js';

/** commander's own errors, known by their code (commander is not loaded to ask instanceof). */
function commanderCode(e: unknown): string | null {
  const code: unknown = e instanceof Error ? (e as Error & { code?: unknown }).code : undefined;
  return typeof code === 'string' && code.startsWith('commander.') ? code : null;
}

export function reportError(thrown: unknown): number {
  // a storage fault reached here unnamed (a listing, a read): 74 with the path, as SPEC §7 says
  const error = asStorageError(thrown);
  const commander = commanderCode(error);
  if (commander !== null) {
    // commander printed its message already; help and version are not errors
    const shown = ['commander.helpDisplayed', 'commander.version', 'commander.help'];
    return shown.includes(commander) ? ExitCode.OK : ExitCode.USAGE;
  }
  if (error instanceof RoutinelyError) {
    process.stderr.write(`routinely: ${error.message}\n`);
    return error.exitCode;
  }
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`routinely: unexpected error: ${message}\n`);
  if (process.env.ROUTINELY_DEBUG && error instanceof Error && error.stack) process.stderr.write(`${error.stack}\n`);
  return ExitCode.FAILED;
}
