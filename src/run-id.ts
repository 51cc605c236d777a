// Run ids (SPEC §5): `r-20261129T190000Z-7f3a`, sortable by time, then random. Made here, and
// checked here by every reader before an id becomes part of a path, a URL or a lookup.

const RUN_ID = /^r-[A-Za-z0-9-]+$/;

/** The longest run id any reader takes. */
export const RUN_ID_MAX = 80;

export const isRunId = (s: string): boolean => s.length <= RUN_ID_MAX && RUN_ID.test(s);

/** `r-20261129T190000Z-7f3a`: sortable by time, then random. */
export function newRunId(nowMs: number, random: string): string {
  const iso = new Date(nowMs).toISOString(); // 2026-11-29T19:00:00.000Z
  const compact = `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}T${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z`;
  return `r-${compact}-${random}`;
}
