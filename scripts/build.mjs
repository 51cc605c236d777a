// Builds dist/: the bundled dependencies once each (dist/vendor/), the CLI (CommonJS files, each
// compiled from a V8 code cache: the entry, the lock commands, the program), the library (one CommonJS
// implementation with an ESM face), plus .d.ts and .d.cts files from tsc. `npm pack` runs it
// (prepack), so a package packed from a fresh clone has its dist/.
//
// What the bundle leaves outside decides package.json's `dependencies`: there are none. commander,
// croner, pg, zod and prom-client are bundled (devDependencies), and the published declarations
// import none of them (the config's types are in src/config/types.ts, the database client's in
// src/pg/connect.ts); durable writes are our own (src/fs/durable.ts). test/e2e/pack.test.ts
// installs the packed tarball into fresh ESM and CommonJS projects, runs them and type-checks
// them with skipLibCheck off, which catches a dependency or a type missing from the package.
import { build } from 'esbuild';
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { execFileSync } from 'node:child_process';

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
rmSync('dist', { recursive: true, force: true });
const common = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  minifySyntax: true,
  define: { __ROUTINELY_VERSION__: JSON.stringify(pkg.version) },
  logLevel: 'warning',
};
// The bundled dependencies, each once (SPEC §8): one CommonJS file per package in dist/vendor/,
// which the CLI's program (dist/cli-program.cjs) and the library (dist/index.cjs) both load as
// `./vendor/x.cjs`. Relative paths, so dist/ works on its own.
const VENDOR = { 'zod/mini': 'zod-mini', croner: 'croner', pg: 'pg' };
// Of zod only what src/ uses (`z.object`, …): `export *` would keep all of it (430 KB).
const zodNames = new Set();
const zodModule = await import('zod/mini');
for (const file of readdirSync('src', { recursive: true })) {
  if (!file.endsWith('.ts')) continue;
  const text = readFileSync(join('src', file), 'utf8');
  if (text.includes("from 'zod/mini'")) for (const m of text.matchAll(/\bz\.([A-Za-z_$][\w$]*)/g)) zodNames.add(m[1]);
}
zodNames.delete('core'); // z.core.$ZodError is a type here; the value is all of zod
const vendorSource = {
  // (z.infer and the like are types: only names the module has at run time)
  'zod/mini': `export { ${[...zodNames]
    .filter((n) => n in zodModule)
    .sort()
    .join(', ')} } from 'zod/mini';`,
  croner: "export * from 'croner';",
  pg: "module.exports = require('pg');",
};
for (const [pkgName, file] of Object.entries(VENDOR)) {
  await build({
    ...common,
    format: 'cjs',
    minify: true,
    outfile: `dist/vendor/${file}.cjs`,
    // esbuild annotates the names for Node's CommonJS export detection (import { Cron } works)
    stdin: { contents: vendorSource[pkgName], resolveDir: '.', loader: 'js' },
  });
}
// Loaded with require() (an ES module that imports a CommonJS file by name makes Node lex the file
// for its exports first; measured: 10 ms of a `validate`, a quarter of its start-up).
const vendored = (fromDir) => ({
  name: 'vendored',
  setup(b) {
    b.onResolve({ filter: /^(zod\/mini|croner|pg)$/ }, (a) => ({ path: VENDOR[a.path], namespace: 'vendor' }));
    b.onLoad({ filter: /.*/, namespace: 'vendor' }, (a) => ({
      contents: `module.exports = require('${fromDir}/vendor/${a.path}.cjs');`,
      loader: 'js',
      resolveDir: '.',
    }));
    b.onResolve({ filter: /\/vendor\/[\w-]+\.cjs$/ }, (a) => ({ path: a.path, external: true }));
  },
});
// The CLI's entry: one CommonJS file with the `routine list` and `validate` commands in it, which
// answer there from the validated config's cache (measured: loading the program costs them more
// than their own work); the `lock run` / `lock status` commands in a second one (cli-lock.cjs:
// they spawn, and loading node:child_process costs every other command 3.5 ms); commander and
// every other command in the program, cli-program.cjs below (where the same commands are built
// again, with the validating sources they are handed).
const cjs = {
  ...common,
  outExtension: { '.js': '.cjs' },
  // small to parse: this file is compiled on every start (ROUTINELY_BUILD_NAMES=1 keeps the names, for
  // a CPU profile that says which function)
  minify: !process.env.ROUTINELY_BUILD_NAMES,
  keepNames: false,
  outdir: 'dist',
  format: 'cjs',
  splitting: false,
  // CommonJS has require() and __filename; import.meta.url (createRequire) comes from the latter.
  define: { ...common.define, 'import.meta.url': '__routinelyUrl' },
  // strict, as the ES modules they are built from (a directive counts only as the first statement)
  banner: { js: "'use strict';\nconst __routinelyUrl = require('node:url').pathToFileURL(__filename).href;" },
};
await build({ ...cjs, entryPoints: { 'cli-lock': 'src/cli/lock-commands.ts' } });
// The full path's program (commander and every command): one CommonJS file, compiled with its
// code cache like the entry (measured: `exec run` of one task 87 → 57 ms CPU against ESM chunks,
// which Node.js 20 compiles from source at every start, behind its ESM loader). Each command's
// modules still run only when the command is chosen: esbuild turns an import() of our own module
// into a lazily run function. An import() left in it would fail (a script compiled with a code
// cache has no module loader): the build refuses one.
// Its names are kept (not minified, as the chunks were not): the status page inlines the source
// of a few functions by name (src/http/page-script.ts), and a stack trace names the function.
await build({
  ...cjs,
  minify: false,
  minifyWhitespace: !process.env.ROUTINELY_BUILD_NAMES,
  plugins: [vendored('.')],
  entryPoints: { 'cli-program': 'src/cli/program.ts' },
});
const programText = readFileSync('dist/cli-program.cjs', 'utf8');
const leftImport = /\bimport\((?!\))/.exec(programText);
if (leftImport) {
  throw new Error(
    `dist/cli-program.cjs keeps an import() (${programText.slice(leftImport.index, leftImport.index + 60)}): use createRequire`,
  );
}
const programOutside = {
  name: 'program-outside',
  setup(b) {
    b.onResolve({ filter: /^\.\/program\.js$/ }, () => ({ path: './cli-program.cjs', external: true }));
  },
};
// the executable (bin.ts) compiles the entry (main.ts, as cli-main.cjs) with the code cache made
// at the end, and imports the program for it
await build({ ...cjs, entryPoints: { cli: 'src/cli/bin.ts' }, plugins: [programOutside] });
await build({ ...cjs, entryPoints: { 'cli-main': 'src/cli/main.ts' }, plugins: [programOutside] });
// The library (SPEC §8): one implementation for require() and import, so a process that does both
// has one copy of every class and lock (no dual-package hazard). index.cjs is it, its dynamic
// imports inlined; index.js is an ES module that re-exports index.cjs by name.
await build({ ...cjs, minify: false, plugins: [vendored('.')], entryPoints: { index: 'src/index.ts' } });
// The file lock below the public API, for the test fixtures and benchmarks (not in the exports).
await build({
  ...cjs,
  minify: false,
  minifyWhitespace: !process.env.ROUTINELY_BUILD_NAMES,
  plugins: [vendored('.')],
  entryPoints: { 'lock-internals': 'src/lock-internals.ts' },
});
const names = Object.keys(createRequire(import.meta.url)(resolve('dist/index.cjs')))
  .filter((n) => n !== 'default')
  .sort();
writeFileSync(
  'dist/index.js',
  // through require(), not `import lib from './index.cjs'`: importing a CommonJS file makes Node
  // lex all of it for export names first (measured: 40 ms of a 90 ms start)
  `// The same implementation as require('routinely'): dist/index.cjs.\nimport { createRequire } from 'node:module';\nconst lib = createRequire(import.meta.url)('./index.cjs');\n${names.map((n) => `export const ${n} = lib.${n};`).join('\n')}\n`,
);
execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.json', '--emitDeclarationOnly'], {
  stdio: 'inherit',
});
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
for (const dir of readdirSync('dist', { recursive: true })
  .map((f) => join('dist', f))
  .reverse()) {
  if (statSync(dir).isDirectory() && readdirSync(dir).length === 0) rmSync(dir, { recursive: true });
}
// The same declarations for require(): a .d.cts beside every .d.ts, importing its siblings as
// `./x.cjs` (TypeScript reads a .d.cts as CommonJS and maps ./x.cjs to ./x.d.cts), so a CommonJS
// consumer under node16/nodenext never reaches an ES-module declaration (TS1479).
for (const path of reached) {
  const text = readFileSync(path, 'utf8').replace(/((?:from|import\()\s*['"]\.{1,2}\/[^'"]+)\.js(['"])/g, '$1.cjs$2');
  writeFileSync(path.replace(/\.d\.ts$/, '.d.cts'), text);
}
// The entry's V8 code cache, for dist/cli.cjs to compile it with (scripts/code-cache.mjs).
execFileSync(process.execPath, ['scripts/code-cache.mjs'], { stdio: 'inherit' });
