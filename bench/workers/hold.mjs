// Takes the lock (routinely or proper-lockfile), says "held", and keeps it until killed.
import { writeFileSync } from 'node:fs';

const [impl, dir] = process.argv.slice(2);
if (impl === 'routinely') {
  const { acquireFileLease } = await import('../../dist/lock-internals.cjs');
  const r = await acquireFileLease({
    lockDir: dir,
    key: 'exec-run',
    ttlMs: 60_000,
    refreshMs: 20_000,
    owner: { command: 'bench' },
    ifBusy: 'wait',
  });
  if (!r.ok) throw new Error(r.reason);
} else {
  const lockfile = (await import('proper-lockfile')).default;
  writeFileSync(`${dir}/target`, '');
  await lockfile.lock(`${dir}/target`, { realpath: false });
}
console.log('held');
setInterval(() => {}, 1 << 30);
