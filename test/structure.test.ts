// The shape of src/: no import cycle between files, no two folders importing each other (type
// imports counted), as `madge --circular src` would check (scripts/check-structure.mjs).

import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

describe('src/', () => {
  it('has no import cycle and no two folders that import each other', () => {
    const out = JSON.parse(execFileSync(process.execPath, [resolve(import.meta.dirname, '../scripts/check-structure.mjs'), '--json'], { encoding: 'utf8' })) as { files: number; cycles: string[][]; mutual: unknown[] };
    expect(out.files).toBeGreaterThan(100);
    expect(out.cycles).toEqual([]);
    expect(out.mutual).toEqual([]);
  });
});
