// Reading a JSON state file (SPEC §3): a corrupt one is reported — its words safe for a terminal,
// whatever the file holds — and set aside by a writer (the entry itself, a link included).

import { lstatSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readJsonState } from '../../src/state/json-file.js';
import { testdir } from '../helpers/testdir.js';

const anything = (v: unknown): unknown => v;

describe('readJsonState', () => {
  it("a corrupt file's words carry no raw control character (JSON.parse quotes the text it met)", () => {
    const dir = testdir();
    const path = join(dir, 'state.json');
    writeFileSync(path, 'x\n[routine]\u001b[2J', { mode: 0o600 });
    const r = readJsonState(path, anything);
    expect(r.kind).toBe('corrupt');
    const problem = r.kind === 'corrupt' ? r.problem : '';
    expect(problem).toMatch(/^not valid JSON \(.*x\\x0a\[routine\]\\x1b\[2J/);
    expect(problem).not.toMatch(/[\u0000-\u001f]/);
  });

  it('a writer sets aside a symlink, a folder or a file it refuses, as a damaged file; a view leaves them', () => {
    const dir = testdir();
    writeFileSync(join(dir, 'target'), 'keep', { mode: 0o600 });
    const path = join(dir, 'state.json');
    const plants = [() => symlinkSync(join(dir, 'target'), path), () => mkdirSync(path)];
    for (const [k, plant] of plants.entries()) {
      plant();
      expect(readJsonState(path, anything)).toMatchObject({ kind: 'corrupt', movedTo: null });
      // (a time of its own for each: two set aside within one millisecond would share a name)
      const r = readJsonState(path, anything, { moveAside: true, now: Date.now() + k });
      expect(r).toMatchObject({ kind: 'corrupt', movedTo: expect.stringMatching(/state\.json\.corrupt\.\d+$/) });
      expect(() => lstatSync(path)).toThrow(/ENOENT/);
    }
    expect(readdirSync(dir).filter((n) => n.startsWith('state.json.corrupt.'))).toHaveLength(2);
    expect(readFileSync(join(dir, 'target'), 'utf8')).toBe('keep');
  });
});
