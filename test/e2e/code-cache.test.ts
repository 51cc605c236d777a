// The executable compiles the entry, and the entry the lock commands, with the V8 code caches the
// build made (src/cli/code-cache.ts, scripts/code-cache.mjs): V8 accepts them, and an entry edited
// after the build runs its own code, never the cached one (V8 checks a cache against its source's
// length only).

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
