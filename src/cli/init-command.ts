// `routinely init`: a commented starter routinely.json with `$schema`.

import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ExitCode, UsageError } from '../errors.js';
import { out } from './io.js';

export const STARTER = `{
  // routinely project configuration. Comments are allowed; unknown keys are errors.
  // Reference: https://github.com/routinely (README), schema below for editor completion.
  "$schema": "./node_modules/routinely/config/routinely.schema.json",

  // State (routine-state.json, history, locks, exec runs), relative to this file.
  "stateDir": ".routinely",

  // The project exec lock: held for every routine, exec run and lock run.
  // A holder that misses its heartbeat for ttlSeconds loses the lock.
  "lock": { "ttlSeconds": 60 },

  "exec": {
    // Tasks run at once by \`routinely exec run\`.
    "parallel": 2,
    "tasks": [
      { "id": "build", "run": "echo build" },
      { "id": "test", "run": "echo test", "dependsOn": ["build"] }
    ]
  },

  "routines": [
    // Every 5 minutes: run the ready exec tasks (skipped, not failed, when the lock is busy).
    { "id": "auto", "schedule": "*/5 * * * *", "action": "exec-auto" },
    // Every 15 minutes: finish a run that was interrupted.
    { "id": "resume", "schedule": "*/15 * * * *", "action": "exec-resume" },
    // Nightly, in a given time zone; fires once at start-up if a night was missed.
    { "id": "nightly", "schedule": "0 3 * * *", "timezone": "UTC", "catchUp": "latest",
      "action": "command", "run": "echo nightly", "timeoutSeconds": 3600 }
  ]
}
`;

export async function init(flags: { force?: boolean }): Promise<number> {
  const path = join(process.cwd(), 'routinely.json');
  if (existsSync(path) && !flags.force) {
    throw new UsageError(`${path} already exists; pass --force to overwrite it`);
  }
  writeFileSync(path, STARTER, { mode: 0o644 });
  out(`wrote ${path}`);
  out('next: routinely validate, then routinely scheduler start');
  return ExitCode.OK;
}
