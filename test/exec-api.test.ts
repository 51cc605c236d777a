// The library's exec API (SPEC §8) checks what a JavaScript caller gives it, as the CLI checks its
// flags: found by a fault pass of the library.

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadProject } from '../src/config/load.js';
import { UsageError } from '../src/errors.js';
import { execResume, execRun } from '../src/exec-api.js';
import { testProject } from './helpers/testdir.js';

describe('execRun / execResume options', () => {
  it('parallel 0, a negative or a fraction, tasks [] and runTimeoutMs 0 are refused (UsageError), and nothing runs or is recorded', async () => {
    const cwd = testProject({ exec: { tasks: [{ id: 'a', run: 'touch ran' }] } });
    const ctx = { project: loadProject({ cwd }) };
    for (const opts of [
      { parallel: 0 },
      { parallel: -1 },
      { parallel: 1.5 },
      { parallel: Number.NaN },
      { tasks: [] },
      { runTimeoutMs: 0 },
    ]) {
      await expect(execRun(ctx, opts), JSON.stringify(opts)).rejects.toBeInstanceOf(UsageError);
      await expect(execResume(ctx, undefined, opts), JSON.stringify(opts)).rejects.toBeInstanceOf(UsageError);
    }
    await expect(execRun(ctx, { tasks: [] })).rejects.toThrow(/tasks names no task/);
    expect(existsSync(join(cwd, 'ran'))).toBe(false);
    expect(existsSync(join(cwd, '.routinely', 'exec'))).toBe(false);
    // and the same run with good options does run
    const r = await execRun(ctx, { parallel: 1 });
    expect(r.kind).toBe('done');
    expect(existsSync(join(cwd, 'ran'))).toBe(true);
  });
});
