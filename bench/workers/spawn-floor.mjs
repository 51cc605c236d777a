// The floor for any Node.js runner: 500 x `sh -c true`, 4 at a time, each in its own process
// group with its output to a log file, and nothing else (no lock, no state).
import { spawn } from 'node:child_process';
import { openSync, closeSync, mkdtempSync } from 'node:fs';
// in the bench's project folder (its cwd), which the bench removes: not counted here
const d = mkdtempSync('floor-');
let next = 0;
const t0 = performance.now();
await Promise.all(
  Array.from({ length: 4 }, async () => {
    while (next < 500) {
      const i = next++;
      const fd = openSync(`${d}/t${i}.log`, 'a');
      await new Promise((r) => {
        const c = spawn('/bin/sh', ['-c', 'true'], { detached: true, stdio: ['ignore', fd, fd] });
        c.on('close', r);
      });
      closeSync(fd);
    }
  }),
);
