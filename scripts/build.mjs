// Builds dist/: the CLI and the library as ESM bundles (one esbuild run, shared chunks, each CLI
// command in its own lazily loaded chunk), plus .d.ts files from tsc. `npm pack` runs it
// (prepack), so a package packed from a fresh clone has its dist/.
//
// What the bundle leaves outside decides package.json's `dependencies`: there are none. commander,
// croner, pg, zod and prom-client are bundled (devDependencies), and the published declarations
// import none of them (the config's types are in src/config/types.ts, the database client's in
// src/pg/connect.ts); durable writes are our own (src/state/durable.ts). test/e2e/pack.test.ts
// installs the packed tarball into fresh ESM and CommonJS projects, runs them and type-checks
// them with skipLibCheck off, which catches a dependency or a type missing from the package.
import { build } from 'esbuild';
import { copyFileSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { execFileSync } from 'node:child_process';

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
rmSync('dist', { recursive: true, force: true });
const common = {
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  minifySyntax: true,
  define: { __ROUTINELY_VERSION__: JSON.stringify(pkg.version) },
  // commander and pg are CommonJS: give the ESM bundle require() and __filename.
  banner: {
    js: [
      "import { createRequire as __routinelyRequire } from 'node:module';",
      "import { fileURLToPath as __routinelyPath } from 'node:url';",
      'const require = __routinelyRequire(import.meta.url);',
      'const __filename = __routinelyPath(import.meta.url);',
    ].join(' '),
  },
  logLevel: 'warning',
};
// The library and the CLI's commands: shared chunks, each command in its own lazily loaded chunk.
await build({
  ...common,
  entryPoints: { index: 'src/index.ts', 'cli-program': 'src/cli/program.ts' },
  outdir: 'dist',
  splitting: true,
  chunkNames: 'chunks/[name]-[hash]',
});
// The CLI's entry: one CommonJS file with the fast `routine list` and `validate` in it (measured:
// loading a dozen ESM chunks and the ESM facades of six builtins cost it more than its own work);
// the fast `lock run` / `lock status` in a second one (cli-lock.cjs: it spawns, and loading
// node:child_process costs every other command 3.5 ms); every other command it imports from
// cli-program.js above.
const cjs = {
  ...common,
  outExtension: { '.js': '.cjs' },
  // small to parse: this file is compiled on every start
  minify: true,
  keepNames: false,
  outdir: 'dist',
  format: 'cjs',
  splitting: false,
  // CommonJS has require() and __filename; import.meta.url (createRequire) comes from the latter.
  define: { ...common.define, 'import.meta.url': '__routinelyUrl' },
  banner: { js: "const __routinelyUrl = require('node:url').pathToFileURL(__filename).href;" },
};
await build({ ...cjs, entryPoints: { 'cli-lock': 'src/cli/fast-lock.ts' } });
await build({
  ...cjs,
  entryPoints: { cli: 'src/cli/main.ts' },
  plugins: [
    {
      name: 'program-outside',
      setup(b) {
        b.onResolve({ filter: /^\.\/program\.js$/ }, () => ({ path: './cli-program.js', external: true }));
      },
    },
  ],
});
// The library for require() too (SPEC §8): one CommonJS file, its dynamic imports inlined.
await build({ ...cjs, minify: false, entryPoints: { index: 'src/index.ts' } });
execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.json', '--emitDeclarationOnly'], { stdio: 'inherit' });
// Only the declarations index.d.ts reaches are shipped: tsc writes one per source file, and the
// others (the config's zod shapes, croner's wrapper) import packages the package does not have.
const reached = new Set();
const walk = (file) => {
  if (reached.has(file)) return;
  reached.add(file);
  for (const m of readFileSync(file, 'utf8').matchAll(/(?:from|import\()\s*['"](\.{1,2}\/[^'"]+)\.js['"]/g)) {
    walk(join(dirname(file), `${m[1]}.d.ts`));
  }
};
walk(join('dist', 'index.d.ts'));
for (const file of readdirSync('dist', { recursive: true })) {
  const path = join('dist', file);
  if (path.endsWith('.d.ts') && !reached.has(path)) rmSync(path);
}
for (const dir of readdirSync('dist', { recursive: true }).map((f) => join('dist', f)).reverse()) {
  if (statSync(dir).isDirectory() && readdirSync(dir).length === 0) rmSync(dir, { recursive: true });
}
// The same declarations for require(): TypeScript reads a .d.cts as CommonJS.
copyFileSync('dist/index.d.ts', 'dist/index.d.cts');
