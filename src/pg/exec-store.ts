// Exec state in PostgreSQL: the registry as one document per project, each run as a snapshot
// row plus an event table. Every write under the exec lock checks the lease row in the same
// statement (the fence of statements.ts), so a holder whose lease is gone — taken over, expired by the database
// clock — is refused in the very transaction that would have written. Task logs stay local
// files (under stateDir) on the host that ran the task.

import { Backoff } from '../backoff.js';
import { systemClock } from '../clock.js';
import { ensureDir } from '../fs/files.js';
import { removeTree } from '../fs/names.js';
import { join } from 'node:path';
import type { Project } from '../config/load.js';
import { DatabaseError, UnreadableRunError } from '../errors.js';
import { checkRegistry, type Registry } from '../exec/registry.js';
import { applyEventInPlace, checkEvent, type RunEvent, type RunState } from '../exec/run-state.js';
import { isRunId } from '../run-id.js';
import { checkSnapshot, runDir } from '../exec/run-store.js';
import { type ExecStore, type RegistryRead, type RunWriter } from '../exec/store.js';
import { FencedError } from '../errors.js';
import type { Lease } from '../lock/lease.js';
import type { Db } from './connect.js';
import { execSql } from './statements.js';

/** How long a holder that lost its lease keeps trying to store its run's final record. */
const FINAL_WRITE_RETRY_MS = 12_000;

export function pgExecStore(db: Db, project: Project & { backend: { type: 'postgres'; project: string } }): ExecStore {
  const name = project.backend.project;
  const logsDir = join(project.stateDir, 'exec', 'runs');
  return {
    location: `database ${db.where} (project ${name})`,

    registryLocation: `the task registry of project ${name} in database ${db.where}`,

    async loadRegistry({ write }): Promise<RegistryRead> {
      const { rows } = await db.query<{ registry: unknown }>(execSql.registry(name));
      if (!rows[0]) return { kind: 'missing' };
      const checked = checkRegistry(rows[0].registry);
      if (typeof checked !== 'string') return { kind: 'ok', registry: checked };
      if (!write) return { kind: 'corrupt', problem: checked, movedTo: null };
      // kept under another project name for inspection, as files keep `<name>.corrupt.<ts>`
      const aside = `${name}.corrupt.${Date.now()}`;
      await db.query(execSql.moveRegistry(name, aside));
      return { kind: 'corrupt', problem: checked, movedTo: `project ${aside}` };
    },

    async saveRegistry(registry: Registry, now: string, lease: Lease): Promise<number> {
      const doc = JSON.stringify({
        ...registry,
        updated_at: now,
        generation: Math.max(registry.generation ?? 0, lease.generation),
      });
      const r = await db.query(execSql.saveRegistry(name, doc, lease));
      if (r.rowCount === 0) throw new FencedError('the exec lock is no longer ours (database)');
      return Buffer.byteLength(doc);
    },

    async loadRun(runId: string): Promise<RunState | null> {
      if (!isRunId(runId)) return null;
      const snap = await db.query<{ snapshot: RunState; events_seq: string }>(execSql.snapshot(name, runId));
      const row = snap.rows[0];
      if (!row) return null;
      // A row is input (SPEC §12): its run id must be the one asked for, every field in range,
      // before anything (a log path) is made from it.
      const checked = checkSnapshot(row.snapshot, runId);
      if (typeof checked === 'string')
        throw new UnreadableRunError(`run ${runId} in the database is unreadable (${checked})`);
      const { journal_offset: _o, ...state } = checked;
      const events = await db.query<{ event: RunEvent }>(execSql.eventsAfter(name, runId, row.events_seq));
      for (const e of events.rows) {
        // a row is input (SPEC §12): an event that does not check out is not applied
        if (
          e.event &&
          typeof e.event === 'object' &&
          e.event.type !== 'run-created' &&
          typeof checkEvent(e.event) !== 'string'
        )
          applyEventInPlace(state, e.event);
      }
      return state;
    },

    async listRunIds(limit: number): Promise<string[]> {
      const { rows } = await db.query<{ run_id: string }>(execSql.newestRuns(name, limit));
      return rows.map((r) => r.run_id).filter(isRunId);
    },

    async removeRun(runId: string, lease: Lease): Promise<void> {
      if (!isRunId(runId)) return;
      const { rows } = await db.query<{ ours: boolean }>(execSql.removeRun(name, runId, lease));
      if (!rows[0]?.ours) throw new FencedError('the exec lock is no longer ours (database)');
      // its task logs are local files, on the host that ran it (if this is that host)
      removeTree(runDir(logsDir, runId));
    },

    runWriter: (runId: string, lease: Lease): RunWriter =>
      new PgRunWriter(db, name, runId, lease, runDir(logsDir, runId)),

    logPath: (runId, taskId) => join(runDir(logsDir, runId), `${taskId}.log`),
  };
}

class PgRunWriter implements RunWriter {
  private chain: Promise<void> = Promise.resolve();
  private fenced: FencedError | null = null;
  private failure: unknown = null;
  private readonly lost: RunEvent[] = [];
  bytesWritten = 0;

  constructor(
    private readonly db: Db,
    private readonly project: string,
    private readonly runId: string,
    private readonly lease: Lease,
    private readonly logDir: string,
  ) {}

  async create(state: RunState): Promise<void> {
    ensureDir(this.logDir);
    await this.writeSnapshot(state, true);
  }

  async reopen(state: RunState): Promise<void> {
    ensureDir(this.logDir);
    await this.writeSnapshot(state, false);
  }

  /** Queued in order; the database refuses it in the same statement if the lease is gone. */
  append(event: RunEvent): void {
    if (this.fenced) throw this.fenced;
    if (!this.lease.confirm()) throw new FencedError('the exec lock is no longer ours');
    const doc = JSON.stringify(event);
    this.bytesWritten += Buffer.byteLength(doc);
    this.chain = this.chain.then(async () => {
      // A database that cannot be reached is retried while our lease may still be valid;
      // once it cannot be, the writer is fenced (the run then ends ABORTED / LOCK_LOST).
      const pause = new Backoff(250, 2_000);
      while (!this.fenced && !this.failure) {
        try {
          const r = await this.db.query(execSql.appendEvent(this.project, this.runId, this.lease, doc));
          if (r.rowCount === 0) break;
          return;
        } catch (err) {
          if (!(err instanceof DatabaseError)) this.failure = err;
          else if (!this.lease.confirm())
            this.fenced = new FencedError(`the exec lock could not be kept: ${err.message}`);
          else await pause.wait(); // the lease's own check decides when to stop
        }
      }
      this.fenced ??= new FencedError('the exec lock is no longer ours (database)');
      this.lost.push(event);
    });
  }

  unrecorded(): readonly RunEvent[] {
    return this.lost;
  }

  /** The final record of a holder that lost its lease (its old epoch, so it never overrides a
   * newer holder). The lease is usually lost because the database could not be reached, so the
   * database is tried again for a bounded time: a run left RUNNING reads as interrupted, but
   * its record should say what happened. */
  async appendUnfenced(event: RunEvent): Promise<string | null> {
    await this.chain;
    const doc = JSON.stringify(event);
    this.bytesWritten += Buffer.byteLength(doc);
    const deadline = systemClock.monotonic() + FINAL_WRITE_RETRY_MS; // a clock step changes nothing
    const pause = new Backoff(250, 2_000);
    for (;;) {
      try {
        await this.db.query(execSql.appendEventUnfenced(this.project, this.runId, event.gen, doc));
        return null;
      } catch (err) {
        const why = err instanceof DatabaseError ? err.message : `database ${this.db.where}: ${(err as Error).message}`;
        if (!(err instanceof DatabaseError) || systemClock.monotonic() + pause.pendingMs > deadline) return why;
        await pause.wait();
      }
    }
  }

  async flush(): Promise<void> {
    await this.chain;
    if (this.fenced) throw this.fenced;
    if (this.failure) throw this.failure;
  }

  async snapshot(state: RunState): Promise<void> {
    await this.flush();
    await this.writeSnapshot(state, false);
  }

  private async writeSnapshot(state: RunState, insert: boolean): Promise<void> {
    const doc = JSON.stringify(state);
    this.bytesWritten += Buffer.byteLength(doc);
    // an update never replaces a snapshot written under a newer generation
    const r = await this.db.query(
      (insert ? execSql.insertSnapshot : execSql.updateSnapshot)(this.project, this.runId, this.lease, doc),
    );
    if (r.rowCount === 0)
      throw new FencedError(
        `run ${this.runId}: the exec lock is no longer ours, or a newer holder wrote this run (database)`,
      );
  }

  async close(): Promise<void> {
    await this.chain;
  }
}
