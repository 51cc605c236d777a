// The one guard for "a JSON object" (not null, not an array) that every reader of a record, a
// row or a cache uses before it looks at the fields.

export const isObj = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
