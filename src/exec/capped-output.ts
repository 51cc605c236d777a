// A run's output, bounded (SPEC §3 "Output is bounded"): the first half of `retention.runLogBytes`
// goes to the log as it comes; past it, only the newest half is kept (in memory, at most that
// much), and at the end it follows a line saying how many bytes were left out. So a command that
// prints 300 MB leaves a few MB in its log, and no run can fill the state disk.

import { errnoCode } from '../errors.js';
import { writeText } from '../fs/durable.js';

/** How the line that marks a cut starts (`routine logs` looks for it to say so). */
export const CUT_LINE_PREFIX = '--- routinely: ';
export const CUT_LINE_PATTERN = /^--- routinely: (\d+) bytes of output left out \(runLogBytes \d+\) ---$/;

/** The bytes a cut line says were left out, or 0 for any other line. */
export function cutBytesOf(line: Buffer): number {
  if (
    line.length > 120 ||
    line.length < CUT_LINE_PREFIX.length ||
    line.toString('latin1', 0, CUT_LINE_PREFIX.length) !== CUT_LINE_PREFIX
  )
    return 0;
  const m = CUT_LINE_PATTERN.exec(line.toString('utf8').replace(/\r?\n$/, ''));
  return m ? Number(m[1]) : 0;
}

/** The output left out of a log whose first `cut` bytes are trimmed away (`read` reads them,
 * 64 KiB at a time: the cut part may be most of a 1 GiB cap): those bytes less routinely's own
 * lines among them (its run attempt headings, its cut lines, each with the newline written before
 * it), plus what each cut line there says was left out before — so the count stays the whole of
 * it over every attempt. */
export function outputLeftOut(cut: number, read: (position: number, into: Buffer) => number): number {
  let total = cut;
  const chunk = Buffer.alloc(Math.max(1, Math.min(cut, 64 * 1024)));
  // the line under way: where it starts, its length, and its bytes while it may be one of ours
  let lineAt = 0;
  let length = 0;
  let head: Buffer[] | null = [];
  const ended = (): void => {
    const line = head ? Buffer.concat(head) : null;
    if (line && line.toString('latin1', 0, CUT_LINE_PREFIX.length) === CUT_LINE_PREFIX)
      total += cutBytesOf(line) - length - (lineAt > 0 ? 1 : 0);
  };
  for (let pos = 0; pos < cut;) {
    const got = read(pos, chunk.subarray(0, Math.min(chunk.length, cut - pos)));
    if (got <= 0) break;
    const view = chunk.subarray(0, got);
    for (let i = 0; i < got;) {
      const nl = view.indexOf(10, i);
      const end = nl < 0 ? got : nl + 1;
      length += end - i;
      // (ours are short: a longer line is output)
      if (head && length <= 256) head.push(Buffer.from(view.subarray(i, end)));
      else head = null;
      if (nl >= 0) {
        ended();
        lineAt = pos + end;
        length = 0;
        head = [];
      }
      i = end;
    }
    pos += got;
  }
  if (length > 0) ended();
  return Math.max(0, total);
}

/** Room kept for the line that says what was left out, so that line is inside the cap too. */
const CUT_LINE_ROOM = 120;

export class CappedOutput {
  private written = 0;
  private readonly tail: Buffer[] = [];
  private tailBytes = 0;
  private cut = 0;
  private ended = false;
  /** Bytes meant for the log that could not be written (a full disk), and why. */
  private lostBytes = 0;
  private lostCode: string | null = null;

  /** `runLogBytes`: the configured cap, which the cut line names (an attempt of a resumed task
   * has only what its earlier attempts left of it: `capBytes`). */
  constructor(
    private readonly fd: number,
    private readonly capBytes: number,
    private readonly runLogBytes: number = capBytes,
  ) {}

  write(chunk: Buffer): void {
    if (this.ended) return;
    const half = Math.floor(this.capBytes / 2);
    if (this.written < half) {
      const take = Math.min(chunk.length, half - this.written);
      this.put(chunk.subarray(0, take));
      this.written += take;
      if (take === chunk.length) return;
      chunk = chunk.subarray(take);
    }
    this.tail.push(chunk);
    this.tailBytes += chunk.length;
    // whole chunks that fall out of the newest half
    while (this.tail.length > 1 && this.tailBytes - this.tail[0]!.length >= half) {
      const dropped = this.tail.shift()!;
      this.tailBytes -= dropped.length;
      this.cut += dropped.length;
    }
  }

  /** Writes what was kept of the end (after the line that says what was left out); returns how
   * many bytes were left out. */
  end(): number {
    if (this.ended) return this.cut;
    this.ended = true;
    let tail = Buffer.concat(this.tail);
    if (this.cut > 0 || this.written + tail.length > this.capBytes) {
      const room = Math.max(0, this.capBytes - this.written - CUT_LINE_ROOM);
      if (tail.length > room) {
        this.cut += tail.length - room;
        tail = tail.subarray(tail.length - room);
      }
    }
    if (this.cut > 0)
      this.put(
        Buffer.from(`\n${CUT_LINE_PREFIX}${this.cut} bytes of output left out (runLogBytes ${this.runLogBytes}) ---\n`),
      );
    this.put(tail);
    return this.cut;
  }

  /** What could not be written to the log, or null when all of it was. */
  lost(): { bytes: number; code: string } | null {
    return this.lostBytes > 0 ? { bytes: this.lostBytes, code: this.lostCode ?? 'EIO' } : null;
  }

  private put(buf: Buffer): void {
    try {
      writeText(this.fd, buf);
    } catch (err) {
      // the record has the result; what the log lost is counted, and said with it (a write
      // that stopped part-way, on a disk that filled, lost only the rest)
      const written = (err as { written?: unknown }).written;
      this.lostBytes += buf.length - (typeof written === 'number' && written > 0 ? Math.min(written, buf.length) : 0);
      this.lostCode ??= errnoCode(err) ?? 'EIO';
    }
  }
}
