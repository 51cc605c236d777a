// Runs a command beside N CPU-bound loops, as on a busy laptop or a shared CI runner:
//   node scripts/under-load.mjs 2 -- npm test
// The loops are `sh -c 'while :; do :; done'` (no I/O, all CPU); they end with the command, also
// when this script is interrupted. Exits with the command's code.
import { spawn } from 'node:child_process';

const [n, sep, cmd, ...args] = process.argv.slice(2);
if (!/^\d+$/.test(n ?? '') || sep !== '--' || !cmd) {
  console.error('usage: node scripts/under-load.mjs N -- COMMAND [ARGS...]');
  process.exit(2);
}
const loops = Array.from({ length: Number(n) }, () => spawn('sh', ['-c', 'while :; do :; done'], { stdio: 'ignore' }));
const stopLoops = () => {
  for (const l of loops) l.kill('SIGKILL');
};
process.on('exit', stopLoops);
const child = spawn(cmd, args, { stdio: 'inherit' });
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
child.on('exit', (code, signal) => {
  stopLoops();
  process.exit(code ?? (signal ? 128 + ({ SIGINT: 2, SIGTERM: 15, SIGKILL: 9 }[signal] ?? 1) : 1));
});
