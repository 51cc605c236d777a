// Error classes with stable codes. Only src/cli/main.ts maps them to process exit codes
// (SPEC §7); library callers get typed results for the expected outcomes (busy, lost) and
// these errors only for bad input or impossible I/O.

export const ExitCode = {
  OK: 0,
  FAILED: 1,
  USAGE: 2,
  BUSY: 75,
  SIGINT: 130,
  SIGTERM: 143,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

export abstract class RoutinelyError extends Error {
  abstract readonly code: string;
  abstract readonly exitCode: ExitCode;
}

/** Bad flag, bad argument, bad environment value. */
export class UsageError extends RoutinelyError {
  readonly code = 'USAGE';
  readonly exitCode = ExitCode.USAGE;
}

export interface ConfigIssue {
  /** The file the issue is in, when it is not the config file itself (task files). */
  file?: string;
  /** JSON path like `routines[2].schedule`; empty for the whole document. */
  path: string;
  message: string;
}

/** The config file (or a task file) is missing, unreadable, or invalid. */
export class ConfigError extends RoutinelyError {
  readonly code = 'CONFIG';
  readonly exitCode = ExitCode.USAGE;
  constructor(
    readonly file: string,
    readonly issues: ConfigIssue[],
  ) {
    super(issues.map((i) => `${i.file ?? file}: ${i.path ? `${i.path}: ` : ''}${i.message}`).join('\n'));
  }
}

/** A lock or state path that we refuse to use (symlink, not a directory, not writable). */
export class UnsafePathError extends RoutinelyError {
  readonly code = 'UNSAFE_PATH';
  readonly exitCode = ExitCode.USAGE;
}

/** State or lock I/O failed in a way we cannot work around (disk full, EIO, ...). */
export class StateIOError extends RoutinelyError {
  readonly code = 'STATE_IO';
  readonly exitCode = ExitCode.FAILED;
}

/** Input names a thing that does not exist or is malformed (run id, task id, routine id). */
export class NotFoundError extends RoutinelyError {
  readonly code = 'NOT_FOUND';
  readonly exitCode = ExitCode.USAGE;
}

export function errnoCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string'
    ? err.code
    : undefined;
}
