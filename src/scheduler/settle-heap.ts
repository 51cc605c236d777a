// A trick that buys the idle scheduler's memory figure (docs/benchmarks.md, issue 52): starting up
// (validating the config, every routine's upcoming times) makes much garbage — croner keeps a
// 10 000-entry year table per parsed pattern, ≈ 80 KB, and the scheduler parses each pattern a few
// times — and V8 keeps the heap it grew for it, so an idle scheduler of 1 000 routines stayed at
// about 107 MB. One full collection at the first idle moment after a start or a reload gives it
// back. node:v8 has no call for it: --expose-gc is set at run time and `gc` taken from a context.

import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { forgetRecentCrons } from '../config/cron-cache.js';

let collect: (() => void) | null | undefined;

/** Two full garbage collections (measured: the first frees the garbage, the pages go back to the
 * system at the second), or nothing where the runtime does not offer them. */
export function settleHeap(): void {
  // croner's year tables of the patterns used while starting (16 of them: 1.4 MB of heap)
  forgetRecentCrons();
  if (collect === undefined) {
    try {
      setFlagsFromString('--expose-gc');
      collect = runInNewContext('gc') as () => void;
    } catch {
      collect = null;
    }
  }
  collect?.();
  collect?.();
  // V8 gives back the young generation it grew only when it sees the allocation rate low: the
  // same again a moment later, when the scheduler is idle
  setTimeout(() => {
    collect?.();
    collect?.();
  }, 2_000).unref();
}
