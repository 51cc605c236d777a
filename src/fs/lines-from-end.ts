// Reading a file from its end, line by line: what a reader that wants only the newest lines of an
// append-only file (a routine's history) needs, at the cost of those lines, not of the file.

import { closeSync, readSync } from 'node:fs';
import { errnoCode, stateWriteError } from '../errors.js';
import { openChecked, STATE_FILE_CAP } from './files.js';

/** The lines of `path` from its last to its first, read in blocks from the end — 8 KiB (a few
 * dozen lines), each next one twice as large up to 256 KiB — with the checks of openChecked (a
 * regular file of ours, never through a symlink): a reader that wants the newest few lines pays
 * for those, not for the whole file. Stopping early closes the file. */
export function* linesFromEnd(path: string, firstBlockBytes = 8 * 1024): Generator<string> {
  let opened;
  try {
    opened = openChecked(path, STATE_FILE_CAP);
  } catch (err) {
    throw errnoCode(err) === undefined ? err : stateWriteError(err, path, 'reading');
  }
  if (!opened) return;
  const { fd, st } = opened;
  try {
    let end = st.size;
    // the start of a line that goes on further back: its pieces, in the file's order (a piece a
    // block, joined once its line is whole: a line of many blocks is never copied block by
    // block, nor scanned again)
    let carry: Buffer[] = [];
    for (let blockBytes = firstBlockBytes; end > 0; blockBytes = Math.min(blockBytes * 2, 256 * 1024)) {
      const start = Math.max(0, end - blockBytes);
      const block = Buffer.alloc(end - start);
      for (let got = 0; got < block.length;) {
        const n = readSync(fd, block, got, block.length - got, start + got);
        if (n <= 0)
          throw stateWriteError(Object.assign(new Error('file shrank while read'), { code: 'EIO' }), path, 'reading');
        got += n;
      }
      // split on the newline byte: a line's UTF-8 is never cut
      let lineEnd = block.length;
      for (let i = block.length - 1; i >= 0; i--) {
        if (block[i] !== 0x0a) continue;
        if (carry.length > 0) {
          yield Buffer.concat([block.subarray(i + 1, lineEnd), ...carry]).toString('utf8');
          carry = [];
        } else if (i + 1 < lineEnd) yield block.toString('utf8', i + 1, lineEnd);
        lineEnd = i;
      }
      if (lineEnd > 0) carry.unshift(block.subarray(0, lineEnd));
      end = start;
    }
    if (carry.length > 0) yield Buffer.concat(carry).toString('utf8');
  } finally {
    closeSync(fd);
  }
}
