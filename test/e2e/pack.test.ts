// The package as users get it: `npm pack` of a fresh clone (prepack builds dist/), installed from
// the tarball into a new project (made once per run: test/helpers/package.ts), then `npx routinely
// init`, `validate`, `exec run` and `scheduler start`. Dependencies come from the npm registry or
// the local npm cache.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { stripJsonComments } from '../../src/config/load.js';
import { npmEnv, packedPackage } from '../helpers/package.js';

const ROOT = resolve(import.meta.dirname, '../..');

interface Done {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function started(
  cmd: string,
  args: string[],
  cwd: string,
  timeoutMs: number,
  detached = false,
): { child: ChildProcess; out: () => string; done: Promise<Done> } {
  const child = spawn(cmd, args, { cwd, env: npmEnv(), stdio: ['ignore', 'pipe', 'pipe'], detached });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const kill = (): void => {
    try {
      if (detached) process.kill(-child.pid!, 'SIGKILL');
      else child.kill('SIGKILL');
    } catch {
      // already gone
    }
  };
  const timer = setTimeout(kill, timeoutMs);
  const done = new Promise<Done>((res) =>
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      res({ code, signal, stdout, stderr });
    }),
  );
  let finished = false;
  void done.then(() => (finished = true));
  onTestFinished(() => {
    if (!finished) kill();
  });
  return { child, out: () => stdout + stderr, done };
}

const run = (cmd: string, args: string[], cwd: string, timeoutMs = 180_000): Promise<Done> =>
  started(cmd, args, cwd, timeoutMs).done;

/** Resolves when the output matches; rejects when the process ends first or after `limitMs`. */
async function waitFor(p: ReturnType<typeof started>, pattern: RegExp, limitMs = 120_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  let ended = false;
  void p.done.then(() => (ended = true));
  while (!pattern.test(p.out())) {
    if (ended || Date.now() > deadline) throw new Error(`no ${pattern} in: ${p.out()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('the packed package', () => {
  it(
    'npm pack builds dist/; installed from the tarball, npx routinely init, validate, exec run and scheduler start work',
    { timeout: 900_000 },
    async () => {
      const made = await packedPackage(ROOT);
      const { clone } = made;
      expect(made.distBefore).toBe(false);
      // a fresh `npm ci` warns of every package with an install script that allowScripts does not
      // cover: each one in the lockfile (esbuild) is covered
      const lock = JSON.parse(readFileSync(join(clone, 'package-lock.json'), 'utf8')) as {
        packages: Record<string, { hasInstallScript?: boolean }>;
      };
      const withScripts = Object.entries(lock.packages)
        .filter(([, p]) => p.hasInstallScript)
        .map(([path]) => path.replace(/^.*node_modules\//, ''));
      expect(withScripts).toEqual(['esbuild']);
      const allowed =
        (JSON.parse(readFileSync(join(clone, 'package.json'), 'utf8')) as { allowScripts?: Record<string, boolean> })
          .allowScripts ?? {};
      expect(withScripts.filter((name) => allowed[name] !== true)).toEqual([]);
      const pack = made.pack;
      expect(pack.code, pack.stderr).toBe(0);
      const [info] = JSON.parse(pack.stdout.slice(pack.stdout.indexOf('['))) as {
        filename: string;
        files: { path: string }[];
      }[];
      const packed = info!.files.map((f) => f.path);
      expect(packed).toEqual(
        expect.arrayContaining([
          'dist/cli.cjs',
          'dist/cli-program.cjs',
          'dist/index.js',
          'dist/index.cjs',
          'dist/index.d.ts',
          'dist/index.d.cts',
          'dist/vendor/zod-mini.cjs',
          'config/routinely.schema.json',
          'package.json',
          'README.md',
          'LICENSE',
          // the README's links resolve in the installed package (it has no repository to link to)
          'docs/http.md',
          'docs/lock.md',
          'docs/status-page.png',
          'examples/systemd/routinely-scheduler.service',
          'examples/prometheus/alerts.yml',
        ]),
      );
      expect(packed.filter((p) => p.startsWith('src/') || p.startsWith('test/') || p.startsWith('bench/'))).toEqual([]);
      // every declaration shipped imports only the package's own files and node's: none names a
      // package that is not installed with it (tsc emits one per source file; the unreachable are left out)
      const declarations = packed.filter((p) => p.endsWith('.d.ts') || p.endsWith('.d.cts'));
      expect(declarations.length).toBeGreaterThan(10);
      const foreign = declarations.flatMap((p) =>
        [...readFileSync(join(clone, p), 'utf8').matchAll(/(?:from|import\()\s*['"]([^'"]+)['"]/g)]
          .map((m) => m[1]!)
          .filter((spec) => !spec.startsWith('.') && !spec.startsWith('node:'))
          .map((spec) => `${p}: ${spec}`),
      );
      expect(foreign).toEqual([]);
      // a .d.cts (read as CommonJS) reaches only .d.cts files: never an ES-module declaration
      const cts = declarations.filter((p) => p.endsWith('.d.cts'));
      expect(cts).toContain('dist/lock/lease.d.cts');
      expect(
        cts.flatMap((p) =>
          [...readFileSync(join(clone, p), 'utf8').matchAll(/(?:from|import\()\s*['"](\.[^'"]+)['"]/g)]
            .map((m) => m[1]!)
            .filter((spec) => !spec.endsWith('.cjs'))
            .map((spec) => `${p}: ${spec}`),
        ),
      ).toEqual([]);
      expect(declarations).not.toContain('dist/config/schema.d.ts');
      const readmeLinks = [
        ...readFileSync(join(ROOT, 'README.md'), 'utf8').matchAll(/\]\(((?:docs|examples)\/[^)#\s]+)/g),
      ].map((m) => m[1]!);
      expect(readmeLinks.length).toBeGreaterThan(3);
      // the docs stand alone: no citation of a file the package does not have
      const cites = packed
        .filter((p) => p.endsWith('.md'))
        .flatMap((p) =>
          readFileSync(join(clone, p), 'utf8')
            .split('\n')
            .map((l, i) => [p, i + 1, l] as const),
        )
        .filter(([, , l]) => /SPEC\b/.test(l))
        .map(([p, n]) => `${p}:${n}`);
      expect(cites).toEqual([]);
      expect(
        readmeLinks.filter((l) => !packed.includes(l) && !packed.some((p) => p.startsWith(`${l.replace(/\/$/, '')}/`))),
      ).toEqual([]);

      const project = made.project;
      const install = made.install!;
      expect(made.tarball).toBe(join(dirname(made.tarball!), info!.filename));
      expect(install.code, install.stderr).toBe(0);

      // everything it needs is in its bundles: nothing else is installed with it
      expect(readdirSync(join(project, 'node_modules')).filter((n) => !n.startsWith('.'))).toEqual(['routinely']);
      expect(install.stderr).not.toMatch(/install-scripts/);

      // each bundled dependency is in the package once (the CLI's program and the library share it)
      const code = packed.filter((p) => /\.(c?js)$/.test(p));
      const holding = (text: string): string[] =>
        code.filter((p) => readFileSync(join(clone, p), 'utf8').includes(text));
      expect(holding('$ZodError')).toEqual(['dist/vendor/zod-mini.cjs']);
      expect(holding('CronPattern: Syntax error')).toEqual(['dist/vendor/croner.cjs']);
      expect(holding('SASL channel binding')).toEqual(['dist/vendor/pg.cjs']);
      expect(holding('commander.unknownOption')).toHaveLength(1);
      expect(holding('Invalid metric name')).toHaveLength(1);

      // a CommonJS project (npm init's default) and an ES module both load it, and take the lock
      writeFileSync(
        join(project, 'use.cjs'),
        "const r = require('routinely'); r.withProjectLock({ ifBusy: 'fail' }, async (lease) => lease.generation).then((x) => console.log('cjs', x.ok, typeof x.value, require('routinely/package.json').name));\n",
      );
      // require() and import in one process get one implementation: the same functions and classes
      writeFileSync(
        join(project, 'use.mjs'),
        "import { createRequire } from 'node:module';\nimport * as esm from 'routinely';\nconst cjs = createRequire(import.meta.url)('routinely');\nconst x = await esm.withProjectLock({ ifBusy: 'fail' }, async (lease) => lease.generation);\nconsole.log('esm', x.ok, typeof x.value, cjs.withProjectLock === esm.withProjectLock && cjs.ConfigError === esm.ConfigError && cjs.ExitCode === esm.ExitCode);\n",
      );
      writeFileSync(join(project, 'routinely.json'), '{}');
      expect(await run(process.execPath, ['use.cjs'], project)).toMatchObject({
        code: 0,
        stdout: 'cjs true number routinely\n',
      });
      expect(await run(process.execPath, ['use.mjs'], project)).toMatchObject({
        code: 0,
        stdout: 'esm true number true\n',
      });
      // its types are self-contained: strict TypeScript with skipLibCheck off and only @types/node,
      // on TypeScript 5.4 and 5.9, as a CommonJS project under node16 (TypeScript's advice for Node;
      // nothing it reads may be an ES-module declaration: TS1479), an ES module under node16, and a
      // project for a bundler. The node16 ones are compiled and run.
      mkdirSync(join(project, 'node_modules', '@types'));
      symlinkSync(join(ROOT, 'node_modules', '@types', 'node'), join(project, 'node_modules', '@types', 'node'));
      const body =
        "const r: WithLockResult<number> = await withProjectLock({ ifBusy: 'wait', waitTimeoutMs: 1000 }, async (lease) => lease.generation);\nconst failed: RoutinelyError | null = r.ok ? null : new ConfigError('x', []);\nconsole.log(r.ok, failed === null, ExitCode.BUSY);\n";
      const imports =
        "import { withProjectLock, ExitCode, ConfigError, type RoutinelyError, type WithLockResult } from 'routinely';\n";
      const consumers = [
        {
          name: 'cjs-node16',
          type: undefined,
          module: 'node16',
          resolution: 'node16',
          source: `${imports}async function main(): Promise<void> {\n${body}}\nvoid main();\n`,
          runs: true,
        },
        {
          name: 'esm-node16',
          type: 'module',
          module: 'node16',
          resolution: 'node16',
          source: `${imports}${body}`,
          runs: true,
        },
        {
          name: 'esm-bundler',
          type: 'module',
          module: 'esnext',
          resolution: 'bundler',
          source: `${imports}${body}`,
          runs: false,
        },
      ];
      for (const c of consumers) {
        const dir = join(project, c.name);
        mkdirSync(dir);
        writeFileSync(
          join(dir, 'package.json'),
          JSON.stringify({ name: c.name, private: true, ...(c.type ? { type: c.type } : {}) }),
        );
        writeFileSync(join(dir, 'index.ts'), c.source);
        writeFileSync(join(dir, 'routinely.json'), '{}');
        writeFileSync(
          join(dir, 'tsconfig.json'),
          JSON.stringify({
            compilerOptions: {
              strict: true,
              module: c.module,
              moduleResolution: c.resolution,
              target: 'ES2022',
              outDir: 'out',
              skipLibCheck: false,
              types: ['node'],
            },
            files: ['index.ts'],
          }),
        );
        for (const ts of ['typescript-5.4', 'typescript']) {
          const tsc = await run(
            process.execPath,
            [join(ROOT, 'node_modules', ts, 'bin', 'tsc'), '-p', '.'],
            dir,
            300_000,
          );
          expect(`${c.name} on ${ts}: ${tsc.stdout}${tsc.stderr}`).toBe(`${c.name} on ${ts}: `);
          expect(tsc.code).toBe(0);
        }
        if (c.runs)
          expect(await run(process.execPath, ['out/index.js'], dir)).toMatchObject({
            code: 0,
            stdout: 'true true 75\n',
          });
      }
      expect(readFileSync(join(ROOT, 'node_modules', 'typescript-5.4', 'package.json'), 'utf8')).toMatch(
        /"version": "5\.4\./,
      );
      rmSync(join(project, 'routinely.json'));

      // --no: never fetch a package named routinely from the registry; use the installed one
      const init = await run('npx', ['--no', 'routinely', 'init'], project);
      expect(init.code, init.stderr).toBe(0);
      // under npx, node_modules/.bin is on PATH only while npx runs: the hint says npx
      expect(init.stdout).toContain('next: npx routinely validate, then npx routinely scheduler start');
      expect(readFileSync(join(project, '.gitignore'), 'utf8')).not.toMatch(/SPEC/);
      const schema = (
        JSON.parse(stripJsonComments(readFileSync(join(project, 'routinely.json'), 'utf8'))) as { $schema: string }
      ).$schema;
      expect(schema).toBe('./node_modules/routinely/config/routinely.schema.json');
      expect(existsSync(join(project, schema))).toBe(true);

      const validate = await run('npx', ['--no', 'routinely', 'validate'], project);
      expect(validate.code, validate.stderr).toBe(0);
      expect(validate.stdout).toMatch(/^routinely\.json: valid \(3 routines, 2 inline tasks\)/);

      // takes the lock and writes state: the run-time dependencies outside the bundle load
      const exec = await run('npx', ['--no', 'routinely', 'exec', 'run'], project);
      expect(exec.code, exec.stderr).toBe(0);
      expect(exec.stdout).toMatch(/SUCCEEDED: 2 succeeded/);

      // npm runs the bin through `sh -c`, which does not pass SIGTERM on: signal the process group,
      // as a terminal (Ctrl-C) or systemd (KillMode=control-group) does.
      const viaNpx = started('npx', ['--no', 'routinely', 'scheduler', 'start'], project, 300_000, true);
      await waitFor(viaNpx, /\[scheduler\] started \(3 routines\)/);
      process.kill(-viaNpx.child.pid!, 'SIGTERM');
      await viaNpx.done;
      expect(viaNpx.out()).toMatch(/\[scheduler\] stopping\n.*\[scheduler\] stopped\n/);

      // SIGTERM to npx alone, as `docker stop` or a supervisor sends it: npx's shell (dash) dies and
      // the scheduler would be left to PID 1; it sees npx go and stops, its lock free
      const npxOnly = started('npx', ['--no', 'routinely', 'scheduler', 'start'], project, 300_000);
      await waitFor(npxOnly, /\[scheduler\] started \(3 routines\)/);
      npxOnly.child.kill('SIGTERM');
      await npxOnly.done;
      const deadline = Date.now() + 20_000;
      let status = await run(join(project, 'node_modules', '.bin', 'routinely'), ['scheduler', 'status'], project);
      while (status.code !== 3 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 200));
        status = await run(join(project, 'node_modules', '.bin', 'routinely'), ['scheduler', 'status'], project);
      }
      expect(status.stdout).toMatch(/not running/);
      expect(status.code).toBe(3);

      // the installed bin itself: SIGTERM, exit 0
      const direct = started(
        join(project, 'node_modules', '.bin', 'routinely'),
        ['scheduler', 'start'],
        project,
        300_000,
      );
      await waitFor(direct, /\[scheduler\] started \(3 routines\)/);
      direct.child.kill('SIGTERM');
      const stopped = await direct.done;
      expect(stopped.code, stopped.stderr).toBe(0);
      expect(stopped.stdout).toMatch(/\[scheduler\] stopped\n$/);
    },
  );
});
