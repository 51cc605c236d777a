// Reading a file from its end (fs/lines-from-end.ts): every line, last first, whatever the block
// size, the line endings and the characters.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { linesFromEnd } from '../../src/fs/lines-from-end.js';
import { testdir } from '../helpers/testdir.js';

describe('linesFromEnd', () => {
  it('gives every line, last first, across block boundaries and multi-byte characters', () => {
    const dir = testdir();
    const lines = Array.from({ length: 200 }, (_, i) => `${i} ${'é€𝄞'.repeat(i % 7)} ${'x'.repeat(i % 13)}`);
    for (const [name, text] of [
      ['with.txt', `${lines.join('\n')}\n`],
      ['without.txt', lines.join('\n')],
      ['gaps.txt', `\n\n${lines.join('\n\n')}\n\n`],
    ] as const) {
      writeFileSync(join(dir, name), text);
      for (const block of [1, 2, 3, 7, 64, 8192]) {
        const read = [...linesFromEnd(join(dir, name), block)].filter((l) => l.length > 0);
        expect(read, `${name}, blocks of ${block}`).toEqual([...lines].reverse());
      }
    }
    expect([...linesFromEnd(join(dir, 'missing.txt'))]).toEqual([]);
  });

  it('a line of many blocks (3 MiB: a dozen 256 KiB blocks and more) comes whole, between its neighbours', () => {
    const dir = testdir();
    const long = `{"x":"${'€'.repeat(1024 * 1024)}"}`;
    writeFileSync(join(dir, 'long.txt'), `first\n${long}\nlast\n`);
    for (const block of [1, 8192]) {
      const read = [...linesFromEnd(join(dir, 'long.txt'), block)];
      expect(read.length, `blocks of ${block}`).toBe(3);
      expect(read[0]).toBe('last');
      expect(read[1] === long, `blocks of ${block}: the long line whole`).toBe(true);
      expect(read[2]).toBe('first');
    }
  });
});
