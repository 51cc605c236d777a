// Run folders: `exec/runs/<run-id>/run.json` (snapshot), `journal.jsonl` (appended events) and
// one `<task-id>.log` per task. Run ids come from users (`exec show`, `exec resume`): they are
// checked against `^r-[A-Za-z0-9-]+$` before they ever become a path.
// (Over 300 lines: a run folder's snapshot, journal and logs, each read and written through the
// same checked paths and the writer's fence.)

import { join } from 'node:path';
import {
  NotFoundError,
  StateIOError,
  UnreadableRunError,
  UnsafePathError,
  ioMessage,
  stateWriteError,
} from '../errors.js';
import { STATE_FILE_CAP, checkFolder, namesIn, readFileChecked, readNoFollow } from '../fs/files.js';
import { lstatQuiet } from '../fs/look.js';
import { appendFileTorn, blankOwnBytes, openAppendTo, writeAll } from '../fs/durable.js';
import { childPath, closeFd, makeFolder } from '../fs/names.js';
import { fdSize } from '../fs/look.js';
import { ensureStateDir, readJsonState, writeJsonDurable } from '../state/json-file.js';
import { TASK_STATUSES } from './registry.js';
import {
  RUN_STATUSES,
  applyEventInPlace,
  checkEvent,
  ownerProblem,
  type RunEvent,
  type RunState,
} from './run-state.js';
import { isRunId } from '../run-id.js';
import { printable } from '../printable.js';
import { type RunWriter } from './store.js';
import { FencedError } from '../errors.js';
import { ID_PATTERN } from '../config/types.js';

const SNAPSHOT = 'run.json';
/** Task ids name log files: the config's id pattern (no `/`: never a path, nor `.` or `..`
 * alone, as it starts with a letter or digit), the same that validation accepts. */
const TASK_ID = ID_PATTERN;
const JOURNAL = 'journal.jsonl';

interface Snapshot extends RunState {
  /** Journal bytes already folded into this snapshot. */
  journal_offset: number;
}

export function runDir(runsDir: string, runId: string): string {
  if (!isRunId(runId))
    throw new NotFoundError(
      `${JSON.stringify(runId)} is not a run id (expected r-<time>-<hex>, e.g. r-20261129T190000Z-7f3a)`,
    );
  return childPath(runsDir, runId);
}

/** Newest first. Names that are not run ids are ignored. An id carries its second, then random
 * hex: runs created in the same second are ordered by their folders' birth times (when the file
 * system keeps them), so "the newest N" is exact even for runs a few milliseconds apart. */
export function listRunIds(runsDir: string): string[] {
  const ids = namesIn(runsDir).filter(isRunId).sort().reverse();
  const second = (id: string): string => id.slice(0, id.lastIndexOf('-'));
  for (let i = 0; i < ids.length;) {
    let j = i + 1;
    while (j < ids.length && second(ids[j]!) === second(ids[i]!)) j++;
    if (j - i > 1) {
      const born = new Map(ids.slice(i, j).map((id) => [id, birthMs(join(runsDir, id))]));
      const group = ids.slice(i, j).sort((x, y) => born.get(y)! - born.get(x)! || (x < y ? 1 : -1));
      ids.splice(i, j - i, ...group);
    }
    i = j;
  }
  return ids;
}

function birthMs(path: string): number {
  try {
    return lstatQuiet(path)?.birthtimeMs ?? 0;
  } catch {
    return 0;
  }
}

/** Checks a snapshot field by field before anything uses it (SPEC §12): its run id must be the
 * folder's, every task status known. */
/** A run's tasks with each one's log named as routinely names it (`<task>.log`, in the run's
 * folder): the name a record read back holds is never shown or used (one edited to
 * `../../x.log` was printed as the task's log). */
export function withOwnLogNames(tasks: RunState['tasks']): RunState['tasks'] {
  const out: RunState['tasks'] = {};
  for (const [id, t] of Object.entries(tasks)) out[id] = t && typeof t === 'object' ? { ...t, log: `${id}.log` } : t;
  return out;
}

export function checkSnapshot(v: unknown, runId: string): Snapshot | string {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return 'not an object';
  const s = v as Partial<Snapshot>;
  if (s.version !== 1 || typeof s.run_id !== 'string') return 'not a run snapshot';
  if (s.run_id !== runId) return `it names run ${JSON.stringify(s.run_id)}, not ${runId}`;
  if (!RUN_STATUSES.includes(s.status as never)) return `unknown status ${JSON.stringify(s.status)}`;
  if (!s.tasks || typeof s.tasks !== 'object' || !Number.isSafeInteger(s.generation))
    return 'malformed tasks or generation';
  for (const [id, t] of Object.entries(s.tasks)) {
    if (!TASK_ID.test(id)) return `task id ${JSON.stringify(id)} is not a task id`;
    if (
      !t ||
      typeof t !== 'object' ||
      !(TASK_STATUSES as readonly unknown[]).includes((t as { status?: unknown }).status)
    )
      return `task ${JSON.stringify(id)} is malformed`;
  }
  const owner = ownerProblem(s.owner);
  if (owner) return owner;
  if (typeof s.lock_id !== 'string' || !/^[0-9a-f]{32}$/.test(s.lock_id)) return 'its lock_id is not 32 hex digits';
  if (typeof s.command !== 'string' || s.command.length > 4096) return 'malformed command';
  return {
    ...(s as Snapshot),
    tasks: withOwnLogNames(s.tasks as Snapshot['tasks']),
    journal_offset:
      Number.isSafeInteger(s.journal_offset) && (s.journal_offset as number) >= 0 ? (s.journal_offset as number) : 0,
  };
}

export interface LoadedRun {
  state: RunState;
  /** run.json was missing or corrupt and the run was rebuilt from its journal. */
  recovered: string | null;
  /** Journal lines that could not be read, each named with its file and line (SPEC §3): what
   * they recorded reads as not done. A last line cut short by a crash is not one (its write
   * never completed, and the next append starts a line of its own). */
  unreadable: string[];
}

/** The run's current state: its snapshot plus the journal written since; if the snapshot is
 * missing or corrupt, the whole journal (it starts with the run as created). null when the run
 * does not exist. A torn journal line (a crash mid-append) is skipped. */
export function loadRunDetailed(runsDir: string, runId: string): LoadedRun | null {
  const dir = runDir(runsDir, runId);
  // a run's folder as its writers take it: never through a symlink, ours alone (exit 2)
  if (!checkFolder(dir)) return null;
  const snapPath = join(dir, SNAPSHOT);
  let snapText: string | null = null;
  let problem: string | null = null;
  try {
    snapText = readNoFollow(snapPath);
  } catch (err) {
    // a file the storage could not give (EIO, EACCES): never read as a run that is not there
    if (!(err instanceof UnsafePathError)) throw new StateIOError(ioMessage(err, 'reading', snapPath));
    problem = err.message;
  }
  let journal: Buffer | null;
  try {
    journal = readFileChecked(join(dir, JOURNAL), STATE_FILE_CAP)?.bytes ?? null;
  } catch (err) {
    // the same for the journal: read as missing, the tasks it recorded would run again
    if (!(err instanceof UnsafePathError)) throw new StateIOError(ioMessage(err, 'reading', join(dir, JOURNAL)));
    journal = null;
  }
  if (snapText === null && problem === null && journal === null) return null;
  let parsed: Snapshot | string = problem ?? 'missing';
  if (snapText !== null) {
    try {
      parsed = checkSnapshot(JSON.parse(snapText), runId);
    } catch (err) {
      parsed = `not valid JSON (${printable((err as Error).message)})`;
    }
  }
  if (typeof parsed !== 'string') {
    const { journal_offset, ...state } = parsed;
    const from = journal ? Math.min(journal_offset, journal.length) : 0;
    const bad = journal ? replay(state, journal, from) : [];
    return { state, recovered: null, unreadable: named(join(dir, JOURNAL), journal, bad) };
  }
  // The snapshot is lost: the journal's first line is the run as created.
  const first = journal ? firstEvent(journal) : null;
  if (
    first?.type !== 'run-created' ||
    first.state.run_id !== runId ||
    typeof checkSnapshot(first.state, runId) === 'string'
  ) {
    throw new UnreadableRunError(
      `${snapPath} is ${parsed === 'missing' ? 'missing' : `corrupt (${parsed})`} and its journal cannot rebuild the run`,
    );
  }
  const state = structuredClone(first.state);
  state.tasks = withOwnLogNames(state.tasks);
  const bad = replay(state, journal!, 0);
  return {
    state,
    recovered: parsed === 'missing' ? 'run.json is missing' : `run.json is corrupt (${parsed})`,
    unreadable: named(join(dir, JOURNAL), journal, bad),
  };
}

/** `path line N: why` for each unreadable line (by its byte offset in `journal`). */
function named(path: string, journal: Buffer | null, bad: { at: number; why: string }[]): string[] {
  if (!journal || bad.length === 0) return [];
  // one pass over the journal for all of them (they come in order)
  let line = 1;
  let i = journal.indexOf(0x0a);
  return bad.map(({ at, why }) => {
    for (; i !== -1 && i < at; i = journal.indexOf(0x0a, i + 1)) line++;
    return `${path}: line ${line} ${why} and was skipped`;
  });
}

export function loadRun(runsDir: string, runId: string): RunState | null {
  return loadRunDetailed(runsDir, runId)?.state ?? null;
}

function firstEvent(journal: Buffer): RunEvent | null {
  const end = journal.indexOf(0x0a);
  try {
    return JSON.parse(journal.subarray(0, end < 0 ? journal.length : end).toString('utf8')) as RunEvent;
  } catch {
    return null;
  }
}

const isBlank = (line: Buffer): boolean => line.every((b) => b === 0x20);

/** Applies the journal's events from byte `from`; returns the lines it could not read (their
 * offsets), a last line without its newline (a write cut by a crash) aside. */
function replay(state: RunState, journal: Buffer, from: number): { at: number; why: string }[] {
  const bad: { at: number; why: string }[] = [];
  for (let at = from; at < journal.length;) {
    const end = journal.indexOf(0x0a, at);
    const line = journal.subarray(at, end === -1 ? journal.length : end);
    const start = at;
    at = end === -1 ? journal.length : end + 1;
    // (blank: nothing, or an append cut short by a full disk and written over with spaces)
    if (line.length === 0 || isBlank(line)) continue;
    let ev: RunEvent;
    try {
      ev = JSON.parse(line.toString('utf8')) as RunEvent;
    } catch {
      if (end !== -1) bad.push({ at: start, why: 'could not be read (torn or corrupt)' });
      continue;
    }
    if (ev && typeof ev === 'object' && ev.type === 'run-created') continue;
    // checked field by field, as every record (SPEC §12): a malformed or forged event is skipped
    const checked = checkEvent(ev);
    if (typeof checked === 'string') bad.push({ at: start, why: `is not a valid event (${checked})` });
    else applyEventInPlace(state, checked);
  }
  return bad;
}

export interface Fence {
  /** Before each journal append: cheap (no I/O); readers also fence events by generation. */
  append: () => boolean;
  /** Before each snapshot: reads the lock file to confirm it still carries our lock_id. */
  snapshot: () => boolean;
}

/** Writes one run's state in its folder. Every write is fenced, and a snapshot never replaces
 * one written under a newer generation. */
export class RunStore implements RunWriter {
  private journalFd: number | null = null;
  private journalBytes = 0;
  /** The last append failed part-way: the next one starts on a fresh line. */
  private torn = false;
  bytesWritten = 0;

  /** The run's folder (the id checked once: a task's log path is asked for several times). */
  readonly dir: string;

  constructor(
    readonly runsDir: string,
    readonly runId: string,
    private readonly fence: Fence,
  ) {
    this.dir = runDir(runsDir, runId);
  }

  logPath(taskId: string): string {
    return childPath(this.dir, `${taskId}.log`);
  }

  /** Creates the run folder (exclusively: a run id is never reused), the journal's first line
   * (the run as created: the journal alone can rebuild the run), and the first snapshot. */
  async create(state: RunState): Promise<void> {
    ensureStateDir(this.runsDir);
    try {
      makeFolder(this.dir);
    } catch (err) {
      throw stateWriteError(err, this.dir, 'creating');
    }
    this.openJournal();
    this.append({ type: 'run-created', gen: state.generation, at: state.created_at, state });
    await this.snapshot(state);
  }

  /** Continues an existing run (resume). */
  async reopen(state: RunState): Promise<void> {
    this.openJournal();
    await this.snapshot(state);
  }

  append(event: RunEvent): void {
    if (this.journalFd === null) this.openJournal();
    if (!this.fence.append()) throw new FencedError('the lock is no longer ours');
    this.appendUnfencedSync(event);
  }

  /** The one write a holder that lost its lock still makes: its run's ABORTED / LOCK_LOST
   * record. Appended with its old generation, so a newer holder's state always wins. */
  async appendUnfenced(event: RunEvent): Promise<string | null> {
    this.appendUnfencedSync(event);
    return null;
  }

  /** Appends are synchronous: one that was not stored threw to its caller. */
  unrecorded(): readonly RunEvent[] {
    return [];
  }

  appendUnfencedSync(event: RunEvent): void {
    if (this.journalFd === null) return;
    const buf = Buffer.from(`${this.torn ? '\n' : ''}${JSON.stringify(event)}\n`, 'utf8');
    try {
      writeAll(this.journalFd, buf, null);
    } catch (err) {
      // Part of the line may have reached the file (a full disk): written over with spaces at
      // once, as every append of ours is (fs/durable.ts), and the next line starts on a fresh one.
      const written = (err as { written?: unknown }).written;
      if (typeof written === 'number' && written > 0) blankOwnBytes(join(this.dir, JOURNAL), buf.subarray(0, written));
      this.torn = true;
      this.journalBytes = fdSize(this.journalFd);
      throw stateWriteError(err, join(this.dir, JOURNAL), 'appending to');
    }
    this.torn = false;
    this.journalBytes += buf.length;
    this.bytesWritten += buf.length;
  }

  async snapshot(state: RunState): Promise<void> {
    if (!this.fence.snapshot()) throw new FencedError('the lock is no longer ours');
    const path = join(this.dir, SNAPSHOT);
    // a file that is not a run's snapshot (an array, a task list that is not one) is set aside as
    // corrupt, not written over unseen: the journal rebuilt what it should hold. One of a newer
    // holder's generation fences us whatever else it holds.
    const existing = readJsonState(
      path,
      (v) => {
        const gen = (v as { generation?: unknown } | null)?.generation;
        if (typeof gen === 'number' && gen > state.generation && !Array.isArray(v)) return v as { generation: number };
        return checkSnapshot(v, state.run_id);
      },
      { moveAside: true },
    );
    if (existing.kind === 'ok') {
      const gen = Number.isSafeInteger(existing.value.generation) ? (existing.value.generation as number) : 0;
      if (gen > state.generation)
        throw new FencedError(`${path} was written by a newer lock holder (generation ${gen})`);
    }
    // where the journal ends now, by the file (a holder that lost the lock may have appended
    // its last line after ours: an older generation, ignored all the same, and never a line
    // the offset could cut in two)
    const offset = this.journalFd !== null ? fdSize(this.journalFd) : this.journalBytes;
    this.bytesWritten += writeJsonDurable(path, { ...state, journal_offset: offset }, { cleanTemps: true });
  }

  async flush(): Promise<void> {
    // appends are synchronous here
  }

  async close(): Promise<void> {
    if (this.journalFd !== null) closeFd(this.journalFd);
    this.journalFd = null;
  }

  /** Opens the journal for appending (done by create() and reopen()). */
  openJournal(): void {
    const path = join(this.dir, JOURNAL);
    const f = openAppendTo(path);
    this.journalFd = f.fd;
    this.journalBytes = fdSize(f.fd);
    // A crash mid-append leaves a torn last line; start ours on a fresh line.
    if (this.journalBytes > 0 && appendFileTorn(f, path)) this.torn = true;
  }
}

/** A run whose run.json was found corrupt and rebuilt from its journal, written again under the
 * lock: the damaged file set aside as `run.json.corrupt.<ts>` (the evidence kept) and the rebuilt
 * snapshot put in its place. Returns where the damaged file went; null when it is not damaged
 * (any more) and nothing was written. */
export async function rewriteSnapshot(runsDir: string, state: RunState, fence: Fence): Promise<string | null> {
  const path = join(runDir(runsDir, state.run_id), SNAPSHOT);
  const r = readJsonState(path, (v) => checkSnapshot(v, state.run_id), { moveAside: true });
  if (r.kind !== 'corrupt') return null;
  const writer = new RunStore(runsDir, state.run_id, fence);
  try {
    await writer.reopen(state);
  } finally {
    await writer.close();
  }
  return r.movedTo;
}
