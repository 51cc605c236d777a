import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { liveSlots } from '../../src/lock/live-slots.js';
import { testdir } from '../helpers/testdir.js';

describe("liveSlots: a lock's slots as the config says them now (docs/lock.md)", () => {
  it('reads the config again only when the file changed; looks that come while it reads wait for that read', async () => {
    const config = join(testdir('live-slots-'), 'routinely.json');
    writeFileSync(config, '{"slots": 2}');
    let reads = 0;
    let finish: (n: number) => void = () => {};
    const count = liveSlots(config, 2, () => {
      reads++;
      return new Promise<number>((r) => (finish = r));
    });
    expect(await count.current()).toBe(2);
    expect(reads).toBe(0); // unchanged: one stat, no read
    writeFileSync(config, '{"slots": 1, "changed": true}');
    // the waits on two slots ask at once: neither goes on with the old count
    const both = Promise.all([count.current(), count.current()]);
    finish(1);
    expect(await both).toEqual([1, 1]);
    expect(reads).toBe(1);
    expect(await count.current()).toBe(1);
  });

  it('a config that no longer validates keeps the count last read', async () => {
    const config = join(testdir('live-slots-'), 'routinely.json');
    writeFileSync(config, '{}');
    const count = liveSlots(config, 3, () => {
      throw new Error('routinely.json: not valid JSON');
    });
    writeFileSync(config, '{ half an edit');
    expect(await count.current()).toBe(3);
  });
});
