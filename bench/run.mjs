// `npm run bench`: every benchmark, each printing our figures next to its anchor and the ratio.
// `--quick` runs fewer rounds. Machine: 2 vCPU, noisy neighbours; read medians and ratios.
import { cpus } from 'node:os';
import { execBenchmarks } from './exec.mjs';
import { httpBenchmarks } from './http.mjs';
import { lockBenchmarks } from './lock.mjs';
import { pgBenchmarks } from './pg.mjs';
import { fleetBenchmarks } from './pg-fleet.mjs';
import { schedulerBenchmarks } from './scheduler.mjs';
import { fireCostBySize } from './fire-size.mjs';
import { coldStart } from './cold-start.mjs';
import { cronAnchor } from './cron.mjs';
import { soak } from './soak.mjs';

const quick = process.argv.includes('--quick');
console.log(
  `routinely benchmarks — node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'})${quick ? ', quick' : ''}`,
);
const only = process.argv.find((a) => a.startsWith('--only='))?.slice(7);
if (!only || only === 'lock') await lockBenchmarks({ quick });
if (!only || only === 'exec') await execBenchmarks({ quick });
if (!only || only === 'scheduler') await schedulerBenchmarks({ quick });
if (!only || only === 'size') await fireCostBySize(quick ? { seconds: 10, rounds: 1 } : {});
if (!only || only === 'cold') await coldStart(quick ? { rounds: 3 } : {});
if ((!only && !quick) || only === 'cron') await cronAnchor();
if (!only || only === 'http') await httpBenchmarks({ quick });
if (!only || only === 'pg') await pgBenchmarks({ quick });
if (!only || only === 'fleet') await fleetBenchmarks({ quick });
// an hour: only when asked for
if (only === 'soak')
  await soak({ minutes: Number(process.argv.find((a) => a.startsWith('--minutes='))?.slice(10) ?? 60) });
