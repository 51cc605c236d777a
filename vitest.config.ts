import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // Real processes and real timers: generous per-test limits, never timing assertions.
    testTimeout: 60_000,
    hookTimeout: 30_000,
    pool: 'forks',
    maxWorkers: 2,
    // Flaky-by-machine-load is a bug to fix, not to retry.
    retry: 0,
  },
});
