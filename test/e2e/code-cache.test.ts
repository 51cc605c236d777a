// The executable compiles the entry, and the entry the lock commands and the program, with the V8
// code caches the build made (src/cli/code-cache.ts, scripts/code-cache.mjs): V8 accepts them, and an entry edited
// after the build runs its own code, never the cached one (V8 checks a cache against its source's
// length only).

import { execFileSync } from 'node:child_process';
import { cpSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import Module from 'node:module';
import { join, resolve } from 'node:path';
import { Script } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { start } from '../helpers/cli.js';
import { testdir } from '../helpers/testdir.js';

const dist = resolve(import.meta.dirname, '../../dist');

describe('the entry’s code cache', () => {
  it.each(['cli-main.cjs', 'cli-lock.cjs'])('is accepted by this Node.js for the built %s', (name) => {
    const file = join(dist, name);
    const cachedData = readFileSync(`${file}.v8cache`);
    const script = new Script(Module.wrap(readFileSync(file, 'utf8')), { filename: file, cachedData });
    expect(script.cachedDataRejected).toBe(false);
  });

  // The program is loaded after the entry set V8's --max-opt=1 (src/cli/baseline-tiers.ts), and V8
  // accepts a cache only under the flags it was made with: so in a process of its own.
  it('is accepted for the built cli-program.cjs under the flags the entry sets first', () => {
    const file = join(dist, 'cli-program.cjs');
    const check = (flags: string): string =>
      execFileSync(
        process.execPath,
        [
          '-e',
          `if (${JSON.stringify(flags)}) require('node:v8').setFlagsFromString(${JSON.stringify(flags)});
const { readFileSync } = require('node:fs');
const s = new (require('node:vm').Script)(require('node:module').wrap(readFileSync(process.argv[1], 'utf8')), {
  filename: process.argv[1],
  cachedData: readFileSync(process.argv[1] + '.v8cache'),
});
process.stdout.write(String(s.cachedDataRejected));`,
          file,
        ],
        { encoding: 'utf8' },
      );
    expect(check('--max-opt=1')).toBe('false');
    // and the check above can fail: without the flag, V8 refuses the same cache
    expect(check('')).toBe('true');
  });

  it('is what a full-path command compiles its program with (the entry sets the same flags)', async () => {
    const dir = testdir();
    writeFileSync(join(dir, 'routinely.json'), JSON.stringify({ exec: { tasks: [{ id: 'hello', run: 'true' }] } }));
    // says, as the process exits, whether V8 took the cache it was handed for the program
    const spy = join(dir, 'spy.cjs');
    writeFileSync(
      spy,
      `const vm = require('node:vm');
const Script = vm.Script;
vm.Script = class extends Script {
  constructor(source, options) {
    super(source, options);
    if (String(options && options.filename).endsWith('cli-program.cjs'))
      process.on('exit', () => require('node:fs').writeSync(2, 'program cache: ' + (options.cachedData ? (this.cachedDataRejected ? 'rejected' : 'used') : 'none') + '\\n'));
  }
};
`,
    );
    const run = start(join(dist, 'cli.cjs'), ['exec', 'run'], { cwd: dir, env: { NODE_OPTIONS: `--require ${spy}` } });
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(0);
    expect(run.stderr()).toContain('program cache: used');
  });

  it('is not used for an entry edited after the build (same length, other code)', async () => {
    const copy = join(testdir(), 'dist');
    cpSync(dist, copy, { recursive: true });
    const file = join(copy, 'cli-main.cjs');
    const text = readFileSync(file, 'utf8');
    const version = JSON.parse(readFileSync(resolve(dist, '../package.json'), 'utf8')).version as string;
    const edited = `9${version.slice(1)}`;
    expect(text.split(JSON.stringify(version)).length).toBe(2); // the version constant, once
    writeFileSync(file, text.replace(JSON.stringify(version), JSON.stringify(edited)));
    expect(statSync(file).size).toBe(Buffer.byteLength(text));
    // the cache as old as the build, the entry newer
    const cache = `${file}.v8cache`;
    utimesSync(cache, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
    const run = start(join(copy, 'cli.cjs'), ['--version']);
    const { code } = await run.exited;
    expect(code).toBe(0);
    expect(run.stdout().trim()).toBe(edited);
  });
});
