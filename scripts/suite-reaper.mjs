// Started detached by test/global-setup.ts: waits for the vitest process of its run to end, then
// kills every process that run started and left (scripts/suite-processes.mjs). It covers the ends
// the global teardown never sees: SIGINT or SIGTERM to vitest (it exits without tearing down), a
// CI time-out, SIGKILL.
import { runAlive, sweep } from './suite-processes.mjs';

const tag = process.argv[2];
if (!tag) process.exit(2);
const timer = setInterval(() => {
  if (runAlive(tag)) return;
  clearInterval(timer);
  sweep((t) => t === tag);
}, 500);
