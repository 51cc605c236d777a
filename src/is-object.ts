// The one guard for "a JSON object" (not null, not an array) that every reader of a record, a
// row or a cache uses before it looks at the fields.

export const isObj = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** `map[key]` when `map` has it as its own: never a property every object has (`constructor`,
 * `toString`, `valueOf`… are valid routine and task ids, SPEC §2), which a plain lookup of an id
 * not in the map would find. */
export const own = <T>(map: Readonly<Record<string, T>>, key: string): T | undefined =>
  Object.hasOwn(map, key) ? map[key] : undefined;
