// Files of the user's project and of routinely's own package, which are not state: the config and
// .gitignore `init` writes (0644, never through a symlink), an input file a user names on the
// command line (read, never trusted to decide what runs), routinely's package.json.

import { closeSync, constants, fstatSync, openSync, readFileSync, readSync } from 'node:fs';
import { writeFileDurable, writeText } from './durable.js';

/** The bytes of an input file a user names on the command line (any owner, links followed: it
 * is read, never trusted to decide what runs): errno errors thrown as they are; a file that is not
 * a regular one is refused (code ENOTREG) and one over `cap` bytes too (code EFBIG). */
export function readInputFile(path: string, cap: number): Buffer {
  // O_NONBLOCK: a FIFO without a writer opens at once (and is refused below), never hangs
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    if (!fstatSync(fd).isFile()) throw Object.assign(new Error(`${path} is not a regular file`), { code: 'ENOTREG' });
    const chunks: Buffer[] = [];
    let total = 0;
    const buf = Buffer.alloc(64 * 1024);
    for (let n; (n = readSync(fd, buf, 0, buf.length, null)) > 0;) {
      total += n;
      if (total > cap) throw Object.assign(new Error(`${path} is over ${cap} bytes`), { code: 'EFBIG' });
      chunks.push(Buffer.from(buf.subarray(0, n)));
    }
    return Buffer.concat(chunks);
  } finally {
    closeSync(fd);
  }
}

/** Writes a file of the user's project (`routinely init`: the config, a .gitignore), mode 0644
 * (umask permitting), never through a symlink at its name, and whole or not at all (written
 * beside it, then put in its place: a full disk or a file size limit leaves what was there, and
 * no cut-off file): created where nothing is (EEXIST, as StateIOError), or replaced when
 * `replace`. Errors name the file (StateIOError, 74; UnsafePathError, 2). */
export function writeProjectFile(path: string, text: string, replace = false): void {
  writeFileDurable(path, text, { mode: 0o644, createFolder: false, exclusive: !replace });
}

/** Appends to a text file of the user's project what `amend` makes of its text (null: nothing),
 * never through a symlink, never blocking on a FIFO swapped in (O_NONBLOCK). false when it is no
 * regular file of at most `cap` bytes (left alone). */
export function amendProjectFile(path: string, cap: number, amend: (text: string) => string | null): boolean {
  const fd = openSync(path, constants.O_RDWR | constants.O_APPEND | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.size > cap) return false;
    const added = amend(readFileSync(fd, 'utf8'));
    if (added) writeText(fd, added);
    return true;
  } finally {
    closeSync(fd);
  }
}

/** A file of routinely's own installed package (its package.json), as text. */
export function readPackageFile(path: string): string {
  return readFileSync(path, 'utf8');
}
