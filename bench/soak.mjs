// Memory while firing (issue 34): a scheduler with 20 per-second routines (`true`) for an hour,
// its RSS read from /proc every 30 s. Flat means the last ten minutes' median is within a few
// per cent of the ten minutes' after warm-up (V8's heap settles in the first minutes). Not part of
// the default run (an hour): `npm run bench -- --only=soak [--minutes=60]`.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { benchEnv, fmt, median, table } from './lib.mjs';

const cli = resolve(import.meta.dirname, '../dist/cli.cjs');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'latin1'))[1]) / 1024;

export async function soak({ minutes = 60, routines = 20 } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'routinely-bench-soak-'));
  writeFileSync(
    join(dir, 'routinely.json'),
    JSON.stringify({
      routines: Array.from({ length: routines }, (_, i) => ({
        id: `s${i}`,
        schedule: '* * * * * *',
        action: 'command',
        run: 'true',
      })),
    }),
  );
  const s = spawn(process.execPath, [cli, 'scheduler', 'start'], {
    cwd: dir,
    env: benchEnv(),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let fires = 0;
  let started = false;
  let tail = '';
  s.stdout.on('data', (d) => {
    const text = tail + d;
    const cut = text.lastIndexOf('\n');
    tail = text.slice(cut + 1);
    const done = text.slice(0, cut + 1);
    if (done.includes('[scheduler] started')) started = true;
    fires += (done.match(/\[routine\] succeeded/g) ?? []).length;
  });
  while (!started) await sleep(20);
  const samples = [];
  const t0 = performance.now();
  while (performance.now() - t0 < minutes * 60_000) {
    await sleep(30_000);
    samples.push({ min: (performance.now() - t0) / 60_000, rss: rssMb(s.pid), fires });
  }
  s.kill('SIGTERM');
  await new Promise((r) => s.on('close', r));
  rmSync(dir, { recursive: true, force: true });
  const span = Math.min(10, minutes / 3);
  const early = median(samples.filter((x) => x.min > span && x.min <= 2 * span).map((x) => x.rss));
  const late = median(samples.filter((x) => x.min > minutes - span).map((x) => x.rss));
  const every = Math.max(1, Math.round(samples.length / 12));
  table(
    `Scheduler RSS while firing: ${routines} per-second routines for ${minutes} min (sampled every 30 s)`,
    ['minute', 'RSS MB', 'fires so far'],
    samples
      .filter((_, i) => i % every === every - 1 || i === samples.length - 1)
      .map((x) => [fmt(x.min, 1), fmt(x.rss, 1), String(x.fires)]),
  );
  console.log(
    `  RSS median, minutes ${fmt(span, 0)}-${fmt(2 * span, 0)}: ${fmt(early, 1)} MB; last ${fmt(span, 0)} minutes: ${fmt(late, 1)} MB (${fmt(late / early, 3)}x; flat: <= 1.05x); max ${fmt(Math.max(...samples.map((x) => x.rss)), 1)} MB`,
  );
  return { early, late, samples };
}

if (import.meta.url === `file://${process.argv[1]}`) await soak();
