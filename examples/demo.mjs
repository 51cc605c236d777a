// `npm run demo`: routinely on a throwaway project. The exec lock (a holder; a second command
// failing with 75 and naming it; one skipping; one waiting), then an exec run with a
// dependency and a failure, and its resume.

import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const cli = resolve(import.meta.dirname, '../dist/cli.js');
const project = mkdtempSync(join(tmpdir(), 'routinely-demo-'));
const env = { ...process.env };
delete env.NODE_EXTRA_CA_CERTS;
writeFileSync(join(project, 'routinely.json'), JSON.stringify({
  lock: { ttlSeconds: 10 },
  exec: {
    parallel: 2,
    tasks: [
      { id: 'build', run: 'sleep 0.3; echo built > build.out' },
      { id: 'test', run: 'test -f fixed || { echo "1 test failed" >&2; exit 1; }', dependsOn: ['build'] },
      { id: 'docs', run: 'echo docs', dependsOn: ['test'] },
      { id: 'lint', run: 'sleep 0.2; echo lint ok' },
    ],
  },
}, null, 2));

const bold = (s) => (process.stdout.isTTY && !process.env.NO_COLOR ? `\x1b[1m${s}\x1b[0m` : s);
const say = (s) => console.log(`\n${bold(`## ${s}`)}`);

function run(args, note) {
  console.log(`$ routinely ${args.join(' ')}${note ? `    # ${note}` : ''}`);
  const r = spawnSync(process.execPath, [cli, ...args], { cwd: project, env, encoding: 'utf8' });
  const indent = (text) => (text ? `${text.trimEnd().replace(/^/gm, '  ')}\n` : '');
  process.stdout.write(indent(r.stdout) + indent(r.stderr));
  console.log(`  → exit ${r.status}`);
  return r.stdout;
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

  say('exec run: build, then test (which fails) and docs (which depends on it); lint beside them');
  const runId = /run (r-[A-Za-z0-9-]+)/.exec(run(['exec', 'run']))?.[1];

  say('fix the cause, then resume that run: what succeeded is kept, the rest runs again');
  writeFileSync(join(project, 'fixed'), '');
  run(['exec', 'resume', runId]);
  run(['exec', 'status']);
} finally {
  rmSync(project, { recursive: true, force: true });
}
