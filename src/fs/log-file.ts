// Reading a routine's log (SPEC §10 `routine logs`): opened without following a symlink and
// without blocking on a FIFO, checked to be a regular file of this user (SPEC §12), then read
// in chunks, line by line, from where the last read stopped — so the same reader serves a whole
// file and one that is still growing. Logs are not size-capped like state files (a run may
// write a lot); they are never read into memory whole.

import { closeSync, fstatSync, readSync } from 'node:fs';
import { openChecked } from './files.js';

const CHUNK = 64 * 1024;
const NEWLINE = 0x0a;
/** Output that never ends its line is handed out in pieces of this size. */
const LONGEST_LINE = 1024 * 1024;
/** Bytes read between two turns of the event loop. */
const YIELD_BYTES = 1024 * 1024;

export class LogReader {
  /** Bytes consumed so far. */
  pos = 0;
  private partial: Buffer = Buffer.alloc(0);
  private readonly buf = Buffer.allocUnsafe(CHUNK);

  private constructor(
    readonly path: string,
    readonly fd: number,
    readonly ino: number,
  ) {}

  /** Opens `path` for reading; null when it does not exist. UnsafePathError (exit 2) for a
   * symlink, a FIFO or device, or another user's file. */
  static open(path: string): LogReader | null {
    // a log has no size cap: it is read as it grows, never whole
    const opened = openChecked(path, Number.MAX_SAFE_INTEGER);
    return opened ? new LogReader(path, opened.fd, opened.st.ino) : null;
  }

  /** The file's size now. */
  size(): number {
    return fstatSync(this.fd).size;
  }

  /** Reads what has been written since the last call and returns its complete lines (each with
   * its newline); a last line without one is kept for the next call (see `rest`). Calls `each`
   * per chunk's lines when given, so a large file never sits in memory whole. */
  lines(each?: (lines: Buffer[]) => void): Buffer[] {
    const all: Buffer[] = [];
    for (;;) {
      const n = readSync(this.fd, this.buf, 0, CHUNK, this.pos);
      if (n <= 0) break;
      this.pos += n;
      const got = this.split(this.buf.subarray(0, n));
      if (each) each(got);
      else all.push(...got);
    }
    return all;
  }

  /** `lines(each)` for a whole file that may be large, in a process that does other work (a
   * scheduler's page or notification): it lets the event loop run after each MiB read, so a
   * 1 GiB log read for a page never holds the scheduler's ticks. */
  async linesYielding(each: (lines: Buffer[]) => void): Promise<void> {
    let since = 0;
    for (;;) {
      const n = readSync(this.fd, this.buf, 0, CHUNK, this.pos);
      if (n <= 0) break;
      this.pos += n;
      each(this.split(this.buf.subarray(0, n)));
      since += n;
      if (since >= YIELD_BYTES) {
        since = 0;
        await new Promise<void>((r) => setImmediate(r));
      }
    }
  }

  /** Reads what has been written since the last call, as it is (lines or not). */
  bytes(): Buffer[] {
    const out: Buffer[] = [];
    if (this.partial.length > 0) out.push(this.rest()!);
    for (;;) {
      const n = readSync(this.fd, this.buf, 0, CHUNK, this.pos);
      if (n <= 0) break;
      this.pos += n;
      out.push(Buffer.from(this.buf.subarray(0, n)));
    }
    return out;
  }

  /** The last line read so far without a newline (at the end of a file), once. */
  rest(): Buffer | null {
    if (this.partial.length === 0) return null;
    const r = this.partial;
    this.partial = Buffer.alloc(0);
    return r;
  }

  /** Starts over from the beginning (the file was truncated). */
  rewind(): void {
    this.pos = 0;
    this.partial = Buffer.alloc(0);
  }

  close(): void {
    try {
      closeSync(this.fd);
    } catch {
      // already closed
    }
  }

  private split(chunk: Buffer): Buffer[] {
    const out: Buffer[] = [];
    let start = 0;
    for (let i = chunk.indexOf(NEWLINE); i >= 0; i = chunk.indexOf(NEWLINE, start)) {
      const piece = chunk.subarray(start, i + 1);
      out.push(this.partial.length > 0 ? Buffer.concat([this.partial, piece]) : Buffer.from(piece));
      this.partial = Buffer.alloc(0);
      start = i + 1;
    }
    if (start < chunk.length) this.partial = Buffer.concat([this.partial, chunk.subarray(start)]);
    if (this.partial.length > LONGEST_LINE) out.push(this.rest()!);
    return out;
  }
}
