// The floor for any Node.js runner: 500 x `sh -c true`, 4 at a time, each in its own process
// group with its output to a log file, and nothing else (no lock, no state). With the argument
// `pipe`: the floor for a runner that caps each task's output (as `exec run` does for
// `retention.runLogBytes`): each task writes to a pipe that this process copies to the log.
import { spawn } from 'node:child_process';
import { openSync, closeSync, mkdtempSync, writeSync } from 'node:fs';
const piped = process.argv[2] === 'pipe';
// in the bench's project folder (its cwd), which the bench removes: not counted here
const d = mkdtempSync('floor-');
let next = 0;
await Promise.all(
  Array.from({ length: 4 }, async () => {
    while (next < 500) {
      const i = next++;
      const fd = openSync(`${d}/t${i}.log`, 'a');
      await new Promise((r) => {
        const stdio = ['ignore', piped ? 'pipe' : fd, fd];
        const c = spawn('/bin/sh', ['-c', 'true'], { detached: true, stdio });
        if (piped) c.stdout.on('data', (b) => writeSync(fd, b));
        c.on('close', r);
      });
      closeSync(fd);
    }
  }),
);
