import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { stripJsonComments } from '../../src/config/load.js';
import { runCli } from '../helpers/cli.js';
import { testdir } from '../helpers/testdir.js';

const schemaOf = (dir: string): string => (JSON.parse(stripJsonComments(readFileSync(join(dir, 'routinely.json'), 'utf8'))) as { $schema: string }).$schema;

/** A stand-in for `npm install routinely` in `dir`: the package's schema where Node would find it. */
function installedIn(dir: string): void {
  mkdirSync(join(dir, 'node_modules', 'routinely', 'config'), { recursive: true });
  writeFileSync(join(dir, 'node_modules', 'routinely', 'config', 'routinely.schema.json'), readFileSync(resolve(import.meta.dirname, '../../config/routinely.schema.json')));
}

describe('init', () => {
  it('writes a commented starter with $schema that validates, and never overwrites without --force', async () => {
    const dir = testdir();
    const r = await runCli(['init'], { cwd: dir });
    expect(r.code).toBe(0);
    const text = readFileSync(join(dir, 'routinely.json'), 'utf8');
    expect(text).toMatch(/^\{\n {2}\/\/ /);
    // routinely is not installed in this folder: the schema of the routinely that ran init
    const schema = schemaOf(dir);
    expect(schema).toBe(`file://${resolve(import.meta.dirname, '../../config/routinely.schema.json')}`);
    expect(existsSync(fileURLToPath(schema))).toBe(true);
    expect(text).toContain('(npm install -D routinely), use "./node_modules/routinely/config/routinely.schema.json"');
    const v = await runCli(['validate'], { cwd: dir });
    expect(v.code).toBe(0);
    expect(v.stdout).toMatch(/^routinely\.json: valid \(3 routines, 2 inline tasks\)/);
    const again = await runCli(['init'], { cwd: dir });
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/routinely\.json already exists; pass --force/);
    writeFileSync(join(dir, 'routinely.json'), '{}');
    expect((await runCli(['init', '--force'], { cwd: dir })).code).toBe(0);
    expect(readFileSync(join(dir, 'routinely.json'), 'utf8')).toBe(text);
  });

  it('$schema is relative to the file when routinely is installed in the project or a parent folder', async () => {
    const dir = testdir();
    installedIn(dir);
    expect((await runCli(['init'], { cwd: dir })).code).toBe(0);
    expect(schemaOf(dir)).toBe('./node_modules/routinely/config/routinely.schema.json');
    const mono = testdir();
    installedIn(mono);
    mkdirSync(join(mono, 'packages', 'api'), { recursive: true });
    expect((await runCli(['init'], { cwd: join(mono, 'packages', 'api') })).code).toBe(0);
    expect(schemaOf(join(mono, 'packages', 'api'))).toBe('../../node_modules/routinely/config/routinely.schema.json');
    expect((await runCli(['validate'], { cwd: join(mono, 'packages', 'api') })).code).toBe(0);
  });

  it('refuses inside an existing project, naming its routinely.json; --force makes a nested project', async () => {
    const outer = testdir();
    expect((await runCli(['init'], { cwd: outer })).code).toBe(0);
    const sub = join(outer, 'services', 'api');
    mkdirSync(sub, { recursive: true });
    const r = await runCli(['init'], { cwd: sub });
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(`routinely: ${sub} is already inside the project of ${join(outer, 'routinely.json')} (routinely commands run here use it); to start a separate project nested in it, pass --force\n`);
    expect(existsSync(join(sub, 'routinely.json'))).toBe(false);
    const forced = await runCli(['init', '--force'], { cwd: sub });
    expect(forced.code).toBe(0);
    expect(forced.stdout).toContain(`note: a nested project; commands run in ${outer} outside this folder still use ${join(outer, 'routinely.json')}`);
    expect((await runCli(['validate'], { cwd: sub })).stdout).toMatch(/^routinely\.json: valid/);
  });

  it('--config names the file to write; init --help says what --force does and where $schema points', async () => {
    const dir = testdir();
    const r = await runCli(['init', '--config', 'ci/routinely.json'], { cwd: dir });
    expect(r.code).toBe(2); // no such folder
    mkdirSync(join(dir, 'ci'));
    expect((await runCli(['init', '--config', 'ci/routinely.json'], { cwd: dir })).code).toBe(0);
    expect((await runCli(['validate', '--config', 'ci/routinely.json'], { cwd: dir })).code).toBe(0);
    const help = await runCli(['init', '--help']);
    expect(help.stdout).toMatch(/--force\s+write it even if a routinely\.json exists here\s+\(overwritten\)\s+or\s+in\s+a\s+parent\s+folder\s+\(a\s+nested\s+project\)/);
    expect(help.stdout).toContain('file:// URL');
  });

  it('config comments keep error positions; a "//" inside a string is not a comment', async () => {
    const dir = testdir();
    writeFileSync(join(dir, 'routinely.json'), '{\n  // note\n  "routines": [ /* one */ { "id": "a", "schedule": "@daily", "action": "command", "run": "echo http://x" } ]\n}\n');
    const ok = await runCli(['validate'], { cwd: dir });
    expect(ok.code).toBe(0);
    writeFileSync(join(dir, 'routinely.json'), '{\n  // note\n  "lock": { "ttlSeconds": 5, }\n}\n');
    const bad = await runCli(['validate'], { cwd: dir });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe('routinely: routinely.json: line 3, column 28: invalid JSON: trailing comma before "}" (JSON allows none)\n');
  });

  it('never writes through a symlink at ./routinely.json, even a dangling one', async () => {
    const dir = testdir();
    const target = join(testdir(), 'elsewhere.json');
    symlinkSync(target, join(dir, 'routinely.json'));
    for (const args of [['init'], ['init', '--force']]) {
      const r = await runCli(args, { cwd: dir });
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/routinely\.json is a symbolic link; refusing to write through it/);
      expect(existsSync(target)).toBe(false);
    }
  });
});
