// The V8 flags the command line sets while it runs (src/cli/baseline-tiers.ts) must leave a
// process that keeps running healthy: a flag V8 reads only as the heap starts, set later, aborts
// the process at its next incremental collection (`--single-threaded-gc` did, in `routine list`
// of hundreds of records).

import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { RUNTIME_V8_FLAGS } from '../../src/cli/baseline-tiers.js';

/** Sets `flags` at run time, then allocates enough for several full collections. */
function churnAfter(flags: string): { status: number | null; stdout: string; stderr: string } {
  const script = `
    require('node:v8').setFlagsFromString(${JSON.stringify(flags)});
    let keep = [];
    for (let round = 0; round < 3; round++)
      for (let i = 0; i < 2e6; i++) {
        keep.push({ i, s: 'x' + i });
        if (keep.length > 2e5) keep = [];
      }
    console.log('alive');`;
  return spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 60_000 });
}

describe('the V8 flags set at run time', () => {
  it('leave a process that collects garbage for a while alive', () => {
    const r = churnAfter(RUNTIME_V8_FLAGS);
    expect(r.stderr).not.toMatch(/Check failed|Fatal error/);
    expect(r.status).toBe(0);
    expect(r.stdout.trim()).toBe('alive');
  }, 60_000);

  // Node 20's V8 aborts when that flag is set late; shown there, so the churn above is known to
  // reach the collection that would abort (a later V8 may not abort at all: nothing to show)
  it.runIf(process.versions.node.startsWith('20.'))(
    '(the harm it guards against: the collector flag set late aborts the same process)',
    () => {
      const r = churnAfter(`${RUNTIME_V8_FLAGS} --single-threaded-gc`);
      expect(r.status).not.toBe(0);
      expect(r.stderr).toMatch(/Check failed/);
    },
    60_000,
  );
});
