// Error classes with stable codes. Only src/cli/main.ts maps them to process exit codes
// (SPEC §7); library callers get typed results for the expected outcomes (busy, lost) and
// these errors only for bad input or impossible I/O.

export const ExitCode = {
  OK: 0,
  FAILED: 1,
  USAGE: 2,
  NOT_RUNNING: 3,
  IO: 74,
  BUSY: 75,
  SIGINT: 130,
  SIGTERM: 143,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

export abstract class RoutinelyError extends Error {
  abstract readonly code: string;
  abstract readonly exitCode: ExitCode;
}

/** The base of one kind of error: its stable code and its exit code (SPEC §7), said once. */
function kind<C extends string>(code: C, exitCode: ExitCode) {
  return class extends RoutinelyError {
    readonly code = code;
    readonly exitCode = exitCode;
  };
}

/** Bad flag, bad argument, bad environment value. */
export class UsageError extends kind('USAGE', ExitCode.USAGE) {}

export interface ConfigIssue {
  /** The file the issue is in, when it is not the config file itself (task files). */
  file?: string;
  /** JSON path like `routines[2].schedule`; empty for the whole document. */
  path: string;
  message: string;
}

/** The config file (or a task file) is missing, unreadable, or invalid. */
export class ConfigError extends kind('CONFIG', ExitCode.USAGE) {
  constructor(
    readonly file: string,
    readonly issues: ConfigIssue[],
  ) {
    super(issues.map((i) => `${i.file ?? file}: ${i.path ? `${i.path}: ` : ''}${i.message}`).join('\n'));
  }
}

/** A lock or state path that we refuse to use (symlink, not a directory, not writable). */
export class UnsafePathError extends kind('UNSAFE_PATH', ExitCode.USAGE) {}

/** A state folder replaced under a running process (SPEC §12): nothing is written through it;
 * a scheduler holds its fires until the folder is back, as for a folder it cannot write. */
export class FolderReplacedError extends UnsafePathError {}

/** State or lock files could not be written or read (disk full, read-only, EIO): the message
 * names the file; the previous state is intact (SPEC §3, §7: exit 74). */
export class StateIOError extends kind('STATE_IO', ExitCode.IO) {
  /** The errno behind it, when there is one (`ENOSPC`, `EMFILE` …). */
  errno?: string;
}

const withErrno = (e: StateIOError, code: string | undefined): StateIOError => {
  if (code !== undefined) e.errno = code;
  return e;
};

/** A run whose record is damaged past rebuilding (its run.json and its journal, or its database
 * row): what was read of it says nothing, and it is reported and passed over (a command about
 * that run alone exits 2). Only this: a run that could not be read (EIO, EACCES, the database
 * away) stops the command instead (exit 74 or 2), since passing over it would run again what
 * it did. */
export class UnreadableRunError extends StateIOError {
  /** Damage, not a storage fault: nothing failed to read (SPEC §7: bad input, 2, not 74). */
  override readonly exitCode: ExitCode = ExitCode.USAGE;
}

/** A run that is reported and passed over: damaged past rebuilding, or something in the way of
 * its folder (a file, a link, another user's folder: UnsafePathError). A run the storage could
 * not give (StateIOError: EIO, EACCES, the database away) is not: it stops the command. */
export const passedOver = (err: unknown): err is Error =>
  err instanceof UnreadableRunError || err instanceof UnsafePathError;

/** The database backend cannot be reached or answered with an error: the work did not run
 * (SPEC §7: 74, like any state that cannot be read or written). */
export class DatabaseError extends kind('DATABASE', ExitCode.IO) {
  /** The statement never reached a server that could run it (refused, unknown host, refused
   * login, no such database, no reachable primary): it stored nothing. Otherwise its answer may
   * have been lost after it committed. */
  readonly neverConnected: boolean;

  constructor(message: string, o: { neverConnected?: boolean } = {}) {
    super(message);
    this.neverConnected = o.neverConnected === true;
  }
}

const IO_WORDS: Record<string, string> = {
  ENOSPC: 'no space left on device',
  EDQUOT: 'disk quota exceeded',
  EROFS: 'read-only file system',
  EIO: 'input/output error',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  ENOTDIR: 'a path component is not a directory',
  EMLINK: 'too many links',
  EFBIG: 'file too large',
  EMFILE: 'too many open files',
  ENFILE: 'too many open files in the system',
  ENOENT: 'no such file or directory',
  ELOOP: 'a symbolic link is in the way (never followed)',
  EISDIR: 'a folder is in the way',
  EEXIST: 'something is in the way',
  ENOTEMPTY: 'folder not empty',
  ENAMETOOLONG: 'name too long',
};

/** An errno code in words (`no such file or directory (ENOENT)`); the code itself when unknown. */
export function errnoWords(code: string): string {
  const words = IO_WORDS[code];
  return words ? `${words} (${code})` : code;
}

/** Errors of the storage itself (SPEC §7, §4.15: exit 74): full, out of quota or inodes, read-only,
 * failing, or out of descriptors. */
const STORAGE_CODES = new Set(['ENOSPC', 'EDQUOT', 'EROFS', 'EIO', 'EMFILE', 'ENFILE', 'EFBIG']);

/** Whether `err` says the state could not be read or written because of the storage (not a
 * bad path, not a bug): a StateIOError, or an errno of the storage. */
export function isStorageError(err: unknown): boolean {
  if (err instanceof StateIOError) return true;
  const code = errnoCode(err);
  return code !== undefined && STORAGE_CODES.has(code);
}

/** A storage errno from Node (`EIO: i/o error, scandir '/x/.routinely/locks'`) as a StateIOError
 * naming the path and the error, for exit 74; other errors are returned as they are. */
export function asStorageError(err: unknown): unknown {
  if (err instanceof RoutinelyError) return err;
  const e = err as NodeJS.ErrnoException;
  if (isStorageError(err))
    return withErrno(
      new StateIOError(
        e.path ? `${IO_WORDS[e.code!]} ${verbOf(e.syscall)} ${e.path}` : `${IO_WORDS[e.code!]} (${e.message})`,
      ),
      e.code,
    );
  // a path that cannot be used as it is (a folder of another user or mode, a file where a folder
  // should be, a name too long): exit 2, named, as stateWriteError says it where it is caught
  if (PATH_CODES.has(errnoCode(err)!) && typeof e.path === 'string')
    return new UnsafePathError(
      `${IO_WORDS[e.code!]} ${verbOf(e.syscall)} ${e.path} (${e.code}); check the path, its owner and its mode`,
    );
  return err;
}

/** Errors of a path rather than of the storage: what stateWriteError calls a path we may not use. */
const PATH_CODES = new Set(['EACCES', 'EPERM', 'ENOTDIR', 'ELOOP', 'EISDIR', 'ENAMETOOLONG']);

/** What a system call was doing, in words (`lstat` → `looking at`). */
function verbOf(syscall: string | undefined): string {
  switch (syscall) {
    case 'scandir':
    case 'opendir':
      return 'listing';
    case 'open':
      return 'opening';
    case 'write':
    case 'pwrite':
      return 'writing';
    case 'read':
      return 'reading';
    case 'stat':
    case 'fstat':
    case 'lstat':
    case 'statfs':
    case 'access':
      return 'looking at';
    case 'mkdir':
      return 'creating';
    case 'rename':
      return 'renaming';
    case 'unlink':
    case 'rmdir':
      return 'removing';
    case undefined:
      return 'using';
    default:
      return syscall;
  }
}

/** `no space left on device writing .routinely/routine-state.json` */
export function ioMessage(err: unknown, verb: string, path: string): string {
  const code = errnoCode(err);
  const words = code ? (IO_WORDS[code] ?? code) : err instanceof Error ? err.message : String(err);
  return `${words} ${verb} ${path}`;
}

/** The error to throw for a failed state write: 74 for I/O faults, 2 for a path we may not use. */
export function stateWriteError(err: unknown, path: string, verb = 'writing'): RoutinelyError {
  if (err instanceof RoutinelyError) return err;
  const code = errnoCode(err);
  if (code === 'EACCES' || code === 'EPERM' || code === 'ENOTDIR' || code === 'ELOOP' || code === 'EISDIR')
    return new UnsafePathError(ioMessage(err, verb, path));
  return withErrno(new StateIOError(ioMessage(err, verb, path)), code);
}

/** Input names a thing that does not exist or is malformed (run id, task id, routine id). */
/** A statement the server refused for what it is, not for an outage (a role without a grant, a
 * table gone, a constraint): sending it again later does not help. */
export class DatabaseStatementError extends DatabaseError {}

/** A database row that is not acted on (SPEC §12: out of range, not written by this program);
 * a waiter does not wait it out, since it stays so until someone sets it right. */
export class DatabaseRowError extends DatabaseError {}

export class NotFoundError extends kind('NOT_FOUND', ExitCode.USAGE) {}

export function errnoCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string'
    ? err.code
    : undefined;
}

/** A write refused because the exec lock is no longer ours (SPEC §4.3): reported as `lock
 * lost: …`, exit 1, why_code LOCK_LOST, wherever it surfaces. */
export class FencedError extends kind('LOCK_LOST', ExitCode.FAILED) {
  constructor(why: string) {
    super(`lock lost: ${why}`);
  }
}

/** A claimed tick whose claim another scheduler took over (its claimer was judged gone: a pause
 * past the scheduler lease's TTL): this scheduler does not fire or record it (SPEC §9). */
export class ClaimTakenError extends kind('CLAIM_TAKEN', ExitCode.FAILED) {}

/** A verified orphan that we may not signal (it runs as another user): the lock cannot be taken
 * safely until someone who may ends it. Exit 75: the lock stays busy, nothing is lost. */
export class OrphanBlockedError extends kind('ORPHAN_BLOCKED', ExitCode.BUSY) {}

/** A file of the user's project changed under an edit of it (import-crontab --merge): the edit
 * is not written, so the other is not lost. Exit 75, a conflict: the same edit again works. */
export class ConfigChangedError extends kind('CONFIG_CHANGED', ExitCode.BUSY) {}

/** A config, task file or folder that others could change (config/trust.ts): reported by the
 * loader with the file named. */
export class UntrustedPathError extends Error {}
