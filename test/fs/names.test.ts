// childPath is path.join for one plain file name, whatever the folder looks like.

import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { childPath } from '../../src/fs/names.js';

describe('childPath', () => {
  it('gives the string path.join gives', () => {
    const dirs = [
      '/',
      '/a',
      '/a/',
      '/a//b',
      '/a/./b/',
      '/a/../b',
      'a',
      'a/b/',
      '.',
      './',
      '..',
      '',
      '/.routinely/locks',
    ];
    const names = ['x', 'exec-run.slot.12', '.writing.1.2', '...', 'x.', '.', '..', 'a/b', '', '.x/'];
    for (const d of dirs) for (const n of names) expect(childPath(d, n), `${d} + ${n}`).toBe(join(d, n));
    // a second time, from the folder cache
    for (const d of dirs) for (const n of names) expect(childPath(d, n), `${d} + ${n}`).toBe(join(d, n));
  });
});
