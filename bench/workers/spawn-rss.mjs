// Node's spawn from a parent of a given size: `true` 200 times, one at a time, with MB of the
// parent's memory touched first (argv[2]); prints the parent's RSS and its CPU per spawn (fork
// copies the parent's page tables, so a bigger parent pays more for each child).
import { spawn } from 'node:child_process';
const mb = Number(process.argv[2] ?? 0);
const keep = [];
for (let i = 0; i < mb; i++) keep.push(Buffer.alloc(1 << 20, 1));
const n = 200;
const c0 = process.cpuUsage();
for (let i = 0; i < n; i++)
  await new Promise((r) => spawn('true', [], { stdio: 'ignore', detached: true }).on('exit', r));
const c = process.cpuUsage(c0);
console.log(
  JSON.stringify({
    rssMb: process.memoryUsage().rss / 1048576,
    cpuMs: (c.user + c.system) / 1000 / n,
    kept: keep.length,
  }),
);
