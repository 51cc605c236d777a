// A fire whose open marker could not be written did not start; but the marker may be stored all
// the same (the database committed it and the answer was lost). The fire then throws this, with
// the marker's id, so that its record ("not started") closes the marker if it is there and is
// stored once either way (SPEC §6); `cause` is what went wrong, which callers judge.

export class NotStartedError extends Error {
  constructor(
    override readonly cause: unknown,
    /** The open marker a failed start may have left, for its record to close. */
    readonly markerId: string,
  ) {
    super(cause instanceof Error ? cause.message : String(cause));
    this.name = 'NotStartedError';
  }
}

/** What went wrong, whether or not a marker may be left. */
export const causeOf = (err: unknown): unknown => (err instanceof NotStartedError ? err.cause : err);
