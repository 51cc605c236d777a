// A fire whose open marker could not be written did not start; but the marker may be stored all
// the same (the database committed it and the answer was lost). The error carries the marker's
// id so that the fire's record ("not started") closes it if it is there, and is stored once
// either way (SPEC §6).

const markerOf = new WeakMap<Error, string>();

export function markUnstarted(err: unknown, markerId: string): void {
  if (err instanceof Error) markerOf.set(err, markerId);
}

/** The id of the open marker a failed start may have left, for its record to close. */
export function unstartedMarker(err: unknown): string | null {
  return err instanceof Error ? (markerOf.get(err) ?? null) : null;
}
