import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { testdir } from '../helpers/testdir.js';

describe('init', () => {
  it('writes a commented starter with $schema that validates, and never overwrites without --force', async () => {
    const dir = testdir();
    const r = await runCli(['init'], { cwd: dir });
    expect(r.code).toBe(0);
    const text = readFileSync(join(dir, 'routinely.json'), 'utf8');
    expect(text).toMatch(/^\{\n {2}\/\/ /);
    expect(text).toContain('"$schema": "./node_modules/routinely/config/routinely.schema.json"');
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
});
