// Builds dist/: the CLI and the library as ESM bundles (one esbuild run, shared chunks, each CLI
// command in its own lazily loaded chunk), plus .d.ts files from tsc. `npm pack` runs it
// (prepack), so a package packed from a fresh clone has its dist/.
//
// What the bundle leaves outside decides package.json's `dependencies`: commander, croner and pg
// are bundled (devDependencies); zod's types are imported by the published .d.ts files (Config,
// the schemas), so it is a dependency (durable writes are our own, src/state/durable.ts, not
// write-file-atomic). test/e2e/pack.test.ts installs the packed tarball into a fresh project and
// runs it, which catches a dependency missing from that list.
import { build } from 'esbuild';
import { readFileSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
rmSync('dist', { recursive: true, force: true });
await build({
  entryPoints: { cli: 'src/cli/main.ts', index: 'src/index.ts' },
  outdir: 'dist',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  minifySyntax: true,
  chunkNames: 'chunks/[name]-[hash]',
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
});
execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.json', '--emitDeclarationOnly'], { stdio: 'inherit' });
