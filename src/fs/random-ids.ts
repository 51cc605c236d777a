// Random ids (lock ids, open-marker ids, temp names, run ids' tails) from a pool: a trick that buys
// the lock cycle's figure (docs/benchmarks.md): one randomBytes() call per 4 KiB of ids, since the
// call itself costs ≈ 15 µs, more than a whole lock cycle's other syscalls; read from /dev/urandom
// (loading node:crypto costs a short command 2 ms of its start-up), node:crypto otherwise.

import { closeSync, constants, openSync, readSync } from 'node:fs';
import { createRequire } from 'node:module';

let pool: Buffer = Buffer.alloc(0);
let poolOffset = 0;
// node:crypto on first use: readers (`routine list`, `lock status`) never need it.
const lazyRequire = createRequire(import.meta.url);

export function randomHex(bytes: number): string {
  if (poolOffset + bytes > pool.length) {
    pool = randomPool(4096);
    poolOffset = 0;
  }
  const hex = pool.toString('hex', poolOffset, poolOffset + bytes);
  poolOffset += bytes;
  return hex;
}

/** Random bytes from the kernel: /dev/urandom where there is one (loading node:crypto costs a
 * short command 2 ms of its start-up), node:crypto otherwise. */
function randomPool(size: number): Buffer {
  try {
    const fd = openSync('/dev/urandom', constants.O_RDONLY);
    try {
      const buf = Buffer.allocUnsafe(size);
      if (readSync(fd, buf, 0, size, null) === size) return buf;
    } finally {
      closeSync(fd);
    }
  } catch {
    // no /dev/urandom here
  }
  return (lazyRequire('node:crypto') as typeof import('node:crypto')).randomBytes(size);
}
