// The reason of a tick skipped because the routine's own previous fire still goes on: in this
// scheduler, or in another process of this host (a routine never runs beside itself, SPEC §6).
export const PREVIOUS_RUN = 'previous run still running';
