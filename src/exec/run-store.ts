// Run folders: `exec/runs/<run-id>/run.json` (snapshot), `journal.jsonl` (appended events) and
// one `<task-id>.log` per task. Run ids come from users (`exec show`, `exec resume`): they are
// checked against `^r-[A-Za-z0-9-]+$` before they ever become a path.

import { closeSync, constants, fstatSync, mkdirSync, openSync, readdirSync, readSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { NotFoundError, StateIOError, errnoCode } from '../errors.js';
import { readNoFollow } from '../lock/files.js';
import { ensureStateDir, writeJsonAtomic } from '../state/json-file.js';
import { RUN_STATUSES, applyEventInPlace, isRunId, type RunEvent, type RunState } from './run-state.js';
import { FencedError, type RunWriter } from './store.js';

const SNAPSHOT = 'run.json';
const JOURNAL = 'journal.jsonl';

interface Snapshot extends RunState {
  /** Journal bytes already folded into this snapshot. */
  journal_offset: number;
}

export function runDir(runsDir: string, runId: string): string {
  if (!isRunId(runId)) throw new NotFoundError(`${JSON.stringify(runId)} is not a run id (expected r-<time>-<hex>, e.g. r-20261129T190000Z-7f3a)`);
  return join(runsDir, runId);
}

/** Newest first. Names that are not run ids are ignored. */
export function listRunIds(runsDir: string): string[] {
  try {
    return readdirSync(runsDir).filter(isRunId).sort().reverse();
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return [];
    throw err;
  }
}

function checkSnapshot(v: unknown): Snapshot | string {
  if (!v || typeof v !== 'object') return 'not an object';
  const s = v as Partial<Snapshot>;
  if (s.version !== 1 || typeof s.run_id !== 'string') return 'not a run snapshot';
  if (!RUN_STATUSES.includes(s.status as never)) return `unknown status ${JSON.stringify(s.status)}`;
  if (!s.tasks || typeof s.tasks !== 'object' || typeof s.generation !== 'number') return 'malformed tasks or generation';
  return { ...(s as Snapshot), journal_offset: typeof s.journal_offset === 'number' ? s.journal_offset : 0 };
}

/** The run's current state: its snapshot plus the journal written since. null when the run
 * does not exist. A torn last journal line (a crash mid-append) is ignored. */
export function loadRun(runsDir: string, runId: string): RunState | null {
  const dir = runDir(runsDir, runId);
  const text = readNoFollow(join(dir, SNAPSHOT));
  if (text === null) return null;
  let parsed: Snapshot | string;
  try {
    parsed = checkSnapshot(JSON.parse(text));
  } catch (err) {
    parsed = (err as Error).message;
  }
  if (typeof parsed === 'string') throw new StateIOError(`${join(dir, SNAPSHOT)} is corrupt (${parsed})`);
  const { journal_offset, ...snapshot } = parsed;
  const state: RunState = snapshot;
  const journal = readNoFollow(join(dir, JOURNAL));
  if (journal === null) return state;
  const tail = Buffer.from(journal, 'utf8').subarray(journal_offset).toString('utf8');
  for (const line of tail.split('\n')) {
    if (!line) continue;
    try {
      applyEventInPlace(state, JSON.parse(line) as RunEvent);
    } catch {
      // a torn line: the event never completed
    }
  }
  return state;
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
  bytesWritten = 0;

  constructor(
    readonly runsDir: string,
    readonly runId: string,
    private readonly fence: Fence,
  ) {}

  get dir(): string {
    return runDir(this.runsDir, this.runId);
  }

  logPath(taskId: string): string {
    return join(this.dir, `${taskId}.log`);
  }

  /** Creates the run folder (exclusively: a run id is never reused) and the first snapshot. */
  async create(state: RunState): Promise<void> {
    ensureStateDir(this.runsDir);
    try {
      mkdirSync(this.dir, { mode: 0o700 });
    } catch (err) {
      throw new StateIOError(`cannot create run folder ${this.dir}: ${errnoCode(err) ?? String(err)}`);
    }
    this.openJournal();
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
  async appendUnfenced(event: RunEvent): Promise<void> {
    this.appendUnfencedSync(event);
  }

  appendUnfencedSync(event: RunEvent): void {
    if (this.journalFd === null) return;
    const line = `${JSON.stringify(event)}\n`;
    const n = writeSync(this.journalFd, line);
    this.journalBytes += n;
    this.bytesWritten += n;
  }

  async snapshot(state: RunState): Promise<void> {
    if (!this.fence.snapshot()) throw new FencedError('the lock is no longer ours');
    const path = join(this.dir, SNAPSHOT);
    const existing = readNoFollow(path);
    if (existing !== null) {
      const gen = (JSON.parse(existing) as { generation?: number }).generation ?? 0;
      if (gen > state.generation) throw new FencedError(`${path} was written by a newer lock holder (generation ${gen})`);
    }
    this.bytesWritten += await writeJsonAtomic(path, { ...state, journal_offset: this.journalBytes });
  }

  async flush(): Promise<void> {
    // appends are synchronous here
  }

  async close(): Promise<void> {
    if (this.journalFd !== null) closeSync(this.journalFd);
    this.journalFd = null;
  }

  /** Opens the journal for appending (done by create() and reopen()). */
  openJournal(): void {
    const path = join(this.dir, JOURNAL);
    this.journalFd = openSync(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
    this.journalBytes = fstatSync(this.journalFd).size;
    if (this.journalBytes > 0) {
      // A crash mid-append leaves a torn last line; start ours on a fresh line.
      const last = Buffer.alloc(1);
      const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
      try {
        readSync(fd, last, 0, 1, this.journalBytes - 1);
      } finally {
        closeSync(fd);
      }
      if (last[0] !== 0x0a) this.journalBytes += writeSync(this.journalFd, '\n');
    }
  }
}
