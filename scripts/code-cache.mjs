// The V8 code cache of the command line's entry (dist/cli-main.cjs.v8cache), read by
// dist/cli.cjs (src/cli/bin.ts): made by compiling the entry exactly as the loader does, running
// `routine list` from the validated config's cache on a small project (so the cache holds the
// functions a short command compiles, not only the top level), and writing what V8 compiled.
// It fits this Node.js; another one ignores it (the loader then compiles as usual).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const dist = resolve('dist');
const main = join(dist, 'cli-main.cjs');
const out = `${main}.v8cache`;
// the loader's compile (src/cli/bin.ts), then the command; the cache is written as it exits
const worker = `
const { readFileSync, writeFileSync } = require('node:fs');
const Module = require('node:module');
const vm = require('node:vm');
const file = ${JSON.stringify(main)};
const script = new vm.Script(Module.wrap(readFileSync(file, 'utf8')), { filename: file });
process.on('exit', () => writeFileSync(${JSON.stringify(out)}, script.createCachedData()));
const entry = new Module(file, module);
entry.filename = file;
script.runInThisContext().call(entry.exports, entry.exports, Module.createRequire(file), entry, file, ${JSON.stringify(dist)});
`;

const project = mkdtempSync(join(tmpdir(), 'routinely-code-cache-'));
try {
  const routines = [
    { id: 'nightly', schedule: '0 3 * * *', action: 'command', run: 'true' },
    { id: 'weekly', schedule: '30 6 * * 1', timezone: 'Europe/Berlin', action: 'command', run: 'true' },
  ];
  writeFileSync(join(project, 'routinely.json'), JSON.stringify({ routines }));
  const env = { ...process.env, NODE_OPTIONS: '' };
  delete env.ROUTINELY_LIST_CACHE;
  // validated once: the config's cache is left for the short commands
  execFileSync(process.execPath, [join(dist, 'cli.cjs'), 'validate'], { cwd: project, env, stdio: 'ignore' });
  // the entry's argv[2…] as the loader's would be
  execFileSync(process.execPath, ['-e', worker, 'cli', 'routine', 'list'], { cwd: project, env, stdio: 'ignore' });
  console.log(`${out}: ${statSync(out).size} bytes`);
} finally {
  rmSync(project, { recursive: true, force: true });
}
