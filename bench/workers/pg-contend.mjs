// One contending process over PostgreSQL: `cycles` lock/unlock cycles after a barrier, with
// routinely's lease (ifBusy wait) or a plain pg_try_advisory_lock retried every 1 ms.
import { appendFileSync, existsSync } from 'node:fs';
import pg from 'pg';

const [impl, cwd, url, cycles, log, barrier] = process.argv.slice(2);
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let acquire;
let done;
if (impl === 'routinely') {
  const { loadProject, openBackend } = await import('../../dist/index.js');
  const backend = await openBackend(loadProject({ cwd }));
  acquire = async () => {
    const r = await backend.lock.acquire('exec-run', { command: 'bench' }, { ifBusy: 'wait' });
    if (!r.ok) throw new Error(r.reason);
    return () => r.lease.release();
  };
  done = () => backend.close();
} else {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  acquire = async () => {
    for (;;) {
      const { rows } = await client.query('SELECT pg_try_advisory_lock(4242) AS ok');
      if (rows[0].ok) return () => client.query('SELECT pg_advisory_unlock(4242)');
      await sleep(1);
    }
  };
  done = () => client.end();
}
while (!existsSync(barrier)) await sleep(1);
const waits = [];
const start = nowMs();
for (let i = 0; i < Number(cycles); i++) {
  const t0 = nowMs();
  const release = await acquire();
  waits.push(nowMs() - t0);
  appendFileSync(log, `S ${process.pid}\nE ${process.pid}\n`);
  await release();
}
const end = nowMs();
await done();
console.log(JSON.stringify({ waits, start, end }));
