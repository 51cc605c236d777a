// The config watch (scheduler/config-watch.ts): a change of the file's content reloads, measured
// against the text the last reload validated.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigWatch } from '../../src/scheduler/config-watch.js';
import { eventually } from '../helpers/cli.js';
import { testdir } from '../helpers/testdir.js';

describe('ConfigWatch', () => {
  it('an edit made while a reload validated the file before it is still a change (it was taken as the config in force)', async () => {
    const path = join(testdir(), 'routinely.json');
    const a = '{"routines": []}';
    const b = '{"routines": [], "timezone": "UTC"}';
    writeFileSync(path, a);
    let changes = 0;
    const watch = new ConfigWatch(
      () => path,
      () => changes++,
    );
    // the reload validated A; B was written while it ran, before A was accepted
    writeFileSync(path, b);
    watch.accepted(a);
    watch.start();
    try {
      writeFileSync(path, b); // (the event of that write, or any later one)
      await eventually(() => changes > 0, 5_000, 'the edit seen as a change');
      expect(changes).toBe(1);
    } finally {
      watch.stop();
    }
  });
});
