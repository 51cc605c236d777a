// Where exec state lives, as the exec layer sees it: the task registry and the runs. Files
// under the state folder are the embedded default; PostgreSQL is the second implementation
// (SPEC §9). Writes made under the exec lock take the lease, so each backend fences them its own
// way: the file backend checks the lock file (and readers fence journal events by generation),
// the database checks the lease row in the same statement.

import type { Lease } from '../lock/lease.js';
import type { Registry, RegistryRead } from './registry.js';
import type { RunEvent, RunState } from './run-state.js';

export type Warn = (message: string) => void;

export type { RegistryRead } from './registry.js';

export interface ExecStore {
  /** `write`: the caller holds the exec lock and will save the registry, so a corrupt one is
   * moved aside; read-only views leave it where it is. */
  loadRegistry(opts: { write: boolean }): Promise<RegistryRead>;
  /** Where the registry is, as a person should read it in messages. */
  readonly registryLocation: string;
  /** Fenced: refused (FencedError) when `lease` is no longer current. */
  saveRegistry(registry: Registry, now: string, lease: Lease): Promise<number>;
  /** null when the run does not exist. */
  loadRun(runId: string): Promise<RunState | null>;
  /** Run ids, newest first. */
  listRunIds(limit: number): Promise<string[]>;
  runWriter(runId: string, lease: Lease): RunWriter;
  /** Removes a finished run (its record and its task logs): retention.execRuns. Fenced. */
  removeRun(runId: string, lease: Lease): Promise<void>;
  /** Where task `taskId` of `runId` writes its output (always a local file). */
  logPath(runId: string, taskId: string): string;
  /** Where runs are, as a person should read it in messages. */
  readonly location: string;
  /** Under the lock: the runs this store found with a damaged snapshot (rebuilt from their
   * journals as they were read) are written again, the damaged files set aside. */
  repairRuns?(lease: Lease): Promise<void>;
}

export interface RunWriter {
  create(state: RunState): Promise<void>;
  reopen(state: RunState): Promise<void>;
  /** Records one event, in order. Throws FencedError at once when the lease is known lost; a
   * backend that writes asynchronously reports a later refusal through flush(). */
  append(event: RunEvent): void;
  /** The one write a holder that lost its lock still makes (its ABORTED / LOCK_LOST record),
   * with its old generation so a newer holder's state always wins. Tried again for a bounded
   * time while the store cannot be reached; resolves to null once stored, else to why not. */
  appendUnfenced(event: RunEvent): Promise<string | null>;
  /** Events that append() took but that were never stored (refused by the fence, or the store
   * could not be reached until the lease ran out): what the record does not know. */
  unrecorded(): readonly RunEvent[];
  snapshot(state: RunState): Promise<void>;
  /** Waits for every appended event; throws FencedError if one was refused. */
  flush(): Promise<void>;
  close(): Promise<void>;
  readonly bytesWritten: number;
}
