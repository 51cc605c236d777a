import type { LivenessProbe, ProcessState } from '../../src/process/identity.js';

/** A process table as plain data. */
export function fakeProbe(table: Record<number, ProcessState> = {}, host = 'host-a', bootId = 'boot-1'): LivenessProbe {
  return {
    host,
    bootId,
    inspect: (pid) => table[pid] ?? { state: 'dead', why: 'no-process' },
    groupMembers: () => [],
  };
}
