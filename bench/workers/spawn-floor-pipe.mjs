// The floor for a Node.js runner that caps each task's output (as `exec run` does for
// `retention.runLogBytes`): the loop of spawn-floor.mjs, but each task writes to a pipe that this
// process copies to the task's log file, as a cap needs it to, instead of to the file itself.
import { spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, writeSync } from 'node:fs';
// in the bench's project folder (its cwd), which the bench removes: not counted here
const d = mkdtempSync('floor-pipe-');
let next = 0;
await Promise.all(
  Array.from({ length: 4 }, async () => {
    while (next < 500) {
      const i = next++;
      const fd = openSync(`${d}/t${i}.log`, 'a');
      await new Promise((r) => {
        const c = spawn('/bin/sh', ['-c', 'true'], { detached: true, stdio: ['ignore', 'pipe', fd] });
        c.stdout.on('data', (b) => writeSync(fd, b));
        c.on('close', r);
      });
      closeSync(fd);
    }
  }),
);
