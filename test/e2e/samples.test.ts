// Samples are tests (SPEC §8): every TypeScript and JavaScript block of README.md and docs/*.md
// is compiled against the packed package (test/helpers/package.ts) the way a user's project sees
// it (strict, NodeNext, skipLibCheck off, nothing but @types/node beside it), then run in a
// project with a config. A block fenced as ```ts no-run is compiled only.

import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { childEnv } from '../helpers/cli.js';
import { packedPackage, userProjectWith } from '../helpers/package.js';
import { testdir } from '../helpers/testdir.js';

const ROOT = resolve(import.meta.dirname, '../..');

interface Sample {
  where: string;
  lang: string;
  run: boolean;
  code: string;
}

function samples(): Sample[] {
  const files = [
    'README.md',
    ...readdirSync(join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];
  const out: Sample[] = [];
  for (const f of files) {
    const text = readFileSync(join(ROOT, f), 'utf8');
    for (const m of text.matchAll(/^```(ts|typescript|js|javascript|mjs)(?!\w)([^\n]*)\n([\s\S]*?)^```$/gm)) {
      const line = text.slice(0, m.index).split('\n').length;
      out.push({ where: `${f}:${line}`, lang: m[1]!, run: !/\bno-run\b/.test(m[2]!), code: m[3]! });
    }
  }
  return out;
}

/** A user's project with the package installed from its tarball (made once per run) and
 * @types/node. */
async function userProject(): Promise<string> {
  const dir = testdir('routinely-samples-');
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'samples', private: true, type: 'module' }));
  userProjectWith(await packedPackage(ROOT), dir, ROOT);
  writeFileSync(join(dir, 'routinely.json'), '{}');
  return dir;
}

describe('the samples in the docs', () => {
  const all = samples();

  it("there are samples to check (the README's library use at least)", () => {
    expect(all.filter((s) => s.where.startsWith('README.md')).length).toBeGreaterThan(0);
  });

  it(
    'each compiles with strict TypeScript against the package as installed, and the runnable ones run',
    { timeout: 900_000 },
    async () => {
      const dir = await userProject();
      const names = all.map((s, i) => {
        const name = `sample-${i}.${s.lang.startsWith('t') ? 'mts' : 'mjs'}`;
        // an ES module either way: a sample that declares nothing still may use top-level await
        writeFileSync(join(dir, name), `${s.code}\nexport {};\n`);
        return name;
      });
      writeFileSync(
        join(dir, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            strict: true,
            module: 'NodeNext',
            moduleResolution: 'NodeNext',
            target: 'ES2022',
            outDir: 'out',
            skipLibCheck: false,
            allowJs: true,
            checkJs: true,
            types: ['node'],
          },
          files: names,
        }),
      );
      const tsc = spawnSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', '.'], {
        cwd: dir,
        encoding: 'utf8',
      });
      const where = (out: string): string =>
        out.replace(/sample-(\d+)\.m[tj]s/g, (_, i: string) => all[Number(i)]!.where);
      expect(where(tsc.stdout + tsc.stderr)).toBe('');
      for (const [i, s] of all.entries()) {
        if (!s.run) continue;
        const r = spawnSync(process.execPath, [join('out', names[i]!.replace(/\.mts$/, '.mjs'))], {
          cwd: dir,
          encoding: 'utf8',
          env: childEnv(),
          timeout: 60_000,
        });
        expect(r.status, `${s.where}: ${r.stderr}`).toBe(0);
      }
    },
  );

  it(
    'the README sample holds the lock while its command runs, and reads the status after',
    { timeout: 900_000 },
    async () => {
      const dir = await userProject();
      const readme = all.find((s) => s.where.startsWith('README.md') && s.code.includes('withProjectLock'))!;
      writeFileSync(join(dir, 'readme.mts'), readme.code);
      writeFileSync(
        join(dir, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            strict: true,
            module: 'NodeNext',
            moduleResolution: 'NodeNext',
            target: 'ES2022',
            outDir: 'out',
            types: ['node'],
          },
          files: ['readme.mts'],
        }),
      );
      expect(
        spawnSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', '.'], {
          cwd: dir,
          encoding: 'utf8',
        }).status,
      ).toBe(0);
      const r = spawnSync(process.execPath, ['out/readme.mjs'], { cwd: dir, encoding: 'utf8', env: childEnv() });
      expect(r.stdout).toMatch(/^migrating with fence \d+\nexit 0\nfree \n$/);
    },
  );
});
