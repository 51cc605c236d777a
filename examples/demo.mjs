// `npm run demo`: the scheduler on the bundled example project (examples/project, copied to a
// temp folder) for about 20 seconds: routines fire, a manual `exec run` holds the exec lock and
// the ticks that meet it are skipped (not failed), then `routine list` shows the counts; last,
// an exec run with a failing task and a dependant, and its resume after the fix.

import { spawn, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const cli = resolve(import.meta.dirname, '../dist/cli.cjs');
const project = mkdtempSync(join(tmpdir(), 'routinely-demo-'));
cpSync(resolve(import.meta.dirname, 'project'), project, { recursive: true });
const env = { ...process.env };
delete env.NODE_EXTRA_CA_CERTS; // adds ≈ 65 ms to every node start on some machines
// `npm run demo` sets npm_* for this script; the scheduler is our child, not npm's (with them it
// would warn that signals sent to npm do not reach it)
for (const k of Object.keys(env)) if (/^npm_/i.test(k)) delete env[k];
const tty = process.stdout.isTTY && !process.env.NO_COLOR;
const bold = (s) => (tty ? `\x1b[1m${s}\x1b[0m` : s);
const dim = (s) => (tty ? `\x1b[2m${s}\x1b[0m` : s);
const say = (s) => console.log(`\n${bold(`## ${s}`)}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Every command is printed from the very argv it runs with, so what the demo shows is what ran.
const quote = (arg) => (/^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", "'\\''")}'`);
const shown = (args) => `$ routinely ${args.map(quote).join(' ')}`;

function run(args) {
  console.log(shown(args));
  const r = spawnSync(process.execPath, [cli, ...args], { cwd: project, env, encoding: 'utf8' });
  const text = `${r.stdout}${r.stderr}`.trimEnd();
  if (text) console.log(text.replace(/^/gm, '  '));
  console.log(dim(`  → exit ${r.status}`));
  return r.stdout;
}

/** Starts a command in the background, printed as a shell would show it (`… &`). `closed`
 * is made at once: a command that ends before the demo waits for it (the waiter below may take
 * the lock before the exec run does) must not end unnoticed. */
const started = [];
function background(args, stdio = ['ignore', 'pipe', 'pipe']) {
  console.log(`${shown(args)} &`);
  const child = spawn(process.execPath, [cli, ...args], { cwd: project, env, stdio });
  child.closed = new Promise((r) => child.on('close', r));
  started.push(child);
  return child;
}

console.log(`example project copied to ${project}`);
say('the scheduler starts; routines fire every few seconds (heartbeat every 2 s, auto every 4 s, sync every 20 s)');
const scheduler = background(['scheduler', 'start'], ['ignore', 'pipe', 'inherit']);
scheduler.stdout.on('data', (d) => process.stdout.write(d.toString().replace(/^(?=.)/gm, `  ${dim('scheduler │')} `)));
const stopped = scheduler.closed;
// Stopped from outside (SIGTERM, or Ctrl-C): what the demo started is stopped as the demo would
// (SIGTERM: the scheduler ends its routines' groups and lets its lock go), then the temp project
// goes; whatever is still there after 5 s gets SIGKILL.
for (const [sig, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
]) {
  process.on(sig, async () => {
    const running = started.filter((c) => c.exitCode === null && c.signalCode === null);
    for (const c of running) c.kill('SIGTERM');
    await Promise.race([Promise.all(running.map((c) => c.closed)), sleep(5000)]);
    for (const c of running) c.kill('SIGKILL');
    rmSync(project, { recursive: true, force: true });
    process.exit(code);
  });
}

try {
  await sleep(6500);

  say('a manual exec run takes the exec lock for 6 s: the ticks that meet it are skipped, not failed');
  writeFileSync(
    join(project, 'tasks', 'migrate.json'),
    JSON.stringify({ id: 'migrate', run: 'echo migrating; sleep 6; echo migrated' }),
  );
  // --if-busy wait: a routine's tick may hold the lock at this very moment; the run waits for it.
  const manual = background(['exec', 'run', 'migrate', '--if-busy', 'wait']);
  let manualOut = '';
  manual.stdout.on('data', (d) => (manualOut += d));
  manual.stderr.on('data', (d) => (manualOut += d));
  await sleep(1500);
  run(['lock', 'status']);
  say('by hand, meanwhile: fail names the holder (75), skip exits 0, wait queues for the lock');
  run(['lock', 'run', '--', 'echo', 'not now']);
  run(['lock', 'run', '--if-busy', 'skip', '--', 'echo', 'not now']);
  const waiter = background(
    ['lock', 'run', '--if-busy', 'wait', '--', 'sh', '-c', 'echo "got it (generation $ROUTINELY_LOCK_GENERATION)"'],
    ['ignore', 'pipe', 'inherit'],
  );
  let waiterOut = '';
  waiter.stdout.on('data', (d) => (waiterOut += d));
  await manual.closed;
  console.log(manualOut.trimEnd().replace(/^/gm, `  ${dim('exec run  │')} `));
  await waiter.closed;
  console.log(waiterOut.trimEnd().replace(/^/gm, `  ${dim('waiter    │')} `));

  say('the lock is free again: the next ticks succeed');
  await sleep(4500);

  say('SIGTERM: the scheduler stops firing, lets running routines finish, releases its lock');
  scheduler.kill('SIGTERM');
  await stopped;

  say('routine list: skipped is its own word and count, apart from failures');
  run(['routine', 'list']);
  run(['routine', 'history', 'heartbeat', '--limit', '6']);

  say('exec: a task fails and its dependant is skipped (not failed); fix the cause, resume the run');
  writeFileSync(
    join(project, 'tasks', 'release.json'),
    JSON.stringify([
      { id: 'package', run: 'test -f LICENSE || { echo "package: LICENSE is missing" >&2; exit 1; }' },
      { id: 'publish', run: 'echo published', dependsOn: ['package'] },
    ]),
  );
  const runId = /run (r-[A-Za-z0-9-]+)/.exec(run(['exec', 'run']))?.[1];
  writeFileSync(join(project, 'LICENSE'), 'MIT\n');
  run(['exec', 'resume', runId]);
} finally {
  scheduler.kill('SIGKILL');
  rmSync(project, { recursive: true, force: true });
}
