// The package's own files, read as they are (the executable's entry and its code cache, beside
// it in dist/): no checks of a state file's kind, owner or size — they are the program itself.

import { readFileSync } from 'node:fs';

export const readPackageText = (path: string): string => readFileSync(path, 'utf8');

/** The file's bytes, or undefined when it is not there (or cannot be read). */
export function readPackageBytes(path: string): Buffer | undefined {
  try {
    return readFileSync(path);
  } catch {
    return undefined;
  }
}
