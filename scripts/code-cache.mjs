// The V8 code caches of the command line's entry (dist/cli-main.cjs.v8cache), of its lock
// commands (dist/cli-lock.cjs.v8cache) and of its program (dist/cli-program.cjs.v8cache), read by
// src/cli/code-cache.ts: made by compiling each file exactly as the loader does, running
// `routine list` (the entry) or `lock status` and `lock run -- true` (the lock commands) from the
// validated config's cache, or `exec run` and `routine run` (the program), on a small project (so
// the cache holds the functions a short command compiles, not only the top level), and writing
// what V8 compiled. They fit this Node.js; another one ignores them (the loader then compiles as
// usual).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const dist = resolve('dist');
const main = join(dist, 'cli-main.cjs');
const lock = join(dist, 'cli-lock.cjs');
const program = join(dist, 'cli-program.cjs');
// the loader's compile (src/cli/code-cache.ts), then `then` with the module's exports; the cache
// is written as the process exits. `flags`: V8's flags as the entry sets them before it loads the
// file (V8 refuses a cache made under other flags)
const worker = (file, then, flags = '') => `
const { readFileSync, writeFileSync } = require('node:fs');
if (${JSON.stringify(flags)}) require('node:v8').setFlagsFromString(${JSON.stringify(flags)});
const Module = require('node:module');
const vm = require('node:vm');
const file = ${JSON.stringify(file)};
const script = new vm.Script(Module.wrap(readFileSync(file, 'utf8')), { filename: file });
process.on('exit', () => writeFileSync(file + '.v8cache', script.createCachedData()));
const entry = new Module(file);
entry.filename = file;
script.runInThisContext().call(entry.exports, entry.exports, Module.createRequire(file), entry, file, ${JSON.stringify(dist)});
(${then})(entry.exports);
`;

const project = mkdtempSync(join(tmpdir(), 'routinely-code-cache-'));
try {
  const routines = [
    { id: 'nightly', schedule: '0 3 * * *', action: 'command', run: 'true' },
    { id: 'weekly', schedule: '30 6 * * 1', timezone: 'Europe/Berlin', action: 'command', run: 'true' },
  ];
  const exec = { tasks: [{ id: 'build', run: 'true' }] };
  writeFileSync(join(project, 'routinely.json'), JSON.stringify({ routines, exec }));
  const env = { ...process.env, NODE_OPTIONS: '' };
  delete env.ROUTINELY_LIST_CACHE;
  // validated once: the config's cache is left for the short commands
  execFileSync(process.execPath, [join(dist, 'cli.cjs'), 'validate'], { cwd: project, env, stdio: 'ignore' });
  // the entry's argv[2…] as the loader's would be
  execFileSync(process.execPath, ['-e', worker(main, '() => {}'), 'cli', 'routine', 'list'], {
    cwd: project,
    env,
    stdio: 'ignore',
  });
  // the lock commands, as the entry calls them (src/cli/main.ts)
  const lockCommands = `async (c) => {
    await c.lockStatus({ json: false, key: 'exec-run' }, {});
    process.exitCode = await c.lockRun(['true'], {}, {});
  }`;
  execFileSync(process.execPath, ['-e', worker(lock, lockCommands)], { cwd: project, env, stdio: 'ignore' });
  // the program, as the entry loads it: after `--max-opt=1` (src/cli/baseline-tiers.ts)
  const programCommands = `async (p) => {
    await p.main(['node', 'cli', 'exec', 'run']);
    await p.main(['node', 'cli', 'routine', 'run', 'nightly']);
  }`;
  execFileSync(process.execPath, ['-e', worker(program, programCommands, '--max-opt=1')], {
    cwd: project,
    env,
    stdio: 'ignore',
  });
  for (const file of [main, lock, program]) console.log(`${file}.v8cache: ${statSync(`${file}.v8cache`).size} bytes`);
} finally {
  rmSync(project, { recursive: true, force: true });
}
