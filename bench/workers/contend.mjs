// One contending process: `cycles` acquire/critical-section/release cycles with the given lock
// implementation, after a shared barrier; each section lasts `holdMs` (default 0: two log lines).
// Prints JSON: waits (ms), first start and last end, the CPU time of its cycles (ms).
import { appendFileSync, existsSync, writeFileSync } from 'node:fs';

const [impl, dir, cycles, log, barrier, holdMs = '0'] = process.argv.slice(2);
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let acquire;
if (impl === 'routinely-named' || impl === 'routinely-slots3') {
  // a named lock (SPEC §4.16): one slot, or three
  const { acquireLock, fileLockBackend } = await import('../../dist/lock-internals.cjs');
  const lock = fileLockBackend({ lockDir: dir, ttlMs: 30_000, refreshMs: 10_000 });
  const slots = impl === 'routinely-slots3' ? 3 : 1;
  acquire = async () => {
    const r = await acquireLock(lock, 'agents', slots, { command: 'bench' }, { ifBusy: 'wait' });
    if (!r.ok) throw new Error(r.reason);
    return () => r.lease.release();
  };
} else if (impl === 'routinely') {
  const { acquireFileLease } = await import('../../dist/lock-internals.cjs');
  acquire = async () => {
    const r = await acquireFileLease({
      lockDir: dir,
      key: 'exec-run',
      ttlMs: 30_000,
      refreshMs: 10_000,
      owner: { command: 'bench' },
      ifBusy: 'wait',
      heartbeat: false,
    });
    if (!r.ok) throw new Error(r.reason);
    return () => r.lease.release();
  };
} else {
  const lockfile = (await import('proper-lockfile')).default;
  const file = `${dir}/target`;
  writeFileSync(file, '');
  // Our own 1 ms retry loop: proper-lockfile's `retries` option precomputes every timeout, so a
  // large retry count would cost more than the lock itself.
  acquire = async () => {
    for (;;) {
      try {
        return await lockfile.lock(file, { realpath: false });
      } catch (err) {
        if (err.code !== 'ELOCKED') throw err;
        await sleep(1);
      }
    }
  };
}

while (!existsSync(barrier)) await sleep(1);
const waits = [];
const start = nowMs();
const cpu0 = process.cpuUsage();
for (let i = 0; i < Number(cycles); i++) {
  const t0 = nowMs();
  const release = await acquire();
  waits.push(nowMs() - t0);
  appendFileSync(log, `S ${process.pid}\n`);
  if (Number(holdMs) > 0) await sleep(Number(holdMs));
  appendFileSync(log, `E ${process.pid}\n`);
  await release();
}
const cpu = process.cpuUsage(cpu0);
console.log(JSON.stringify({ waits, start, end: nowMs(), cpuMs: (cpu.user + cpu.system) / 1000 }));
