// The one check of ROUTINELY_HOST_ID (SPEC §9), light enough for the commands the entry answers
// from the cache (no imports).

/** Why `ROUTINELY_HOST_ID` cannot name a host (it is written into every lock record and compared
 * byte for byte: a blank, a control character or a huge value is a mistake), or null when it is
 * unset or fine. */
export function hostIdProblem(env: NodeJS.ProcessEnv): string | null {
  const raw = env.ROUTINELY_HOST_ID;
  if (raw === undefined || raw === '') return null;
  return /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,252}$/.test(raw)
    ? null
    : `ROUTINELY_HOST_ID: ${JSON.stringify(raw.length > 80 ? `${raw.slice(0, 80)}…` : raw)} is not a host identity (letters, digits, ".", "_", ":", "@" and "-", starting with a letter or digit, at most 253 characters)`;
}
