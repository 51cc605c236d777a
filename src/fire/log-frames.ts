// The frames around each run in a routine's log (startFrame/endFrame write them, parseFrame reads
// them), and picking one run's section out of the log, line by line (SPEC §10 `routine logs --run`). Pure: lines in,
// lines out, so the same code serves a whole file and a log that is still growing.

import { tenthsOfSeconds } from '../duration.js';
import type { Fire } from '../state/routine-state.js';

export type Trigger = 'schedule' | 'manual' | 'retry';

export type Frame =
  | {
      kind: 'start';
      routine: string;
      /** null: `pending` (an exec action, named by its end frame) */ runId: string | null;
      startedAt: string;
      scheduledAt: string;
      trigger: Trigger;
    }
  | {
      kind: 'end';
      routine: string;
      /** null: `none` */ runId: string | null;
      finishedAt: string;
      result: 'success' | 'failure' | 'skipped';
      reason: string | null;
      seconds: number;
    };

// A frame ends its line; output written without a final newline sits before it on that line.
const START = /--- routinely: (\S+) run (\S+) started (\S+) \(scheduled (\S+), (schedule|manual|retry)\) ---$/;
const END =
  /--- routinely: (\S+) run (\S+) finished (\S+): (success|failure|skipped)(?: \((.*)\))? in (\d+(?:\.\d+)?)s ---$/;
const MARK = '--- routinely: ';

/** The frame a log line ends with (its newline removed), or null. */
export function parseFrame(line: string): Frame | null {
  if (!line.includes(MARK)) return null;
  const s = START.exec(line);
  if (s)
    return {
      kind: 'start',
      routine: s[1]!,
      runId: s[2] === 'pending' ? null : s[2]!,
      startedAt: s[3]!,
      scheduledAt: s[4]!,
      trigger: s[5] as Trigger,
    };
  const e = END.exec(line);
  if (e) {
    return {
      kind: 'end',
      routine: e[1]!,
      runId: e[2] === 'none' ? null : e[2]!,
      finishedAt: e[3]!,
      result: e[4] as 'success' | 'failure' | 'skipped',
      reason: e[5] ?? null,
      seconds: Number(e[6]),
    };
  }
  return null;
}

const NEWLINE = 0x0a;

/** The frame of a raw log line (with or without its newline), for this routine only. */
function frameOf(line: Buffer, routine: string): Frame | null {
  // Frames are short and end the line: only its end needs decoding.
  const end = line.length > 0 && line[line.length - 1] === NEWLINE ? line.length - 1 : line.length;
  const text = line.toString('utf8', Math.max(0, end - 4096), end);
  const f = parseFrame(text);
  return f && f.routine === routine ? f : null;
}

/** Unidentified output kept while waiting for the end frame that names it, at most this much
 * (the oldest lines go first). */
const HELD_CAP = 16 * 1024 * 1024;

/** Picks the sections of one run out of a routine's log, fed line by line in order. A section
 * runs from a start frame to its end frame (frames included). A start frame that says `pending`
 * (an exec action) is matched by the end frame that follows it; so is output with no start frame
 * before it (its start rotated away). A section whose end never came (the scheduler was killed)
 * ends where the next start frame begins. */
export class RunFilter {
  private mode: 'match' | 'other' | 'held' = 'held';
  private held: Buffer[] = [];
  /** Where the held lines begin in `held` (lines over the cap are let go from the front without
   * moving the rest: a shift a line made a long unframed stretch quadratic). */
  private heldFrom = 0;
  private heldBytes = 0;
  /** The held output began with a `pending` start frame: an exec action's run. */
  private heldPending = false;
  /** A section of the run was seen (started, or ended). */
  found = false;
  /** The run's end frame was seen. */
  complete = false;

  constructor(
    private readonly routine: string,
    private readonly runId: string,
  ) {}

  /** Output lines (each with its newline) that belong to the run. */
  push(line: Buffer): Buffer[] {
    const f = frameOf(line, this.routine);
    if (f?.kind === 'start') {
      // A run killed mid-line leaves its last output on the line the next start frame begins.
      const at = line.lastIndexOf(`${MARK}${this.routine} run `);
      if (at > 0)
        return [
          ...this.push(Buffer.concat([line.subarray(0, at), Buffer.from('\n')])),
          ...this.push(line.subarray(at)),
        ];
      this.drop();
      if (f.runId === this.runId) {
        this.mode = 'match';
        this.found = true;
        return [line];
      }
      this.mode = f.runId === null ? 'held' : 'other';
      if (this.mode === 'held') {
        this.hold(line);
        this.heldPending = true;
      }
      return [];
    }
    if (f?.kind === 'end') {
      const mine = f.runId === this.runId;
      const out =
        this.mode === 'match' ? [line] : this.mode === 'held' && mine ? [...this.held.slice(this.heldFrom), line] : [];
      if (mine) this.found = this.complete = true;
      this.drop();
      // after an end, output without a start frame is held until we learn whose it is
      this.mode = 'held';
      return out;
    }
    if (this.mode === 'match') return [line];
    if (this.mode === 'held') this.hold(line);
    return [];
  }

  /** Whether output is being held for an end frame that will name its run (an exec action in
   * progress): it may still turn out to be this run. */
  get waiting(): boolean {
    return this.mode === 'held' && this.heldPending;
  }

  /** Whether the run's section is open right now (started, not ended). */
  get inside(): boolean {
    return this.mode === 'match';
  }

  private hold(line: Buffer): void {
    this.held.push(line);
    this.heldBytes += line.length;
    while (this.heldBytes > HELD_CAP && this.held.length - this.heldFrom > 1)
      this.heldBytes -= this.held[this.heldFrom++]!.length;
    if (this.heldFrom > 1024 && this.heldFrom * 2 > this.held.length) {
      this.held = this.held.slice(this.heldFrom);
      this.heldFrom = 0;
    }
  }

  private drop(): void {
    this.held = [];
    this.heldFrom = 0;
    this.heldBytes = 0;
    this.heldPending = false;
  }
}

/** The last `n` lines pushed (all when `n` is undefined), in a ring. */
export class LastLines {
  private lines: Buffer[] = [];
  private next = 0;

  constructor(private readonly n: number | undefined) {}

  push(lines: Buffer[]): void {
    for (const l of lines) {
      if (this.n === undefined || this.lines.length < this.n) this.lines.push(l);
      else if (this.n > 0) {
        this.lines[this.next] = l;
        this.next = (this.next + 1) % this.n;
      }
    }
  }

  take(): Buffer[] {
    const l = [...this.lines.slice(this.next), ...this.lines.slice(0, this.next)];
    this.lines = [];
    this.next = 0;
    return l;
  }
}

/** The line that opens a run in the routine's log (SPEC §10: `routine logs` finds runs by these
 * frames). `runId` is null for exec actions until the run has its id: the end frame names it. */
export function startFrame(
  id: string,
  runId: string | null,
  startedAt: string,
  scheduledAt: string,
  trigger: Trigger,
): string {
  return `--- routinely: ${id} run ${runId ?? 'pending'} started ${startedAt} (scheduled ${scheduledAt}, ${trigger}) ---\n`;
}

/** The line that closes a run in the routine's log. */
export function endFrame(
  id: string,
  f: Pick<Fire, 'run_id' | 'finished_at' | 'result' | 'reason' | 'duration_ms'>,
): string {
  // one line whatever the reason holds (a config error's message has several)
  const reason = f.reason ? ` (${f.reason.replace(/\s*\n\s*/g, '; ')})` : '';
  return `--- routinely: ${id} run ${f.run_id ?? 'none'} finished ${f.finished_at}: ${f.result}${reason} in ${tenthsOfSeconds(f.duration_ms)} ---\n`;
}
