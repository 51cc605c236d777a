// The shape of src/ (scripts/check-structure.mjs): no import cycle between files, no two folders
// importing each other (type imports counted), as `madge --circular src` would check; SQL only in
// the schema and the statements module; node:fs called only in src/fs; short file headers.

import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

type Shape = {
  files: number;
  cycles: string[][];
  mutual: unknown[];
  sqlFiles: string[];
  fsCalls: string[];
  longHeaders: string[];
  bigUnexplained: string[];
  folderFiles: Record<string, number>;
};
const shape = (): Shape =>
  JSON.parse(
    execFileSync(process.execPath, [resolve(import.meta.dirname, '../scripts/check-structure.mjs'), '--json'], {
      encoding: 'utf8',
    }),
  ) as Shape;

describe('src/', () => {
  it('has no import cycle and no two folders that import each other', () => {
    const out = shape();
    expect(out.files).toBeGreaterThan(100);
    expect(out.cycles).toEqual([]);
    expect(out.mutual).toEqual([]);
  });

  it('writes SQL in two files: the schema and the statements the stores run', () => {
    expect(shape().sqlFiles).toEqual(['pg/schema.ts', 'pg/statements.ts']);
  });

  it('calls node:fs only in src/fs (every open, read, write and rename of a file goes through it)', () => {
    expect(shape().fsCalls).toEqual([]);
  });

  it('opens every file with a header of at most 10 lines, and says why a file is over 300 lines', () => {
    const out = shape();
    expect(out.longHeaders).toEqual([]);
    expect(out.bigUnexplained).toEqual([]);
  });

  it('keeps the scheduler loop alone in scheduler/ (at most 18 files; a fire, the stores, control elsewhere)', () => {
    const { folderFiles } = shape();
    expect(folderFiles.scheduler).toBeLessThanOrEqual(18);
    expect(folderFiles.fire).toBeGreaterThan(0);
  });
});
