// `npm run bench`: every benchmark, each printing our figures next to its anchor and the ratio.
// `--quick` runs fewer rounds. Machine: 2 vCPU, noisy neighbours; read medians and ratios.
import { cpus } from 'node:os';
import { lockBenchmarks } from './lock.mjs';

const quick = process.argv.includes('--quick');
console.log(`routinely benchmarks — node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'})${quick ? ', quick' : ''}`);
await lockBenchmarks({ quick });
