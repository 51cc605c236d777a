// Errors in words: an errno code is said, never shown alone (`ENOENT (ENOENT)`), and a path that
// may not be used (a link, a folder in the way) is bad input (exit 2), not a disk fault (74).

import { describe, expect, it } from 'vitest';
import { errnoWords, ExitCode, stateWriteError, StateIOError, UnsafePathError } from '../src/errors.js';

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
});
