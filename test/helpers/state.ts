// What a project's routine state holds, read the way every view reads it (SPEC §3): the shared
// index where it is current, each routine's own index and history where it is not.

import { join } from 'node:path';
import type { Project } from '../../src/config/load.js';
import { readRoutineState } from '../../src/scheduler/file-store.js';
import type { RoutineStateFile } from '../../src/state/routine-state.js';

export function routineStateOf(dir: string, stateDir = join(dir, '.routinely')): RoutineStateFile {
  try {
    return readRoutineState({ stateDir } as Project);
  } catch {
    return { version: 1, routines: {} };
  }
}
