// Errors in words: an errno code is said, never shown alone (`ENOENT (ENOENT)`), and a path that
// may not be used (a link, a folder in the way) is bad input (exit 2), not a disk fault (74).

import { describe, expect, it } from 'vitest';
import { asStorageError, errnoWords, ExitCode, stateWriteError, StateIOError, UnsafePathError } from '../src/errors.js';
import { reportError } from '../src/cli/report-error.js';

const errno = (code: string): NodeJS.ErrnoException => Object.assign(new Error(code), { code });

describe('errno codes in words', () => {
  it('says a known code, then names it; an unknown one as it is', () => {
    expect(errnoWords('ENOENT')).toBe('no such file or directory (ENOENT)');
    expect(errnoWords('ELOOP')).toBe('a symbolic link is in the way (never followed) (ELOOP)');
    expect(errnoWords('EWHATEVER')).toBe('EWHATEVER');
  });

  it('a link or a folder at a state path is refused (exit 2); a full disk is an I/O error (74)', () => {
    const link = stateWriteError(errno('ELOOP'), '.routinely/history/hello.index');
    expect(link).toBeInstanceOf(UnsafePathError);
    expect(link.exitCode).toBe(ExitCode.USAGE);
    expect(link.message).toBe('a symbolic link is in the way (never followed) writing .routinely/history/hello.index');
    expect(stateWriteError(errno('EISDIR'), 'x')).toBeInstanceOf(UnsafePathError);
    const full = stateWriteError(errno('ENOSPC'), '.routinely/routine-state.json');
    expect(full).toBeInstanceOf(StateIOError);
    expect(full.message).toBe('no space left on device writing .routinely/routine-state.json');
  });

  it('an errno that reached the top unnamed is said with its path and the right exit, never "unexpected error"', () => {
    const at = (code: string, syscall: string, path?: string) => Object.assign(errno(code), { syscall, path });
    const denied = asStorageError(at('EACCES', 'lstat', '/p/.routinely/locks'));
    expect(denied).toBeInstanceOf(UnsafePathError);
    expect((denied as Error).message).toBe(
      'permission denied looking at /p/.routinely/locks (EACCES); check the path, its owner and its mode',
    );
    expect(asStorageError(at('ENAMETOOLONG', 'open', '/p/x'))).toBeInstanceOf(UnsafePathError);
    expect((asStorageError(at('EIO', 'scandir', '/p/h')) as Error).message).toBe('input/output error listing /p/h');
    // without a path, or a code of no path: as it was (a bug is still a bug)
    const bare = at('EACCES', 'kill');
    expect(asStorageError(bare)).toBe(bare);
    const written: string[] = [];
    const write = process.stderr.write;
    process.stderr.write = ((text: string) => written.push(text) > 0) as typeof process.stderr.write;
    try {
      expect(reportError(at('EPERM', 'mkdir', '/p/.routinely'))).toBe(ExitCode.USAGE);
    } finally {
      process.stderr.write = write;
    }
    expect(written).toEqual([
      'routinely: operation not permitted creating /p/.routinely (EPERM); check the path, its owner and its mode\n',
    ]);
  });
});
