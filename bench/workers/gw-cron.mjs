// One graphile-worker process for bench/pg-fleet.mjs: `jobs` per-minute cron items (`* * * * *`)
// whose task does nothing but note its minute and how late it started after it. On SIGTERM it
// stops and prints {"ran": n, "late": [[minute ms, late ms], …]} as its last line.
// argv: url jobs concurrency
import { run } from 'graphile-worker';

const [url, jobs, concurrency] = process.argv.slice(2);
const late = [];
const items = Array.from({ length: Number(jobs) }, (_, i) => `* * * * * noop ?id=j${String(i).padStart(4, '0')}`).join(
  '\n',
);
const runner = await run({
  connectionString: url,
  concurrency: Number(concurrency),
  noHandleSignals: true,
  pollInterval: 2000,
  crontab: items,
  taskList: {
    noop: async (payload) => {
      const minute = new Date(payload._cron.ts).getTime();
      late.push([minute, Date.now() - minute]);
    },
  },
  logger: new (await import('graphile-worker')).Logger(() => () => {}),
});
console.log('ready');
process.on('SIGTERM', async () => {
  await runner.stop();
  console.log(JSON.stringify({ ran: late.length, late }));
  process.exit(0);
});
