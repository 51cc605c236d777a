import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import LongestFirst from './test/sequencer.js';

// Most of a test's time is spent waiting on real processes and real timers (a TTL, a tick), not
// on the CPU: three files per core keep the cores busy (CONTRIBUTING.md "Running tests"; a
// different number with `--maxWorkers N`).
const workers = Math.min(12, Math.max(4, availableParallelism() * 3));

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // Timeouts detect a hang, far above the normal time (a loaded machine takes several times
    // longer): never a timing assertion.
    testTimeout: 120_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: workers,
    sequence: { sequencer: LongestFirst },
    // Flaky-by-machine-load is a bug to fix, not to retry.
    retry: 0,
  },
});
