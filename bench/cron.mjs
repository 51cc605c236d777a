// The real cron daemon as the anchor for the cost of a fire (issue 20): Debian's cron started in
// a private mount namespace (`unshare -m`) with its own crontab spool, /etc/cron.d, /etc/crontab
// and a tmpfs /run, so the machine's cron and crontabs are never touched; 60 `* * * * * true`
// lines; its CPU and its children's over two minute boundaries, per fire, next to routinely's
// (the scheduler bench's fireCost). Needs root, cron and unshare; says so and skips otherwise.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fmt, table } from './lib.mjs';
import { fireCost } from './scheduler.mjs';

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
  writeFileSync(join(dir, 'crontabs', 'root'), '* * * * * true\n'.repeat(60), { mode: 0o600 });
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
  const ours = await fireCost(16, 2);
  table(
    'CPU per fire: the cron daemon (60 * * * * * true lines, cron + children) against routinely',
    ['what', 'ms CPU per fire', 'ratio', 'goal'],
    [
      ['cron daemon (Debian cron, private mount namespace)', fmt(cronPerFire, 2), '1.00x', ''],
      [
        'routinely scheduler (scheduler + children)',
        fmt(ours.perFireMs, 2),
        `${fmt(ours.perFireMs / cronPerFire, 2)}x`,
        '<= 1x',
      ],
    ],
  );
  return { cron: cronPerFire, ours: ours.perFireMs };
}

if (import.meta.url === `file://${process.argv[1]}`) await cronAnchor();
