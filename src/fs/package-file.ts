// The package's own files, read as they are (the executable's entry and its code cache, beside
// it in dist/): no checks of a state file's kind, owner or size — they are the program itself.

import { readFileSync, statSync } from 'node:fs';

export const readPackageText = (path: string): string => readFileSync(path, 'utf8');

/** The bytes of `cache`, a file made from `source`, when it is there and not older than
 * `source`; else undefined. V8 checks a code cache against its source's length only: an entry
 * edited by hand after the build (same length, other code) must not run the cached code. */
export function readPackageCache(cache: string, source: string): Buffer | undefined {
  try {
    if (statSync(cache).mtimeMs < statSync(source).mtimeMs) return undefined;
    return readFileSync(cache);
  } catch {
    return undefined;
  }
}
