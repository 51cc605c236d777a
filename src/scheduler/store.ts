// Where routine state lives, as the scheduler sees it: routine-state.json and history in files
// (the default), or tables in PostgreSQL (SPEC §9).

import type { HistoryEntry } from '../state/history.js';
import type { Fire, RoutineStateFile } from '../state/routine-state.js';

export type Warn = (message: string) => void;

export interface PauseChange {
  wasPaused: boolean;
  /** The note now in effect. */
  note: string | null;
}

export interface RoutineStore {
  read(warn: Warn): Promise<RoutineStateFile>;
  recordFire(routineId: string, fire: Fire, warn: Warn): Promise<void>;
  /** Pausing again without a note keeps the first note. */
  setPaused(routineId: string, paused: boolean, note: string | null): Promise<PauseChange>;
  /** Oldest first. */
  history(routineId: string, warn?: Warn): Promise<HistoryEntry[]>;
  /** Claims one scheduled time of a routine for this scheduler; false when another scheduler
   * already did (several schedulers share a database backend, SPEC §9). */
  claimTick(routineId: string, scheduledAt: Date, host: string): Promise<boolean>;
}
