// The floor for a runner whose spawner is not Node (issue 52): 500 x `sh -c true`, 4 at a time,
// started by one resident perl (spawner.pl: fork, a session of its own, the output through a pipe
// copied to the log), Node writing one line per task and reading the answers. Nothing else.
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';

// in the bench's project folder (its cwd), which the bench removes: not counted here
const d = mkdtempSync('perl-');
const perl = spawn('perl', [join(import.meta.dirname, 'spawner.pl')], { stdio: ['pipe', 'pipe', 'inherit'] });
let next = 0;
let done = 0;
let buf = '';
perl.stdout.setEncoding('utf8');
const start = () => {
  const i = next++;
  perl.stdin.write(`${i}\t${process.cwd()}\t${d}/t${i}.log\ttrue\n`);
};
await new Promise((resolve) => {
  perl.stdout.on('data', (s) => {
    buf += s;
    for (let k = buf.indexOf('\n'); k >= 0; k = buf.indexOf('\n')) {
      const line = buf.slice(0, k);
      buf = buf.slice(k + 1);
      if (line[0] !== 'E') continue;
      done++;
      if (next < 500) start();
      else if (done === 500) {
        perl.stdin.end();
        resolve();
      }
    }
  });
  for (let j = 0; j < 4; j++) start();
});
await new Promise((resolve) => perl.once('close', resolve));
