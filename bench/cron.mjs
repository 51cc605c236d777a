// The real cron daemon as the anchor for the cost of a fire (issue 20): Debian's cron started in
// a private mount namespace (`unshare -m`) with its own crontab spool, /etc/cron.d, /etc/crontab
// and a tmpfs /run, so the machine's cron and crontabs are never touched; 60 `* * * * * true`
// lines; its CPU and its children's over two minute boundaries, per fire. Beside it, routinely
// running that same crontab as `routinely import-crontab` gives it (60 routines, each without a
// lock, as cron ran them), measured the same way: the scheduler's CPU and its children's over two
// minute boundaries, per fire, its idle work included; and the scheduler bench's fireCost (one
// per-second routine under the exec lock, minus an idle scheduler). Needs root, cron and unshare;
// says so and skips otherwise.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolve } from 'node:path';
import { fmt, startScheduler, table } from './lib.mjs';
import { fireCost } from './scheduler.mjs';

const cli = resolve(import.meta.dirname, '../dist/cli.cjs');
const CRONTAB = '* * * * * true\n'.repeat(60);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const cpuMs = (pid) => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 10;
};

export async function cronAnchor({ minutes = 2 } = {}) {
  const missing = ['cron', 'unshare'].filter((c) => spawnSync('sh', ['-c', `command -v ${c}`]).status !== 0);
  if (process.getuid?.() !== 0 || missing.length > 0) {
    console.log(`\ncron daemon anchor skipped: needs root and ${missing.join(', ') || 'nothing else'}`);
    return null;
  }
  const dir = mkdtempSync(join(tmpdir(), 'routinely-bench-cron-'));
  for (const d of ['crontabs', 'cron.d']) mkdirSync(join(dir, d));
  writeFileSync(join(dir, 'crontab'), '');
  writeFileSync(join(dir, 'crontabs', 'root'), CRONTAB, { mode: 0o600 });
  chmodSync(join(dir, 'crontabs'), 0o1730);
  const script = [
    'set -e',
    `mount --bind ${dir}/crontabs /var/spool/cron/crontabs`,
    `mount --bind ${dir}/cron.d /etc/cron.d`,
    `mount --bind ${dir}/crontab /etc/crontab`,
    'mount -t tmpfs tmpfs /run',
    'exec cron -f -L 0',
  ].join('\n');
  const ns = spawn('unshare', ['-m', '--propagation', 'private', 'sh', '-c', script], { stdio: 'ignore' });
  await sleep(1500);
  const cron =
    spawnSync('pgrep', ['-P', String(ns.pid), '-x', 'cron'], { encoding: 'utf8' }).stdout.trim() || String(ns.pid);
  const pid = Number(cron.split('\n')[0]);
  // from just after a minute boundary, over `minutes` of them
  await sleep(61_000 - (Date.now() % 60_000));
  const before = cpuMs(pid);
  await sleep(minutes * 60_000);
  const after = cpuMs(pid);
  ns.kill('SIGTERM');
  spawnSync('kill', [String(pid)]);
  rmSync(dir, { recursive: true, force: true });
  const cronPerFire = (after - before) / (60 * minutes);
  const sameCrontab = await crontabRun(minutes);
  const ours = await fireCost(16, 2);
  table(
    'CPU per fire: the cron daemon (60 * * * * * true lines, cron + children) against routinely',
    ['what', 'ms CPU per fire', 'ratio', 'goal'],
    [
      ['cron daemon (Debian cron, private mount namespace)', fmt(cronPerFire, 2), '1.00x', ''],
      [
        `routinely scheduler, the same crontab imported (scheduler + children, ${sameCrontab.fires} fires)`,
        fmt(sameCrontab.perFireMs, 2),
        `${fmt(sameCrontab.perFireMs / cronPerFire, 2)}x`,
        '<= 1x',
      ],
      [
        'routinely scheduler, one per-second routine under the exec lock (minus idle)',
        fmt(ours.perFireMs, 2),
        `${fmt(ours.perFireMs / cronPerFire, 2)}x`,
        '',
      ],
    ],
  );
  return { cron: cronPerFire, sameCrontab: sameCrontab.perFireMs, ours: ours.perFireMs };
}

/** routinely's scheduler running the anchor's crontab as `import-crontab` makes it: CPU of the
 * scheduler and every child it ran over `minutes` minute boundaries, per fire (its idle work
 * included, as the daemon's is). */
async function crontabRun(minutes) {
  const dir = mkdtempSync(join(tmpdir(), 'routinely-bench-crontab-'));
  writeFileSync(join(dir, 'crontab'), CRONTAB);
  const config = spawnSync(process.execPath, [cli, 'import-crontab', 'crontab'], { cwd: dir, encoding: 'utf8' });
  if (config.status !== 0) throw new Error(`import-crontab failed: ${config.stderr}`);
  writeFileSync(join(dir, 'routinely.json'), config.stdout);
  const s = await startScheduler(cli, dir);
  const fires = () => (s.output().match(/\[routine\] (succeeded|failed)/g) ?? []).length;
  // from just after a minute boundary, over `minutes` of them, as the daemon
  await sleep(61_000 - (Date.now() % 60_000));
  const [f0, before] = [fires(), cpuMs(s.pid)];
  await sleep(minutes * 60_000);
  const [f1, after] = [fires(), cpuMs(s.pid)];
  await s.stop();
  rmSync(dir, { recursive: true, force: true });
  return { perFireMs: (after - before) / Math.max(1, f1 - f0), fires: f1 - f0 };
}

if (import.meta.url === `file://${process.argv[1]}`) await cronAnchor();
