// The waiting line's words (src/lock/line.ts): who takes the lock next, as busy and waiting
// messages say it.

import { describe, expect, it } from 'vitest';
import { lineNext, type LineEntry } from '../../src/lock/line.js';

const entry = (command: string, routine: string | null, host: string): LineEntry => ({
  ticket: '00000000deadbeef',
  arrived: 1,
  owner: { pid: 4712, host, boot_id: null, start_time: null, command, routine },
});

describe('lineNext', () => {
  it('names the first waiter, and how many more', () => {
    expect(lineNext([entry('lock run', null, 'build-01')])).toBe(
      'a waiter that came first takes it next: lock run, pid 4712 on build-01',
    );
    expect(lineNext([entry('routine', 'r3', 'h2'), entry('lock run', null, 'h2')])).toBe(
      '2 waiters that came first take it next: routine r3, pid 4712 on h2, and 1 more',
    );
  });

  it("escapes control characters of a ticket's strings (SPEC §12), colour codes too: a ticket never hides text", () => {
    const said = lineNext([entry('lock run\u001b[8m SECRET\u001b[0m', 'r\u0007', 'vm\r')]);
    expect(said).toBe(
      'a waiter that came first takes it next: lock run\\x1b[8m SECRET\\x1b[0m r\\x07, pid 4712 on vm\\x0d',
    );
  });
});
