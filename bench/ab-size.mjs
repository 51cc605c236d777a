// A/B of the cost per fire by project size (bench/fire-size.mjs's measure()) between two
// checkouts, each built (`npm run build`) and each with this bench/fire-size.mjs copied in,
// interleaved per round and size. `node bench/ab-size.mjs BEFORE_DIR AFTER_DIR [rounds] [seconds]`,
// e.g. after `git worktree add /tmp/before <commit> && cp bench/fire-size.mjs /tmp/before/bench/`.
const [a, b] = [process.argv[2], process.argv[3]];
if (!a || !b) {
  console.error('usage: node bench/ab-size.mjs BEFORE_DIR AFTER_DIR [rounds] [seconds]');
  process.exit(2);
}
const A = await import(`${a}/bench/fire-size.mjs`);
const B = await import(`${b}/bench/fire-size.mjs`);
const rounds = Number(process.argv[4] ?? 3),
  seconds = Number(process.argv[5] ?? 20);
const out = { a: {}, b: {} };
for (let r = 0; r < rounds; r++)
  for (const n of [1, 100, 1000])
    for (const [k, M] of r % 2
      ? [
          ['b', B],
          ['a', A],
        ]
      : [
          ['a', A],
          ['b', B],
        ]) {
      const m = await M.measure(n, seconds);
      (out[k][n] ??= []).push(m);
      console.log(
        k === 'a' ? 'before' : 'after',
        n,
        'cpu/fire',
        m.cpuMs.toFixed(2),
        'bytes',
        Math.round(m.bytes),
        'rewrites/fire',
        m.shared.rewritesPerFire.toFixed(2),
        'maxLag',
        Math.round(m.shared.maxLagMs),
      );
    }
const med = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.floor(s.length / 2)];
};
for (const k of ['a', 'b'])
  for (const n of [1, 100, 1000])
    console.log(
      'median',
      k === 'a' ? 'before' : 'after',
      n,
      'cpu',
      med(out[k][n].map((m) => m.cpuMs)).toFixed(2),
      'bytes',
      Math.round(med(out[k][n].map((m) => m.bytes))),
      'maxLag',
      Math.round(Math.max(...out[k][n].map((m) => m.shared.maxLagMs))),
    );
