// A routine's output (SPEC §10 `routine logs`): `<stateDir>/logs/<id>.log` and its one rotated
// predecessor `<id>.log.1` (firing.ts rotates so both stay within retention.routineLogBytes),
// shown whole, as its last lines, as one run's section, or followed as it grows like `tail -F`
// (through rotation and truncation).

import { childPath } from '../fs/names.js';
import { ID_PATTERN } from '../config/types.js';
import { CUT_LINE_PREFIX, cutBytesOf } from '../exec/capped-output.js';
import { NotFoundError } from '../errors.js';
import { checkFolder, trustRoot } from '../fs/files.js';
import { lstatQuiet } from '../fs/look.js';
import { LogReader } from '../fs/log-file.js';
import { LastLines, RunFilter } from './log-frames.js';

/** The files of a routine's log, the id checked before it becomes part of a path. */
export function routineLogFiles(stateDir: string, id: string): { dir: string; current: string; rotated: string } {
  if (!ID_PATTERN.test(id)) throw new NotFoundError(`${JSON.stringify(id)} is not a routine id`);
  const dir = childPath(stateDir, 'logs');
  const current = childPath(dir, `${id}.log`);
  return { dir, current, rotated: `${current}.1` };
}

export interface LogView {
  stateDir: string;
  id: string;
  /** Only this run's section (frames included). */
  runId?: string;
  /** Only the last N lines (of the section, with runId); default all, or 10 when following the
   * whole log (as tail -f and journalctl -f). */
  lines?: number;
  /** Keep printing what is written, until `signal` aborts (or, with runId, the run ends). */
  follow?: boolean;
  signal?: AbortSignal;
  write(chunk: Buffer): void;
  /** Things to tell the person (stderr), not output. */
  notice(message: string): void;
  /** How often a followed log is looked at; default 200 ms. */
  pollMs?: number;
}

export type LogViewResult =
  | { kind: 'shown' }
  | { kind: 'no-log'; path: string }
  | { kind: 'run-not-found'; path: string; inProgress: boolean }
  | { kind: 'run-ended' }
  | { kind: 'stopped' };

const DEFAULT_FOLLOW_LINES = 10;

const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });

export async function showRoutineLog(v: LogView): Promise<LogViewResult> {
  const files = routineLogFiles(v.stateDir, v.id);
  trustRoot(v.stateDir);
  checkFolder(files.dir);
  const filter = v.runId !== undefined ? new RunFilter(v.id, v.runId) : null;
  // Following the whole log goes on byte by byte once the lines so far are shown; following one
  // run needs whole lines, to see its end frame.
  const raw = v.follow === true && filter === null;
  // the last N lines are kept until the end; with no limit each line is written as it is read,
  // so a log of any size is shown in the memory of one chunk
  const limit = v.lines ?? (raw ? DEFAULT_FOLLOW_LINES : undefined);
  const keep = limit !== undefined ? new LastLines(limit) : null;
  let cut = 0;
  let cutRuns = 0;
  const show = (l: Buffer): void => {
    v.write(l);
    const bytes = cutBytesOf(l);
    if (bytes > 0) {
      cut += bytes;
      cutRuns++;
    }
  };
  const take = (lines: Buffer[]): void => {
    const shown = filter ? lines.flatMap((l) => filter.push(l)) : lines;
    if (keep) keep.push(shown);
    else for (const l of shown) show(l);
  };

  // both opened before either is read: a rotation while the first is read (a scheduler's page
  // lets its fires go on meanwhile) leaves this reader the files it opened
  const old = LogReader.open(files.rotated);
  let cur: LogReader | null;
  try {
    cur = LogReader.open(files.current);
  } catch (err) {
    old?.close();
    throw err;
  }
  try {
    if (old) {
      try {
        await old.linesYielding(take);
        const rest = old.rest();
        if (rest) take([Buffer.concat([rest, Buffer.from('\n')])]); // it ends there: the current file starts a new line
      } finally {
        old.close();
      }
    }
    if (cur) {
      await cur.linesYielding(take);
      // A last line without its newline is output so far (a run mid-line), unless we follow one
      // run, which needs the line whole.
      if (!v.follow || raw) {
        const rest = cur.rest();
        if (rest) take([rest]);
      }
    }
    if (!old && !cur && !v.follow) return { kind: 'no-log', path: files.current };
    if (keep) for (const l of keep.take()) show(l);
    if (cutRuns > 0) {
      v.notice(
        `${cutRuns === 1 ? 'a run' : `${cutRuns} runs`} shown here printed more than retention.runLogBytes: ${cut} bytes were left out of the middle (marked by a '${CUT_LINE_PREFIX}…' line)`,
      );
    }
    if (filter) {
      if (filter.complete) return { kind: 'shown' };
      if (!filter.found && (!v.follow || !filter.waiting))
        return { kind: 'run-not-found', path: files.current, inProgress: filter.waiting };
      if (!v.follow) return { kind: 'shown' };
      if (!filter.found)
        v.notice(`waiting for the run in progress to end: a run of an exec action is named by its end frame`);
    } else if (!v.follow) {
      return { kind: 'shown' };
    }
    if (!old && !cur) v.notice(`no output logged for ${v.id} yet; waiting for it`);

    const pump = (r: LogReader): void => {
      if (raw) for (const b of r.bytes()) v.write(b);
      else
        r.lines((lines) => {
          for (const l of lines.flatMap((x) => filter!.push(x))) v.write(l);
        });
    };
    while (!v.signal?.aborted) {
      if (cur) pump(cur);
      if (filter?.complete) return { kind: 'run-ended' };
      const st = lstatQuiet(files.current);
      if (st && (!cur || st.ino !== cur.ino)) {
        // Rotated (renamed to .1, a new file begun) or created: finish the old file, then read
        // the new one from its start.
        if (cur) {
          pump(cur);
          const rest = cur.rest();
          if (rest) {
            const line = Buffer.concat([rest, Buffer.from('\n')]);
            for (const l of filter ? filter.push(line) : [line]) v.write(l);
          }
          cur.close();
        }
        cur = LogReader.open(files.current);
        continue;
      }
      if (st && cur && st.size < cur.pos) {
        v.notice(`${files.current} was truncated; reading it from its start`);
        cur.rewind();
        continue;
      }
      await sleep(v.pollMs ?? 200, v.signal);
    }
    return { kind: 'stopped' };
  } finally {
    cur?.close();
  }
}
