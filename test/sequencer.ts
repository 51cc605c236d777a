// The order test files start in: longest first, so the run ends soon after its longest file does
// (a 100 s file started last would add 100 s to the run). The length is this machine's last run
// of the file where vitest remembers one (its results cache), else test/durations.json (seconds
// on a quiet 2-core machine, written by `npm run test:durations`), else a guess from the file's
// size. Order decides speed only, never a result: each file runs in a process of its own.

import { readFileSync, statSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const ROOT = resolve(import.meta.dirname, '..');

/** Seconds per file (paths relative to the checkout) from the committed measurements. */
function committed(): Record<string, number> {
  try {
    return (
      JSON.parse(readFileSync(resolve(ROOT, 'test/durations.json'), 'utf8')) as { seconds: Record<string, number> }
    ).seconds;
  } catch {
    return {};
  }
}

export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const known = committed();
    const seconds = (spec: TestSpecification): number => {
      const path = relative(ROOT, spec.moduleId);
      const cached = this.ctx.cache.getFileTestResults(
        `${spec.project.name}:${relative(this.ctx.config.root, spec.moduleId)}`,
      );
      if (cached && !cached.failed) return cached.duration / 1000;
      if (known[path] !== undefined) return known[path];
      // no measurement: a test file of 10 KB takes seconds, and an e2e one spawns processes
      let size = 0;
      try {
        size = statSync(spec.moduleId).size;
      } catch {
        // vanished: order does not matter then
      }
      return (size / 10_000) * (path.startsWith('test/e2e/') ? 5 : 1);
    };
    const weight = new Map(files.map((f) => [f, seconds(f)]));
    return [...files].sort((a, b) => weight.get(b)! - weight.get(a)!);
  }
}
