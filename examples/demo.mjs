// `npm run demo`: the project exec lock in action on a throwaway project.
// A holder runs under the lock; a second command fails with 75 naming it, a third skips, a
// fourth waits and gets the lock once the holder is done; `lock status` in between.

import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const cli = resolve(import.meta.dirname, '../dist/cli.js');
const project = mkdtempSync(join(tmpdir(), 'routinely-demo-'));
const env = { ...process.env };
delete env.NODE_EXTRA_CA_CERTS;
writeFileSync(join(project, 'routinely.json'), JSON.stringify({ lock: { ttlSeconds: 10 } }, null, 2));

const bold = (s) => (process.stdout.isTTY && !process.env.NO_COLOR ? `\x1b[1m${s}\x1b[0m` : s);
const say = (s) => console.log(`\n${bold(`## ${s}`)}`);

function run(args, note) {
  console.log(`$ routinely ${args.join(' ')}${note ? `    # ${note}` : ''}`);
  const r = spawnSync(process.execPath, [cli, ...args], { cwd: project, env, encoding: 'utf8' });
  const indent = (text) => (text ? `${text.trimEnd().replace(/^/gm, '  ')}\n` : '');
  process.stdout.write(indent(r.stdout) + indent(r.stderr));
  console.log(`  → exit ${r.status}`);
  return r.status;
}

try {
  console.log(`demo project: ${project}`);
  say('a holder takes the exec lock for 3 seconds');
  console.log('$ routinely lock run -- sh -c "echo working; sleep 3; echo done" &');
  const holder = spawn(process.execPath, [cli, 'lock', 'run', '--', 'sh', '-c', 'echo "  [holder] working"; sleep 3; echo "  [holder] done"'], {
    cwd: project, env, stdio: ['ignore', 'inherit', 'inherit'],
  });
  const holderDone = new Promise((r) => holder.on('close', r));
  await new Promise((r) => setTimeout(r, 700));

  say('lock status shows who holds it');
  run(['lock', 'status']);

  say('a second run fails fast with 75 and names the holder (--if-busy fail, the default)');
  run(['lock', 'run', '--', 'echo', 'should not run']);

  say('a scheduler-style run skips: exit 0, nothing changed');
  run(['lock', 'run', '--if-busy', 'skip', '--', 'echo', 'should not run']);

  say('a waiting run gets the lock as soon as the holder releases it');
  run(['lock', 'run', '--if-busy', 'wait', '--wait-timeout', '30', '--', 'sh', '-c', 'echo "  [waiter] got the lock (generation $ROUTINELY_LOCK_GENERATION)"']);
  await holderDone;

  say('free again; the generation counter (fencing token) has moved on');
  run(['lock', 'status']);
} finally {
  rmSync(project, { recursive: true, force: true });
}
