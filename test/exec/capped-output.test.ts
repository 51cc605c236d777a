import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CUT_LINE_PATTERN, CappedOutput, outputLeftOut } from '../../src/exec/capped-output.js';
import { setDurableIoForTests } from '../../src/fs/durable.js';
import { testdir } from '../helpers/testdir.js';

function capture(cap: number, chunks: Buffer[]): { text: string; cut: number } {
  // removed when the test ends
  const file = join(testdir('capped-'), 'log');
  const fd = openSync(file, 'w');
  const out = new CappedOutput(fd, cap);
  for (const c of chunks) out.write(c);
  const cut = out.end();
  closeSync(fd);
  return { text: readFileSync(file, 'latin1'), cut };
}

describe("CappedOutput: a run's output bounded to runLogBytes (SPEC §3)", () => {
  it('a disk that fills part-way through a write: only the bytes that did not reach the log are counted lost', () => {
    const file = join(testdir('capped-'), 'log');
    const fd = openSync(file, 'w');
    let room = 1000; // the disk takes 1 000 bytes more, then ENOSPC
    const restore = setDurableIoForTests({
      write: (f, buf, offset, length, position) => {
        if (room === 0) throw Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
        const n = Math.min(length, room, 300); // short writes, as a filling disk gives
        room -= n;
        return writeSync(f, buf, offset, n, position);
      },
    });
    try {
      const out = new CappedOutput(fd, 1 << 20);
      out.write(Buffer.alloc(800, 'a'));
      out.write(Buffer.alloc(700, 'b'));
      out.end();
      expect(out.lost()).toEqual({ bytes: 500, code: 'ENOSPC' });
    } finally {
      restore();
      closeSync(fd);
    }
    expect(readFileSync(file, 'latin1')).toBe('a'.repeat(800) + 'b'.repeat(200));
  });

  it('output within the cap is kept whole, byte for byte, with no cut line', () => {
    const chunks = Array.from({ length: 50 }, (_, i) => Buffer.from(`line ${i}\n`));
    const r = capture(4096, chunks);
    expect(r.cut).toBe(0);
    expect(r.text).toBe(Buffer.concat(chunks).toString('latin1'));
  });

  it('past the cap: the first half and the newest bytes are kept, the total within the cap, the cut counted exactly', () => {
    // chunk sizes that do not line up with the halves
    const sizes = Array.from({ length: 400 }, (_, i) => 1 + ((i * 7919) % 997));
    let n = 0;
    const chunks = sizes.map((s) =>
      Buffer.from(Array.from({ length: s }, () => String.fromCharCode(33 + (n++ % 90))).join('')),
    );
    const all = Buffer.concat(chunks).toString('latin1');
    const cap = 16 * 1024;
    const r = capture(cap, chunks);
    expect(r.text.length).toBeLessThanOrEqual(cap);
    const m = /\n(--- routinely: \d+ bytes of output left out \(runLogBytes \d+\) ---)\n/.exec(r.text)!;
    expect(CUT_LINE_PATTERN.test(m[1]!)).toBe(true);
    const head = r.text.slice(0, m.index);
    const tail = r.text.slice(m.index + m[0].length);
    expect(head).toBe(all.slice(0, cap / 2));
    expect(all.endsWith(tail)).toBe(true);
    expect(head.length + r.cut + tail.length).toBe(all.length);
    expect(Number(/(\d+) bytes/.exec(m[1]!)![1])).toBe(r.cut);
  });

  it('one huge chunk is cut too', () => {
    const big = Buffer.alloc(100_000, 'z');
    const r = capture(2048, [Buffer.from('A'), big, Buffer.from('Z')]);
    expect(r.text.length).toBeLessThanOrEqual(2048);
    expect(r.text.startsWith('Az')).toBe(true);
    expect(r.text.endsWith('zZ')).toBe(true);
    expect(r.cut).toBeGreaterThan(97_000);
  });

  it("a resumed attempt's share of the cap keeps it, and its cut line names runLogBytes as configured", () => {
    const file = join(testdir('capped-'), 'log');
    const fd = openSync(file, 'w');
    const out = new CappedOutput(fd, 1024, 4096);
    out.write(Buffer.alloc(10_000, 'y'));
    out.end();
    closeSync(fd);
    const text = readFileSync(file, 'latin1');
    expect(text.length).toBeLessThanOrEqual(1024);
    expect(text).toMatch(/--- routinely: \d+ bytes of output left out \(runLogBytes 4096\) ---/);
  });

  it('outputLeftOut: a trimmed log part counts its output and what its cut lines said, read a part at a time', () => {
    const mark = (n: number) => `--- routinely: ${n} bytes of output left out (runLogBytes 1000) ---\n`;
    const heading = '--- routinely: run attempt 2, 2026-12-06T10:00:00.000Z ---\n';
    // a cut line that starts 5 bytes before the first 64 KiB part ends, and one at the start
    const text = `${mark(7)}${'a'.repeat(65_530 - mark(7).length)}\n\n${mark(100)}b\n\n${heading}c\n`;
    const buf = Buffer.from(text);
    const reads: number[] = [];
    const read = (position: number, into: Buffer): number => {
      reads.push(into.length);
      return buf.copy(into, 0, position, Math.min(buf.length, position + into.length));
    };
    const output = 65_530 - mark(7).length + 1 + 2 + 2; // the a's, b and c with their newlines
    expect(outputLeftOut(buf.length, read)).toBe(output + 7 + 100);
    expect(Math.max(...reads)).toBe(64 * 1024);
  });
});
