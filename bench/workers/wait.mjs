// Waits for the lock held by workers/hold.mjs; prints the monotonic time it got it.
const [impl, dir] = process.argv.slice(2);
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
if (impl === 'routinely') {
  const { acquireFileLease } = await import('../../dist/lock-internals.cjs');
  console.log('waiting');
  const r = await acquireFileLease({
    lockDir: dir,
    key: 'exec-run',
    ttlMs: 60_000,
    refreshMs: 20_000,
    owner: { command: 'bench' },
    ifBusy: 'wait',
    heartbeat: false,
  });
  if (!r.ok) throw new Error(r.reason);
  console.log(JSON.stringify({ got: nowMs() }));
  r.lease.release();
} else {
  const lockfile = (await import('proper-lockfile')).default;
  console.log('waiting');
  // proper-lockfile defaults (stale 10 s, update 5 s), retrying every 50 ms like our poll cap
  let release;
  for (;;) {
    try {
      release = await lockfile.lock(`${dir}/target`, { realpath: false });
      break;
    } catch (err) {
      if (err.code !== 'ELOCKED') throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  console.log(JSON.stringify({ got: nowMs() }));
  await release();
}
