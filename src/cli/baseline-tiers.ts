// V8's optimizing tier off for the rest of the process (issue 52): most commands live for tens
// of milliseconds, and TurboFan compiles on a thread of its own, in the same process's CPU time.

import { createRequire } from 'node:module';

const lazyRequire = createRequire(import.meta.url);

/** The flags set while the process runs. Only flags V8 reads at each decision may be: the
 * collector's are read once, as the heap starts (`--single-threaded-gc` set later aborts the
 * process at the end of its next incremental collection, V8's "Check failed:
 * concurrent_marking_handle_"; test/cli/baseline-tiers.test.ts). */
export const RUNTIME_V8_FLAGS = '--max-opt=1';

/** JavaScript runs in V8's interpreter and baseline compiler only: TurboFan's compiles cost these
 * commands more than the faster code gives back — measured with `--max-opt=1` against none, CPU
 * time: `validate` of 1 000 routines from the cache −12 %, validating them −23 %, `routine list`
 * validating −27 %, `routine list` of 1 000 routines with their records −18 %, `exec run` of 500
 * tasks −10 % — and an idle scheduler keeps ≈ 6 MB less resident (TurboFan's code in the node
 * binary, its zones, the optimized code; docs/benchmarks.md). Process-wide; set before the work
 * it is for. Not for the short answers from the cache (`lock`, `routine list` with few records):
 * node:v8 loads Node's streams (≈ 1.4 ms), which those never need, and they gain nothing. */
export function stayInBaselineTiers(): void {
  try {
    (lazyRequire('node:v8') as typeof import('node:v8')).setFlagsFromString(RUNTIME_V8_FLAGS);
  } catch {
    // a runtime without the flag simply optimizes
  }
}
